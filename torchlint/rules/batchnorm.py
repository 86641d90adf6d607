"""TL3xx: layers whose parameters do nothing."""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis import body_simple_statements, get_arg, literal_value
from torchlint.context import INSERT_AFTER, FixSpec, NodeEdit, block_indents
from torchlint.tree import iter_children
from torchlint.diagnostics import UNSAFE
from torchlint.rules.base import Rule
from torchlint.torch_api import BATCHNORM_CLASSES, CONV_BIAS_POSITION, CONV_CLASSES

# Every one of these subtracts a per-channel mean computed from the batch in training mode.
_MEAN_SUBTRACTING_NORMS = BATCHNORM_CLASSES | {"torch.nn.SyncBatchNorm"}
_ORDERED_DICTS = frozenset({"collections.OrderedDict", "typing.OrderedDict"})


class ConvBiasBeforeBatchNorm(Rule):
    """Flags a ``Conv1d/2d/3d`` with its bias on whose output goes straight into a BatchNorm.

    BatchNorm subtracts the per-channel mean of its input, so a per-channel constant added just
    before it (the conv's bias) cancels out: the bias costs an add, memory and an optimizer slot
    for nothing. Two shapes are recognised: consecutive layers of ``nn.Sequential(...)`` (also
    via ``OrderedDict``/dict), and ``self.conv``/``self.bn`` attributes assigned once in
    ``__init__`` whose every call in the class is ``self.bn(self.conv(x))`` or
    ``x = self.conv(x)`` directly followed by ``x = self.bn(x)``. The finding is on the conv's
    constructor call. Unknown bias (``bias=flag``, ``**kwargs``), other norms, an activation in
    between, conditional or repeated assignments, convs used elsewhere and test code stay silent.
    """

    code = "TL301"
    name = "conv-bias-before-batchnorm"
    summary = "A convolution with a bias feeds straight into BatchNorm, which cancels the bias."
    message = (
        "This convolution's bias is cancelled by the BatchNorm that follows it (BatchNorm subtracts "
        "the per-channel mean); pass `bias=False`."
    )
    requires = (("Conv1d", "Conv2d", "Conv3d"), ("BatchNorm",))
    fix_applicability = UNSAFE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: Set[int] = set()

    # -- nn.Sequential(conv, bn, ...) ---------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) != "torch.nn.Sequential":
            return
        layers = self._sequential_layers(node)
        for first, second in zip(layers, layers[1:]):
            if first is not None and second is not None and self._is_conv_with_bias(first) and self._is_norm(second):
                self._report_conv(first, self.ctx.ancestors)

    def _sequential_layers(self, node: cst.Call) -> List[Optional[cst.BaseExpression]]:
        """The layers in order; None stands for something unseen (``*layers``) that breaks a pair."""
        args = node.args
        if len(args) == 1 and not args[0].star and args[0].keyword is None:
            only = args[0].value
            if isinstance(only, cst.Dict):
                return [e.value if isinstance(e, cst.DictElement) else None for e in only.elements]
            if (
                isinstance(only, cst.Call)
                and self.ctx.resolve_call(only) in _ORDERED_DICTS
                and len(only.args) == 1
                and isinstance(only.args[0].value, (cst.List, cst.Tuple))
            ):
                layers: List[Optional[cst.BaseExpression]] = []
                for element in only.args[0].value.elements:
                    pair = element.value
                    if isinstance(element, cst.Element) and isinstance(pair, cst.Tuple) and len(pair.elements) == 2:
                        layers.append(pair.elements[1].value)
                    else:
                        layers.append(None)
                return layers
        return [None if arg.star or arg.keyword is not None else arg.value for arg in args]

    # -- self.conv / self.bn applied in sequence ----------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        methods = [s for s in node.body.body if isinstance(s, cst.FunctionDef)]
        init = next((m for m in methods if m.name.value == "__init__"), None)
        if init is None or not self._constructs_conv_and_norm(init):
            return  # the cheap check first: most classes never build a conv and a norm
        assignments: Dict[str, List[Tuple[cst.BaseExpression, bool]]] = {}
        calls: Dict[str, List[Tuple[cst.Call, Tuple[cst.CSTNode, ...], cst.FunctionDef]]] = {}
        escaped: Set[str] = set()
        touches_bias: Set[str] = set()
        for method in methods:
            owner = _self_name(method)
            if owner is None:
                continue
            top_level = _top_level_statements(init) if method is init else set()
            for child, parents in _walk(method.body):
                attr = _self_attribute(child, owner)
                if attr is None:
                    continue
                parent = parents[-1]
                if _is_assign_target(child, parents):
                    statement = parents[-2] if isinstance(parent, cst.AssignTarget) else parent
                    value = statement.value if isinstance(statement, (cst.Assign, cst.AnnAssign)) else None
                    simple = (
                        value is not None
                        and (isinstance(statement, cst.AnnAssign) or len(statement.targets) == 1)
                        and id(statement) in top_level
                    )
                    assignments.setdefault(attr, []).append((value, simple))
                elif isinstance(parent, cst.Call) and parent.func is child:
                    calls.setdefault(attr, []).append((parent, parents[:-1], method))
                elif isinstance(parent, cst.Attribute) and parent.value is child:
                    if parent.attr.value == "bias":
                        touches_bias.add(attr)  # nn.init.zeros_(self.conv.bias) breaks without one
                    continue  # self.conv.weight: reading a parameter feeds nothing
                else:
                    escaped.add(attr)  # passed somewhere (Sequential, checkpoint, fuse): unknown

        def constructed_once(attr: str) -> Optional[cst.Call]:
            entries = assignments.get(attr, [])
            if len(entries) == 1 and entries[0][1] and isinstance(entries[0][0], cst.Call):
                return entries[0][0]
            return None

        norms = {a for a in assignments if (c := constructed_once(a)) is not None and self._is_norm(c)}
        if not norms:
            return
        for attr in assignments:
            conv = constructed_once(attr)
            if conv is None or attr in escaped or not calls.get(attr) or not self._is_conv_with_bias(conv):
                continue
            if all(_feeds_norm(call, parents, method, norms) for call, parents, method in calls[attr]):
                self._report_conv(conv, [*self.ctx.ancestors, node.body, init.body], fixable=attr not in touches_bias)

    def _constructs_conv_and_norm(self, init: cst.FunctionDef) -> bool:
        values = [
            small.value
            for small in body_simple_statements(init)
            if isinstance(small, (cst.Assign, cst.AnnAssign))
        ]
        return any(self._is_norm(v) for v in values) and any(
            v is not None and self._is_conv_with_bias(v) for v in values
        )

    # -- shared -------------------------------------------------------------------------------
    def _is_conv_with_bias(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call) or self.ctx.resolve_call(node) not in CONV_CLASSES:
            return False
        keyword = next((a for a in node.args if a.keyword is not None and a.keyword.value == "bias"), None)
        if keyword is not None:
            return literal_value(keyword.value) is True
        if any(a.star for a in node.args):
            return False  # **kwargs / *args may set the bias: unknown
        positional = get_arg(node, "bias", CONV_BIAS_POSITION)
        return positional is None or literal_value(positional.value) is True

    def _is_norm(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.ctx.resolve_call(node) in _MEAN_SUBTRACTING_NORMS

    def _report_conv(self, conv: cst.Call, blocks: Sequence[cst.CSTNode], fixable: bool = True) -> None:
        if id(conv) in self._reported:
            return
        self._reported.add(id(conv))
        fix = None
        if fixable:
            edits = _bias_false_edits(conv, "".join(block_indents(self.ctx.module, blocks)))
            fix = FixSpec(UNSAFE, "Pass `bias=False` to the convolution", edits)
        self.report(conv, fix=fix)


# -- tree helpers -------------------------------------------------------------------------------
def _walk(root: cst.CSTNode) -> Iterator[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]]:
    """Every node under ``root`` with its ancestors (``root`` first); nested classes are skipped."""
    stack: List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]] = [(root, ())]
    while stack:
        node, parents = stack.pop()
        yield node, parents
        if isinstance(node, cst.ClassDef):
            continue
        below = parents + (node,)
        for child in reversed(list(iter_children(node))):
            stack.append((child, below))


