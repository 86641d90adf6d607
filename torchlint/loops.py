"""Training-loop questions: is this loop a training loop, does its body take a gradient step or
turn autograd off, is this code under a periodic guard of the loop, does the function being
visited run every step (the project index). The context comes first: ``f(ctx, loop)``. Tests in
tests/test_analysis.py."""

from __future__ import annotations

from typing import Optional

from torchlint import _cst as cst

from torchlint.heuristics import is_loader_expression, is_optimizer_like, is_periodic_guard
from torchlint.syntax import (
    body_nodes,
    enclosing_function,
    guarded_branches,
    loop_types,
    memo,
    method_call,
    path_below,
    qualified_name,
    scope_types,
)


def calls_gradient_step(ctx, loop: cst.CSTNode) -> bool:
    """Does the loop's own body (not nested loops or functions) call ``.backward()``,
    ``optimizer.step()`` or ``scaler.step(optimizer)``?"""
    def compute():
        for node in body_nodes(loop.body, scope_types() + loop_types()):
            call = method_call(node)
            if call is None:
                continue
            receiver, name = call
            if name == "backward" or (name == "step" and is_optimizer_like(receiver)):
                return True
        return False

    return memo(ctx, "gradient_step", loop, compute)


def is_training_loop(ctx, loop: cst.CSTNode) -> bool:
    """A For over a data loader (or one that binds a batch drawn from one, ``draws_batches``), or
    a For/While whose own body takes a gradient step. An epoch loop (``for epoch in range(n)``)
    around the batch loop is not one: its body runs once an epoch."""
    if not isinstance(loop, loop_types()):
        return False

    def compute():
        if isinstance(loop, cst.For) and is_loader_expression(ctx, loop.iter):
            return True
        # the gradient step first: the model's batch facts are read only for loops without one
        return calls_gradient_step(ctx, loop) or (isinstance(loop, cst.For) and draws_batches(ctx, loop))

    return memo(ctx, "training_loop", loop, compute)


def draws_batches(ctx, loop: cst.For) -> bool:
    """Does the ``for`` bind a batch drawn from a loader (the whole-file model's ``batch_names``:
    ``for step, batch in enumerate(sample_data(loader))``, a generator of the file over a loader)?
    A loop over a batch's own elements (``for image in images``) is not one."""
    from torchlint.model import scope_of

    source = loop.iter
    while isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value in ("enumerate", "tqdm"):
        if not source.args:
            return False
        source = source.args[0].value
    if isinstance(source, (cst.List, cst.Tuple, cst.Set, cst.SimpleString, cst.Integer)) or (
            isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value in ("range", "len")):
        return False  # numbers, literals: no batch is drawn (most loops: asked before any scan)
    batches = ctx.model.batch_names(scope_of(ctx.ancestors))
    if not batches:
        return False
    source = loop.iter
    if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and not source.args:
        source = source.func.value  # `batch.items()`
    while isinstance(source, (cst.Subscript, cst.Attribute)):
        source = source.value
    if isinstance(source, cst.Name) and source.value in batches:
        return False
    targets = [loop.target]
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name) and target.value in batches:
            return True
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(e.value for e in target.elements)
    return False


def under_periodic_guard(ctx, loop: cst.CSTNode, node: Optional[cst.CSTNode] = None) -> bool:
    """Is the current node (or ``node``) inside ``loop`` under a logging/periodic ``if`` (also one
    through a name the whole-file model knows holds a periodic test)?"""
    tests = guarded_branches(path_below(ctx, loop, node))
    if not tests:
        return False
    from torchlint.model import scope_of

    known = ctx.model.periodic_names_at(scope_of(ctx.ancestors))
    return any(is_periodic_guard(test, known) for test in tests)


def runs_every_step(ctx, kinds=("train",)) -> Optional[str]:
    """Why the function being visited runs once per step, from the project index (called from
    a training loop in any file, a framework hook, a closure given to ``optimizer.step``), or
    None."""
    func = enclosing_function(ctx)
    if func is None:
        return None
    return ctx.project.runs_every_step(qualified_name(ctx, func), kinds)


_GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad",
                       "torch.autograd.grad_mode.inference_mode", "torch.autograd.no_grad"})


def grad_disabled(ctx, upto: Optional[cst.CSTNode] = None) -> bool:
    """Inside ``with torch.no_grad()`` / ``torch.inference_mode()`` or a function decorated so
    (only ancestors above ``upto`` count when it is given)."""
    names = _GRAD_OFF
    for node in ctx.ancestors:
        if node is upto:
            break
        if isinstance(node, cst.With):
            for item in node.items:
                if isinstance(item.item, cst.Call) and ctx.resolve_call(item.item) in names:
                    return True
        elif isinstance(node, cst.FunctionDef):
            for deco in node.decorators:
                target = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
                if ctx.resolve(target) in names:
                    return True
    return False


def grad_disabled_in(ctx, loop: cst.CSTNode) -> bool:
    """Does the loop's own body (not nested functions) enter ``torch.no_grad()`` /
    ``torch.inference_mode()``?"""
    def compute():
        for node in body_nodes(loop.body, scope_types()):
            if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call):
                if ctx.resolve_call(node.item) in _GRAD_OFF:
                    return True
        return False

    return memo(ctx, "grad_disabled_in", loop, compute)
