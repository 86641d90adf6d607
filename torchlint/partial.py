"""Parse with libcst only the top-level definitions where a finding can be.

libcst's parser is most of a cold run's cost, and a file that reaches it usually holds its
candidate sites in one or two of its classes or functions: a model file of 2,000 lines whose
one ``nn.Sequential(conv, bn)`` sits in one class. In a batch run, CPython's tree (phase 1 has
it) tells which top-level definitions matter: those for which some kept rule's
``ast_candidate``, asked of that definition and the module's other statements
(``AstIndex.restricted``), is true. The others are replaced by a stub of their header (the
decorators, the ``def``/``class`` line with its bases or signature, then ``...``), so every name
stays bound as before and a class still has its bases; a stub whose name no line libcst reads
spells is left out altogether (``_unnamed_stubs``: a model file's hundred registered factory
functions). Every statement that is not a definition (imports, assignments, ``if __name__ ==
"__main__":``) is always kept.

The text libcst parses is then the file with those bodies cut out; ``Positions`` places each
kept statement at its offset in the real text (``first_lines`` of the kept statements), and a
finding or a fix that would need a position inside a stub, or a statement that cannot be placed
exactly, makes the engine lint the file again from a whole parse (``PartialMismatch``). Only
rules that declare ``statement_local`` allow it (``rules/base.py``); a file with any other
candidate rule is parsed whole, as are files where too little would be cut to pay for the
questions.
"""

from __future__ import annotations

import ast
import bisect
from typing import TYPE_CHECKING, Callable, Collection, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Type, cast

from torchlint.astindex import statement_first_line, statement_groups
from torchlint.positions import PartialMismatch  # raised where positions are read; re-exported for the engine

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.rules.base import Rule

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# Cut only when the bodies left out are at least this many lines (and this share of the file):
# below that the questions and a second statement walk cost about what the parse saves.
MIN_CUT_LINES = 40
MIN_CUT_SHARE = 0.2
# An assignment no other line reads is left out from this many lines on (tables of configs).
MIN_TABLE_LINES = 8
# An editor's walk plan is skipped when the definitions it has no answers for hold more than
# this share of the file's lines (after its first lint, whose answers it keeps).
FRESH_SHARE = 0.5


class Piece(NamedTuple):
    """One top-level statement (or several on one line): its first line (decorators included),
    the line before the next statement begins, the last line of its header when its body is
    left out (0: kept whole) and its own last line; in a class kept, the methods whose bodies
    are left out: (last line of the method's header, its last line) each, in order."""

    first: int
    last: int
    stub_header: int
    end: int
    holes: Tuple[Tuple[int, int], ...] = ()
    #: the line libcst reads instead of the whole statement (``name = ...``), or ""
    replacement: str = ""
    #: a definition left out altogether, stub and all: no line libcst reads names it
    #: (``_unnamed_stubs``)
    dropped: bool = False


class Plan(NamedTuple):
    pieces: Tuple[Piece, ...]
    #: first line of each CPython top-level statement kept (stubs included, the definitions
    #: dropped left out), for ``Positions``
    first_lines: Tuple[int, ...]
    size: int  # len(text) the plan was made for
    #: the codes of the rules that may fire on the file (those whose question said yes): the
    #: only ones run on the partial module
    codes: frozenset = frozenset()

    def kept(self) -> List[Tuple[Piece, bool]]:
        """The pieces libcst reads, in the order of the partial module's statements, each with
        whether the piece after it is dropped (its code then ends where its own last line
        does: ``Positions`` is told so)."""
        pieces = self.pieces
        return [(piece, i + 1 < len(pieces) and pieces[i + 1].dropped)
                for i, piece in enumerate(pieces) if not piece.dropped]


def _end(stmt: ast.stmt) -> int:
    return stmt.end_lineno or stmt.lineno


