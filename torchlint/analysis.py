"""Questions many rules ask, answered once: which argument is this, is this value known, is this
call a tensor factory, where is the enclosing function or loop. Rules call these instead of
re-deriving them; each has tests in tests/test_analysis.py."""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.torch_api import ACCELERATOR_DEVICE_TYPES, ITERATION_WRAPPERS, TENSOR_FACTORIES
from torchlint.testcode import in_test_scope, is_test_module, is_test_path  # noqa: F401 (re-exported)
from torchlint.words import ONE_OFF_WORDS, PERIODIC_WORDS, STEP_WORDS

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


def moves_to_accelerator(call: cst.CSTNode, ctx) -> bool:
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
    return device is not None and is_accelerator_device(device.value, ctx)


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


def with_leading_args(call: cst.Call, values: Sequence[cst.BaseExpression]) -> cst.Call:
    """``call`` with positional arguments ``values`` put first, keeping its layout: when its
    arguments sit one per line, the new ones get a line each too."""
    if not values:
        return call
    sep = cst.Comma(whitespace_after=_separator(call))
    made = [cst.Arg(value=value, comma=sep) for value in values]
    if not call.args:
        made = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in made[:-1]]
        made.append(cst.Arg(value=values[-1]))
    return call.with_changes(args=[*made, *call.args])


def code_in_place(ctx, node: cst.CSTNode) -> str:
    """Source for ``node`` (say, a replacement built with ``with_keyword_args``) as it prints at
    the statement being visited: continuation lines inside brackets keep the enclosing blocks'
    indentation, which ``Module.code_for_node`` (rendering at column 0) drops."""
    from torchlint.context import render_node

    return render_node(ctx.module, node, ctx.indentation())


# -- loops, guards, handlers: shared by the host-sync, memory and debug rules ------------------

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


def _last_name(node: cst.CSTNode) -> Optional[str]:
    while isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def memo(ctx, key: str, node: cst.CSTNode, compute):
    """``compute()`` once per file for (``key``, ``node``): rules ask about the same loop often."""
    slot = (key, id(node))
    try:
        return ctx.analysis_memo[slot]
    except KeyError:
        value = ctx.analysis_memo[slot] = compute()
        return value


def _body_nodes(root: cst.CSTNode, skip: Tuple[type, ...]):
    """Nodes under ``root`` (not root), not descending into nodes of the ``skip`` types."""
    from torchlint.tree import walk

    return walk(root, skip, include_root=False)


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_LOOPS = (cst.For, cst.While)


def dataloader_names(ctx) -> frozenset:
    """Dotted names (``train_dl``, ``self.dl``) assigned from a torch DataLoader call in the file."""
    def compute():
        names = set()
        if "DataLoader" not in ctx.text:
            return frozenset()
        from torchlint.imports import dotted_name
        from torchlint.torch_api import DATALOADER

        for node in _body_nodes(ctx.module, ()):
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and isinstance(node.value, cst.Call):
                if ctx.resolve_call(node.value) != DATALOADER:
                    continue
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    name = dotted_name(target)
                    if name:
                        names.add(name)
        return frozenset(names)

    return memo(ctx, "dataloader_names", ctx.module, compute)


def is_loader_expression(node: cst.BaseExpression, ctx) -> bool:
    """Does iterating ``node`` yield batches from a data loader? ``train_loader``,
    ``self.val_dataloader()``, a name bound from ``DataLoader(...)``, ``enumerate(loader)``,
    ``tqdm(loader)``, ``DataLoader(ds)`` itself. ``loaders`` (a collection of loaders) is not."""
    from torchlint.imports import dotted_name
    from torchlint.torch_api import DATALOADER

    if isinstance(node, cst.Call):
        if ctx.resolve_call(node) == DATALOADER:
            return True
        if _last_name(node.func) in ITERATION_WRAPPERS:
            return any(not a.keyword and not a.star and is_loader_expression(a.value, ctx) for a in node.args)
    name = dotted_name(node.func if isinstance(node, cst.Call) else node)
    if name is None:
        return False
    if not isinstance(node, cst.Call) and name in dataloader_names(ctx):
        return True
    last = name.rsplit(".", 1)[-1].lower()
    return "loader" in last and not last.endswith("loaders")


def _is_optimizer_like(receiver: cst.BaseExpression) -> bool:
    last = (_last_name(receiver) or "").lower()
    return last.startswith("opt") or "optim" in last or "scaler" in last


def calls_gradient_step(loop: cst.CSTNode, ctx) -> bool:
    """Does the loop's own body (not nested loops or functions) call ``.backward()``,
    ``optimizer.step()`` or ``scaler.step(optimizer)``?"""
    def compute():
        for node in _body_nodes(loop.body, _SCOPES + _LOOPS):
            call = method_call(node)
            if call is None:
                continue
            receiver, name = call
            if name == "backward" or (name == "step" and _is_optimizer_like(receiver)):
                return True
        return False

    return memo(ctx, "gradient_step", loop, compute)


