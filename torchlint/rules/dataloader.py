"""TL1xx: data loading."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis import (
    body_simple_statements,
    bound_names,
    get_arg,
    has_star_args,
    is_accelerator_device,
    literal_value,
    method_call,
    tensor_factory,
    with_keyword_args,
)
from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.rules.base import Rule
from torchlint.torch_api import DATALOADER, DATALOADER_PARAMS
from torchlint.tree import walk

NUM_WORKERS = DATALOADER_PARAMS.index("num_workers")
PIN_MEMORY = DATALOADER_PARAMS.index("pin_memory")
# Datasets of tensors already in memory: TL101 leaves their loaders alone.
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
# A stream the training process feeds (an RL replay buffer): every worker would replay it whole.
ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})

# What TL101's fix passes: a few workers overlap loading with the step; more rarely help and
# multiply memory, and the cap keeps a small machine from being oversubscribed.
DEFAULT_WORKERS = "min(4, os.cpu_count() or 1)"

# Calls that hand a loader's items through unchanged: `for i, b in enumerate(tqdm(loader))`.
_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm"})


def _is_dataloader(node: cst.Call, ctx) -> bool:
    """torch's own DataLoader; project classes and other libraries' loaders resolve elsewhere."""
    return ctx.resolve_call(node) == DATALOADER


class DataLoaderNumWorkers(Rule):
    """Flags ``torch.utils.data.DataLoader(...)`` with ``num_workers`` omitted or a literal 0.

    With no workers, every batch is read, decoded and collated in the training process between
    steps, and the accelerator waits. Only an omitted argument or a literal ``0`` (by keyword or
    at position 5) is flagged: a variable, an expression or ``**kwargs`` is unknown and stays
    silent, as do loaders that are not torch's (a project's ``DataLoader``, torch_geometric's),
    loaders over a ``TensorDataset`` or over a dataset class of the same file whose items are rows
    of tensors it builds in ``__init__`` (in memory already: workers would only pickle them), over
    an ``IterableDataset`` subclass of the same file (each worker would replay the whole stream),
    a loader built to take one batch (``next(iter(DataLoader(...)))``) and loaders in test code
    (tests keep loading in-process on purpose).
    """

    code = "TL101"
    name = "dataloader-num-workers"
    summary = "`DataLoader` loads data in the main process (`num_workers` omitted or 0)."
    message = (
        "`DataLoader` loads every batch in the main process while the model waits; "
        "set `num_workers` > 0 to load in background worker processes."
    )
    requires = (("DataLoader",),)
    fix_applicability = UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_dataloader(node, self.ctx) or has_star_args(node):
            return
        arg = get_arg(node, "num_workers", NUM_WORKERS)
        if arg is not None and literal_value(arg.value) != 0:
            return  # a positive literal, or unknown
        if self._takes_one_batch() or self._workers_do_not_apply(node):
            return
        self.report(node, fix=self._fix(node, arg))

    def _takes_one_batch(self) -> bool:
        """``next(iter(DataLoader(...)))``: one batch, where starting workers costs more."""
        up = self.ctx.ancestors[-4:]
        return (
            len(up) == 4
            and isinstance(up[0], cst.Call) and isinstance(up[0].func, cst.Name) and up[0].func.value == "next"
            and isinstance(up[1], cst.Arg) and len(up[0].args) == 1
            and isinstance(up[2], cst.Call) and isinstance(up[2].func, cst.Name) and up[2].func.value == "iter"
            and isinstance(up[3], cst.Arg) and len(up[2].args) == 1
        )

    def _workers_do_not_apply(self, node: cst.Call) -> bool:
        """The dataset (``DataLoader(ds_call)``, or a name this scope binds to one) is a
        ``TensorDataset``, or a class of this file that keeps its rows in memory or streams
        from the training process (an ``IterableDataset``)."""
        dataset = get_arg(node, "dataset", 0)
        value = dataset.value if dataset is not None else None
        if isinstance(value, cst.Name):
            value = _assigned_value(_scope_of(self.ctx), value.value)
        if not isinstance(value, cst.Call):
            return False
        if self.ctx.resolve_call(value) in TENSOR_DATASETS:
            return True
        cls = _module_class(self.ctx.module, value.func)
        return cls is not None and (
            any(self.ctx.resolve(base.value) in ITERABLE_DATASETS for base in cls.bases)
            or _items_are_tensor_rows(cls, self.ctx)
        )

    def _fix(self, node: cst.Call, arg: Optional[cst.Arg]) -> FixSpec:
        import_edit, os_name = self.ctx.import_edit("os")
        value = cst.parse_expression(DEFAULT_WORKERS.replace("os.", f"{os_name}.", 1))
        if arg is None:
            edit = NodeEdit(node, with_keyword_args(node, [("num_workers", value)]))
        else:
            edit = NodeEdit(arg.value, value)
        edits = (edit,) if import_edit is None else (import_edit, edit)
        return FixSpec(UNSAFE, f"Set `num_workers={DEFAULT_WORKERS}`", edits)


class DataLoaderPinMemory(Rule):
    """Flags ``torch.utils.data.DataLoader(...)`` without ``pin_memory=True`` whose batches the
    same code moves to an accelerator.

    "Moves to an accelerator": the loader is bound to a name in a function (or module) or to
    ``self.<attr>`` in a class, a ``for`` loop over it (through ``enumerate``/``tqdm``) is in the
    same function (the module's loader also counts in a function that does not rebind the name)
    or the same class, and the loop body calls ``.cuda()``, ``.to(<device>)`` or
    ``.to(..., non_blocking=True)`` on a value derived from the loop variables. Loaders passed
    elsewhere, returned, or moved through helper functions are not followed: silent.
    ``pin_memory=<variable>`` and ``**kwargs`` are unknown: silent; ``pin_memory=False`` flags.
    A loader whose name is bound again (``loader = accelerator.prepare(loader)``) is not followed
    either: the loop may iterate a wrapper. Test code is left alone.
    """

    code = "TL102"
    name = "dataloader-pin-memory"
    summary = "`DataLoader` batches are copied to the GPU from pageable memory (`pin_memory` not set)."
    message = (
        "Batches from this `DataLoader` are moved to the GPU from pageable memory; "
        "`pin_memory=True` makes the copy faster and lets `non_blocking=True` overlap it."
    )
    requires = (("DataLoader",),)
    fix_applicability = SAFE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # key of what the loader is bound to -> [(loader call, its ancestors)]
        self.loaders: Dict[tuple, List[Tuple[cst.Call, List[cst.CSTNode]]]] = {}
        self.moved: Set[tuple] = set()  # keys of iterables whose items a loop moves to a device

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_dataloader(node, self.ctx) or has_star_args(node):
            return
        arg = get_arg(node, "pin_memory", PIN_MEMORY)
        if arg is not None and literal_value(arg.value) is not False:
            return  # True, or unknown
        key = self._binding_key(node)
        if key is not None:
            self.loaders.setdefault(key, []).append((node, list(self.ctx.ancestors)))

    def visit_For(self, node: cst.For) -> None:
        iterable = _unwrap_iteration(node.iter, self.ctx)
        key = self._iterable_key(iterable)
        if key is not None and _body_moves_items(node, self.ctx):
            self.moved.update(key)

    def leave_Module(self, node: cst.Module) -> None:
        walking = self.ctx.ancestors
        for key, found in self.loaders.items():
            if key not in self.moved:
                continue
            for call, ancestors in found:
                self.ctx.ancestors = ancestors  # report as if at the call: noqa on its statement
                try:
                    self.report(call, fix=self._fix(call))
                finally:
                    self.ctx.ancestors = walking

    def _fix(self, node: cst.Call) -> FixSpec:
        arg = get_arg(node, "pin_memory", PIN_MEMORY)
        true = cst.Name("True")
        if arg is None:
            edit = NodeEdit(node, with_keyword_args(node, [("pin_memory", true)]))
        else:
            edit = NodeEdit(arg.value, true)
        return FixSpec(SAFE, "Set `pin_memory=True`", (edit,))

    # -- where a loader lives, and where a loop reads from -----------------------------------
    def _scope(self) -> cst.CSTNode:
        return _scope_of(self.ctx)

    def _class(self) -> Optional[cst.ClassDef]:
        return self.ctx.enclosing(cst.ClassDef)

    def _binding_key(self, node: cst.Call) -> Optional[tuple]:
        parent = self.ctx.parent
        if isinstance(parent, cst.For) and parent.iter is node:
            return ("call", id(node))
        if isinstance(parent, cst.Arg):  # for b in enumerate(DataLoader(...))
            wrapper = self.ctx.ancestors[-2] if len(self.ctx.ancestors) >= 2 else None
            return ("call", id(node)) if isinstance(wrapper, cst.Call) else None
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if len(targets) != 1 or self._rebound(targets[0]):
                return None
            return self._target_key(targets[0])
        return None

    def _rebound(self, target: cst.BaseExpression) -> bool:
        """Is the name or ``self.<attr>`` bound again (``loader = accelerator.prepare(loader)``,
        ``self.dl = fabric.setup_dataloaders(self.dl)``)? Then a loop over it may iterate a wrapper
        that moves or pins batches itself, and its ``.to()`` says nothing about this loader."""
        if isinstance(target, cst.Name):
            scope, name = self._scope(), target.value
            roots = [scope.body] if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) else [scope]
            match = lambda t: isinstance(t, cst.Name) and t.value == name  # noqa: E731
            skip: Tuple[type, ...] = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            cls = self._class()
            if cls is None:
                return False
            roots, attr = [cls.body], target.attr.value
            match = lambda t: isinstance(t, cst.Attribute) and t.attr.value == attr and _plain_name(t.value) in ("self", "cls")  # noqa: E731
            skip = (cst.ClassDef,)
        else:
            return False
        count = 0
        for root in roots:
            for n in walk(root, skip):
                if isinstance(n, cst.Assign):
                    stores = [t.target for t in n.targets]
                elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
                    stores = [n.target]
                elif isinstance(n, cst.AsName):
                    stores = [n.name]
                else:
                    continue
                count += sum(1 for store in stores for t in walk(store) if match(t))
        return count > 1

    def _target_key(self, target: cst.BaseExpression) -> Optional[tuple]:
        if isinstance(target, cst.Name):
            return ("name", id(self._scope()), target.value)
        if (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value in ("self", "cls")
        ):
            cls = self._class()
            return ("attr", id(cls), target.attr.value) if cls is not None else None
        return None

    def _iterable_key(self, iterable: cst.BaseExpression) -> Optional[Set[tuple]]:
        if isinstance(iterable, cst.Call):
            return {("call", id(iterable))}
        if isinstance(iterable, cst.Name):
            scope = self._scope()
            keys = {("name", id(scope), iterable.value)}
            if scope is not self.ctx.module and not _binds(scope, iterable.value):
                keys.add(("name", id(self.ctx.module), iterable.value))  # a module-level loader
            return keys
        if isinstance(iterable, cst.Attribute):
            key = self._target_key(iterable)
            return {key} if key is not None else None
        return None


def _scope_of(ctx) -> cst.CSTNode:
    """The function, lambda or class whose names the node being visited sees; else the module."""
    for node in reversed(ctx.ancestors):
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return node
    return ctx.module


def _assigned_value(scope: cst.CSTNode, name: str) -> Optional[cst.BaseExpression]:
    """The value of the one plain ``name = value`` statement directly in ``scope``'s body."""
    body = scope.body.body if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) else getattr(scope, "body", ())
    if not isinstance(body, (list, tuple)):
        return None
    values = [
        small.value
        for stmt in body
        if isinstance(stmt, cst.SimpleStatementLine)
        for small in stmt.body
        if isinstance(small, cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
    ]
    return values[0] if len(values) == 1 else None


def _module_class(module: cst.Module, func: cst.BaseExpression) -> Optional[cst.ClassDef]:
    """The class ``func`` names when the module defines it once at top level."""
    if not isinstance(func, cst.Name):
        return None
    found = [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == func.value]
    return found[0] if len(found) == 1 else None


def _items_are_tensor_rows(cls: cst.ClassDef, ctx) -> bool:
    """``__getitem__`` only returns ``self.a[i]`` (or a tuple of those), and ``__init__`` builds
    each such ``self.a`` with a torch constructor (``torch.randn(n, d)``): items are in memory."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    getitem, init = methods.get("__getitem__"), methods.get("__init__")
    if getitem is None or init is None:
        return False
    body = [s for s in body_simple_statements(getitem) if not _is_docstring_expr(s)]
    if len(body) != 1 or not isinstance(body[0], cst.Return) or body[0].value is None:
        return False
    value = body[0].value
    rows = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    attrs = set()
    for row in rows:
        if not (
            isinstance(row, cst.Subscript)
            and isinstance(row.value, cst.Attribute)
            and isinstance(row.value.value, cst.Name)
            and row.value.value.value == "self"
        ):
            return False
        attrs.add(row.value.attr.value)
    top_level = {
        target.target.attr.value: small.value
        for small in body_simple_statements(init)
        if isinstance(small, cst.Assign) and len(small.targets) == 1
        for target in small.targets
        if _self_attr(target.target)
    }
    writes: Dict[str, int] = {}  # every store to self.<attr> anywhere in the class
    for n in walk(cls.body):
        stores = [t.target for t in n.targets] if isinstance(n, cst.Assign) else (
            [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign)) else [])
        for t in stores:
            for inner in walk(t):
                if _self_attr(inner):
                    writes[inner.attr.value] = writes.get(inner.attr.value, 0) + 1
    return all(
        writes.get(attr) == 1 and attr in top_level and tensor_factory(top_level[attr], ctx) is not None
        for attr in attrs
    )


def _self_attr(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _is_docstring_expr(small: cst.BaseSmallStatement) -> bool:
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))


def _unwrap_iteration(node: cst.BaseExpression, ctx) -> cst.BaseExpression:
    """``enumerate(tqdm(loader))`` -> ``loader``."""
    while isinstance(node, cst.Call) and node.args and node.args[0].keyword is None and not node.args[0].star:
        name = ctx.resolve_call(node) or _plain_name(node.func)
        if name not in _ITERATION_WRAPPERS:
            break
        node = node.args[0].value
    return node


def _plain_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


def _names(node: cst.CSTNode) -> Set[str]:
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def _binds(scope: cst.CSTNode, name: str) -> bool:
    """Does this function bind ``name`` locally (a parameter, or an assignment target)?"""
    if isinstance(scope, cst.FunctionDef):
        params = scope.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
        if any(p.name.value == name for p in every):
            return True
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    return any(
        isinstance(n, (cst.AssignTarget, cst.For)) and name in bound_names(n.target) for n in walk(body)
    )


def _body_moves_items(loop: cst.For, ctx) -> bool:
    """Does the loop body move a value derived from the loop variables to an accelerator?"""
    tainted = bound_names(loop.target)
    flows: List[Tuple[Set[str], Set[str]]] = []  # (names bound, names read) by each binding
    moves: List[cst.BaseExpression] = []  # receivers of .cuda() / .to(device)

    for n in walk(loop.body):
        if isinstance(n, cst.Assign):
            bound: Set[str] = set()
            for t in n.targets:
                bound |= bound_names(t.target)
            flows.append((bound, _names(n.value)))
        elif isinstance(n, cst.AnnAssign):
            if n.value is not None:
                flows.append((bound_names(n.target), _names(n.value)))
        elif isinstance(n, (cst.CompFor, cst.For)):
            flows.append((bound_names(n.target), _names(n.iter)))
        elif isinstance(n, cst.Call) and _moves_to_accelerator(n, ctx):
            moves.append(n.func.value)
    if not moves:
        return False
    changed = True
    while changed:
        changed = False
        for bound, read in flows:
            if read & tainted and not bound <= tainted:
                tainted |= bound
                changed = True
    return any(_names(receiver) & tainted for receiver in moves)


def _moves_to_accelerator(node: cst.Call, ctx) -> bool:
    method = method_call(node)
    if method is None:
        return False
    if method[1] == "cuda":
        return True
    if method[1] != "to":
        return False
    non_blocking = get_arg(node, "non_blocking", 2)
    if non_blocking is not None and literal_value(non_blocking.value) is True:
        return True
    device = get_arg(node, "device", 0)
    return device is not None and is_accelerator_device(device.value, ctx)


RULES = [DataLoaderNumWorkers, DataLoaderPinMemory]