def plan(tree: ast.Module, text: str, rules: Sequence[Type["Rule"]], index) -> Optional[Plan]:
    """Which top-level definitions libcst must parse for ``rules`` (the file's candidate rules),
    or None: parse the whole file. ``index``: the ``AstIndex`` of ``tree``. The plan runs only
    the rules whose question says yes for the whole file (the engine's prefilter stops asking at
    the first yes); any of them not ``statement_local`` means no plan."""
    body = tree.body
    if len(body) < 2 or "\r" in text or "\f" in text or "\v" in text:
        return None  # line ends a line table of "\n" would get wrong
    total = text.count("\n") + 1
    base = [s for s in body if not isinstance(s, _DEFINITIONS)]
    groups = statement_groups(body)  # statements after `;` stay with their line
    firsts = [statement_first_line(g[0]) for g in groups]
    # Whole-definition cuts first (cheap), the questions only where a cut pays
    candidates = []
    tables = []  # (i, assignment): statements that are not definitions but may be left out too
    for i, group in enumerate(groups):
        stmt = group[0]
        if len(group) == 1 and isinstance(stmt, _DEFINITIONS) and stmt.body:
            header = statement_first_line(stmt.body[0]) - 1
            if header >= stmt.lineno and _end(stmt) - header > 1:
                candidates.append((i, header))
        elif len(group) == 1 and _end(stmt) - stmt.lineno >= MIN_TABLE_LINES and _unread_assignment(stmt, index):
            tables.append((i, stmt))
    if (sum(_end(groups[i][0]) - header for i, header in candidates) + sum(_end(stmt) - stmt.lineno for _, stmt in tables)
            < max(MIN_CUT_LINES, MIN_CUT_SHARE * total)):
        return None
    questions = []  # (rule, its question) for the rules whose question says yes for the file
    for rule in rules:
        question = rule.ast_candidate
        if question is None:
            return None
        if question(index):
            if not rule.statement_local:
                return None
            questions.append((rule, question))
    if not questions:
        return None
    stubs, holes = {}, {}
    for i, header in candidates:
        stmt = groups[i][0]
        restricted = index.restricted(base + [stmt])
        said_yes = [(rule, question) for rule, question in questions if question(restricted)]
        if not said_yes:
            stubs[i] = header
        elif type(stmt) is ast.ClassDef and all(rule.method_local for rule, _ in said_yes):
            found = _method_holes(stmt, base, index, [question for _, question in said_yes])
            if found:
                holes[i] = found
    replaced = {}
    for i, stmt in tables:
        restricted = index.restricted([stmt])  # names still resolve through the whole file
        if not any(question(restricted) for _, question in questions):
            replaced[i] = " = ".join(cast(ast.Name, target).id for target in cast(ast.Assign, stmt).targets) + " = ...\n"
    cut = sum(_end(groups[i][0]) - header for i, header in stubs.items())
    cut += sum(end - header for found in holes.values() for header, end in found)
    cut += sum(_end(groups[i][0]) - groups[i][0].lineno for i in replaced)
    if not (stubs or holes or replaced) or cut < max(MIN_CUT_LINES, MIN_CUT_SHARE * total):
        return None
    pieces = tuple(Piece(first, (firsts[i + 1] - 1) if i + 1 < len(groups) else total, stubs.get(i, 0),
                         _end(groups[i][-1]), holes.get(i, ()), replaced.get(i, "")) for i, first in enumerate(firsts))
    dropped = _unnamed_stubs(groups, pieces, index)
    pieces = tuple(piece._replace(dropped=True) if i in dropped else piece for i, piece in enumerate(pieces))
    first_lines = tuple(statement_first_line(stmt) for i, group in enumerate(groups) if i not in dropped for stmt in group)
    return Plan(pieces, first_lines, len(text), frozenset(rule.code for rule, _ in questions))


