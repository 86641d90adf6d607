"""Jupyter notebooks (``.ipynb``) as one Python program. See docs/notebooks.md.

A notebook is JSON; its code cells, joined in order, are the program the rules see, so an import
in cell 1 and a training loop in cell 7 are analysed together. IPython syntax (line magics,
``!shell``, ``x = !ls``, ``obj?``, cell magics) is masked *in place*: each such line keeps its
length and line count, so every offset of the masked program is the same offset of the joined
cell text, and findings map back to (cell, row, column) with no source map.

Fixes are applied per cell and written back by replacing only the edited cells' ``source``
values in the JSON text: every other byte (outputs, execution counts, metadata, key order,
indentation, the trailing newline) stays as it was. nbformat is not needed at run time.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from json.decoder import scanstring
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.locator import Locator
from torchlint.source import NOTEBOOK_SUFFIX, UnreadableFile, is_notebook_path, split_lines  # noqa: F401

#: Cell magics whose body is Python run in this kernel (or a Python subprocess): linted.
#: Every other cell magic (%%bash, %%html, %%writefile, %%sql, unknown ones) is skipped.
PYTHON_CELL_MAGICS = frozenset({
    "time", "timeit", "capture", "prun", "debug", "memit", "python", "python3", "pypy",
})

_CELL_MAGIC = re.compile(r"[ \t]*%%([\w.-]*)")
_NEWLINE = re.compile(r"\r\n|\r|\n")
# A superset of the lines IPython rewrites; cells without a match skip the line scanner.
_MAYBE_IPYTHON = re.compile(r"^[ \t]*[%!?]|\?[ \t]*(?:#.*)?$|=[ \t]*[!%]", re.MULTILINE)
# ``x = !ls``, ``a, b = %sx ls`` (IPython's SystemAssign / MagicAssign)
_ASSIGN_ESCAPE = re.compile(r"[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*([!%])")
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


# -- JSON with the positions of each cell's source --------------------------------------------

@dataclass
class RawCell:
    """One cell as stored: its index, type, source text and where that source sits in the JSON."""

    number: int  # 1-based position among all cells, as editors count them
    cell_type: str
    source: str
    #: [start, end) of the ``source`` value in the JSON text
    span: Tuple[int, int] = (0, 0)
    #: the value is a list of strings (nbformat's way) rather than one string
    list_form: bool = True
    #: offsets of each list item's opening quote (list form only)
    item_starts: Tuple[int, ...] = ()
    #: whitespace after ``[``, after each ``,`` and before ``]`` in the list (None: empty list)
    layout: Optional[Tuple[str, str, str]] = None


class _Syntax(ValueError):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def _skip(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _expect(s: str, i: int, char: str) -> int:
    if not s.startswith(char, i):
        raise _Syntax(f"expected {char!r}", i)
    return i + 1


def _string(s: str, i: int) -> Tuple[str, int]:
    if not s.startswith('"', i):
        raise _Syntax("expected a string", i)
    return scanstring(s, i + 1, True)


def _value(s: str, i: int):
    try:
        return _DECODER.raw_decode(s, i)
    except json.JSONDecodeError as exc:
        raise _Syntax(exc.msg, exc.pos) from None


def _members(s: str, i: int):
    """Yield (key, value start) for each member of the object at ``i``; the caller consumes the
    value and sends back its end offset."""
    i = _expect(s, _skip(s, i), "{")
    i = _skip(s, i)
    if s.startswith("}", i):
        return i + 1
    while True:
        key, i = _string(s, i)
        i = _expect(s, _skip(s, i), ":")
        i = _skip(s, i)
        i = yield key, i
        i = _skip(s, i)
        if s.startswith(",", i):
            i = _skip(s, i + 1)
            continue
        return _expect(s, i, "}")


def _walk_object(s: str, i: int, handle) -> Tuple[dict, int]:
    """Parse the object at ``i``; ``handle(key, start)`` returns (value, end) for a key it wants
    to parse itself, or None to let the C decoder do it."""
    out: dict = {}
    gen = _members(s, i)
    try:
        key, start = next(gen)
        while True:
            parsed = handle(key, start)
            value, end = parsed if parsed is not None else _value(s, start)
            out[key] = value
            key, start = gen.send(end)
    except StopIteration as stop:
        return out, stop.value


def _source_value(s: str, i: int, cell: RawCell) -> Tuple[object, int]:
    start = i
    if s.startswith('"', i):
        text, end = _string(s, i)
        cell.span, cell.list_form, cell.source = (start, end), False, text
        return text, end
    i = _expect(s, i, "[")
    j = _skip(s, i)
    items: List[str] = []
    starts: List[int] = []
    opening = s[i:j]
    between = closing = ""
    if s.startswith("]", j):
        end = j + 1
        layout = None
    else:
        while True:
            starts.append(j)
            text, j = _string(s, j)
            items.append(text)
            k = _skip(s, j)
            if s.startswith(",", k):
                j = _skip(s, k + 1)
                if len(starts) == 1:
                    between = s[k + 1:j]
                continue
            closing = s[j:k]
            end = _expect(s, k, "]")
            break
        layout = (opening, between if len(starts) > 1 else opening, closing)
    cell.span, cell.list_form, cell.source = (start, end), True, "".join(items)
    cell.item_starts, cell.layout = tuple(starts), layout
    return items, end


def _parse_json(raw: str) -> Tuple[dict, List[RawCell]]:
    cells: List[RawCell] = []

    def cell_member(cell: RawCell):
        def handle(key: str, start: int):
            if key != "source":
                return None
            try:
                return _source_value(raw, start, cell)
            except _Syntax:  # not text (a number, a list of numbers): say so once validated
                cell.span = (-1, -1)
                return _value(raw, start)
        return handle

    def top_member(key: str, start: int):
        if key != "cells" or not raw.startswith("[", start):
            return None
        i = _expect(raw, start, "[")
        i = _skip(raw, i)
        values = []
        if raw.startswith("]", i):
            return values, i + 1
        while True:
            if not raw.startswith("{", i):
                value, i = _value(raw, i)  # not an object: reported below
                values.append(value)
            else:
                cell = RawCell(len(cells) + 1, "", "")
                value, i = _walk_object(raw, i, cell_member(cell))
                cell.cell_type = value.get("cell_type") if isinstance(value.get("cell_type"), str) else ""
                if "source" not in value:
                    cell.span = (-1, -1)
                cells.append(cell)
                values.append(value)
            i = _skip(raw, i)
            if raw.startswith(",", i):
                i = _skip(raw, i + 1)
                continue
            return values, _expect(raw, i, "]")

    i = _skip(raw, 0)
    if not raw.startswith("{", i):
        value, _ = _value(raw, i)  # raises on text that is not JSON at all
        raise _Syntax(f"expected a JSON object, found {type(value).__name__}", i)
    data, end = _walk_object(raw, i, top_member)
    if _skip(raw, end) != len(raw):
        raise _Syntax("extra data after the notebook", _skip(raw, end))
    return data, cells


def _where(raw: str, pos: int) -> str:
    loc = Locator(raw).location(max(0, min(pos, len(raw))))
    return f"line {loc.row} column {loc.column}"


# -- the notebook -----------------------------------------------------------------------------

@dataclass
class Notebook:
    path: str
    raw: str
    cells: List[RawCell]  # every cell, in order
    #: the kernel's language is Python (or not stated)
    is_python: bool = True
    ensure_ascii: bool = False
    indent_unit: str = " "
    newline_in_json: bool = True

    @property
    def code_cells(self) -> List[RawCell]:
        return [c for c in self.cells if c.cell_type == "code"]


def parse_notebook(raw: str, path: str = "<notebook>") -> Notebook:
    """The notebook in ``raw`` (JSON text); ``UnreadableFile`` with a one-line reason otherwise."""
    try:
        data, cells = _parse_json(raw)
    except _Syntax as exc:
        raise UnreadableFile(f"not a valid notebook: invalid JSON ({exc} at {_where(raw, exc.pos)})") from None
    except (ValueError, RecursionError) as exc:  # scanstring's errors carry their position in text
        raise UnreadableFile(f"not a valid notebook: invalid JSON ({str(exc).splitlines()[0]})") from None
    if "cells" not in data:
        if "worksheets" in data:
            raise UnreadableFile(
                "nbformat 3 notebooks are not supported; convert it with "
                "`jupyter nbconvert --to notebook --nbformat 4`"
            )
        raise UnreadableFile("not a valid notebook: no \"cells\" list")
    if not isinstance(data["cells"], list):
        raise UnreadableFile("not a valid notebook: \"cells\" is not a list")
    if len(cells) != len(data["cells"]):
        raise UnreadableFile("not a valid notebook: a cell is not a JSON object")
    for cell, value in zip(cells, data["cells"]):
        if cell.cell_type == "code":
            source = value.get("source")
            ok = isinstance(source, str) or (isinstance(source, list) and all(isinstance(x, str) for x in source))
            if not ok:
                raise UnreadableFile(f"not a valid notebook: cell {cell.number} has no source text")
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    nb = Notebook(path=path, raw=raw, cells=cells, is_python=_is_python(metadata))
    nb.ensure_ascii = raw.isascii() and bool(re.search(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", raw))
    first = re.match(r"\{([ \t\r\n]*)", raw.lstrip("\ufeff"))
    ws = first.group(1) if first else ""
    nb.newline_in_json = "\n" in ws
    nb.indent_unit = ws.rsplit("\n", 1)[-1] if "\n" in ws else ""
    return nb


def _is_python(metadata: dict) -> bool:
    info = metadata.get("language_info")
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        return info["name"].lower() in ("python", "python3", "ipython", "ipython3")
    spec = metadata.get("kernelspec")
    if isinstance(spec, dict) and isinstance(spec.get("language"), str):
        return spec["language"].lower() in ("python", "python3", "ipython", "ipython3")
    return True  # not stated: assume Python, as Jupyter does


# -- IPython syntax ---------------------------------------------------------------------------

def _scan_line(line: str, quote: Optional[str], depth: int) -> Tuple[Optional[str], int, bool, int]:
    """Track strings and brackets across one line (without its newline). Returns the open
    string's quote (or None), the bracket depth, whether a backslash continues the line, and
    where a comment starts (``len(line)`` if none)."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if quote is not None:
            if c == "\\":
                i += 2
            elif line.startswith(quote, i):
                i += len(quote)
                quote = None
            else:
                i += 1
            continue
        if c == "#":
            return None, depth, False, i
        if c == '"' or c == "'":
            quote = c * 3 if line.startswith(c * 3, i) else c
            i += len(quote)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    ends_with_backslash = line.endswith("\\")
    if quote is not None and len(quote) == 1 and not ends_with_backslash:
        quote = None  # an unterminated one-line string: Python will say so
    return quote, depth, ends_with_backslash and quote is None, n


