"""What the report formats share: the ``ReportContext`` they render with and the small questions
they ask of a finding (where it is, whether it is an error, its range in the file as stored)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple

from torchlint.diagnostics import Diagnostic, Location

#: Codes for files torchlint could not check (syntax error, unreadable, too complex): the CI
#: formats report them as errors, every other finding (TL004 unused-noqa included) as a warning.
FILE_ERROR_CODES = frozenset({"TL001", "TL002", "TL003"})

@dataclass
class ReportContext:
    files_checked: int = 0
    #: Source text of files with findings (for code frames).
    sources: Dict[str, str] = field(default_factory=dict)
    color: bool = False
    #: Folder paths in reports are relative to (SARIF, GitHub).
    root: str = "."
    #: Whether fixes may be shown as available with --unsafe-fixes.
    unsafe_fixes: bool = False
    #: The --output-format asked for (``--statistics`` renders JSON for json formats).
    output_format: str = "full"
    #: Every file linted, when known (JUnit reports clean files as passing test cases).
    checked_paths: Sequence[str] = ()


def position(d: Diagnostic) -> str:
    """``row:col``, or ``cell N:row:col`` for a finding in a notebook (ruff's layout)."""
    where = f"{d.location.row}:{d.location.column}"
    return where if d.cell is None else f"cell {d.cell}:{where}"


def is_error(code: str) -> bool:
    return code in FILE_ERROR_CODES


def file_ranges(diagnostics: Sequence[Diagnostic], context: ReportContext) -> Dict[int, Tuple[Location, Location]]:
    """id(d) -> (start, end) in the file as stored for each finding: a finding in a notebook
    points at the JSON string holding the flagged code (line 1 when its text is unknown), as the
    CI systems that read these formats show the ``.ipynb`` file, not its cells."""
    ranges: Dict[int, Tuple[Location, Location]] = {}
    if any(d.cell is not None for d in diagnostics):
        from torchlint.notebook import file_ranges as notebook_ranges

        ranges = notebook_ranges(diagnostics, context.sources)
    out = {}
    for d in diagnostics:
        if d.cell is None:
            out[id(d)] = (d.location, d.end_location)
        else:
            out[id(d)] = ranges.get(id(d), (Location(1, 1), Location(1, 1)))
    return out


def one_line(message: str) -> str:
    """A message on one line (formats that are one line per finding)."""
    return " ".join(message.split())
