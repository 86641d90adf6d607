"""TL402, TL403, TL405, TL406: the shape of training and evaluation loops.

Each rule looks at a loop's own body (not nested functions; nested loops where said) through
one walk that records, for every node, the ``if`` tests above it and whether gradients are off
there (``with torch.no_grad()``), and asks the semantic model where names and values come from.
What cannot be seen (a helper of another file handed the optimizer, a caller's context) keeps
the rules silent.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import INSERT_BEFORE, REPLACE, FixSpec, NodeEdit
from torchlint.diagnostics import UNSAFE
from torchlint.heuristics import is_loader_expression, is_optimizer_like
from torchlint.imports import dotted_name
from torchlint.loops import calls_gradient_step, grad_disabled
from torchlint.rules.base import GAP, Rule, gated, mentions_loader
from torchlint.semantic import ASSIGN, AUGMENT, DEF, LOOP, PARAM
from torchlint.syntax import (
    bound_names, enclosing_function, enclosing_loops, loop_types, memo, method_call, name_tokens, scope_types,
)
from torchlint.tree import _children, walk
from torchlint.words import ACCUMULATION_WORDS, EVAL_WORDS, GRAD_NEEDING_WORDS, MODEL_WORDS

GRAD_OFF = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode", "torch.autograd.no_grad",
    # MONAI's `with eval_mode(net):` sets eval mode and enters torch.no_grad()
    "monai.networks.eval_mode", "monai.networks.utils.eval_mode",
})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                              "torch.autograd.grad_mode.set_grad_enabled"})
DDP = "torch.nn.parallel.DistributedDataParallel"

_BACKWARD = re.compile(rf"\.{GAP}backward{GAP}\(")
_STEP = re.compile(rf"\.{GAP}step{GAP}\(")
# `model.eval()`, `model.train(False)`
_EVAL_MODE = re.compile(rf"\.{GAP}(?:eval{GAP}\({GAP}\)|train{GAP}\({GAP}False)")
# the same, as ``requires`` tokens: the regex only where the word is
_BACKWARD_TOKEN = gated(_BACKWARD, "backward")
_STEP_TOKEN = gated(_STEP, "step")
_EVAL_MODE_TOKEN = gated(_EVAL_MODE, "eval", "train")


def _mentions_evaluation(text: str) -> bool:
    """Prefilter token: ``eval``, ``val``, ``test``, ``predict`` or ``infer`` in any case (the
    rule compares lower-cased names with its evaluation words)."""
    lower = text.lower()
    return any(word in lower for word in ("val", "test", "predict", "infer"))  # `eval` holds `val`


# -- one walk of a loop body -------------------------------------------------------------------

class Site:
    """A node in a loop body with what is above it there."""

    __slots__ = ("node", "guards", "grad_off", "depth")

    def __init__(self, node, guards, grad_off, depth):
        self.node = node
        #: the ``if`` tests (either branch) between the loop body and the node
        self.guards: Tuple[cst.BaseExpression, ...] = guards
        #: under ``with torch.no_grad()``/``inference_mode()``/``set_grad_enabled(...)`` in the loop
        self.grad_off: bool = grad_off
        #: how many loops deeper than the loop's own body
        self.depth: int = depth


def loop_sites(ctx, loop: cst.CSTNode) -> List[Site]:
    """Every node of the loop's body and nested loops' bodies, not inside nested functions,
    classes or lambdas; memoized per loop."""
    def compute():
        sites: List[Site] = []
        stack = [(child, (), False, 0) for child in reversed(_children(loop.body))]
        semantic = ctx.semantic
        # exact types: a failed isinstance of a libcst node class (an ABC) is a Python call
        scopes, loops, if_kinds = scope_types(), loop_types(), (cst.If, cst.IfExp)
        while stack:
            node, guards, grad_off, depth = stack.pop()
            sites.append(Site(node, guards, grad_off, depth))
            kind = type(node)
            if kind in scopes:
                continue
            if kind in if_kinds:
                inner = guards + (node.test,)
                for child in reversed(_children(node)):
                    stack.append((child, guards if child is node.test else inner, grad_off, depth))
                continue
            if kind is cst.With:
                off = grad_off or any(_turns_grad_off(semantic, item.item) for item in node.items)
                for child in reversed(_children(node)):
                    stack.append((child, guards, off if child is node.body else grad_off, depth))
                continue
            inner_depth = depth + 1 if kind in loops else depth
            for child in reversed(_children(node)):
                stack.append((child, guards, grad_off, inner_depth if child is getattr(node, "body", None) else depth))
        return sites

    return memo(ctx, "loop_sites", loop, compute)


def _turns_grad_off(semantic, item: cst.BaseExpression) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(<not True>)``."""
    if not isinstance(item, cst.Call):
        return False
    name = semantic.resolve_call(item)
    if name in GRAD_OFF:
        return True
    if name in SET_GRAD_ENABLED:
        return not (item.args and isinstance(item.args[0].value, cst.Name) and item.args[0].value.value == "True")
    return False


def backward_calls(ctx, loop) -> List[Site]:
    """``x.backward()``, ``accelerator.backward(loss)``, ``self.manual_backward(loss)``,
    ``torch.autograd.backward(t)`` in the loop's own body (not nested loops)."""
    def compute():
        found = []
        for site in loop_sites(ctx, loop):
            if site.depth == 0 and isinstance(site.node, cst.Call) and _is_backward(ctx, site.node):
                found.append(site)
        return found

    return memo(ctx, "backward_calls", loop, compute)


def _is_backward(ctx, call: cst.Call) -> bool:
    """A backward pass that adds into ``.grad``. Distributed autograd's
    ``dist_autograd.backward(context_id, [loss])`` is not one: its gradients live in the
    context, one per iteration, and ``DistributedOptimizer.step(context_id)`` reads them there."""
    method = method_call(call)
    if method is not None and method[1] in ("backward", "manual_backward"):
        return not (ctx.semantic.resolve_call(call) or "").startswith("torch.distributed.")
    return ctx.semantic.resolve_call(call) == "torch.autograd.backward"


def optimizer_steps(ctx, loop, through_helpers: bool = False) -> List[Tuple[Site, Optional[cst.BaseExpression]]]:
    """(site, optimizer) of ``optimizer.step()`` / ``scaler.step(optimizer)`` in the loop's own
    body; with ``through_helpers`` also (site, None) of calls of this file's functions that step
    (``self.optimizer_step()``)."""
    def compute():
        found = []
        for site in loop_sites(ctx, loop):
            if site.depth or not isinstance(site.node, cst.Call):
                continue
            method = method_call(site.node)
            if through_helpers and isinstance(site.node.func, (cst.Name, cst.Attribute)):
                function = ctx.semantic.module_function(site.node.func)
                if function is not None and _steps_optimizer(ctx, function):
                    found.append((site, None))
                    continue
            if method is None or method[1] != "step" or not is_optimizer_like(method[0]):
                continue
            receiver = method[0]
            if "scaler" in (dotted_name(receiver) or "").lower() and site.node.args:
                receiver = site.node.args[0].value  # scaler.step(optimizer)
            found.append((site, receiver))
        return found

    return memo(ctx, f"optimizer_steps_{through_helpers}", loop, compute)


def _steps_optimizer(ctx, function) -> bool:
    def compute():
        for node in walk(function.body, scope_types()):
            method = method_call(node)
            if method is not None and method[1] == "step" and is_optimizer_like(method[0]):
                return True
        return False

    return memo(ctx, "steps_optimizer", function, compute)


def _controls_sync(ctx, scope) -> bool:
    """Does ``scope`` (the class, else the function, else the module around the loop) decide
    when DDP synchronises: ``model.no_sync()``, ``accelerator.accumulate(model)``/``no_sync``,
    ``require_backward_grad_sync``?"""
    def compute():
        for node in walk(scope):
            if isinstance(node, cst.Name) and node.value in ("no_sync", "require_backward_grad_sync"):
                return True
            method = method_call(node)
            if method is not None and method[1] == "accumulate":
                return True
        return False

    return memo(ctx, "controls_sync", scope, compute)


def is_accumulation_guard(test: cst.BaseExpression) -> bool:
    """``(i + 1) % accum_steps == 0``, ``if should_sync:``, ``if step_is_accumulating``..."""
    for node in walk(test):
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            return True
        if isinstance(node, (cst.Name, cst.Attribute)) and set(name_tokens(node)) & ACCUMULATION_WORDS:
            return True
    return False


def _inside(binding, loop) -> bool:
    return any(block is loop.body for block in binding.blocks)


def _scope_of(ctx) -> cst.CSTNode:
    return enclosing_function(ctx) or ctx.module


def _mentions(root: cst.CSTNode, names: frozenset) -> bool:
    """Does any name or attribute under ``root`` (nested functions included) spell one of ``names``?"""
    for node in walk(root):
        if isinstance(node, cst.Name) and node.value in names:
            return True
    return False


