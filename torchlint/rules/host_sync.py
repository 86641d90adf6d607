"""TL2xx: host-device synchronisation."""

from __future__ import annotations

import re
from typing import List, Optional

from torchlint import _cst as cst

from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import UNSAFE
from torchlint.heuristics import is_loader_expression, is_optimizer_like, is_periodic_guard, moves_to_accelerator
from torchlint.loops import (
    calls_gradient_step,
    grad_disabled,
    grad_disabled_in,
    is_training_loop,
    runs_every_step,
    under_periodic_guard,
)
from torchlint.rules.base import GAP, Rule, gated, mentions_loader
from torchlint.syntax import (
    body_nodes, bound_names, enclosing_function, enclosing_loops, guarded_branches, literal_value, memo, method_call,
    name_tokens, scope_types,
)
from torchlint.torch_api import HOST_SYNC_METHODS
from torchlint.tree import iter_children
from torchlint.words import EVAL_WORDS as _EVAL_WORDS, TRAIN_WORDS as _TRAIN_WORDS

# Receivers whose `.cpu()` moves a module, not a tensor: not a per-step host sync.
_MODULE_WORDS = frozenset({"self", "model", "module", "net", "network", "encoder", "decoder"})
# `.cpu().parameters()`: what `.cpu()` returned is a module.
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "state_dict", "buffers", "modules",
                             "children", "eval", "train", "load_state_dict", "named_modules"})
# Roots that are never torch tensors: `np.array(x).tolist()`.
_HOST_LIBRARIES = ("numpy", "pandas")
# Methods after which a value may be on the device.
_MOVES = frozenset({"cuda", "to"})


def _takes_no_positional(call: cst.Call, method: str) -> bool:
    """`.item()`/`.tolist()` take no arguments; `.cpu()`/`.numpy()` only keywords
    (`memory_format=`, `force=`). Anything else is some other class's method."""
    if method in ("item", "tolist"):
        return not call.args
    return all(arg.keyword is not None for arg in call.args)


def _sync_methods_in_chain(call: cst.Call) -> List[str]:
    """Sync methods along a receiver chain, innermost (first executed) first:
    `loss.detach().cpu().numpy()` -> ["cpu", "numpy"]."""
    methods: List[str] = []
    node: cst.BaseExpression = call
    while True:
        if isinstance(node, cst.Call):
            mc = method_call(node)
            if mc is None:
                break
            if mc[1] in HOST_SYNC_METHODS and _takes_no_positional(node, mc[1]):
                methods.append(mc[1])
            node = mc[0]
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            break
    return methods[::-1]


def _base_name(node: cst.BaseExpression) -> Optional[cst.Name]:
    """The name a receiver chain starts from: `np` in `np.array(x).tolist()`."""
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node if isinstance(node, cst.Name) else None


def _is_evaluation_script(path: str) -> bool:
    """`validate.py`, `onnx_validate.py`, `eval.py`, `inference.py`: a file named for
    evaluation and not for training too (`train_eval.py` is not one)."""
    stem = re.split(r"[\\/]", path)[-1].rsplit(".", 1)[0]
    words = set(name_tokens(cst.Name(stem))) if stem.isidentifier() else set(re.split(r"[^a-z0-9]+", stem.lower()))
    return bool(words & _EVAL_WORDS) and not words & _TRAIN_WORDS


def _chain_origin(call: cst.Call) -> cst.BaseExpression:
    """What the first sync of a chain reads: ``loss.detach()`` in ``loss.detach().cpu().numpy()``."""
    node: cst.BaseExpression = call
    origin: cst.BaseExpression = call
    while True:
        if isinstance(node, cst.Call):
            mc = method_call(node)
            if mc is None:
                return origin
            if mc[1] in HOST_SYNC_METHODS and _takes_no_positional(node, mc[1]):
                origin = mc[0]
            node = mc[0]
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return origin


# Builtins that turn a tensor into a Python value (or print it): each waits for the device.
_PY_SYNC_BUILTINS = frozenset({"float", "int", "bool", "print", "min", "max", "sum"})
# Progress-bar methods that format every value they are given (tqdm; W2, issue 29 class 4).
_POSTFIX_METHODS = frozenset({"set_postfix"})
# torch factories that make a tensor on the host unless given `device=` (or a default device).
_HOST_FACTORIES = frozenset({f"torch.{n}" for n in ("randn", "rand", "randint", "randperm", "zeros", "ones", "empty",
                                                    "full", "arange", "linspace", "eye", "tensor", "from_numpy")})
# Predicates whose result is a boolean tensor: a mask.
_MASK_PREDICATES = frozenset({"isnan", "isinf", "isfinite", "eq", "ne", "gt", "ge", "lt", "le", "logical_and",
                              "logical_or", "logical_not"})


def _keeps_dtype(move: cst.Call) -> bool:
    """A move that changes no dtype: ``.cuda()``/``.cuda(0)``, ``.to(device)`` (one positional
    argument, no ``dtype=``)."""
    positional = [a for a in move.args if a.keyword is None]
    return len(positional) <= 1 and not any(a.star or (a.keyword is not None and a.keyword.value == "dtype")
                                            for a in move.args)


# Tensor methods an element goes through before its copy (``boxes.squeeze(2).cpu()``).
_ELEMENT_METHODS = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "detach", "float", "long",
                              "int", "half", "contiguous", "clone", "t"})


