"""TL207: a non-blocking host-to-device copy of pageable memory, which blocks the host anyway."""

from __future__ import annotations

import ast
import re
from typing import FrozenSet, List, Optional, Tuple

from torchlint import _cst as cst

from torchlint.context import INSERT_AFTER, FixSpec, NodeEdit
from torchlint.diagnostics import UNSAFE
from torchlint.heuristics import is_accelerator_device, moves_to_accelerator
from torchlint.rules.base import GAP, Rule
from torchlint.semantic import ASSIGN, LOOP
from torchlint.syntax import get_arg, has_star_args, literal_value, method_call, move_arguments
from torchlint.torch_api import DATALOADER_PARAMS, TENSOR_CUDA_PARAMS, TENSOR_TO_PARAMS

PIN_MEMORY = DATALOADER_PARAMS.index("pin_memory")
COLLATE_FN = DATALOADER_PARAMS.index("collate_fn")
BATCH_SIZE = DATALOADER_PARAMS.index("batch_size")
COPY_PARAMS = ("src", "non_blocking")
_COPY_CALL = re.compile(rf"\.{GAP}(?:to|cuda|copy_){GAP}\(")
# Tensor methods whose result, of a tensor in pageable host memory, is in pageable host memory
# too (a view of it or a new host tensor): `torch.from_numpy(a).float()`, `batch[0].view(-1)`.
_HOST_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char",
    "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "t", "transpose", "permute",
    "contiguous", "flatten", "clone", "detach", "narrow", "select", "unflatten", "flip",
})
# What a ``for`` over a batch container iterates: `for k, v in batch.items()`.
_CONTAINER_VIEWS = frozenset({"items", "values"})
# Tensor attributes that are the same memory (`t.data`, `t.T`) or a field of a collated batch.
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "grad", "grad_fn", "is_cuda", "layout"})
_CREATORS = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor"})

#: Where the source's memory was made pageable: created in the copy's own statement (the fix can
#: pin it there), bound to a name elsewhere, or a batch of a loader that does not pin.
CREATED, NAMED, LOADER = "created", "named", "loader"
_RANK = {CREATED: 0, NAMED: 1, LOADER: 2}


def _candidate(index) -> bool:
    """The ast question: a ``.to(``/``.cuda(``/``.copy_(`` call passing ``non_blocking=True``
    (or a literal ``True`` anywhere among its positional arguments, which covers
    ``.cuda(0, True)`` and ``.copy_(src, True)``)."""
    for call, _ in index.method_calls("to", "cuda", "copy_"):
        value = index.keyword(call, "non_blocking")
        if value is not None:
            if type(value) is ast.Constant and value.value is True:
                return True
        elif any(type(a) is ast.Constant and a.value is True for a in call.args):
            return True
    return False