# -- fix helpers -------------------------------------------------------------------------------

def statement_in_block(block: cst.BaseSuite, target: cst.CSTNode,
                       default_indent: str = "    ") -> Optional[Tuple[cst.CSTNode, str]]:
    """(the innermost statement holding ``target`` that sits in an indented block at or under
    ``block``, the indentation of that statement relative to ``block``'s owner); None when
    ``target`` is not under ``block`` or sits in a nested function, class or lambda."""
    def search(suite, indent: str):
        if not isinstance(suite, cst.IndentedBlock):
            return None
        inner = indent + (suite.indent if suite.indent is not None else default_indent)
        for statement in suite.body:
            if statement is target or any(n is target for n in walk(statement, scope_types())):
                if isinstance(statement, cst.BaseCompoundStatement) and not isinstance(statement, scope_types()):
                    for child in _suites(statement):
                        deeper = search(child, inner)
                        if deeper is not None:
                            return deeper
                return (statement, inner) if not isinstance(statement, scope_types()) else None
        return None

    return search(block, "")


def _suites(statement: cst.BaseCompoundStatement) -> Iterator[cst.BaseSuite]:
    """The blocks of a compound statement: body, ``else``/``elif``, handlers, ``finally``."""
    yield statement.body
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        yield orelse.body
        orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None
    for handler in getattr(statement, "handlers", ()):
        yield handler.body
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield final.body


def replace_statement(ctx, statement: cst.BaseCompoundStatement, new: cst.BaseCompoundStatement) -> Optional[NodeEdit]:
    """An edit replacing the compound ``statement`` (in an indented block around the node being
    visited, or the one visited) with ``new``, printed at its indentation. The statement's range
    runs from its keyword to the end of its last line's code: the comment lines above it, the
    last line's trailing comment and the comment lines after it stay where they are, so ``new``
    is printed without them. None for a statement whose last block cannot be told."""
    from torchlint.context import render_node

    new = _without_tail(new.with_changes(leading_lines=()))
    if new is None:
        return None
    indent = ctx.indentation(upto=statement) if any(a is statement for a in ctx.ancestors) else ctx.indentation()
    code = render_node(ctx.module, new, indent)
    return NodeEdit(statement, code[len("".join(indent)):].rstrip("\r\n"), REPLACE)


def wrap_in_with(ctx, statement: cst.BaseCompoundStatement, item: str) -> Optional[NodeEdit]:
    """An edit putting ``statement`` under ``with <item>:``, one level deeper."""
    wrapped = cst.With(items=[cst.WithItem(item=cst.parse_expression(item))],
                       body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]))
    return replace_statement(ctx, statement, wrapped)


def _without_tail(statement):
    """``statement`` without its last line's trailing comment and the comment lines that end its
    last blocks (what lies after its range); None for a statement kind not handled."""
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.with_changes(trailing_whitespace=cst.TrailingWhitespace())
    if isinstance(statement, cst.Try):
        if statement.finalbody is not None:
            return _with_suite(statement, "finalbody", statement.finalbody)
        if statement.orelse is not None:
            return _with_suite(statement, "orelse", statement.orelse)
        handlers = list(statement.handlers)
        last = _suite_without_tail(handlers[-1].body)
        if last is None:
            return None
        handlers[-1] = handlers[-1].with_changes(body=last)
        return statement.with_changes(handlers=handlers)
    if isinstance(statement, (cst.For, cst.While, cst.If)) and statement.orelse is not None:
        if isinstance(statement.orelse, cst.If):
            inner = _without_tail(statement.orelse)
            return None if inner is None else statement.with_changes(orelse=inner)
        return _with_suite(statement, "orelse", statement.orelse)
    if isinstance(statement, (cst.For, cst.While, cst.If, cst.With, cst.FunctionDef, cst.ClassDef)):
        body = _suite_without_tail(statement.body)
        return None if body is None else statement.with_changes(body=body)
    return None


def _with_suite(statement, field: str, clause):
    """``statement`` whose ``field`` clause (``else:``/``finally:``) loses its tail."""
    body = _suite_without_tail(clause.body)
    return None if body is None else statement.with_changes(**{field: clause.with_changes(body=body)})


def _suite_without_tail(suite):
    if isinstance(suite, cst.SimpleStatementSuite):
        return suite.with_changes(trailing_whitespace=cst.TrailingWhitespace())
    if not isinstance(suite, cst.IndentedBlock) or not suite.body:
        return None
    last = _without_tail(suite.body[-1])
    return None if last is None else suite.with_changes(body=[*suite.body[:-1], last], footer=())


_HOST_METHODS = frozenset({"item", "tolist", "numpy"})
_HOST_BUILTINS = frozenset({"float", "int", "bool", "len", "str", "round"})
_HARMLESS_BUILTINS = frozenset({"print", "len", "float", "int", "bool", "str", "round", "range", "enumerate",
                                "zip", "isinstance", "min", "max", "abs", "format"})


def _host_value(node: Optional[cst.BaseExpression]) -> bool:
    """A Python number or string made on the host: ``t.item()``, ``t.tolist()``,
    ``float(t)``, literals, and arithmetic of those."""
    if node is None:
        return False
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString, cst.Name)):
        return not isinstance(node, cst.Name) or node.value in ("True", "False", "None")
    if isinstance(node, cst.BinaryOperation):
        return _host_value(node.left) and _host_value(node.right)
    if isinstance(node, cst.UnaryOperation):
        return _host_value(node.expression)
    if isinstance(node, cst.Call):
        method = method_call(node)
        if method is not None and method[1] in _HOST_METHODS:
            return True
        return isinstance(node.func, cst.Name) and node.func.value in _HOST_BUILTINS
    return False


def _tensor_escapes(ctx, loop: cst.For, scope: cst.CSTNode) -> bool:
    """Could a tensor made in the loop be used after it (where an inference-mode tensor would
    fail in autograd)? True unless every value the loop's body keeps is a host value: names it
    binds or fills (``append``) that are read outside the loop hold only ``.item()``-style
    values; no attribute or item is assigned, no ``return``/``yield`` hands a value out, and no
    call other than the model's, torch's and harmless builtins is handed a value."""
    semantic = ctx.semantic
    kept: Dict[str, List[Optional[cst.BaseExpression]]] = {}
    for site in loop_sites(ctx, loop):
        node = site.node
        if isinstance(node, (cst.Return, cst.Yield, cst.Await, cst.Global, cst.Nonlocal)):
            return True
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Name):
                    kept.setdefault(target.value, []).append(node.value)
                elif isinstance(target, (cst.Tuple, cst.List)) and all(
                        isinstance(e.value, cst.Name) for e in target.elements):
                    for name in bound_names(target):
                        kept.setdefault(name, []).append(None)
                else:
                    return True  # self.x = out, cache[k] = out
        elif isinstance(node, (cst.For, cst.NamedExpr)) or isinstance(node, cst.WithItem) and node.asname:
            for name in bound_names(node.target if not isinstance(node, cst.WithItem) else node.asname.name):
                kept.setdefault(name, []).append(None)
        elif isinstance(node, cst.Call) and node.args:
            method = method_call(node)
            if method is not None and isinstance(method[0], cst.Name) and method[1] in ("append", "extend", "add", "insert"):
                kept.setdefault(method[0].value, []).append(node.args[-1].value)
                continue
            if method is not None and isinstance(method[0], cst.Name) and method[0].value in kept:
                continue  # a method of a value made in this iteration
            if semantic.resolve_call(node) is not None and (semantic.resolve_call(node) or "").startswith("torch."):
                continue
            if isinstance(node.func, cst.Name) and node.func.value in _HARMLESS_BUILTINS and semantic.lookup(node.func) is None:
                continue
            if method is not None and not isinstance(method[0], cst.Name):
                continue  # a method of an expression: `out.argmax(1).eq(y)`
            if method is not None and method[0].value not in kept and semantic.lookup(method[0]) is not None and all(
                    b.kind == LOOP and b.statement is loop for b in semantic.lookup(method[0]) or []):
                continue  # a method of what the loader yielded: `x.to(device)`
            if isinstance(node.func, (cst.Name, cst.Attribute)) and semantic.resolve_call(node) is None and not method:
                continue  # model(x): calling the model is what the loop is for
            if method is not None and method[1] == "forward":
                continue
            return True
    if not kept:
        return False
    inside = {id(n) for n in walk(loop)}
    for node in walk(scope):
        if isinstance(node, cst.Name) and node.value in kept and id(node) not in inside:
            if not all(_host_value(v) for v in kept[node.value]):
                return True
    return False


# -- TL406 -------------------------------------------------------------------------------------

_RESET_METHODS = frozenset({"zero_", "detach_", "requires_grad_"})