def _unnamed_stubs(groups: List[List[ast.stmt]], pieces: Sequence[Piece], index) -> Set[int]:
    """The stubs (by piece) that can be left out altogether: definitions whose name no line
    libcst reads spells, not even in a comment or a string (timm's hundred ``@register_model
    def efficientnet_b0(...)`` next to the one class a rule looks at). A stub only binds its
    name for the statements kept, and the rules' findings there read another definition by
    name alone (``statement_local``); a name the kept code never spells resolves nowhere.
    A stub named in another stub's header (a decorator, a default, a base) is kept when that
    one is, so the links are followed from the lines kept for sure. Left in place: the first
    piece, and a stub whose own trailing lines or those of the piece before it are not blank
    lines or comments at column 0 (libcst hands an indented comment after a body to that
    body: cut out, it would move the piece before it, or the one after, to other lines)."""
    text, starts = index.text, index._lines()

    def plain(piece: Piece) -> bool:  # the lines after the piece's code, up to the next piece
        for row in range(piece.end + 1, piece.last + 1):
            if row > len(starts):
                break
            line = text[starts[row - 1]:starts[row] if row < len(starts) else len(text)]
            if line not in ("", "\n") and not line.startswith("#"):
                return False
        return True

    candidates = {i for i in range(1, len(pieces))
                  if pieces[i].stub_header and plain(pieces[i]) and plain(pieces[i - 1])}
    if not candidates:
        return set()
    firsts = [piece.first for piece in pieces]
    needed: List[int] = []  # stubs named on a line kept whatever is dropped
    named_in: Dict[int, Set[int]] = {}  # stub -> the stubs whose header lines name it
    for i in candidates:
        stmt = groups[i][0]
        name = cast(ast.FunctionDef, stmt).name
        for row in index.word_lines(name):
            j = bisect.bisect_right(firsts, row) - 1
            if j == i:
                continue
            piece = pieces[j] if j >= 0 else None
            if piece is None or row > piece.end:  # before the first piece, or between pieces
                needed.append(i)
                break
            if piece.replacement or (piece.stub_header and row > piece.stub_header):
                continue  # a line libcst does not read
            if any(header < row <= end for header, end in piece.holes):
                continue
            if j in candidates:
                named_in.setdefault(j, set()).add(i)  # read if stub j stays
            else:
                needed.append(i)
                break
    kept: Set[int] = set()
    while needed:  # a stub kept keeps those its header names
        i = needed.pop()
        if i not in kept:
            kept.add(i)
            needed.extend(named_in.get(i, ()))
    return candidates - kept


def _unread_assignment(stmt: ast.stmt, index) -> bool:
    """Is ``stmt`` an assignment to plain names that no other line of the file mentions, not
    even in a comment or string (timm's ``default_cfgs = generate_default_cfgs({...})``, 500
    lines)? Then no rule reads its value (a statement-local rule's finding elsewhere may depend
    on a statement that is not a definition only through the names it binds): when no question
    says yes for it, libcst reads ``default_cfgs = ...`` instead, and the name stays bound."""
    if type(stmt) is not ast.Assign or stmt.col_offset:
        return False
    first, last = stmt.lineno, _end(stmt)
    for target in stmt.targets:
        if type(target) is not ast.Name:
            return False
        if any(line < first or line > last for line in index.word_lines(target.id)):
            return False
    return True


def _method_holes(cls: ast.ClassDef, base: List[ast.stmt], index, questions) -> Tuple[Tuple[int, int], ...]:
    """The methods of ``cls`` (kept for rules that are all ``method_local``) whose bodies can be
    left out: no question says yes when asked of the method, the class's statements that are
    not definitions and ``base``. Only bodies of at least two lines that begin on a line of
    their own, under the header (``def f(a,\n b): return (1 +\n 2)`` keeps its body)."""
    own = [s for s in cls.body if not isinstance(s, _DEFINITIONS)]
    found = []
    for method in cls.body:
        if type(method) is not ast.FunctionDef and type(method) is not ast.AsyncFunctionDef:
            continue
        first = method.body[0]
        header = statement_first_line(first) - 1
        if header < method.lineno or _end(method) - header < 2 or not _begins_its_line(index, first):
            continue
        restricted = index.restricted(base + own + [method])
        if not any(question(restricted) for question in questions):
            found.append((header, _end(method)))
    return tuple(found)


