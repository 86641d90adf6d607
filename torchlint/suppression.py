"""Stage 7 of the pipeline: drop findings suppressed by ``# noqa`` comments; report the
``# noqa: TL...`` codes that suppress nothing (TL004 unused-noqa); add directives (``--add-noqa``)."""

from __future__ import annotations

import io
import os
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from torchlint.deprecations import TORCHFIX_CODES
from torchlint.diagnostics import SAFE, Diagnostic, Edit, Fix, Location
from torchlint.locator import Locator

_CODE = r"[A-Z]+[0-9]+"
_LINE_NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>" + _CODE + r"(?:[,\s]+" + _CODE + r")*))?", re.IGNORECASE
)
# A whole line (``_file_directives`` cuts it out: lines end at \n, \r\n or a lone \r, as CPython
# ends them); a form feed may stand before the ``#``, as in any indentation.
_FILE_NOQA = re.compile(
    r"[ \t\f]*#[ \t]*torchlint[ \t]*:[ \t]*noqa(?:[ \t]*:[ \t]*(?P<codes>"
    + _CODE + r"(?:[,\s]+" + _CODE + r")*))?[ \t]*",
    re.IGNORECASE,
)

ALL = None  # marker: every code is suppressed
# A `noqa` naming a TL code: only then is a file tokenized for TL004. Most `noqa`s in real code
# are other tools' (`# noqa: E501`); tokenizing every file that has one cost ~20% of ast.parse on
# five ML libraries, this check 0.7% (substring search, then the regex anchored at each hit).
_TL_NOQA = re.compile(r"noqa[ \t]*:[^\r\n]*?\bTL[0-9]", re.IGNORECASE)


def _names_tl_code(text: str) -> bool:
    for word in ("noqa", "NOQA"):  # the spellings seen in practice (TL004 judges only these)
        at = text.find(word)
        while at >= 0:
            if _TL_NOQA.match(text, at):
                return True
            at = text.find(word, at + 4)
    return False


def _codes(text: Optional[str]) -> Optional[FrozenSet[str]]:
    if not text:
        return ALL
    codes = frozenset(c.upper() for c in re.split(r"[,\s]+", text.strip()) if c)
    # TorchFix's codes keep working: `# noqa: TOR102` suppresses TL901 (torchlint/deprecations.py).
    return codes | {TORCHFIX_CODES[c] for c in codes if c in TORCHFIX_CODES}


def file_exemptions(text: str):
    """Codes exempted for the whole file: None (nothing), ``"ALL"``, or a frozenset. Only a
    comment is a directive: the line ``# torchlint: noqa`` inside a string literal (a template,
    a docstring's example) exempts nothing. The regex finds the candidates (rare), then the text
    is tokenized as far as the last one, only to tell comments from strings."""
    if "torchlint" not in text:
        return None
    matches = _file_directives(text)
    if not matches:
        return None
    locator = Locator(text)
    wanted = [locator.location(start + m.group().index("#")) for start, m in matches]
    comments = _comment_starts(text, wanted[-1].row)
    codes: set = set()
    for (_, match), where in zip(matches, wanted):
        if (where.row, where.column - 1) not in comments:
            continue  # inside a string (or past where the text stops tokenizing)
        found = _codes(match.group("codes"))
        if found is ALL:
            return "ALL"
        codes |= found
    return frozenset(codes) if codes else None


def _file_directives(text: str) -> List[Tuple[int, "re.Match[str]"]]:
    """(offset of the line, match) for each line that is a file-level directive, found from
    each ``torchlint`` in the text (``str.find``: a regex tried at every offset cost 2-3x more)."""
    found = []
    at = text.find("torchlint")
    while at >= 0:
        start = max(text.rfind("\n", 0, at), text.rfind("\r", 0, at)) + 1
        end = min((e for e in (text.find("\n", at), text.find("\r", at)) if e >= 0), default=len(text))
        match = _FILE_NOQA.fullmatch(text, start, end)
        if match:
            found.append((start, match))
        at = text.find("torchlint", end)
    return found


def _comment_starts(text: str, last_row: int) -> Set[Tuple[int, int]]:
    """(row, 0-based column) where each comment token starts, up to ``last_row``; only what
    tokenizes before an error counts (a text that does not is TL001 anyway)."""
    starts: Set[Tuple[int, int]] = set()
    try:  # newline=None: a lone \r ends a line, as for CPython and Locator
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if tok.start[0] > last_row:
                break
            if tok.type == tokenize.COMMENT:
                starts.add(tok.start)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return starts


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


