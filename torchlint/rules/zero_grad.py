"""TL4xx: gradient bookkeeping."""

from __future__ import annotations

import functools
import re
from typing import Optional, Tuple

from torchlint import _cst as cst

from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import UNSAFE
from torchlint.model import scope_of
from torchlint.rules.base import GAP, Rule
from torchlint.semantic import LOOP
from torchlint.syntax import enclosing_function, get_arg, has_star_args, literal_value, method_call
from torchlint.tree import walk

# `set_to_none` became the default of Optimizer/Module.zero_grad in 2.0; it exists since 1.7.
SET_TO_NONE_DEFAULT = (2, 0)
SET_TO_NONE_ADDED = (1, 7)
_CUDA_GRAPH_CAPTURE = frozenset({"torch.cuda.graph", "torch.cuda.graphs.graph"})
class ZeroGradSetToNone(Rule):
    """Flags zeroing gradients in place where setting them to ``None`` would do.

    ``zero_grad(set_to_none=False)`` (and ``zero_grad(False)``) launch a memset per parameter and
    keep every gradient allocated between steps; with ``set_to_none=True`` the next backward
    writes fresh gradients instead of accumulating into zeros. A plain ``zero_grad()`` is flagged
    only when the target torch is older than 2.0, where the default was still ``False``. Manual
    loops (``for p in model.parameters(): p.grad.zero_()``) are flagged at the zeroing call.
    Silent: ``set_to_none=True`` or an unknown value, code that implements ``zero_grad`` itself,
    zeroing inside a ``torch.cuda.graph`` capture (grads must keep their addresses), a class (or
    a module outside classes) that adds into ``.grad`` itself (``p.grad += g``), test code, and
    ``.zero_()`` on anything that is not a loop variable's ``.grad``.
    """

    code = "TL401"
    name = "zero-grad-set-to-none"
    summary = "Gradients are zeroed in place instead of being set to `None`."
    message = "`zero_grad(set_to_none=False)` writes zeros into every gradient each step; drop the argument"
    hint = "Setting gradients to `None` (the default `set_to_none=True`) frees them and lets backward write fresh ones."
    # `zero_grad(`, or `.zero_()` on a `.grad` / `.grad.data` (however spaced: see GAP).
    requires = (("zero_",), ("zero_grad", re.compile(rf"grad{GAP}\.{GAP}(?:data{GAP}\.{GAP})?zero_")))
    ast_candidate = staticmethod(lambda index: index.mentions("zero_grad", substring=True)
                                 or index.method_calls_on("zero_", ("grad",), ("grad", "data")))
    fix_applicability = UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        target = method_call(node)
        if target is None:
            return
        receiver, method = target
        if method == "zero_grad":
            self._check_zero_grad(node)
        elif method == "zero_":
            self._check_manual_loop(node, receiver)

    # -- optimizer.zero_grad(...) / model.zero_grad(...) ---------------------------------------
    def _check_zero_grad(self, node: cst.Call) -> None:
        if self._implements_zero_grad() or self._in_graph_capture():
            return
        if self._accumulates_into_grads():
            return
        version = self.ctx.torch_version
        arg = get_arg(node, "set_to_none", 0)
        if arg is None:
            if has_star_args(node) or node.args or version >= SET_TO_NONE_DEFAULT:
                return
            if version < SET_TO_NONE_ADDED:
                # A project that still supports a torch without set_to_none= (PyTorch-GAN's
                # torch>=0.4.0) has no argument to pass: the call is as good as it can be there,
                # and on the torch it is installed with today the default already frees.
                return
            new = node.with_changes(args=[cst.Arg(keyword=cst.Name("set_to_none"), value=cst.Name("True"), equal=_equal())])
            fix = FixSpec(UNSAFE, "Pass `set_to_none=True`", (NodeEdit(node, new),))
            self.report(
                node,
                "`zero_grad()` zeroes gradients in place before torch 2.0; pass `set_to_none=True`",
                fix,
            )
            return
        if literal_value(arg.value) is not False:
            return  # True, or a value we cannot know
        fix = None
        if len(node.args) == 1:
            if version >= SET_TO_NONE_DEFAULT:
                new = node.with_changes(args=[], whitespace_before_args=cst.SimpleWhitespace(""))
                fix = FixSpec(UNSAFE, "Remove `set_to_none=False`", (NodeEdit(node, new),))
            else:
                fix = FixSpec(
                    UNSAFE, "Pass `set_to_none=True`", (NodeEdit(arg, arg.with_changes(keyword=cst.Name("set_to_none"), value=cst.Name("True"), equal=_equal())),)
                )
        message = self.message if version >= SET_TO_NONE_DEFAULT else (
            "`zero_grad(set_to_none=False)` writes zeros into every gradient each step; pass `set_to_none=True`"
        )
        self.report(node, message, fix)

    # -- for p in model.parameters(): p.grad.zero_() -------------------------------------------
    def _check_manual_loop(self, node: cst.Call, receiver: cst.BaseExpression) -> None:
        if node.args:
            return
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
            receiver = receiver.value  # p.grad.data.zero_()
        if not (
            isinstance(receiver, cst.Attribute)
            and receiver.attr.value == "grad"
            and isinstance(receiver.value, cst.Name)
        ):
            return
        loop = self._loop_binding(receiver.value)
        if loop is None or self._implements_the_choice() or self._in_graph_capture():
            return
        if self._accumulates_into_grads():
            return
        fix = None
        replacement = _loop_replacement(loop, receiver.value.value, self.ctx.torch_version)
        if replacement is not None:
            fix = FixSpec(UNSAFE, f"Replace the loop with `{replacement}`", (NodeEdit(loop, replacement),))
        self.report(
            node,
            "Gradients zeroed one parameter at a time; call `zero_grad()` on the model or optimizer",
            fix,
        )

    def _loop_binding(self, variable: cst.Name) -> Optional[cst.For]:
        """The for-loop around this call whose target (a plain name) is the only binding of
        ``variable`` that reaches it (the semantic model: ``p = other`` in the body breaks it)."""
        bindings = self.ctx.semantic.lookup(variable)
        if not bindings or len(bindings) != 1 or bindings[0].kind != LOOP:
            return None
        loop = bindings[0].statement
        if not (isinstance(loop, cst.For) and isinstance(loop.target, cst.Name)):
            return None
        return loop if any(node is loop for node in self.ctx.ancestors) else None

    # -- where zeroing in place is the point --------------------------------------------------
    def _implements_the_choice(self) -> bool:
        """Inside a ``zero_grad`` that zeroes in place only when its caller asks
        (``if set_to_none: p.grad = None`` / ``else: p.grad.zero_()``). One that always zeroes
        in place is per-step zeroing like any other (torch offers ``set_to_none`` since 1.7)."""
        if not self._implements_zero_grad():
            return False
        for node in reversed(self.ctx.ancestors):
            if isinstance(node, cst.FunctionDef):
                return False
            if isinstance(node, (cst.If, cst.IfExp)) and any(
                isinstance(n, cst.Name) and n.value == "set_to_none" for n in walk(node.test)
            ):
                return True
        return False

    def _implements_zero_grad(self) -> bool:
        function = enclosing_function(self.ctx)
        return function is not None and function.name.value == "zero_grad"

    def _accumulates_into_grads(self) -> bool:
        """Does the innermost enclosing class (else the module, outside its classes) add into
        ``.grad`` itself (``p.grad += g``, ``p.grad.add_(g)``, ``p.grad.copy_(g)``)? A parameter
        server summing remote gradients needs them allocated: with ``None`` that code fails. The
        whole-file model answers: the code that adds may be in a definition this walk left out."""
        return self.ctx.model.accumulates_into_grads(scope_of(self.ctx.ancestors))

    def _in_graph_capture(self) -> bool:
        for node in self.ctx.ancestors:
            if isinstance(node, cst.With) and any(
                self.ctx.resolve_call(item.item) in _CUDA_GRAPH_CAPTURE for item in node.items
            ):
                return True
        return False


