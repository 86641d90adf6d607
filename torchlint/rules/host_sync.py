"""TL2xx: host-device synchronisation."""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from torchlint.analysis import (
    bound_names,
    calls_gradient_step,
    enclosing_function,
    enclosing_loops,
    grad_disabled,
    grad_disabled_in,
    is_loader_expression,
    is_training_loop,
    memo,
    method_call,
    name_tokens,
    runs_every_step,
    under_periodic_guard,
)
from torchlint.rules.base import GAP, Rule
from torchlint.words import EVAL_WORDS as _EVAL_WORDS, TRAIN_WORDS as _TRAIN_WORDS
from torchlint.tree import iter_children
from torchlint.torch_api import HOST_SYNC_METHODS

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


def mentions_loader(text: str) -> bool:
    """Prefilter token: ``loader`` in any case (is_loader_expression compares lower-cased names)."""
    return "loader" in text or "Loader" in text or "loader" in text.lower()


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
    name = "host-sync-in-loop"
    summary = "`.item()`/`.cpu()`/`.numpy()`/`.tolist()` in a training loop stalls the GPU every step."
    message = (
        "A host-device sync in a training loop waits for all queued GPU work every step; keep "
        "running values on the device and read them under a logging guard."
    )
    _template = (
        "`.{method}()` in a training loop waits for all queued GPU work every step (a host-device "
        "sync); keep running values on the device (`total += loss.detach()`) and read them under a "
        "logging guard (`if step % log_every == 0:`)."
    )
    _helper_template = (
        "`.{method}()` in `{name}`, which runs every step ({why}), waits for all queued GPU work "
        "(a host-device sync); return the tensor and read it under a logging guard instead."
    )
    uses_project = True
    # ... and only in a training loop (or a function the project proves runs every step): over a `*loader*` (or a DataLoader), or one whose body calls
    # `.backward()` / `.step()` (see analysis.is_training_loop).
    requires = (
        ("item", "cpu", "numpy", "tolist"),
        (mentions_loader, re.compile(rf"\.{GAP}(?:backward|step){GAP}\(")),
    )
    # ... or, in a file the project index says has functions that run every step, a sync alone.
    project_requires = (("item", "cpu", "numpy", "tolist"),)

    def visit_Call(self, node: cst.Call) -> None:
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
        loop = next((l for l in enclosing_loops(self.ctx) if is_training_loop(l, self.ctx)), None)
        first = _sync_methods_in_chain(node)[0]
        if loop is None:
            self._check_per_step_function(node, first)
            return
        if under_periodic_guard(self.ctx, loop, node) or self._is_evaluation(loop):
            return
        if self._already_on_host(node):
            return
        self.report(node, self._template.format(method=first))

    def _check_per_step_function(self, node: cst.Call, first: str) -> None:
        """A sync at any depth of a function the project index proves runs every step (a metric
        helper called from the training loop of another file, Lightning's ``training_step``)."""
        why = runs_every_step(self.ctx)
        if why is None:
            return
        func = enclosing_function(self.ctx)
        if under_periodic_guard(self.ctx, func, node) or grad_disabled(self.ctx) or self._already_on_host(node):
            return
        self.report(node, self._helper_template.format(method=first, name=func.name.value, why=why))

    def _already_on_host(self, node: cst.Call) -> bool:
        """The chain reads a value already on the host: what the loader yielded (before any
        move), or what an earlier ``.cpu()``/``.numpy()``/``.item()`` returned."""
        return self.ctx.semantic.on_host(_chain_origin(node), lambda it: is_loader_expression(it, self.ctx))

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
        if calls_gradient_step(loop, self.ctx):
            return False
        if grad_disabled(self.ctx, upto=loop) or grad_disabled_in(loop, self.ctx):
            return True
        func = enclosing_function(self.ctx)
        if func is not None and set(name_tokens(func.name)) & _EVAL_WORDS:
            return True
        if _is_evaluation_script(self.ctx.path):
            return True
        iterable: Optional[cst.BaseExpression] = loop.iter if isinstance(loop, cst.For) else None
        while isinstance(iterable, cst.Call) and iterable.args:  # enumerate(val_loader)
            if set(name_tokens(iterable.func)) & _EVAL_WORDS:
                return True
            iterable = iterable.args[0].value
        return iterable is not None and bool(set(name_tokens(iterable)) & _EVAL_WORDS)


RULES = [HostSyncInLoop]
