"""What a module of the file returns: names that hold a model whose output is probabilities
(issue 29, class 3; TL407).

The question behind ``FileModel.probability_modules()`` (``model.py``), asked of CPython's tree of
the whole file (a notebook's cells are one program, so a class in one cell and its instance in
another are one file's facts). Pure functions on ``ast``: this module imports neither libcst, the
model nor the rules.

A *probability module* is a value whose call returns a softmax:

- ``nn.Softmax(...)``; an ``nn.Sequential(...)`` whose last layer is one (written in the call);
- an instance of a class of the file whose ``forward`` returns a softmax on every ``return``
  (``F.softmax(x)``, ``torch.softmax``, ``x.softmax(d)``, ``nn.Softmax(d)(x)``, ``self.<attr>(x)``
  with the attribute such a module in every assignment of the class, or a local every assignment
  of which is one of those);
- any of those through the methods that return the module itself (``.to(device)``, ``.cuda()``,
  ``.train()``, ``.eval()``, ``.float()``...);
- a name every binding of which, in its scope, is one of those or such a method called on the
  name itself (``model = MyModel()`` in one cell, ``model = model.to(device)`` and ``model =
  model.train()`` in others). A name bound any other way (a parameter, a loop, ``+=``, an
  import, a tuple target, ``global`` in another function...) is unknown, never a probability
  module.
"""

from __future__ import annotations

import ast
import re
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple, cast

#: A scope as ``model.Scope``: the enclosing ``def``/``class`` names, outermost first, tagged "d"/"c".
Where = Tuple[Tuple[str, str], ...]

SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_MODULE = "torch.nn.Softmax"
SEQUENTIAL = "torch.nn.Sequential"
#: The names a softmax is spelt through (an alias of one is read like ``softmax``: ``may_hold``).
SOFTMAX_NAMES = SOFTMAX_FUNCTIONS | {SOFTMAX_MODULE}
# nn.Module methods that return the module itself.
SELF_RETURNING = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16",
                            "requires_grad_", "share_memory", "xpu", "ipu", "mps"})
_UNKNOWN = None  # a binding whose value cannot be read: the name is never a probability module
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def probability_modules(tree: ast.Module, resolves: Callable[[ast.AST, str], bool],
                        text: Optional[str] = None, aliases: Sequence[str] = ()) -> Dict[Where, FrozenSet[str]]:
    """scope -> the names (``self.x`` for a class's attributes, keyed by the class's scope) that
    hold a probability module in every binding of that scope. ``resolves(node, qualified)``: may
    the dotted name ``node`` stand for the torch name ``qualified``? ``text``: the file's text,
    for the cheap tests first (``may_hold``); ``aliases``: the names the file binds to torch's
    softmax functions or module (``from torch.nn.functional import softmax as sm``)."""
    if text is not None and not may_hold([tree], text, resolves, aliases):
        return {}
    collected = Collected(text, aliases)
    collected.add(tree, resolves)
    return collected.answer()


def may_hold(trees: Iterable[ast.Module], text: str, resolves: Callable[[ast.AST, str], bool],
             aliases: Sequence[str] = ()) -> bool:
    """Can a name of the file hold a probability module at all? Only where some call may build an
    ``nn.Softmax`` (the text spells ``Softmax``, or an alias of it) or a module-level class
    returns a softmax from ``forward`` (every way to spell one in the class spells ``softmax``
    or an alias). The classes of ``trees`` (a file's, or its chunks', read in turn) are read only
    where their lines spell one of those."""
    if "oftmax" not in text:  # every alias is bound by a line that spells it
        return False
    if "Softmax" in text:
        return True
    spelt, starts = _spelt(aliases), None
    for tree in trees:
        for node in _own_nodes(tree.body):  # module-level classes, in `if`/`try` blocks too
            if type(node) is not ast.ClassDef:
                continue
            if starts is None:
                starts = _line_starts(text)
            if _spells(spelt, text, starts, node) and _returns_softmax(node, resolves):
                return True
    return False


def _spelt(aliases: Sequence[str]) -> "re.Pattern[str]":
    return re.compile("oftmax" + "".join(f"|\\b{re.escape(w)}\\b" for w in sorted(aliases)))


def _spells(pattern: "re.Pattern[str]", text: str, starts: List[int], node: ast.AST) -> bool:
    """Do the lines of ``node`` match ``pattern``?"""
    first, last = node.lineno - 1, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    return pattern.search(text, starts[first], starts[last] if last < len(starts) else len(text)) is not None


