"""Kinds of values, read from CPython's tree: where a value is known to be a NumPy array (issue 29,
class 4). The whole-file model (``model.py``) asks these questions of every function of the file;
rules read its recorded answers (``FileModel.numpy_functions``), never another definition's code.

A NumPy array here is what ``np.load``, ``np.concatenate``, ``np.zeros`` ... return (the NumPy
functions that always return an ndarray, never a scalar), ``Tensor.numpy()``, an array method of
such a value (``.astype()``, ``.reshape()``), or a local name every assignment of which in the
function is one of those. Its dtype is known where the code spells it (``dtype=np.float32``,
``.astype("float32")``); ``""`` otherwise.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple, cast

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex

# NumPy functions that always return an ndarray (never a scalar, never negative strides).
NUMPY_ARRAY_FUNCTIONS = frozenset({
    "array", "asarray", "ascontiguousarray", "asfortranarray", "asanyarray", "copy", "zeros", "ones",
    "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace",
    "logspace", "eye", "identity", "stack", "concatenate", "vstack", "hstack", "dstack",
    "column_stack", "load", "loadtxt", "genfromtxt", "frombuffer", "fromfile", "fromiter", "tile",
    "repeat", "pad", "expand_dims", "reshape", "transpose", "meshgrid", "random.permutation",
})
# NumPy random functions: an array only when given a size (positional index, keyword `size`).
NUMPY_RANDOM_SIZE = {"random.rand": 0, "random.randn": 0, "random.random": 0, "random.uniform": 2,
                     "random.normal": 2, "random.randint": 2, "random.choice": 1}
# Array methods that return an array again (``astype`` sets the dtype).
ARRAY_METHODS = frozenset({"astype", "reshape", "copy", "transpose", "squeeze", "flatten", "ravel"})
# dtype spellings by the NumPy name of the dtype: torch's attributes (`torch.float` is float32)...
TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64", "float16": "float16",
    "half": "float16", "bfloat16": "bfloat16", "int64": "int64", "long": "int64", "int32": "int32",
    "int": "int32", "int16": "int16", "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
# ... and NumPy's attributes, strings and builtins (`np.float_`, `float` and `"float"` are float64).
NUMPY_DTYPES = {
    "float32": "float32", "single": "float32", "float64": "float64", "double": "float64", "float_": "float64",
    "float": "float64", "float16": "float16", "half": "float16", "int64": "int64", "int32": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool", "bool_": "bool", "f4": "float32",
    "f8": "float64", "f2": "float16", "i8": "int64", "i4": "int32", "u1": "uint8",
}

#: A function's place: the names of the ``def``/``class`` statements down to it, each tagged
#: ``"d"`` or ``"c"`` (``model.Scope``, the function's own name last).
Where = Tuple[Tuple[str, str], ...]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.MULTILINE)
_FROM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+((?:numpy|transformers)(?:\.[\w.]+)?)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.MULTILINE)
_ALIAS = re.compile(r"^([\w.]+)(?:\s+as\s+(\w+))?$")
#: Packages whose import names ``Names`` reads from the text (torch's come from the index).
_PACKAGES = ("numpy", "transformers")


class Names:
    """What a dotted name of the file may stand for: torch's names through the index, NumPy's and
    transformers' through the file's imports, read from the whole text (a chunk's tree may not
    hold them)."""

    def __init__(self, text: str, index: "AstIndex") -> None:
        self.index = index
        self.text = text
        self._gpu_flags: Optional[FrozenSet[str]] = None
        self.imported: Dict[str, str] = {}  # local name -> qualified (`np` -> `numpy`)
        if not any(package in text for package in _PACKAGES):
            return
        for match in _IMPORT.finditer(text):
            for part in match.group(1).split(","):
                alias = _ALIAS.match(part.strip())
                if alias and alias.group(1).split(".", 1)[0] in _PACKAGES:
                    if alias.group(2):
                        self.imported[alias.group(2)] = alias.group(1)
                    else:
                        top = alias.group(1).split(".", 1)[0]
                        self.imported[top] = top
        for match in _FROM_IMPORT.finditer(text):
            for part in match.group(2).strip("() \t\n").replace("\\", " ").split(","):
                alias = _ALIAS.match(" ".join(part.split()))
                if alias and "." not in alias.group(1):
                    self.imported[alias.group(2) or alias.group(1)] = f"{match.group(1)}.{alias.group(1)}"

    @property
    def gpu_flags(self) -> FrozenSet[str]:
        if self._gpu_flags is None:
            self._gpu_flags = gpu_flags(self.text)
        return self._gpu_flags

    @property
    def numpy(self) -> Dict[str, str]:
        return {local: q for local, q in self.imported.items() if q.split(".", 1)[0] == "numpy"}

    def qualified(self, node: ast.expr) -> Optional[str]:
        """``numpy.load`` for ``np.load``, ``transformers.default_data_collator`` ...; None when the
        name is not one of theirs."""
        parts = []
        while type(node) is ast.Attribute:
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        head = self.imported.get(node.id)
        if head is None:
            return None
        return ".".join([head, *reversed(parts)])

    def numpy_name(self, node: ast.expr) -> Optional[str]:
        """``"load"`` for ``np.load`` (``"random.rand"`` ...); None when not NumPy's."""
        qualified = self.qualified(node)
        return qualified[6:] if qualified is not None and qualified.startswith("numpy.") else None


