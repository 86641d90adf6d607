"""reviewdog's Diagnostic Format (``rdjson``; ``reviewdog -f=rdjson``): one ``DiagnosticResult``
with a ``Diagnostic`` per finding, its range, code and documentation URL, and the fix's edits
as ``suggestions`` when ``--fix`` would apply it (safe fixes; unsafe ones with
``--unsafe-fixes``). Per reviewdog.proto, lines and columns start at 1, columns count UTF-8
bytes and a range's end is exclusive: torchlint's columns count characters, so they are
converted with the file's text.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from torchlint.diagnostics import SAFE, UNSAFE, Diagnostic, Location
from torchlint.reporters.base import dumps, file_ranges, is_error
from torchlint.source import split_lines

SOURCE = {"name": "torchlint", "url": "https://github.com/torchlint/torchlint"}


def byte_column(lines: Optional[Sequence[str]], loc: Location) -> int:
    """The 1-based UTF-8 byte column of ``loc`` (its character column when the text is unknown)."""
    if not lines or not 0 < loc.row <= len(lines):
        return loc.column
    return len(lines[loc.row - 1][: loc.column - 1].encode("utf-8", "surrogatepass")) + 1


def position(lines, loc: Location) -> dict:
    return {"line": loc.row, "column": byte_column(lines, loc)}


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ranges = file_ranges(diagnostics, context)
    lines_of = {}
    out = []
    for d in diagnostics:
        if d.path not in lines_of:
            text = context.sources.get(d.path) if hasattr(context.sources, "get") else None
            lines_of[d.path] = split_lines(text) if text else None  # rows as CPython counts them
        lines = lines_of[d.path]
        start, end = ranges[id(d)]
        item: Dict[str, Any] = {
            "message": d.message,
            "location": {
                "path": d.path.replace("\\", "/"),
                "range": {"start": position(lines, start), "end": position(lines, end)},
            },
            "severity": "ERROR" if is_error(d.code) else "WARNING",
            "code": {"value": d.code, "url": d.url},
        }
        fix = d.fix
        if fix is not None and d.cell is None and (
            fix.applicability == SAFE or (context.unsafe_fixes and fix.applicability == UNSAFE)
        ):
            item["suggestions"] = [
                {"range": {"start": position(lines, e.location), "end": position(lines, e.end_location)}, "text": e.content}
                for e in fix.edits
            ]
        out.append(item)
    return dumps({"source": SOURCE, "severity": "WARNING", "diagnostics": out}, indent=2) + "\n"