def _self_name(method: cst.FunctionDef) -> Optional[str]:
    params = method.params.posonly_params or method.params.params
    if not params or any(
        isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in method.decorators
    ):
        return None
    return params[0].name.value


def _self_attribute(node: cst.CSTNode, owner: str) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == owner:
        return node.attr.value
    return None


def _is_assign_target(node: cst.CSTNode, parents: Tuple[cst.CSTNode, ...]) -> bool:
    parent = parents[-1]
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node:
        return True
    if isinstance(parent, cst.Del):
        return True
    # unpacking (`self.a, self.b = ...`), for-targets, walrus-like spots: an assignment we cannot read
    for ancestor in reversed(parents):
        if isinstance(ancestor, (cst.AssignTarget, cst.CompFor, cst.For)) and _contains(
            getattr(ancestor, "target", None), node
        ):
            return True
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            break
    return False


def _contains(tree: Optional[cst.CSTNode], node: cst.CSTNode) -> bool:
    return tree is not None and any(child is node for child, _ in _walk(tree))


def _top_level_statements(function: cst.FunctionDef) -> Set[int]:
    return {id(small) for small in body_simple_statements(function)}


def _feeds_norm(call: cst.Call, parents: Tuple[cst.CSTNode, ...], method: cst.FunctionDef, norms: Set[str]) -> bool:
    """Is this ``self.conv(...)`` call's result consumed by a norm attribute and nothing else?"""
    owner = _self_name(method)
    parent = parents[-1]
    # self.bn(self.conv(x))
    if isinstance(parent, cst.Arg) and len(parents) >= 2:
        outer = parents[-2]
        return (
            isinstance(outer, cst.Call)
            and len(outer.args) == 1
            and outer.args[0] is parent
            and parent.keyword is None
            and not parent.star
            and _self_attribute(outer.func, owner) in norms
        )
    # x = self.conv(x)  directly followed by  x = self.bn(x)
    if not (
        isinstance(parent, cst.Assign)
        and parent.value is call
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
        and len(parents) >= 3
        and isinstance(parents[-2], cst.SimpleStatementLine)
        and len(parents[-2].body) == 1
    ):
        return False
    variable = parent.targets[0].target.value
    block = parents[-3]
    statements = list(getattr(block, "body", ()))
    index = next((i for i, s in enumerate(statements) if s is parents[-2]), None)
    if index is None or index + 1 >= len(statements):
        return False
    following = statements[index + 1]
    if not isinstance(following, cst.SimpleStatementLine) or len(following.body) != 1:
        return False
    uses = [n for n, _ in _walk(following) if isinstance(n, cst.Name) and n.value == variable]
    norm_calls = [
        n
        for n, _ in _walk(following)
        if isinstance(n, cst.Call)
        and _self_attribute(n.func, owner) in norms
        and len(n.args) == 1
        and not n.args[0].star
        and n.args[0].keyword is None
        and isinstance(n.args[0].value, cst.Name)
        and n.args[0].value.value == variable
    ]
    small = following.body[0]
    rebinds = (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == variable
    )
    if len(norm_calls) != 1 or len(uses) != (2 if rebinds else 1):
        return False
    if rebinds:
        return True
    # `y = self.conv(x); z = self.bn(y)`: y must not be read anywhere else. Mentions before the
    # assignment cannot see the conv's output unless a loop brings control back to them.
    mentions = [n for n, _ in _walk(method.body) if isinstance(n, cst.Name) and n.value == variable]
    target = parent.targets[0].target
    in_loop = any(isinstance(p, (cst.For, cst.While)) for p in parents)
    if in_loop:
        return len(mentions) == 2
    later = mentions[next(i for i, n in enumerate(mentions) if n is target):]
    inside_conv = {id(n) for n, _ in _walk(call)}  # `y = self.conv(y)` reads y before assigning
    return len([n for n in later if id(n) not in inside_conv]) == 2


