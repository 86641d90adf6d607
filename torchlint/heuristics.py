"""Heuristics on names and words (the word lists are in ``words.py``): does this expression name a
device or a data loader, is this ``if`` a periodic (logging) guard, is this code a debugging
branch, an out-of-memory handler, a function named to run once per step. Where a function takes
the file's context it comes first: ``f(ctx, node)``. Tests in tests/test_analysis.py."""

from __future__ import annotations

import re
from typing import Collection, Optional

from torchlint import _cst as cst

from torchlint.syntax import (
    UNKNOWN,
    body_nodes,
    get_arg,
    guarded_branches,
    last_name,
    literal_value,
    method_call,
    name_tokens,
    path_below,
    scope_types,
)
from torchlint.torch_api import ACCELERATOR_DEVICE_TYPES, ITERATION_WRAPPERS
from torchlint.words import (
    DEBUG_TEXT,
    DEBUG_WORDS,
    DEVICE_NAME_WORDS,
    MEMORY_WORDS,
    ONE_OFF_WORDS,
    OOM_TEXT,
    PER_STEP_NAMES,
    PERIODIC_WORDS,
    STEP_WORDS,
    TOOL_NAME_WORDS,
)


def is_accelerator_device(ctx, node: Optional[cst.BaseExpression]) -> bool:
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
        return is_accelerator_device(ctx, node.body) or is_accelerator_device(ctx, node.orelse)
    if isinstance(node, cst.Call) and ctx.resolve_call(node) == "torch.device":
        first = get_arg(node, "type", 0)
        if first is None:
            return False
        kind = literal_value(first.value)
        return is_accelerator_device(ctx, first.value) if kind is not UNKNOWN else True
    if isinstance(node, (cst.Name, cst.Attribute)):
        last = (node.attr if isinstance(node, cst.Attribute) else node).value.lower()
        if "cpu" in last:
            return False
        return last.endswith("device") or last in DEVICE_NAME_WORDS
    return False


def moves_to_accelerator(ctx, call: cst.CSTNode) -> bool:
    """``x.cuda(...)``, ``x.to(<device>)`` or ``x.to(..., non_blocking=True)``: the receiver goes
    to an accelerator (``.to(dtype)``, ``.to("cpu")``, ``.to(other)`` do not say so)."""
    method = method_call(call)
    if method is None or method[1] not in ("cuda", "to"):
        return False
    if method[1] == "cuda":
        return True
    non_blocking = get_arg(call, "non_blocking", 2)
    if non_blocking is not None and literal_value(non_blocking.value) is True:
        return True
    device = get_arg(call, "device", 0)
    return device is not None and is_accelerator_device(ctx, device.value)


def dataloader_names(ctx) -> frozenset:
    """Dotted names (``train_dl``, ``self.dl``) assigned from a torch DataLoader call anywhere in
    the file (the whole-file model: the assignment may be in a definition the rule does not walk)."""
    return ctx.model.loader_names()


def is_loader_expression(ctx, node: cst.BaseExpression) -> bool:
    """Does iterating ``node`` yield batches from a data loader? ``train_loader``,
    ``self.val_dataloader()``, a name bound from ``DataLoader(...)`` (or a subclass's),
    ``enumerate(loader)``, ``tqdm(loader)``, ``DataLoader(ds)`` itself, a local the whole-file
    model knows stands for a loader (``FileModel.loader_locals``). ``loaders`` (a collection of
    loaders) is not."""
    from torchlint.imports import dotted_name
    from torchlint.torch_api import DATALOADER

    if isinstance(node, cst.Call):
        if ctx.resolve_call(node) == DATALOADER:
            return True
        if last_name(node.func) in ITERATION_WRAPPERS:
            return any(not a.keyword and not a.star and is_loader_expression(ctx, a.value) for a in node.args)
    name = dotted_name(node.func if isinstance(node, cst.Call) else node)
    if name is None:
        return False
    if not isinstance(node, cst.Call) and name in dataloader_names(ctx):
        return True
    last = name.rsplit(".", 1)[-1].lower()
    if "loader" in last and not last.endswith("loaders"):
        return True
    # the whole-file model: `pbar = tqdm(train_loader)`, `dl = accelerator.prepare(dl)`, a parameter
    # every call of the file gives a loader (`evaluate(model, val_loader)` for `def evaluate(model, data)`)
    return isinstance(node, cst.Name) and node.value in ctx.model.loader_locals(_scope(ctx))


def _scope(ctx):
    from torchlint.model import scope_of

    return scope_of(ctx.ancestors)


def is_optimizer_like(receiver: cst.BaseExpression) -> bool:
    last = (last_name(receiver) or "").lower()
    return last.startswith("opt") or "optim" in last or "scaler" in last


def _is_modulo(node: cst.CSTNode) -> bool:
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in [node, *body_nodes(node, ())]
    )


