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
from typing import TYPE_CHECKING, Collection, Dict, FrozenSet, List, Optional, Set, Tuple, cast

from torchlint.loaderfacts import dotted as _dotted  # `a.b.c` of a Name/Attribute chain, or None

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
        # the names are read line by line with `^`...`\n` patterns: a file saved with lone CRs
        # (or CRLF) is read as CPython reads it, one statement a line (test_fuzz_text)
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
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


def numpy_functions(names: Names) -> FrozenSet[Tuple[Where, str]]:
    """(function, dtype or "") for each function of the file whose every ``return`` gives a NumPy
    array (at least one; no ``yield``). Calls to other functions are not followed: the answer of
    each function depends on its own code and the file's imports only. Read from the lines that
    spell ``return`` (a function's other code only where a returned name needs its assignments)."""
    index = names.index
    functions: Dict[int, Tuple[ast.FunctionDef, Where, List[Optional[ast.expr]]]] = {}
    for line in index.word_lines("return"):
        for node, parents in index.nodes_on(line):
            if type(node) is not ast.Return or node.lineno != line:
                continue
            at = next((i for i in range(len(parents) - 1, -1, -1)
                       if type(parents[i]) in (ast.FunctionDef, ast.AsyncFunctionDef)), None)
            if at is None:
                continue
            function = cast(ast.FunctionDef, parents[at])
            if id(function) not in functions:
                where = tuple(("c" if type(p) is ast.ClassDef else "d", cast(ast.FunctionDef, p).name)
                              for p in parents[:at + 1] if isinstance(p, _SCOPES))
                functions[id(function)] = (function, where, [])
            functions[id(function)][2].append(node.value)
    if not functions:
        return frozenset()
    generators: Set[int] = set()
    for line in index.word_lines("yield"):
        for node, parents in index.nodes_on(line):
            if type(node) in (ast.Yield, ast.YieldFrom):
                owner = next((p for p in reversed(parents) if type(p) in (ast.FunctionDef, ast.AsyncFunctionDef)), None)
                if owner is not None:
                    generators.add(id(owner))
    found: Set[Tuple[Where, str]] = set()
    for key, (function, where, returns) in functions.items():
        if key in generators or any(value is None for value in returns):
            continue
        dtype = _returns_array(function, cast(List[ast.expr], returns), names)
        if dtype is not None:
            found.add((where, dtype))
    return frozenset(found)


def _returns_array(function: ast.FunctionDef, returns: List[ast.expr], names: Names) -> Optional[str]:
    args = function.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    assigned: Dict[str, List[Optional[ast.expr]]] = {}
    if any(type(_chain_root(value)) is ast.Name for value in returns):
        assigned = _assignments(function)  # a returned name: its assignments in the function
    dtypes = set()
    for value in returns:
        dtype = numpy_array(value, names, assigned, params, set())
        if dtype is None:
            return None
        dtypes.add(dtype)
    return dtypes.pop() if len(dtypes) == 1 else ""


def _chain_root(value: ast.expr) -> ast.expr:
    """``a`` of ``a.astype(t).reshape(n)``."""
    while True:
        if type(value) is ast.Call and type(value.func) is ast.Attribute:
            value = value.func.value
        else:
            return value