def _begins_its_line(index, stmt: ast.stmt) -> bool:
    """Is ``stmt`` the first thing on its line (only indentation before it)?"""
    starts = index._lines()
    if stmt.lineno > len(starts):
        return False
    start = starts[stmt.lineno - 1]
    before = index.text[start:start + stmt.col_offset]  # col_offset counts UTF-8 bytes: any
    return len(before) == stmt.col_offset and (not before or before.isspace())  # non-ASCII fails


def partial_text(text: str, plan: Plan) -> Optional[str]:
    """The text libcst parses for ``plan``: each left-out body replaced by ``...`` at the body's
    indentation, each dropped definition left out with the lines before it (blank lines and
    comments: ``_unnamed_stubs``), every other line as in ``text``. None when the plan does not
    fit the text."""
    if len(text) != plan.size:
        return None
    lines = text.splitlines(keepends=True)
    if len(lines) != text.count("\n") + (0 if text.endswith("\n") else 1):
        return None  # characters splitlines() takes for line ends: the line numbers would drift
    if plan.pieces[0].first > 1:
        out = lines[: plan.pieces[0].first - 1]
    else:
        out = []
    pieces = plan.pieces
    for i, piece in enumerate(pieces):
        # the lines after the piece's code lead the next piece: left out with a dropped one
        last = piece.end if i + 1 < len(pieces) and pieces[i + 1].dropped else piece.last
        if piece.dropped:
            out.extend(lines[piece.end: last])
            continue
        if piece.replacement:  # an assignment no other line reads
            out.append(piece.replacement)
            out.extend(lines[piece.end: last])
            continue
        if not piece.stub_header:
            at = piece.first
            for header, end in piece.holes:  # methods left out of a class kept
                out.extend(lines[at - 1: header])
                stub = _stub_line(lines, header)
                if stub is None:
                    return None
                out.append(stub)
                at = end + 1
            out.extend(lines[at - 1: last])
            continue
        out.extend(lines[piece.first - 1: piece.stub_header])
        stub = _stub_line(lines, piece.stub_header)
        if stub is None:
            return None
        out.append(stub)
        out.extend(lines[piece.end: last])  # comment and blank lines that may lead the next
    return "".join(out)


def _stub_line(lines: List[str], header: int) -> Optional[str]:
    """``...`` at the indentation of the body that begins after line ``header``; None when
    that line has none."""
    body_line = lines[header] if header < len(lines) else ""
    indent = body_line[: len(body_line) - len(body_line.lstrip(" \t"))]
    return f"{indent}...\n" if indent else None


class KeptRules(frozenset):
    """The codes of the rules phase 1's prefilters kept for a file, with the ``plan`` of the
    top-level definitions libcst must parse for them (None: the whole file), so that phase 3
    needs neither CPython's tree nor the questions again."""

    plan: Optional[Plan] = None

    def __reduce__(self):  # to the pool's workers and back
        return (kept_rules, (frozenset(self), self.plan))


def kept_rules(codes, plan: Optional[Plan]) -> KeptRules:
    kept = KeptRules(codes)
    kept.plan = plan
    return kept


# -- walking only where a rule's visits can matter -----------------------------------------------