def numpy_functions(tree: ast.Module, names: Names) -> FrozenSet[Tuple[Where, str]]:
    """(function, dtype or "") for each function of ``tree`` whose every ``return`` gives a NumPy
    array (at least one; no ``yield``). Calls to other functions are not followed: the answer of
    each function depends on its own code and the file's imports only."""
    found: Set[Tuple[Where, str]] = set()
    stack: List[Tuple[ast.AST, Where]] = [(tree, ())]
    while stack:
        node, where = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                inner = where + (("c" if type(child) is ast.ClassDef else "d", child.name),)
                if type(child) is not ast.ClassDef:
                    dtype = _returns_array(cast(ast.FunctionDef, child), names)
                    if dtype is not None:
                        found.add((inner, dtype))
                stack.append((child, inner))
            elif isinstance(child, (ast.stmt, ast.excepthandler)) or type(child) is ast.match_case:
                stack.append((child, where))
    return frozenset(found)


def _returns_array(function: ast.FunctionDef, names: Names) -> Optional[str]:
    returns: List[ast.expr] = []
    assigned: Dict[str, List[Optional[ast.expr]]] = {}
    stack: List[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if isinstance(node, _SCOPES) or kind is ast.Lambda:
            if kind is not ast.Lambda:
                assigned.setdefault(cast(ast.FunctionDef, node).name, []).append(None)
            continue
        if kind is ast.Yield or kind is ast.YieldFrom:
            return None  # a generator
        if kind is ast.Return:
            value = node.value  # type: ignore[attr-defined]
            if value is None:
                return None
            returns.append(value)
        elif kind is ast.Assign:
            value = node.value  # type: ignore[attr-defined]
            for target in node.targets:  # type: ignore[attr-defined]
                _bind(target, value, assigned)
        elif kind is ast.AnnAssign and node.value is not None:  # type: ignore[attr-defined]
            _bind(node.target, node.value, assigned)  # type: ignore[attr-defined]
        elif kind in (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.With, ast.AsyncWith,
                      ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ExceptHandler):
            for name in _names_bound(node):
                assigned.setdefault(name, []).append(None)
        stack.extend(ast.iter_child_nodes(node))
    if not returns:
        return None
    args = function.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    dtypes = set()
    for value in returns:
        dtype = numpy_array(value, names, assigned, params, set())
        if dtype is None:
            return None
        dtypes.add(dtype)
    return dtypes.pop() if len(dtypes) == 1 else ""


def _bind(target: ast.expr, value: ast.expr, assigned: Dict[str, List[Optional[ast.expr]]]) -> None:
    if type(target) is ast.Name:
        assigned.setdefault(target.id, []).append(value)
    else:  # unpacking, `x[i] = ...`, `x.a = ...`: the names in it get an unknown value
        for node in ast.walk(target):
            if type(node) is ast.Name and type(node.ctx) is ast.Store:
                assigned.setdefault(node.id, []).append(None)


def _names_bound(node: ast.AST) -> List[str]:
    kind = type(node)
    if kind in (ast.Global, ast.Nonlocal):
        return list(node.names)  # type: ignore[attr-defined]
    if kind in (ast.Import, ast.ImportFrom):
        return [(a.asname or a.name).split(".", 1)[0] for a in node.names]  # type: ignore[attr-defined]
    if kind is ast.ExceptHandler:
        return [node.name] if node.name else []  # type: ignore[attr-defined]
    targets: List[ast.AST] = []
    if kind is ast.AugAssign or kind is ast.NamedExpr:
        targets = [node.target]  # type: ignore[attr-defined]
    elif kind in (ast.For, ast.AsyncFor):
        targets = [node.target]  # type: ignore[attr-defined]
    elif kind in (ast.With, ast.AsyncWith):
        targets = [i.optional_vars for i in node.items if i.optional_vars is not None]  # type: ignore[attr-defined]
    return [n.id for t in targets for n in ast.walk(t) if type(n) is ast.Name]


def numpy_array(value: ast.expr, names: Names, assigned: Dict[str, List[Optional[ast.expr]]],
                params: Set[str], seen: Set[int]) -> Optional[str]:
    """The dtype ("" when not known) if ``value`` is known to be a NumPy array; else None."""
    if id(value) in seen:
        return None
    seen.add(id(value))
    kind = type(value)
    if kind is ast.Call:
        call: ast.Call = value  # type: ignore[assignment]
        function = names.numpy_name(call.func)
        if function in NUMPY_ARRAY_FUNCTIONS or (
                function in NUMPY_RANDOM_SIZE and _argument(call, "size", NUMPY_RANDOM_SIZE[function]) is not None):
            spelt = _argument(call, "dtype", None)
            return (dtype_name(spelt, names) or "") if spelt is not None else ""
        func = call.func
        if type(func) is not ast.Attribute or function is not None:
            return None
        if func.attr == "numpy" and not call.args and not call.keywords:
            return ""  # Tensor.numpy()
        if func.attr in ARRAY_METHODS:
            inner = numpy_array(func.value, names, assigned, params, seen)
            if inner is None:
                return None
            if func.attr == "astype":
                given = _argument(call, "dtype", 0)
                return (dtype_name(given, names) or "") if given is not None else ""
            return inner
        return None
    if kind is ast.Name:
        name: str = value.id  # type: ignore[attr-defined]
        values = assigned.get(name)
        if not values or name in params:
            return None
        dtypes = set()
        for bound in values:
            if bound is None:
                return None
            dtype = numpy_array(bound, names, assigned, params, seen)
            if dtype is None:
                return None
            dtypes.add(dtype)
        return dtypes.pop() if len(dtypes) == 1 else ""
    return None


def _argument(call: ast.Call, keyword: str, position: Optional[int]) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position and not any(
            type(a) is ast.Starred for a in call.args[:position + 1]):
        return call.args[position]
    return None


def dtype_name(node: ast.expr, names: Names) -> Optional[str]:
    """The NumPy name of a dtype written ``np.float32``, ``torch.long``, ``"float32"``, ``float``."""
    if type(node) is ast.Constant and isinstance(node.value, str):
        return NUMPY_DTYPES.get(node.value)
    if type(node) is ast.Name and node.id in ("float", "bool"):
        return NUMPY_DTYPES[node.id] if node.id not in names.numpy else None
    numpy = names.numpy_name(node)
    if numpy is not None:
        return NUMPY_DTYPES.get(numpy)
    found: List[str] = []

    def wanted(qualified: str) -> bool:
        if qualified.startswith("torch.") and qualified.count(".") == 1 and qualified[6:] in TORCH_DTYPES:
            found.append(TORCH_DTYPES[qualified[6:]])
            return True
        return False

    if type(node) not in (ast.Name, ast.Attribute) or not names.index.resolves(node, wanted):
        return None
    return found[0] if len(set(found)) == 1 else None


# -- modules that iterate the layers they are given (TL301) ---------------------------------------
_ITERATION_WRAPPERS = frozenset({"enumerate", "zip", "reversed", "list", "tuple", "iter"})


def layer_iterating_classes(tree: ast.Module) -> FrozenSet[str]:
    """Names of the classes of ``tree`` that iterate a module handed to their ``__init__``
    (``self.seq_module = seq_module`` ... ``for module in self.seq_module: x = module(x)``): code
    of theirs may run between the layers, so a container given to them does not chain its layers
    straight (deepspeech's ``MaskConv(nn.Sequential(conv, bn, ...))`` masks between them)."""
    found: Set[str] = set()
    for node in ast.walk(tree):
        if type(node) is not ast.ClassDef:
            continue
        methods = [cast(ast.FunctionDef, m) for m in node.body if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef)]
        init = next((m for m in methods if m.name == "__init__"), None)
        if init is None:
            continue
        params = {a.arg for a in (*init.args.posonlyargs, *init.args.args[1:], *init.args.kwonlyargs)}
        given: Set[str] = set()  # self attributes bound to a parameter
        for stmt in ast.walk(init):
            if type(stmt) is ast.Assign and type(stmt.value) is ast.Name and stmt.value.id in params:
                for target in stmt.targets:
                    if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
                        given.add(target.attr)
        if any(_iterates(cast(ast.For, loop).iter, given, params if method is init else set())
               for method in methods for loop in ast.walk(method) if type(loop) in (ast.For, ast.AsyncFor)):
            found.add(node.name)
    return frozenset(found)