def _mask_line(line: str, start: int, as_comment: bool) -> str:
    """``line`` with ``line[start:]`` replaced by text of the same length: a comment (a whole
    top-level escape), or the expression ``0`` then a comment (an indented escape keeps its
    block non-empty; ``x = !ls`` keeps binding ``x``)."""
    n = len(line) - start
    if n <= 0:
        return line
    if as_comment:
        filler = "#" + " " * (n - 1)
    else:
        filler = "0" + ("#" + " " * (n - 2) if n > 1 else "")
    return line[:start] + filler


def mask_ipython(text: str) -> Tuple[str, List[Tuple[int, int]]]:
    """``text`` (one cell) with IPython syntax replaced by Python of the same length, and the
    (start, end) offsets of each masked line (end past its line ending)."""
    lines = split_lines(text, keepends=True)  # as CPython ends lines: not at a form feed
    masked_ranges: List[Tuple[int, int]] = []
    out: List[str] = []
    offset = 0
    if lines and _CELL_MAGIC.match(lines[0]) and lines[0].lstrip().startswith("%%"):
        first = _content(lines[0])
        out.append(_mask_line(first, 0, True) + lines[0][len(first):])
        masked_ranges.append((0, len(lines[0])))
        offset = len(lines[0])
        lines = lines[1:]
    if not _MAYBE_IPYTHON.search(text):
        out.extend(lines)
        return "".join(out), masked_ranges
    quote: Optional[str] = None
    depth = 0
    continued = False  # the previous line ended with a backslash
    escape_continues = False  # ... and it was part of an IPython escape
    for raw in lines:
        content = _content(raw)
        ending = raw[len(content):]
        masked = None
        if escape_continues:
            masked = " " * len(content)
            escape_continues = content.endswith("\\")
        elif quote is None and depth == 0 and not continued:
            masked = _escape(content)
            if masked is not None:
                escape_continues = content.endswith("\\")
        if masked is not None:
            masked_ranges.append((offset, offset + len(raw)))
            out.append(masked + ending)
        else:
            quote, depth, continued, _ = _scan_line(content, quote, depth)
            out.append(raw)
        offset += len(raw)
    return "".join(out), masked_ranges


