"""Whole-file answers of a text read in chunks (phase 3 of a run: ``FileModel.of_text``).

A large file's model reads CPython's trees of its chunks of top-level statements one at a time
(``FileModel.chunks``), never the whole file's tree next to libcst's. Most answers are the merge
of the chunks' answers (``model._merged``); the facts here are not, because a chunk's part of
them depends on statements of other chunks. Each is read in passes over the chunks: first what
the whole file says (small: names, a few call nodes), then each chunk with it, so the answer is
the whole file's (issue 28: the model is always of the whole file, never of a partial text).

- ``loader_classes``: a file's own ``DataLoader`` subclass may derive from a subclass in another
  chunk, or from a library loader imported there.
- ``pinned_loaders``: the other bindings of a pinned loader's name (a function's own
  ``train_loader = make_loader()``) make the name unknown in that scope, wherever the pinned
  ``DataLoader(...)`` call is.
- ``batches``: a generator of the file that yields a loader's batches, the calls of a function
  that hand it a loader (every call, in any chunk), the class attributes bound to iterators, and
  the module's own statements (one scope across all its chunks).
"""

from __future__ import annotations

import ast
import copy
import re
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Protocol, Set, Tuple

from torchlint.torch_api import DATALOADER, canonical_name

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex

Scope = Tuple[Tuple[str, str], ...]
_EMPTY = ast.Module(body=[], type_ignores=[])


class _Model(Protocol):
    """What these facts read of ``model.FileModel`` (a Protocol: the model imports this module)."""

    text: str
    _bindings: Optional[Tuple[Dict[str, Set[str]], List[str]]]

    @property
    def index(self) -> "AstIndex": ...

    def chunks(self) -> Iterator[ast.Module]: ...

    def _pinned_loaders(self, words: Optional[FrozenSet[str]] = None) -> FrozenSet[Tuple[Scope, str, str]]: ...

_LOADER_WORD = re.compile("DataLoader")


def _resolver(model: _Model) -> "AstIndex":
    """An index that resolves dotted names through the whole file's imports and holds no tree
    (``AstIndex.resolves`` reads only the bindings)."""
    from torchlint.astindex import AstIndex

    index = AstIndex(_EMPTY, model.text)
    index._bindings, index._star = model._bindings  # type: ignore[misc]
    return index


def _is_torch_loader(index: "AstIndex"):
    return lambda node: index.resolves(node, lambda q: canonical_name(q) == DATALOADER)


def loader_classes(model: _Model) -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """``FileModel._loader_classes`` of the whole file: the imports, classes (their names and
    bases only: a copy without the body) and assignments on lines that say ``DataLoader``, from
    every chunk, then read together."""
    from torchlint.loaderfacts import loader_classes as read

    nodes: List[ast.AST] = []
    for _ in model.chunks():
        index = model.index
        seen: Set[int] = set()  # ids within one chunk (a freed chunk's ids are used again)
        for line in index.lines_matching(_LOADER_WORD):
            for node, _ in index.nodes_on(line):
                kind = type(node)
                if kind not in (ast.ImportFrom, ast.Import, ast.ClassDef, ast.Assign) or id(node) in seen:
                    continue
                seen.add(id(node))
                if kind is ast.ClassDef:
                    node = copy.copy(node)
                    node.body = []  # type: ignore[attr-defined]
                nodes.append(node)
    return read(nodes, _is_torch_loader(_resolver(model)))


def pinned_loaders(model: _Model) -> FrozenSet[Tuple[Scope, str, str]]:
    """``FileModel._pinned_loaders`` of the whole file: the loader calls of every chunk first,
    then every chunk's other bindings of their names."""
    calls: Set[Tuple[Scope, str, str]] = set()
    for _ in model.chunks():
        calls.update(model._pinned_loaders(words=frozenset()))
    words = frozenset(name.rsplit(".", 1)[-1] for _, name, _ in calls)
    found: Set[Tuple[Scope, str, str]] = set(calls)
    if words:
        for _ in model.chunks():
            found.update(model._pinned_loaders(words=words))
    return frozenset(found)