def _iterates(iterable: ast.expr, attributes: Set[str], params: Set[str]) -> bool:
    while type(iterable) is ast.Call and type(iterable.func) is ast.Name and iterable.func.id in _ITERATION_WRAPPERS:
        if not iterable.args:
            return False
        iterable = iterable.args[0]
    if type(iterable) is ast.Attribute:
        return type(iterable.value) is ast.Name and iterable.value.id == "self" and iterable.attr in attributes
    return type(iterable) is ast.Name and iterable.id in params


# -- loaders that pin their batches (TL203) -------------------------------------------------------
_PIN_MEMORY, _COLLATE_FN = 7, 6  # positions in torch's DataLoader (torch_api.DATALOADER_PARAMS)
# Collate functions that give what the default one gives: tensors in dicts, lists and tuples,
# which the pin-memory thread pins and whose `.to` takes `non_blocking`.
TENSOR_COLLATES = frozenset({
    "torch.utils.data.default_collate", "torch.utils.data.dataloader.default_collate",
    "torch.utils.data._utils.collate.default_collate", "transformers.default_data_collator",
    "transformers.data.data_collator.default_data_collator", "transformers.data.default_data_collator",
})
#: How a pinned loader's batch may be moved: "default" (the default collate or one like it: the
#: batch and its parts are tensors); "elements" (another collate: only the parts a batch is read
#: into are known to be tensors, the batch itself may be an object whose ``.to`` differs).
DEFAULT, ELEMENTS = "default", "elements"