def filter_suppressed(text: str, diagnostics: List[Diagnostic], path: Optional[str] = None,
                      enabled: Optional[FrozenSet[str]] = None) -> List[Diagnostic]:
    """Findings not suppressed by noqa comments. With the file's ``path`` and ``enabled`` codes,
    TL004 (unused-noqa, when enabled) is judged against every finding first. With
    ``TORCHLINT_IGNORE_NOQA`` set (``--ignore-noqa``) nothing is suppressed."""
    if os.environ.get("TORCHLINT_IGNORE_NOQA"):
        return diagnostics
    judge = path is not None and enabled is not None and UNUSED_NOQA in enabled and _names_tl_code(text)
    if not diagnostics and not judge:
        return diagnostics
    exempt = file_exemptions(text)
    if exempt == "ALL":
        return []
    if exempt:
        diagnostics = [d for d in diagnostics if d.code not in exempt]
    if judge and not (exempt and UNUSED_NOQA in exempt):
        assert path is not None and enabled is not None  # judge says so
        # codes exempted file-wide are not judged: the line's directive takes over if that goes
        diagnostics = diagnostics + unused_noqa(text, path, diagnostics, enabled - (exempt or frozenset()))
        if not diagnostics:
            return diagnostics
    rows = {row for d in diagnostics for row in (d.noqa_rows or (d.location.row,))}
    noqa = line_noqa(text, rows)
    if not noqa:
        return diagnostics
    kept = []
    for d in diagnostics:
        suppressed = False
        for row in d.noqa_rows or (d.location.row,):
            codes = noqa.get(row, frozenset())
            if codes is ALL or (codes is not None and d.code in codes):
                suppressed = True
                break
        if not suppressed:
            kept.append(d)
    return kept


# -- TL004 unused-noqa ------------------------------------------------------------------------
# After every rule's findings are known: a `# noqa: TL...` code that suppresses nothing, or a TL
# code no rule has, is reported with a safe fix that removes it. Only TL codes of rules enabled for
# the file are judged: a code of another tool (E501), of a rule that is switched off (so could not
# fire) or exempted file-wide (`# torchlint: noqa: TL201`), TL004 itself, and a bare `# noqa` (it
# may serve flake8 or ruff) are left alone.

UNUSED_NOQA = "TL004"
UNUSED_NOQA_FIX = SAFE  # removing a comment never changes the program
_TL_CODE = re.compile(r"TL[0-9]+\Z", re.IGNORECASE)
_ONE_CODE = re.compile(_CODE, re.IGNORECASE)


@dataclass(frozen=True)
class NoqaDirective:
    """A ``# noqa`` directive in a comment: its row, its span in the line (``start`` is the
    ``#``), and each code with its span."""

    row: int
    line: str
    start: int
    end: int
    #: (code as written, start, end) in the line
    codes: Tuple[Tuple[str, int, int], ...]
    #: where the comment holding the directive starts and ends in the line
    comment_start: int
    comment_end: int