def _assignments(function: ast.FunctionDef) -> Dict[str, List[Optional[ast.expr]]]:
    """name -> the values the function's own code assigns it (None: a value not known)."""
    assigned: Dict[str, List[Optional[ast.expr]]] = {}
    stack: List[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if isinstance(node, _SCOPES) or kind is ast.Lambda:
            if kind is not ast.Lambda:
                assigned.setdefault(cast(ast.FunctionDef, node).name, []).append(None)
            continue
        if kind is ast.Assign:
            value = cast(ast.Assign, node).value
            for target in cast(ast.Assign, node).targets:
                _bind(target, value, assigned)
        elif kind is ast.AnnAssign and cast(ast.AnnAssign, node).value is not None:
            _bind(cast(ast.AnnAssign, node).target, cast(ast.expr, cast(ast.AnnAssign, node).value), assigned)
        elif kind in (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.With, ast.AsyncWith,
                      ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.ExceptHandler):
            for name in _names_bound(node):
                assigned.setdefault(name, []).append(None)
        stack.extend(ast.iter_child_nodes(node))
    return assigned


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
# `in self.layers`, `in enumerate(self.layers)`: the cheap test before the walk
_ITERATES_SELF = re.compile(r"in\s+(?:(?:enumerate|zip|reversed|list|tuple|iter)\s*\(\s*)*self\s*\.")


def layer_iterating_classes(index: "AstIndex") -> FrozenSet[str]:
    """Names of the classes of the file that iterate, in a method, a module handed to their ``__init__``
    (``self.seq_module = seq_module`` ... ``for module in self.seq_module: x = module(x)``): code
    of theirs may run between the layers, so a container given to them does not chain its layers
    straight (deepspeech's ``MaskConv(nn.Sequential(conv, bn, ...))`` masks between them). Read
    from the ``for`` statements only (the lines that spell ``for``)."""
    found: Set[str] = set()
    given_of: Dict[int, Set[str]] = {}
    for line in index.lines_matching(_ITERATES_SELF):
        for node, parents in index.nodes_on(line):
            if type(node) not in (ast.For, ast.AsyncFor) or cast(ast.For, node).lineno != line:
                continue
            method = next((p for p in reversed(parents) if type(p) in (ast.FunctionDef, ast.AsyncFunctionDef)), None)
            if method is None:
                continue
            at = parents.index(method)
            cls = parents[at - 1] if at > 0 else None
            if type(cls) is not ast.ClassDef or cls.name in found:
                continue
            if id(cls) not in given_of:
                given_of[id(cls)] = _given_modules(cls)
            if _iterates(cast(ast.For, node).iter, given_of[id(cls)]):
                found.add(cls.name)
    return frozenset(found)


def _given_modules(cls: ast.ClassDef) -> Set[str]:
    """The ``self`` attributes ``__init__`` binds to one of its parameters."""
    init = next((m for m in cls.body if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef)
                 and cast(ast.FunctionDef, m).name == "__init__"), None)
    if init is None:
        return set()
    args = cast(ast.FunctionDef, init).args
    params = {a.arg for a in (*args.posonlyargs, *args.args[1:], *args.kwonlyargs)}
    given: Set[str] = set()
    stack: List[ast.AST] = list(cast(ast.FunctionDef, init).body)
    while stack:  # statements only
        stmt = stack.pop()
        if type(stmt) is ast.Assign and type(stmt.value) is ast.Name and stmt.value.id in params:
            for target in stmt.targets:
                if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == "self":
                    given.add(target.attr)
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            stack.extend(child for child in ast.iter_child_nodes(stmt) if isinstance(child, ast.stmt))
    return given


def _iterates(iterable: ast.expr, attributes: Set[str]) -> bool:
    while type(iterable) is ast.Call and type(iterable.func) is ast.Name and iterable.func.id in _ITERATION_WRAPPERS:
        if not iterable.args:
            return False
        iterable = iterable.args[0]
    return (type(iterable) is ast.Attribute and type(iterable.value) is ast.Name and iterable.value.id == "self"
            and iterable.attr in attributes)


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


#: A pinned-loader answer: (scope, dotted name, DEFAULT / ELEMENTS / "" for a binding that does
#: not pin or is not a loader call). The scope is the function (or module, ``()``) whose code
#: binds the name; for ``self.x``, the class.
PinnedEntry = Tuple[Where, str, str]