class MissingZeroGrad(Rule):
    """Flags a loop that calls ``backward()`` and ``optimizer.step()`` on every iteration with no
    gradient reset anywhere on the path: the function holding the loop (closures included) and
    the functions of this file it calls never call ``zero_grad()``, assign ``p.grad = None``,
    ``p.grad.zero_()`` or say ``zero_grad`` at all. Silent when the step is under an ``if`` (an
    accumulation guard), when the optimizer or the model is rebuilt inside the loop, and when the
    loop hands the optimizer or the model to a function it cannot see (it may reset them).
    """

    code = "TL406"
    statement_local = False  # reads functions of the same file it calls
    preview = True  # too few findings on real code yet to show its precision
    name = "missing-zero-grad"
    summary = "A training loop steps the optimizer every iteration but never resets the gradients."
    message = (
        "This loop never resets the gradients; call `{owner}.zero_grad()` once per step"
    )
    hint = "Each step adds its gradients to the previous ones; reset them once per step, before `backward()`."
    requires = ((_BACKWARD_TOKEN,), (_STEP_TOKEN,))
    ast_candidate = staticmethod(lambda index: index.backward_calls() and bool(index.method_calls("step")))
    # a loop is looked at for its own backward: where one is (what it reads elsewhere, the
    # helpers it calls and a module-level loop's whole module, it reads through ctx)
    walk_candidate = staticmethod(lambda index: index.backward_calls())
    tags = ("correctness",)
    fix_applicability = UNSAFE

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def _check(self, loop) -> None:
        if not any(not s.guards for s in backward_calls(self.ctx, loop)):
            return
        steps = [(site, opt) for site, opt in optimizer_steps(self.ctx, loop) if not site.guards]
        if not steps:
            return
        scope = _scope_of(self.ctx)
        if _resets_gradients(self.ctx, scope, 0):
            return
        optimizer = dotted_name(steps[0][1])
        if optimizer is None or self._rebuilt_or_handed_off(loop, optimizer):
            return
        site = steps[0][0]
        step = self.ctx.module.code_for_node(site.node.func) + "()"
        self.report(site.node, self.message.format(owner=optimizer), self._fix(loop, optimizer), hint=(
            f"It calls `backward()` and `{step}` every iteration, so each step adds to the previous "
            "gradients; reset them before `backward()`."))

    def _fix(self, loop, optimizer: str) -> Optional[FixSpec]:
        """``optimizer.zero_grad()`` on a line of its own before the statement of the loop body
        that holds the first backward run every iteration (before the ``with autocast():`` block
        that holds it, when the backward is a one-line suite there)."""
        backward = next(s.node for s in backward_calls(self.ctx, loop) if not s.guards)
        found = statement_in_block(loop.body, backward, self.ctx.module.default_indent)
        if found is None:
            return None
        statement, indent = found
        base = "".join(self.ctx.indentation())  # the loop's own indentation
        edit = NodeEdit(statement, f"{optimizer}.zero_grad()\n{base}{indent}", INSERT_BEFORE)
        return FixSpec(UNSAFE, f"Call `{optimizer}.zero_grad()` before `backward()`", (edit,))

    def _rebuilt_or_handed_off(self, loop, optimizer: str) -> bool:
        semantic = self.ctx.semantic
        models: Set[str] = set()
        for site in loop_sites(self.ctx, loop):
            node = site.node
            if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
                name = dotted_name(node.func)
                if name and semantic.resolve_call(node) is None and not isinstance(node.func, cst.Attribute) or (
                        isinstance(node.func, cst.Attribute) and name and name.startswith("self.") and name.count(".") == 1):
                    models.add(name)  # model(x), self.model(x): objects of this program called
        watched = models | {optimizer}
        for site in loop_sites(self.ctx, loop):
            node = site.node
            if isinstance(node, cst.Assign) and any(dotted_name(t.target) in watched for t in node.targets):
                return True  # a fresh optimizer (or model) each iteration
            if not isinstance(node, cst.Call):
                continue
            handed = [a for a in node.args if dotted_name(a.value) in watched]
            if not handed:
                continue
            method = method_call(node)
            if method is not None and method[1] in ("step", "unscale_", "update", "backward", "scale"):
                continue  # scaler.step(optimizer), ema.update(model)
            if semantic.resolve_call(node) is not None and (semantic.resolve_call(node) or "").startswith("torch."):
                continue
            function = semantic.module_function(node.func) if isinstance(node.func, (cst.Name, cst.Attribute)) else None
            if function is None or _resets_gradients(self.ctx, function, 1):
                return True  # a helper we cannot see, or one that resets them
        return False


def _resets_gradients(ctx, scope: cst.CSTNode, depth: int) -> bool:
    """Does ``scope`` (nested functions included), or a function of this file it calls, reset
    gradients: ``zero_grad`` named anywhere, ``x.grad = ...``, ``del x.grad``,
    ``x.grad.zero_()``/``detach_()``/``requires_grad_()``?"""
    def compute():
        called = []
        for node in walk(scope):
            if isinstance(node, cst.Name) and node.value in ("zero_grad", "set_to_none"):
                return True
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
                targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign)
                           else [node.target])
                for target in targets:
                    for inner in walk(target):
                        if isinstance(inner, cst.Attribute) and inner.attr.value == "grad":
                            return True
            method = method_call(node)
            if method is not None:
                receiver = method[0]
                if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                    receiver = receiver.value
                if method[1] in _RESET_METHODS and isinstance(receiver, cst.Attribute) and receiver.attr.value == "grad":
                    return True
            if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
                called.append(node.func)
        if depth >= 3:
            return False
        for func in called:
            function = ctx.semantic.module_function(func)
            if function is not None and function is not scope and _resets_gradients(ctx, function, depth + 1):
                return True
        return False

    return memo(ctx, f"resets_gradients_{depth}", scope, compute)


# -- TL403 -------------------------------------------------------------------------------------

