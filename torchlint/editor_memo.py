"""An editor's findings of statement-local rules, kept per top-level definition between lints.

A keystroke changes one definition of a buffer; a ``statement_local`` rule's findings in every
other definition cannot change (``rules/base.py``: they depend on that definition's text, the
module's statements that are not definitions, the other definitions' names and headers, the
project facts for rules that read them, and the whole-file model's answers, ``model.py``). So the editor path (``lint_source(..., incremental=True)``) keeps,
for each (rule, definition) it walked, the findings there, keyed by all of that; on the next
lint, a (rule, definition) with a kept answer is taken out of the walk plan and its findings
come back moved to the definition's new first line. A rule that then walks no definition at
all leaves the module's own statements (imports, assignments) too, when they all have kept
answers: a rule may read there, in its visits, what a definition it walks needs. The rules that
are not statement-local walk as before.

A definition is its *chunk*: the lines after the statement before it (comments, blank lines,
decorators) through its last line. Findings are kept only when every row they hold (the
finding, its fix's edits, its noqa rows) lies in that chunk; otherwise the pair is walked again.

A rule that is not statement-local but ``reads_by_name`` (``rules/base.py``) has its findings
over the whole file kept under one key: the texts of the definitions it walks, of the module's
statements and of every definition connected to those by a name (``_Closure``: one names
the other, a ``DataLoader`` is spelled there, a module-level name is declared there), the
other definitions' headers, and the project facts. An edit in a definition none of them is
connected to (most of a long file: a transform, a config helper) leaves the key as it was, and
the rule does not walk at all; its findings come back with each row moved as its statement
moved. A finding with a row in a definition the key leaves out is not kept.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from bisect import bisect_right
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple, Type

from torchlint.astindex import statement_first_line, statement_groups
from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.partial import _DEFINITIONS
from torchlint.project import _child_nodes
from torchlint.torch_api import DATALOADER, canonical_name

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex
    from torchlint.project import FileFacts
    from torchlint.rules.base import Rule

# path -> (key -> (the chunk's first line then, its findings)); the few newest buffers only
_TABLES: Dict[str, Dict[tuple, Tuple[int, Tuple[Diagnostic, ...]]]] = {}
# path -> (a top-level statement's chunk -> what ``_Closure`` needs of it)
_NAMES: Dict[str, Dict[str, "_Names"]] = {}


def recent(tables: Dict, key, keep: int = 8) -> dict:
    """``tables[key]`` (a new empty table the first time), made the newest; only the ``keep``
    newest tables stay (an editor's few open buffers). The engine keeps its walk plans' answers
    and summary records this way too."""
    table = tables.pop(key, None)
    tables[key] = table = {} if table is None else table
    while len(tables) > keep:
        del tables[next(iter(tables))]
    return table


def clear() -> None:
    """Forget every buffer's kept findings (tests)."""
    _TABLES.clear()
    _NAMES.clear()


@dataclasses.dataclass
class Reuse:
    """One lint's use of the kept findings: ``walks`` is the walk plan without the (rule,
    definition) pairs served from them; ``merge`` puts their findings back into the lint's
    and keeps those of the pairs walked."""

    walks: Tuple[Tuple[Type["Rule"], ...], ...]
    _spans: List[Tuple[int, int]]  # each statement's chunk: (first line, last line)
    _served: Dict[int, FrozenSet[str]]  # statement index -> the codes served from kept findings
    _kept: List[Diagnostic]  # their findings, moved
    _to_store: List[Tuple[tuple, int, str]]  # (key, statement index, code) of the pairs walked
    # (key, code) of the rules that walked the module's own statements (``_others``): their
    # findings there are kept under one key per rule, a (first line, findings) per statement
    _to_store_module: List[Tuple[tuple, str]]
    _others: List[int]
    _table: dict
    _used: Set[tuple]  # the keys looked up or stored: the others are dropped
    # (key, code, the statements the key holds) of the ``reads_by_name`` rules that walked:
    # their findings over the whole file are kept when every row lies in one of those statements
    _to_store_file: List[Tuple[tuple, str, FrozenSet[int]]] = dataclasses.field(default_factory=list)

    def merge(self, found: List[Diagnostic]) -> List[Diagnostic]:
        spans, served = self._spans, self._served
        firsts = [first for first, _ in spans]
        by_pair: Dict[Tuple[int, str], List[Diagnostic]] = {}
        out: List[Diagnostic] = []
        for diagnostic in found:
            group = _group_of(diagnostic.location.row, spans, firsts)
            if group is not None and diagnostic.code in served.get(group, ()):
                continue  # a served pair: its kept findings stand (the rule did not walk there)
            out.append(diagnostic)
            if group is not None:
                by_pair.setdefault((group, diagnostic.code), []).append(diagnostic)
        out.extend(self._kept)
        table = self._table
        for key, group, code in self._to_store:
            first, last = spans[group]
            findings = tuple(by_pair.get((group, code), ()))
            if all(_within(d, first, last) for d in findings):
                table[key] = (first, findings)
                self._used.add(key)
        for key, code in self._to_store_module:
            found_there = [tuple(by_pair.get((i, code), ())) for i in self._others]
            if all(_within(d, *spans[i]) for i, findings in zip(self._others, found_there) for d in findings):
                table[key] = tuple((spans[i][0], findings) for i, findings in zip(self._others, found_there))
                self._used.add(key)
        for key, code, kept_statements in self._to_store_file:
            findings = tuple(d for d in found if d.code == code)
            if all(d.cell is None and all(_group_of(row, spans, firsts) in kept_statements for row in _rows(d))
                   for d in findings):
                table[key] = (tuple(firsts), findings)
                self._used.add(key)
        for key in [k for k in table if k not in self._used]:  # definitions edited away
            del table[key]
        return out


def plan(path: str, text: str, tree: ast.Module, index: "AstIndex", body_length: int,
         walks: Optional[Sequence[Sequence[Type["Rule"]]]], rules: Sequence[Type["Rule"]],
         project: Optional["FileFacts"], fingerprint: str, model_digest: str = "") -> Optional[Reuse]:
    """The walk plan ``walks`` (None: every rule walks every statement) without the pairs the
    kept findings serve, or None when the module's statements do not line up with CPython's
    (``body_length``: libcst's module body) or no rule can be served. ``model_digest``: the
    whole-file model's answers (``model.FileModel.digest``), part of every key: a fact a rule
    reads through the model (a loader bound in another function) changes what it finds in a
    definition whose text did not change."""
    local = [r for r in rules if r.statement_local and r.ast_candidate is not None]
    by_name = [r for r in rules if not r.statement_local and r.reads_by_name and r.ast_candidate is not None]
    if not local and not by_name:
        return None
    groups = statement_groups(tree.body)
    if len(groups) != body_length or (walks is not None and len(walks) != body_length):
        return None
    starts = index._lines()
    spans: List[Tuple[int, int]] = []
    previous_end = 0
    for group in groups:
        last = max(s.end_lineno or s.lineno for s in group)
        spans.append((previous_end + 1, last))
        previous_end = last

    def chunk(i: int) -> str:
        first, last = spans[i]
        return text[starts[first - 1]:starts[last] if last < len(starts) else len(text)]

    definitions = [i for i, g in enumerate(groups) if len(g) == 1 and isinstance(g[0], _DEFINITIONS)]
    if not definitions:
        return None
    is_definition = set(definitions)
    texts = [chunk(i) for i in range(len(groups))]
    chunks = {i: texts[i] for i in definitions}
    base = tuple(texts[i] for i in range(len(groups)) if i not in is_definition)
    headers = tuple(_header(text, starts, groups[i][0]) for i in definitions)
    # a digest, not the texts: a buffer's kept answers come from many lints, each with its copy
    common = _digest(fingerprint, path, model_digest, *base, "\0headers", *headers)
    digest = project.digest if project is not None else ""
    contexts: Dict[str, tuple] = {}
    for rule in local:
        contexts[rule.code] = (common, digest if rule.uses_project else None)

    table = recent(_TABLES, path)
    everyone = tuple(rules)
    plan_walks = [tuple(w) for w in walks] if walks is not None else [everyone] * len(groups)
    served: Dict[int, FrozenSet[str]] = {}
    kept: List[Diagnostic] = []
    to_store: List[Tuple[tuple, int, str]] = []
    used: Set[tuple] = set()
    for i in definitions:
        walking = plan_walks[i]
        codes = set()
        for rule in walking:
            if rule.code not in contexts:
                continue
            key = (rule.code, chunks[i], contexts[rule.code])
            entry = table.get(key)
            if entry is None:
                to_store.append((key, i, rule.code))
                continue
            used.add(key)
            codes.add(rule.code)
            shift = spans[i][0] - entry[0]
            kept.extend([_moved(d, shift) for d in entry[1]] if shift else entry[1])
        if codes:
            served[i] = frozenset(codes)
            plan_walks[i] = tuple(r for r in walking if r.code not in codes)
    # The module's own statements: every rule walks them, and a rule may read there what it
    # needs in a definition (an import, a module-level name), so a rule leaves them only when it
    # walks no definition this time and has kept answers for all of them; else it walks them
    # all and its findings there are kept for the next lint.
    # Their texts are all in the key (``common``): one kept answer per rule covers them all.
    others = [i for i in range(len(groups)) if i not in is_definition]
    walking_defs = {rule for i in definitions for rule in plan_walks[i]}
    to_store_module: List[Tuple[tuple, str]] = []
    leaving: Set[str] = set()  # the codes of the rules that leave the module's statements
    for rule in local:
        if not others or rule.code not in contexts:
            continue
        key = (rule.code, "\0module", contexts[rule.code])
        entry = table.get(key) if rule not in walking_defs else None
        if entry is None:
            to_store_module.append((key, rule.code))
            continue
        used.add(key)
        leaving.add(rule.code)
        for i, (first, findings) in zip(others, entry):
            if findings:
                shift = spans[i][0] - first
                kept.extend([_moved(d, shift) for d in findings] if shift else findings)
    if leaving:
        for i in others:
            served[i] = frozenset(leaving)
            plan_walks[i] = tuple(r for r in plan_walks[i] if r.code not in leaving)
    # The rules that read other definitions by name only: one kept answer each for the file
    to_store_file: List[Tuple[tuple, str, FrozenSet[int]]] = []
    if by_name:
        infos = recent(_NAMES, path)
        names = [_names(groups[i], texts[i], infos) for i in range(len(groups))]
        present = set(texts)
        for stale in [t for t in infos if t not in present]:
            del infos[stale]
        aliases = frozenset(name for name, qualified in index.bindings().items()
                            if any(canonical_name(q) == DATALOADER for q in qualified))
        closure = _Closure(definitions, others, groups, texts, names, aliases)
        layout = "".join("d" if i in is_definition else "m" for i in range(len(groups)))
        keys: Dict[FrozenSet[int], Tuple[FrozenSet[int], bytes]] = {}  # seeds -> (what is read, its digest)
        spared: Set[Type["Rule"]] = set()
        for rule in by_name:
            seeds = frozenset(i for i in definitions if rule in plan_walks[i])
            if not seeds and not any(rule in plan_walks[i] for i in others):
                continue  # it walks nothing: it finds nothing
            found = keys.get(seeds)
            if found is None:
                relevant = closure.read_from(seeds)
                found = keys[seeds] = (relevant, _digest(common.hex(), layout, digest, *(
                    chunks[i] if i in relevant else "\0" for i in definitions)))
            relevant, texts_digest = found
            file_key: tuple = (rule.code, "\0file", texts_digest)
            entry = table.get(file_key)
            if entry is None:
                to_store_file.append((file_key, rule.code, relevant.union(others)))
                continue
            used.add(file_key)
            firsts_then, findings = entry
            kept.extend(_remapped(d, firsts_then, spans) for d in findings)
            spared.add(rule)
        if spared:
            plan_walks = [tuple(r for r in walking if r not in spared) for walking in plan_walks]
    return Reuse(tuple(plan_walks), spans, served, kept, to_store, to_store_module, others, table, used,
                 to_store_file)


class _Names(NamedTuple):
    """What ``_Closure`` needs of one top-level statement (the same for the same text)."""

    #: the ids of its ``Name`` nodes (any context), and what its ``global``/``nonlocal`` declare
    names: FrozenSet[str]
    #: of a module statement, the names it binds (``Store`` context)
    stores: FrozenSet[str]
    #: of a definition, whether it may bind a module-level name besides its own: ``global``/
    #: ``nonlocal`` in its body, an assignment expression in its decorators, defaults,
    #: annotations or bases
    binds_outside: bool


def _names(group: Sequence[ast.stmt], text: str, table: Dict[str, _Names]) -> _Names:
    found = table.get(text)
    if found is not None:
        return found
    names: Set[str] = set()
    stores: Set[str] = set()
    binds_outside = False
    stack: List[ast.AST] = list(group)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            names.add(node.id)  # type: ignore[attr-defined]
            if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                stores.add(node.id)  # type: ignore[attr-defined]
            continue
        if kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)  # type: ignore[attr-defined]
            binds_outside = True
            continue
        stack.extend(_child_nodes(node))  # ``ast.walk`` less the context leaves: 2.5x faster
    for stmt in group:
        if isinstance(stmt, _DEFINITIONS):
            header: List[ast.AST] = list(stmt.decorator_list)
            if isinstance(stmt, ast.ClassDef):
                header += stmt.bases + [k.value for k in stmt.keywords]
            else:
                header += [stmt.args, stmt.returns] if stmt.returns is not None else [stmt.args]
            binds_outside = binds_outside or any(type(n) is ast.NamedExpr for part in header for n in ast.walk(part))
    table[text] = found = _Names(frozenset(names), frozenset(stores), binds_outside)
    return found