def _line_starts(text: str) -> List[int]:
    from torchlint.source import line_starts

    return line_starts(text)


class Collected:
    """Every scope's bindings, from one tree or from each chunk of a file in turn (the values
    read as they are collected, so no tree is kept: ``_compact``), and the answer from them.
    ``text``: the file's, where a class's lines must spell a softmax (``_spelt``) before its
    ``forward`` is read."""

    def __init__(self, text: Optional[str] = None, aliases: Sequence[str] = ()) -> None:
        self.bindings: Dict[Where, Dict[str, List[object]]] = {}
        #: module-level class name -> does its ``forward`` return a softmax
        self.classes: Dict[str, bool] = {}
        self.text, self.spelt = text, _spelt(aliases)
        self._starts: Optional[List[int]] = None

    def add(self, tree: ast.Module, resolves: Callable[[ast.AST, str], bool]) -> None:
        _collect(tree.body, (), self, resolves)

    def returns_softmax(self, cls: ast.ClassDef, resolves) -> bool:
        text = self.text
        if text is not None:
            if self._starts is None:
                self._starts = _line_starts(text)
            if not _spells(self.spelt, text, self._starts, cls):
                return False
        return _returns_softmax(cls, resolves)

    def answer(self) -> Dict[Where, FrozenSet[str]]:
        bindings = self.bindings
        module = bindings.get((), {})
        softmax_classes = frozenset(name for name, returns in self.classes.items()  # bound only by its `class`
                                    if returns and len(module.get(name, ())) == 1)
        found: Dict[Where, FrozenSet[str]] = {}
        for where, names in bindings.items():
            kept: Set[str] = set()
            changed = True
            while changed:  # least fixed point: a name through another name of the same scope
                changed = False
                for name, values in names.items():
                    if name in kept:
                        continue
                    if _all_probability(values, kept, softmax_classes):
                        kept.add(name)
                        changed = True
            if kept:
                found[where] = frozenset(kept)
        return _visible(found, bindings)


# What a binding's value is, read when it is collected (``_compact``): unknown (None), the same
# module the name held (``model = model.to(device)``), a module known to return a softmax
# (True) or known not to (False), another name's module (``("name", dotted)``) or an instance of
# a module-level class of the file (``("class", name)``).
_SAME = "same"


def _compact(name: str, value: Optional[ast.expr], resolves) -> object:
    if value is _UNKNOWN:
        return _UNKNOWN
    base = _strip_self_returning(value)
    dotted = _dotted(base)
    if dotted is not None:
        return _SAME if dotted == name and base is not value else ("name", dotted)
    if not isinstance(base, ast.Call):
        return False
    func = base.func
    if resolves(func, SOFTMAX_MODULE):
        return True
    if resolves(func, SEQUENTIAL):
        return _is_probability_module(base, set(), frozenset(), resolves, 0)
    return ("class", func.id) if isinstance(func, ast.Name) else False


def _visible(found: Dict[Where, FrozenSet[str]], bindings) -> Dict[Where, FrozenSet[str]]:
    """scope -> the probability modules a read there sees: its own, then those of the functions
    around it and the module that it does not bind itself (class bodies are skipped, as Python
    does), and ``self.x`` of its innermost class."""
    visible: Dict[Where, FrozenSet[str]] = {}
    for where in bindings:
        seen: Set[str] = set()
        names: Set[str] = set()
        for cut in range(len(where), -1, -1):
            outer = where[:cut]
            if cut and cut < len(where) and outer[-1][0] == "c":
                continue  # a class body's names are not seen from its methods
            own = bindings.get(outer, {})
            names.update(n for n in found.get(outer, ()) if n not in seen and "." not in n)
            seen.update(own)
        cls = next((where[:i + 1] for i in range(len(where) - 1, -1, -1) if where[i][0] == "c"), None)
        if cls is not None:
            names.update(n for n in found.get(cls, ()) if n.startswith("self."))
        if names:
            visible[where] = frozenset(names)
    return visible


def _all_probability(values: List[object], kept: Set[str], classes: FrozenSet[str]) -> bool:
    grounded = False
    for value in values:
        if value is _UNKNOWN or value is False:
            return False
        if value == _SAME:
            continue  # `model = model.to(device)`: keeps what the name held
        if value is not True:
            kind, name = cast(Tuple[str, str], value)
            if name not in (kept if kind == "name" else classes):
                return False
        grounded = True
    return grounded


