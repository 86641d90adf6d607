"""TL9xx: correctness, security and deprecation rules (TorchFix's successor).

Each rule is silent in compatibility code: the body or handler of a ``try`` that catches
``ImportError``/``ModuleNotFoundError``/``AttributeError``, either branch of an ``if`` (or a
conditional expression) that tests a version or ``hasattr``/``getattr``, and (TL904, TL907) calls
of names imported in such code (``try: from torch.func import vmap`` / ``except ImportError: from
functorch import vmap``). Code written for several torch versions keeps the old spelling on
purpose; TorchFix flagged it and users had to suppress it by hand.
"""

from __future__ import annotations

import functools
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import DELETE_LINES, INSERT_BEFORE, FixSpec, NodeEdit
from torchlint.deprecations import (
    DEPRECATED_TOKENS,
    DEPRECATIONS,
    TORCHVISION_SUBMODULES,
    TORCHVISION_WEIGHTS,
    is_pure_rename,
)
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.fixbuilders import line_after, with_keyword_args
from torchlint.imports import dotted_name
from torchlint.model import _COMPAT_ERRORS, _FEATURE_TESTS, _TORCH_PACKAGES, _VERSION_TEST, scope_of
from torchlint.rules.base import Rule
from torchlint.syntax import get_arg, has_star_args, literal_value, may_bind
from torchlint.tree import walk

TORCH_LOAD = frozenset({"torch.load", "torch.serialization.load"})
CHECKPOINT_FUNCTIONS = frozenset({"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"})
VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Bases that make a class an nn.Module whose __init__ must run before submodules are assigned.
MODULE_BASES = frozenset({
    "torch.nn.Module", "torch.nn.module.Module", "torch.nn.Sequential", "torch.nn.ModuleList",
    "torch.nn.ModuleDict", "torch.nn.ParameterList", "torch.nn.ParameterDict",
})
# Methods that store into the registries Module.__init__ creates.
_REGISTERING_METHODS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})
# torch.load's parameters: (f, map_location, pickle_module, *, weights_only, mmap, **pickle_load_args).
_PICKLE_MODULE_POSITION = 2
# weights_only=None means True from torch 2.6 on.
_WEIGHTS_ONLY_DEFAULT_TRUE = (2, 6)

# -- compatibility code ------------------------------------------------------------------------
# What makes code compatibility code (caught import errors, a version or feature test): the
# whole-file model's definitions, read here on libcst's tree of the code a rule walks.
# Imports in compatibility code that bind an old spelling TL904/TL907 would otherwise follow.
_COMPAT_IMPORT_TARGETS = frozenset({"functorch", "torch.cuda.amp", "torch.cpu.amp"})