class _Closure:
    """The definitions a ``reads_by_name`` rule that walks some definitions may read
    (``rules/base.py``), over-approximated: those it walks; every definition whose text spells
    ``DataLoader`` (or names an alias of it) or that may bind a module-level name besides its
    own, one whose name a module statement spells, one that spells a name a module statement
    binds where a ``DataLoader`` is spelled (a smoke test's loader); then, to a fixed point, one
    whose name a definition already in spells (a callee) and one that spells the name of a
    definition already in (a caller). What does not depend on the definitions walked is found
    once per lint; the fixed point is a walk over the links between definitions by name, linear
    in them (a chain of 2,000 functions each calling the one before: 2 ms, not a pass per link)."""

    def __init__(self, definitions: List[int], others: List[int], groups, texts: List[str], names: List[_Names],
                 aliases: FrozenSet[str]) -> None:
        def spells_loader(i: int) -> bool:
            return "DataLoader" in texts[i] or not names[i].names.isdisjoint(aliases)

        module_names: Set[str] = set()  # the names the module's statements spell
        loader_names: Set[str] = set()
        for i in others:
            module_names |= names[i].names
            if spells_loader(i):
                loader_names |= names[i].stores
        self.named: Dict[str, List[int]] = {}  # a definition's name -> the definitions of that name
        for i in definitions:
            self.named.setdefault(groups[i][0].name, []).append(i)
        # definition -> the names of definitions it spells; name -> the definitions spelling it
        self.links: Dict[int, FrozenSet[str]] = {}
        self.spelled_by: Dict[str, List[int]] = {}
        defined = frozenset(self.named)  # a set: `&` walks the smaller side, not every name
        for i in definitions:
            linked = self.links[i] = names[i].names & defined
            for name in linked:
                self.spelled_by.setdefault(name, []).append(i)
        self.always = frozenset(
            i for i in definitions
            if names[i].binds_outside or spells_loader(i) or groups[i][0].name in module_names
            or not names[i].names.isdisjoint(loader_names))
        self.groups = groups

    def read_from(self, seeds: FrozenSet[int]) -> FrozenSet[int]:
        relevant: Set[int] = set()
        todo = [*seeds, *self.always]
        while todo:
            i = todo.pop()
            if i in relevant:
                continue
            relevant.add(i)
            for name in self.links[i]:  # the definitions it names: its callees, classes, factories
                todo.extend(self.named[name])
            todo.extend(self.spelled_by.get(self.groups[i][0].name, ()))  # those naming it: callers
        return frozenset(relevant)