class DdpNoSync(Rule):
    """Flags gradient accumulation with a ``DistributedDataParallel`` model that all-reduces on
    every micro-step: the loop calls ``backward()`` on every iteration and ``optimizer.step()``
    only under an accumulation guard (``if (i + 1) % accum == 0``), the model called in the loop
    is (or, when it cannot be seen, the file builds) a ``DistributedDataParallel``, and nothing
    in the function mentions ``no_sync``, ``accumulate`` (accelerate) or
    ``require_backward_grad_sync``.
    """

    code = "TL403"
    statement_local = False  # reads helpers of the same file that step
    name = "ddp-no-sync"
    summary = "Gradient accumulation with DDP without `no_sync()`: an all-reduce on every micro-step."
    message = (
        "DDP all-reduces on every micro-step; run the non-final ones under `with model.no_sync():`"
    )
    hint = (
        "`backward()` runs every micro-step but the optimizer steps only under an accumulation guard, "
        "and DistributedDataParallel all-reduces the gradients on every `backward()` "
        "(accelerate's `accelerator.accumulate(model)` skips the extra ones too)."
    )
    # a DDP model, or one accelerate's `accelerator.prepare(...)` wraps on several processes
    requires = (("DistributedDataParallel", "prepare"), (_BACKWARD_TOKEN,))
    ast_candidate = staticmethod(lambda index: index.mentions("DistributedDataParallel", "prepare")
                                 and index.backward_calls())
    # ... or a file of a program that builds a DDP model elsewhere (``FileFacts.ddp_program``)
    uses_project = True
    project_requires = ((_BACKWARD_TOKEN,),)
    walk_candidate = staticmethod(lambda index: index.backward_calls())  # a loop is looked at for its own backward
    tags = ("performance", "distributed")
    fix_applicability = UNSAFE

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def _check(self, loop) -> None:
        backwards = [s for s in backward_calls(self.ctx, loop) if not any(map(is_accumulation_guard, s.guards))]
        if not backwards:
            return
        steps = optimizer_steps(self.ctx, loop, through_helpers=True)
        if not steps:
            if not self._micro_batch_loop(loop):
                return
        elif not all(any(map(is_accumulation_guard, site.guards)) for site, _ in steps):
            return
        scope = self.ctx.enclosing(cst.ClassDef) or _scope_of(self.ctx)
        if _controls_sync(self.ctx, scope):
            return
        models: List[cst.BaseExpression] = []
        if not self._ddp_model_in(loop, models):
            return
        fix = self._fix(loop, backwards[0], steps, models) if steps else None
        self.report(backwards[0].node, None if fix else self._no_fix_message, fix, hint=None if steps else (
            "`backward()` runs on every micro-batch and the optimizer steps once they are done, and "
            "DistributedDataParallel all-reduces the gradients on every `backward()`: only the last "
            "micro-batch needs it (with accelerate: `accelerator.no_sync(model)` or "
            "`accelerator.accumulate(model)`)."))

    def _micro_batch_loop(self, loop) -> bool:
        """A loop that backpropagates every iteration and takes no optimizer step itself is
        gradient accumulation over its iterations when the step follows it: an optimizer step
        after the loop in the enclosing loop's body or the function's (``for chunk in
        batch.split(m): ...backward()`` then ``optimizer.step()``), or its iterable names
        micro-batches (``split_microbatches(...)``, ``range(0, n, self.microbatch)``: a helper
        whose caller steps once it returns; issue 29, class 3)."""
        if isinstance(loop, cst.For):
            if any(isinstance(n, (cst.Name, cst.Attribute)) and set(name_tokens(n)) & _MICRO_BATCH_WORDS
                   for n in walk(loop.iter)):
                return True
            iterable = loop.iter
            while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.args \
                    and iterable.func.value in ("enumerate", "zip", "list", "tuple"):
                iterable = iterable.args[0].value
            if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) \
                    and iterable.func.attr.value in _SPLITTING:
                return True  # batch.split(m), torch.chunk(x, n)
        outer = next((o for o in enclosing_loops(self.ctx) if o is not loop), None)
        after = outer.body if outer is not None else _scope_of(self.ctx)
        passed = False  # only a step after the loop, in the text's order
        inside: Set[int] = set()
        for node in walk(after, scope_types()):
            if node is loop:
                passed = True
                inside = {id(n) for n in walk(loop)}
                continue
            if not passed or not isinstance(node, cst.Call) or id(node) in inside:
                continue
            method = method_call(node)
            if method is not None and method[1] == "step" and is_optimizer_like(method[0]):
                return True
        return False

    _no_fix_message = (
        "DDP all-reduces on every micro-step; run the non-final forward/backward under `model.no_sync()`"
    )

    def _fix(self, loop, backward: Site, steps, models) -> Optional[FixSpec]:
        """The loop body's statements from the first that calls the DDP model to the one that
        holds the backward go under ``with contextlib.nullcontext() if <the step's guard> else
        model.no_sync():``. Only where the model is certainly the DDP object (every binding a
        ``DistributedDataParallel(...)``), the step sits under an ``if`` of the loop body after
        the backward, and that ``if``'s test can be read earlier: no call but ``len``, and
        nothing between reassigns what it reads."""
        body = loop.body
        if not isinstance(body, cst.IndentedBlock) or not models:
            return None
        statements = list(body.body)

        def top(target) -> Optional[int]:
            return next((i for i, s in enumerate(statements) if s is target or any(n is target for n in walk(s))), None)

        last = top(backward.node)
        guard_index = top(steps[0][0].node)
        if last is None or guard_index is None or guard_index <= last:
            return None
        guard = statements[guard_index]
        if not isinstance(guard, cst.If) or not is_accumulation_guard(guard.test) or not any(
                n is steps[0][0].node for n in walk(guard.body)):
            return None
        names = {dotted_name(m) for m in models}
        first = next((i for i in range(last + 1) if any(
            isinstance(n, cst.Call) and dotted_name(n.func) in names for n in walk(statements[i]))), None)
        if first is None or not _readable_early(guard.test, statements[first:guard_index]):
            return None
        if any(isinstance(n, (cst.Yield, cst.Await)) for s in statements[first:last + 1] for n in walk(s, scope_types())):
            return None  # a suspended generator would leave the context entered
        model = next(m for m in models if any(
            isinstance(n, cst.Call) and n.func is m for s in statements[first:last + 1] for n in walk(s)))
        import_edit, contextlib_name = self.ctx.import_edit("contextlib")
        test = self.ctx.module.code_for_node(guard.test.with_changes(lpar=(), rpar=()) if isinstance(
            guard.test, cst.BaseExpression) else guard.test)
        if isinstance(guard.test, (cst.IfExp, cst.Lambda)):
            test = f"({test})"
        item = f"{contextlib_name}.nullcontext() if {test} else {dotted_name(model)}.no_sync()"
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.parse_expression(item))],
            body=cst.IndentedBlock(body=[statements[first].with_changes(leading_lines=()), *statements[first + 1:last + 1]]),
            leading_lines=statements[first].leading_lines,
        )
        new_loop = loop.with_changes(body=body.with_changes(
            body=[*statements[:first], wrapped, *statements[last + 1:]]))
        edit = replace_statement(self.ctx, loop, new_loop)
        if edit is None:
            return None
        edits = (edit,) if import_edit is None else (import_edit, edit)
        return FixSpec(UNSAFE, f"Run the non-final micro-steps under `{dotted_name(model)}.no_sync()`", edits)

    def _ddp_model_in(self, loop, certain: Optional[List[cst.BaseExpression]] = None) -> bool:
        """Is an object called in the loop bound to ``DistributedDataParallel(...)``? When the
        objects it calls cannot be seen (parameters) and none is a module built here without
        DDP, does the file build a DDP model? ``certain`` gets the callees whose every binding
        is a DDP."""
        semantic = self.ctx.semantic
        unknown = plain = False
        for site in loop_sites(self.ctx, loop):
            node = site.node
            if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
                continue
            if semantic.resolve_call(node) is not None or isinstance(node.func, cst.Attribute) and not (
                    isinstance(node.func.value, cst.Name) and node.func.value.value in ("self",)):
                continue
            if _prepared_by_accelerator(semantic, node.func):
                return True  # accelerate wraps it in DDP on several processes
            values = semantic.values_of(node.func)
            if values is None:
                unknown = True
                continue
            if any(isinstance(v, cst.Call) and semantic.resolve_call(v) == DDP for v in values):
                if certain is not None and all(isinstance(v, cst.Call) and semantic.resolve_call(v) == DDP for v in values):
                    certain.append(node.func)
                return True
            if values and all(isinstance(v, cst.Call) for v in values):
                plain = True  # a module built here without DDP
            elif values:
                unknown = True  # `self.model = model`: handed in, as a parameter is
        return unknown and not plain and _file_builds_ddp(self.ctx)


# Words of an iterable of micro-batches (TL403).
_MICRO_BATCH_WORDS = frozenset({"micro", "microbatch", "microbatches", "micro_batch", "micro_batches"})
# ... and the calls that cut a batch into them
_SPLITTING = frozenset({"split", "chunk", "tensor_split"})


def _prepared_by_accelerator(semantic, func: cst.BaseExpression) -> bool:
    """Is ``model`` / ``self.model`` bound (in some binding) from accelerate's
    ``accelerator.prepare(...)`` (``self.model, self.opt = self.accelerator.prepare(self.model,
    self.opt)``)? Launched on several processes, that is a ``DistributedDataParallel``."""
    if isinstance(func, cst.Name):
        bindings = semantic.lookup(func) or []
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        bindings = semantic.attribute_bindings(func, func.attr.value)
    else:
        return False
    for binding in bindings:
        statement = binding.statement
        value = getattr(statement, "value", None)
        if not isinstance(statement, cst.Assign) or not isinstance(value, cst.Call):
            continue
        method = method_call(value)
        if method is not None and method[1] == "prepare" and "accelerator" in name_tokens(method[0]):
            return True
    return False


def _readable_early(test: cst.BaseExpression, between: List[cst.CSTNode]) -> bool:
    """Can ``test`` be evaluated before ``between`` runs and give the same answer: it calls
    nothing but ``len``, and no statement of ``between`` assigns a name or attribute it reads?"""
    read = set()
    for node in walk(test):
        if isinstance(node, cst.Call) and not (isinstance(node.func, cst.Name) and node.func.value == "len"):
            return False
        if isinstance(node, (cst.NamedExpr, cst.Await, cst.Yield)):
            return False
        if isinstance(node, cst.Name):
            read.add(node.value)
        if isinstance(node, cst.Attribute) and dotted_name(node):
            read.add(dotted_name(node))
    for statement in between:
        for node in walk(statement):
            targets: List[cst.CSTNode] = []
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
                targets = [node.target]
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                targets = [node.asname.name]
            for target in targets:
                for inner in walk(target):
                    if isinstance(inner, (cst.Name, cst.Attribute)) and dotted_name(inner) in read:
                        return False
    return True


def _file_builds_ddp(ctx) -> bool:
    """Does the file, or (per the project index) a program it is part of, build a DDP model?"""
    def compute():
        return any(isinstance(n, cst.Call) and ctx.semantic.resolve_call(n) == DDP for n in walk(ctx.module))

    project = ctx.project
    return memo(ctx, "file_builds_ddp", ctx.module, compute) or bool(project is not None and project.ddp_program)


# -- TL405 -------------------------------------------------------------------------------------

_DETACHING = frozenset({"item", "detach", "tolist", "numpy", "detach_"})
_GRAPH_METHODS = frozenset({"mean", "sum", "clone", "cpu", "cuda", "to", "float", "double", "half", "bfloat16",
                            "squeeze", "unsqueeze", "view", "reshape", "flatten", "abs", "sqrt", "exp", "log",
                            "pow", "mul", "add", "div", "sub", "norm", "contiguous", "nanmean", "nansum",
                            "permute", "transpose"})