def _zipped(target: cst.BaseExpression, iterated: cst.BaseExpression, name: str):
    """``for a, b in zip(x, y)``: (the Name ``name`` among the targets, the iterable it is drawn
    from); (target, iterated) unchanged otherwise."""
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(iterated, cst.Call)
            and isinstance(iterated.func, cst.Name) and iterated.func.value == "zip"):
        return target, iterated
    elements = list(target.elements)
    args = list(iterated.args)
    if len(elements) != len(args) or any(a.keyword is not None or a.star for a in args):
        return target, iterated
    for element, arg in zip(elements, args):
        if isinstance(element.value, cst.Name) and element.value.value == name:
            return element.value, arg.value
    return target, iterated


def _in_grad_off_block(ctx) -> bool:
    """Inside ``with torch.no_grad()``/``inference_mode()`` in a function that runs every training
    step: a block set apart for evaluation. A ``@torch.no_grad()`` decorator on the function itself
    is not (issue 29 class 3: stylegan2-ada's ``AdaptiveAugment.tune`` syncs every step)."""
    from torchlint.loops import _GRAD_OFF

    for node in ctx.ancestors:
        if isinstance(node, cst.With):
            for item in node.items:
                if isinstance(item.item, cst.Call) and ctx.resolve_call(item.item) in _GRAD_OFF:
                    return True
    return False


def _counts_over(iterated: cst.BaseExpression) -> bool:
    """``range(len(t))``, ``range(t.size(0))``, ``range(t.shape[0])``: a loop over positions."""
    if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name) and iterated.func.value == "range"
            and len(iterated.args) == 1):
        return False
    bound = iterated.args[0].value
    if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "len":
        return True
    mc = method_call(bound) if isinstance(bound, cst.Call) else None
    if mc is not None and mc[1] == "size":
        return True
    return isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Attribute) and bound.value.attr.value == "shape"