def pinned_loaders(names: Names, is_torch_loader, classes: FrozenSet[str],
                   aliases: List[str], words: Optional[Collection[str]] = None) -> FrozenSet[PinnedEntry]:
    """(scope, dotted name, setting) for each binding of a name some statement of the file
    assigns a ``DataLoader(...)`` call: the loader calls themselves (``pin_memory=True``, or
    ``pin_memory=torch.cuda.is_available()``: true wherever a move to the GPU happens, pins; a
    call of one of the file's other loader ``classes``, a subclass or MONAI's, counts by keywords
    only), and every other binding of the same names (another assignment, a parameter, a loop
    target: ""), so that a name is pinned in a scope only when all its bindings there pin. The
    calls come from the words that name a loader (``aliases``: DataLoader's local names).
    ``words``: the last parts of the names whose other bindings are read (default: those of the
    loader calls found here; a file read in chunks passes those of the whole file's calls, so a
    chunk without the loader's call still gives its other bindings of the name)."""
    index = names.index
    calls = index.calls_of("DataLoader", *aliases, *sorted(classes))
    if calls is None:  # spellings the word search cannot follow: walk the tree
        calls = [(n, _parents_of(index.tree, n)) for n in ast.walk(index.tree) if type(n) is ast.Call]
    entries: Set[PinnedEntry] = set()
    loader_values: Set[int] = set()
    declared: Set[Tuple[Where, str]] = set()  # (function, name) for each `global name`
    for line in index.word_lines("global"):
        for node, parents in index.nodes_on(line):
            if type(node) is ast.Global:
                declared.update((_binding_scope(parents, ""), name) for name in node.names)

    def scope_of(parents: tuple, dotted: str) -> Where:
        scope = _binding_scope(parents, dotted)
        return () if (scope, dotted) in declared else scope

    for call, path in calls:
        statement = next((n for n, _ in index.nodes_on(call.lineno)
                          if type(n) in (ast.Assign, ast.AnnAssign) and cast(ast.Assign, n).value is call), None)
        if statement is None:
            continue
        func = call.func
        torch_loader = is_torch_loader(func)
        if not torch_loader and not (type(func) is ast.Name and func.id in classes):
            continue
        loader_values.add(id(call))
        setting = _pin_setting(call, names, torch_loader, _spread_keywords(call, path)) or ""
        targets = (statement.targets if type(statement) is ast.Assign
                   else [cast(ast.AnnAssign, statement).target])
        for target in targets:
            dotted = _dotted(target)
            if dotted is not None:
                entries.add((scope_of(path, dotted), dotted, setting))
    # every other binding of those names: unknown
    if words is None:
        words = {name.rsplit(".", 1)[-1] for _, name, _ in entries}
    for word in sorted(words):
        for line in index.word_lines(word):
            for node, parents in index.nodes_on(line):
                dotted = _bound_name(node, parents, word)
                if dotted is None:
                    continue
                value = getattr(parents[-1], "value", None) if parents else None
                if value is not None and (id(value) in loader_values or (
                        type(value) is ast.Constant and value.value is None)):
                    continue  # the loader assignment itself; `loader = None` until it is built
                entries.add((scope_of(parents, dotted), dotted, ""))
    return frozenset(entries)


def _parents_of(tree: ast.AST, target: ast.AST) -> tuple:
    stack: List[Tuple[ast.AST, tuple]] = [(tree, ())]
    while stack:
        node, parents = stack.pop()
        if node is target:
            return parents
        stack.extend((child, parents + (node,)) for child in ast.iter_child_nodes(node))
    return ()


def _bound_name(node: ast.AST, parents: tuple, word: str) -> Optional[str]:
    """The dotted name ``node`` binds when it is a binding of ``word`` (a stored Name, a stored
    ``self.word``, a parameter), else None."""
    kind = type(node)
    if kind is ast.Name and node.id == word and type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
        return word
    if kind is ast.Attribute and node.attr == word and type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
        return _dotted(cast(ast.Attribute, node))
    if kind is ast.arg and node.arg == word:  # type: ignore[attr-defined]
        return word
    return None