def _content(line: str) -> str:
    return line.rstrip("\r\n")


def _escape(content: str) -> Optional[str]:
    """The masked form of a line that starts a logical line, or None if it is plain Python."""
    body = content.lstrip(" \t")
    indent = len(content) - len(body)
    if not body:
        return None
    if body[0] in "%!?":
        return _mask_line(content, indent, indent == 0)
    assign = _ASSIGN_ESCAPE.match(content)
    if assign:
        return _mask_line(content, assign.start(1), False)
    if body.rstrip().endswith("?") or "#" in body:
        _, _, _, comment = _scan_line(content, None, 0)
        code = content[:comment].rstrip()
        if code.endswith("?"):  # obj? / obj?? (help)
            return _mask_line(content, indent, indent == 0)
    return None


def cell_magic(source: str) -> Optional[str]:
    """The name of the cell magic on the cell's first line (``time`` for ``%%time``), or None."""
    for line in split_lines(source):
        if not line.strip():
            continue
        match = _CELL_MAGIC.match(line)
        return match.group(1) if match and line.lstrip().startswith("%%") else None
    return None


# -- the program the rules see ----------------------------------------------------------------

@dataclass
class ProgramCell:
    number: int
    text: str  # the cell's source, ending with a newline (``added_newline`` if we added it)
    masked: str  # ``text`` with IPython syntax masked; same length
    masked_ranges: List[Tuple[int, int]]
    added_newline: bool
    offset: int = 0  # where ``text`` starts in the program

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


@dataclass
class Program:
    """The code cells that are linted, joined; each cell keeps its own (start) offset."""

    cells: List[ProgramCell]
    text: str  # masked, joined
    #: cells whose code does not parse on its own: (cell number, SyntaxError, masked text);
    #: they are not in ``text``
    broken: List[Tuple[int, SyntaxError, str]] = field(default_factory=list)
    #: cell numbers of code cells left out as not Python (%%bash, %%html, ...)
    skipped: List[int] = field(default_factory=list)
    _locator: Optional[Locator] = None
    _cell_locators: Dict[int, Locator] = field(default_factory=dict)
    _starts: Optional[List[int]] = None

    @property
    def locator(self) -> Locator:
        if self._locator is None:
            self._locator = Locator(self.text)
        return self._locator

    def cell_at(self, offset: int) -> Optional[ProgramCell]:
        """The cell holding ``offset``; an offset on a boundary belongs to the later cell (the
        program's end belongs to the last cell)."""
        if not self.cells:
            return None
        if self._starts is None:
            self._starts = [c.offset for c in self.cells]
        return self.cells[max(0, bisect.bisect_right(self._starts, offset) - 1)]

    def cell_location(self, cell: ProgramCell, offset: int) -> Location:
        locator = self._cell_locators.get(cell.number)
        if locator is None:
            locator = self._cell_locators[cell.number] = Locator(cell.masked)
        return locator.location(max(0, min(offset - cell.offset, len(cell.text))))


#: IPython's line magics (and the usual aliases and extensions' ones) that automagic lets a
#: one-line cell call without its ``%``: Jupyter runs ``pip install x`` as ``%pip install x``.
AUTOMAGICS = frozenset("""
    aimport alias alias_magic autoawait autocall automagic autoreload autosave bookmark cat cd clear
    colors conda config connect_info cp debug dhist dirs doctest_mode ed edit env gui hist history
    killbgscripts ldir less lf lk ll load load_ext loadpy logoff logon logstart logstate logstop ls
    lsmagic lx macro magic mamba man matplotlib micromamba mkdir more mv notebook page pastebin pdb
    pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch psource pushd pwd pycat
    pylab qtconsole quickref recall rehashx reload_ext rep rerun reset reset_selective rm rmdir run
    save sc set_env store sx system tb time timeit unalias unload_ext uv who who_ls whos xdel xmode
""".split())
# IPython's LineInfo: indentation, then the called name, then the rest of the line
_AUTOMAGIC_LINE = re.compile(r"[ \t]*([A-Za-z_]\w*)(?:[ \t]+(.*))?\Z")


