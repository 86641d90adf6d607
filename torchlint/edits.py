"""Apply positioned ``Edit``s to a text. The fixer (``fixer.py``) builds on this."""

from __future__ import annotations

from typing import Iterable, List, Sequence, Tuple

from torchlint.diagnostics import Edit
from torchlint.locator import Locator


class OverlappingEdits(ValueError):
    pass


def edit_offsets(locator: Locator, edits: Iterable[Edit]) -> List[Tuple[int, int, str]]:
    return sorted((locator.offset(e.location), locator.offset(e.end_location), e.content) for e in edits)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with every edit applied; raises OverlappingEdits if two edits overlap."""
    spans = edit_offsets(Locator(text), edits)
    out: List[str] = []
    cursor = 0
    for start, end, content in spans:
        if start < cursor:
            raise OverlappingEdits(f"edit at offset {start} overlaps an earlier edit ending at {cursor}")
        out.append(text[cursor:start])
        out.append(content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