def noqa_directives(text: str) -> Optional[List[NoqaDirective]]:
    """The ``# noqa`` directives in real comments (not in strings), one per line at most (the
    one ``filter_suppressed`` reads); None when the text does not tokenize."""
    if "noqa" not in text and "NOQA" not in text.upper():
        return []
    locator = Locator(text)
    found: List[NoqaDirective] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if tok.type != tokenize.COMMENT or "noqa" not in tok.string.lower():
                continue
            row, col = tok.start
            line = locator.line(row)
            match = _LINE_NOQA.search(line)
            if not match or match.start() < col or (found and found[-1].row == row):
                continue  # the line's first `# noqa` is in a string: filter_suppressed reads that one
            codes: Tuple[Tuple[str, int, int], ...] = ()
            if match.group("codes"):
                base = match.start("codes")
                codes = tuple(
                    (m.group(0), base + m.start(), base + m.end())
                    for m in _ONE_CODE.finditer(match.group("codes"))
                )
            found.append(NoqaDirective(row, line, match.start(), match.end(), codes, col, col + len(tok.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return found


def unused_noqa(text: str, path: str, diagnostics: Sequence[Diagnostic], enabled: Iterable[str]) -> List[Diagnostic]:
    """TL004 findings for the directives of ``text`` given every finding before line noqa
    filtering (``diagnostics``) and the codes enabled for the file."""
    from torchlint.rules import ENGINE_CODES, known_codes

    directives = noqa_directives(text)
    if not directives:
        return []
    enabled = frozenset(enabled)
    known = frozenset(known_codes())
    used: Set[Tuple[int, str]] = set()
    for d in diagnostics:
        for row in d.noqa_rows or (d.location.row,):
            used.add((row, d.code))
    out: List[Diagnostic] = []
    for directive in directives:
        unused, unknown = [], []
        for code, start, end in directive.codes:
            upper = code.upper()
            if not _TL_CODE.match(upper) or upper == UNUSED_NOQA:
                continue
            if upper not in known:
                unknown.append((code, start, end))
            elif upper in enabled and (directive.row, upper) not in used:
                unused.append((code, start, end))
        if not unused and not unknown:
            continue
        parts = []
        if unused:
            parts.append("unused: " + ", ".join(f"`{c}`" for c, _, _ in unused))
        if unknown:
            parts.append("unknown: " + ", ".join(f"`{c}`" for c, _, _ in unknown))
        removed = {start for _, start, _ in unused + unknown}
        fix = Fix(UNUSED_NOQA_FIX, "Remove the unused `noqa` directive" if len(removed) == len(directive.codes)
                  else "Remove the unused codes", _removal(directive, removed))
        begin, stop = Location(directive.row, directive.start + 1), Location(directive.row, directive.end + 1)
        out.append(Diagnostic(
            UNUSED_NOQA, ENGINE_CODES[UNUSED_NOQA][0], f"Unused `noqa` directive ({'; '.join(parts)})",
            path, begin, stop, fix, directive.row, (directive.row,),
        ))
    return out


def _removal(directive: NoqaDirective, removed: Set[int]) -> Tuple[Edit, ...]:
    """Edits removing the codes that start at ``removed`` (the whole directive when that is all
    of them)."""
    row, line = directive.row, directive.line
    kept = [code for code, start, _ in directive.codes if start not in removed]
    if kept:  # only some codes: rewrite the list
        first, last = directive.codes[0][1], directive.codes[-1][2]
        return (Edit(Location(row, first + 1), Location(row, last + 1), ", ".join(kept)),)
    rest = line[directive.end:directive.comment_end]
    if rest.strip():  # `# noqa: TL201 because ...` keeps its words as a comment
        start = directive.start + 1 if directive.start == directive.comment_start else directive.start
        end = directive.end + len(rest) - len(rest.lstrip())
        return (Edit(Location(row, start + 1), Location(row, end + 1), " " if start > directive.start else ""),)
    before = line[:directive.start].rstrip()
    if not before:  # a line holding only the directive goes entirely
        return (Edit(Location(row, 1), Location(row + 1, 1), ""),)
    return (Edit(Location(row, len(before) + 1), Location(row, directive.comment_end + 1), ""),)


# -- --add-noqa -------------------------------------------------------------------------------

def add_noqa(text: str, diagnostics: Sequence[Diagnostic]) -> Tuple[str, int]:
    """``text`` with ``# noqa: CODE`` added for each finding (codes joined into a directive the
    line already has), and how many codes were added. A finding whose lines all end inside a
    string or after a backslash continuation gets none (a comment there would change the code);
    engine codes (TL001-TL004) get none either."""
    from torchlint.rules import ENGINE_CODES

    wanted = [d for d in diagnostics if d.code not in ENGINE_CODES and d.cell is None]
    if not wanted:
        return text, 0
    directives = noqa_directives(text)
    unsafe_rows = _rows_ending_in_strings(text)
    if directives is None or unsafe_rows is None:
        return text, 0
    by_row = {d.row: d for d in directives}
    locator = Locator(text)
    codes_for: Dict[int, List[str]] = {}
    for d in wanted:
        rows = [d.noqa_row or d.location.row] + [r for r in d.noqa_rows if r != d.noqa_row]
        for row in rows:
            line = locator.line(row)
            if row in unsafe_rows or line.endswith("\\"):
                continue
            directive = by_row.get(row)
            if directive is not None and not directive.codes:
                break  # a bare `# noqa` suppresses it already
            codes = codes_for.setdefault(row, [])
            present = {c.upper() for c, _, _ in directive.codes} if directive else set()
            if d.code not in codes and d.code not in present:
                codes.append(d.code)
            break
    spans = []
    added = 0
    for row, codes in codes_for.items():
        if not codes:
            continue
        added += len(codes)
        line = locator.line(row)
        start = locator.offset(Location(row, 1))
        directive = by_row.get(row)
        if directive is not None:  # `# noqa: E501` -> `# noqa: E501, TL201`
            at = start + directive.codes[-1][2]
            spans.append((at, at, ", " + ", ".join(sorted(codes))))
        else:
            at = start + len(line.rstrip())
            spans.append((at, start + len(line), "  # noqa: " + ", ".join(sorted(codes))))
    out, cursor = [], 0
    for begin, end, content in sorted(spans):
        out.append(text[cursor:begin])
        out.append(content)
        cursor = end
    out.append(text[cursor:])
    return "".join(out), added


def _rows_ending_in_strings(text: str) -> Optional[Set[int]]:
    """Rows whose line break is inside a string literal (a comment there would be text)."""
    rows: Set[int] = set()
    fstrings: List[int] = []  # Python 3.12+: f-strings are FSTRING_START ... FSTRING_END
    start_type, end_type = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -1)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                rows.update(range(tok.start[0], tok.end[0]))
            elif tok.type == start_type:
                fstrings.append(tok.start[0])
            elif tok.type == end_type and fstrings:
                rows.update(range(fstrings.pop(), tok.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return rows