def _digest(*texts: str) -> bytes:
    """What the kept answers' keys hold of the texts they depend on (the texts' lengths too:
    no two lists of texts join alike)."""
    data = hashlib.blake2b(digest_size=16)
    for text in texts:
        data.update(b"%d:" % len(text))
        data.update(text.encode("utf-8", "surrogatepass"))
    return data.digest()


def _header(text: str, starts: List[int], stmt: ast.stmt) -> str:
    """A definition's decorators and ``def``/``class`` line(s), up to its body."""
    first = statement_first_line(stmt)
    body = getattr(stmt, "body", None)
    last = max(stmt.lineno, body[0].lineno - 1) if body else stmt.end_lineno or stmt.lineno
    return text[starts[first - 1]:starts[last] if last < len(starts) else len(text)]


def _group_of(row: int, spans: List[Tuple[int, int]], firsts: List[int]) -> Optional[int]:
    i = bisect_right(firsts, row) - 1
    return i if i >= 0 and row <= spans[i][1] else None


def _end_row(start: Location, end: Location) -> int:
    """The row an end location moves with: a range that ends at the start of a line (a deleted
    line's edit: the statement's last line through the next line's column 1) ends with the line
    before it, whatever comes after; an empty range (an insertion) stays with its row."""
    return end.row - 1 if end.column == 1 and end.row > start.row else end.row