_LIST_FACTORIES = frozenset({"list", "collections.deque", "deque"})
_DICT_FACTORIES = frozenset({"dict", "collections.defaultdict", "defaultdict", "collections.OrderedDict", "OrderedDict"})


class RetainedGraph(Rule):
    """Flags a value that carries an autograd graph kept past its step: appended to a list,
    added into an accumulator or stored in a dict that the training loop did not create
    (``losses.append(loss)``, ``running += loss``, ``history[k] = out``). A value carries a graph
    when it is what the loop backpropagates (``loss`` of ``loss.backward()``), arithmetic on it
    or a model output that feeds it, and no ``.item()``/``.detach()`` intervenes. Silent under
    ``no_grad``, when the loop rebinds the accumulator (a fresh one each step), and when the
    accumulated value is itself backpropagated in the loop (a loss summed over heads).
    """

    code = "TL405"
    statement_local = False  # reads helpers of the same file that step
    reads_by_name = True  # those helpers by the names its loops call
    name = "retained-graph"
    summary = "A graph-carrying tensor is kept across training steps, so every step's autograd graph stays alive."
    message = (
        "`{value}` kept in `{acc}` holds each step's graph; store `.detach()` or `.item()`"
    )
    hint = "The container outlives the step, so every step's autograd graph stays alive and memory grows."
    requires = ((_BACKWARD_TOKEN,),)
    ast_candidate = staticmethod(lambda index: index.backward_calls())
    walk_candidate = ast_candidate  # a loop is looked at for its own backward: where one is
    fix_applicability = UNSAFE
    tags = ("memory",)

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def _check(self, loop) -> None:
        if not backward_calls(self.ctx, loop) or grad_disabled(self.ctx):
            return
        backpropagated = self._backpropagated_names(loop)
        graph = self._graph_names(loop, backpropagated)
        feeding = self._feeding(loop, backpropagated)
        for site in loop_sites(self.ctx, loop):
            if site.grad_off or site.depth and self._nested_training_loop(loop, site):
                continue
            found = self._accumulation(site.node)
            if found is None:
                continue
            acc, value, check = found
            if acc.value in feeding or not self._outlives(loop, acc, check, site.node):
                continue
            if check == "dict" and isinstance(site.node, cst.Assign) and not self._key_varies(loop, site.node):
                continue  # `losses["d"] = d_loss`: overwritten every step, one graph held, not a history
            if self._fresh_each_step(loop, acc, check, site.node):
                continue
            if not self._carries_graph(value, graph):
                continue
            self._flag(acc, value)

    # -- the shapes of accumulation
    def _accumulation(self, node) -> Optional[Tuple[cst.Name, cst.BaseExpression, str]]:
        """(accumulator name, stored value, kind of container) for ``acc.append(v)``,
        ``acc[k].append(v)``, ``acc += v``, ``acc = acc + v``, ``acc[k] = v``."""
        if isinstance(node, cst.Call):
            method = method_call(node)
            if method is None or method[1] != "append" or len(node.args) != 1 or node.args[0].star:
                return None
            receiver = method[0]
            kind = "list"
            if isinstance(receiver, cst.Subscript):
                receiver, kind = receiver.value, "dict"
            return (receiver, node.args[0].value, kind) if isinstance(receiver, cst.Name) else None
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign) and isinstance(node.target, cst.Name):
            return node.target, node.value, "any"
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Name) and isinstance(node.value, cst.BinaryOperation) and isinstance(
                    node.value.operator, cst.Add):
                left, right = node.value.left, node.value.right
                if isinstance(left, cst.Name) and left.value == target.value:
                    return left, right, "read"
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                return target.value, node.value, "dict"
        return None

    def _key_varies(self, loop, store: cst.Assign) -> bool:
        """Does the key of ``acc[key] = value`` change from step to step: does it read the loop's
        own variables (``history[step]``), a counter the loop adds to (``i += 1``) or a name the
        loop derives from those? A constant key (``losses["d"]``), a name the loop does not
        change, or a key of a nested loop over a fixed set overwrites the same entries: a store,
        not a history."""
        varying = memo(self.ctx, "step_varying_names", loop, lambda: _step_varying_names(self.ctx, loop))
        target = store.targets[0].target
        if not isinstance(target, cst.Subscript):
            return False
        return any(isinstance(n, cst.Name) and n.value in varying for e in target.slice for n in walk(e))

    def _acc_bindings(self, acc: cst.Name, kind: str, statement: cst.CSTNode):
        semantic = self.ctx.semantic
        if kind == "any":  # `acc += v`: the target is a binding; ask its scope
            scope = semantic.scope_for(acc)
            return [b for b in (scope.bindings.get(acc.value, []) if scope else []) if b.kind != AUGMENT]
        return [b for b in semantic.lookup(acc) or [] if b.statement is not statement]

    def _fresh_each_step(self, loop, acc: cst.Name, kind: str, statement: cst.CSTNode) -> bool:
        """Is the accumulator bound afresh in the body of an enclosing loop that steps the
        optimizer itself? Then ``loop`` is gradient accumulation's micro-steps (``for group in
        groups: outputs = []; for batch in group: ...backward(); outputs.append(out)``, then
        ``optimizer.step()``, as AllenNLP's trainer does) and the container lives one optimizer
        step: what it keeps is bounded by the group, not by the run."""
        bindings = self._acc_bindings(acc, kind, statement)
        if not bindings:
            return False
        for outer in enclosing_loops(self.ctx):
            if outer is loop:
                continue
            if all(_inside(b, outer) for b in bindings):
                return bool(optimizer_steps(self.ctx, outer, through_helpers=True))
        return False

    def _outlives(self, loop, acc: cst.Name, kind: str, statement: cst.CSTNode) -> bool:
        """Is the accumulator bound only outside the loop (``statement`` itself aside), to a
        container of the right kind?"""
        semantic = self.ctx.semantic
        bindings = self._acc_bindings(acc, kind, statement)
        if not bindings or any(b.kind not in (ASSIGN, AUGMENT) or _inside(b, loop) for b in bindings):
            return False
        if kind in ("any", "read"):
            return all(b.kind == AUGMENT or b.value is not None for b in bindings)
        factories = _LIST_FACTORIES if kind == "list" else _DICT_FACTORIES
        for b in bindings:
            value = b.value
            if kind == "list" and isinstance(value, (cst.List, cst.ListComp)):
                continue
            if kind == "dict" and isinstance(value, (cst.Dict, cst.DictComp)):
                continue
            if isinstance(value, cst.Call) and (semantic.resolve_call(value) or dotted_name(value.func)) in factories:
                continue
            return False
        return True

    def _nested_training_loop(self, loop, site) -> bool:
        """Is the site inside a nested loop that backpropagates itself (checked on its own visit)?"""
        nested = memo(self.ctx, "nested_backward_loops", loop, lambda: [
            s.node for s in loop_sites(self.ctx, loop) if isinstance(s.node, loop_types()) and backward_calls(self.ctx, s.node)])
        return any(site.node is n or any(site.node is m for m in walk(n)) for n in nested)

    # -- what carries a graph
    def _backpropagated_names(self, loop) -> Set[str]:
        names: Set[str] = set()
        for site in backward_calls(self.ctx, loop):
            call = site.node
            roots = [call.func.value] if isinstance(call.func, cst.Attribute) else []
            roots += [a.value for a in call.args if a.keyword is None]
            for root in roots:
                names |= {n.value for n in walk(root) if isinstance(n, cst.Name)}
        return names

    def _assignments(self, loop) -> List[cst.Assign]:
        return [s.node for s in loop_sites(self.ctx, loop) if isinstance(s.node, cst.Assign)]

    def _feeding(self, loop, backpropagated: Set[str]) -> Set[str]:
        """Names whose values flow into what the loop backpropagates (``total`` of
        ``loss = total / n; loss.backward()``)."""
        feeding = set(backpropagated)
        assigns = self._assignments(loop) + [s.node for s in loop_sites(self.ctx, loop) if isinstance(s.node, cst.AugAssign)]
        for _ in range(4):
            before = len(feeding)
            for node in assigns:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if any(isinstance(n, cst.Name) and n.value in feeding for t in targets for n in walk(t)):
                    feeding |= {n.value for n in walk(node.value) if isinstance(n, cst.Name)}
            if len(feeding) == before:
                break
        return feeding

    def _graph_names(self, loop, backpropagated: Set[str]) -> Set[str]:
        graph = set(backpropagated)
        feeding = self._feeding(loop, backpropagated)
        semantic = self.ctx.semantic
        assigns = self._assignments(loop)
        for node in assigns:  # model outputs that feed the loss: out = model(x)
            value = node.value
            if isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)) and (
                    isinstance(value.func, cst.Name) or dotted_name(value.func) == f"self.{getattr(value.func.attr, 'value', '')}"):
                if semantic.resolve_call(value) is None and not self._data_helper(value):
                    for t in node.targets:
                        graph |= {n.value for n in walk(t.target) if isinstance(n, cst.Name) and n.value in feeding}
        for _ in range(4):
            before = len(graph)
            for node in assigns:
                if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and _graph_expression(node.value, graph):
                    graph.add(node.targets[0].target.value)
            if len(graph) == before:
                break
        return graph

    def _helper_keeps_graph(self, value: cst.BaseExpression, graph: Set[str]) -> bool:
        """``tre(fixed + ddf_keypoints, moving)``: a function of this file handed a value that
        carries the graph, one of whose ``return`` values is arithmetic or shape methods on the
        parameters that got it (``((fixed - moving) ** 2).sum(-1).sqrt().nanmean()``), with no
        ``no_grad`` in it. A metric that compares or counts (``(out.argmax(1) == y).float().mean()``)
        carries none."""
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
            return False
        function = self.ctx.semantic.module_function(value.func)
        if function is None:
            return False
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        carrying: Set[str] = set()
        for i, arg in enumerate(value.args):
            if arg.star or not _graph_expression(arg.value, graph):
                continue
            if arg.keyword is not None:
                carrying.add(arg.keyword.value)
            elif i < len(params):
                carrying.add(params[i])
        if not carrying:
            return False
        returns = []
        for node in walk(function.body, scope_types()):
            if isinstance(node, cst.Name) and node.value in ("no_grad", "inference_mode", "detach"):
                return False
            if isinstance(node, cst.Return) and node.value is not None:
                returns.append(node.value)
        return any(_graph_expression(r, carrying) for r in returns)

    def _data_helper(self, call: cst.Call) -> bool:
        """Is ``call`` a function of this file that runs no model: its body calls none of its
        parameters and no ``self.<attribute>`` (``apply_random_mask(imgs)``)? Its result is
        made from the data it is handed, not a model output."""
        function = self.ctx.semantic.module_function(call.func) if isinstance(call.func, cst.Name) else None
        if function is None:
            return False

        def compute() -> bool:
            semantic = self.ctx.semantic
            params = {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                             *function.params.kwonly_params)}
            local = params | {n.value for t in walk(function.body) if isinstance(t, (cst.AssignTarget, cst.For))
                              for n in walk(t.target) if isinstance(n, cst.Name)}
            for n in walk(function.body):
                if not isinstance(n, cst.Call) or semantic.resolve_call(n) is not None:
                    continue  # torch.rand_like(x), np.clip(...)
                func = n.func
                if isinstance(func, cst.Name):
                    if func.value in params or func.value not in _HARMLESS_BUILTINS:
                        return False  # model(x), net(x), another helper: it may run a model
                    continue
                root = func
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(func, cst.Attribute) and func.attr.value == "forward":
                    return False
                if not isinstance(root, cst.Name) or root.value == "self" or root.value not in local:
                    return False  # self.net(x), a global model's method: not followed
            return True

        return memo(self.ctx, "data_helper", function, compute)

    def _carries_graph(self, value: cst.BaseExpression, graph: Set[str]) -> bool:
        if not _graph_expression(value, graph) and not self._helper_keeps_graph(value, graph):
            return False
        for name in walk(value):  # what reaches the read: `loss = loss.item()` first is detached
            if isinstance(name, cst.Name) and name.value in graph:
                bindings = self.ctx.semantic.lookup(name)
                if bindings and all(b.value is not None and _detached(b.value) for b in bindings):
                    return False
        return True

    def _flag(self, acc: cst.Name, value: cst.BaseExpression) -> None:
        text = self.ctx.module.code_for_node(value)
        simple = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar
        detached = f"{text}.detach()" if simple else f"({text}).detach()"
        fix = FixSpec(UNSAFE, f"Store `{detached}`", (NodeEdit(value, detached),))
        self.report(value, self.message.format(value=text if len(text) <= 30 else "the value", acc=acc.value), fix,
                    hint=f"`{acc.value}` outlives the step, so every step's graph stays alive and memory grows; "
                         f"store `{detached}`.")