# -- the fix ------------------------------------------------------------------------------------
def _bias_false_edits(conv: cst.Call, block_indent: str) -> Tuple[NodeEdit, ...]:
    """Edits giving ``conv`` ``bias=False``: the bias value replaced, or a keyword appended.

    Small text edits rather than a re-rendered call, so the call's layout and comments stay;
    ``block_indent`` is the indentation of the statement holding the call.
    """
    for arg in conv.args:
        if (arg.keyword is not None and arg.keyword.value == "bias") or (
            arg.keyword is None and get_arg(conv, "bias", CONV_BIAS_POSITION) is arg
        ):
            return (NodeEdit(arg.value, "False"),)
    last = conv.args[-1]
    comma = last.comma
    if (
        isinstance(comma, cst.Comma)
        and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        and comma.whitespace_after.first_line.comment is None
    ):
        # one argument per line with a trailing comma: the new keyword gets its own line
        indent = _argument_indent(conv, block_indent)
        if indent is not None:
            return (NodeEdit(comma, f",\n{indent}bias=False,"),)
    return (NodeEdit(last.value, ", bias=False", INSERT_AFTER),)


def _argument_indent(call: cst.Call, block_indent: str) -> Optional[str]:
    """The absolute indentation of the arguments of a call spread over several lines."""
    spaces = [arg.comma.whitespace_after for arg in call.args[:-1] if isinstance(arg.comma, cst.Comma)]
    for whitespace in reversed(spaces + [call.whitespace_before_args]):
        if isinstance(whitespace, cst.ParenthesizedWhitespace):
            return (block_indent if whitespace.indent else "") + whitespace.last_line.value
    return None


RULES = [ConvBiasBeforeBatchNorm]
