"""Questions many rules ask, answered once: which argument is this, is this value known, is this
call a tensor factory, where is the enclosing function or loop. Rules call these instead of
re-deriving them; each has tests in tests/test_analysis.py."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.torch_api import ACCELERATOR_DEVICE_TYPES, TENSOR_FACTORIES

UNKNOWN = object()  # a value torchlint cannot know statically: rules stay silent on it


def get_arg(call: cst.Call, keyword: str, position: Optional[int] = None) -> Optional[cst.Arg]:
    """The argument bound to parameter ``keyword`` (by keyword, or by ``position`` if given)."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg
            continue
        if arg.star:
            continue
        if position is not None and index == position:
            return arg
        index += 1
    return None


def has_star_args(call: cst.Call) -> bool:
    """``f(*args)`` or ``f(**kwargs)``: any parameter may be set without us seeing it."""
    return any(arg.star for arg in call.args)


def may_bind(call: cst.Call, keyword: str, position: Optional[int] = None) -> bool:
    """Could ``keyword`` be set by this call, seen or unseen (explicitly, or via * / **)?"""
    return get_arg(call, keyword, position) is not None or has_star_args(call)


def literal_value(node: Optional[cst.BaseExpression]) -> Any:
    """The Python value of a literal (ints, floats, strings, True/False/None, -x), else UNKNOWN."""
    if node is None:
        return UNKNOWN
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)  # handles 0x.., 0o.., 0b.. and underscores
        except ValueError:  # "00"
            return 0
    if isinstance(node, cst.Float):
        return float(node.value.replace("_", ""))
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.SimpleString):
        try:
            return node.evaluated_value
        except Exception:  # pragma: no cover - odd prefixes
            return UNKNOWN
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = literal_value(node.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else UNKNOWN
    return UNKNOWN


def tensor_factory(call: cst.CSTNode, ctx) -> Optional[str]:
    """The short name (``zeros``) if ``call`` calls a torch tensor constructor, else None."""
    if not isinstance(call, cst.Call):
        return None
    name = ctx.resolve_call(call)
    if name and name.startswith("torch.") and name.count(".") == 1:
        short = name[6:]
        if short in TENSOR_FACTORIES:
            return short
    return None


def enclosing_function(ctx) -> Optional[cst.FunctionDef]:
    return ctx.enclosing(cst.FunctionDef)


def enclosing_loops(ctx) -> List[cst.CSTNode]:
    """For/While loops around the current node, innermost first, stopping at the function."""
    loops = []
    for node in reversed(ctx.ancestors):
        if isinstance(node, (cst.For, cst.While)):
            loops.append(node)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
    return loops


def method_call(node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, str]]:
    """For ``obj.meth(...)`` return (obj, "meth"), else None."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.value, node.func.attr.value
    return None


# Names a device is usually held in: `device`, `self.device`, `args.device`, `rank`, `local_rank`.
_DEVICE_NAMES = frozenset({"dev", "rank", "local_rank", "gpu", "gpu_id"})


def is_accelerator_device(node: Optional[cst.BaseExpression], ctx) -> bool:
    """Does ``node`` name a non-host device? ``"cuda:1"``, ``0``, ``torch.device(...)`` (not a
    literal ``"cpu"``/``"meta"``), or a name like ``device``/``self.device``/``local_rank``.
    Dtypes, tensors and other expressions answer False: unknown counts as not a device."""
    if node is None:
        return False
    value = literal_value(node)
    if isinstance(value, str):
        return value.split(":", 1)[0] in ACCELERATOR_DEVICE_TYPES
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 0  # an index on the current accelerator
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return isinstance(first, cst.FormattedStringText) and (
            first.value.split(":", 1)[0] in ACCELERATOR_DEVICE_TYPES
        )
    if isinstance(node, cst.IfExp):  # "cuda" if torch.cuda.is_available() else "cpu"
        return is_accelerator_device(node.body, ctx) or is_accelerator_device(node.orelse, ctx)
    if isinstance(node, cst.Call) and ctx.resolve_call(node) == "torch.device":
        first = get_arg(node, "type", 0)
        if first is None:
            return False
        kind = literal_value(first.value)
        return is_accelerator_device(first.value, ctx) if kind is not UNKNOWN else True
    if isinstance(node, (cst.Name, cst.Attribute)):
        last = (node.attr if isinstance(node, cst.Attribute) else node).value.lower()
        if "cpu" in last:
            return False
        return last.endswith("device") or last in _DEVICE_NAMES
    return False


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that follows a comma between this call's arguments (no comments)."""
    ws = None
    if len(call.args) >= 2 and isinstance(call.args[-2].comma, cst.Comma):
        ws = call.args[-2].comma.whitespace_after
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return cst.SimpleWhitespace(" ")


def with_keyword_args(call: cst.Call, new: Sequence[Tuple[str, cst.BaseExpression]]) -> cst.Call:
    """``call`` with ``keyword=value`` arguments appended, keeping its layout: one argument per
    line stays one per line, and a trailing comma stays trailing."""
    made = [
        cst.Arg(
            value=value,
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
        for keyword, value in new
    ]
    if not made:
        return call
    args = list(call.args)
    sep = cst.Comma(whitespace_after=_separator(call))
    if not args:
        space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return call.with_changes(args=[a.with_changes(comma=space) for a in made[:-1]] + made[-1:])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: it moves to the new last argument
        tail = {"comma": last.comma}
        args[-1] = last.with_changes(comma=sep)
    else:  # the whitespace before ")" moves to the new last argument
        tail = {"whitespace_after_arg": last.whitespace_after_arg}
        args[-1] = last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace(""))
    made = [a.with_changes(comma=sep) for a in made[:-1]] + [made[-1].with_changes(**tail)]
    return call.with_changes(args=args + made)


def code_in_place(ctx, node: cst.CSTNode) -> str:
    """Source for ``node`` (say, a replacement built with ``with_keyword_args``) as it prints at
    the statement being visited: continuation lines inside brackets keep the enclosing blocks'
    indentation, which ``Module.code_for_node`` (rendering at column 0) drops."""
    from libcst._nodes.internal import CodegenState

    indent = [
        a.indent if a.indent is not None else ctx.module.default_indent
        for a in ctx.ancestors
        if isinstance(a, cst.IndentedBlock)
    ]
    state = CodegenState(
        default_indent=ctx.module.default_indent,
        default_newline=ctx.module.default_newline,
        indent_tokens=indent,
    )
    node._codegen(state)
    return "".join(state.tokens)
