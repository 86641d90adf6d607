"""TL2xx: device placement."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis import (
    get_arg,
    is_accelerator_device,
    literal_value,
    method_call,
    move_arguments,
    tensor_factory,
    with_keyword_args,
)
from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.rules.base import GAP, Rule
from torchlint.torch_api import (
    DEVICE_FACTORIES,
    DTYPE_EXACT_FACTORIES,
    RANDOM_FACTORIES,
    TENSOR_CUDA_PARAMS,
    TENSOR_TO_PARAMS,
)

# The prefilter's `.to(` / `.cuda(`, however it is spelt (see GAP). Sound: the rule only fires on
# an Attribute `to`/`cuda` that is called.
MOVE_CALL = re.compile(rf"\.{GAP}(?:to|cuda){GAP}\(")
# ... right after the closing bracket of a call (see `factory_then_move`).
_CALL_THEN_MOVE = re.compile(rf"\){GAP}\.{GAP}(?:to|cuda){GAP}\(")
_FACTORY_NAMES = frozenset(DEVICE_FACTORIES)
_CLOSE = {")": "(", "]": "[", "}": "{"}


def _name_before(text: str, end: int) -> str:
    """The identifier ending at ``end`` (exclusive), skipping whitespace before it."""
    j = end - 1
    while j >= 0 and text[j] in " \t\r\n\\":
        j -= 1
    k = j
    while k >= 0 and (text[k].isalnum() or text[k] == "_"):
        k -= 1
    return text[k + 1:j + 1]


def _imports_factory_as(text: str) -> bool:
    """``from torch import zeros as z``: its calls are spelt ``z(...)``."""
    for sep in (" as", "\tas"):
        i = text.find(sep)
        while i != -1:
            after = text[i + len(sep):i + len(sep) + 1]
            if after in (" ", "\t", "\\") and _name_before(text, i + 1) in _FACTORY_NAMES:
                return True
            i = text.find(sep, i + 1)
    return False


def factory_then_move(text: str) -> bool:
    """Prefilter: is some ``<constructor>(...)`` followed at once by ``.to(``/``.cuda(``? From each
    ``).to(`` the brackets are matched backwards to the call's name. A string or comment inside
    them, or a constructor imported under another name, makes the answer yes (the scan cannot
    vouch for brackets in strings)."""
    if _imports_factory_as(text):
        return True
    for match in _CALL_THEN_MOVE.finditer(text):
        depth, i = 0, match.start()
        while i >= 0:
            c = text[i]
            if c in ")]}":
                depth += 1
            elif c in "([{":
                depth -= 1
                if depth == 0:
                    break
            elif c in "'\"#":
                return True
            i -= 1
        if i >= 0 and _name_before(text, i) in _FACTORY_NAMES:
            return True
    return False

# Arguments of .to()/.cuda() that the fix may drop: the fresh tensor is a copy already, and
# building it on the device needs no transfer to wait for.
_DROPPABLE = frozenset({"non_blocking", "copy"})
# Factory arguments that make the host tensor deliberate: a pinned staging buffer, an `out=`
# tensor, a host generator chosen for reproducibility, or an explicit device.
_HOST_ON_PURPOSE = ("device", "out", "pin_memory", "generator")


class TensorMovedAfterCreation(Rule):
    """Flags a tensor built on the host and moved at once: ``torch.zeros(n).cuda()``,
    ``torch.randn(n).to(device)``, ``torch.arange(n).to("cuda", torch.half)``.

    The tensor is filled on the CPU, then copied over PCIe; ``device=`` builds it on the device
    directly. Only a `.to()`/`.cuda()` applied straight to a torch factory call is flagged, and
    only when its target is recognisably a device (``"cuda:1"``, ``0``, ``torch.device(...)``,
    names like ``device``/``self.device``/``local_rank``). Silent: ``.to(dtype)``,
    ``.to(other_tensor)``, ``.to("cpu")``, ``.to(memory_format=...)``, ``.to(*args)``,
    ``torch.from_numpy``/``*_like`` calls, and factories given ``device=``, ``out=``,
    ``pin_memory=``, ``generator=`` or ``**kwargs``.
    """

    code = "TL202"
    name = "tensor-moved-after-creation"
    summary = "A tensor is created on the CPU and immediately moved to a device; pass `device=` instead."
    message = (
        "Tensor is created on the CPU and then copied to the device; "
        "create it there directly with `device=`."
    )
    requires = ((MOVE_CALL,), tuple(sorted(DEVICE_FACTORIES)))
    fix_applicability = SAFE  # unsafe for random factories, requires_grad and inexact dtype casts

    @classmethod
    def may_fire(cls, text: str) -> bool:
        # `.to(` and `tensor` are in most torch files; a constructor call followed by a move is not.
        return super().may_fire(text) and factory_then_move(text)

    def visit_Call(self, node: cst.Call) -> None:
        method = method_call(node)
        if method is None or method[1] not in ("cuda", "to"):
            return
        factory = method[0]
        short = tensor_factory(factory, self.ctx)
        if short is None or short not in DEVICE_FACTORIES or not _takes_device(factory, short):
            return
        if any(arg.star == "**" for arg in factory.args):
            return  # **kwargs may already carry device=
        if any(get_arg(factory, name) is not None for name in _HOST_ON_PURPOSE):
            return
        moved = _move_target(node, method[1], self.ctx)
        if moved is None:
            return
        device, dtype = moved
        self.report(node, fix=self._fix(node, factory, short, device, dtype))

    def _fix(self, node, factory, short, device, dtype) -> Optional[FixSpec]:
        if _has_comment(node):
            return None  # a comment in the dropped `.to(...)` would be lost
        new: List[Tuple[str, cst.BaseExpression]] = [("device", device)]
        unsafe = short in RANDOM_FACTORIES
        if dtype is not None:
            if get_arg(factory, "dtype") is not None:
                return None  # two dtypes: which one wins is for the author to say
            new.append(("dtype", dtype))
            unsafe = unsafe or short not in DTYPE_EXACT_FACTORIES
        requires_grad = get_arg(factory, "requires_grad")
        if requires_grad is not None and literal_value(requires_grad.value) is not False:
            unsafe = True  # the result becomes a leaf: .grad lands on it, not on a CPU tensor
        replacement = with_keyword_args(factory, new).with_changes(lpar=[], rpar=[])
        return FixSpec(
            UNSAFE if unsafe else SAFE,
            "Pass `device=` to the constructor",
            (NodeEdit(node, replacement),),
        )


def _takes_device(factory: cst.Call, short: str) -> bool:
    """torch.normal accepts device= only in its (mean, std, size) form."""
    if short != "normal":
        return True
    positional = [a for a in factory.args if a.keyword is None and not a.star]
    return len(positional) >= 3 or get_arg(factory, "size") is not None


def _move_target(
    node: cst.Call, method: str, ctx
) -> Optional[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
    """(device expression for the factory, dtype expression or None) if this `.to()`/`.cuda()`
    certainly moves to a device and nothing else is asked of it; else None."""
    bound = move_arguments(node, TENSOR_CUDA_PARAMS if method == "cuda" else TENSOR_TO_PARAMS)
    if bound is None or set(bound) - {"device", "dtype"} - _DROPPABLE:
        return None
    device = bound.get("device")
    if method == "cuda":
        if device is None:
            return cst.SimpleString('"cuda"'), None
        index = literal_value(device)
        if isinstance(index, int) and not isinstance(index, bool):
            return cst.SimpleString(f'"cuda:{index}"'), None
        if isinstance(index, str) and is_accelerator_device(device, ctx):
            return device, None
        return None  # .cuda(x): x may be None (the current device), which device=None is not
    if device is None or not is_accelerator_device(device, ctx):
        return None
    return device, bound.get("dtype")


def _has_comment(node: cst.Call) -> bool:
    """Is there a comment outside the factory call, in the `.to(...)` part the fix drops?"""
    hollow = node.with_changes(func=node.func.with_changes(value=cst.Name("_")))
    return "#" in cst.Module(body=[]).code_for_node(hollow)


RULES = [TensorMovedAfterCreation]