def _catches_compat_error(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return False
    types = [e.value for e in handler.type.elements] if isinstance(handler.type, cst.Tuple) else [handler.type]
    for node in types:
        name = dotted_name(node)
        if name is not None and name.rsplit(".", 1)[-1] in _COMPAT_ERRORS:
            return True
    return False


def _is_version_test(ctx, test: cst.BaseExpression) -> bool:
    if _VERSION_TEST.search(ctx.module.code_for_node(test)):
        return True
    for node in walk(test):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _FEATURE_TESTS and node.args:
            about = ctx.resolve(node.args[0].value) or ""
            if about.split(".", 1)[0] in _TORCH_PACKAGES:
                return True
    return False


def in_compatibility_code(ctx, node: Optional[cst.CSTNode] = None) -> bool:
    """Is the node being visited (or ``node``, its descendant) in code kept for other versions:
    a ``try`` body or handler around ``except ImportError/ModuleNotFoundError/AttributeError``,
    or either branch of an ``if``/conditional expression testing a version, ``hasattr`` or
    ``getattr``?"""
    path: List[cst.CSTNode] = list(ctx.ancestors)
    if node is not None:
        path.append(node)
    for outer, inner in zip(path, path[1:]):
        if isinstance(outer, (cst.If, cst.IfExp)) and inner is not outer.test:
            if _is_version_test(ctx, outer.test):
                return True
        elif isinstance(outer, cst.Try) and inner is outer.body:
            if any(_catches_compat_error(h) for h in outer.handlers):
                return True
        elif isinstance(outer, cst.ExceptHandler) and _catches_compat_error(outer):
            return True
    return False


def compat_imported_names(ctx) -> FrozenSet[str]:
    """Local names bound, in compatibility code, to an old API or its module (``from functorch
    import vmap`` under ``except ImportError``) and visible where the rule is looking: imports of
    the module and of the functions around it (the whole-file model: the definition holding the
    import may not be in the tree the rule walks)."""
    return ctx.model.compat_names(scope_of(ctx.ancestors), _is_old_api)


def _is_old_api(target: str) -> bool:
    """Is ``target`` (what a compatibility import binds) a table entry or an old API's module?"""
    return target in DEPRECATIONS or target in _COMPAT_IMPORT_TARGETS or target.startswith("functorch.")


def _callee_root(call: cst.Call) -> Optional[str]:
    name = dotted_name(call.func)
    return name.split(".", 1)[0] if name else None


# -- TL901 -------------------------------------------------------------------------------------
class TorchLoadWeightsOnly(Rule):
    """Flags ``torch.load(...)`` that may unpickle arbitrary objects: ``weights_only`` omitted
    while the target torch is older than 2.6 (where it defaults to ``False``), or a literal
    ``weights_only=False`` at any version.

    Silent: ``weights_only=True``, a non-literal value (a variable, ``not trusted``), ``**kwargs``
    (it may carry ``weights_only``), compatibility code, and test code.
    """

    code = "TL901"
    name = "torch-load-weights-only"
    summary = "`torch.load` may unpickle arbitrary code: `weights_only` omitted (torch < 2.6) or `False`."
    message = "`torch.load` without `weights_only` can run code from the file; pass `weights_only=True`"
    hint = "Before torch 2.6 it unpickles arbitrary objects: a crafted checkpoint runs code."
    explicit_message = "`torch.load(..., weights_only=False)` can run code from the file; load only trusted files"
    explicit_hint = (
        "It unpickles arbitrary objects (a crafted checkpoint runs code); save tensors and state "
        "dicts and load them with `weights_only=True`."
    )
    requires = (("load",), ("torch",))
    ast_candidate = staticmethod(lambda index: any(
        index.literal(index.keyword(call, "weights_only")) is False
        or (index.keyword(call, "weights_only") is None and not index.double_star(call)
            and index.version_below(_WEIGHTS_ONLY_DEFAULT_TRUE))
        for call, _ in index.qualified_calls(TORCH_LOAD)))
    fix_applicability = UNSAFE
    min_torch_version = (1, 13)  # weights_only= exists from 1.13
    tags = ("security",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) not in TORCH_LOAD:
            return
        arg = get_arg(node, "weights_only")
        if arg is not None:
            if literal_value(arg.value) is False and not in_compatibility_code(self.ctx, node):
                self.report(node, self.explicit_message, hint=self.explicit_hint)
            return
        if any(a.star == "**" for a in node.args) or self.ctx.torch_version >= _WEIGHTS_ONLY_DEFAULT_TRUE:
            return
        if in_compatibility_code(self.ctx, node):
            return
        fix = None
        if not may_bind(node, "pickle_module", _PICKLE_MODULE_POSITION):  # it refuses weights_only=True
            edit = NodeEdit(node, with_keyword_args(node, [("weights_only", cst.Name("True"))]))
            fix = FixSpec(UNSAFE, "Pass `weights_only=True`", (edit,))
        self.report(node, fix=fix)


# -- TL902 -------------------------------------------------------------------------------------
_TRAINING_WORDS = ("train", "resume", "fit", "finetune", "fine_tune")
# Calls through which a model keeps its identity: `Net().to(device)`, `Net().cuda()`.
_IDENTITY_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "to_empty"})


def _never(text: str) -> bool:
    """A prefilter token no text passes."""
    return False


