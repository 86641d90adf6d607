"""The ast-level prefilter: questions about a file's CPython ``ast`` tree, cheap enough to ask
for every file before deciding whether libcst must parse it.

Phase 1 builds CPython's tree of every file anyway (the syntax check, the project summary). A
rule's ``ast_candidate(index)`` says whether the file holds a real candidate site: a word of its
``requires`` tokens in code rather than only in a comment or a docstring, a call of a class
(through import aliases), a method call of a given shape. The index never walks the whole tree:
a C-speed regex finds the lines where a word occurs, and only the nodes whose line range covers
such a line are visited (``nodes_on``), so a question costs a few hundred node visits, not the
tens of thousands of a walk.

Names are followed as the semantic model resolves them (``bindings``, ``resolves``,
``qualified_calls``): every import of ``torch``/``torchvision``/``functorch`` and every ``x = <name
or attribute>`` of such a name, in any scope, so ``th.load(f)`` under ``import torch as th`` is a
call of ``torch.load`` and ``json.load(f)`` is not. The engine asks the rules in turn and stops at
the first yes (the file goes to libcst then anyway).

Every answer must be sound: False only when the rule cannot fire on the file. When a name is
used in a way the question does not follow (passed as a value, subclassed, stored), the answer
is True.
"""

from __future__ import annotations

import ast
import bisect
import re
import sys
from functools import lru_cache
from typing import Callable, Collection, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from torchlint.project import child_fields
from torchlint.source import line_starts  # noqa: F401  (the rules and tests import it from here)
from torchlint.torch_api import STAR_EXPORTS, canonical_name

Path = Tuple[ast.AST, ...]  # the ancestors of a node, outermost (the Module) first

_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_WORD_CHAR = re.compile(r"\w")
# What Python allows between two tokens (`x . to (`): whitespace, newlines (inside brackets),
# backslash continuations and, inside brackets, comments. Regexes that must stay sound use it
# (`GAP`, also the rules' `requires` tokens: ``rules/base.py``). A comment runs to the end of its
# line (the lookahead): each gap has one parse, so searches stay linear even on `. ########` (a
# comment that could be split many ways backtracks). A comment is read for at most
# MAX_GAP_COMMENT characters: every place a search tries a gap ending in a comment reads that
# comment to its end, so a long line of `. #` (in a comment or a string) would cost its length
# once per `.` (a 200 KB line took 47 s). The cost of that bound: a comment longer than that
# between a dot and a name, or a name and its `(`, inside brackets, is not seen through.
MAX_GAP_COMMENT = 1000
# Possessive (``{0,N}+``, Python 3.11+) where the interpreter has it; before 3.11 a plain bound
# matches the same (the lookahead fails on any shorter comment), backtracking to fail.
_GAP_ITEMS = r"\s|\\(?=\r?\n)|#[^\r\n]{0,%d}%s(?![^\r\n])" % (MAX_GAP_COMMENT, "+" if sys.version_info >= (3, 11) else "")
GAP = f"(?:{_GAP_ITEMS})*"
# Between `=` and the first name of its value, opening brackets too. Keyword arguments and `==`
# match as well: the nodes on those lines are then looked at and dropped.
_GAP = f"(?:{_GAP_ITEMS}|\\()*"
# The rest of an attribute chain (`.cuda.empty_cache`, dots and names as Python spaces them) and
# a call or subscript on the same line.
_CHAIN_CALLED = re.compile(rf"(?:{GAP}\.{GAP}[A-Za-z_]\w*)*[ \t]*[(\[]")
# Packages whose names the qualified-name questions follow (the roots of every name rules resolve).
_ROOTS = ("torch", "torchvision", "functorch")


# The pattern nodes of ``match`` (Python 3.10+; absent from 3.9's ``ast``, where no tree has them).
_MATCH_NAMED = tuple(getattr(ast, name) for name in ("MatchAs", "MatchStar") if hasattr(ast, name))
_MATCH_MAPPING = getattr(ast, "MatchMapping", None)
_MATCH_CLASS = getattr(ast, "MatchClass", None)


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
    if kind in _MATCH_NAMED:
        return (node.name,) if node.name else ()
    if kind is _MATCH_MAPPING:
        return (node.rest,) if node.rest else ()
    if kind is _MATCH_CLASS:
        return tuple(node.kwd_attrs)
    return ()