def _binding_scope(parents: tuple, dotted: str) -> Where:
    """The scope a binding made under ``parents`` belongs to: its function's (a parameter's
    function is in ``parents``), the class for ``self.x``."""
    scope = tuple(("c" if type(p) is ast.ClassDef else "d", p.name) for p in parents if isinstance(p, _SCOPES))
    if dotted.startswith("self."):
        for i in range(len(scope) - 1, -1, -1):
            if scope[i][0] == "c":
                return scope[:i + 1]
    return scope


def pinned_setting(entries: FrozenSet[PinnedEntry], scope: Where, name: str) -> Optional[str]:
    """How the loader ``name`` read in ``scope`` pins: DEFAULT/ELEMENTS when every binding of it
    that the read may see pins (the scope's own bindings, else an enclosing function's, else the
    module's; for ``self.x`` the class's), None otherwise."""
    if name.startswith("self."):
        for i in range(len(scope) - 1, -1, -1):
            if scope[i][0] == "c":
                return _merged_setting(entries, scope[:i + 1], name)
        return None
    for i in range(len(scope), -1, -1):
        where = scope[:i]
        if where and where[-1][0] == "c":
            continue  # a method does not see its class body's names
        if any(s == where and n == name for s, n, _ in entries):
            return _merged_setting(entries, where, name)
    return None


def _merged_setting(entries: FrozenSet[PinnedEntry], scope: Where, name: str) -> Optional[str]:
    settings = {setting for s, n, setting in entries if s == scope and n == name}
    if not settings or "" in settings:
        return None
    return ELEMENTS if ELEMENTS in settings else DEFAULT


def _spread_keywords(call: ast.Call, path: tuple) -> Optional[Dict[str, ast.expr]]:
    """The keywords ``**loader_args`` passes, when every ``**`` spreads a name the function (or
    module) around the call binds once, by a statement of its own body, to ``dict(k=v, ...)`` or
    a ``{"k": v}`` literal; None when one is unknown."""
    spreads = [kw.value for kw in call.keywords if kw.arg is None]
    if not spreads:
        return {}
    owner = next((p for p in reversed(path) if type(p) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)), None)
    if owner is None:
        return None
    found: Dict[str, ast.expr] = {}
    for spread in spreads:
        if type(spread) is not ast.Name:
            return None
        values = [s.value for s in ast.walk(owner) if type(s) is ast.Assign and any(
            type(t) is ast.Name and t.id == spread.id for t in s.targets)] if type(owner) is not ast.Module else [
            s.value for s in owner.body if type(s) is ast.Assign and any(
                type(t) is ast.Name and t.id == spread.id for t in s.targets)]
        if len(values) != 1:
            return None
        value = values[0]
        if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "dict" and not value.args:
            for kw in value.keywords:
                if kw.arg is None:
                    return None
                found[kw.arg] = kw.value
        elif type(value) is ast.Dict:
            for key, item in zip(value.keys, value.values):
                if type(key) is not ast.Constant or not isinstance(key.value, str):
                    return None
                found[key.value] = item
        else:
            return None
    return found


def _pin_setting(call: ast.Call, names: Names, positional: bool,
                 spread: Optional[Dict[str, ast.expr]] = None) -> Optional[str]:
    """DEFAULT/ELEMENTS when the loader call pins its batches; None when it does not or may not.
    ``spread``: the keywords its ``**`` arguments are known to pass (None: unknown)."""
    pin = _argument(call, "pin_memory", _PIN_MEMORY if positional else None)
    if pin is None and spread:
        pin = spread.get("pin_memory")
    if pin is None or not _true_on_gpu(pin, names):
        return None
    collate = _argument(call, "collate_fn", _COLLATE_FN if positional else None)
    if collate is None and spread:
        collate = spread.get("collate_fn")
    if collate is None:
        if spread is None and any(kw.arg is None for kw in call.keywords):
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