def _automagic(text: str, cells: Sequence[Tuple[int, str]]) -> bool:
    """Whether the cell ``text`` is one line that IPython's automagic runs as a line magic:
    ``pip install x``, ``load_ext autoreload``, ``time x = 1``. IPython applies automagic only
    to a one-line cell (``InteractiveShell.transform_cell``), when its first word names a line
    magic the notebook does not bind (``import time`` makes ``time x`` Python again) and the
    rest is not an assignment. A line that is valid Python is left as Python."""
    line = text.strip()
    if not line or "\n" in line or "\r" in line:
        return False
    match = _AUTOMAGIC_LINE.match(line)
    if not match or match.group(1) not in AUTOMAGICS:
        return False
    rest = match.group(2) or ""
    if rest[:1] in ("=", ",") and rest[1:2] != "=":
        return False  # IPython's AssignmentChecker: ``time = 1``, ``cd, x = ...``
    try:
        _parse(text)
        return False
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        pass
    name = re.escape(match.group(1))
    binds = re.compile(rf"(?m)(?:\bimport\b[^\n#]*\b{name}\b|\bas[ \t]+{name}\b|\b(?:def|class)[ \t]+{name}\b"
                       rf"|^[ \t]*{name}[ \t]*(?:,[^=\n]*)?=(?!=)|\bfor[ \t]+{name}\b)")
    return not any(binds.search(source) for _, source in cells)


