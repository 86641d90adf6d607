"""Convert between (row, column) locations and string offsets of a text."""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from typing import List

from torchlint.diagnostics import Location


_LINE_END = re.compile(r"\r\n?|\n")


class Locator:
    def __init__(self, text: str) -> None:
        self.text = text
        # Lines end at \n, \r\n or a lone \r, as Python's tokenizer and libcst see them. One
        # pass either way (searching for the next \r from every line rescans a file without any).
        if "\r" in text:
            starts = [0]
            starts.extend(match.end() for match in _LINE_END.finditer(text))
        else:
            starts = list(accumulate((len(line) + 1 for line in text.split("\n")), initial=0))
            starts.pop()  # the offset after the last line, which has no line ending
        self.line_starts: List[int] = starts

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