# -- functions whose returned lists become layers; literal flags passed to functions (TL301) ------
# `*f(`, `*self.f(`, `.extend(f(`, `+= f(`: where a helper's result may join a list of layers
_LAYER_LIST_USE = re.compile(r"\*\s*(?:self\s*\.\s*)?\w+\s*\(|\.\s*extend\s*\(|\+=\s*(?:self\s*\.\s*)?\w+\s*\(")


def layer_list_functions(names: Names) -> FrozenSet[str]:
    """Names ``f`` of the functions whose result the file uses as a list of layers: ``*f(...)``
    among the arguments of ``nn.Sequential(...)``, ``layers.extend(f(...))``, ``layers += f(...)``
    (by the callee's name: a nested helper of ``__init__`` as a module-level one). Read on the
    lines that spell one of those only."""
    index = names.index
    found: Set[str] = set()
    seen: Set[int] = set()
    for line in index.lines_matching(_LAYER_LIST_USE):
        for node, parents in index.nodes_on(line):
            if id(node) in seen:
                continue
            seen.add(id(node))
            kind = type(node)
            if kind is ast.Starred and parents and type(parents[-1]) is ast.Call:
                call = parents[-1]
                if node in call.args and index.resolves(call.func, lambda q: q == "torch.nn.Sequential"):
                    _add_callee(cast(ast.Starred, node).value, found)
            elif kind is ast.Call:
                func = cast(ast.Call, node).func
                args = cast(ast.Call, node).args
                if type(func) is ast.Attribute and func.attr == "extend" and len(args) == 1:
                    _add_callee(args[0], found)
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


# `keyword=True` / `keyword = False` after `(` or `,`: an argument
_FLAG_KEYWORD = re.compile(r"[(,]\s*(\w+)\s*=\s*(True|False)\b")
_OPENERS = {")": "(", "]": "[", "}": "{"}


def literal_flags(text: str) -> FrozenSet[Tuple[str, str, bool]]:
    """(callee name, keyword, value) for each ``f(..., keyword=True/False)`` of the text (the
    callee by its last name: ``make_layers``, ``self.block``): from each such keyword back to the
    bracket that opens its call. A string or comment in between leaves that keyword out (the
    scan cannot vouch for brackets there): a flag not found is one not known to be passed."""
    found: Set[Tuple[str, str, bool]] = set()
    for match in _FLAG_KEYWORD.finditer(text):
        callee = _callee_before(text, match.start())
        if callee is not None:
            found.add((callee, match.group(1), match.group(2) == "True"))
    return frozenset(found)