def through_calls(receiver: ast.AST, methods: Collection[str]) -> ast.AST:
    """The receiver of a chain of calls of ``methods``: ``x`` for ``x.float().view(3)``."""
    while type(receiver) is ast.Call and type(receiver.func) is ast.Attribute and receiver.func.attr in methods:
        receiver = receiver.func.value
    return receiver


class AstIndex:
    def __init__(self, tree: ast.Module, text: str, torch_version: Optional[Tuple[int, int]] = None) -> None:
        self.tree = tree
        self.text = text
        #: the target torch version when the caller knows it (None: any version)
        self.torch_version = torch_version
        self._bindings: Optional[Dict[str, Set[str]]] = None
        self._kids: Dict[int, list] = {}  # id(node) -> its children with their line ranges
        self._word_cache: Dict[tuple, List[int]] = {}  # (word, call, attribute) or (pattern, flags, None)
        self._star: List[str] = []
        self._line_starts: Optional[List[int]] = None
        self._on_line: Dict[int, List[Tuple[ast.AST, Path]]] = {}
        self._restricted_roots: List[ast.Module] = []
        #: for a restricted index, the first and last lines of its statements, in order
        self._spans: Optional[Tuple[List[int], List[int]]] = None
        self._whole: Optional["AstIndex"] = None  # for a restricted index: the file's
        self._loader_targets: Optional[tuple] = None  # (names, ids of DataLoader calls) or (None, None)

    def restricted(self, statements: Sequence[ast.stmt]) -> "AstIndex":
        """An index of the same text whose questions see only ``statements`` (top-level
        statements of this tree): a word elsewhere counts as if it were in a comment, but names
        resolve through the whole file's bindings. The text's line table, word positions and
        bindings are shared, so asking per statement costs the node visits alone
        (``partial.py``)."""
        root = ast.Module(body=sorted(statements, key=lambda s: s.lineno), type_ignores=[])  # in order: bisected
        self._restricted_roots.append(root)  # alive: ``_kids`` is keyed by node ids
        index = AstIndex(root, self.text, self.torch_version)
        index._word_cache, index._line_starts, index._kids = self._word_cache, self._lines(), self._kids
        index._restricted_roots = self._restricted_roots
        # the whole file's name bindings (they are "in any scope" anyway): computed once
        index._bindings, index._star = self.bindings(), self._star
        spans = sorted((statement_first_line(s), s.end_lineno or s.lineno) for s in statements)
        index._spans = ([a for a, _ in spans], [b for _, b in spans])
        index._whole = self.whole()
        return index

    def whole(self) -> "AstIndex":
        """The index of the whole file (this one, unless it is restricted)."""
        return self._whole if self._whole is not None else self

    # -- where words occur -----------------------------------------------------------------------
    def lines_matching(self, pattern: "re.Pattern[str]", at_end: bool = False) -> List[int]:
        """1-based lines where ``pattern`` matches the text (in code, strings or comments): where
        a match starts, or with ``at_end`` where it ends."""
        key = (pattern.pattern, pattern.flags, at_end or None)
        lines = self._word_cache.get(key)  # shared with the restricted indexes
        if lines is not None:
            return lines
        starts = self._lines()
        lines = []
        for match in pattern.finditer(self.text):
            line = bisect.bisect_right(starts, match.end() - 1 if at_end else match.start())
            if not lines or lines[-1] != line:
                lines.append(line)
        self._word_cache[key] = lines
        return lines

    def nodes_on(self, line: int) -> List[Tuple[ast.AST, Path]]:
        """Every node whose line range covers ``line`` (nodes without positions, such as
        ``arguments`` or ``withitem``, when their parent covers it), with its ancestors."""
        found = self._on_line.get(line)
        if found is not None:
            return found
        if self._spans is not None:  # a restricted index: most lines are outside its statements
            firsts, lasts = self._spans
            i = bisect.bisect_right(firsts, line) - 1
            if i < 0 or line > lasts[i]:
                return []
        found = []
        stack: List[Tuple[ast.AST, Path]] = [(self.tree, ())]
        kids_of, bisect_right = self._kids, bisect.bisect_right
        while stack:
            node, parents = stack.pop()
            kids = kids_of.get(id(node))
            if kids is None:
                kids = kids_of[id(node)] = _child_ranges(node)
            if not kids:
                continue
            path = parents + (node,)
            for child, start, end in kids:
                if child is None:  # a long statement list: (None, first lines, statements)
                    # statements are in order and do not overlap: only the last one starting at
                    # or before the line can cover it
                    i = bisect_right(start, line) - 1
                    if i < 0 or line > end[i].end_lineno:
                        continue
                    child = end[i]
                elif not start <= line <= end:
                    continue
                found.append((child, path))
                stack.append((child, path))
        self._on_line[line] = found
        return found

    def _lines(self) -> List[int]:
        starts = self._line_starts
        if starts is None:
            starts = self._line_starts = line_starts(self.text)
        return starts

    def word_lines(self, word: str, call: bool = False, attribute: bool = False) -> List[int]:
        """1-based lines where ``word`` occurs as a whole identifier (in code, strings or
        comments), found with ``str.find`` (a regex with look-arounds is ten times slower).
        ``call``: only where ``(`` follows (spaces, continuations, comments between, as Python
        allows); ``attribute``: only where ``.`` precedes it (or may, through a comment)."""
        key = (word, call, attribute)
        lines = self._word_cache.get(key)
        if lines is not None:
            return lines
        text, starts, find = self.text, self._lines(), self.text.find
        size, lines = len(word), []
        i = find(word)
        while i >= 0:
            end = i + size
            if ((i == 0 or not is_word(text[i - 1])) and (end >= len(text) or not is_word(text[end]))
                    and (not call or _CALL_AFTER.match(text, end)) and (not attribute or _dot_before(text, i))):
                line = bisect.bisect_right(starts, i)
                if not lines or lines[-1] != line:
                    lines.append(line)
            i = find(word, end)
        self._word_cache[key] = lines
        return lines

    def attribute_lines(self, words: Collection[str], call: bool = False) -> List[int]:
        """1-based lines where one of ``words`` is an attribute name: after ``.`` and what Python
        allows between (whitespace, continuations, comments: ``GAP``), and with ``call`` called
        (``_CALL_AFTER``). One C-speed regex for all the words: a ``str.find`` per word rescans
        the text for each, and a common word (``to``, ``norm``) stops at every English use."""
        words = tuple(sorted(set(words)))
        return self.lines_matching(_attribute_pattern(words, call), at_end=True) if words else []

    def occurrences(self, words: Iterable[str], substring: bool = False,
                    ignore_case: bool = False, lines: Optional[Iterable[int]] = None) -> Iterator[Tuple[ast.AST, Path, str]]:
        """(node, ancestors, identifier) for each identifier in code equal to one of ``words``
        (or containing one, with ``substring``), on ``lines`` when the caller narrowed them."""
        words = tuple(words)
        if not words:
            return
        if lines is None:
            if substring or ignore_case:
                alternatives = "|".join(re.escape(w) for w in sorted(words))
                lines = self.lines_matching(re.compile(alternatives, re.IGNORECASE if ignore_case else 0))
            else:
                lines = sorted({line for w in words for line in self.word_lines(w)})
        wanted = {w.lower() for w in words} if ignore_case else set(words)
        seen = set()
        for line in lines:
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
        # only the lines where a method word is an attribute called (`to` is a word of most comments)
        lines = self.attribute_lines(methods, call=True)
        for node, parents, _ in self.occurrences(methods, lines=lines):
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

    # the module functions below, reachable from a rule's ast_candidate without an import
    keyword = staticmethod(lambda call, name: keyword(call, name))
    double_star = staticmethod(lambda call: double_star(call))
    literal = staticmethod(lambda node: literal(node))

    def version_below(self, version: Tuple[int, int]) -> bool:
        """May the target torch version be below ``version`` (always, when unknown)?"""
        return self.torch_version is None or self.torch_version < version

    def version_at_least(self, version: Tuple[int, int]) -> bool:
        return self.torch_version is None or self.torch_version >= version

    # -- what names stand for (an over-approximation of semantic.resolve_at) --------------------
    def bindings(self) -> Dict[str, Set[str]]:
        """name -> the qualified names under ``torch``/``torchvision``/``functorch`` it may stand
        for, in any scope: imports (``import torch.nn as nn``, ``from torch import load as L``)
        and assignments of such names (``ec = torch.cuda.empty_cache``), followed to a fixed
        point. Every binding ``semantic.resolve_at`` can resolve through is here (it resolves a
        name only through imports and ``x = <name or attribute>`` assignments; relative imports
        and other bindings resolve to nothing)."""
        if self._bindings is not None:
            return self._bindings
        found: Dict[str, Set[str]] = {}
        if "torch" not in self.text and self.text.isascii():  # every root spells it (NFKC aside)
            self._bindings = found
            return found
        seen = set()
        ascii_text = self.text.isascii()
        for line in self.word_lines("import"):
            if ascii_text and "torch" not in self._logical_line(line):
                continue  # `from .utils import x`: no root named where the statement's names are
            for node, _ in self.nodes_on(line):
                kind = type(node)
                if (kind is not ast.Import and kind is not ast.ImportFrom) or id(node) in seen:
                    continue
                seen.add(id(node))
                if kind is ast.Import:
                    for alias in node.names:
                        if alias.name.split(".", 1)[0] not in _ROOTS:
                            continue
                        if alias.asname:
                            found.setdefault(alias.asname, set()).add(alias.name)
                        else:
                            top = alias.name.split(".", 1)[0]
                            found.setdefault(top, set()).add(top)
                elif node.level == 0 and node.module and node.module.split(".", 1)[0] in _ROOTS:
                    for alias in node.names:
                        if alias.name == "*":
                            self._star.append(node.module)
                        else:
                            found.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
        todo = set(found)
        for _ in range(8):  # chains of assignments; each round follows one more link
            if not todo:
                break
            alternatives = "|".join(re.escape(w) for w in sorted(todo))
            pattern = re.compile(rf"={_GAP}(?:{alternatives})(?!\w)")
            todo = set()
            for line in self._match_end_lines(pattern, values_only=True):
                for node, parents in self.nodes_on(line):
                    if type(node) is not ast.Name or node.id not in found or type(node.ctx) is not ast.Load:
                        continue
                    chain, i = [node.id], len(parents) - 1
                    value: ast.AST = node
                    while i >= 0 and type(parents[i]) is ast.Attribute and parents[i].value is value:
                        value = parents[i]
                        chain.append(value.attr)
                        i -= 1
                    if i < 0:
                        continue
                    owner = parents[i]
                    if type(owner) is ast.Assign and owner.value is value:
                        targets = [t.id for t in owner.targets if type(t) is ast.Name]
                    elif type(owner) in (ast.AnnAssign, ast.NamedExpr) and owner.value is value:
                        targets = [owner.target.id] if type(owner.target) is ast.Name else []
                    else:
                        continue
                    rest = ".".join(chain[1:])
                    values = {f"{q}.{rest}" if rest else q for q in found[node.id]}
                    for target in targets:
                        known = found.setdefault(target, set())
                        if not values <= known:
                            known |= values
                            todo.add(target)
        self._bindings = found
        return found

    def _logical_line(self, line: int) -> str:
        """The text of ``line`` with the lines backslash continuations join to it (an import's
        module and names sit there, or inside its brackets on the same line as ``import``)."""
        starts, text = self._lines(), self.text
        first, last = line, line
        while first > 1 and text[starts[first - 2]:starts[first - 1]].rstrip("\r\n").endswith("\\"):
            first -= 1
        while last < len(starts) - 1 and text[starts[last - 1]:starts[last]].rstrip("\r\n").endswith("\\"):
            last += 1
        return text[starts[first - 1]:starts[last]]

    def _match_end_lines(self, pattern: "re.Pattern[str]", values_only: bool = False) -> List[int]:
        """1-based lines where a match of ``pattern`` ends (the name after a multi-line gap), for
        matches of an ``=`` that is not part of ``==``, ``!=``, ``<=``, ``>=``. ``values_only``:
        not where the name's attribute chain is called or subscripted on the same line
        (``x = nn.Linear(3, 4)``, most matches): the assigned value is then no name or attribute."""
        starts = self._lines()
        text = self.text
        called = _CHAIN_CALLED.match
        return sorted({bisect.bisect_right(starts, m.end() - 1) for m in pattern.finditer(text)
                       if (m.start() == 0 or text[m.start() - 1] not in "=!<>")
                       and not (values_only and called(text, m.end()))})

    def resolves(self, node: ast.AST, wanted: Callable[[str], bool]) -> bool:
        """May the Name/Attribute chain ``node`` resolve to a qualified name ``wanted`` accepts?"""
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return False  # `f().x`, `self.x`...: rules resolve only dotted names
        parts.reverse()
        rest = ".".join(parts)
        heads = set(self.bindings().get(node.id, ()))
        heads.update(f"{m}.{node.id}" for m in self._star if node.id in STAR_EXPORTS.get(m, ()))
        return any(wanted(canonical_name(f"{q}.{rest}" if rest else q)) for q in heads)

    def qualified_calls(self, names: Collection[str], decorators: bool = False) -> List[Tuple[ast.AST, Path]]:
        """Calls whose callee may resolve to one of the qualified ``names`` (and, with
        ``decorators``, such names used as a decorator without a call)."""
        found = []
        for node, parents, wanted in self._spellings_of(names, call=not decorators):
            parent = parents[-1]
            if type(parent) is ast.Call and parent.func is node:
                if self.resolves(node, wanted):
                    found.append((parent, parents[:-1]))
            elif decorators and node in getattr(parent, "decorator_list", ()) and self.resolves(node, wanted):
                found.append((node, parents))
        return found

    def references(self, names: Collection[str]) -> bool:
        """Is a name or attribute chain that may resolve to one of the qualified ``names`` read
        anywhere in this index's statements: called, passed on, a parameter's default
        (``norm_layer=nn.BatchNorm2d``), an alias's value? Not the class of a type test
        (``isinstance(m, nn.BatchNorm2d)``: nothing is built or passed there). An
        over-approximation, as ``resolves``."""
        return any(not _isinstance_argument(node, parents) and self.resolves(node, wanted)
                   for node, parents, wanted in self._spellings_of(names, call=False))

    def _spellings_of(self, names: Collection[str], call: bool) -> Iterator[Tuple[ast.AST, Path, Callable[[str], bool]]]:
        """(node, ancestors, the test of ``names``) for each ``Name``/``Attribute`` spelling the
        last part of one of the qualified ``names`` or a local name bound to one, on the lines
        where it may stand (with ``call``, called): what ``resolves`` is then asked about."""
        names = frozenset(names)
        if not names:
            return
        wanted = names.__contains__
        bindings = self.bindings()
        words = {n.rsplit(".", 1)[-1] for n in names}
        words.update(local for local, qs in bindings.items() if any(wanted(canonical_name(q)) for q in qs))
        starred = {w for m in self._star for w in STAR_EXPORTS.get(m, ())}
        # a word no binding names can only be an attribute (`torch.load`), never a bare name
        bare = [w for w in words if w in bindings or w in starred]
        lines = sorted({*self.attribute_lines(words.difference(bare), call=call),
                        *(line for w in bare for line in self.word_lines(w, call=call))})
        for node, parents, _ in self.occurrences(words, lines=lines):
            if type(node) is ast.Name or type(node) is ast.Attribute:
                yield node, parents, wanted

    def keyword_calls(self, *keywords: str) -> List[Tuple[ast.Call, ast.keyword, Path]]:
        """(call, keyword, ancestors of the call) for calls passing one of ``keywords`` by name."""
        found = []
        for node, parents, _ in self.occurrences(keywords):
            if type(node) is ast.keyword and type(parents[-1]) is ast.Call:
                found.append((parents[-1], node, parents[:-1]))
        return found

    def loops(self) -> List[Tuple[ast.AST, Path]]:
        """Every ``for``, ``async for`` and ``while`` statement, with its ancestors (found from
        the lines where the keyword occurs: a loop spans the line of its keyword)."""
        found, seen = [], set()
        for word in ("for", "while"):
            for line in self.word_lines(word):
                for node, parents in self.nodes_on(line):
                    if type(node) in _LOOPS and id(node) not in seen:
                        seen.add(id(node))
                        found.append((node, parents))
        return found

    def loader_loops(self) -> bool:
        """A ``for`` whose iterable may be a data loader as ``heuristics.is_loader_expression``
        sees one: a name with ``loader`` in it, a ``DataLoader(...)`` call, or a name some
        statement of the file (any, also outside a restricted index) assigns a ``DataLoader``
        call to; any ``for`` when the file's ``DataLoader`` calls cannot be followed."""
        whole = self.whole()
        if whole._loader_targets is None:
            calls = whole.calls_of("DataLoader")
            if calls is None:
                whole._loader_targets = (None, None)
            else:
                names: Set[str] = set()
                for call, parents in calls:
                    parent = parents[-1]
                    if type(parent) in (ast.Assign, ast.AnnAssign) and parent.value is call:
                        targets = parent.targets if type(parent) is ast.Assign else [parent.target]
                        names.update(i for t in targets for n in ast.walk(t) for i in identifiers_of(n))
                whole._loader_targets = (names, {id(call) for call, _ in calls})
        names, calls = whole._loader_targets
        for loop, _ in self.loops():
            if type(loop) is ast.While:
                continue
            if names is None:
                return True
            for node in ast.walk(loop.iter):
                if id(node) in calls or any("loader" in i.lower() or i in names for i in identifiers_of(node)):
                    return True
        return False

    def stepping_loops(self) -> bool:
        """A loop around a ``.backward(...)`` or ``.step(...)`` call (``loops.calls_gradient_step``)."""
        return any(any(type(p) in _LOOPS for p in parents) for _, parents in self.method_calls("backward", "step"))

    def backward_calls(self) -> bool:
        """``x.backward()``/``x.manual_backward()`` or ``torch.autograd.backward(t)`` somewhere."""
        return bool(self.method_calls("backward", "manual_backward")
                    or self.qualified_calls(("torch.autograd.backward",)))

    def module_init_candidate(self, bases: Collection[str]) -> bool:
        """An ``__init__`` of a class with a base resolving to one of ``bases`` that assigns a
        ``self`` attribute or calls ``self.register_*``/``add_module`` and either never calls
        ``super().__init__(...)``/``Base.__init__(self, ...)`` or does so on a line at or after
        such a store (TL905's shape). Nested functions, classes and lambdas are not looked into.
        Sound: the rule's first store precedes its first init call in source order."""
        wanted = frozenset(bases).__contains__
        for node, parents, _ in self.occurrences(("__init__",)):
            if type(node) not in (ast.FunctionDef, ast.AsyncFunctionDef) or type(parents[-1]) is not ast.ClassDef:
                continue
            cls = parents[-1]
            if node not in cls.body or not any(self.resolves(b, wanted) for b in cls.bases):
                continue
            if _init_may_store_first(node):
                return True
        return False