def _step_varying_names(ctx, loop) -> FrozenSet[str]:
    """Names whose value changes every iteration of ``loop``: its own target (``for step, (x,
    y) in enumerate(loader)``), names the body adds to (``i += 1``), and names the body assigns
    from those (``global_step = epoch * n + i``). Names bound by a nested loop's target are not:
    a nested loop over a fixed set gives the same keys every step."""
    varying: Set[str] = set()
    if isinstance(loop, cst.For):
        varying |= {n.value for n in walk(loop.target) if isinstance(n, cst.Name)}
    assigns = []
    for site in loop_sites(ctx, loop):
        node = site.node
        if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            varying.add(node.target.value)
        elif isinstance(node, cst.Assign):
            assigns.append(node)
    for _ in range(3):
        before = len(varying)
        for node in assigns:
            if any(isinstance(n, cst.Name) and n.value in varying for n in walk(node.value)):
                varying |= {n.value for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)}
        if len(varying) == before:
            break
    return frozenset(varying)


def _detached(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.Call):
        method = method_call(value)
        if method is not None and method[1] in _DETACHING:
            return True
        if isinstance(value.func, cst.Name) and value.func.value in ("float", "int", "bool", "str", "len"):
            return True
    return False


def _graph_expression(node: cst.BaseExpression, graph: Set[str]) -> bool:
    """Does this expression carry the graph of a name in ``graph`` (no ``.item()``/``.detach()``)?"""
    if isinstance(node, cst.Name):
        return node.value in graph
    if isinstance(node, cst.Call):
        method = method_call(node)
        if method is not None and method[1] in _GRAPH_METHODS:
            return _graph_expression(method[0], graph)
        return False
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, (cst.FloorDivide, cst.Modulo, cst.BitAnd, cst.BitOr, cst.BitXor)):
            return False
        return _graph_expression(node.left, graph) or _graph_expression(node.right, graph)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _graph_expression(node.expression, graph)
    if isinstance(node, cst.Subscript):
        return _graph_expression(node.value, graph)
    return False


# -- TL402 -------------------------------------------------------------------------------------