def walk_plan(tree: ast.Module, rules: Sequence[Type["Rule"]], index,
              whole: Collection[Type["Rule"]] = (),
              answers: Optional[Dict[tuple, Tuple[Type["Rule"], ...]]] = None) -> Optional[Tuple[Tuple[Type["Rule"], ...], ...]]:
    """For each top-level statement of the module (``astindex.statement_groups``), the ``rules`` whose
    visits there can matter; None: every rule walks every statement (no rule is spared a
    definition). A rule walks every statement that is not a definition and each definition its
    ``walk_question`` (``rules/base.py``), asked of that definition and the statements that are
    not definitions (``AstIndex.restricted``), says yes to; a rule that reads other definitions
    and whose ``ast_candidate`` says no for the whole file walks nothing (it cannot fire). ``whole``: rules
    that must walk everything (project facts may make them fire where no question can see).
    ``answers``: (rules asked, a definition's text) -> the rules that walk it, kept by the caller from an
    earlier plan of the same ``rules`` over the same other statements (``walk_plan_key``): an
    answer depends on nothing else, so an editor asks again only about the definitions typed in;
    and (a rule's code,) -> (the rule,) where the whole file's question said yes, not asked
    again (a yes kept after the rule's last site is gone only makes it walk and find nothing; a
    no is asked at every plan). None too when the definitions without a kept answer hold over
    ``FRESH_SHARE`` of the file (the questions would cost what the walk they spare costs)."""
    groups = statement_groups(tree.body)
    if len(groups) < 2:
        return None
    walking: List[Tuple[Type["Rule"], Optional[Callable[..., bool]]]] = []  # (rule, its question or None: every statement)
    used: Set[tuple] = set()
    for rule in rules:
        if rule.ast_candidate is None or rule in whole:
            walking.append((rule, None))
        elif rule.statement_local and rule.walk_candidate is None:
            # its question, asked of each definition (answers an editor keeps), says where it
            # can fire: asking the whole file too would only spare it the other statements
            walking.append((rule, rule.ast_candidate))
        elif answers is not None and answers.get((rule.code,)):
            # the whole file said yes before, with the same other statements: a yes kept after
            # the edit that removed the rule's last site only makes it walk and find nothing
            # (its question is sound), while asking again costs at every keystroke (TL402's
            # loops: ~3 ms on 2,000 lines); a no is asked again
            walking.append((rule, rule.walk_question()))
            used.add((rule.code,))
        elif rule.ast_candidate(index):
            walking.append((rule, rule.walk_question()))
            if answers is not None:
                answers[(rule.code,)] = (rule,)  # the rules the whole file said yes for
                used.add((rule.code,))
    if len(walking) == len(rules) and all(question is None for _, question in walking):
        return None  # every rule walks every statement
    base = [s for s in tree.body if not isinstance(s, _DEFINITIONS)]
    everyone = tuple(rule for rule, _ in walking)
    asked = tuple(rule.code for rule, question in walking if question is not None)
    # the rules walking may change with the file's other definitions: part of the key
    keys = [(asked, _source(index, g[0])) if len(g) == 1 and isinstance(g[0], _DEFINITIONS) else None
            for g in groups]
    if answers is not None and any(key in answers for key in keys if key is not None):
        # an edit in a definition of most of the file (a 4,000-line class): the questions
        # about it would cost about what walking the rest of the file costs
        fresh = sum(_end(g[0]) - g[0].lineno + 1 for g, key in zip(groups, keys) if key is not None and key not in answers)
        if fresh > FRESH_SHARE * (_end(tree.body[-1]) or 1):
            return None
    plan: List[Tuple[Type["Rule"], ...]] = []
    for group, key in zip(groups, keys):
        stmt = group[0]
        if key is None:
            plan.append(everyone)
            continue
        chosen = answers.get(key) if answers is not None else None
        if chosen is None:
            restricted = index.restricted(base + [stmt])
            chosen = tuple(rule for rule, question in walking if question is None or question(restricted))
            if answers is not None:
                answers[key] = chosen
        plan.append(chosen)
        if answers is not None:
            used.add(key)
    if answers is not None:  # the definitions edited away: their answers are dropped
        for key in [k for k in answers if k not in used]:
            del answers[key]
    return tuple(plan)


def walk_plan_key(tree: ast.Module, rules: Sequence[Type["Rule"]], index, whole: Collection[Type["Rule"]] = ()) -> tuple:
    """What a definition's answer in ``walk_plan`` depends on besides its own text: the rules,
    the statements that are not definitions, the file's name bindings, the torch version."""
    base = tuple(_source(index, s) for s in tree.body if not isinstance(s, _DEFINITIONS))
    bindings = tuple(sorted((name, tuple(sorted(qs))) for name, qs in index.bindings().items()))
    return (tuple(r.code for r in rules), tuple(r.code for r in whole), base, bindings, index.torch_version)


def _source(index, stmt: ast.stmt) -> str:
    """A top-level statement's text, decorators included."""
    starts = index._lines()
    last = _end(stmt)
    return index.text[starts[statement_first_line(stmt) - 1]:starts[last] if last < len(starts) else len(index.text)]