def _rows(d: Diagnostic) -> List[int]:
    """Every row a finding holds: its range, its noqa rows, its fix's edits (``_end_row``)."""
    rows = [d.location.row, _end_row(d.location, d.end_location), *d.noqa_rows]
    if d.noqa_row is not None:
        rows.append(d.noqa_row)
    if d.fix is not None:
        for edit in d.fix.edits:
            rows += (edit.location.row, _end_row(edit.location, edit.end_location))
    return rows


def _within(d: Diagnostic, first: int, last: int) -> bool:
    return d.cell is None and all(first <= row <= last for row in _rows(d))


def _remapped(d: Diagnostic, firsts_then: Sequence[int], spans: List[Tuple[int, int]]) -> Diagnostic:
    """``d``, kept when the statements began at ``firsts_then``, with each row moved as the
    statement holding it moved (the key held those statements' texts: the same columns)."""
    def move(row: int) -> int:
        i = bisect_right(firsts_then, row) - 1
        return row + spans[i][0] - firsts_then[i]

    return _rows_moved(d, move)


def _moved(d: Diagnostic, shift: int) -> Diagnostic:
    """``d`` ``shift`` lines down (its text is the same, so its columns are)."""
    return _rows_moved(d, shift.__add__)


def _rows_moved(d: Diagnostic, row_of: Callable[[int], int]) -> Diagnostic:
    """``d`` with each row at ``row_of(row)`` (an end location moves with its ``_end_row``)."""
    def at(location: Location) -> Location:
        return Location(row_of(location.row), location.column)

    def end_at(start: Location, end: Location) -> Location:
        anchor = _end_row(start, end)
        return Location(row_of(anchor) + end.row - anchor, end.column)

    fix = d.fix
    if fix is not None:
        fix = Fix(fix.applicability, fix.message, tuple(
            Edit(at(e.location), end_at(e.location, e.end_location), e.content, e.cell) for e in fix.edits))
    return dataclasses.replace(
        d, location=at(d.location), end_location=end_at(d.location, d.end_location), fix=fix,
        noqa_row=row_of(d.noqa_row) if d.noqa_row is not None else None,
        noqa_rows=tuple(row_of(row) for row in d.noqa_rows))