class NonBlockingFromPageable(Rule):
    """Flags a host-to-device copy with ``non_blocking=True`` (``.to(device, ...)``,
    ``.cuda(...)``, ``dst.copy_(src, ...)``) of a tensor known to be in pageable host memory.

    "Known": the source is, through views, casts and reads (``x.float()``, ``batch[0]``,
    ``batch["x"]``, the values of ``batch.items()``) and names every reaching binding of which is
    one, ``torch.from_numpy(a)``, ``torch.tensor(data)`` / ``torch.as_tensor(data)`` of host data
    (a list, tuple or comprehension, a number, a NumPy call; no ``device=``, no
    ``pin_memory=True``, no default device set in the file), or a batch of a ``DataLoader``
    without ``pin_memory=True`` (the default collate function, batches collated). The target is a
    CUDA device (``heuristics.is_accelerator_device``; a name whose every binding is a CPU device
    is not), and ``copy_``'s destination a tensor built on or moved to one.

    Silent: parameters, ``self`` attributes and other values of unknown provenance (a tensor a
    function receives may be pinned), ``.pin_memory()`` results, loaders that pin or whose
    setting is not a literal (``pin_memory=cfg.pin``, ``**kwargs``) or that have a custom
    ``collate_fn``, ``non_blocking=False`` or an expression, copies to the host
    (``.cpu(non_blocking=True)``, ``.to("cpu", non_blocking=True)``, whose result torch pins).
    """

    code = "TL207"
    name = "non-blocking-from-pageable"
    summary = "`.to(device, non_blocking=True)` of a tensor in pageable host memory: the copy blocks the host anyway."
    message = "Non-blocking copy of pageable memory blocks anyway; pin the source or drop `non_blocking`"
    loader_message = "Batch of an unpinned loader: the copy blocks anyway; pass `pin_memory=True` or drop `non_blocking`"
    hint = (
        "The CUDA runtime copies pageable memory through a staging buffer and returns only once it is "
        "staged: the host waits where `non_blocking=True` says it will not, and nothing overlaps."
    )
    requires = (("True",), (_COPY_CALL,), ("from_numpy", "tensor", "DataLoader"))
    ast_candidate = staticmethod(_candidate)
    fix_applicability = UNSAFE
    preview = True  # no finding on timm 1.0.11 or transformers 4.46.3: precision not shown on real code
    tags = ("performance",)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in ("to", "cuda", "copy_"):
            return
        method = func.attr.value
        params = TENSOR_TO_PARAMS if method == "to" else TENSOR_CUDA_PARAMS if method == "cuda" else COPY_PARAMS
        bound = move_arguments(node, params)
        if bound is None or literal_value(bound.get("non_blocking")) is not True:
            return
        if method == "copy_":
            source = bound.get("src")
            if source is None or not self._on_device(func.value, set()):
                return
        else:
            if method == "to" and not self._to_cuda(bound.get("device")):
                return
            source = func.value
        found = self._pageable(source, set())
        if found is None:
            return
        kind, _ = found
        if kind == LOADER:
            self.report(node, self.loader_message)
            return
        fix = None
        if kind == CREATED:
            fix = FixSpec(UNSAFE, "Pin the source first: `.pin_memory()`",
                          (NodeEdit(source, ".pin_memory()", INSERT_AFTER),))
        self.report(node, fix=fix)

    # -- the target ------------------------------------------------------------------------------
    def _to_cuda(self, device: Optional[cst.BaseExpression], seen: Optional[set] = None) -> bool:
        """Is ``device`` a CUDA device? A literal names one (``"cuda:0"``, ``0``,
        ``torch.device("cuda")``); a name whose bindings are all known must have one that is
        (``device = torch.device("cpu")`` is not); other names as ``is_accelerator_device``."""
        if device is None:
            return False
        value = literal_value(device)
        if isinstance(value, str):
            return value.split(":", 1)[0] == "cuda"
        if isinstance(device, cst.IfExp):
            return self._to_cuda(device.body, seen) or self._to_cuda(device.orelse, seen)
        if isinstance(device, cst.Call) and self.ctx.resolve_call(device) == "torch.device":
            first = get_arg(device, "type", 0)
            if first is None:
                return False
            if isinstance(literal_value(first.value), str) or isinstance(first.value, cst.IfExp):
                return self._to_cuda(first.value, seen)
            return True  # `torch.device(args.device)`: as `is_accelerator_device` reads it
        seen = seen if seen is not None else set()
        if isinstance(device, (cst.Name, cst.Attribute)) and id(device) not in seen:
            seen.add(id(device))
            values = self.ctx.semantic.values_of(device)
            if values and values != [device]:
                return any(self._to_cuda(v, seen) for v in values)
        return is_accelerator_device(self.ctx, device)

    def _on_device(self, node: cst.BaseExpression, seen: set) -> bool:
        """Is ``node`` (``copy_``'s destination) a tensor on an accelerator: built there
        (``torch.empty(n, device="cuda")``), moved there, a view of one, or a name every reaching
        binding of which is one?"""
        while True:
            if isinstance(node, cst.Subscript):
                node = node.value
                continue
            method = method_call(node)
            if method is not None and method[1] in _HOST_METHODS:
                node = method[0]
                continue
            break
        if isinstance(node, cst.Call):
            if moves_to_accelerator(self.ctx, node):
                return True
            name = self.ctx.resolve_call(node) or ""
            if name.startswith("torch.") and not has_star_args(node):
                device = get_arg(node, "device")
                return device is not None and is_accelerator_device(self.ctx, device.value)
            return False
        if isinstance(node, cst.Name) and id(node) not in seen:
            seen.add(id(node))
            values = self.ctx.semantic.values_of(node)
            return bool(values) and all(self._on_device(v, seen) for v in values)
        return False

    # -- the source ------------------------------------------------------------------------------
    def _pageable(self, node: cst.BaseExpression, seen: set) -> Optional[Tuple[str, Optional[cst.Call]]]:
        """(where it was made pageable: CREATED, NAMED or LOADER, the loader call) when ``node`` is
        known to be a tensor (or a collated batch) in pageable host memory; None when unknown."""
        while True:
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Attribute) and node.attr.value not in _METADATA:
                node = node.value
            else:
                method = method_call(node)
                if method is None or method[1] not in _HOST_METHODS:
                    break
                node = method[0]
        if isinstance(node, cst.Call):
            return (CREATED, None) if self._creates_pageable(node) else self._next_batch(node)
        if not isinstance(node, cst.Name) or id(node) in seen:
            return None
        seen.add(id(node))
        bindings = self.ctx.semantic.lookup(node)
        if not bindings:
            return None
        kinds: List[Tuple[str, Optional[cst.Call]]] = []
        for b in bindings:
            found = None
            if b.kind == LOOP and b.value is not None:
                found = self._iterated(b.value, seen)
            elif b.kind == ASSIGN:
                value = b.value
                if value is None and isinstance(b.statement, cst.Assign):
                    value = b.statement.value  # `images, labels = batch`: each is read from it
                if value is not None:
                    found = self._pageable(value, seen)
            if found is None:
                return None
            kinds.append(found)
        kind, loader = max(kinds, key=lambda k: _RANK[k[0]])
        return (NAMED if kind == CREATED else kind), loader

    def _iterated(self, iterable: cst.BaseExpression, seen: set) -> Optional[Tuple[str, Optional[cst.Call]]]:
        """What a ``for`` over ``iterable`` yields: a batch of an unpinned loader, or the items of a
        pageable tensor or batch (``for k, v in batch.items()``)."""
        loaders = self.ctx.semantic.loader_calls(iterable)
        if loaders:
            if all(self._unpinned(call) for call in loaders) and self._loaders_seen_whole(iterable):
                return LOADER, loaders[0]
            return None
        values = self.ctx.semantic.iterated_values(iterable)
        if len(values) != 1:
            return None  # `zip(a, b)`: one of several
        value = values[0]
        method = method_call(value)
        if method is not None and method[1] in _CONTAINER_VIEWS and isinstance(value, cst.Call) and not value.args:
            value = method[0]
        found = self._pageable(value, seen)
        return None if found is None else (NAMED if found[0] == CREATED else found[0], found[1])

    def _next_batch(self, value: cst.BaseExpression) -> Optional[Tuple[str, Optional[cst.Call]]]:
        """``next(iter(loader))``: a batch of ``loader``."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "next"
                and len(value.args) == 1 and self.ctx.resolve(value.func) is None):
            return None
        inner = value.args[0].value
        if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter"
                and len(inner.args) == 1 and self.ctx.resolve(inner.func) is None):
            return None
        found = self._iterated(inner.args[0].value, set())
        return found if found is not None and found[0] == LOADER else None

    def _creates_pageable(self, call: cst.Call) -> bool:
        """``torch.from_numpy(a)``, or ``torch.tensor(data)``/``torch.as_tensor(data)`` of host
        data, built on the host and not pinned."""
        if type(call.func) is cst.Attribute and call.func.attr.value not in ("from_numpy", "tensor", "as_tensor"):
            return False  # cheap: most calls are other methods
        name = self.ctx.resolve_call(call)
        if name not in _CREATORS or has_star_args(call):
            return False
        data = get_arg(call, "data", 0) if name != "torch.from_numpy" else get_arg(call, "ndarray", 0)
        if data is None:
            return False
        if name == "torch.from_numpy":
            return not self._from_tensor(data.value)
        for arg in call.args:
            if arg is data:
                continue
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "device":
                if literal_value(arg.value) != "cpu":
                    return False
            elif keyword == "pin_memory":
                if literal_value(arg.value) is not False:
                    return False
            elif keyword not in ("dtype", "requires_grad"):
                return False
        if self.ctx.model.default_device_settings():
            return False  # a default device: built where it says
        return self._host_data(data.value, set())

    def _from_tensor(self, node: cst.BaseExpression) -> bool:
        """``t.numpy()`` (or a name bound to it): the array may be a view of pinned memory."""
        values = self.ctx.semantic.values_of(node) if isinstance(node, cst.Name) else [node]
        if values is None:
            return False
        return any((method_call(v) or (None, ""))[1] == "numpy" for v in values)

    def _host_data(self, node: cst.BaseExpression, seen: set) -> bool:
        """Python or NumPy data on the host, not a tensor: a list, tuple or comprehension, a
        number, ``x.tolist()``, a NumPy call other than one viewing a tensor, or a name every
        reaching binding of which is one."""
        if isinstance(node, (cst.List, cst.Tuple, cst.ListComp, cst.Integer, cst.Float)):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.expression, (cst.Integer, cst.Float)):
            return True
        if isinstance(node, cst.Call):
            method = method_call(node)
            if method is not None and method[1] == "tolist" and not node.args:
                return True
            name = self.ctx.resolve_call(node) or ""
            return name.startswith("numpy.") and not any(self._from_tensor(a.value) for a in node.args)
        if isinstance(node, cst.Name) and id(node) not in seen:
            seen.add(id(node))
            values = self.ctx.semantic.values_of(node)
            return bool(values) and all(self._host_data(v, seen) for v in values)
        return False

    # -- loaders ---------------------------------------------------------------------------------
    def _unpinned(self, call: cst.Call) -> bool:
        """A DataLoader known not to pin, whose batches the default collate function builds (new
        host tensors; with ``batch_size=None`` a dataset's own tensors pass through)."""
        if has_star_args(call):
            return False
        pin = get_arg(call, "pin_memory", PIN_MEMORY)
        if pin is not None and literal_value(pin.value) is not False:
            return False
        collate = get_arg(call, "collate_fn", COLLATE_FN)
        if collate is not None and literal_value(collate.value) is not None:
            return False
        size = get_arg(call, "batch_size", BATCH_SIZE)
        return size is None or literal_value(size.value) is not None

    def _loaders_seen_whole(self, iterable: cst.BaseExpression) -> bool:
        """A loader reached through a module-level name: no function of the file rebinds that
        name (``global dl; dl = DataLoader(ds, pin_memory=True)``), which the semantic model
        does not follow. Asked of the whole-file model: the function may be one this lint does
        not parse."""
        globals_ = self.ctx.model.global_names()
        if not globals_:
            return True
        for value in self.ctx.semantic.iterated_values(iterable):
            head = value
            while isinstance(head, (cst.Attribute, cst.Subscript, cst.Call)):
                head = head.func if isinstance(head, cst.Call) else head.value
            if isinstance(head, cst.Name) and head.value in globals_:
                return False
        return True


RULES = [NonBlockingFromPageable]