UNKNOWN = object()
# `(` after the callee, through a closing bracket of a parenthesised callee: `(torch.load)(f)`
_CALL_AFTER = re.compile(f"(?:{_GAP_ITEMS}|\\))*\\(")


@lru_cache(maxsize=64)
def _attribute_pattern(words: Tuple[str, ...], call: bool) -> "re.Pattern[str]":
    """``.`` then one of ``words`` as a whole identifier (``attribute_lines``); with ``call``,
    followed by ``(`` as ``_CALL_AFTER`` allows."""
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    after = f"(?={_CALL_AFTER.pattern})" if call else ""
    return re.compile(rf"\.{GAP}(?:{alternatives})(?!\w){after}")  # no bracket between a dot and its name




def is_word(char: str) -> bool:
    """What ``\\w`` matches: a letter, a digit or ``_`` (Unicode ones too)."""
    return char.isalnum() or char == "_"


def _dot_before(text: str, i: int) -> bool:
    """Is the identifier at ``i`` preceded by ``.`` (whitespace and continuations between), or
    may it be (a line crossed on the way back could end in a comment)?"""
    crossed = False
    i -= 1
    while i >= 0 and text[i] in " \t\r\n\\\f":
        crossed = crossed or text[i] == "\n"
        i -= 1
    if i >= 0 and text[i] == ".":
        return True
    if crossed:  # `x.  # comment` then the name on the next line
        line_start = text.rfind("\n", 0, i + 1) + 1
        return "#" in text[line_start:i + 1]
    return False


def keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    """The value passed to ``name`` by keyword, or None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def double_star(call: ast.Call) -> bool:
    """Does the call pass ``**kwargs`` (which may carry any keyword)?"""
    return any(kw.arg is None for kw in call.keywords)


def literal(node: Optional[ast.AST]):
    """The value of a constant (True, False, None, numbers, strings), else ``UNKNOWN``."""
    return node.value if type(node) is ast.Constant else UNKNOWN


def statement_first_line(stmt: ast.stmt) -> int:
    """The first line of a statement of CPython's tree, its decorators included."""
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        return min(stmt.lineno, min(d.lineno for d in decorators))
    return stmt.lineno


def statement_groups(body: Sequence[ast.stmt]) -> List[List[ast.stmt]]:
    """Top-level statements as libcst's module body holds them, and as a text can be cut between
    them: a statement that starts on a line of the one before (``a = 1; b = 2``, or ``x = (1,\n
    2); y = 3``) is one with it."""
    groups: List[List[ast.stmt]] = []
    for stmt in body:
        if groups and statement_first_line(stmt) <= (groups[-1][-1].end_lineno or groups[-1][-1].lineno):
            groups[-1].append(stmt)
        else:
            groups.append([stmt])
    return groups


def _child_ranges(node: ast.AST) -> list:
    """(child, first line, last line) of each child (0 and a huge line for nodes without a
    position: arguments, withitem, comprehension...), statement lists of more than 8 as
    (None, first lines, statements)."""
    kids = []
    for field in child_fields(type(node)):  # the context and operator leaves hold nothing asked for
        value = getattr(node, field, None)
        if type(value) is list:
            if field in _STATEMENT_LISTS and len(value) > 8 and isinstance(value[0], ast.stmt):
                kids.append((None, [statement_first_line(s) for s in value], value))
                continue
            for child in value:
                if isinstance(child, ast.AST):
                    kids.append(_range(child))
        elif isinstance(value, ast.AST):
            kids.append(_range(value))
    return kids