class EvalAfterLoadStateDict(Rule):
    """Flags a model that gets weights (``model.load_state_dict(...)``, or ``model =
    torch.load(...)`` of a whole model) and is then called in the same function without
    ``.eval()``: dropout stays on and batch norm keeps updating its statistics.

    Only models the function builds itself are followed (``model = Net(...)``, a torchvision
    builder, ``torch.load``), so that the mode is known. Silent when ``.eval()`` or ``.train()``
    is called on it anywhere in the function, when it is returned, yielded, stored or passed to
    another call (the caller decides), and in training or resume code: a function that calls
    ``.backward()`` / ``.step()`` or is named for training, resuming or fitting.
    """

    code = "TL902"
    statement_local = False  # reads the whole module, read up front
    name = "eval-after-load-state-dict"
    summary = "A model is run after loading weights without `.eval()` (dropout and batch norm in training mode)."
    message = "`{model}` is run for inference without `.eval()`; call `{model}.eval()` first"
    hint = "It gets its weights here and is run below in training mode: dropout and batch norm behave as in training."
    requires = (("load",),)
    ast_candidate = staticmethod(lambda index: bool(index.qualified_calls(TORCH_LOAD)) or any(
        type(call.func.value).__name__ == "Name" for call, _ in index.method_calls("load_state_dict")))
    preview = True
    fix_applicability = UNSAFE
    tags = ("correctness",)
    # classes of other project files that read no mode (``FileFacts.mode_free``): the facts only
    # silence it, so a file with facts is linted only where its own prefilter says so
    uses_project = True
    project_requires = ((_never,),)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = node.name.value.lower()
        if any(word in name for word in _TRAINING_WORDS):
            return
        self._check_scope(node.body, node)

    def visit_Module(self, node: cst.Module) -> None:
        self._check_scope(node, None)

    def _check_scope(self, body: cst.CSTNode, function: Optional[cst.FunctionDef]) -> None:
        nodes = list(walk(body, (cst.FunctionDef, cst.ClassDef, cst.Lambda), include_root=False))
        order = {id(n): i for i, n in enumerate(nodes)}
        bindings: Dict[str, int] = {}  # name -> how many times the scope binds it
        loads: Dict[str, Optional[cst.Call]] = {}  # model built here -> the call that gives it weights
        for n in nodes:
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("backward", "step"):
                return  # training code
            if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                target = n.targets[0].target.value
                if _moved_in_place(n.value, target):
                    continue  # `model = model.to(device)`: the same module, moved
                bindings[target] = bindings.get(target, 0) + 1
                if self._builds_model(n.value):
                    built = _unwrap_identity(n.value)
                    loads[target] = built if self.ctx.resolve_call(built) in TORCH_LOAD else None
        candidates = {name for name in loads if bindings.get(name) == 1}
        if not candidates:
            return
        for n in nodes:  # the first load_state_dict of each model built without weights
            if (
                isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "load_state_dict"
                and isinstance(n.func.value, cst.Name) and n.func.value.value in candidates
                and loads[n.func.value.value] is None
            ):
                loads[n.func.value.value] = n
        for name in sorted(candidates):
            load = loads.get(name)
            if load is None or self._mode_known_or_handed_on(name, nodes, function):
                continue
            if any(
                isinstance(n, cst.Call) and order[id(n)] > order[id(load)] and (
                    isinstance(n.func, cst.Name) and n.func.value == name or self._helper_use(n, name) == "runs")
                for n in nodes
            ):
                self._report_at(load, self.message.format(model=name), name)

    def _builds_model(self, value: cst.BaseExpression) -> bool:
        call = _unwrap_identity(value)
        if not isinstance(call, cst.Call):
            return False
        resolved = self.ctx.resolve_call(call) or ""
        if resolved in TORCH_LOAD:
            return get_arg(call, "weights_only") is None or literal_value(get_arg(call, "weights_only").value) is False
        if resolved.startswith("torchvision.models."):
            return True
        last = dotted_name(call.func)
        if last is not None and self.ctx.model.is_mode_free_class(last):
            return False  # a class (of the file or one it imports) without dropout or batch norm: eval() changes nothing
        if isinstance(call.func, cst.Name) and self.ctx.semantic.lookup(call.func) is None:
            return False  # bound nowhere we can see (a cell that does not parse, a star import): unknown
        last = last.rsplit(".", 1)[-1] if last else ""
        return last[:1].isupper() and "pretrained" not in last.lower()  # Net(...), not from_pretrained

    def _helper_use(self, call: cst.Call, name: str) -> str:
        """What a function of this file called with the model ``name`` as an argument does with
        it: "runs" (calls it, and never sets its mode or hands it on), "none" (neither runs nor
        hands it on), "unknown" (sets its mode, hands it on, or is no function of this file)."""
        function = self.ctx.semantic.module_function(call.func) if isinstance(call.func, cst.Name) else None
        if function is None or function.asynchronous is not None:
            return "unknown"
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        seen: Set[str] = set()
        for i, arg in enumerate(call.args):
            if not (isinstance(arg.value, cst.Name) and arg.value.value == name):
                continue
            if arg.star:
                return "unknown"
            if arg.keyword is not None:
                seen.add(arg.keyword.value)
            elif i < len(params) and not any(a.keyword is not None or a.star for a in call.args[:i]):
                seen.add(params[i])
            else:
                return "unknown"
        if not seen or any(n in ("self", "cls") for n in seen):
            return "unknown"
        body = list(walk(function.body, (cst.ClassDef,)))
        runs = False
        used: Set[int] = set()  # the parameter's names read as the callee or a method's owner
        for n in body:
            if not isinstance(n, cst.Call):
                continue
            func = n.func
            if isinstance(func, cst.Name) and func.value in seen:
                runs = True
                used.add(id(func))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in seen \
                    and func.attr.value not in _MODE_METHODS:
                runs = runs or func.attr.value == "forward"
                used.add(id(func.value))
        if any(isinstance(n, cst.Name) and n.value in seen and id(n) not in used for n in body):
            return "unknown"  # its mode set, stored, returned, handed to another call, rebound
        return "runs" if runs else "none"

    def _mode_known_or_handed_on(self, name: str, nodes, function) -> bool:
        for n in nodes:
            if isinstance(n, cst.Call):
                func = n.func
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name:
                    if func.attr.value in ("eval", "train", "requires_grad_"):
                        return True
                    continue
                if any(isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
                    if self._helper_use(n, name) in ("runs", "none"):
                        continue  # a function of this file that runs it as it is, or ignores it
                    return True  # passed on: the callee decides
            elif isinstance(n, (cst.Return, cst.Yield)) and n.value is not None:
                values = [e.value for e in n.value.elements] if isinstance(n.value, (cst.Tuple, cst.List)) else [n.value]
                if any(isinstance(v, cst.Name) and v.value == name for v in values):
                    return True  # handed to the caller
            elif isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
                if not isinstance(n.value, cst.Name) or n.value.value != name:
                    continue
                return True  # stored under another name
            elif isinstance(n, (cst.Element, cst.DictElement)):
                value = n.value
                if isinstance(value, cst.Name) and value.value == name:
                    return True
        return False

    def _report_at(self, node: cst.Call, message: str, model: str) -> None:
        # The pass is at the scope's start; report as if at the node (noqa on its statement).
        walking = self.ctx.ancestors
        self.ctx.ancestors = _ancestors_of(self.ctx.module, node) or walking
        try:
            if not in_compatibility_code(self.ctx, node):
                edit = line_after(self.ctx, f"{model}.eval()")
                fix = FixSpec(UNSAFE, f"Call `{model}.eval()` after loading the weights", (edit,)) if edit else None
                self.report(node, message, fix=fix)
        finally:
            self.ctx.ancestors = walking


# Methods of a model that set its mode or hand it on as something else.
_MODE_METHODS = frozenset({"eval", "train", "requires_grad_", "apply"})


def _moved_in_place(value: cst.BaseExpression, name: str) -> bool:
    """``name.to(device)``, ``name.cuda().half()``: the module ``name`` itself, moved or cast."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _IDENTITY_METHODS):
        return False
    inner = value.func.value
    while isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value in _IDENTITY_METHODS:
        inner = inner.func.value
    return isinstance(inner, cst.Name) and inner.value == name


def _unwrap_identity(node: cst.BaseExpression) -> cst.BaseExpression:
    while (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _IDENTITY_METHODS and isinstance(node.func.value, cst.Call)
    ):
        node = node.func.value
    return node


def _ancestors_of(module: cst.Module, target: cst.CSTNode) -> Optional[List[cst.CSTNode]]:
    """The path from the module down to ``target`` (excluded)."""
    from torchlint.tree import iter_children

    stack: List[Tuple[cst.CSTNode, List[cst.CSTNode]]] = [(module, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        for child in iter_children(node):
            stack.append((child, path + [node]))
    return None


# -- TL903 -------------------------------------------------------------------------------------
class CheckpointUseReentrant(Rule):
    """Flags ``torch.utils.checkpoint.checkpoint(...)`` / ``checkpoint_sequential(...)`` without
    ``use_reentrant``. Silent with ``**kwargs``, in compatibility code and in test code."""

    code = "TL903"
    name = "checkpoint-use-reentrant"
    summary = "Activation checkpointing without an explicit `use_reentrant` (a warning now, an error later)."
    message = "Pass `use_reentrant` explicitly (`use_reentrant=False` is recommended)"
    hint = "Omitting it warns and will be an error; `use_reentrant=False` is the less restricted variant."
    requires = (("checkpoint",),)
    ast_candidate = staticmethod(lambda index: any(
        index.keyword(call, "use_reentrant") is None and not index.double_star(call)
        for call, _ in index.qualified_calls(CHECKPOINT_FUNCTIONS)))
    fix_applicability = UNSAFE
    min_torch_version = (2, 0)  # both functions take use_reentrant= from 2.0
    tags = ("correctness", "deprecation")
    method_local = True  # the call, its arguments and what its name resolves to

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) not in CHECKPOINT_FUNCTIONS or get_arg(node, "use_reentrant") is not None:
            return
        if any(a.star == "**" for a in node.args) or in_compatibility_code(self.ctx, node):
            return
        edit = NodeEdit(node, with_keyword_args(node, [("use_reentrant", cst.Name("False"))]))
        self.report(node, fix=FixSpec(UNSAFE, "Pass `use_reentrant=False`", (edit,)))


# -- TL904 -------------------------------------------------------------------------------------
def _version(v: Tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


class DeprecatedApi(Rule):
    """Flags calls of torch APIs that the target torch version deprecates or has removed
    (table: ``torchlint/deprecations.py``). Silent when the target predates the deprecation, in
    compatibility code, for names imported in compatibility code, and in test code."""

    code = "TL904"
    name = "deprecated-api"
    summary = "A deprecated or removed torch API (`torch.solve`, `functorch.vmap`, `torch.cuda.amp.autocast`, ...)."
    message = "`{name}` is deprecated."
    hint = "Deprecated functions warn on every call and go away in a later torch release."
    requires = (DEPRECATED_TOKENS, ("torch",))  # every entry is torch.* or functorch.*
    ast_candidate = staticmethod(lambda index: bool(index.qualified_calls(
        [name for name, entry in DEPRECATIONS.items() if index.version_at_least(entry.deprecated)], decorators=True)))
    fix_applicability = SAFE
    tags = ("deprecation",)
    method_local = True  # the call or decorator and what its name resolves to

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node, node.func, node)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if not isinstance(node.decorator, cst.Call):  # @torch.cuda.amp.custom_fwd, not called
            self._check(node.decorator, node.decorator, None)

    def _check(self, where: cst.CSTNode, func: cst.BaseExpression, call: Optional[cst.Call]) -> None:
        name = self.ctx.resolve(func)
        entry = DEPRECATIONS.get(name) if name else None
        if entry is None or self.ctx.torch_version < entry.deprecated:
            return
        root = dotted_name(func)
        if root and root.split(".", 1)[0] in compat_imported_names(self.ctx):
            return
        if in_compatibility_code(self.ctx, where):
            return
        self.report(where, _deprecation_message(entry), self._fix(entry, func, call), hint=entry.hint)

    def _fix(self, entry, func, call: Optional[cst.Call]) -> Optional[FixSpec]:
        if call is None or has_star_args(call):
            return None
        positional = sum(1 for a in call.args if a.keyword is None)
        keywords = frozenset(a.keyword.value for a in call.args if a.keyword is not None)
        if not is_pure_rename(entry, positional, keywords, self.ctx.torch_version):
            return None
        spelling, import_edit = _spelling(self.ctx, entry.replacement)
        edits = (NodeEdit(func, spelling),) if import_edit is None else (import_edit, NodeEdit(func, spelling))
        return FixSpec(SAFE, f"Use `{entry.replacement}`", edits)


def _deprecation_message(entry) -> str:
    if entry.removed is not None:
        text = f"`{entry.name}` was removed in torch {_version(entry.removed)} (calling it raises)"
    else:
        text = f"`{entry.name}` is deprecated since torch {_version(entry.deprecated)}"
    if entry.replacement:
        text += f"; use `{entry.replacement}`"
    return text + "."


def _spelling(ctx, qualified: str):
    """How to spell ``qualified`` here, and the import edit it needs (or None)."""
    # The most specific import wins: `F.interpolate` under `import torch.nn.functional as F`.
    best = None
    for local, target in ctx.imports.aliases.items():
        if (qualified == target or qualified.startswith(target + ".")) and (best is None or len(target) > len(best[1])):
            best = (local, target)
    if best is not None:
        return best[0] + qualified[len(best[1]):], None
    top, _, rest = qualified.partition(".")
    edit, top_local = ctx.import_edit(top)
    return f"{top_local}.{rest}" if rest else top_local, edit


# -- TL905 -------------------------------------------------------------------------------------
class ModuleInitSuper(Rule):
    """Flags an ``nn.Module`` subclass whose ``__init__`` assigns a submodule, parameter or buffer
    before ``super().__init__()`` runs (``AttributeError: cannot assign module before
    Module.__init__() call``), or sets attributes and never calls it at all (the module fails
    when called). Plain values assigned first (``self.dim = dim``) work and stay silent."""

    code = "TL905"
    name = "module-init-super"
    summary = "An `nn.Module` subclass assigns submodules or parameters before (or without) `super().__init__()`."
    message = "Call `super().__init__()` before assigning submodules, parameters or buffers"
    hint = "`nn.Module.__init__` creates the registries those assignments go into."
    missing_message = "`__init__` of this `nn.Module` never calls `super().__init__()`; call it first"
    requires = (("__init__",), ("Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"))
    ast_candidate = staticmethod(lambda index: index.module_init_candidate(MODULE_BASES))
    fix_applicability = SAFE
    tags = ("correctness",)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases = [self.ctx.resolve(b.value) for b in node.bases if b.keyword is None]
        if not any(b in MODULE_BASES for b in bases):
            return
        init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or init.decorators or not isinstance(init.body, cst.IndentedBlock):
            return
        nodes = list(walk(init.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda), include_root=False))
        super_call = next((n for n in nodes if _is_init_call(n)), None)
        first_store = next((n for n in nodes if self._stores_into_registry(n)), None)
        if super_call is None:
            if any(_assigns_self_attribute(n) for n in nodes) or first_store is not None:
                only_module = bases == ["torch.nn.Module"] or bases == ["torch.nn.module.Module"]
                self.report(init.name, self.missing_message, self._insert_fix(node, init) if only_module else None)
            return
        if first_store is None or _position(nodes, first_store) > _position(nodes, super_call):
            return
        self.report(first_store, fix=self._move_fix(node, init, super_call))

    def _stores_into_registry(self, n: cst.CSTNode) -> bool:
        if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None:
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            return any(_is_self_attribute(t) for t in targets) and self._is_module_or_parameter(n.value)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _REGISTERING_METHODS:
            return isinstance(n.func.value, cst.Name) and n.func.value.value == "self"
        return False

    def _is_module_or_parameter(self, value: cst.BaseExpression) -> bool:
        """A call of a class of torch.nn: ``nn.Linear(...)``, ``nn.Parameter(...)``."""
        name = self.ctx.resolve_call(value) or ""
        parts = name.split(".")
        return len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper()

    def _body_indent(self, cls: cst.ClassDef, init: cst.FunctionDef) -> str:
        default = self.ctx.module.default_indent
        outer = "".join(self.ctx.indentation())
        class_indent = cls.body.indent if isinstance(cls.body, cst.IndentedBlock) and cls.body.indent is not None else default
        init_indent = init.body.indent if init.body.indent is not None else default
        return outer + class_indent + init_indent

    def _first_statement(self, init: cst.FunctionDef) -> Optional[cst.CSTNode]:
        body = list(init.body.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        return body[0] if body else None

    def _insert_fix(self, cls, init) -> Optional[FixSpec]:
        first = self._first_statement(init)
        if first is None:
            return None
        edit = NodeEdit(first, f"super().__init__()\n{self._body_indent(cls, init)}", INSERT_BEFORE)
        return FixSpec(SAFE, "Call `super().__init__()` first", (edit,))

    def _move_fix(self, cls, init, super_call: cst.Call) -> Optional[FixSpec]:
        """Move an argument-less ``super().__init__()`` alone on its line to the top. With
        arguments it may read names computed before it: no fix."""
        if super_call.args or not isinstance(super_call.func.value, cst.Call) or super_call.func.value.args:
            return None
        line = next(
            (s for s in init.body.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
             and isinstance(s.body[0], cst.Expr) and s.body[0].value is super_call),
            None,
        )
        first = self._first_statement(init)
        if line is None or first is None or first is line or line.trailing_whitespace.comment is not None:
            return None
        indent = self._body_indent(cls, init)
        return FixSpec(SAFE, "Call `super().__init__()` first", (
            NodeEdit(first, f"super().__init__()\n{indent}", INSERT_BEFORE),
            NodeEdit(line, "", DELETE_LINES),
        ))


def _position(nodes, node) -> int:
    return next(i for i, n in enumerate(nodes) if n is node)


def _is_self_attribute(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _assigns_self_attribute(n: cst.CSTNode) -> bool:
    if isinstance(n, cst.Assign):
        return any(_is_self_attribute(t.target) for t in n.targets)
    return isinstance(n, (cst.AnnAssign, cst.AugAssign)) and _is_self_attribute(n.target)


def _is_init_call(n: cst.CSTNode) -> bool:
    """``super().__init__(...)``, ``super(Cls, self).__init__(...)``, ``Base.__init__(self, ...)``."""
    if not (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "__init__"):
        return False
    receiver = n.func.value
    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
        return True
    first = n.args[0].value if n.args else None
    return isinstance(first, cst.Name) and first.value == "self"


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


# -- TL906 -------------------------------------------------------------------------------------
@functools.cache
def _atom_types() -> Tuple[type, ...]:  # a function: naming libcst's classes at import loads it
    return (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class AutogradVariable(Rule):
    """Flags ``torch.autograd.Variable(x)``: since torch 0.4 tensors carry autograd state and
    ``Variable(x)`` only returns ``x.detach()`` (``requires_grad=True``: a new leaf)."""

    code = "TL906"
    name = "autograd-variable"
    summary = "`torch.autograd.Variable(x)`: a legacy wrapper since torch 0.4."
    message = "`Variable` is a legacy wrapper; use the tensor itself"
    hint = "Since torch 0.4 `Variable(x)` is `x.detach()`; drop `.detach()` too where `x` never requires grad."
    calls = VARIABLE
    fix_applicability = SAFE
    tags = ("deprecation",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) not in VARIABLE or in_compatibility_code(self.ctx, node):
            return
        self.report(node, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> Optional[FixSpec]:
        if has_star_args(node):
            return None
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a for a in node.args if a.keyword is not None}
        if len(positional) != 1 or set(keywords) - {"requires_grad"}:
            return None
        requires_grad = literal_value(keywords["requires_grad"].value) if keywords else False
        if not isinstance(requires_grad, bool):
            return None
        value = positional[0].value
        if not isinstance(value, _atom_types()) and not value.lpar:
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        new: cst.BaseExpression = cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))
        if requires_grad:
            new = cst.Call(func=cst.Attribute(value=new, attr=cst.Name("requires_grad_")))
        text = "`x.detach().requires_grad_()`" if requires_grad else "`x.detach()`"
        return FixSpec(SAFE, f"Replace with {text}", (NodeEdit(node, new),))


# -- TL907 -------------------------------------------------------------------------------------
class TorchvisionPretrained(Rule):
    """Flags ``torchvision.models.<builder>(pretrained=...)`` and ``pretrained_backbone=...``,
    deprecated since torchvision 0.13 in favour of ``weights=`` / ``weights_backbone=``."""

    code = "TL907"
    name = "torchvision-pretrained"
    summary = "`torchvision.models.<arch>(pretrained=...)`: deprecated in favour of `weights=`."
    message = "`{old}=` is deprecated since torchvision 0.13; pass `{new}=` (a weights enum, or None)."
    hint = "`pretrained=True` warns and is going away; `weights=` names the exact checkpoint (`.DEFAULT` for the best)."
    requires = (("pretrained",), ("torchvision",))
    ast_candidate = staticmethod(lambda index: any(
        index.resolves(call.func, lambda name: name.startswith("torchvision.models."))
        for call, _, _ in index.keyword_calls("pretrained", "pretrained_backbone")))
    fix_applicability = SAFE
    min_torch_version = (1, 12)  # torchvision 0.13, the weights API
    tags = ("deprecation",)

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node) or ""
        if not name.startswith("torchvision.models.") or not name.rsplit(".", 1)[-1][:1].islower():
            return
        old = [a for a in (get_arg(node, "pretrained"), get_arg(node, "pretrained_backbone")) if a is not None]
        if not old:
            return
        root = _callee_root(node)
        if (root and root in compat_imported_names(self.ctx)) or in_compatibility_code(self.ctx, node):
            return
        first = old[0].keyword.value
        new = "weights_backbone" if first == "pretrained_backbone" else "weights"
        self.report(node, self.message.format(old=first, new=new), self._fix(node, _builder_key(name), old))

    def _fix(self, node: cst.Call, key: Optional[str], old: List[cst.Arg]) -> Optional[FixSpec]:
        if key is None or key not in TORCHVISION_WEIGHTS or any(a.star == "**" for a in node.args):
            return None
        if get_arg(node, "weights") is not None or get_arg(node, "weights_backbone") is not None:
            return None  # never two keywords for one parameter
        enum, member, backbone = TORCHVISION_WEIGHTS[key]
        package = "torchvision.models." + key.split(".")[0] if "." in key else "torchvision.models"
        edits = []
        for arg in old:
            value = literal_value(arg.value)
            if not isinstance(value, bool):
                return None
            is_backbone = arg.keyword.value == "pretrained_backbone"
            if value and is_backbone and backbone is None:
                return None
            if not value:
                spelling, import_edit = "None", None
            elif is_backbone:
                spelling, import_edit = _spelling(self.ctx, f"torchvision.models.{backbone}")
                spelling += ".IMAGENET1K_V1"
            else:
                spelling, import_edit = _spelling(self.ctx, f"{package}.{enum}")
                spelling += f".{member}"
            if import_edit is not None and not any(e.node is import_edit.node for e in edits):
                edits.append(import_edit)
            keyword = "weights_backbone" if is_backbone else "weights"
            edits += [NodeEdit(arg.keyword, keyword), NodeEdit(arg.value, spelling)]
        return FixSpec(SAFE, "Pass the weights `pretrained=` loaded", tuple(edits))


def _builder_key(name: str) -> Optional[str]:
    """``torchvision.models.detection.faster_rcnn.fasterrcnn_resnet50_fpn`` ->
    ``detection.fasterrcnn_resnet50_fpn``; ``torchvision.models.resnet.resnet50`` -> ``resnet50``."""
    parts = name.split(".")[2:]
    if not parts:
        return None
    if parts[0] in ("detection", "segmentation"):
        return f"{parts[0]}.{parts[-1]}"
    if len(parts) == 1 or (len(parts) == 2 and parts[0] in TORCHVISION_SUBMODULES):
        return parts[-1]
    return None


RULES = [
    TorchLoadWeightsOnly,
    EvalAfterLoadStateDict,
    CheckpointUseReentrant,
    DeprecatedApi,
    ModuleInitSuper,
    AutogradVariable,
    TorchvisionPretrained,
]