class NoGradInEval(Rule):
    """Flags an evaluation loop over a data loader that runs the model with autograd on: the
    loop takes no gradient step and the model is in ``.eval()``, or the function or the loader
    is named for evaluation (``validate``, ``val_loader``), and nothing around the call turns
    gradients off: no ``torch.no_grad()``/``inference_mode()`` (context or decorator),
    ``set_grad_enabled``, and every caller of the function in this file calls it with gradients
    on (a caller we cannot see, or no caller in this file, keeps the rule silent).
    """

    code = "TL402"
    statement_local = False  # reads the callers of the function in the same file
    reads_by_name = True  # callers by the function's name, helpers by theirs, loader assignments
    name = "no-grad-in-eval"
    summary = "An evaluation loop runs the model without `torch.no_grad()`/`torch.inference_mode()`."
    message = (
        "Evaluation loop runs `{model}` with autograd on; run it under `torch.no_grad()`"
    )
    hint = (
        "Every forward records a graph and keeps activations alive for a backward that never comes "
        "(`torch.inference_mode()` is faster still where no output is used with autograd later)."
    )
    requires = ((mentions_loader,), (_mentions_evaluation,))
    # a finding is in a `for` over a loader (its visits look at nothing else)
    ast_candidate = staticmethod(lambda index: index.mentions("loader", substring=True, ignore_case=True)
                                 and index.loader_loops())
    walk_candidate = staticmethod(lambda index: index.loader_loops())
    tags = ("performance", "memory")
    fix_applicability = UNSAFE
    # an evaluation helper of another project file called here (``FileFacts.eval_helpers``), after
    # the model was put in eval mode: a file with facts is linted only if it also spells that
    uses_project = True
    project_requires = ((mentions_loader,), (_EVAL_MODE_TOKEN,))
    helper_message = "`{helper}` runs `{model}` with autograd on; call it under `torch.no_grad()`"
    helper_hint = (
        "`{helper}` ({where}) runs the model over every batch of `{loader}` and leaves gradients to its caller: "
        "each forward records a graph for a backward that never comes."
    )

    def visit_Call(self, node: cst.Call) -> None:
        """``calc_loss_loader(val_loader, model, device)`` after ``model.eval()`` with gradients
        on, where the function, imported from another project file, runs the model over the
        loader and leaves gradients to its caller (issue 29, class 3)."""
        ctx = self.ctx
        facts = ctx.project
        if not facts.eval_helpers:
            return
        spelled = dotted_name(node.func)
        if spelled is None or ctx.semantic.resolve(node.func) is None:
            return  # not an imported name here (a local of the same name)
        helper = ctx.model.evaluation_helper(spelled)
        if helper is None:
            helper = ctx.model.evaluation_helper(ctx.semantic.resolve(node.func) or "")
        if helper is None:
            return
        loader_param, loader_at, model_param, model_at, where = helper
        loader, model = _argument(node, loader_param, loader_at), _argument(node, model_param, model_at)
        name = dotted_name(model) if model is not None else None
        if loader is None or name is None or not is_loader_expression(ctx, loader) or grad_disabled(ctx):
            return
        if any(isinstance(a, cst.With) and any(_turns_grad_off(ctx.semantic, i.item) for i in a.items)
               for a in ctx.ancestors):
            return
        function = enclosing_function(ctx)
        if function is not None and (_needs_gradients(ctx, function, False) or not _called_with_grad_on(ctx, function, 0)):
            return
        if _mode_at_call(ctx, function or ctx.module, node, name) != "eval":
            return
        loader_name = dotted_name(loader) or loader_param
        self.report(node, self.helper_message.format(helper=spelled, model=name),
                    hint=self.helper_hint.format(helper=spelled, where=where, loader=loader_name))

    def visit_For(self, node: cst.For) -> None:
        ctx = self.ctx
        if not is_loader_expression(ctx, node.iter) or calls_gradient_step(ctx, node) or grad_disabled(ctx):
            return
        if any(isinstance(a, cst.With) and any(_turns_grad_off(ctx.semantic, i.item) for i in a.items)
               for a in ctx.ancestors):
            return  # `with eval_mode(model):` (MONAI) turns gradients off too
        function = enclosing_function(ctx)
        scope = function or ctx.module
        if _needs_gradients(ctx, node, True) or (function is not None and _needs_gradients(ctx, function, False)):
            return
        modes = _modes_before(ctx, scope, node)
        evaluated = {name for name, mode in modes.items() if mode == "eval"}
        named = bool(set(name_tokens(function.name)) & EVAL_WORDS) if function is not None else False
        loader = next((v for v in ctx.semantic.iterated_values(node.iter)), node.iter)
        named = named or bool(set(name_tokens(loader)) & EVAL_WORDS)
        model = None
        for site in loop_sites(ctx, node):
            if site.grad_off or not isinstance(site.node, cst.Call):
                continue
            func = site.node.func
            callee = dotted_name(func)
            if callee is None or ctx.semantic.resolve_call(site.node) is not None:
                continue
            if callee.endswith(".forward"):
                callee = callee[: -len(".forward")]
            if modes.get(callee) == "train":
                continue
            if callee in evaluated or (named and name_tokens(cst.parse_expression(callee))[-1:] and
                                       name_tokens(cst.parse_expression(callee))[-1] in MODEL_WORDS):
                model = (site.node, callee)
                break
            owner = _model_method_owner(ctx, node, site.node, evaluated, named)
            if owner is not None and modes.get(owner) != "train":
                model = (site.node, owner)
                break
        if model is None and function is not None:
            model = _model_handed_in_eval_mode(ctx, node, function)
        if model is None:
            return
        if function is not None and not _called_with_grad_on(ctx, function, 0):
            return
        self.report(model[0], self.message.format(model=model[1]), self._fix(node, function))

    def _fix(self, loop: cst.For, function: Optional[cst.FunctionDef]) -> Optional[FixSpec]:
        """``@torch.no_grad()`` on a function named for evaluation that takes no gradient step
        anywhere; else the loop wrapped in ``with torch.no_grad():``, or in
        ``torch.inference_mode()`` when no tensor made in the loop can outlive it."""
        ctx = self.ctx
        import_edit, torch_name = ctx.import_edit("torch")
        if function is not None and function.asynchronous is None and (
                set(name_tokens(function.name)) & EVAL_WORDS) and not _takes_gradient_step(ctx, function):
            indent = "".join(ctx.indentation(upto=function))
            edit = NodeEdit(function, f"@{torch_name}.no_grad()\n{indent}", INSERT_BEFORE)
            message = f"Decorate `{function.name.value}` with `@{torch_name}.no_grad()`"
        else:
            if any(isinstance(site.node, (cst.Yield, cst.Await)) for site in loop_sites(ctx, loop)):
                return None  # the grad mode a `with` sets would stay off in the caller while suspended
            mode = "no_grad" if _tensor_escapes(ctx, loop, function or ctx.module) else "inference_mode"
            edit = wrap_in_with(ctx, loop, f"{torch_name}.{mode}()")
            if edit is None:
                return None
            message = f"Run the loop under `with {torch_name}.{mode}():`"
        edits = (edit,) if import_edit is None else (import_edit, edit)
        return FixSpec(UNSAFE, message, edits)


def _argument(call: cst.Call, param: str, position: int) -> Optional[cst.BaseExpression]:
    """The value ``call`` hands the parameter ``param`` at ``position`` (by keyword, or
    positionally with no star or keyword before it), or None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    if position < len(call.args) and all(a.keyword is None and not a.star for a in call.args[:position + 1]):
        return call.args[position].value
    return None


# A call handing the model to a function named for training may leave it in training mode.
_TRAINING_CALL = re.compile(r"train|fit|tune", re.IGNORECASE)


def _mode_at_call(ctx, scope, call: cst.Call, model: str) -> Optional[str]:
    """"eval"/"train" for ``model`` at ``call``: the last ``model.eval()`` / ``model.train(...)``
    of ``scope``'s own code before it (a notebook's earlier cells are module code), None when
    unknown or when, since, the model was handed to a function named for training
    (``train_model(model, ...)`` leaves it in training mode)."""
    def compute():
        mode: Optional[str] = None
        body = scope.body if scope is not ctx.module else scope
        for node in walk(body, scope_types()):
            if node is call:
                break
            if not isinstance(node, cst.Call):
                continue
            modes: Dict[str, str] = {}
            _record_mode(node, modes)
            if model in modes:
                mode = modes[model]
            elif mode is not None and any(dotted_name(a.value) == model for a in node.args):
                callee = dotted_name(node.func) or ""
                if _TRAINING_CALL.search(callee.rsplit(".", 1)[-1]):
                    mode = None
        return mode

    return memo(ctx, f"mode_at_call_{model}", call, compute)


def _modes_before(ctx, scope, loop) -> Dict[str, str]:
    """dotted name -> "eval"/"train": the last ``x.eval()`` / ``x.train(...)`` of ``scope``'s own
    code (not its nested functions or classes) up to the end of ``loop``."""
    def compute():
        modes: Dict[str, str] = {}
        body = scope.body if scope is not ctx.module else scope
        for node in walk(body, scope_types()):
            if node is loop:
                break
            _record_mode(node, modes)
        for site in loop_sites(ctx, loop):
            _record_mode(site.node, modes)
        return modes

    return memo(ctx, "modes_before", loop, compute)


# Methods of a module that run no forward pass.
_NOT_FORWARD = frozenset({"to", "cuda", "cpu", "eval", "train", "parameters", "named_parameters", "state_dict",
                          "load_state_dict", "apply", "zero_grad", "half", "float", "double", "bfloat16",
                          "requires_grad_", "modules", "children", "buffers", "register_buffer", "add_module",
                          "get_submodule", "register_forward_hook", "register_forward_pre_hook", "save_pretrained"})


def _model_method_owner(ctx, loop: cst.For, call: cst.Call, evaluated: Set[str], named: bool) -> Optional[str]:
    """``model.batch_loss(batch, batch)``: a method of a model handed this step's data, where the
    model is in eval mode here, or the loop is named for evaluation and the model is an instance
    of an ``nn.Module`` class of this file (``aenc = PCAAutoencoder()``). The owner's name, or
    None."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value in _NOT_FORWARD or not call.args:
        return None
    owner = dotted_name(func.value)
    if owner is None or owner in ("self", "cls"):
        return None
    varying = memo(ctx, "step_varying_names", loop, lambda: _step_varying_names(ctx, loop))
    if not any(isinstance(n, cst.Name) and n.value in varying for a in call.args for n in walk(a.value)):
        return None  # not handed the batch
    if owner in evaluated:
        return owner
    if named and isinstance(func.value, cst.Name) and _module_instance(ctx, func.value):
        return owner
    return None


def _module_instance(ctx, name: cst.Name) -> bool:
    """Is every value ``name`` may hold here a call of an ``nn.Module`` subclass of this file?"""
    values = ctx.semantic.values_of(name)
    if not values:
        return False
    classes = memo(ctx, "module_classes", ctx.module, lambda: _module_classes(ctx))
    return all(isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value in classes for v in values)


def _module_classes(ctx) -> Set[str]:
    """Module-level classes of the file deriving from ``torch.nn.Module`` (directly or through
    another such class of the file)."""
    bases = {n.name.value: n.bases for n in ctx.module.body if isinstance(n, cst.ClassDef)}
    found: Set[str] = set()
    for _ in range(4):
        for name, arguments in bases.items():
            for arg in arguments:
                value = arg.value
                if ctx.semantic.resolve(value) in ("torch.nn.Module", "torch.nn.modules.module.Module") or (
                        isinstance(value, cst.Name) and value.value in found):
                    found.add(name)
    return found