def is_training_loop(loop: cst.CSTNode, ctx) -> bool:
    """A For over a data loader, or a For/While whose own body takes a gradient step. An epoch
    loop (``for epoch in range(n)``) around the batch loop is not one: its body runs once an epoch."""
    if not isinstance(loop, _LOOPS):
        return False

    def compute():
        if isinstance(loop, cst.For) and is_loader_expression(loop.iter, ctx):
            return True
        return calls_gradient_step(loop, ctx)

    return memo(ctx, "training_loop", loop, compute)


def _path_below(ctx, top: cst.CSTNode, node: Optional[cst.CSTNode]) -> List[cst.CSTNode]:
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


def _guarded_branches(path: List[cst.CSTNode]):
    """(test, ...) for each if/ternary on ``path`` whose *true* branch the path goes through."""
    for outer, inner in zip(path, path[1:]):
        if isinstance(outer, cst.If) and inner is outer.body:
            yield outer.test
        elif isinstance(outer, cst.IfExp) and inner is outer.body:
            yield outer.test


def _is_modulo(node: cst.CSTNode) -> bool:
    return any(
        isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)
        for n in [node, *_body_nodes(node, ())]
    )


_PERIODIC_WORDS, _STEP_WORDS, _ONE_OFF_WORDS = PERIODIC_WORDS, STEP_WORDS, ONE_OFF_WORDS


def is_periodic_guard(test: cst.BaseExpression) -> bool:
    """A test that is true on few iterations: ``step % n == 0``, ``not i % n``, ``if verbose``,
    ``self.control.should_log``, ``step == 0``, ``i == len(loader) - 1``, ``last_batch``,
    ``ni < 3`` (the first few), ``self.check_frequency(i)``; ``a and b`` when either
    is, ``a or b`` when both are. ``rank == 0`` / ``is_main_process`` alone are not: they hold on
    every step of that process."""
    if isinstance(test, cst.BooleanOperation):
        left, right = is_periodic_guard(test.left), is_periodic_guard(test.right)
        return (left or right) if isinstance(test.operator, cst.And) else (left and right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_modulo(test.expression)  # not step % n
    if isinstance(test, cst.Comparison):
        if all(isinstance(t.operator, cst.Equal) for t in test.comparisons):
            sides = [test.left, *(t.comparator for t in test.comparisons)]
            if any(_is_modulo(s) for s in sides):
                return True
            if any(set(name_tokens(s)) & _STEP_WORDS for s in sides if isinstance(s, (cst.Name, cst.Attribute))):
                return True  # a one-off step: step == 0, i == len(loader) - 1
        # the first few iterations: `if ni < 3:`, `if batch_idx <= 2:`
        if len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual)):
            bound = literal_value(test.comparisons[0].comparator)
            return isinstance(test.left, cst.Name) and isinstance(bound, int) and not isinstance(bound, bool) and bound <= 16
        return False
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call)):
        words = set(name_tokens(test))
        if isinstance(test, cst.Call):
            return bool(words & _PERIODIC_WORDS)
        return bool(words & (_PERIODIC_WORDS | _ONE_OFF_WORDS))
    return False


def under_periodic_guard(ctx, loop: cst.CSTNode, node: Optional[cst.CSTNode] = None) -> bool:
    """Is the current node (or ``node``) inside ``loop`` under a logging/periodic ``if``?"""
    return any(is_periodic_guard(test) for test in _guarded_branches(_path_below(ctx, loop, node)))


_MEMORY_WORDS = frozenset({"empty", "cache", "memory", "mem", "unused", "release"})


def under_memory_switch(ctx, top: cst.CSTNode, node: Optional[cst.CSTNode] = None) -> bool:
    """Is the current node (or ``node``), below ``top``, under an ``if`` whose test names a memory
    setting: ``if args.empty_unused_memory_level >= 1:``, ``if cfg.release_cache:``,
    ``if torch.cuda.memory_allocated() > limit:``? Releasing memory there is the user's choice."""
    for test in _guarded_branches(_path_below(ctx, top, node)):
        for n in [test, *_body_nodes(test, ())]:
            if isinstance(n, (cst.Name, cst.Attribute)) and set(name_tokens(n)) & _MEMORY_WORDS:
                return True
    return False


_OOM_TEXT = re.compile(r"out of memory|outofmemory|out_of_memory|\boom\b|reduce_batch_size", re.IGNORECASE)


def in_oom_handler(ctx) -> bool:
    """Inside an ``except`` that handles running out of memory: ``except torch.cuda.OutOfMemoryError``
    / ``torch.OutOfMemoryError``, or any handler whose code speaks of OOM
    (``if "out of memory" in str(e)``)."""
    for node in reversed(ctx.ancestors):
        if isinstance(node, _SCOPES):
            return False
        if isinstance(node, cst.ExceptHandler):
            types = node.type.elements if isinstance(node.type, cst.Tuple) else [node.type]
            if any(getattr(t, "value", t) is not None and _last_name(getattr(t, "value", t)) == "OutOfMemoryError" for t in types):
                return True
            if _OOM_TEXT.search(ctx.module.code_for_node(node)):
                return True
    return False


