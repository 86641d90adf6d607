"""TL7xx: distributed training (DistributedDataParallel and collectives)."""

from __future__ import annotations

from typing import List, Optional

from torchlint import _cst as cst

from torchlint.context import DELETE_LINES, INSERT_BEFORE, FixSpec, NodeEdit, render_node
from torchlint.diagnostics import UNSAFE
from torchlint.loops import is_training_loop, runs_every_step
from torchlint.rules.base import Rule
from torchlint.syntax import enclosing_loops, get_arg, has_star_args, literal_value, method_call
from torchlint.tree import walk

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
    fix_applicability = UNSAFE
    tags = ("performance", "distributed")

    def visit_Call(self, node: cst.Call) -> None:
        arg = get_arg(node, "find_unused_parameters")  # by keyword only: the 8th positional is rare
        if arg is None or literal_value(arg.value) is not True:
            return
        if self.ctx.resolve_call(node) == DDP:
            fix = FixSpec(UNSAFE, "Set `find_unused_parameters=False`", (NodeEdit(arg.value, "False"),))
            self.report(arg, fix=fix)


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
    fix_applicability = UNSAFE

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
            self.report(node, fix=self._fix(node, tensor, loop))

    def _fix(self, node: cst.Call, tensor: cst.Arg, loop: cst.For) -> Optional[FixSpec]:
        """One all-reduce over a flat buffer, before the loop: the reduced tensors gathered by a
        comprehension over the loop's iterable, ``torch.cat`` of them flattened, the collective
        with the call's other arguments, each tensor copied back from its slice; the call (and a
        ``p.grad is not None`` guard left empty) leaves the loop, and a loop left empty goes.
        Only for a call that is the loop body's first act (alone, or first under that guard),
        so that nothing in the loop runs before it in the original."""
        ctx, anc = self.ctx, self.ctx.ancestors
        text = ctx.module.code_for_node
        attrs = text(tensor.value).split(".")[1:]
        if attrs not in (["grad"], ["grad", "data"], ["data"]) or loop.orelse is not None or loop.asynchronous:
            return None
        async_op = get_arg(node, "async_op", 3)
        if has_star_args(node) or async_op is not None and literal_value(async_op.value) is not False:
            return None  # the returned work handle may be waited on
        if len(anc) < 4 or not (isinstance(anc[-1], cst.Expr) and anc[-1].value is node):
            return None
        line, block = anc[-2], anc[-3]
        if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
                and isinstance(block, cst.IndentedBlock) and block.body[0] is line):
            return None
        guard = None
        if anc[-4] is not loop:
            guard = anc[-4]
            if not (isinstance(guard, cst.If) and guard.orelse is None and len(anc) >= 6 and anc[-6] is loop
                    and anc[-5].body[0] is guard and _tests_grad_not_none(guard.test, tensor.value)):
                return None
        if not isinstance(loop.iter, cst.Call):  # iterated twice: a name must hold a list
            values = ctx.semantic.values_of(loop.iter) if isinstance(loop.iter, cst.Name) else None
            if not values or not all(_is_list_call(v) for v in values):
                return None
        scope = next((a for a in reversed(anc) if isinstance(a, cst.FunctionDef)), ctx.module)
        nodes = list(walk(scope))
        attributes = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
        used = {n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in attributes}
        kind = "grad" if attrs[0] == "grad" else "weight"
        items, flat, item, chunk = (_fresh(base, used) for base in (kind + "s", "flat", kind, "chunk"))
        import_edit, torch_name = ctx.import_edit("torch")
        condition = f" if {text(guard.test)}" if guard is not None else ""
        collective = node.with_changes(args=[a.with_changes(value=cst.Name(flat)) if a is tensor else a for a in node.args])
        indents = ctx.indentation(upto=loop)
        indent, step = "".join(indents), (anc[-3].indent if anc[-3].indent is not None else ctx.module.default_indent)
        lines = [
            f"{items} = [{text(tensor.value)} for {text(loop.target)} in {text(loop.iter)}{condition}]",
            f"{flat} = {torch_name}.cat([{item}.flatten() for {item} in {items}])",
            render_node(ctx.module, collective, indents),
            f"for {item}, {chunk} in zip({items}, {flat}.split([{item}.numel() for {item} in {items}])):",
            f"{step}{item}.copy_({chunk}.view_as({item}))",
        ]
        removed = guard if guard is not None and len(guard.body.body) == 1 else line
        edits: List[NodeEdit] = []
        if len(loop.body.body) == 1 and loop.body.body[0] is removed:  # the loop did nothing else
            edits.append(NodeEdit(loop, "".join(f"{indent}{l}\n" for l in lines), DELETE_LINES))
        else:
            edits.append(NodeEdit(loop, "".join(f"{l}\n{indent}" for l in lines), INSERT_BEFORE))
            comment = line.trailing_whitespace.comment if removed is line else None
            inner = "".join(ctx.indentation(upto=line))
            edits.append(NodeEdit(removed, f"{inner}{comment.value}\n" if comment is not None else "", DELETE_LINES))
        if import_edit is not None:
            edits.insert(0, import_edit)
        return FixSpec(UNSAFE, "All-reduce one flat buffer of the tensors", tuple(edits))

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


def _is_list_call(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("list", "tuple")


def _tests_grad_not_none(test: cst.BaseExpression, reduced: cst.BaseExpression) -> bool:
    """``p.grad is not None`` where ``reduced`` is ``p.grad`` or ``p.grad.data``."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    target = test.comparisons[0]
    if not (isinstance(target.operator, cst.IsNot) and isinstance(target.comparator, cst.Name)
            and target.comparator.value == "None"):
        return False
    code = cst.Module([]).code_for_node
    return code(reduced).startswith(code(test.left) + ".") or code(reduced) == code(test.left)


def _fresh(base: str, used: set) -> str:
    """``base``, or ``base_1``, ``base_2``... : a name the scope does not use yet."""
    name, n = base, 0
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name


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
