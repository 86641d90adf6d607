"""Which of a file's classes compute the same in training and evaluation mode (issue 29, class 8).

``model.eval()`` matters only to a module that has a layer whose forward reads the mode:
dropout, batch norm (and instance norm that tracks running statistics), ``RReLU``, the
transformer layers (dropout by default), recurrent and attention layers given a ``dropout``, or
code that reads ``self.training`` itself. A class of the file whose every layer is known and
has none of those (``nn.Linear``, convolutions, ``LayerNorm``, activations, other such classes
of the file) is *mode-free*: running it in training mode after loading weights gives the same
outputs (TL902 stays silent for it).

Unknown is never mode-free: a base class or a layer from another package (``timm.layers.Mlp``),
a layer built by calling a parameter (``norm_layer(dim)``), a function of another file.
Computed from CPython's tree of the file (``FileModel.mode_free_classes``), one walk per class
and function of the file, only when a rule asks.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Dict, FrozenSet, Optional, Set, Tuple

from torchlint.torch_api import canonical_name

# torch layers and functions whose forward reads the module's mode
_MODE_DEPENDENT = re.compile(r"Dropout|dropout|BatchNorm|batch_norm|RReLU|rrelu|Transformer")
# ... only when given a `dropout` (default 0) or `track_running_stats` (default False)
_DEPENDENT_WITH = {"MultiheadAttention": "dropout", "LSTM": "dropout", "GRU": "dropout", "RNN": "dropout",
                   "InstanceNorm1d": "track_running_stats", "InstanceNorm2d": "track_running_stats",
                   "InstanceNorm3d": "track_running_stats", "scaled_dot_product_attention": "dropout_p"}
_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
# other packages whose functions build no layer
_PLAIN_PACKAGES = frozenset({"math", "numpy", "functools", "itertools", "operator", "typing", "collections",
                             "warnings", "logging", "copy", "einops", "random", "dataclasses"})
_BUILTINS = frozenset(dir(builtins))


def mode_free_classes(tree: ast.Module, torch_bindings: Dict[str, Set[str]]) -> FrozenSet[str]:
    """The names of the module-level classes of ``tree`` that are mode-free (module docstring);
    ``torch_bindings``: the file's names of torch objects (``AstIndex.bindings``)."""
    classes: Dict[str, ast.ClassDef] = {}
    functions: Dict[str, ast.AST] = {}
    plain: Set[str] = set()  # names imported from packages that build no layer
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.Import):
            plain.update(a.asname or a.name.split(".", 1)[0] for a in node.names
                         if a.name.split(".", 1)[0] in _PLAIN_PACKAGES)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".", 1)[0] in _PLAIN_PACKAGES:
                plain.update(a.asname or a.name for a in node.names)
    if not classes:
        return frozenset()
    judged: Dict[str, Optional[bool]] = {}  # name -> mode-free (None: being judged, a cycle)

    def torch_names(node: ast.AST) -> Set[str]:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return set()
        rest = ".".join(reversed(parts))
        return {canonical_name(f"{q}.{rest}" if rest else q) for q in torch_bindings.get(node.id, ())}

    def free(name: str) -> bool:
        if name in judged:
            return bool(judged[name])
        judged[name] = None
        definition = classes.get(name) or functions.get(name)
        result = definition is not None and body_free(definition)
        if result and isinstance(definition, ast.ClassDef):
            result = all(base_free(base) for base in definition.bases)
        judged[name] = result
        return result

    def base_free(base: ast.expr) -> bool:
        if isinstance(base, ast.Name) and base.id in classes:
            return free(base.id)
        names = torch_names(base)
        return bool(names) and names <= _MODULE_BASES

    def locals_of(definition: ast.AST) -> Set[str]:
        found = set()
        for node in ast.walk(definition):
            if isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
        return found

    def factories_of(definition: ast.AST) -> Set[str]:
        """Parameters that may be layer factories: those of ``__init__`` and of a module-level
        function (``norm_layer(dim)``); elsewhere a call of a local runs a layer (``block(x)``)."""
        builders = [definition] if not isinstance(definition, ast.ClassDef) else [
            n for n in definition.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"]
        return {a.arg for f in builders if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                for a in ast.walk(f.args) if isinstance(a, ast.arg)}

    def body_free(definition: ast.AST) -> bool:
        local = locals_of(definition)
        factories = factories_of(definition)
        for node in ast.walk(definition):
            if isinstance(node, ast.Attribute) and node.attr == "training":
                return False  # `if self.training:`, `training=self.training`
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("train", "eval") \
                    and node is not definition:
                return False  # a module that changes what the mode switch does
            if isinstance(node, ast.Call) and not call_free(node, local, factories):
                return False
        return True

    def call_free(call: ast.Call, local: Set[str], factories: Set[str]) -> bool:
        func = call.func
        names = torch_names(func)
        if names:
            return not any(dependent(name, call) for name in names)
        if isinstance(func, ast.Name):
            if func.id in factories:
                return False  # norm_layer(dim): a layer handed in
            if func.id in local:
                return True  # block(x): a layer of the module, run
            if func.id in classes or func.id in functions:
                return free(func.id)
            return func.id in _BUILTINS or func.id in plain
        if not isinstance(func, ast.Attribute):
            return False  # getattr(nn, name)(...), layers[i](x) in __init__: not followed
        root: ast.expr = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super":
            return True  # super().__init__()
        if isinstance(root, ast.Name):
            # a method of self, of a local value (x.view), of a plain package (math.sqrt)
            return root.id in ("self", "cls") or root.id in local or root.id in plain
        return True  # a method of an expression's value: `self.proj(x).split(...)`

    for name in classes:
        free(name)
    return frozenset(name for name in classes if judged.get(name))


def dependent(name: str, call: ast.Call) -> bool:
    """Does the torch layer or function ``name``, called as ``call``, read the mode?"""
    last = name.rsplit(".", 1)[-1]
    if _MODE_DEPENDENT.search(last):
        return True
    keyword = _DEPENDENT_WITH.get(last)
    if keyword is None:
        return False
    for arg in call.keywords:
        if arg.arg == keyword or arg.arg is None:
            return not (isinstance(arg.value, ast.Constant) and not arg.value.value)
    return len(call.args) > _positional_limit(last)


def _positional_limit(name: str) -> int:
    """How many positional arguments leave ``dropout``/``track_running_stats`` at its default
    (a layer given more may set it)."""
    return {"MultiheadAttention": 2, "LSTM": 5, "GRU": 5, "RNN": 6, "InstanceNorm1d": 4, "InstanceNorm2d": 4,
            "InstanceNorm3d": 4, "scaled_dot_product_attention": 4}.get(name, 99)


# -- classes of another project file (W3: ``FileFacts.mode_free``) --------------------------------
_JUDGED: Dict[Tuple[str, str], FrozenSet[str]] = {}  # (path, class_text hash) -> its mode-free classes


def judge_file(path: str, class_text: str) -> FrozenSet[str]:
    """The mode-free classes of the project file ``path``, read from disk once per process and
    ``class_text`` (the hash its summary gave the statements the answer depends on); none when
    it cannot be read or parsed."""
    key = (path, class_text)
    found = _JUDGED.get(key)
    if found is None:
        found = _JUDGED[key] = _judge(path)
    return found


def _judge(path: str) -> FrozenSet[str]:
    import warnings

    from torchlint.astindex import AstIndex
    from torchlint.source import UnreadableFile, decode_source

    try:
        with open(path, "rb") as handle:
            text = decode_source(handle.read(), path).text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (OSError, UnreadableFile, SyntaxError, ValueError, MemoryError, RecursionError):
        return frozenset()
    return mode_free_classes(tree, AstIndex(tree, text).bindings())
