"""TL7xx: distributed training (DistributedDataParallel and collectives)."""

from __future__ import annotations

from typing import Optional

from torchlint import _cst as cst

from torchlint.loops import is_training_loop, runs_every_step
from torchlint.rules.base import Rule
from torchlint.syntax import enclosing_loops, get_arg, literal_value, method_call

DDP = "torch.nn.parallel.DistributedDataParallel"
ALL_REDUCE = "torch.distributed.all_reduce"
# Methods whose result iterates a module's parameters (`for p in model.parameters()`).
PARAMETER_ITERATORS = frozenset({"parameters", "named_parameters"})


class DdpFindUnusedParameters(Rule):
    """Flags ``DistributedDataParallel(..., find_unused_parameters=True)`` with a literal ``True``.

    With the flag set, DDP walks the autograd graph from the outputs after every forward pass to
    find the parameters that will get no gradient, and marks them ready by hand: a traversal of
    the whole graph each step, and bucket all-reduces that cannot start until it is done. A
    model that uses every parameter every step pays for nothing. A variable
    (``find_unused_parameters=args.find_unused``) is the user's choice per run: silent, as are
    other libraries' wrappers (Lightning's ``DDPStrategy``, accelerate's kwargs handler).
    """

    code = "TL702"
    name = "ddp-find-unused-parameters"
    summary = "`DistributedDataParallel(find_unused_parameters=True)` traverses the autograd graph every step."
    message = "`find_unused_parameters=True` walks the autograd graph every step; leave it off unless needed"
    hint = (
        "DDP then traverses the graph after every forward pass; keep it only when some parameters "
        "really get no gradient in some steps (then consider `static_graph=True` when the unused set "
        "never changes)."
    )
    requires = (("find_unused_parameters",),)
    ast_candidate = staticmethod(lambda index: any(
        index.literal(kw.value) is True and index.resolves(call.func, DDP.__eq__)
        for call, kw, _ in index.keyword_calls("find_unused_parameters")))
    tags = ("performance", "distributed")

    def visit_Call(self, node: cst.Call) -> None:
        arg = get_arg(node, "find_unused_parameters")  # by keyword only: the 8th positional is rare
        if arg is None or literal_value(arg.value) is not True:
            return
        if self.ctx.resolve_call(node) == DDP:
            self.report(arg)


class PerParameterAllReduce(Rule):
    """Flags ``dist.all_reduce(p.grad)`` (or ``p.grad.data``, ``p.data``, ``p``) inside a loop over
    ``model.parameters()`` / ``model.named_parameters()``.

    One collective per parameter tensor: hundreds of small all-reduces, each with its own launch
    and network latency, run one after the other after the backward pass. DDP (or
    ``torch.distributed`` on one flattened buffer) reduces gradients in a few large buckets and
    overlaps them with the backward pass. Reducing gradients is a per-step act wherever it is
    written (``def average_gradients(model)``); reducing the parameters themselves (``p.data``)
    is flagged only in a training loop or a function the project index proves runs every step
    (a one-off sync of weights at start-up is fine). The loop may iterate a name bound to
    ``model.parameters()`` or ``list(model.parameters())``.
    """

    code = "TL703"
    name = "per-parameter-all-reduce"
    summary = "`dist.all_reduce` per parameter tensor in a loop over `model.parameters()`."
    message = "One `all_reduce` per parameter; wrap the model in `DistributedDataParallel` or reduce one buffer"
    hint = (
        "Each call launches its own collective, one after the other; DDP buckets the all-reduce and "
        "overlaps it with backward."
    )
    requires = (("all_reduce",), ("parameters",))
    ast_candidate = staticmethod(lambda index: bool(index.qualified_calls((ALL_REDUCE,)))
                                 and bool(index.method_calls(*PARAMETER_ITERATORS)))
    tags = ("performance", "distributed")
    uses_project = True

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) != ALL_REDUCE:
            return
        tensor = get_arg(node, "tensor", 0)
        if tensor is None:
            return
        loop = next((l for l in enclosing_loops(self.ctx) if isinstance(l, cst.For) and self._over_parameters(l)), None)
        if loop is None:
            return
        reduced = _reduced_parameter(tensor.value, loop)
        if reduced is None:
            return
        if reduced == "grad" or self._every_step(loop):
            self.report(node)

    def _over_parameters(self, loop: cst.For) -> bool:
        """``for p in m.parameters()``, ``for n, p in m.named_parameters()``, through ``list(...)``
        or a name whose every reaching binding is one of those."""
        values = [loop.iter]
        if isinstance(loop.iter, cst.Name):
            values = self.ctx.semantic.values_of(loop.iter) or []
        return bool(values) and all(_iterates_parameters(v) for v in values)

    def _every_step(self, loop: cst.For) -> bool:
        if any(is_training_loop(self.ctx, l) for l in enclosing_loops(self.ctx) if l is not loop):
            return True
        return runs_every_step(self.ctx) is not None


def _iterates_parameters(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("list", "tuple"):
        if len(value.args) == 1 and not value.args[0].star:
            value = value.args[0].value
    call = method_call(value)
    return call is not None and call[1] in PARAMETER_ITERATORS


def _reduced_parameter(value: cst.BaseExpression, loop: cst.For) -> Optional[str]:
    """"grad" for ``p.grad`` / ``p.grad.data``, "data" for ``p.data`` / ``p``, where ``p`` is the
    parameter the loop binds (the last element of a ``name, p`` target); else None."""
    target = loop.target
    if isinstance(target, cst.Tuple) and target.elements:
        target = target.elements[-1].value
    if not isinstance(target, cst.Name):
        return None
    param = target.value
    attrs = []
    while isinstance(value, cst.Attribute):
        attrs.append(value.attr.value)
        value = value.value
    if not (isinstance(value, cst.Name) and value.value == param):
        return None
    attrs.reverse()
    if attrs in (["grad"], ["grad", "data"]):
        return "grad"
    if attrs in ([], ["data"]):
        return "data"
    return None


RULES = [DdpFindUnusedParameters, PerParameterAllReduce]
