"""Stage 7 of the pipeline: drop findings suppressed by ``# noqa`` comments."""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterable, List, Optional

from torchlint.deprecations import TORCHFIX_CODES
from torchlint.diagnostics import Diagnostic
from torchlint.locator import Locator

_CODE = r"[A-Z]+[0-9]+"
_LINE_NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>" + _CODE + r"(?:[,\s]+" + _CODE + r")*))?", re.IGNORECASE
)
_FILE_NOQA = re.compile(
    r"^[ \t]*#[ \t]*torchlint[ \t]*:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>"
    + _CODE + r"(?:[,\s]+" + _CODE + r")*))?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)

ALL = None  # marker: every code is suppressed


def _codes(text: Optional[str]) -> Optional[FrozenSet[str]]:
    if not text:
        return ALL
    codes = frozenset(c.upper() for c in re.split(r"[,\s]+", text.strip()) if c)
    # TorchFix's codes keep working: `# noqa: TOR102` suppresses TL901 (torchlint/deprecations.py).
    return codes | {TORCHFIX_CODES[c] for c in codes if c in TORCHFIX_CODES}


def file_exemptions(text: str):
    """Codes exempted for the whole file: None (nothing), ``"ALL"``, or a frozenset."""
    if "torchlint" not in text:
        return None
    codes: set = set()
    for match in _FILE_NOQA.finditer(text):
        found = _codes(match.group("codes"))
        if found is ALL:
            return "ALL"
        codes |= found
    return frozenset(codes) if codes else None


def line_noqa(text: str, rows: Iterable[int]) -> Dict[int, Optional[FrozenSet[str]]]:
    """For each row asked about, the codes its ``# noqa`` covers (ALL for a bare one)."""
    locator = Locator(text)
    result: Dict[int, Optional[FrozenSet[str]]] = {}
    for row in rows:
        line = locator.line(row)
        if "noqa" not in line.lower():
            continue
        match = _LINE_NOQA.search(line)
        if match:
            result[row] = _codes(match.group("codes"))
    return result


def filter_suppressed(text: str, diagnostics: List[Diagnostic]) -> List[Diagnostic]:
    if not diagnostics:
        return diagnostics
    exempt = file_exemptions(text)
    if exempt == "ALL":
        return []
    if exempt:
        diagnostics = [d for d in diagnostics if d.code not in exempt]
    rows = {row for d in diagnostics for row in (d.noqa_rows or (d.location.row,))}
    noqa = line_noqa(text, rows)
    if not noqa:
        return diagnostics
    kept = []
    for d in diagnostics:
        suppressed = False
        for row in d.noqa_rows or (d.location.row,):
            if row in noqa and (noqa[row] is ALL or d.code in noqa[row]):
                suppressed = True
                break
        if not suppressed:
            kept.append(d)
    return kept