def _a_value(node: cst.BaseExpression) -> bool:
    """A tensor whose formatting reads its values: a name, or an attribute or item of one
    (``loss``, ``out.loss``, ``losses[0]``), not metadata (``x.shape``, ``x.dtype``) and not a
    call's result (``len(x)``, ``sched.get_last_lr()[0]``, ``loss.item()`` reported on its own)."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Attribute) and node.attr.value in ("shape", "dtype", "device", "ndim", "is_cuda"):
            return False
        node = node.value
    return isinstance(node, cst.Name)


def _only_control_flow(body: cst.BaseSuite) -> bool:
    """A block that only decides whether the step goes on: ``continue``/``break``/``return``/
    ``raise`` (a NaN skip, early stopping). Those syncs are the point."""
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    small = []
    for stmt in statements:
        if not isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return False
        small += list(stmt.body)
    flow = (cst.Continue, cst.Break, cst.Return, cst.Raise, cst.Pass)
    return bool(small) and any(isinstance(s, flow) and not isinstance(s, cst.Pass) for s in small) and all(
        isinstance(s, flow) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)) for s in small)


_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def _in_one_off_branch(ancestors, loop) -> bool:
    """Inside an ``if`` branch (below ``loop``) that ends the loop or the program (``raise``,
    ``return``, ``break``, ``sys.exit(1)``): it runs at most once (DETR's
    ``if not math.isfinite(loss): print(losses); sys.exit(1)``)."""
    below = False
    for node in ancestors:
        if node is loop:
            below = True
            continue
        if below and isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)) and _ends_run(node):
            return True
    return False


def _after_off_step_return(ancestors, func) -> bool:
    """Below ``if step % n != 0: return`` (or ``if step % n: return``) at the top of ``func``:
    the code runs once every n calls (W2, issue 29: lightning-bolts' ConfusedLogitCallback; the
    project index leaves the calls there out of the per-step call graph the same way)."""
    if func is None or not isinstance(func.body, cst.IndentedBlock):
        return False
    inside = next((a for a in ancestors if any(a is s for s in func.body.body)), None)
    if inside is None:
        return False
    for stmt in func.body.body:
        if stmt is inside:
            return False
        if _skips_off_steps(stmt):
            return True
    return False


def _skips_off_steps(stmt) -> bool:
    if not (isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, (cst.IndentedBlock, cst.SimpleStatementSuite))):
        return False
    smalls = []
    for line in stmt.body.body:
        smalls += list(line.body) if isinstance(line, cst.SimpleStatementLine) else [line]
    if not smalls or not isinstance(smalls[-1], cst.Return) or not all(isinstance(s, (cst.Return, cst.Pass)) for s in smalls):
        return False
    test = stmt.test
    if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo):
        return True
    return (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.NotEqual)
            and isinstance(test.left, cst.BinaryOperation) and isinstance(test.left.operator, cst.Modulo)
            and literal_value(test.comparisons[0].comparator) == 0)


def _ends_run(block) -> bool:
    for stmt in block.body:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
        for small in smalls:
            if isinstance(small, (cst.Raise, cst.Return, cst.Break)):
                return True
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                name = func.value if isinstance(func, cst.Name) else (
                    f"{func.value.value}.{func.attr.value}" if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else "")
                if name in _EXITS:
                    return True
    return False


class HostSyncInLoop(Rule):
    """Flags `.item()`, `.cpu()`, `.numpy()` and `.tolist()` on tensors in the body of a training
    loop (a loop over a data loader, or one that calls `.backward()` / `optimizer.step()`).

    Each of these copies a value to the host, so the CPU waits until the GPU has finished every
    kernel queued so far; done every step, the GPU idles while Python queues the next step. A
    chain (`loss.detach().cpu().numpy()`) is one sync and one finding. Calls under a logging
    guard (`if step % n == 0:`, `if verbose:`), after the loop, in functions defined in the loop,
    and evaluation loops (no gradient step, under `no_grad`/`inference_mode` or in an
    `evaluate`/`validate`/`predict` function or file, or over a `val`/`eval`/`test` loader) stay
    silent, as do tensors the loader yielded (still on the host).
    """

    code = "TL201"
    fix_applicability = UNSAFE
    name = "host-sync-in-loop"
    summary = "`.item()`/`.cpu()`/`.numpy()`/`.tolist()` in a training loop stalls the GPU every step."
    message = "Host-device sync every step; keep values on the device, read them under a logging guard"
    hint = (
        "A sync waits for all queued GPU work, every step: the GPU idles while Python catches up. "
        "Keep running values on the device (`total += loss.detach()`) and read them under a logging "
        "guard (`if step % log_every == 0:`)."
    )
    _template = "`.{method}()` syncs with the GPU every step; keep values on the device, read them when logging"
    _implicit_template = "{what} syncs with the GPU every step; keep the value on the device"
    _implicit_hint = (
        "{where}, Python waits here for all queued GPU work (an implicit host-device sync){why}; "
        "keep the value on the device, or read it under a logging guard."
    )
    _helper_template = "`.{method}()` syncs with the GPU every step; return the tensor and read it when logging"
    _helper_hint = (
        "`{name}` runs every step ({why}): the sync waits for all queued GPU work each time; return "
        "the tensor and read it under a logging guard instead."
    )
    uses_project = True
    # ... and only in a training loop (or a function the project proves runs every step): over a `*loader*` (or a DataLoader), or one whose body calls
    # `.backward()` / `.step()` (see loops.is_training_loop).
    # (explicit syncs need `.item()`/`.cpu()`/..., implicit ones only Python syntax: no token)
    requires = ((mentions_loader, gated(re.compile(rf"\.{GAP}(?:backward|step){GAP}\("), "backward", "step")),)
    # a finding is in a training loop (loops.is_training_loop): a `for` over a possible loader (a
    # `*loader*` name, a DataLoader call, or a name the file assigns one to, in any function), or
    # a loop around `.backward()`/`.step()`; or in a function the project says runs every step
    # (project facts keep the file whole and walked everywhere)
    ast_candidate = staticmethod(lambda index: index.loader_loops() or index.stepping_loops())
    # ... or any file the project index says has functions that run every step.
    project_requires = ()

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """Every finding waits for an accelerator: none in a program that never touches one
        (``FileModel.uses_accelerator``, issue 29 class 5: CPU-only teaching code)."""
        if self.ctx.model.uses_accelerator() and not self._in_host_phase():
            super().report(node, message, fix, hint)

    def _in_host_phase(self) -> bool:
        """In a module-level function the program calls only before it first touches an
        accelerator (``FileModel.host_phase_functions``: dlwpt-code's first ``training_loop``,
        called with a CPU model before the notebook picks a device, issue 29 class 5)."""
        body = self.ctx.module.body
        top = next((a for a in self.ctx.ancestors if isinstance(a, cst.FunctionDef)), None)
        if top is None or not any(s is top for s in body):
            return False
        functions = self.ctx.model.host_phase_functions()
        if not functions:
            return False
        name = top.name.value
        ordinal = 0
        for statement in body:
            if statement is top:
                break
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                ordinal += 1
        return (name, ordinal) in functions

    # -- implicit syncs: Python asking a device tensor for a value --------------------------------
    def visit_If(self, node: cst.If) -> None:
        if not _only_control_flow(node.body):  # `if torch.isnan(loss): continue` decides the step
            self._check_implicit(node.test, "`if` on a device tensor", self._on_device)

    def visit_While(self, node: cst.While) -> None:
        self._check_implicit(node.test, "`while` on a device tensor", self._on_device)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        parent = self.ctx.parent
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is node:
            return  # `t[mask] = 0` writes in place: no sync
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            mask = node.slice[0].slice.value
            self._check_implicit(node, "Boolean-mask indexing",
                                 lambda _: self._device_mask(mask, set()))

    def _check_implicit(self, node: cst.BaseExpression, what: str, on_device, why: str = "") -> None:
        """Report ``what`` at ``node`` when the code runs every training step and
        ``on_device(node)`` proves the value lives on the device (asked second: the data-flow
        model is built only for code that runs every step)."""
        where = self._step_context(node)
        if where is not None and on_device(node):
            hint = self._implicit_hint.format(where=where.rstrip(",")[:1].upper() + where.rstrip(",")[1:], why=why)
            self.report(node, self._implicit_template.format(what=what), hint=hint)

    def _implicit_call(self, node: cst.Call) -> bool:
        """``float(t)``/``int(t)``/``bool(t)``/``print(t)``/``min``/``max``/``sum`` of a device
        tensor, ``torch.nonzero``/``torch.masked_select``/``t.nonzero()``: True when reported
        (or when the call is one of these and needs nothing more)."""
        func = node.func
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value in _PY_SYNC_BUILTINS and self.ctx.resolve(func) is None:
            if func.value == "print":
                shown = [a for a in args if not isinstance(a, cst.SimpleString)]
                shown += [p.expression for a in args if isinstance(a, cst.FormattedString)
                          for p in a.parts if isinstance(p, cst.FormattedStringExpression)]
                self._check_implicit(node, "`print` of a device tensor", lambda _: any(
                    self._on_device(a) for a in shown if not isinstance(a, cst.FormattedString)))
                return True
            if func.value == "sum" and (not args or isinstance(args[0], (cst.Call, cst.GeneratorExp, cst.List, cst.Tuple))):
                return True  # sum(losses.values()): tensor additions on the device, no sync
            if len(args) == 1:
                self._check_implicit(node, f"`{func.value}()` of a device tensor", lambda _: self._on_device(args[0]))
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in _POSTFIX_METHODS:
            # tqdm's `bar.set_postfix(loss=loss)` formats each value with str(): it reads the tensor
            shown = [a.value for a in node.args if a.keyword is not None]
            shown += [e.value for a in node.args if a.keyword is None and isinstance(a.value, cst.Dict)
                      for e in a.value.elements if isinstance(e, cst.DictElement)]
            self._check_implicit(node, f"`.{func.attr.value}()` of a device tensor", lambda _: any(
                _a_value(v) and self._on_device(v) for v in shown))
            return True
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("nonzero", "masked_select", "argwhere")):
            return False
        name = self.ctx.resolve_call(node)
        if name in ("torch.nonzero", "torch.masked_select", "torch.argwhere"):
            if args:
                self._check_implicit(node, f"`{name}`", lambda _: self._on_device(args[0]),
                                     " (its output size depends on the data)")
            return True
        if func.attr.value != "masked_select":  # t.nonzero() / t.argwhere()
            self._check_implicit(node, f"`.{func.attr.value}()`", lambda _: self._on_device(func.value),
                                 " (its output size depends on the data)")
            return True
        return False

    def _on_device(self, value: cst.BaseExpression) -> bool:
        return self.ctx.semantic.on_device(value, self._moves)

    def _moves(self, call: cst.CSTNode) -> bool:
        """``x.cuda()``, ``x.to(device)``, or a call of a method of this class that returns its
        argument moved to the device (``FileModel.movers``: pytorch-wgan's
        ``self.get_torch_variable(images)``, issue 29 class 3): its result is on the device. (The
        semantic model asks this of method calls only: a module function that moves, called by
        its bare name, is not followed.)"""
        if moves_to_accelerator(self.ctx, call):
            return True
        if not isinstance(call, cst.Call) or not call.args:
            return False
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        name = func.attr.value
        movers = self.ctx.model.movers()
        if not movers or not any(n == name for _, n, _ in movers):
            return False
        from torchlint.model import scope_of
        from torchlint.movers import class_part, mover_position

        if mover_position(movers, class_part(scope_of(self.ctx.ancestors)), name) is None:
            return False
        return self.ctx.semantic.module_function(func) is not None  # not another binding of the name

    def _device_mask(self, mask: cst.BaseExpression, seen) -> bool:
        """A boolean tensor on the device: a comparison of a device value, its negation or
        combination, ``torch.isnan(t)``-style predicates, or a name bound only to those."""
        if id(mask) in seen:
            return False
        seen.add(id(mask))
        if isinstance(mask, cst.Comparison):
            return self._on_device(mask)
        if isinstance(mask, cst.UnaryOperation) and isinstance(mask.operator, cst.BitInvert):
            return self._device_mask(mask.expression, seen)
        if isinstance(mask, cst.BinaryOperation) and isinstance(mask.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
            return self._device_mask(mask.left, seen) or self._device_mask(mask.right, seen)
        if isinstance(mask, cst.Call):
            name = self.ctx.resolve_call(mask) or ""
            mc = method_call(mask)
            predicate = name.rsplit(".", 1)[-1] if name.startswith("torch.") else (mc[1] if mc else "")
            if predicate in _MASK_PREDICATES or (predicate == "bool" and not mask.args):
                return self._on_device(mask)  # `labels.bool()` of a device tensor
            # `torch.eye(n, dtype=torch.bool).to(device)`: a boolean tensor moved (SimCLR, issue 29 class 3)
            return (mc is not None and moves_to_accelerator(self.ctx, mask) and _keeps_dtype(mask)
                    and self._boolean(mc[0]))
        if isinstance(mask, cst.Name):
            bindings = self.ctx.semantic.lookup(mask)
            return bool(bindings) and all(
                b.kind == "assign" and b.value is not None and self._device_mask(b.value, seen) for b in bindings)
        return False

    def _boolean(self, value: cst.BaseExpression) -> bool:
        """A tensor whose dtype is known to be bool: a torch factory given ``dtype=torch.bool``
        (``torch.eye(n, dtype=torch.bool)``), a comparison, ``.bool()``."""
        if isinstance(value, cst.Comparison):
            return True
        if not isinstance(value, cst.Call):
            return False
        mc = method_call(value)
        if mc is not None and mc[1] == "bool" and not value.args:
            return True
        dtype = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "dtype"), None)
        return (dtype is not None and self.ctx.resolve(dtype) == "torch.bool"
                and (self.ctx.resolve_call(value) or "") in _HOST_FACTORIES)

    def _step_context(self, node: cst.CSTNode) -> Optional[str]:
        """Where ``node`` runs once per training step ("in a training loop", or in a function the
        project index proves per-step), outside guards and evaluation; None elsewhere. Implicit
        syncs count only in loops that take the gradient step themselves."""
        return self._step_context_from(node, enclosing_loops(self.ctx), 0)

    def _step_context_from(self, node: cst.CSTNode, loops: List[cst.CSTNode], start: int) -> Optional[str]:
        """``_step_context`` with the loops before ``start`` known not to be training loops. The
        innermost training loop decides; a loop without a gradient step of its own decides None,
        so whether it is a training loop at all (``is_training_loop``: the model's batch facts,
        the costly part) is asked only when the loops around it, or the function, would answer
        otherwise (most loops of model code: never)."""
        for index in range(start, len(loops)):
            loop = loops[index]
            if calls_gradient_step(self.ctx, loop):  # a training loop that takes the step
                if under_periodic_guard(self.ctx, loop, node) or self._is_evaluation(loop):
                    return None
                if _in_one_off_branch(self.ctx.ancestors, loop) or self._steps_host_parameters(loop):
                    return None
                return "in a training loop"
            otherwise = self._step_context_from(node, loops, index + 1)
            if otherwise is None or is_training_loop(self.ctx, loop):
                return None  # a training loop with no step of its own: no implicit sync counted
            return otherwise
        why = runs_every_step(self.ctx)
        if why is None:
            return None
        func = enclosing_function(self.ctx)
        if (under_periodic_guard(self.ctx, func, node) or _in_grad_off_block(self.ctx)
                or _after_off_step_return(self.ctx.ancestors, func)):
            return None
        return f"in `{func.name.value}`, which runs every step ({why}),"

    def visit_Call(self, node: cst.Call) -> None:
        if self._implicit_call(node):
            return
        mc = method_call(node)
        if mc is None or mc[1] not in HOST_SYNC_METHODS or not _takes_no_positional(node, mc[1]):
            return
        if self._inside_reported_chain(node):
            return
        if self._not_a_tensor(mc[0]):
            return
        parent = self.ctx.parent
        if mc[1] == "cpu" and isinstance(parent, cst.Attribute) and parent.attr.value in _MODULE_METHODS:
            return
        loop = next((l for l in enclosing_loops(self.ctx) if is_training_loop(self.ctx, l)), None)
        first = _sync_methods_in_chain(node)[0]
        if loop is None:
            self._check_per_step_function(node, first)
            return
        if under_periodic_guard(self.ctx, loop, node):
            return
        if self._is_evaluation(loop):
            if mc[1] == "item":  # one sync per element, even in evaluation (issue 29 class 4)
                self._per_element(node, mc[0], loop)
            elif first == "cpu":  # `boxes.squeeze(2).cpu().numpy()`: one copy per element
                self._per_element(node, _chain_origin(node), loop, "cpu")
            return
        if (self._already_on_host(node) or _in_one_off_branch(self.ctx.ancestors, loop)
                or self._steps_host_parameters(loop)):
            return
        fix = None
        if first == "item" and mc[1] == "item":
            fix = _accumulation_fix(self.ctx, node, loop) or _per_element_fix(self.ctx, node, loop, self._on_device)
        self.report(node, self._template.format(method=first), fix)

    # -- per-element reads and formatting (issue 29 class 4) ------------------------------------
    def _per_element(self, node: cst.Call, receiver: cst.BaseExpression, loop: cst.CSTNode,
                     method: str = "item") -> bool:
        """``t[i].item()`` in ``for i in range(len(t))`` (or ``v.item()`` in ``for v in t`` / a
        comprehension over ``t``) inside a loop over batches, ``t`` on the device: a sync per
        element, in evaluation too, where one ``t.tolist()`` would do. Also ``v.cpu()`` (through
        tensor methods: ``boxes.squeeze(2).cpu()``) of an element of ``t``, or of ``zip(..., t)``
        (pytorch-YOLOv4's evaluate: one copy per image where one ``t.cpu()`` would do). True when
        reported."""
        element: Optional[cst.BaseExpression] = None
        index: Optional[str] = None
        if method == "cpu":
            while isinstance(receiver, cst.Call) and method_call(receiver) is not None and \
                    method_call(receiver)[1] in _ELEMENT_METHODS:
                receiver = method_call(receiver)[0]
            if not isinstance(receiver, cst.Name):
                return False
        if (isinstance(receiver, cst.Subscript) and len(receiver.slice) == 1
                and isinstance(receiver.slice[0].slice, cst.Index) and isinstance(receiver.slice[0].slice.value, cst.Name)):
            element, index = receiver.value, receiver.slice[0].slice.value.value
        elif isinstance(receiver, cst.Name):
            index = receiver.value
        if index is None:
            return False
        for ancestor in reversed(self.ctx.ancestors):
            if ancestor is loop:
                return False
            target = iterated = None
            if isinstance(ancestor, cst.For):
                target, iterated = ancestor.target, ancestor.iter
            elif isinstance(ancestor, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                target, iterated = ancestor.for_in.target, ancestor.for_in.iter
            if method == "cpu" and element is None and iterated is not None:
                target, iterated = _zipped(target, iterated, index)
            if not (isinstance(target, cst.Name) and target.value == index) or iterated is None:
                continue
            if element is None:  # `for v in t: v.item()`
                tensor = iterated
            elif _counts_over(iterated):  # `for i in range(len(t)): t[i].item()`
                tensor = element
            else:
                return False
            kinds = (cst.Name, cst.Attribute, cst.Subscript) if method == "cpu" else (cst.Name, cst.Attribute)
            if not (isinstance(tensor, kinds) and self._on_device(tensor)):
                return False
            if _in_one_off_branch(self.ctx.ancestors, loop) or self._already_on_host(node):
                return False
            name = self.ctx.module.code_for_node(tensor)
            if method == "cpu":
                self.report(node, f"`.cpu()` per element syncs with the GPU once per element; copy `{name}` once",
                            hint=(f"Each `.cpu()` waits for all queued GPU work; `{name}.cpu()` before the loop copies "
                                  "the whole tensor in one sync."))
                return True
            self.report(node, f"`.item()` per element syncs with the GPU once per element; read `{name}.tolist()` once",
                        hint=(f"Each `.item()` waits for all queued GPU work; `{name}.tolist()` copies the whole "
                              "tensor in one sync (or keep the values on the device and read them once)."))
            return True
        return False

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        """``f"{loss:.4f}"`` formats a device tensor: ``Tensor.__format__`` reads its value."""
        parent, grand = self.ctx.parent, (self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None)
        if (isinstance(parent, cst.Arg) and isinstance(grand, cst.Call) and isinstance(grand.func, cst.Name)
                and grand.func.value == "print"):
            return  # print's check reads its f-strings
        shown = [p.expression for p in node.parts if isinstance(p, cst.FormattedStringExpression)]
        if shown:
            self._check_implicit(node, "Formatting a device tensor", lambda _: any(
                _a_value(e) and self._on_device(e) for e in shown))

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        """``"loss %.4f" % loss``: %-formatting reads the device tensor's value."""
        if not (isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString))):
            return
        right = node.right
        values = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
        self._check_implicit(node, "Formatting a device tensor", lambda _: any(
            _a_value(v) and self._on_device(v) for v in values))

    def _check_per_step_function(self, node: cst.Call, first: str) -> None:
        """A sync at any depth of a function the project index proves runs every step (a metric
        helper called from the training loop of another file, Lightning's ``training_step``)."""
        why = runs_every_step(self.ctx)
        if why is None:
            return
        func = enclosing_function(self.ctx)
        if (under_periodic_guard(self.ctx, func, node) or _in_grad_off_block(self.ctx)
                or _after_off_step_return(self.ctx.ancestors, func) or self._already_on_host(node)):
            return
        self.report(node, self._helper_template.format(method=first),
                    hint=self._helper_hint.format(name=func.name.value, why=why))

    def _already_on_host(self, node: cst.Call) -> bool:
        """The chain reads a value already on the host: what the loader yielded (before any
        move), what an earlier ``.cpu()``/``.numpy()``/``.item()`` returned, or a tensor a torch
        factory made with no device (``noise = torch.randn(n, d)``)."""
        origin = _chain_origin(node)
        return (self.ctx.semantic.on_host(origin, lambda it: is_loader_expression(self.ctx, it))
                or self._host_made(origin))

    def _host_made(self, origin: cst.BaseExpression) -> bool:
        """A name every binding of which is a torch factory call without ``device=`` whose
        arguments are not on the device, in a file that sets no default device (W2, issue 29:
        Practical_DL's ``noise.cuda() if use_cuda else noise.cpu()``)."""
        if not isinstance(origin, cst.Name) or "set_default" in self.ctx.text:
            return False
        bindings = self.ctx.semantic.lookup(origin)
        if not bindings:
            return False
        return all(binding.kind == "assign" and binding.value is not None and self._host_factory_call(binding.value)
                   for binding in bindings)

    def _host_factory_call(self, value: cst.BaseExpression) -> bool:
        """A torch factory call without ``device=`` whose arguments are not on the device (in a
        file that sets no default device: the caller asks that)."""
        if not isinstance(value, cst.Call) or "set_default" in self.ctx.text:
            return False
        name = self.ctx.resolve_call(value)
        if name not in _HOST_FACTORIES or any(
                (a.keyword is not None and a.keyword.value == "device") or a.star or self._on_device(a.value)
                for a in value.args):
            return False
        if name == "torch.tensor" and not (value.args and isinstance(
                value.args[0].value, (cst.List, cst.Tuple, cst.Integer, cst.Float))):
            return False  # `torch.tensor(t)` of a tensor keeps its device: only literals count
        return True

    def _steps_host_parameters(self, loop: cst.CSTNode) -> bool:
        """Does every optimizer the loop steps update only parameters made on the host
        (``patch = nn.Parameter(torch.zeros(3, h, w))``, ``optimizer = SGD([patch])`` in the same
        function)? Then each ``backward()`` of a loss computed on the device ends in a copy of the
        gradient to the host, which waits for the device, and a sync after it costs nothing more
        (uvadlc tutorial10's adversarial patch, issue 29 class 5); on the host there is nothing to
        wait for at all."""
        def compute() -> bool:
            stepped = []
            for node in body_nodes(loop.body, scope_types()):
                mc = method_call(node)
                if mc is not None and mc[1] == "step" and is_optimizer_like(mc[0]):
                    stepped.append(mc[0])
            return bool(stepped) and all(self._host_parameter_optimizer(o) for o in stepped)

        return memo(self.ctx, "steps_host_parameters", loop, compute)

    def _host_parameter_optimizer(self, optimizer: cst.BaseExpression) -> bool:
        """A name bound only to ``torch.optim.X([p, ...], ...)`` with every ``p`` a host parameter."""
        if not isinstance(optimizer, cst.Name):
            return False
        bindings = self.ctx.semantic.lookup(optimizer)
        if not bindings:
            return False
        for binding in bindings:
            value = binding.value
            if binding.kind != "assign" or not isinstance(value, cst.Call) or not value.args:
                return False
            if not (self.ctx.resolve_call(value) or "").startswith("torch.optim."):
                return False
            params = value.args[0]
            if params.keyword is not None or params.star or not isinstance(params.value, (cst.List, cst.Tuple)):
                return False
            elements = params.value.elements
            if not elements or not all(isinstance(e, cst.Element) and self._host_parameter(e.value) for e in elements):
                return False
        return True

    def _host_parameter(self, value: cst.BaseExpression) -> bool:
        """``nn.Parameter(<a torch factory with no device>)``, or a name bound only to one."""
        if isinstance(value, cst.Name):
            bindings = self.ctx.semantic.lookup(value)
            return bool(bindings) and all(
                b.kind == "assign" and b.value is not None and not isinstance(b.value, cst.Name)
                and self._host_parameter(b.value) for b in bindings)
        if not (isinstance(value, cst.Call) and self.ctx.resolve_call(value) == "torch.nn.Parameter" and value.args):
            return False
        made = value.args[0]
        return made.keyword is None and not made.star and self._host_factory_call(made.value)

    def _inside_reported_chain(self, node: cst.Call) -> bool:
        """Is `node` the receiver of an outer sync call (`x.cpu()` in `x.cpu().numpy()`)?"""
        current: cst.CSTNode = node
        for ancestor in reversed(self.ctx.ancestors):
            if isinstance(ancestor, (cst.Attribute, cst.Subscript)) and ancestor.value is current:
                current = ancestor
            elif isinstance(ancestor, cst.Call) and ancestor.func is current:
                if (
                    isinstance(current, cst.Attribute)
                    and current.attr.value in HOST_SYNC_METHODS
                    and _takes_no_positional(ancestor, current.attr.value)
                ):
                    return True
                current = ancestor
            else:
                return False
        return False

    def _not_a_tensor(self, receiver: cst.BaseExpression) -> bool:
        """`model.cpu()` moves a module; `np.array(x).tolist()` is already on the host."""
        if isinstance(receiver, (cst.Name, cst.Attribute)):
            last = receiver.value if isinstance(receiver, cst.Name) else receiver.attr.value
            tokens = name_tokens(cst.Name(last))
            if last == "self" or (tokens and tokens[-1] in _MODULE_WORDS):
                return True
        base = _base_name(receiver)
        resolved = self.ctx.resolve(base) if base is not None else None
        return bool(resolved) and resolved.split(".", 1)[0] in _HOST_LIBRARIES

    def _is_evaluation(self, loop: cst.CSTNode) -> bool:
        if calls_gradient_step(self.ctx, loop):
            return False
        if grad_disabled(self.ctx, upto=loop) or grad_disabled_in(self.ctx, loop):
            return True
        func = enclosing_function(self.ctx)
        if func is not None and set(name_tokens(func.name)) & _EVAL_WORDS:
            return True
        if (func is not None and any(s is func for s in self.ctx.module.body)
                and func.name.value in self.ctx.model.grad_free_functions()):
            return True  # every call of it runs under the caller's no_grad (issue 29 class 3)
        if _is_evaluation_script(self.ctx.path):
            return True
        iterable: Optional[cst.BaseExpression] = loop.iter if isinstance(loop, cst.For) else None
        while isinstance(iterable, cst.Call) and iterable.args:  # enumerate(val_loader)
            if set(name_tokens(iterable.func)) & _EVAL_WORDS:
                return True
            iterable = iterable.args[0].value
        return iterable is not None and bool(set(name_tokens(iterable)) & _EVAL_WORDS)


