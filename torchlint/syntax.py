"""Syntax questions many rules ask, answered once: which argument binds this parameter, is this
value a known literal, which names does a target bind, where is the enclosing function or loop,
is this call a torch tensor factory. No word lists here (``heuristics.py``) and no fix building
(``fixbuilders.py``). Where a function takes the file's context it comes first: ``f(ctx, node)``.
Tests in tests/test_analysis.py."""

from __future__ import annotations

import functools
import re
from typing import Any, List, Optional, Sequence, Set, Tuple

from torchlint import _cst as cst

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


def bound_names(target: cst.CSTNode) -> Set[str]:
    """Names a `for` target or assignment target binds: `i, (x, *y)` -> {i, x, y}."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        names: Set[str] = set()
        for element in target.elements:
            names |= bound_names(element.value)
        return names
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return set()


def body_simple_statements(function: cst.FunctionDef) -> List[cst.BaseSmallStatement]:
    """The simple statements directly in a function's body (not under if/for/try/with)."""
    body = function.body
    if isinstance(body, cst.SimpleStatementSuite):
        return list(body.body)
    return [small for line in body.body if isinstance(line, cst.SimpleStatementLine) for small in line.body]


def method_call(node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, str]]:
    """For ``obj.meth(...)`` return (obj, "meth"), else None."""
    # exact types: libcst's nodes are ABCs, and a failed isinstance of one costs a Python call
    # (ABCMeta.__instancecheck__); these classes have no subclasses
    if type(node) is cst.Call and type(node.func) is cst.Attribute:
        return node.func.value, node.func.attr.value
    return None


def move_arguments(call: cst.Call, params: Sequence[str]) -> Optional[dict]:
    """The arguments of a ``.to(...)``/``.cuda(...)`` call bound to ``params`` (the method's
    parameter order, ``TENSOR_TO_PARAMS`` / ``TENSOR_CUDA_PARAMS``): {name: expression}. None
    when something cannot be bound (``*args``, an unknown keyword, too many positionals)."""
    if any(arg.star for arg in call.args):
        return None
    bound = {}
    positional = 0
    for arg in call.args:
        if arg.keyword is None:
            if positional >= len(params):
                return None
            bound[params[positional]] = arg.value
            positional += 1
        elif arg.keyword.value in params:
            bound[arg.keyword.value] = arg.value
        else:
            return None
    return bound


def last_name(node: cst.CSTNode) -> Optional[str]:
    while isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def name_tokens(node: Optional[cst.CSTNode]) -> List[str]:
    """Lower-case words of every name in a Name/Attribute chain or a call's callee:
    ``self.args.should_log`` -> ["self", "args", "should", "log"]; camelCase is split too."""
    while isinstance(node, cst.Call):
        node = node.func
    parts: List[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    words: List[str] = []
    for part in reversed(parts):
        spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", part)
        words.extend(w.lower() for w in spaced.split("_") if w)
    return words


def tensor_factory(ctx, call: cst.CSTNode) -> Optional[str]:
    """The short name (``zeros``) if ``call`` calls a torch tensor constructor, else None."""
    if not isinstance(call, cst.Call):
        return None
    name = ctx.resolve_call(call)
    if name and name.startswith("torch.") and name.count(".") == 1:
        short = name[6:]
        if short in TENSOR_FACTORIES:
            return short
    return None


# Functions, not module constants: naming libcst's classes at import would import libcst
# (torchlint/_cst.py).
@functools.cache
def scope_types() -> Tuple[type, ...]:
    return (cst.FunctionDef, cst.ClassDef, cst.Lambda)


@functools.cache
def loop_types() -> Tuple[type, ...]:
    return (cst.For, cst.While)


def enclosing_function(ctx) -> Optional[cst.FunctionDef]:
    return ctx.enclosing(cst.FunctionDef)


def enclosing_loops(ctx) -> List[cst.CSTNode]:
    """For/While loops around the current node, innermost first, stopping at the function."""
    loops = []
    loop_kinds, scope_kinds = loop_types(), scope_types()
    for node in reversed(ctx.ancestors):
        kind = type(node)  # exact types, as in method_call
        if kind in loop_kinds:
            loops.append(node)
        elif kind in scope_kinds:
            break
    return loops


def qualified_name(ctx, upto: Optional[cst.CSTNode] = None) -> Optional[str]:
    """``Class.method`` / ``outer.inner`` of the function being visited (or of ``upto``, one of
    its ancestors), as the project summaries name it; None outside functions."""
    names = []
    last_function = None
    for node in ctx.ancestors:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            names.append(node.name.value)
            if isinstance(node, cst.FunctionDef):
                last_function = len(names)
        elif isinstance(node, cst.Lambda):
            return None
        if node is upto:
            break
    return ".".join(names[:last_function]) if last_function else None


def body_nodes(root: cst.CSTNode, skip: Tuple[type, ...]):
    """Nodes under ``root`` (not root), not descending into nodes of the ``skip`` types."""
    from torchlint.tree import walk

    return walk(root, skip, include_root=False)


def path_below(ctx, top: cst.CSTNode, node: Optional[cst.CSTNode]) -> List[cst.CSTNode]:
    """The ancestors strictly below ``top`` down to ``node`` (included when given)."""
    ancestors = ctx.ancestors
    for index in range(len(ancestors) - 1, -1, -1):
        if ancestors[index] is top:
            path = list(ancestors[index + 1:])
            break
    else:
        path = list(ancestors)
    if node is not None:  # the node being visited is not yet among the ancestors
        path.append(node)
    return path


def guarded_branches(path: List[cst.CSTNode]):
    """(test, ...) for each if/ternary on ``path`` whose *true* branch the path goes through."""
    for outer, inner in zip(path, path[1:]):
        if isinstance(outer, cst.If) and inner is outer.body:
            yield outer.test
        elif isinstance(outer, cst.IfExp) and inner is outer.body:
            yield outer.test


def memo(ctx, key: str, node: cst.CSTNode, compute):
    """``compute()`` once per file for (``key``, ``node``): rules ask about the same loop often."""
    slot = (key, id(node))
    try:
        return ctx.analysis_memo[slot]
    except KeyError:
        value = ctx.analysis_memo[slot] = compute()
        return value