def is_periodic_guard(test: cst.BaseExpression, known: Collection[str] = ()) -> bool:
    """A test that is true on few iterations: ``step % n == 0``, ``not i % n``, ``if verbose``,
    ``self.control.should_log``, ``step == 0``, ``i == len(loader) - 1``, ``last_batch``,
    ``ni < 3`` (the first few), ``self.check_frequency(i)``; ``a and b`` when either
    is, ``a or b`` when both are. ``rank == 0`` / ``is_main_process`` alone are not: they hold on
    every step of that process. ``known``: names the whole-file model knows hold such a test
    (``FileModel.periodic_names_at``): ``if is_metric_step:``, ``if divisible_by(i, every):``."""
    if known:
        inner = test.func if isinstance(test, cst.Call) else test
        if isinstance(inner, cst.Name) and inner.value in known:
            return True
    if isinstance(test, cst.BooleanOperation):
        left, right = is_periodic_guard(test.left, known), is_periodic_guard(test.right, known)
        return (left or right) if isinstance(test.operator, cst.And) else (left and right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_modulo(test.expression)  # not step % n
    if isinstance(test, cst.Comparison):
        if all(isinstance(t.operator, cst.Equal) for t in test.comparisons):
            sides = [test.left, *(t.comparator for t in test.comparisons)]
            if any(_is_modulo(s) for s in sides):
                return True
            if any(set(name_tokens(s)) & STEP_WORDS for s in sides if isinstance(s, (cst.Name, cst.Attribute))):
                return True  # a one-off step: step == 0, i == len(loader) - 1
        # the first few iterations: `if ni < 3:`, `if batch_idx <= 2:`
        if len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual)):
            bound = literal_value(test.comparisons[0].comparator)
            return isinstance(test.left, cst.Name) and isinstance(bound, int) and not isinstance(bound, bool) and bound <= 16
        return False
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call)):
        words = set(name_tokens(test))
        if isinstance(test, cst.Call):
            return bool(words & PERIODIC_WORDS)
        return bool(words & (PERIODIC_WORDS | ONE_OFF_WORDS))
    return False


def under_memory_switch(ctx, top: cst.CSTNode, node: Optional[cst.CSTNode] = None) -> bool:
    """Is the current node (or ``node``), below ``top``, under an ``if`` whose test names a memory
    setting: ``if args.empty_unused_memory_level >= 1:``, ``if cfg.release_cache:``,
    ``if torch.cuda.memory_allocated() > limit:``? Releasing memory there is the user's choice."""
    for test in guarded_branches(path_below(ctx, top, node)):
        for n in [test, *body_nodes(test, ())]:
            if isinstance(n, (cst.Name, cst.Attribute)) and set(name_tokens(n)) & MEMORY_WORDS:
                return True
    return False


def in_oom_handler(ctx) -> bool:
    """Inside an ``except`` that handles running out of memory: ``except torch.cuda.OutOfMemoryError``
    / ``torch.OutOfMemoryError``, or any handler whose code speaks of OOM
    (``if "out of memory" in str(e)``)."""
    for node in reversed(ctx.ancestors):
        if isinstance(node, scope_types()):
            return False
        if isinstance(node, cst.ExceptHandler):
            types = node.type.elements if isinstance(node.type, cst.Tuple) else [node.type]
            if any(getattr(t, "value", t) is not None and last_name(getattr(t, "value", t)) == "OutOfMemoryError" for t in types):
                return True
            if OOM_TEXT.search(ctx.module.code_for_node(node)):
                return True
    return False


def _is_debug_test(test: cst.BaseExpression) -> bool:
    for node in [test, *body_nodes(test, ())]:
        if isinstance(node, (cst.Name, cst.Attribute)) and set(name_tokens(node)) & DEBUG_WORDS:
            return True
        if isinstance(node, cst.SimpleString) and DEBUG_TEXT.search(node.value):
            return True  # os.environ.get("TORCH_DEBUG")
    return False


def in_debug_branch(ctx, node: Optional[cst.CSTNode] = None) -> bool:
    """Under ``if debug:`` / ``if args.detect_anomaly:`` / ``if os.environ.get("DEBUG"):``, or in a
    function, class or file whose name says debug or profiling (``def enable_debug_mode``,
    ``class AutogradProfiler``, ``profiling_tracer.py``): there the tool is the point."""
    if any(_is_debug_test(test) for test in guarded_branches(path_below(ctx, ctx.module, node))):
        return True
    for scope in ctx.ancestors:
        if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) and set(name_tokens(scope.name)) & TOOL_NAME_WORDS:
            return True
    stem = re.split(r"[\\/]", ctx.path)[-1].rsplit(".", 1)[0]
    return stem.isidentifier() and bool(set(name_tokens(cst.Name(stem))) & TOOL_NAME_WORDS)


def is_per_step_function(func: Optional[cst.CSTNode]) -> bool:
    """The fallback where the project's call graph says nothing: a function *named* to run once
    per training step: ``forward``, ``step``, ``training_step``/``train_step``/any ``*_step``,
    ``*_forward``, a loss function (``loss``, ``*_loss``, ``compute_loss*``). A function merely
    *containing* a training loop is not (its top level runs
    once per call)."""
    if not isinstance(func, cst.FunctionDef):
        return False
    name = func.name.value
    return (name in PER_STEP_NAMES or name.endswith("_step") or name.endswith("_forward")
            or name.endswith("_loss") or name.startswith("compute_loss") or name == "loss")