def build_program(cells: Sequence[Tuple[int, str]]) -> Program:
    """Join the code cells ``(number, source)``: skip non-Python cell magics, mask IPython
    syntax, and leave out cells that do not parse on their own (reported as TL001)."""
    parts: List[ProgramCell] = []
    skipped: List[int] = []
    for number, source in cells:
        magic = cell_magic(source)
        if magic is not None and magic not in PYTHON_CELL_MAGICS:
            skipped.append(number)
            continue
        added = bool(source) and not source.endswith(("\n", "\r"))
        text = source + "\n" if added else source
        if not text:
            continue  # an empty cell holds no code and no position
        masked, ranges = mask_ipython(text)
        if not ranges and _automagic(masked, cells):  # ``pip install x``: a comment of the same length
            start = len(masked) - len(masked.lstrip())
            end = start + len(_content(masked[start:].splitlines(keepends=True)[0]))
            masked, ranges = masked[:start] + _mask_line(masked[start:end], 0, True) + masked[end:], [(start, end)]
        parts.append(ProgramCell(number, text, masked, ranges, added))
    program = _join(parts)
    program.skipped = skipped
    try:
        _parse(program.text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        # Each cell runs on its own, so each must parse alone: find the ones that do not.
        kept, broken = [], []
        for cell in parts:
            try:
                _parse(cell.masked)
            except SyntaxError as exc:
                broken.append((cell.number, exc, cell.masked))
                continue
            except (ValueError, MemoryError, RecursionError) as exc:
                from torchlint.guards import parse_failure

                broken.append((cell.number, SyntaxError(parse_failure(exc), ("", 1, 1, "")), cell.masked))
                continue
            kept.append(cell)
        if broken:
            program = _join(kept)
            program.skipped, program.broken = skipped, broken
    return program


def _join(parts: List[ProgramCell]) -> Program:
    offset = 0
    for cell in parts:
        cell.offset = offset
        offset += len(cell.text)
    return Program(parts, "".join(c.masked for c in parts))


def program_of(nb: Notebook, sources: Optional[Dict[int, str]] = None) -> Program:
    sources = sources or {}
    return build_program([(c.number, sources.get(c.number, c.source)) for c in nb.code_cells])


# -- lint ---------------------------------------------------------------------------------------

def check_code_size(nb: Notebook, settings) -> None:
    """``max-file-size`` applied to the code the notebook holds, not to its JSON (outputs,
    images): ``UnreadableFile`` (TL002) past it."""
    from torchlint.source import max_file_size

    limit = max_file_size(settings)
    if limit is None:
        return
    size = sum(len(c.source.encode("utf-8", "surrogatepass")) for c in nb.code_cells)
    if size > limit:
        raise UnreadableFile(f"notebook code too large ({size:,} bytes in its code cells; "
                             f"max-file-size is {limit:,}); skipped")


def lint_notebook(raw: str, path: str, settings, *, incremental: bool = False, project=None) -> List[Diagnostic]:
    """Findings for the notebook JSON ``raw``, positioned in cells (``Diagnostic.cell``).
    Raises ``UnreadableFile`` for text that is not a notebook. A notebook is its own project
    (no module imports it): of the ``project`` facts from the project index only the cross-file
    half is used (``FileFacts.cross_file``: helpers and classes of the modules it may import),
    so that a check and a fix see the same per-step functions."""
    nb = parse_notebook(raw, path)
    if not nb.is_python:
        return []
    check_code_size(nb, settings)
    program = program_of(nb)
    return to_cells(program, _lint_program(program, path, settings, incremental, project), path, settings)


def _lint_program(program: Program, path: str, settings, incremental: bool = False, project=None) -> List[Diagnostic]:
    from torchlint.engine import lint_source, single_file_facts

    if not program.text.strip():
        return []
    facts = None
    cross = project.cross_file().spelled_in(program.text) if project is not None else None
    if cross is not None and cross.digest:
        # the functions and classes it imports from the project's modules (W3: TL402, TL902),
        # with the facts the notebook gives itself
        facts = single_file_facts(program.text, path).with_cross_file(cross)
    return lint_source(program.text, path, settings, incremental=incremental, project=facts)


def to_cells(program: Program, diagnostics: Sequence[Diagnostic], path: str, settings) -> List[Diagnostic]:
    """Program findings moved into their cells, plus TL001 for each cell that does not parse."""
    out = [_diagnostic_to_cell(program, d) for d in diagnostics]
    out.extend(_broken_cell_errors(program, path, settings))
    out.sort(key=Diagnostic.sort_key)
    return out


def _diagnostic_to_cell(program: Program, d: Diagnostic) -> Diagnostic:
    locator = program.locator
    start = locator.offset(d.location)
    cell = program.cell_at(start)
    if cell is None:
        return d
    end = min(locator.offset(d.end_location), cell.end)
    location = program.cell_location(cell, start)
    end_location = program.cell_location(cell, max(start, end))
    rows = tuple(sorted({
        program.cell_location(cell, min(max(locator.offset(Location(r, 1)), cell.offset), cell.end)).row
        for r in d.noqa_rows
    }))
    fix = None
    if d.fix is not None:
        fix = replace(d.fix, edits=tuple(_edit_to_cell(program, e) for e in d.fix.edits))
    return replace(
        d, location=location, end_location=end_location, fix=fix, message=_message_to_cells(program, d),
        noqa_row=location.row if d.noqa_row is not None else None, noqa_rows=rows, cell=cell.number,
    )


def _message_to_cells(program: Program, d: Diagnostic) -> str:
    """A message naming another line of the notebook (``nb.ipynb:99``, a call site) names its
    cell instead (``nb.ipynb:cell 7:3``)."""
    import os

    name = os.path.basename(d.path)
    if name + ":" not in d.message:
        return d.message

    def to_cell(match) -> str:
        row = int(match.group(1))
        offset = program.locator.offset(Location(row, 1))
        cell = program.cell_at(offset)
        if cell is None or row > program.locator.line_count:
            return match.group(0)
        return f"{name}:cell {cell.number}:{program.cell_location(cell, offset).row}"

    return re.sub(re.escape(name) + r":(\d+)\b", to_cell, d.message)


def _edit_to_cell(program: Program, e: Edit) -> Edit:
    start = program.locator.offset(e.location)
    end = program.locator.offset(e.end_location)
    cell = program.cell_at(start)
    if cell is None:
        return e
    return Edit(program.cell_location(cell, start), program.cell_location(cell, end), e.content, cell=cell.number)


def _broken_cell_errors(program: Program, path: str, settings) -> List[Diagnostic]:
    if not program.broken or "TL001" not in settings.codes_for_path(path):
        return []
    from torchlint.engine import _engine_diagnostic
    from torchlint.suppression import file_exemptions, filter_suppressed

    exempt = file_exemptions(program.text)
    out = []
    for number, exc, cell_text in program.broken:
        msg = exc.msg or "invalid syntax"
        message = f"SyntaxError: {msg}" if not msg.startswith(("cannot parse", "SyntaxError: ")) else msg
        d = _engine_diagnostic("TL001", message, path, exc.lineno or 1, max(exc.offset or 1, 1))
        if exempt == "ALL" or (exempt and "TL001" in exempt):
            continue
        if not filter_suppressed(cell_text, [d]):
            continue
        out.append(replace(d, cell=number))
    return out


# -- fix ------------------------------------------------------------------------------------------

def fix_notebook(raw: str, path: str, settings, *, unsafe: bool = False, only_cell: Optional[int] = None):
    """``fixer.fix_text`` for a notebook: apply fixes cell by cell until none applies; the result's
    ``text`` is the notebook JSON with only the edited cells' ``source`` replaced. ``only_cell``:
    fix only the findings in that cell (an editor's per-cell fix-all; an import such a fix adds
    may still go to another cell)."""
    from torchlint import fixer

    nb = parse_notebook(raw, path)
    result = fixer.FixResult(path=path, original=raw, text=raw)
    if not nb.is_python:
        return result
    check_code_size(nb, settings)
    sources: Dict[int, str] = {c.number: c.source for c in nb.code_cells}
    program = program_of(nb)
    broken_before = {n for n, _, _ in program.broken}
    strict: Optional[bool] = None
    refused: set = set()

    def lint(program: Program) -> List[Diagnostic]:
        found = fixer.effective_fixes(_lint_program(program, path, settings), settings)
        if only_cell is not None:
            found = [d if d.fix is None or _cell_number(program, d) == only_cell else replace(d, fix=None) for d in found]
        return [_fit_fix(program, d, refused) for d in found]

    diagnostics = lint(program)
    first = (program, diagnostics)
    for _ in range(fixer.MAX_PASSES):
        spans, fixed, broken = fixer.select_fixes(diagnostics, program.text, unsafe)
        for code in broken:
            result.warnings.append(f"{path}: {code} offered a fix with overlapping edits; fix skipped")
        if not spans:
            break
        new_sources = dict(sources)
        for cell, cell_spans in _spans_by_cell(program, spans):
            newline = fixer.line_ending(cell.text)
            text = fixer.splice(cell.text, [(s - cell.offset, e - cell.offset, c) for s, e, c in cell_spans], newline)
            if cell.added_newline and text.endswith("\n"):
                text = text[:-1]
            new_sources[cell.number] = text
        if new_sources == sources:
            break
        new_program = build_program([(c.number, new_sources[c.number]) for c in nb.code_cells])
        if strict is None:
            strict = fixer._compiles(program.text, path)
        why = fixer.parse_error(new_program.text, path, strict) if new_program.text.strip() else None
        newly_broken = sorted({n for n, _, _ in new_program.broken} - broken_before)
        if why is None and newly_broken:
            why = f"cell {newly_broken[0]} no longer parses"
        if why is not None:
            codes = ", ".join(sorted({d.code for d in fixed}))
            result.error = f"{path}: fix for {codes} produced code that does not parse ({why}); file left unchanged"
            result.remaining = to_cells(first[0], first[1], path, settings)
            return result
        sources, program = new_sources, new_program
        result.passes += 1
        result.applied.update(d.code for d in fixed)
        diagnostics = lint(program)
    else:
        if fixer.select_fixes(diagnostics, program.text, unsafe)[0]:
            result.warnings.append(
                f"{path}: fixes did not converge after {fixer.MAX_PASSES} passes; "
                "the notebook was fixed as far as it went (please report this rule bug)"
            )
    for code in sorted(refused):
        result.warnings.append(f"{path}: a {code} fix would cross a cell boundary or an IPython line; not applied")
    changed = {n: s for n, s in sources.items() if s != _original_source(nb, n)}
    result.text = render(nb, changed)
    result.remaining = to_cells(program, diagnostics, path, settings)
    return result


def _cell_number(program: Program, d: Diagnostic) -> Optional[int]:
    cell = program.cell_at(program.locator.offset(d.location))
    return cell.number if cell is not None else None


def _original_source(nb: Notebook, number: int) -> str:
    return nb.cells[number - 1].source


def _spans_by_cell(program: Program, spans) -> List[Tuple[ProgramCell, list]]:
    out: Dict[int, Tuple[ProgramCell, list]] = {}
    for start, end, content in spans:
        cell = program.cell_at(start)
        out.setdefault(cell.number, (cell, []))[1].append((start, end, content))
    return list(out.values())


def _fit_fix(program: Program, d: Diagnostic, refused: set) -> Diagnostic:
    """``d`` with its fix made to fit the notebook: an added import moves to the first cell that
    holds imports; a fix that would cross a cell boundary or touch a masked IPython line is
    dropped (the finding stays)."""
    if d.fix is None:
        return d
    edits = _relocate_imports(program, list(d.fix.edits))
    locator = program.locator
    for e in edits:
        start, end = locator.offset(e.location), locator.offset(e.end_location)
        cell = program.cell_at(start)
        if cell is None or not (cell.offset <= start <= end <= cell.end) or _touches_masked(cell, start, end):
            refused.add(d.code)
            return replace(d, fix=None)
    if edits != list(d.fix.edits):
        return replace(d, fix=replace(d.fix, edits=tuple(edits)))
    return d


def _touches_masked(cell: ProgramCell, start: int, end: int) -> bool:
    s, e = start - cell.offset, end - cell.offset
    for ms, me in cell.masked_ranges:
        if s == e:
            if ms < s < me:
                return True
        elif s < me and ms < e:
            return True
    return False


_ADDED_IMPORT = re.compile(r"\n*(import [\w.]+(?: as \w+)?)\n*")


def _relocate_imports(program: Program, edits: List[Edit]) -> List[Edit]:
    """An insertion that only adds ``import x`` goes after the import block of the first code
    cell that holds imports, when that is still before the fix's other edits (one the rule
    already put in that cell, sorted among its imports, stays)."""
    locator = program.locator
    adds = [e for e in edits if e.location == e.end_location and _ADDED_IMPORT.fullmatch(e.content)]
    if not adds or len(adds) == len(edits):
        return edits
    target = _import_anchor(program)
    if target is None:
        return edits
    target_cell = program.cell_at(locator.offset(target))
    others = min(locator.offset(e.location) for e in edits if e not in adds)
    out = []
    for e in edits:
        if e in adds and program.cell_at(locator.offset(e.location)) is target_cell:
            out.append(e)
        elif e in adds and locator.offset(target) <= others:
            line = _ADDED_IMPORT.fullmatch(e.content).group(1)
            out.append(Edit(target, target, "\n" + line))
        else:
            out.append(e)
    return out


def _parse(text: str) -> ast.Module:
    """``ast.parse`` without printing the code's own SyntaxWarnings (``x is 1``, ``"\\d"``):
    a Python file's lint shows none (engine._ast_parse), a notebook's neither."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _import_anchor(program: Program) -> Optional[Location]:
    """End of the last line of the first run of top-level imports in the first cell holding one."""
    try:
        module = _parse(program.text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    body = module.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            cell = program.cell_at(program.locator.offset(Location(stmt.lineno, 1)))
            last = stmt
            for nxt in body[i + 1:]:
                if not isinstance(nxt, (ast.Import, ast.ImportFrom)):
                    break
                if program.cell_at(program.locator.offset(Location(nxt.lineno, 1))) is not cell:
                    break
                last = nxt
            row = last.end_lineno or last.lineno
            return Location(row, len(program.locator.line(row)) + 1)
    return None


# -- write back -------------------------------------------------------------------------------

def render(nb: Notebook, sources: Dict[int, str]) -> str:
    """``nb.raw`` with the ``source`` of each cell in ``sources`` replaced, every other byte kept."""
    if not sources:
        return nb.raw
    out: List[str] = []
    cursor = 0
    for number in sorted(sources):
        cell = nb.cells[number - 1]
        start, end = cell.span
        out.append(nb.raw[cursor:start])
        out.append(_encode_source(nb, cell, sources[number]))
        cursor = end
    out.append(nb.raw[cursor:])
    return "".join(out)


def _encode_source(nb: Notebook, cell: RawCell, text: str) -> str:
    dumps = lambda s: json.dumps(s, ensure_ascii=nb.ensure_ascii)  # noqa: E731
    if not cell.list_form:
        return dumps(text)
    lines = text.splitlines(keepends=True)  # as nbformat splits
    if not lines:
        return "[]"
    if cell.layout is not None:
        opening, between, closing = cell.layout
    elif nb.newline_in_json:
        key_line = nb.raw.rfind("\n", 0, cell.span[0]) + 1
        indent = nb.raw[key_line:cell.span[0]]
        indent = indent[:len(indent) - len(indent.lstrip(" \t"))]
        opening = between = "\n" + indent + nb.indent_unit
        closing = "\n" + indent
    else:
        opening = closing = ""
        between = " " if ", " in nb.raw[:200] else ""
    return "[" + opening + ("," + between).join(dumps(line) for line in lines) + closing + "]"


def cell_sources(raw: str) -> Dict[int, str]:
    """cell number -> source of each code cell (for code frames); empty if ``raw`` is not a
    notebook."""
    try:
        nb = parse_notebook(raw)
    except UnreadableFile:
        return {}
    return {c.number: c.source for c in nb.code_cells}


def diff(before: str, after: str, path: str) -> str:
    """Per-cell unified diffs between two versions of a notebook's JSON (``--diff``)."""
    from torchlint.fixer import unified_diff

    old, new = cell_sources(before), cell_sources(after)
    out = []
    for number in sorted(set(old) | set(new)):
        a, b = old.get(number, ""), new.get(number, "")
        if a != b:
            out.append(unified_diff(a, b, f"{path}:cell {number}"))
    return "".join(out)


class JsonMap:
    """Positions in cells -> positions in the notebook file as stored (1-based line and column of
    its JSON text), for formats that can only point into the file itself: SARIF, GitHub
    annotations, an editor showing the JSON. A row's text is a string inside the JSON; the
    column counts the characters of its JSON escaping, so it lands on the same character."""

    def __init__(self, raw: str) -> None:
        try:
            self.nb: Optional[Notebook] = parse_notebook(raw)
        except UnreadableFile:
            self.nb = None
        self.locator = Locator(raw)

    def location(self, cell_number: Optional[int], loc: Location) -> Optional[Location]:
        nb = self.nb
        if nb is None or cell_number is None or not 1 <= cell_number <= len(nb.cells):
            return None
        cell = nb.cells[cell_number - 1]
        if cell.span[0] < 0:
            return None
        offset = Locator(cell.source).offset(loc)
        dumps = lambda text: len(json.dumps(text, ensure_ascii=nb.ensure_ascii)) - 1  # noqa: E731
        if not cell.list_form:
            return self.locator.location(cell.span[0] + dumps(cell.source[:offset]))
        if not cell.item_starts:
            return self.locator.location(cell.span[0])
        pos = 0
        for i, start in enumerate(cell.item_starts):
            item, _ = scanstring(nb.raw, start + 1, True)
            if offset < pos + len(item) or i == len(cell.item_starts) - 1:
                return self.locator.location(start + dumps(item[:max(0, offset - pos)]))
            pos += len(item)
        return None  # pragma: no cover - the loop returns on its last item


def json_position(raw: str, cell: int, row: int, column: int) -> Optional[Location]:
    """Where (``cell``, ``row``, ``column``) lies in the notebook's JSON text; None if nowhere."""
    return JsonMap(raw).location(cell, Location(row, column))


def code_digest(raw: str) -> Optional[str]:
    """A hash of what linting depends on (the language, each cell's type, code cells' source),
    so that re-running a notebook (new outputs, execution counts) keeps its cache entry."""
    try:
        nb = parse_notebook(raw)
    except UnreadableFile:
        return None
    parts = [nb.is_python, [(c.cell_type, c.source if c.cell_type == "code" else None) for c in nb.cells]]
    return hashlib.blake2b(json.dumps(parts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def file_ranges(diagnostics: Sequence[Diagnostic], sources) -> Dict[int, Tuple[Location, Location]]:
    """id(diagnostic) -> its (start, end) in the notebook file as stored, for the findings in
    notebooks whose text ``sources`` (path -> text) can give."""
    maps: Dict[str, Optional[JsonMap]] = {}
    out: Dict[int, Tuple[Location, Location]] = {}
    for d in diagnostics:
        if d.cell is None:
            continue
        if d.path not in maps:
            text = sources.get(d.path)
            maps[d.path] = JsonMap(text) if text is not None else None
        json_map = maps[d.path]
        if json_map is None:
            continue
        start, end = json_map.location(d.cell, d.location), json_map.location(d.cell, d.end_location)
        if start is not None and end is not None:
            out[id(d)] = (start, max(start, end))
    return out


# -- editors ------------------------------------------------------------------------------------

def lint_for_editor(text: str, path: str, settings) -> List[Diagnostic]:
    """Findings for a ``.ipynb`` document an editor sends as text, positioned in that text.

    The notebook's JSON (an editor showing the file as text): each finding points at the JSON
    string holding the flagged code, and its fix is one edit to the JSON text that replaces the
    edited cells' ``source`` values. Text that is not JSON (a client that concatenates the cells
    into a Python view, as jupyterlab-lsp does) is linted as one cell with IPython syntax masked
    in place; fixes that would touch a masked line are dropped."""
    if not text.lstrip("\ufeff \t\r\n").startswith("{"):
        return _lint_python_view(text, path, settings)
    try:
        nb = parse_notebook(text, path)
    except UnreadableFile as exc:
        from torchlint.engine import unreadable

        return [unreadable(path, str(exc))] if "TL002" in settings.codes_for_path(path) else []
    if not nb.is_python:
        return []
    program = program_of(nb)
    json_map = JsonMap(text)
    out = []
    for d in _lint_fitted(program, path, settings):
        start = json_map.location(d.cell, d.location) or Location(1, 1)
        end = json_map.location(d.cell, d.end_location) or start
        fix = None
        if d.fix is not None:
            new = apply_cell_edits(nb, d.fix.edits)
            if new is not None and new != text:
                fix = replace(d.fix, edits=(_whole_change(json_map.locator, text, new),))
        out.append(replace(d, location=start, end_location=max(start, end), fix=fix, noqa_row=None, noqa_rows=()))
    return out


def _lint_fitted(program: Program, path: str, settings) -> List[Diagnostic]:
    """Findings in cells, with fixes made to fit the notebook as ``--fix`` does (``_fit_fix``)."""
    found = _lint_program(program, path, settings, incremental=True)
    return to_cells(program, [_fit_fix(program, d, set()) for d in found], path, settings)


def lint_cells(cells: Sequence[Tuple[str, str]], path: str, settings) -> List[Diagnostic]:
    """Findings for a notebook an editor holds as cells, ``(cell_type, source)`` in order (LSP
    notebook documents): the code cells are one program, as in a file; positions and fix edits
    are cell-relative and name their cell (numbered from 1 over every cell given)."""
    program = build_program([(n, source) for n, (kind, source) in enumerate(cells, 1) if kind == "code"])
    return _lint_fitted(program, path, settings)


def cells_json(cells: Sequence[Tuple[str, str]]) -> str:
    """A minimal nbformat 4 notebook holding ``cells`` (``(cell_type, source)``)."""
    out = []
    for kind, source in cells:
        cell: Dict[str, object] = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    return json.dumps({"cells": out, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}, indent=1)


def fix_cells(cells: Sequence[Tuple[str, str]], path: str, settings, *, only_cell: Optional[int] = None):
    """Safe fixes for a notebook held as cells (``lint_cells``), to a fixed point as ``--fix``
    applies them: cell number -> new source for each changed cell; None when a fix would break
    the code. ``only_cell``: fix only the findings in that cell."""
    result = fix_notebook(cells_json(cells), path, settings, only_cell=only_cell)
    if result.error:
        return None
    fixed = parse_notebook(result.text, path)
    return {c.number: c.source for c in fixed.code_cells if c.source != cells[c.number - 1][1]}


#: jupyterlab-lsp's Python view of a cell magic (``%%bash``, ``%%writefile``): one call holding the
#: cell's text in a triple-quoted string it does not escape, at the start of a line.
_VIEW_CELL_MAGIC = "get_ipython().run_cell_magic("
_VIEW_CELL_MAGIC_ENDS = ('""")', "''')")


def _mask_view_cell_magics(text: str) -> Tuple[str, List[Tuple[int, int]]]:
    """``text`` with each ``get_ipython().run_cell_magic(...)`` call of a Python view masked as
    comments of the same length, and the masked lines' offsets. The cell is not Python (the
    command line never lints a ``%%bash`` cell either), and jupyterlab-lsp does not escape it: a
    cell ending in a quote (``echo "done"``) makes the call a syntax error that would hide every
    finding of the notebook. The call ends at the first line ending in three quotes and ``)``."""
    if _VIEW_CELL_MAGIC not in text:
        return text, []
    out: List[str] = []
    ranges: List[Tuple[int, int]] = []
    offset = 0
    inside = False
    for raw in text.splitlines(keepends=True):
        content = _content(raw)
        if not inside and content.startswith(_VIEW_CELL_MAGIC):
            inside = True
        if inside:
            out.append(_mask_line(content, 0, True) + raw[len(content):])
            ranges.append((offset, offset + len(raw)))
            inside = not content.rstrip().endswith(_VIEW_CELL_MAGIC_ENDS)
        else:
            out.append(raw)
        offset += len(raw)
    return "".join(out), ranges


def _lint_python_view(text: str, path: str, settings) -> List[Diagnostic]:
    from torchlint.engine import lint_source

    unmagicked, magic_ranges = _mask_view_cell_magics(text)
    masked, ranges = mask_ipython(unmagicked)
    ranges = sorted(magic_ranges + ranges)
    view = ProgramCell(1, text, masked, ranges, False)
    locator = Locator(masked)
    out = []
    for d in lint_source(masked, path, settings, incremental=True):
        if d.fix is not None and any(
            _touches_masked(view, locator.offset(e.location), locator.offset(e.end_location)) for e in d.fix.edits
        ):
            d = replace(d, fix=None)
        out.append(d)
    return out


def apply_cell_edits(nb: Notebook, edits: Sequence[Edit]) -> Optional[str]:
    """The notebook's JSON text with ``edits`` (cell-relative, each naming its cell) applied to
    the cells' sources; None if an edit names no code cell."""
    from torchlint.fixer import splice

    by_cell: Dict[int, List[Edit]] = {}
    for e in edits:
        if e.cell is None or not 1 <= e.cell <= len(nb.cells) or nb.cells[e.cell - 1].cell_type != "code":
            return None
        by_cell.setdefault(e.cell, []).append(e)
    sources = {}
    for number, cell_edits in by_cell.items():
        source = nb.cells[number - 1].source
        added = bool(source) and not source.endswith(("\n", "\r"))
        text = source + "\n" if added else source
        locator = Locator(text)
        text = splice(text, [(locator.offset(e.location), locator.offset(e.end_location), e.content) for e in cell_edits])
        sources[number] = text[:-1] if added and text.endswith("\n") else text
    return render(nb, sources)


def _whole_change(locator: Locator, old: str, new: str) -> Edit:
    """One edit turning ``old`` into ``new``: the changed middle."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return Edit(locator.location(start), locator.location(end_old), new[start:end_new])
