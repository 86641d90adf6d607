"""Form feeds in indentation, read as CPython reads them.

CPython's tokenizer resets a line's indentation count at a form feed (``\\f``): ``"\\f    x"``
is indented four columns, whatever stands before the form feed. libcst's tokenizer does not:
a form feed before the first line of an indented block is "no matching outer block for dedent"
(TL003 at 1:1, every other finding of the file lost), and elsewhere it parses but prints the
line back without the form feed, so that every position after it would be off.

``without_form_feeds`` gives the text that CPython sees the same way (what precedes the last
form feed of a line's leading whitespace removed: the same rows, the same program) and, per row,
how many characters went; ``shift_columns`` puts the findings made on that text back in the
file's columns. Only texts holding a form feed pay anything.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Sequence, Tuple

from torchlint.diagnostics import Diagnostic, Location

# A line's leading whitespace up to its last form feed; lines start after \n, \r\n or a lone \r.
_LEADING_FORM_FEED = re.compile(r"(?:^|(?<=\r))[ \t\f]*\f", re.MULTILINE)


def without_form_feeds(text: str) -> Tuple[str, Dict[int, int]]:
    """(text without the leading form feeds, {row: characters removed at its start}); the text
    itself and {} when no line's leading whitespace holds a form feed."""
    if "\f" not in text:
        return text, {}
    matches = list(_LEADING_FORM_FEED.finditer(text))
    if not matches:
        return text, {}
    from torchlint.locator import Locator

    locator = Locator(text)
    shifts: Dict[int, int] = {}
    out: List[str] = []
    cursor = 0
    for match in matches:
        shifts[locator.location(match.start()).row] = match.end() - match.start()
        out.append(text[cursor:match.start()])
        cursor = match.end()
    out.append(text[cursor:])
    return "".join(out), shifts


def _moved(loc: Location, shifts: Dict[int, int], keep_line_start: bool) -> Location:
    shift = shifts.get(loc.row)
    if not shift or (keep_line_start and loc.column == 1):
        return loc
    return Location(loc.row, loc.column + shift)


def shift_columns(diagnostics: Sequence[Diagnostic], shifts: Dict[int, int]) -> List[Diagnostic]:
    """Findings on ``without_form_feeds``'s text, in the columns of the text it was given. An
    edit or an end at the start of a line stays there (a whole-line edit takes the form feed
    with it; a span ending there ends with the line before)."""
    if not shifts:
        return list(diagnostics)
    out = []
    for d in diagnostics:
        fix = d.fix
        if fix is not None:
            fix = dataclasses.replace(fix, edits=tuple(
                dataclasses.replace(e, location=_moved(e.location, shifts, True),
                                    end_location=_moved(e.end_location, shifts, True))
                for e in fix.edits))
        out.append(dataclasses.replace(d, location=_moved(d.location, shifts, False),
                                       end_location=_moved(d.end_location, shifts, True), fix=fix))
    return out

