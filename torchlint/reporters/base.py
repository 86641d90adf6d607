"""What the report formats share: the ``ReportContext`` they render with and the small questions
they ask of a finding (where it is, whether it is an error, its range in the file as stored)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Sequence, Tuple

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


# What a file name may hold that must not reach a terminal or a report as it is: C0 and C1
# control characters (escape sequences, a newline splitting a one-line finding), DEL, Unicode's
# line separators and bidirectional controls (text that reads other than it is), and lone
# surrogates: the bytes of a name that is not valid UTF-8, as Python decodes it
# (``surrogateescape``), which no UTF-8 stream, JSON parser or XML parser accepts.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape): the byte itself
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """``text`` with the characters above written as backslash escapes (``\\x1b``, ``\\xff``
    for the undecodable byte 0xFF, ``\\u202e``), as ``ls -b`` shows a name; those in ``keep``
    stay (a format that escapes them its own way). Text without any is returned as it is."""
    if _UNPRINTABLE.search(text) is None:
        return text
    if keep:
        return "".join(c if c in keep else _UNPRINTABLE.sub(_escape, c) for c in text)
    return _UNPRINTABLE.sub(_escape, text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(value: Any) -> Any:
    """``value`` (a JSON-ready structure) with lone surrogates in its strings written as
    ``printable`` writes them: ``json.dumps`` would emit them as ``\\udcff`` escapes, which
    strict parsers reject (RFC 8259: not a character). Control characters are left to
    ``json.dumps``, which escapes them."""
    if isinstance(value, str):
        return _SURROGATE.sub(_escape, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` of ``value`` (ASCII, as by default), every string a valid one: only when
    the plain dump holds a surrogate escape is the structure walked (``json_safe``)."""
    text = json.dumps(value, **options)
    if "\\ud" in text:  # ``ensure_ascii`` writes every surrogate as one (a valid pair too)
        text = json.dumps(json_safe(value), **options)
    return text


def uri_path(path: str) -> str:
    """A relative path as the path of a URI: its bytes as stored (``os.fsencode``: a name that
    is not UTF-8 too) percent-encoded, ``/`` kept."""
    from urllib.parse import quote_from_bytes

    return quote_from_bytes(os.fsencode(path), safe="/")
