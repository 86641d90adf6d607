"""Functions that move their argument to the device, and attributes that name a device: facts
read from CPython's tree of the whole file (``model.py`` asks these once per file and records
the answers, ``FileModel.movers`` and ``FileModel.device_attributes``; TL202's ast question asks
``movers_of`` of the whole file's index; rules ask the model). Issue 29, classes 3 and 4.

- **Movers**: ``(container, name, position)`` for a function defined directly in a class (a
  method, called as ``self.name(...)``; ``container`` is the class's scope) or at module level
  (``container`` is ``()``) with a ``return`` whose value moves its positional parameter number
  ``position`` (``self`` not counted) to a device: ``p.cuda(...)``, ``p.to(<device>)``, also
  through ``Variable(p)`` and host methods (``Variable(p).cuda(i)``, ``p.float().to(device)``),
  or one branch of a conditional expression. Every ``if`` around that ``return`` (and the test
  of such a conditional expression) must ask whether a device is in use (``self.cuda``,
  ``use_gpu``, ``torch.cuda.is_available()``, ``x.is_cuda``) and read no parameter: a flag the
  caller passes is one the linter cannot know (``def maybe_cuda(t, use_cuda)`` is no mover).
  Only a ``return`` whose first line spells the move (``return ... .cuda(``) is read: the cheap
  text test that comes first, so a file without one costs one regex scan.
- **Device attributes**: ``(class scope, attribute, True)`` for ``self.<attribute>`` assigned in
  that class an integer index or an accelerator string (``self.cuda_index = 0``,
  ``self.device_id = "cuda:1"``), and ``((), attribute, False)`` for any store of
  ``<x>.<attribute>`` in the file that binds anything else (``self.gpu = args.gpu``,
  ``model.gpu += 1``, a tuple target). An attribute is a device where the first kind is
  recorded and the second is not (answers of a file read in chunks are joined, so the veto is
  a record of its own). Only attributes the text hands to a move (``.cuda(self.x)``,
  ``.to(self.x)``) are looked at.
"""

from __future__ import annotations

import ast
import re
import weakref
from typing import TYPE_CHECKING, Any, Collection, FrozenSet, List, Optional, Protocol, Sequence, Set, Tuple

from torchlint.astindex import GAP
from torchlint.torch_api import ACCELERATOR_DEVICE_TYPES, HOST_CHAIN_METHODS
from torchlint.words import DEVICE_NAME_WORDS

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex


class _Model(Protocol):
    """What these facts read of ``model.FileModel`` (a Protocol: the model imports this module)."""

    text: str

    @property
    def index(self) -> "AstIndex": ...

Scope = Tuple[Tuple[str, str], ...]
Mover = Tuple[Scope, str, int]

# A `return` line that spells a move: the cheap test before the tree is looked at (led by the
# literal: a leading look-behind would make the search try every character).
_RETURN_MOVE = re.compile(rf"return(?!\w)[^\r\n]*?\.{GAP}(?:to|cuda){GAP}\(")  # a lone CR ends a line too
# `.cuda(self.x` / `.to(self.x`: the attributes the device question is asked about.
_DEVICE_ARGUMENT = re.compile(rf"\.{GAP}(?:cuda|to){GAP}\({GAP}self{GAP}\.{GAP}([A-Za-z_]\w*)")
_DEVICE_WORDS = frozenset({"cuda", "gpu"})
VARIABLES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CACHE: "weakref.WeakKeyDictionary[AstIndex, FrozenSet[Mover]]" = weakref.WeakKeyDictionary()


def scope_path(parents: Sequence[ast.AST]) -> Scope:
    """The scope (``model.Scope``) a node with these ancestors sits in."""
    scope = []
    for node in parents:
        if isinstance(node, _FUNCTIONS):
            scope.append(("d", node.name))
        elif isinstance(node, ast.ClassDef):
            scope.append(("c", node.name))
    return tuple(scope)


def class_part(scope: Scope) -> Scope:
    """``scope`` up to its innermost class (``()`` outside classes)."""
    for i in range(len(scope) - 1, -1, -1):
        if scope[i][0] == "c":
            return scope[:i + 1]
    return ()


def is_variable(index: "AstIndex", func: ast.AST) -> bool:
    """Is ``func`` ``torch.autograd.Variable`` (imported by name, or spelt through ``autograd``)?"""
    if type(func) is ast.Name:
        return "Variable" in index.text and bool(index.bindings().get(func.id, set()) & VARIABLES)
    return type(func) is ast.Attribute and func.attr == "Variable" and (
        (type(func.value) is ast.Attribute and func.value.attr == "autograd")
        or (type(func.value) is ast.Name and func.value.id == "autograd"))