@functools.cache
def _equal() -> cst.AssignEqual:  # ``=`` without spaces; a function: a libcst node at import loads libcst
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _is_grad_attribute(node: cst.BaseExpression) -> bool:
    """``<x>.grad`` or ``<x>.grad.data``."""
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == "grad"


def _loop_replacement(loop: cst.For, variable: str, version: Tuple[int, int]) -> Optional[str]:
    """``model.zero_grad()`` for exactly ``for p in model.parameters(): [if p.grad is not None:]
    p.grad.zero_()`` (optionally with ``p.grad.detach_()`` / ``requires_grad_(False)`` first)."""
    if version < SET_TO_NONE_ADDED or loop.orelse is not None or loop.asynchronous is not None:
        return None
    iterable = loop.iter
    target = method_call(iterable)
    if target is None or target[1] != "parameters" or iterable.args:
        return None
    body = _statements(loop.body)
    if len(body) == 1 and isinstance(body[0], cst.If) and body[0].orelse is None and _is_grad_not_none(body[0].test, variable):
        body = _statements(body[0].body)
    if not body or not all(_is_grad_reset(stmt, variable) for stmt in body):
        return None
    owner = cst.Module([]).code_for_node(target[0])
    argument = "" if version >= SET_TO_NONE_DEFAULT else "set_to_none=True"
    return f"{owner}.zero_grad({argument})"


def _statements(block: cst.BaseSuite) -> list:
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    out = []
    for stmt in block.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(stmt.body)
        else:
            out.append(stmt)
    return out


def _is_grad_not_none(test: cst.BaseExpression, variable: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and _is_grad_of(test.left, variable)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and literal_value(test.comparisons[0].comparator) is None
    )


def _is_grad_of(node: cst.BaseExpression, variable: str) -> bool:
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        node = node.value
    return (
        isinstance(node, cst.Attribute)
        and node.attr.value == "grad"
        and isinstance(node.value, cst.Name)
        and node.value.value == variable
    )


def _is_grad_reset(stmt: cst.CSTNode, variable: str) -> bool:
    """``p.grad.zero_()``, ``p.grad.detach_()`` or ``p.grad.requires_grad_(False)`` (what
    ``Optimizer.zero_grad(set_to_none=False)`` does)."""
    if not isinstance(stmt, cst.Expr):
        return False
    target = method_call(stmt.value)
    if target is None or not _is_grad_of(target[0], variable):
        return False
    if target[1] in ("zero_", "detach_"):
        return not stmt.value.args
    return target[1] == "requires_grad_" and len(stmt.value.args) == 1 and literal_value(stmt.value.args[0].value) is False


RULES = [ZeroGradSetToNone]