def in_test_code(ctx) -> bool:
    """A test module, or inside a ``test*`` function or a ``Test*`` class. The engine applies
    this to every rule whose ``skip_in_tests`` is set; rules need not ask."""
    return is_test_module(ctx.path, ctx.text) or in_test_scope(ctx.ancestors)


_DEBUG_WORDS = frozenset({"debug", "debugging", "anomaly", "sanity", "nan", "profile", "profiling", "profiler", "trace", "tracing"})
_DEBUG_TEXT = re.compile(r"debug|anomaly|profil|sanity", re.IGNORECASE)


def _is_debug_test(test: cst.BaseExpression) -> bool:
    for node in [test, *_body_nodes(test, ())]:
        if isinstance(node, (cst.Name, cst.Attribute)) and set(name_tokens(node)) & _DEBUG_WORDS:
            return True
        if isinstance(node, cst.SimpleString) and _DEBUG_TEXT.search(node.value):
            return True  # os.environ.get("TORCH_DEBUG")
    return False


# Names of code whose purpose is a debugging or profiling tool: `class AutogradProfiler`,
# `def enable_debug_mode`, `profiling_tracer.py`.
_TOOL_NAME_WORDS = frozenset({"debug", "debugging", "anomaly", "profile", "profiler", "profiling"})


def in_debug_branch(ctx, node: Optional[cst.CSTNode] = None) -> bool:
    """Under ``if debug:`` / ``if args.detect_anomaly:`` / ``if os.environ.get("DEBUG"):``, or in a
    function, class or file whose name says debug or profiling (``def enable_debug_mode``,
    ``class AutogradProfiler``, ``profiling_tracer.py``): there the tool is the point."""
    if any(_is_debug_test(test) for test in _guarded_branches(_path_below(ctx, ctx.module, node))):
        return True
    for scope in ctx.ancestors:
        if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) and set(name_tokens(scope.name)) & _TOOL_NAME_WORDS:
            return True
    stem = re.split(r"[\\/]", ctx.path)[-1].rsplit(".", 1)[0]
    return stem.isidentifier() and bool(set(name_tokens(cst.Name(stem))) & _TOOL_NAME_WORDS)


_PER_STEP_NAMES = frozenset({"forward", "step", "train_batch", "train_on_batch"})


def is_per_step_function(func: Optional[cst.CSTNode]) -> bool:
    """The fallback where the project's call graph says nothing: a function *named* to run once
    per training step: ``forward``, ``step``, ``training_step``/``train_step``/any ``*_step``,
    ``*_forward``, a loss function (``loss``, ``*_loss``, ``compute_loss*``). A function merely
    *containing* a training loop is not (its top level runs
    once per call)."""
    if not isinstance(func, cst.FunctionDef):
        return False
    name = func.name.value
    return (name in _PER_STEP_NAMES or name.endswith("_step") or name.endswith("_forward")
            or name.endswith("_loss") or name.startswith("compute_loss") or name == "loss")


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


def grad_disabled_in(loop: cst.CSTNode, ctx) -> bool:
    """Does the loop's own body (not nested functions) enter ``torch.no_grad()`` /
    ``torch.inference_mode()``?"""
    def compute():
        for node in _body_nodes(loop.body, _SCOPES):
            if isinstance(node, cst.WithItem) and isinstance(node.item, cst.Call):
                if ctx.resolve_call(node.item) in _GRAD_OFF:
                    return True
        return False

    return memo(ctx, "grad_disabled_in", loop, compute)


def indentation(ctx, upto: Optional[cst.CSTNode] = None) -> str:
    """The absolute indentation of the statement being visited (or of ancestor ``upto``)."""
    return "".join(ctx.indentation(upto))


def statement_removal_edits(ctx, call: cst.Call) -> Optional[tuple]:
    """Edits deleting the expression statement ``call`` (being visited) from its block: its lines
    go, a trailing comment stays as a comment line, and a block it would empty gets ``pass``.
    None when the call is not a statement alone on its line."""
    from torchlint.context import DELETE_LINES, REPLACE, NodeEdit

    ancestors = ctx.ancestors
    if len(ancestors) < 3 or not isinstance(ancestors[-1], cst.Expr) or ancestors[-1].value is not call:
        return None
    expr, line, block = ancestors[-1], ancestors[-2], ancestors[-3]
    if len(getattr(line, "body", ())) != 1:
        return None
    if isinstance(line, cst.SimpleStatementSuite) or (isinstance(block, cst.IndentedBlock) and len(block.body) == 1):
        return (NodeEdit(expr, "pass", REPLACE),)
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    comment = line.trailing_whitespace.comment
    kept = f"{indentation(ctx)}{comment.value}\n" if comment is not None else ""
    return (NodeEdit(line, kept, DELETE_LINES),)