def strip(index: "AstIndex", node: ast.AST, methods: Collection[str]) -> ast.AST:
    """What ``node`` is made of through host ``methods`` and ``Variable(x)`` (which is ``x``):
    ``x`` for ``Variable(x.float()).view(3)``."""
    while type(node) is ast.Call:
        func = node.func
        if type(func) is ast.Attribute and func.attr in methods:
            node = func.value
        elif (len(node.args) == 1 and not node.keywords
              and type(node.args[0]) is not ast.Starred and is_variable(index, func)):
            node = node.args[0]
        else:
            break
    return node


def _device_value(node: Optional[ast.AST]) -> bool:
    """An accelerator device as ``.to()`` takes it: ``"cuda:1"``, an index, ``torch.device(...)``
    (not of a literal ``"cpu"``), a name such as ``device``/``self.device``/``local_rank``."""
    if node is None:
        return False
    if type(node) is ast.Constant:
        value = node.value
        if isinstance(value, str):
            return value.split(":", 1)[0] in ACCELERATOR_DEVICE_TYPES
        return type(value) is int and value >= 0
    if type(node) is ast.Call:
        func = node.func
        if type(func) is ast.Attribute and func.attr == "device" and node.args:
            first = node.args[0]
            return not (type(first) is ast.Constant and isinstance(first.value, str)) or _device_value(first)
        return False
    if isinstance(node, (ast.Name, ast.Attribute)):
        last = (node.id if isinstance(node, ast.Name) else node.attr).lower()
        return "cpu" not in last and (last.endswith("device") or last in DEVICE_NAME_WORDS)
    return False


def _moved(call: ast.AST) -> Optional[ast.AST]:
    """The receiver of ``x.cuda(...)`` or ``x.to(<device>, ...)``; None for anything else."""
    if type(call) is not ast.Call or type(call.func) is not ast.Attribute:
        return None
    method = call.func.attr
    if method == "cuda":
        return call.func.value
    if method != "to":
        return None
    device = next((k.value for k in call.keywords if k.arg == "device"), None)
    if device is None and call.args:
        device = call.args[0]
    return call.func.value if _device_value(device) else None


def _reads(node: ast.AST, names: Set[str]) -> bool:
    return any(type(n) is ast.Name and n.id in names for n in ast.walk(node))


def asks_for_device(test: Any) -> bool:
    """``x.is_cuda``, ``self.cuda``/``use_gpu``/``args.cuda``, ``torch.cuda.is_available()``,
    ``x.device.type == "cuda"`` (no ``not``, ``and``, ``or``): rules/device.py's test, on the ast."""
    kind = type(test)
    if kind is ast.Attribute and test.attr == "is_cuda":
        return True
    if kind in (ast.Name, ast.Attribute):
        words = []
        node = test
        while type(node) is ast.Attribute:
            words.append(node.attr)
            node = node.value
        if type(node) is ast.Name:
            words.append(node.id)
        tokens = {w.lower() for part in words for w in re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", part).split("_")}
        return bool(tokens & _DEVICE_WORDS)
    if kind is ast.Call:
        func = test.func
        return (not test.args and type(func) is ast.Attribute and func.attr == "is_available"
                and type(func.value) is ast.Attribute and func.value.attr == "cuda")
    if kind is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Eq:
        right = test.comparators[0]
        return type(right) is ast.Constant and right.value == "cuda"
    return False


def returns_a_move(text: str) -> bool:
    """Does a line of ``text`` spell ``return ... .to(``/``.cuda(`` (``return`` as a word)?"""
    for match in _RETURN_MOVE.finditer(text):
        i = match.start()
        if i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):
            return True
    return False


def file_movers(model: _Model) -> FrozenSet[Mover]:
    """``FileModel.movers``: the text's cheap test before the model's tree is built."""
    return movers_of(model.index) if returns_a_move(model.text) else frozenset()


def file_device_attributes(model: _Model) -> FrozenSet[Tuple[Scope, str, bool]]:
    """``FileModel.device_attributes``: the text's cheap test before the model's tree is built."""
    return device_attributes_of(model.index) if _DEVICE_ARGUMENT.search(model.text) is not None else frozenset()