def batches(model: _Model, names: FrozenSet[str],
            classes: FrozenSet[str]) -> Dict[Scope, FrozenSet[Tuple[str, str, str]]]:
    """``FileModel._batches`` of the whole file, every scope (see the module docstring)."""
    from torchlint.astindex import line_starts
    from torchlint.loaderfacts import _BatchFacts, _Scan, dotted, scope_names

    text = model.text
    starts = line_starts(text)
    is_torch_loader = _is_torch_loader(_resolver(model))

    def facts_of(tree: ast.Module, calls_named=None) -> _BatchFacts:
        return _BatchFacts(tree, text, starts, names, classes, is_torch_loader, calls_named)

    # pass 1: the file's generators of batches, attributes bound to iterators (read in order, as
    # one tree's classes are), and the functions some call hands a loader
    generators: Dict[str, object] = {}
    attributes: Dict[Tuple[str, str], Optional[FrozenSet[str]]] = {}
    handed: Set[str] = set()
    # a call handing a loader spells it: a loader's name, "loader", a loader class or an alias of
    # torch's DataLoader (`from torch.utils.data import DataLoader as DL`; `evaluate(DL(ds))`)
    aliases = sorted(local for local, qualified in (model._bindings or ({}, []))[0].items()
                     if any(canonical_name(q) == DATALOADER for q in qualified))
    spelt = None
    for tree in model.chunks():
        facts = facts_of(tree)
        generators.update(facts.generators)
        index = model.index
        if spelt is None:
            spelt = re.compile(facts.spells_loader.pattern + "".join(f"|\\b{re.escape(a)}\\b" for a in aliases))
        for line in index.lines_matching(spelt):
            for node, _ in index.nodes_on(line):
                if type(node) is not ast.Call:
                    continue
                callee = dotted(node.func)
                if callee is None or callee.count(".") > (1 if callee.startswith("self.") else 0):
                    continue
                values = [*node.args, *(k.value for k in node.keywords)]
                if any(type(v) is not ast.Starred and facts.static_loader(v) for v in values):
                    handed.add(callee.rsplit(".", 1)[-1])

    def prepared(tree: ast.Module, calls_named=None) -> _BatchFacts:
        """A chunk's facts with the whole file's generators, parameters and attributes."""
        facts = facts_of(tree, calls_named)
        facts.generators = generators
        words = ({n.rsplit(".", 1)[-1] for n in names} | set(classes) | {"next", "iter", "prepare"}
                 | {g.rsplit(".", 1)[-1] for g in generators})  # as _BatchFacts builds its `draws`
        facts.draws = re.compile("(?i:loader)" + "".join(f"|\\b{re.escape(w)}\\b" for w in sorted(words)))
        facts.parameters, facts.attribute_iterators, facts._attributes_read = parameters, attributes, True
        return facts

    # pass 1b: every call of those functions (the call nodes alone are kept), and whether every
    # line that spells the name calls it (as ``FileModel._batches`` asks it of a whole tree); the
    # classes' attributes bound to iterators, in order (one tree's classes are read so)
    calls: Dict[str, List[ast.Call]] = {name: [] for name in handed}
    complete: Dict[str, bool] = {}
    parameters: Dict[Scope, Dict[str, str]] = {}
    for tree in model.chunks():
        facts = prepared(tree)
        facts._attributes_read = False
        facts.attribute_iterator_bindings()
        index = model.index
        for name in sorted(handed):
            lines = index.word_lines(name, call=True)
            complete[name] = len(lines) == len(index.word_lines(name))
            seen: Set[int] = set()
            for line in lines:
                for node, _ in index.nodes_on(line):
                    if type(node) is ast.Call and id(node) not in seen:
                        seen.add(id(node))
                        calls[name].append(node)

    def calls_named(name: str) -> Tuple[List[ast.Call], bool]:
        if name not in handed:
            return [], True  # no call of the file hands it a loader: no parameter is one
        return calls[name], complete[name]

    # pass 2: each chunk's scopes with the whole file's facts; the module's statements on one scan
    found: Dict[Scope, FrozenSet[Tuple[str, str, str]]] = {}
    module: Optional[_Scan] = None
    for tree in model.chunks():
        facts = prepared(tree, calls_named)
        if module is None:
            module = _Scan(facts, (), tree, None)
        found.update(facts.scopes(None, module))
    if module is not None:
        module.node = None  # type: ignore[assignment]
        names_found = scope_names(module)
        if names_found:
            found[()] = names_found
    return found