# -- the fixes ----------------------------------------------------------------------------------
# Arithmetic a tensor takes as a Python number does: `loss.item() * x.size(0)` (names, not the
# classes: a libcst class named at import would load libcst with the rule modules)
_ARITHMETIC = frozenset({"Add", "Subtract", "Multiply", "Divide"})


def _accumulation_fix(ctx, call: cst.Call, loop: cst.CSTNode) -> Optional[FixSpec]:
    """``acc += loss.item()`` (or ``acc = acc + loss.item() * n``) where ``acc`` is a number
    bound before the loop: the sum stays on the device (``loss.detach()``) and each read of
    ``acc`` (after the loop, or under the loop's periodic guard) becomes ``float(acc)``
    (``int(acc)`` for a count started at ``0``: ``(pred == y).sum().item()``). None when
    ``acc`` is read elsewhere in the loop (every step: the sync would only move), assigned in
    any other way, or read from another function."""
    ancestors = ctx.ancestors
    child: cst.CSTNode = call
    index = len(ancestors) - 1
    while index >= 0 and isinstance(ancestors[index], cst.BinaryOperation) and (
            type(ancestors[index].operator).__name__ in _ARITHMETIC):
        child, index = ancestors[index], index - 1
    if index < 0:
        return None
    owner = ancestors[index]
    if isinstance(owner, cst.AugAssign) and isinstance(owner.operator, cst.AddAssign) and owner.value is child:
        target = owner.target
    elif (isinstance(owner, cst.BinaryOperation) and isinstance(owner.operator, cst.Add) and owner.right is child
          and index >= 1 and isinstance(ancestors[index - 1], cst.Assign) and ancestors[index - 1].value is owner
          and len(ancestors[index - 1].targets) == 1):
        target = ancestors[index - 1].targets[0].target
        if not (isinstance(owner.left, cst.Name) and isinstance(target, cst.Name) and owner.left.value == target.value):
            return None
        owner = ancestors[index - 1]
    else:
        return None
    if not isinstance(target, cst.Name):
        return None
    acc = target.value
    scope = enclosing_function(ctx) or ctx.module
    if isinstance(scope, cst.FunctionDef) and any(
            isinstance(n, (cst.Global, cst.Nonlocal)) for n in iter_children_deep(scope)):
        return None
    init = None
    reads: List[cst.Name] = []
    for node, path in _names_with_paths(scope, acc):
        if any(isinstance(p, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) for p in path[1:]):
            return None  # read or bound in a nested scope: not followed
        parent = path[-1] if path else None
        in_loop = any(p is loop for p in path)
        if parent is owner and (node is target or (isinstance(owner, cst.Assign) and node is owner.value.left)):
            continue  # the accumulation itself
        value = _paired_value(path)
        if isinstance(parent, cst.AssignTarget) or value is not None:
            if not isinstance(value, (cst.Integer, cst.Float)):
                return None
            if not in_loop:
                if init is not None:
                    return None  # bound twice before the loop
                init = value
            continue  # `running = 0.0` again under the logging guard
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.Del, cst.For, cst.WithItem, cst.AsName,
                               cst.NamedExpr, cst.Param, cst.Global, cst.Nonlocal)) or isinstance(parent, cst.Attribute) and parent.attr is node:
            return None
        if isinstance(parent, (cst.Tuple, cst.List, cst.StarredElement, cst.Element)) and any(
                isinstance(p, (cst.AssignTarget, cst.For)) for p in path):
            return None
        if in_loop and not any(is_periodic_guard(t) for t in guarded_branches(_below(path, loop) + [node])):
            return None  # read every step
        reads.append(node)
    if init is None or not reads:
        return None
    # `acc += (pred == y).sum().item()` stays an int; `... .item() / len(pred)` is a float
    count = isinstance(init, cst.Integer) and child is call and _counts(call)
    cast = "int" if count else "float"
    # a count of comparisons carries no graph: `.item()` goes; anything else is detached
    kept = NodeEdit(call, ctx.module.code_for_node(call.func.value)) if count else NodeEdit(call.func.attr, "detach")
    edits = [kept] + [NodeEdit(r, f"{cast}({acc})") for r in reads]
    return FixSpec(UNSAFE, f"Sum on the device (`.detach()`), read `{cast}({acc})` when logging", tuple(edits))


