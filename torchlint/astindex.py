"""The ast-level prefilter: questions about a file's CPython ``ast`` tree, cheap enough to ask
for every file before deciding whether libcst must parse it.

Phase 1 builds CPython's tree of every file anyway (the syntax check, the project summary). A
rule's ``ast_candidate(index)`` says whether the file holds a real candidate site: a word of its
``requires`` tokens in code rather than only in a comment or a docstring, a call of a class
(through import aliases), a method call of a given shape. The index never walks the whole tree:
a C-speed regex finds the lines where a word occurs, and only the nodes whose line range covers
such a line are visited (``nodes_on``), so a question costs a few hundred node visits, not the
tens of thousands of a walk.

Every answer must be sound: False only when the rule cannot fire on the file. When a name is
used in a way the question does not follow (passed as a value, subclassed, stored), the answer
is True.
"""

from __future__ import annotations

import ast
import bisect
import re
from itertools import accumulate
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

Path = Tuple[ast.AST, ...]  # the ancestors of a node, outermost (the Module) first

_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
_WORD_CHAR = re.compile(r"\w")


def identifiers_of(node: ast.AST) -> Tuple[str, ...]:
    """The identifiers a node spells in code (dotted import names give each part)."""
    kind = type(node)
    if kind is ast.Name:
        return (node.id,)
    if kind is ast.Attribute:
        return (node.attr,)
    if kind is ast.alias:
        return tuple(node.name.split(".")) + ((node.asname,) if node.asname else ())
    if kind is ast.keyword or kind is ast.arg:
        return (node.arg,) if node.arg else ()
    if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        return (node.name,)
    if kind is ast.ImportFrom:
        return tuple(node.module.split(".")) if node.module else ()
    if kind in (ast.Global, ast.Nonlocal):
        return tuple(node.names)
    if kind in (ast.MatchAs, ast.MatchStar):
        return (node.name,) if node.name else ()
    if kind is ast.MatchMapping:
        return (node.rest,) if node.rest else ()
    if kind is ast.MatchClass:
        return tuple(node.kwd_attrs)
    return ()


def callee_word(call: ast.Call) -> Optional[str]:
    func = call.func
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute:
        return func.attr
    return None