def _range(node: ast.AST) -> tuple:
    start = getattr(node, "lineno", None)
    if start is None:
        return node, 0, 1 << 60  # no position: look inside
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        start = min(start, min(d.lineno for d in decorators))
    return node, start, node.end_lineno


def _isinstance_argument(node: ast.AST, parents: Path) -> bool:
    """``isinstance(x, Name)`` / ``isinstance(x, (A, Name))``: a type test, never a call."""
    parent = parents[-1]
    if type(parent) is ast.Tuple and len(parents) > 1:
        node, parent = parent, parents[-2]
    return (type(parent) is ast.Call and type(parent.func) is ast.Name
            and parent.func.id in ("isinstance", "issubclass") and node in parent.args[1:])


_REGISTERING = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _is_self_attribute(node: ast.AST) -> bool:
    return type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self"


def _is_init_call(node: ast.AST) -> bool:
    """``super().__init__(...)`` / ``super(C, self).__init__(...)`` / ``Base.__init__(self, ...)``."""
    if type(node) is not ast.Call or type(node.func) is not ast.Attribute or node.func.attr != "__init__":
        return False
    receiver = node.func.value
    return ((type(receiver) is ast.Call and type(receiver.func) is ast.Name and receiver.func.id == "super")
            or bool(node.args and type(node.args[0]) is ast.Name and node.args[0].id == "self"))


