"""Questions many rules ask, answered once: which argument is this, is this value known, is this
call a tensor factory, where is the enclosing function or loop. Rules call these instead of
re-deriving them; each has tests in tests/test_analysis.py."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchlint.torch_api import TENSOR_FACTORIES

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