def movers_of(index: "AstIndex") -> FrozenSet[Mover]:
    """The movers of the file ``index`` is of (see the module docstring); remembered per index."""
    found = _CACHE.get(index)
    if found is None:
        found = _CACHE[index] = _movers(index)
    return found


def _movers(index: "AstIndex") -> FrozenSet[Mover]:
    if not returns_a_move(index.text):
        return frozenset()

    found: Set[Mover] = set()
    for line in index.lines_matching(_RETURN_MOVE):
        for node, parents in index.nodes_on(line):
            if type(node) is not ast.Return or node.lineno != line or node.value is None:
                continue
            mover = _mover(index, node, parents, HOST_CHAIN_METHODS)
            if mover is not None:
                found.add(mover)
    return frozenset(found)


def _mover(index: "AstIndex", ret: ast.Return, parents: Sequence[Any], chain) -> Optional[Mover]:
    at = next((i for i in range(len(parents) - 1, -1, -1) if type(parents[i]) in _FUNCTIONS), None)
    if at is None or at == 0 or type(parents[at - 1]) not in (ast.ClassDef, ast.Module):
        return None
    func = parents[at]
    args = func.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    method = type(parents[at - 1]) is ast.ClassDef
    if method and not any(type(d) is ast.Name and d.id == "staticmethod" for d in func.decorator_list):
        positional = positional[1:]  # self (or cls)
    params = set(positional) | {a.arg for a in args.kwonlyargs}
    if args.vararg is not None:
        params.add(args.vararg.arg)
    if args.kwarg is not None:
        params.add(args.kwarg.arg)
    inner: ast.AST = ret
    for parent in reversed(parents[at + 1:]):  # what holds the return, innermost first
        kind = type(parent)
        if kind is ast.If:
            if not any(s is inner for s in parent.body) or not asks_for_device(parent.test) or _reads(parent.test, params):
                return None
        elif kind not in (ast.With, ast.Try):
            return None
        inner = parent
    values: List[Any] = [ret.value]
    if type(ret.value) is ast.IfExp:
        test = ret.value.test
        if not asks_for_device(test) or _reads(test, params):
            return None
        values = [ret.value.body]
    for value in values:
        receiver = _moved(value)
        if receiver is None:
            receiver = _moved(strip(index, value, ()))  # Variable(x.cuda())
            if receiver is None:
                continue
        base = strip(index, receiver, chain)
        if type(base) is ast.Name and base.id in positional:
            return class_part(scope_path(parents[:at])) if method else (), func.name, positional.index(base.id)
    return None


def device_attributes_of(index: "AstIndex") -> FrozenSet[Tuple[Scope, str, bool]]:
    """The device attributes of the file (see the module docstring)."""
    names = set(_DEVICE_ARGUMENT.findall(index.text))
    if not names:
        return frozenset()
    found: Set[Tuple[Scope, str, bool]] = set()
    parent: Any
    for node, parents, ident in index.occurrences(sorted(names)):
        if type(node) is not ast.Attribute or type(node.ctx) is ast.Load:
            continue
        parent = parents[-1]
        literal = (type(node.ctx) is ast.Store and type(parent) in (ast.Assign, ast.AnnAssign)
                   and parent.value is not None and _index_or_device(parent.value)
                   and (type(parent) is ast.AnnAssign or any(t is node for t in parent.targets)))
        owner = node.value
        cls = class_part(scope_path(parents))
        if literal and type(owner) is ast.Name and owner.id == "self" and cls:
            found.add((cls, ident, True))
        elif not literal:
            found.add(((), ident, False))
    return frozenset(found)


def _index_or_device(value: ast.AST) -> bool:
    """An integer index (``0``) or an accelerator string (``"cuda:1"``)."""
    if type(value) is not ast.Constant:
        return False
    literal = value.value
    if isinstance(literal, str):
        return literal.split(":", 1)[0] in ACCELERATOR_DEVICE_TYPES
    return type(literal) is int and literal >= 0


def is_device_attribute(facts: FrozenSet[Tuple[Scope, str, bool]], cls: Scope, name: str) -> bool:
    """Is ``self.<name>`` in class ``cls`` a device (an index or an accelerator string)?"""
    return bool(cls) and (cls, name, True) in facts and ((), name, False) not in facts


def mover_position(facts: FrozenSet[Mover], container: Scope, name: str) -> Optional[int]:
    """The position of the parameter ``container``'s function ``name`` moves, if it moves one."""
    positions: List[int] = sorted(p for c, n, p in facts if c == container and n == name)
    return positions[0] if positions else None