def _strip_self_returning(node: ast.expr) -> ast.expr:
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
           and node.func.attr in SELF_RETURNING):
        node = node.func.value
    return node


def _is_probability_module(node: ast.expr, names: Set[str], classes: FrozenSet[str], resolves, depth: int) -> bool:
    if depth > 8:
        return False
    node = _strip_self_returning(node)
    dotted = _dotted(node)
    if dotted is not None:
        return dotted in names
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if resolves(func, SOFTMAX_MODULE):
        return True
    if resolves(func, SEQUENTIAL):
        layers = node.args
        if not layers or any(isinstance(a, ast.Starred) for a in layers):
            return False
        return _is_probability_module(layers[-1], set(), frozenset(), resolves, depth + 1)
    return isinstance(func, ast.Name) and func.id in classes


def _returns_softmax(cls: ast.ClassDef, resolves) -> bool:
    """Does the class's own ``forward`` return a softmax on every ``return`` (at least one, no
    ``yield``)? A returned local is probabilities when every binding of it in ``forward`` is, or,
    for a ``return`` in ``forward``'s own body, when the last statement before it that binds
    the name is ``name = <softmax>`` in that body (``x = self.fc(x)``, ``x = F.softmax(x, 1)``,
    ``return x``)."""
    forward = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None)
    if forward is None:
        return False
    attributes = _self_attributes(cls)
    softmax_attributes = {name for name, values in attributes.items()
                          if values and all(v is not _UNKNOWN and _is_probability_module(v, set(), frozenset(), resolves, 0)
                                            for v in values)}
    local: Dict[str, List[Optional[ast.expr]]] = {p: [_UNKNOWN] for p in _parameters(forward.args)}
    returns: List[ast.Return] = []
    for node in _own_nodes(forward.body):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Return):
            returns.append(node)
        elif isinstance(node, _DEFS):
            local.setdefault(node.name, []).append(_UNKNOWN)
        else:
            _bind_node(node, local, None)
    if not returns:
        return False
    done: Set[str] = set()
    for _ in range(3):  # a local bound to another local's softmax
        for name, values in local.items():
            if name not in done and values and all(
                    v is not _UNKNOWN and _is_softmax(v, done, softmax_attributes, resolves) for v in values):
                done.add(name)
    body = forward.body
    for ret in returns:
        value = ret.value
        if value is None:
            return False
        if _is_softmax(value, done, softmax_attributes, resolves):
            continue
        if not isinstance(value, ast.Name) or ret not in body:
            return False
        if not _last_binding_is_softmax(body[:body.index(ret)], value.id, done, softmax_attributes, resolves):
            return False
    return True


def _last_binding_is_softmax(before: List[ast.stmt], name: str, done: Set[str], attributes: Set[str], resolves) -> bool:
    """Is the last of ``before`` that binds ``name`` a plain ``name = <softmax>`` (whatever binds
    it in a nested block: unknown)?"""
    for statement in reversed(before):
        bound: Dict[str, List[Optional[ast.expr]]] = {}
        for node in _own_nodes([statement]):
            if isinstance(node, _DEFS):
                bound.setdefault(node.name, []).append(_UNKNOWN)
            else:
                _bind_node(node, bound, None)
        if name not in bound:
            continue
        return (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name) and _is_softmax(statement.value, done, attributes, resolves))
    return False


def _is_softmax(node: ast.expr, names: Set[str], attributes: Set[str], resolves) -> bool:
    """Is ``node`` probabilities: a softmax call, a call of a softmax attribute, a local bound to one?"""
    if isinstance(node, ast.Name):
        return node.id in names
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if any(resolves(func, name) for name in SOFTMAX_FUNCTIONS):
        return True
    if isinstance(func, ast.Attribute):
        if func.attr == "softmax":  # `x.softmax(dim)`
            return True
        if isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in attributes:
            return True
    if isinstance(func, ast.Call) and resolves(func.func, SOFTMAX_MODULE):  # nn.Softmax(dim=1)(x)
        return True
    return False