def _init_may_store_first(init: ast.AST) -> bool:
    body = init.body
    # Most ``__init__`` bodies open with the init call (after a docstring): every statement after
    # it starts on a later line, so its stores and init calls cannot change the answer (a store
    # counts when on a line at or before the first init call); only the opening is scanned.
    k = 1 if body and type(body[0]) is ast.Expr and type(body[0].value) is ast.Constant else 0
    if (k < len(body) and type(body[k]) is ast.Expr and _is_init_call(body[k].value)
            and (k + 1 == len(body) or body[k + 1].lineno > (body[k].end_lineno or body[k].lineno))):
        body = body[:k + 1]
    first_init_call = None  # line of the first super().__init__() / Base.__init__(self)
    assigns = False  # any `self.x = ...` / `self.x: T` / `self.x += ...`
    stores: List[int] = []  # lines of `self.x = <value>` and `self.register_*(...)`
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in _NESTED:
            continue
        if kind is ast.Assign:
            if any(_is_self_attribute(t) for t in node.targets):
                assigns = True
                stores.append(node.lineno)
        elif kind is ast.AnnAssign or kind is ast.AugAssign:
            if _is_self_attribute(node.target):
                assigns = True
                if kind is ast.AnnAssign and node.value is not None:
                    stores.append(node.lineno)
        elif kind is ast.Call and type(node.func) is ast.Attribute:
            func = node.func
            if func.attr in _REGISTERING and type(func.value) is ast.Name and func.value.id == "self":
                stores.append(node.lineno)
            elif _is_init_call(node) and (first_init_call is None or node.lineno < first_init_call):
                first_init_call = node.lineno
        stack.extend(ast.iter_child_nodes(node))
    if first_init_call is None:
        return assigns or bool(stores)
    return any(line <= first_init_call for line in stores)
