"""``--statistics``: how many findings each rule produced and how many of them have a fix.

``fixable`` counts only the fixes ``--fix`` would apply with the flags given. A table for
people; with ``--output-format json`` a JSON list (``json-lines``: one object per
line) of ``{"code", "name", "count", "fixable"}``, most frequent first.
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence

from torchlint.diagnostics import SAFE, UNSAFE, Diagnostic

HEADER = ("count", "code", "name", "fixable")


def counts(diagnostics: Sequence[Diagnostic], unsafe_fixes: bool = False) -> List[dict]:
    """Rows per code. ``fixable`` counts the fixes ``--fix`` would apply with the same flags:
    safe ones, unsafe ones only with ``--unsafe-fixes`` (the ``fixable``/``unfixable`` and
    ``extend-(un)safe-fixes`` settings are applied to the diagnostics before they get here)."""
    rows: Dict[str, dict] = {}
    for d in diagnostics:
        row = rows.setdefault(d.code, {"code": d.code, "name": d.name, "count": 0, "fixable": 0})
        row["count"] += 1
        if d.fix is not None and (d.fix.applicability == SAFE or (unsafe_fixes and d.fix.applicability == UNSAFE)):
            row["fixable"] += 1
    return sorted(rows.values(), key=lambda r: (-r["count"], r["code"]))


def render_table(rows: List[dict]) -> str:
    if not rows:
        return ""
    cells = [HEADER] + [(str(r["count"]), r["code"], r["name"], str(r["fixable"])) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(HEADER))]
    lines = []
    for count, code, name, fixable in cells:
        lines.append(
            f"{count:>{widths[0]}}  {code:<{widths[1]}}  {name:<{widths[2]}}  {fixable:>{widths[3]}}"
        )
    return "\n".join(lines) + "\n"


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    rows = counts(diagnostics, getattr(context, "unsafe_fixes", False))
    fmt = getattr(context, "output_format", None)
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    if fmt == "json-lines":
        return "".join(json.dumps(row) + "\n" for row in rows)
    return render_table(rows)