def _paired_value(path: List[cst.CSTNode]) -> Optional[cst.BaseExpression]:
    """The value a Name gets from the assignment it is the target of, at the end of ``path``:
    ``acc = 0.0``, or ``acc`` in ``acc, seen = 0.0, 0`` (a tuple of targets given a tuple of
    values); None for anything else."""
    if len(path) >= 2 and isinstance(path[-1], cst.AssignTarget) and isinstance(path[-2], cst.Assign):
        return path[-2].value if len(path[-2].targets) == 1 else None
    if (len(path) >= 4 and isinstance(path[-1], cst.Element) and isinstance(path[-2], cst.Tuple)
            and isinstance(path[-3], cst.AssignTarget) and isinstance(path[-4], cst.Assign)
            and len(path[-4].targets) == 1 and path[-3].target is path[-2]):
        values = path[-4].value
        elements = list(path[-2].elements)
        if not isinstance(values, cst.Tuple) or len(values.elements) != len(elements) or any(
                isinstance(e, cst.StarredElement) for e in [*elements, *values.elements]):
            return None
        index = next(i for i, e in enumerate(elements) if e is path[-1])
        return values.elements[index].value
    return None


def _counts(call: cst.Call) -> bool:
    """``(pred == y).sum().item()``, ``pred.eq(y).sum().item()``: an integer count."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    mc = method_call(receiver) if receiver is not None else None
    if mc is None or mc[1] != "sum" or receiver.args:
        return False
    inner = mc[0]
    while isinstance(inner, cst.Call) and method_call(inner) is not None and method_call(inner)[1] in ("squeeze", "view", "flatten", "long", "int"):
        inner = method_call(inner)[0]
    if isinstance(inner, cst.Comparison):
        return True
    mc = method_call(inner)
    return mc is not None and mc[1] in ("eq", "ne", "gt", "lt", "ge", "le")


def _below(path: List[cst.CSTNode], loop: cst.CSTNode) -> List[cst.CSTNode]:
    for index, node in enumerate(path):
        if node is loop:
            return path[index + 1:]
    return path


def iter_children_deep(root: cst.CSTNode):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(iter_children(node))


def _names_with_paths(root: cst.CSTNode, name: str):
    """(Name node spelt ``name``, its ancestors from ``root``) under ``root``."""
    stack: List[tuple] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, cst.Name) and node.value == name:
            yield node, list(path)
            continue
        inner = path + (node,)
        stack.extend((child, inner) for child in reversed(list(iter_children(node))))


# Tensor methods that return one tensor (not a tuple, as `max(dim)`, `topk`, `sort` do).
_TENSOR_METHODS = frozenset({"argmax", "argmin", "flatten", "view", "reshape", "squeeze", "detach", "long", "int",
                             "float", "round", "sigmoid", "softmax", "cpu", "cuda", "to", "clone"})


def _tensor_made(ctx, iterable: cst.BaseExpression) -> bool:
    """A name bound only to a ``torch.`` call or to a tensor method that returns one tensor
    (``preds = out.argmax(1)``): iterating it yields 0-d tensors, and ``.tolist()`` exists."""
    if not isinstance(iterable, cst.Name):
        return False
    bindings = ctx.semantic.lookup(iterable)
    if not bindings:
        return False
    for binding in bindings:
        value = binding.value
        if binding.kind != "assign" or not isinstance(value, cst.Call):
            return False
        method = method_call(value)
        resolved = ctx.semantic.resolve_call(value) or ""
        if not (resolved.startswith("torch.") or (method is not None and method[1] in _TENSOR_METHODS)):
            return False
    return True


def _per_element_fix(ctx, call: cst.Call, loop: cst.CSTNode, on_device) -> Optional[FixSpec]:
    """``for v in t: ... v.item() ...`` where ``t`` is a device tensor and every read of ``v``
    in that loop is ``v.item()``: one copy, ``for v in t.tolist():``, and ``v`` read as is."""
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(receiver, cst.Name):
        return None
    inner = next((a for a in reversed(ctx.ancestors) if isinstance(a, cst.For) and isinstance(a.target, cst.Name)
                  and a.target.value == receiver.value), None)
    if inner is None or inner is loop or not any(a is loop for a in ctx.ancestors):
        return None
    if not isinstance(inner.iter, (cst.Name, cst.Attribute)) or not (on_device(inner.iter) or _tensor_made(ctx, inner.iter)):
        return None
    items = []
    for node, path in _names_with_paths(inner.body, receiver.value):
        parent = path[-1] if path else None
        grand = path[-2] if len(path) >= 2 else None
        if not (isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "item"
                and isinstance(grand, cst.Call) and grand.func is parent and not grand.args):
            return None
        items.append(grand)
    if inner.orelse is not None or not items:
        return None
    iterated = ctx.module.code_for_node(inner.iter)
    edits = [NodeEdit(inner.iter, f"{iterated}.tolist()")] + [NodeEdit(i, receiver.value) for i in items]
    return FixSpec(UNSAFE, f"Copy once: `for {receiver.value} in {iterated}.tolist()`", tuple(edits))


RULES = [HostSyncInLoop]
