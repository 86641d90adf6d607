"""Convert between (row, column) locations and string offsets of a text."""

from __future__ import annotations

import bisect
from typing import List

from torchlint.diagnostics import Location


class Locator:
    def __init__(self, text: str) -> None:
        self.text = text
        starts: List[int] = [0]
        i = 0
        # Lines end at \n, \r\n or a lone \r, as Python's tokenizer and libcst see them.
        while True:
            n = text.find("\n", i)
            r = text.find("\r", i)
            if n < 0 and r < 0:
                break
            if r >= 0 and (n < 0 or r < n):
                i = r + 2 if text.startswith("\r\n", r) else r + 1
            else:
                i = n + 1
            starts.append(i)
        self.line_starts = starts

    def offset(self, loc: Location) -> int:
        """Offset of ``loc``; rows past the end clamp to the end of the text."""
        if loc.row - 1 >= len(self.line_starts):
            return len(self.text)
        return min(self.line_starts[loc.row - 1] + loc.column - 1, len(self.text))

    def location(self, offset: int) -> Location:
        row = bisect.bisect_right(self.line_starts, offset)
        return Location(row, offset - self.line_starts[row - 1] + 1)

    def line(self, row: int) -> str:
        """Text of a 1-based row without its line ending."""
        if row < 1 or row > len(self.line_starts):
            return ""
        start = self.line_starts[row - 1]
        end = self.line_starts[row] if row < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    @property
    def line_count(self) -> int:
        return len(self.line_starts)