class AstIndex:
    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.text = text
        self._line_starts: Optional[List[int]] = None
        self._on_line: Dict[int, List[Tuple[ast.AST, Path]]] = {}
        self._starts: Dict[int, List[int]] = {}  # id(statement list) -> first lines

    # -- where words occur -----------------------------------------------------------------------
    def lines_matching(self, pattern: "re.Pattern[str]") -> List[int]:
        """1-based lines where ``pattern`` matches the text (in code, strings or comments)."""
        starts = self._line_starts
        if starts is None:
            starts = self._line_starts = list(accumulate((len(l) + 1 for l in self.text.split("\n")), initial=0))
        lines = []
        for match in pattern.finditer(self.text):
            line = bisect.bisect_right(starts, match.start())
            if not lines or lines[-1] != line:
                lines.append(line)
        return lines

    def nodes_on(self, line: int) -> List[Tuple[ast.AST, Path]]:
        """Every node whose line range covers ``line`` (nodes without positions, such as
        ``arguments`` or ``withitem``, when their parent covers it), with its ancestors."""
        found = self._on_line.get(line)
        if found is not None:
            return found
        found = []
        stack: List[Tuple[ast.AST, Path]] = [(self.tree, ())]
        while stack:
            node, parents = stack.pop()
            path = parents + (node,)
            for child in self._children_covering(node, line):
                found.append((child, path))
                stack.append((child, path))
        self._on_line[line] = found
        return found

    def _children_covering(self, node: ast.AST, line: int) -> Iterator[ast.AST]:
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                if field in _STATEMENT_LISTS and len(value) > 8 and isinstance(value[0], ast.stmt):
                    starts = self._starts.get(id(value))
                    if starts is None:
                        starts = self._starts[id(value)] = [_first_line(s) for s in value]
                    # statements are in order and do not overlap: only the last one starting at
                    # or before the line can cover it
                    i = bisect.bisect_right(starts, line) - 1
                    if i >= 0 and line <= value[i].end_lineno:
                        yield value[i]
                    continue
                for child in value:
                    if isinstance(child, ast.AST) and _covers(child, line):
                        yield child
            elif isinstance(value, ast.AST) and _covers(value, line):
                yield value

    def occurrences(self, words: Iterable[str], substring: bool = False,
                    ignore_case: bool = False) -> Iterator[Tuple[ast.AST, Path, str]]:
        """(node, ancestors, identifier) for each identifier in code equal to one of ``words``
        (or containing one, with ``substring``)."""
        words = tuple(words)
        if not words:
            return
        alternatives = "|".join(re.escape(w) for w in sorted(words))
        flags = re.IGNORECASE if ignore_case else 0
        pattern = re.compile(alternatives if substring else rf"(?<!\w)(?:{alternatives})(?!\w)", flags)
        wanted = {w.lower() for w in words} if ignore_case else set(words)
        seen = set()
        for line in self.lines_matching(pattern):
            for node, parents in self.nodes_on(line):
                if id(node) in seen:
                    continue
                for ident in identifiers_of(node):
                    key = ident.lower() if ignore_case else ident
                    if (any(w in key for w in wanted) if substring else key in wanted):
                        seen.add(id(node))
                        yield node, parents, ident
                        break

    # -- questions rules ask ---------------------------------------------------------------------
    def mentions(self, *words: str, substring: bool = False, ignore_case: bool = False) -> bool:
        """Does one of ``words`` appear as an identifier in code (not only in comments or strings)?"""
        return next(self.occurrences(words, substring, ignore_case), None) is not None

    def calls_of(self, *names: str) -> Optional[List[Tuple[ast.Call, Path]]]:
        """Calls of a class or function named ``names`` (the last part of the callee, as in
        ``nn.Conv2d(...)``), following import aliases (``import X as Y``) and plain assignments
        (``Y = nn.X``). None when one of the names is used in a way this cannot follow (passed as
        a value, a base class, a default): the caller must then answer yes."""
        todo, done = list(names), set()
        calls: List[Tuple[ast.Call, Path]] = []
        while todo:
            batch = [n for n in todo if n not in done]
            todo = []
            if not batch:
                break
            done.update(batch)
            for node, parents, ident in self.occurrences(batch):
                parent = parents[-1]
                kind = type(node)
                if kind is ast.alias:
                    if node.asname and node.asname != ident:
                        todo.append(node.asname)
                    continue
                if kind is ast.ImportFrom or kind is ast.keyword:
                    continue  # a module path; a keyword argument's name
                if kind not in (ast.Name, ast.Attribute):
                    return None  # a def, class or parameter of that name: it may stand for anything
                if kind is ast.Name and type(node.ctx) is not ast.Load:
                    return None  # rebound: it may stand for anything
                if type(parent) is ast.Call and parent.func is node:
                    calls.append((parent, parents[:-1]))
                elif type(parent) is ast.Attribute and parent.value is node:
                    continue  # `DataLoader.something`: an attribute of the class, not the class
                elif type(parent) is ast.Assign and parent.value is node and all(
                        type(t) is ast.Name for t in parent.targets):
                    todo.extend(t.id for t in parent.targets)
                elif _isinstance_argument(node, parents):
                    continue
                else:
                    return None
        return calls

    def called(self, *names: str) -> bool:
        """A call of one of ``names`` may be in the file (see ``calls_of``)."""
        calls = self.calls_of(*names)
        return calls is None or bool(calls)

    def method_calls(self, *methods: str) -> List[Tuple[ast.Call, Path]]:
        """Calls ``<receiver>.<method>(...)`` of one of ``methods``."""
        found = []
        for node, parents, _ in self.occurrences(methods):
            if type(node) is ast.Attribute and type(parents[-1]) is ast.Call and parents[-1].func is node:
                found.append((parents[-1], parents[:-1]))
        return found

    def method_calls_on(self, method: str, *receivers: Tuple[str, ...]) -> bool:
        """A call ``<x>.<r1>.<r2>.<method>(...)`` whose receiver ends in one of ``receivers``'
        attribute chains (``("grad",)``, ``("grad", "data")``)."""
        for call, _ in self.method_calls(method):
            chain, value = [], call.func.value
            while type(value) is ast.Attribute and len(chain) < 4:
                chain.insert(0, value.attr)
                value = value.value
            if any(tuple(chain[-len(r):]) == tuple(r) for r in receivers):
                return True
        return False

    def call_then_method(self, callees: Sequence[str], methods: Sequence[str],
                         through: Sequence[str] = (), named: bool = False) -> bool:
        """A call of one of ``callees`` followed at once by ``.method(...)`` (``torch.zeros(3).cuda()``),
        possibly through calls of ``through`` methods in between (``.float()``). Any callee counts
        when one of ``callees`` is imported under another name or rebound. With ``named``, a
        ``name.method(...)`` counts too when the file calls one of ``callees`` anywhere
        (``x = torch.eye(3)`` ... ``x.cuda()``)."""
        calls = self.calls_of(*callees)
        if calls is not None and not calls:
            return False  # the callees are never called
        wanted = None if calls is None or self._aliased(callees) else set(callees)
        through = set(through)
        for call, _ in self.method_calls(*methods):
            receiver = call.func.value
            if named and type(receiver) is ast.Name:
                return True
            while (type(receiver) is ast.Call and type(receiver.func) is ast.Attribute
                   and receiver.func.attr in through):
                receiver = receiver.func.value
            if type(receiver) is ast.Call and (wanted is None or callee_word(receiver) in wanted):
                return True
        return False

    def _aliased(self, names: Sequence[str]) -> bool:
        return any(type(node) is ast.alias and node.asname and node.asname != ident
                   for node, _, ident in self.occurrences(names))


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        return min(stmt.lineno, min(d.lineno for d in decorators))
    return stmt.lineno


def _covers(node: ast.AST, line: int) -> bool:
    start = getattr(node, "lineno", None)
    if start is None:
        return True  # no position (arguments, withitem, comprehension...): look inside
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        start = min(start, min(d.lineno for d in decorators))
    return start <= line <= node.end_lineno


def _isinstance_argument(node: ast.AST, parents: Path) -> bool:
    """``isinstance(x, Name)`` / ``isinstance(x, (A, Name))``: a type test, never a call."""
    parent = parents[-1]
    if type(parent) is ast.Tuple and len(parents) > 1:
        node, parent = parent, parents[-2]
    return (type(parent) is ast.Call and type(parent.func) is ast.Name
            and parent.func.id in ("isinstance", "issubclass") and node in parent.args[1:])