def _callee_before(text: str, at: int) -> Optional[str]:
    """The name called by the call whose argument list holds position ``at``."""
    depth, i, stop = 0, at, max(0, at - 4000)
    while i >= stop:
        c = text[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c != "(":
                    return None
                j = i - 1
                while j >= 0 and text[j] in " \t":
                    j -= 1
                k = j
                while k >= 0 and (text[k].isalnum() or text[k] == "_"):
                    k -= 1
                name = text[k + 1:j + 1]
                if not name or name[0].isdigit():
                    return None
                while k >= 0 and text[k] in " \t":
                    k -= 1
                if text[max(0, k - 2):k + 1] == "def" and (k < 3 or not (text[k - 3].isalnum() or text[k - 3] == "_")):
                    return None  # `def f(x, flag=True)`: a default, not a call
                return name
            depth -= 1
        elif c in "'\"":  # a one-line string: back over it
            j = text.rfind(c, stop, i)
            if j < 0 or "\n" in text[j:i] or "\\" in text[j:i] or text[i - 2:i + 1] == c * 3:
                return None
            i = j
        elif c == "#":
            return None
        i -= 1
    return None


# -- parameters that receive pinned loaders (TL203, issue 29 class 2) -----------------------------
def _pinned_test(pinned: FrozenSet[PinnedEntry]):
    def is_pinned(node: ast.expr, parents: tuple) -> bool:
        name = _dotted(node)
        return name is not None and pinned_setting(pinned, _binding_scope(parents, ""), name) == DEFAULT
    return is_pinned


def pinned_callees(index: "AstIndex", pinned: FrozenSet[PinnedEntry]) -> FrozenSet[str]:
    """Names of the functions some call of the file hands a pinned loader with the default
    collate (``train(model, train_loader)``), by position or keyword."""
    loaders = {name for _, name, setting in pinned if setting == DEFAULT}
    if not loaders:
        return frozenset()
    is_pinned = _pinned_test(pinned)
    found: Set[str] = set()
    for word in sorted({name.rsplit(".", 1)[-1] for name in loaders}):
        for line in index.word_lines(word):
            for node, parents in index.nodes_on(line):
                if type(node) is not ast.Call:
                    continue
                callee = _callee_name(node)
                if callee is not None and (any(is_pinned(a, parents) for a in node.args) or any(
                        k.arg is not None and is_pinned(k.value, parents) for k in node.keywords)):
                    found.add(callee)
    return frozenset(found)


#: One record of ``handoffs``: ("def", function, "", its parameters joined by ",") or ("call",
#: function, "line:column", "slot=0|1;..." for each argument, "*" for a call with *args/**kwargs).
Handoff = Tuple[str, str, str, str]


def handoffs(index: "AstIndex", pinned: FrozenSet[PinnedEntry], callees: FrozenSet[str]) -> FrozenSet[Handoff]:
    """The definitions and every call of ``callees`` (``pinned_callees``), each call with which of
    its arguments are pinned loaders: records a file read in chunks merges, combined by
    ``pinned_parameters``."""
    is_pinned = _pinned_test(pinned)
    records: Set[Handoff] = set()
    for callee in sorted(callees):
        for line in index.word_lines(callee):
            for node, parents in index.nodes_on(line):
                kind = type(node)
                if kind in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name == callee and node.lineno == line:  # type: ignore[attr-defined]
                    function = cast(ast.FunctionDef, node)
                    args = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
                    if args and args[0] in ("self", "cls"):
                        args = args[1:]
                    args += [a.arg for a in function.args.kwonlyargs]
                    records.add(("def", callee, f"{function.lineno}:{function.col_offset}", ",".join(args)))
                elif kind is ast.Call and _callee_name(cast(ast.Call, node)) == callee:
                    call = cast(ast.Call, node)
                    where = f"{call.lineno}:{call.col_offset}"
                    if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
                        records.add(("call", callee, where, "*"))
                        continue
                    slots = [f"{i}={int(is_pinned(a, parents))}" for i, a in enumerate(call.args)]
                    slots += [f"{k.arg}={int(is_pinned(k.value, parents))}" for k in call.keywords]
                    records.add(("call", callee, where, ";".join(slots)))
    return frozenset(records)


def pinned_parameters(records: FrozenSet[Handoff]) -> FrozenSet[Tuple[str, str]]:
    """(function name, parameter name) for the parameters of the file's functions that every call
    of the function in the file hands a pinned loader with the default collate: at least one
    call, each passing such a name by position or keyword. A function defined twice under one
    name, or called with ``*args``/``**kwargs``, is left out."""
    defs: Dict[str, List[str]] = {}
    calls: Dict[str, List[str]] = {}
    for kind, callee, _, value in sorted(records):
        (defs if kind == "def" else calls).setdefault(callee, []).append(value)
    found: Set[Tuple[str, str]] = set()
    for callee, params_list in defs.items():
        made = calls.get(callee, [])
        if len(params_list) != 1 or not made or "*" in made:
            continue
        params = [p for p in params_list[0].split(",") if p]
        slot_maps = [dict(item.split("=", 1) for item in call.split(";") if item) for call in made]
        for position, param in enumerate(params):
            if all(slots.get(param, slots.get(str(position))) == "1" for slots in slot_maps):
                found.add((callee, param))
    return frozenset(found)


def _callee_name(call: ast.Call) -> Optional[str]:
    func = call.func
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id in ("self", "cls"):
        return func.attr
    return None