def _self_attributes(cls: ast.ClassDef) -> Dict[str, List[Optional[ast.expr]]]:
    """``x`` -> the values ``self.x`` is assigned in the class's own methods (``_UNKNOWN`` for
    any other binding of it)."""
    found: Dict[str, List[Optional[ast.expr]]] = {}
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args:
            continue
        me = method.args.args[0].arg
        for node in _own_nodes(method.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind_attribute(target, me, node.value, found)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                _bind_attribute(node.target, me, node.value, found)
            elif isinstance(node, ast.AugAssign):
                _bind_attribute(node.target, me, _UNKNOWN, found)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                _bind_attribute(node.target, me, _UNKNOWN, found)
    return found


def _bind_attribute(target: ast.expr, me: str, value: Optional[ast.expr], found) -> None:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me:
        found.setdefault(target.attr, []).append(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bind_attribute(element.value if isinstance(element, ast.Starred) else element, me, _UNKNOWN, found)


# -- bindings per scope ------------------------------------------------------------------------

def _collect(body: List[ast.stmt], where: Where, out: "Collected", resolves) -> None:
    """Every binding of every scope under ``body`` (the scope ``where``): names, and ``self.x``
    for a class's methods (keyed by the class's scope), into ``out``."""
    bindings = out.bindings
    names = bindings.setdefault(where, {})
    declared: Set[str] = set()
    for node in _own_nodes(body):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    for node in _own_nodes(body):
        if isinstance(node, _DEFS):
            inner = where + (("c" if isinstance(node, ast.ClassDef) else "d", node.name),)
            names.setdefault(node.name, []).append(_UNKNOWN)
            if isinstance(node, ast.ClassDef):
                if not where:
                    out.classes[node.name] = out.returns_softmax(node, resolves)
                _collect(node.body, inner, out, resolves)
                attributes = _self_attributes(node)
                own = bindings.setdefault(inner, {})
                for attr, values in attributes.items():
                    own.setdefault(f"self.{attr}", []).extend(_compact(f"self.{attr}", v, resolves) for v in values)
            else:
                params = bindings.setdefault(inner, {})
                for p in _parameters(node.args):
                    params.setdefault(p, []).append(_UNKNOWN)
                _collect(node.body, inner, out, resolves)
            continue
        _bind_node(node, names, declared, resolves)
    for name in declared:  # bound here for another scope: unknown in both
        names.setdefault(name, []).append(_UNKNOWN)
        bindings.setdefault((), {}).setdefault(name, []).append(_UNKNOWN)


def _bind_node(node: ast.AST, names: Dict[str, List], declared: Optional[Set[str]], resolves=None) -> None:
    """Record the bindings ``node`` makes in ``names``: the values as they are, or with
    ``resolves``, as ``_compact`` reads them."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            _bind_target(target, node.value, names, resolves)
    elif isinstance(node, ast.AnnAssign):
        if node.value is not None:
            _bind_target(node.target, node.value, names, resolves)
    elif isinstance(node, ast.NamedExpr):
        _bind_target(node.target, node.value, names, resolves)
    elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
        _bind_target(node.target, _UNKNOWN, names)
    elif isinstance(node, ast.withitem):
        if node.optional_vars is not None:
            _bind_target(node.optional_vars, _UNKNOWN, names)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            names.setdefault((alias.asname or alias.name).split(".", 1)[0], []).append(_UNKNOWN)
    elif isinstance(node, ast.ExceptHandler):
        if node.name:
            names.setdefault(node.name, []).append(_UNKNOWN)
    elif isinstance(node, ast.Delete):
        for target in node.targets:
            _bind_target(target, _UNKNOWN, names)
    elif isinstance(node, _MATCH_NAMED):  # match statements: Python 3.10+ (none on 3.9)
        if node.name:
            names.setdefault(node.name, []).append(_UNKNOWN)
    elif isinstance(node, _MATCH_MAPPING):
        if node.rest:
            names.setdefault(node.rest, []).append(_UNKNOWN)


_MATCH_NAMED = tuple(getattr(ast, name) for name in ("MatchAs", "MatchStar") if hasattr(ast, name))
_MATCH_MAPPING = tuple(getattr(ast, name) for name in ("MatchMapping",) if hasattr(ast, name))


def _bind_target(target: ast.expr, value: Optional[ast.expr], names, resolves=None) -> None:
    if isinstance(target, ast.Name):
        names.setdefault(target.id, []).append(value if resolves is None else _compact(target.id, value, resolves))
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bind_target(element, _UNKNOWN, names)
    elif isinstance(target, ast.Starred):
        _bind_target(target.value, _UNKNOWN, names)


def _own_nodes(body: List[ast.stmt]):
    """The nodes of ``body`` outside nested functions, classes and lambdas (whose names bind in
    their own scope; the nested definitions themselves are yielded). Comprehensions are entered:
    only a walrus binds there, in this scope."""
    stack: List[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _DEFS) or isinstance(node, ast.Lambda):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _parameters(args: ast.arguments) -> List[str]:
    found = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    found += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return found


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