def pinned_loaders(tree: ast.Module, names: Names, is_torch_loader, classes: FrozenSet[str]) -> FrozenSet[Tuple[str, str]]:
    """(dotted name, DEFAULT or ELEMENTS) for the names some statement of ``tree`` assigns a
    ``DataLoader(...)`` call that pins its batches: ``pin_memory=True``, or
    ``pin_memory=torch.cuda.is_available()`` (true wherever a move to the GPU happens). A call of
    one of the file's other loader ``classes`` (a subclass, MONAI's) counts by keywords only. A
    name any of whose loader calls does not pin is left out (``_merge_pinned``)."""
    settings: List[Tuple[str, Optional[str]]] = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is not ast.Assign and kind is not ast.AnnAssign:
            continue
        value = cast(ast.Assign, node).value
        if type(value) is not ast.Call:
            continue
        call = value
        func = call.func
        torch_loader = is_torch_loader(func)
        if not torch_loader and not (type(func) is ast.Name and func.id in classes):
            continue
        setting = _pin_setting(call, names, torch_loader)
        targets = cast(ast.Assign, node).targets if kind is ast.Assign else [cast(ast.AnnAssign, node).target]
        for target in targets:
            dotted = _dotted(target)
            if dotted is not None:
                settings.append((dotted, setting))
    return frozenset((name, setting or "") for name, setting in settings)


def merge_pinned(answers: FrozenSet[Tuple[str, str]]) -> Dict[str, str]:
    """name -> DEFAULT/ELEMENTS for the names every loader call of which pins."""
    found: Dict[str, str] = {}
    unpinned: Set[str] = set()
    for name, setting in answers:
        if not setting:
            unpinned.add(name)
        elif found.get(name) != ELEMENTS:
            found[name] = setting
    return {name: setting for name, setting in found.items() if name not in unpinned}