def _model_handed_in_eval_mode(ctx, loop: cst.For, function: cst.FunctionDef) -> Optional[Tuple[cst.Call, str]]:
    """(call, name) of the first call in ``loop`` (gradients on) of a parameter of ``function``
    (``model(x)``, ``model.forward(x)``) that every reference to ``function`` in this file hands
    a model put in eval mode before the call (``model.eval()`` then ``compute_accuracy(model,
    loader)``, in a caller or in a notebook's module-level cell). None when a caller cannot be
    seen, passes something else there, or that model's mode at the call is unknown or
    training (issue 29, class 3: the mode is set where the function is called)."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    keyword_only = {p.name.value for p in function.params.kwonly_params}
    modes = _modes_before(ctx, function, loop)
    for site in loop_sites(ctx, loop):
        if site.grad_off or not isinstance(site.node, cst.Call) or ctx.semantic.resolve_call(site.node) is not None:
            continue
        func = site.node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if isinstance(func, cst.Name) and func.value not in params and func.value not in keyword_only:
            # calc_loss_batch(x, y, model, device): a helper of this file that runs the model
            func = next((a.value for a in site.node.args if isinstance(a.value, cst.Name)
                         and (a.value.value in params or a.value.value in keyword_only)
                         and _helper_runs(ctx, site.node, a)), func)
        if not isinstance(func, cst.Name) or (func.value not in params and func.value not in keyword_only):
            continue
        if func.value in modes:
            continue  # the function sets the mode itself
        if _every_caller_hands_eval_mode(ctx, function, func.value, params):
            return site.node, func.value
    return None


def _helper_runs(ctx, call: cst.Call, arg: cst.Arg) -> bool:
    """Does the function of this file that ``call`` calls run (call) the parameter ``arg`` is
    handed to, with no say over gradients or the mode (no ``no_grad``, ``set_grad_enabled``,
    ``inference_mode``, ``backward``, ``.eval()``/``.train()`` in it)?"""
    function = ctx.semantic.module_function(call.func) if isinstance(call.func, cst.Name) else None
    if function is None or arg.star:
        return False
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if arg.keyword is not None:
        param = arg.keyword.value
    else:
        index = next(i for i, a in enumerate(call.args) if a is arg)
        if index >= len(params) or any(a.keyword is not None or a.star for a in call.args[:index]):
            return False
        param = params[index]

    def compute() -> bool:
        runs = False
        for node in walk(function.body):
            if isinstance(node, cst.Name) and node.value in ("no_grad", "set_grad_enabled", "inference_mode",
                                                             "enable_grad", "backward", "eval", "train"):
                return False
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == param:
                runs = True
        return runs

    return bool(memo(ctx, f"helper_runs_{param}", function, compute))


def _every_caller_hands_eval_mode(ctx, function: cst.FunctionDef, param: str, params: List[str]) -> bool:
    def compute() -> bool:
        sites = _call_sites(ctx).get(id(function), [])
        if not sites:
            return False
        for node, holder, _off, called in sites:
            call = _call_of(ctx, node)
            if not called or call is None:
                return False
            position = params.index(param) if param in params else None
            if position is not None and params[:1] in (["self"], ["cls"]) and isinstance(call.func, cst.Attribute):
                position -= 1  # self.evaluate(model, loader)
            argument = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
            if argument is None and position is not None and 0 <= position < len(call.args):
                positional = call.args[:position + 1]
                if all(a.keyword is None and not a.star for a in positional):
                    argument = call.args[position].value
            name = dotted_name(argument) if argument is not None else None
            if name is None or _modes_at(ctx, holder or ctx.module, call).get(name) != "eval":
                return False
        return True

    return memo(ctx, f"callers_hand_eval_{param}", function, compute)


def _call_of(ctx, reference: cst.CSTNode) -> Optional[cst.Call]:
    """The call whose callee is ``reference`` (a ``_call_sites`` entry), found among the
    references' ancestors by a walk of the module held once per file."""
    def compute() -> Dict[int, cst.Call]:
        return {id(n.func): n for n in walk(ctx.module) if isinstance(n, cst.Call)}

    return memo(ctx, "calls_by_callee", ctx.module, compute).get(id(reference))


def _modes_at(ctx, scope, call: cst.Call) -> Dict[str, str]:
    """dotted name -> "eval"/"train": the last ``x.eval()`` / ``x.train(...)`` of ``scope``'s own
    code (not its nested functions or classes) before ``call``, in the order of the text."""
    def compute():
        modes: Dict[str, str] = {}
        body = scope.body if scope is not ctx.module else scope
        for node in walk(body, scope_types()):
            if node is call:
                break
            _record_mode(node, modes)
        return modes

    return memo(ctx, "modes_at", call, compute)


def _record_mode(node, modes: Dict[str, str]) -> None:
    method = method_call(node)
    if method is None or method[1] not in ("eval", "train"):
        return
    name = dotted_name(method[0])
    if name is None:
        return
    if method[1] == "eval" and not node.args:
        modes[name] = "eval"
    elif method[1] == "train":
        arg = node.args[0].value if node.args else None
        modes[name] = "eval" if isinstance(arg, cst.Name) and arg.value == "False" else "train"


def _needs_gradients(ctx, root, in_loop: bool) -> bool:
    """Code that needs autograd or decides about it: ``.grad``, ``requires_grad``,
    ``torch.autograd.grad``, ``set_grad_enabled``, attacks and saliency; and, inside the loop
    itself, ``backward``."""
    def compute():
        for node in walk(root):
            if isinstance(node, cst.Attribute) and node.attr.value in ("grad", "requires_grad", "requires_grad_"):
                return True
            if not isinstance(node, cst.Name):
                continue
            if node.value in ("set_grad_enabled", "enable_grad", "requires_grad", "requires_grad_"):
                return True
            if in_loop and node.value in ("backward", "manual_backward"):
                return True
            if set(name_tokens(node)) & GRAD_NEEDING_WORDS:
                return True
        return False

    return memo(ctx, f"needs_gradients_{in_loop}", root, compute)


def _call_sites(ctx) -> Dict[int, List[Tuple[cst.CSTNode, Optional[cst.FunctionDef], bool]]]:
    """id(function of this file) -> (call or other reference, function holding it, gradients
    off there, called) for every reference to it: ``f(...)``, ``self.f(...)``, ``f`` passed on."""
    def compute():
        semantic = ctx.semantic
        sites: Dict[int, list] = {}
        called: Set[int] = set()
        # (node, holding function, gradients off) with an explicit stack
        stack: List[tuple] = [(child, None, False) for child in reversed(_children(ctx.module))]
        while stack:
            node, holder, off = stack.pop()
            if isinstance(node, cst.FunctionDef):
                deco_off = any(
                    semantic.resolve(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) in GRAD_OFF
                    for d in node.decorators
                )
                stack.extend((child, node, deco_off or _mentions_grad_switch(ctx, node))
                             for child in reversed(_children(node)))
                continue
            if isinstance(node, cst.With):
                inner = off or any(_turns_grad_off(semantic, item.item) for item in node.items)
                stack.extend((child, holder, inner if child is node.body else off) for child in reversed(_children(node)))
                continue
            if isinstance(node, cst.Call):
                called.add(id(node.func))
            if isinstance(node, (cst.Name, cst.Attribute)):
                target = semantic.module_function(node)
                if target is not None:
                    sites.setdefault(id(target), []).append((node, holder, off, id(node) in called))
                if isinstance(node, cst.Name):
                    continue
            stack.extend((child, holder, off) for child in reversed(_children(node)))
        return sites

    return memo(ctx, "call_sites", ctx.module, compute)


def _mentions_grad_switch(ctx, function) -> bool:
    """A function that calls ``torch.set_grad_enabled(...)`` anywhere: its grad mode is unknown."""
    return any(isinstance(n, cst.Name) and n.value == "set_grad_enabled" for n in walk(function))


def _called_with_grad_on(ctx, function: cst.FunctionDef, depth: int) -> bool:
    """Is every reference to ``function`` in this file a call made with gradients on? A
    function nobody in this file calls is called from where we cannot see: unknown (False)."""
    if depth > 4:
        return False
    sites = _call_sites(ctx).get(id(function), [])
    if not sites:
        return False
    for node, holder, off, called in sites:
        if off or not called:
            return False
        if holder is None:
            continue  # module level: a script runs with gradients on
        if holder is function:
            continue  # recursion
        if _takes_gradient_step(ctx, holder):
            continue  # training code calls it: gradients are on there
        if not _called_with_grad_on(ctx, holder, depth + 1):
            return False
    return True


def _takes_gradient_step(ctx, function) -> bool:
    return memo(ctx, "takes_gradient_step", function, lambda: any(
        isinstance(n, cst.Call) and _is_backward(ctx, n) for n in walk(function)))


RULES = [NoGradInEval, DdpNoSync, RetainedGraph, MissingZeroGrad]
