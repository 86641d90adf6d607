"""GitHub Actions workflow commands: one ``::warning`` annotation per finding (``::error`` for
files torchlint could not parse or read), shown inline on the pull request's diff.

Escaping follows ``@actions/core`` (``escapeData`` / ``escapeProperty`` in its command.ts).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from torchlint.diagnostics import Diagnostic, Location
from torchlint.reporters.paths import display_path
from torchlint.reporters.base import is_error, printable


#: Escaped by ``escape_data`` (``%0D``, ``%0A``): the runner turns them back into the characters.
LINE_ENDS = "\r\n"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def level(code: str) -> str:
    return "error" if is_error(code) else "warning"


def annotation(d: Diagnostic, root: str, file_range: Optional[Tuple[Location, Location]] = None) -> str:
    """One annotation. A finding in a notebook points at the line of the ``.ipynb`` file (its
    JSON) that holds the flagged code, ``file_range`` (GitHub shows notebooks' diffs as JSON);
    the title names the cell, row and column. Without the file's text, only the file."""
    title = f"torchlint ({d.code})"
    if d.cell is None:
        start, end = d.location, d.end_location
    else:
        start, end = file_range or (None, None)  # type: ignore[assignment]  # None: the whole file
        title += f" cell {d.cell}:{d.location.row}:{d.location.column}"
    properties = [("file", printable(display_path(d.path, root), keep=LINE_ENDS))]
    if start is not None:
        properties += [
            ("line", str(start.row)),
            ("col", str(start.column)),
            ("endLine", str(end.row)),
            ("endColumn", str(end.column)),
        ]
    properties.append(("title", title))
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{level(d.code)} {props}::{escape_data(printable(d.message, keep=LINE_ENDS))}"


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ranges = {}
    if any(d.cell is not None for d in diagnostics):
        from torchlint.notebook import file_ranges

        ranges = file_ranges(diagnostics, context.sources)
    return "".join(annotation(d, context.root, ranges.get(id(d))) + "\n" for d in diagnostics)