def _pin_setting(call: ast.Call, names: Names, positional: bool) -> Optional[str]:
    """DEFAULT/ELEMENTS when the loader call pins its batches; None when it does not or may not."""
    pin = _argument(call, "pin_memory", _PIN_MEMORY if positional else None)
    if pin is None or not _true_on_gpu(pin, names):
        return None
    collate = _argument(call, "collate_fn", _COLLATE_FN if positional else None)
    if collate is None:
        if any(kw.arg is None for kw in call.keywords):
            return ELEMENTS  # **kwargs may hold a collate_fn
        return DEFAULT
    if type(collate) is ast.Constant and collate.value is None:
        return DEFAULT
    qualified = names.qualified(collate)
    if qualified in TENSOR_COLLATES or (type(collate) in (ast.Name, ast.Attribute) and names.index.resolves(
            collate, lambda q: q in TENSOR_COLLATES)):
        return DEFAULT
    return ELEMENTS


# `pin_memory = torch.cuda.is_available()` at the top level of the file, as spelt
_GPU_FLAG = re.compile(r"^(\w+)[ \t]*=[ \t]*torch[ \t]*\.[ \t]*cuda[ \t]*\.[ \t]*is_available[ \t]*\([ \t]*\)[ \t]*(?:#.*)?$",
                       re.MULTILINE)


def gpu_flags(text: str) -> FrozenSet[str]:
    """Names the file binds, at its top level, only to ``torch.cuda.is_available()``."""
    if "is_available" not in text:
        return frozenset()
    flags = {m.group(1) for m in _GPU_FLAG.finditer(text)}
    # a name bound to anything else at the top level as well is not one
    return frozenset(name for name in flags
                     if len(re.findall(rf"^{re.escape(name)}[ \t]*(?::[^=\n]*)?=(?!=)", text, re.MULTILINE)) == 1)


def _true_on_gpu(node: ast.expr, names: Names) -> bool:
    if type(node) is ast.Name:
        return node.id in names.gpu_flags
    if type(node) is ast.Constant:
        return node.value is True
    if type(node) is ast.Call:
        call = node
        return not call.args and not call.keywords and names.index.resolves(
            call.func, lambda q: q == "torch.cuda.is_available")
    return False


def _dotted(node: ast.expr) -> Optional[str]:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# -- functions whose returned lists become layers; literal flags passed to functions (TL301) ------
def layer_list_functions(tree: ast.Module, names: Names) -> FrozenSet[str]:
    """Names ``f`` of the functions whose result the file uses as a list of layers: ``*f(...)``
    among the arguments of ``nn.Sequential(...)``, ``layers.extend(f(...))``, ``layers += f(...)``
    (by the callee's name: a nested helper of ``__init__`` as a module-level one)."""
    found: Set[str] = set()
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Call:
            call = cast(ast.Call, node)
            func = call.func
            if type(func) is ast.Attribute and func.attr == "extend" and len(call.args) == 1:
                _add_callee(call.args[0], found)
            elif any(type(a) is ast.Starred for a in call.args) and names.index.resolves(
                    func, lambda q: q == "torch.nn.Sequential"):
                for arg in call.args:
                    if type(arg) is ast.Starred:
                        _add_callee(arg.value, found)
        elif kind is ast.AugAssign and type(cast(ast.AugAssign, node).op) is ast.Add:
            _add_callee(cast(ast.AugAssign, node).value, found)
    return frozenset(found)


def _add_callee(node: ast.expr, found: Set[str]) -> None:
    if type(node) is ast.Call:
        func = node.func
        if type(func) is ast.Name:
            found.add(func.id)
        elif type(func) is ast.Attribute:
            found.add(func.attr)  # self.make_block(...)


def literal_flags(tree: ast.Module) -> FrozenSet[Tuple[str, str, bool]]:
    """(callee name, keyword, value) for each ``f(..., keyword=True/False)`` of the file (the
    callee by its last name: ``make_layers``, ``self.block``)."""
    found: Set[Tuple[str, str, bool]] = set()
    for node in ast.walk(tree):
        if type(node) is not ast.Call:
            continue
        func = node.func
        callee = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else None
        if callee is None:
            continue
        for kw in node.keywords:
            if kw.arg is not None and type(kw.value) is ast.Constant and isinstance(kw.value.value, bool):
                found.add((callee, kw.arg, kw.value.value))
    return frozenset(found)
