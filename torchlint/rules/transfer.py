"""TL2xx: host-device transfers (copies and synchronisation between the CPU and the device)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from torchlint import _cst as cst

from torchlint.context import DELETE_LINES, FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.fixbuilders import statement_removal_edits, with_keyword_args
from torchlint.heuristics import in_debug_branch, is_accelerator_device, is_per_step_function
from torchlint.imports import dotted_name
from torchlint.kinds import ARRAY_METHODS, NUMPY_ARRAY_FUNCTIONS, NUMPY_RANDOM_SIZE
from torchlint.kinds import DEFAULT as PINNED_DEFAULT
from torchlint.kinds import TENSOR_COLLATES, gpu_flags
from torchlint.kinds import NUMPY_DTYPES as _NUMPY_DTYPES
from torchlint.kinds import TORCH_DTYPES as _TORCH_DTYPES
from torchlint.loops import is_training_loop, runs_every_step, under_periodic_guard
from torchlint.model import scope_of
from torchlint.rules.base import GAP, Rule
from torchlint.semantic import ASSIGN, DEF, LOOP, PARAM
from torchlint.syntax import (
    UNKNOWN,
    enclosing_function,
    enclosing_loops,
    get_arg,
    has_star_args,
    literal_value,
    method_call,
    move_arguments,
    name_tokens,
)
from torchlint.torch_api import DATALOADER_PARAMS, TENSOR_CUDA_PARAMS, TENSOR_TO_PARAMS
from torchlint.tree import walk
from torchlint.words import SETUP_WORDS, TIMED_ITERATOR_WORDS, TIMING_WORDS

PIN_MEMORY = DATALOADER_PARAMS.index("pin_memory")
COLLATE_FN = DATALOADER_PARAMS.index("collate_fn")
# Methods of a batch container that hand its tensors through: `{k: v.cuda() for k, v in batch.items()}`.
_CONTAINER_VIEWS = frozenset({"items", "values"})
MOVE_CALL = re.compile(rf"\.{GAP}(?:to|cuda){GAP}\(")
# `.to(...)`/`.cuda(...)` as TL203 reads them: `memory_format=` too (a layout the copy makes on the
# device: `images.to(device=device, memory_format=torch.channels_last)`, Pytorch-UNet).
_TO_PARAMS = (*TENSOR_TO_PARAMS, "memory_format")
_CUDA_PARAMS = (*TENSOR_CUDA_PARAMS, "memory_format")


class NonBlockingTransfer(Rule):
    """Flags ``.to(device)`` / ``.cuda()`` of a batch from a ``pin_memory=True`` DataLoader
    without ``non_blocking=True``.

    The batch is a loop variable of a ``for`` over the loader (through names, ``self``
    attributes, ``enumerate``/``tqdm``), or read from one (``batch[0]``, ``batch["x"]``, the
    values of ``batch.items()`` in a comprehension), still as the loader yielded it: the tensor
    the pin-memory thread put in page-locked memory. Silent: loaders that are not known to pin
    (``pin_memory=cfg.pin``, ``**kwargs``), loaders with a ``collate_fn`` (a batch may then be
    an object whose ``.to`` takes no ``non_blocking``), values computed from the batch
    (``x.float()`` is a new, pageable tensor), moves to the host or to a dtype, and
    ``non_blocking=<variable>``.
    """

    code = "TL203"
    name = "non-blocking-transfer"
    summary = "A batch from a pinned `DataLoader` is copied to the GPU without `non_blocking=True`."
    message = "Copy of a pinned batch blocks the host; pass `non_blocking=True`"
    hint = (
        "The batch comes from a `pin_memory=True` DataLoader, but the copy to the GPU blocks the host "
        "until it is done; a non-blocking copy overlaps with queued GPU work."
    )
    requires = (("pin_memory",), (MOVE_CALL,))
    # a move in this statement; the pinned loader may be anywhere in the file (the whole-file
    # model's batches and pinned loaders: a loader built in `setup()`, a batch drawn in `step()`)
    ast_candidate = staticmethod(lambda index: bool(index.method_calls("to", "cuda"))
                                 and index.whole().mentions("pin_memory"))
    fix_applicability = SAFE
    tags = ("performance",)
    uses_project = True  # FileModel.uses_accelerator's project half

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """No copy to a device blocks in a program that never touches an accelerator
        (``FileModel.uses_accelerator``, issue 29 class 5)."""
        if self.ctx.model.uses_accelerator():
            super().report(node, message, fix, hint)

    def visit_Call(self, node: cst.Call) -> None:
        method = method_call(node)
        if method is None or method[1] not in ("to", "cuda"):
            return
        bound = move_arguments(node, _TO_PARAMS if method[1] == "to" else _CUDA_PARAMS)
        if bound is None:
            return
        if "non_blocking" in bound and literal_value(bound["non_blocking"]) is not False:
            return  # True already, or unknown
        if method[1] == "to" and not is_accelerator_device(self.ctx, bound.get("device")):
            return
        if not self._from_pinned_batch(method[0]):
            loop = next((l for l in enclosing_loops(self.ctx) if isinstance(l, cst.For) and self._pinned_loop(l)), None)
            if loop is None or not self._straight_from(method[0], loop, set()):
                return
        self.report(node, fix=self._fix(node, bound))

    def _from_pinned_batch(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a batch, or a part of one, as drawn from loaders that all pin (the
        whole-file model: ``batch_loaders`` of this scope, ``pinned_loaders``), with the default
        collate function or one known to give tensors (``transformers.default_data_collator``)?
        Another collate function may give objects whose ``.to`` takes no ``non_blocking`` (DETR's
        ``NestedTensor``), in the batch or in its parts."""
        root = value
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        model = self.ctx.model
        scope = scope_of(self.ctx.ancestors)
        loaders = model.batch_loaders(scope).get(root.value)
        if not loaders:
            return False
        function = scope[-1][1] if scope and scope[-1][0] == "d" else None
        handed = model.pinned_parameters() if function is not None else frozenset()
        return all(model.pinned_loader(scope, loader) == PINNED_DEFAULT or (function, loader) in handed
                   for loader in loaders)

    def _pinned_loop(self, loop: cst.For) -> bool:
        loaders = self.ctx.semantic.loader_calls(loop.iter)
        if not loaders:
            return self._pinned_parameter(loop.iter)
        return all(self._pins(call) for call in loaders)

    def _pinned_parameter(self, iterable: cst.BaseExpression) -> bool:
        """A loop over a parameter every call of the function in the file hands a pinned loader
        (``train(model, train_loader)``: the whole-file model's ``pinned_parameters``, issue 29
        class 2), through ``enumerate``/``tqdm``."""
        while isinstance(iterable, cst.Call) and iterable.args and (
                dotted_name(iterable.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm", "iter"):
            iterable = iterable.args[0].value
        if not isinstance(iterable, cst.Name):
            return False
        bindings = self.ctx.semantic.lookup(iterable)
        if not bindings or len(bindings) != 1 or bindings[0].kind != PARAM:
            return False
        function = enclosing_function(self.ctx)
        if function is None:
            return False
        return (function.name.value, iterable.value) in self.ctx.model.pinned_parameters()

    def _pins(self, call: cst.Call) -> bool:
        """A DataLoader known to pin its batches (``pin_memory=True``, or
        ``=torch.cuda.is_available()``: true wherever there is a GPU to copy to), with the default
        collate function or one known to give tensors (``transformers.default_data_collator``)."""
        spread: dict = {}
        if has_star_args(call):
            spread_ = self._spread_keywords(call)
            if spread_ is None:
                return False
            spread = spread_
        pin = get_arg(call, "pin_memory", PIN_MEMORY)
        if pin is None and "pin_memory" not in spread:
            return False
        value = pin.value if pin is not None else spread["pin_memory"]
        if literal_value(value) is True:
            pass
        elif isinstance(value, cst.Name):  # `pin_memory = torch.cuda.is_available()` at the top level
            if value.value not in gpu_flags(self.ctx.text):
                return False
        elif not (
                isinstance(value, cst.Call) and not value.args
                and self.ctx.resolve_call(value) == "torch.cuda.is_available"):
            return False
        collate = get_arg(call, "collate_fn", COLLATE_FN)
        collate_value = collate.value if collate is not None else spread.get("collate_fn")
        if collate_value is None or literal_value(collate_value) is None:
            return True
        return dotted_name(collate_value) is not None and self.ctx.resolve(collate_value) in TENSOR_COLLATES

    def _spread_keywords(self, call: cst.Call) -> Optional[dict]:
        """The keywords ``**loader_args`` passes, when the call spreads only names bound once, in
        the same scope, to ``dict(k=v, ...)`` or a ``{"k": v}`` literal with string keys; None
        when any spread is unknown (``*args``, a parameter, a dict built elsewhere)."""
        found: dict = {}
        for arg in call.args:
            if arg.star == "*":
                return None
            if arg.star != "**":
                continue
            if not isinstance(arg.value, cst.Name):
                return None
            bindings = self.ctx.semantic.lookup(arg.value)
            if not bindings or len(bindings) != 1 or bindings[0].kind != ASSIGN or bindings[0].value is None:
                return None
            value = bindings[0].value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict" \
                    and self.ctx.semantic.lookup(value.func) is None:
                for item in value.args:
                    if item.keyword is None or item.star:
                        return None
                    found[item.keyword.value] = item.value
            elif isinstance(value, cst.Dict):
                for element in value.elements:
                    key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
                    if not isinstance(key, str):
                        return None
                    found[key] = element.value
            else:
                return None
        return found

    def _straight_from(self, value: cst.BaseExpression, loop: cst.For, seen: set) -> bool:
        """Is ``value`` a tensor as ``loop``'s loader yielded it: a loop variable, a read from one
        (``batch[0]``, ``batch.x``), a name bound only to such reads, or a comprehension variable
        over ``batch.items()``/``batch.values()``/``batch``?"""
        while isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        if not isinstance(value, cst.Name) or id(value) in seen:
            return False
        seen.add(id(value))
        bindings = self.ctx.semantic.lookup(value)
        if not bindings:
            return False
        for b in bindings:
            if b.kind == LOOP and b.statement is loop:
                continue
            if b.kind == LOOP and isinstance(b.statement, cst.CompFor):
                source = b.value
                call = method_call(source)
                if call is not None and call[1] in _CONTAINER_VIEWS and not source.args:
                    source = call[0]
                if self._straight_from(source, loop, seen):
                    continue
                return False
            source = b.value
            if b.kind == ASSIGN and source is None and isinstance(b.statement, cst.Assign):
                source = b.statement.value  # `images, labels = batch`: each element is read from it
            if b.kind == ASSIGN and isinstance(source, (cst.Name, cst.Subscript, cst.Attribute)):
                if self._straight_from(source, loop, seen):
                    continue
            return False
        return True

    def _fix(self, node: cst.Call, bound: dict) -> FixSpec:
        true = cst.Name("True")
        current = bound.get("non_blocking")
        if current is not None:
            edit = NodeEdit(current, true)
        else:
            edit = NodeEdit(node, with_keyword_args(node, [("non_blocking", true)]))
        return FixSpec(SAFE, "Pass `non_blocking=True`", (edit,))


# -- TL204 ----------------------------------------------------------------------------------------
SYNCHRONIZE = frozenset({"torch.cuda.synchronize", "torch.cuda.current_stream.synchronize"})
# What an `if` around a sync may ask for TL204's fix to drop the `if` with it.
CUDA_QUESTIONS = frozenset({"torch.cuda.is_available", "torch.cuda.is_initialized"})


class CudaSynchronizeInLoop(Rule):
    """Flags ``torch.cuda.synchronize()`` in a training or evaluation loop (a loop over a data
    loader, or one that takes a gradient step) or in a function the project index proves runs
    every step.

    Timing and profiling code needs the sync and stays silent: a timer or memory statistic read
    in the statements right after it (``time.perf_counter()``, ``time.time()``,
    ``end.record()``, ``start.elapsed_time(end)``, ``timer.toc()``,
    ``torch.cuda.max_memory_allocated()``), a loop that reads a timer anywhere in its body, a
    function, class or file named for timing or benchmarking (``benchmark``, ``profile``,
    ``latency``, ``throughput``, ``time_sync``), a ``debug``/profiling branch, and syncs under a
    periodic guard (``if step % 100 == 0:``).
    """

    code = "TL204"
    statement_local = False  # reads timing wrappers defined in the same file
    name = "cuda-synchronize-in-loop"
    summary = "`torch.cuda.synchronize()` every step makes the host wait for all queued GPU work."
    message = "`torch.cuda.synchronize()` every step stalls the host; remove it (keep it only to read a timer)"
    hint = (
        "It makes the CPU wait until the GPU has finished all queued work, so the next step cannot be "
        "queued ahead; keep it only where a timer is read right after it."
    )
    calls = SYNCHRONIZE
    preview = True  # too few findings on real code yet to show its precision
    tags = ("performance",)
    uses_project = True
    fix_applicability = UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) != "torch.cuda.synchronize":
            return
        loop = next((l for l in enclosing_loops(self.ctx) if is_training_loop(self.ctx, l)), None)
        if loop is not None:
            scope: cst.CSTNode = loop
            where = "in a training or evaluation loop"
        else:
            why = runs_every_step(self.ctx, ("train", "eval"))
            scope = enclosing_function(self.ctx)
            if why is None or scope is None:
                return
            where = f"in `{scope.name.value}`, which runs every step ({why})"
        if under_periodic_guard(self.ctx, scope, node) or in_debug_branch(self.ctx, node):
            return
        if self._timing_code(scope) or self._timer_read_after(scope):
            return
        # the fix deletes the statement; a call inside an expression (`x = torch.cuda.synchronize()`,
        # `f(torch.cuda.synchronize())`) gets none: what to write there is the author's call
        edits = self._cuda_guard_removal() or statement_removal_edits(self.ctx, node)
        fix = FixSpec(UNSAFE, "Remove `torch.cuda.synchronize()`", edits) if edits else None
        self.report(node, fix=fix, hint=(
            f"Called {where}, it makes the CPU wait until the GPU has finished all queued work, every "
            "step; keep it only where a timer is read right after it."))

    def _cuda_guard_removal(self) -> Optional[tuple]:
        """``if torch.cuda.is_available(): torch.cuda.synchronize()`` (the sync alone in an ``if``
        without ``else`` that only asks about CUDA): the whole ``if`` goes, rather than leaving
        ``pass`` under it; its comments stay as comment lines. None for any other shape."""
        up = self.ctx.ancestors
        if len(up) < 6 or not isinstance(up[-1], cst.Expr) or not isinstance(up[-2], cst.SimpleStatementLine):
            return None
        line, block, guard, outer = up[-2], up[-3], up[-4], up[-5]
        if not (isinstance(block, cst.IndentedBlock) and isinstance(guard, cst.If) and len(block.body) == 1
                and len(line.body) == 1 and guard.orelse is None and not block.footer
                and isinstance(outer, (cst.IndentedBlock, cst.Module)) and len(outer.body) > 1):
            return None
        comments = [block.header.comment, *(e.comment for e in line.leading_lines), line.trailing_whitespace.comment]
        indent = "".join(self.ctx.indentation(upto=guard))
        asks = False
        for inner in walk(guard.test):
            if isinstance(inner, cst.Call):
                if self.ctx.resolve_call(inner) not in CUDA_QUESTIONS:
                    return None
                asks = True
            elif isinstance(inner, cst.SimpleString) and inner.evaluated_value == "cuda":
                asks = True  # device.type == "cuda"
            elif isinstance(inner, (cst.NamedExpr, cst.Await, cst.Yield)):
                return None
        if not asks:
            return None
        kept = "".join(f"{indent}{c.value}\n" for c in comments if c is not None)
        return (NodeEdit(guard, kept, DELETE_LINES),)

    def _timing_code(self, scope: cst.CSTNode) -> bool:
        """A loop that reads a timer, or code named for timing (function, class or file)."""
        for node in self.ctx.ancestors:
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and set(name_tokens(node.name)) & TIMING_WORDS:
                return True
        stem = re.split(r"[\\/]", self.ctx.path)[-1].rsplit(".", 1)[0]
        if stem.isidentifier() and set(name_tokens(cst.Name(stem))) & TIMING_WORDS:
            return True
        if isinstance(scope, (cst.For, cst.While)):
            if isinstance(scope, cst.For) and self._timed_iteration(scope):
                return True
            return self._timer_read_later(scope)
        return False

    def _timer_read_later(self, scope: cst.CSTNode) -> bool:
        """Is a timer read after the sync in the same turn of the loop ``scope``: in a later
        statement of any block around it, up to the loop's body? (A clock read only *before* the
        sync does not wait for the GPU; a sync whose only readers are log lines is waste: issue
        29 class 8.)"""
        ancestors = self.ctx.ancestors
        skip = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        for index in range(len(ancestors) - 1, 0, -1):
            block, statement = ancestors[index - 1], ancestors[index]
            if block is scope:
                break
            if isinstance(block, cst.SimpleStatementLine):
                smalls = list(block.body)
                later = smalls[smalls.index(statement) + 1:] if statement in smalls else []
            elif isinstance(block, (cst.IndentedBlock, cst.Module)):
                siblings = list(block.body)
                later = siblings[siblings.index(statement) + 1:] if statement in siblings else []
            else:
                continue
            if any(isinstance(n, cst.Call) and self._reads_timer(n) for part in later for n in walk(part, skip)):
                return True
        return False

    def _timed_iteration(self, loop: cst.For) -> bool:
        """Does the loop iterate through a wrapper that may time each iteration: a function of
        this file that reads a timer, or a call we cannot see named for logging or timing
        (``metric_logger.log_every(loader, print_freq)`` reads ``time.time()`` at each ``yield``,
        right after the sync at the end of the body)?"""
        semantic = self.ctx.semantic
        for value in semantic.iterated_values(loop.iter):
            if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
                continue
            function = semantic.module_function(value.func)
            if function is not None:
                if any(isinstance(n, cst.Call) and self._reads_timer(n) for n in walk(function.body)):
                    return True
            elif self.ctx.resolve_call(value) is None and set(name_tokens(value.func)) & TIMED_ITERATOR_WORDS:
                return True
        return False

    def _timer_read_after(self, scope: cst.CSTNode) -> bool:
        """Is a timer read in the statement after the sync's (going up through the blocks that
        end with it, up to ``scope``; the first statement of a loop body follows its last)?"""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            block, statement = ancestors[index - 1], ancestors[index]
            if isinstance(statement, cst.SimpleStatementLine) and self._line_reads_timer(statement):
                return True
            if not isinstance(block, (cst.IndentedBlock, cst.Module)):
                if block is scope:
                    break
                continue
            siblings = list(block.body)
            position = next((i for i, s in enumerate(siblings) if s is statement), None)
            if position is None:
                continue
            if position + 1 < len(siblings):
                return self._statement_reads_timer(siblings[position + 1])
            owner = ancestors[index - 2] if index >= 2 else None
            if owner is scope:
                return isinstance(scope, (cst.For, cst.While)) and self._statement_reads_timer(siblings[0])
        return False

    def _line_reads_timer(self, line: cst.SimpleStatementLine) -> bool:
        return any(isinstance(n, cst.Call) and self._reads_timer(n) for n in walk(line))

    def _statement_reads_timer(self, statement: cst.CSTNode) -> bool:
        if isinstance(statement, cst.SimpleStatementLine):
            return self._line_reads_timer(statement)
        if isinstance(statement, (cst.If, cst.With, cst.Try)):  # the first line of its body
            body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else []
            return bool(body) and self._statement_reads_timer(body[0])
        return False

    def _reads_timer(self, call: cst.Call) -> bool:
        name = self.ctx.resolve_call(call) or ""
        if name.startswith("time.") or name.startswith("timeit."):
            return True
        if name.startswith("torch.cuda.") and ("memory" in name or "Event" in name):
            return True
        return bool(set(name_tokens(call.func)) & TIMING_WORDS)


# -- TL205 ----------------------------------------------------------------------------------------
# Legacy typed constructors and the dtype each gives (``torch.Tensor``: the default, float32).
LEGACY_TENSOR_TYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
    "ByteTensor": "uint8", "BoolTensor": "bool", "Tensor": "float32",
}
NUMPY_ANNOTATIONS = frozenset({"numpy.ndarray", "numpy.typing.NDArray"})
# Methods a data pipeline calls per sample or per batch.
_DATA_METHODS = frozenset({"__getitem__", "__getitems__", "__iter__", "__next__", "__call__"})
COPYING_CONSTRUCTORS = frozenset({"torch.tensor"} | {f"torch.{t}" for t in LEGACY_TENSOR_TYPES})
_CONSTRUCTOR_NAMES = frozenset(name.split(".", 1)[1] for name in COPYING_CONSTRUCTORS)
_NOT_AN_ARRAY = (False, None)


class TensorCopyFromNumpy(Rule):
    """Flags ``torch.tensor(a)`` and the typed constructors (``torch.Tensor(a)``,
    ``torch.FloatTensor(a)``, ``torch.LongTensor(a)``, ...) where ``a`` is known to be a NumPy
    array and the result could share its memory: the copy is the only thing the call does.

    "Known": every reaching binding is a NumPy call that returns an array (``np.array``,
    ``np.zeros``, ``np.load``, ``np.stack``, ``np.random.rand(n)`` with a size ...), ``.numpy()``,
    an array method of such a value (``.astype()``, ``.reshape()``), or a parameter annotated
    ``np.ndarray``. "Could share": no ``device=`` (a copy to the device happens either way), and
    no dtype conversion: ``torch.tensor(a)`` keeps the array's dtype; ``torch.tensor(a,
    dtype=d)`` and ``torch.FloatTensor(a)`` only when the array's dtype is known to be that
    (``np.zeros(n, dtype=np.float32)``, ``a.astype("float32")``). Unknown values (a list, a
    parameter without annotation, ``np.sum(a)`` which may be a scalar) stay silent.
    """

    code = "TL205"
    name = "tensor-copy-from-numpy"
    summary = "`torch.tensor(ndarray)` copies the array; `torch.as_tensor`/`torch.from_numpy` can share it."
    message = "`{call}` copies this NumPy array; use `torch.as_tensor(a)` or `torch.from_numpy(a)`"
    hint = (
        "Both share the array's memory instead of copying it into new memory, if nothing writes to the "
        "array while the tensor is in use."
    )
    requires = (("numpy",), ("Tensor", "tensor"))
    ast_candidate = staticmethod(lambda index: index.mentions("numpy") and any(
        call.args or index.keyword(call, "data") is not None for call, _ in index.qualified_calls(COPYING_CONSTRUCTORS)))
    fix_applicability = UNSAFE
    preview = True  # too few findings on real code yet to show its precision
    tags = ("performance",)
    uses_project = True

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value not in _CONSTRUCTOR_NAMES:
            return  # cheap: most calls are other methods
        name = self.ctx.resolve_call(node)
        if name not in COPYING_CONSTRUCTORS or has_star_args(node):
            return
        short = name.split(".", 1)[1]
        data = get_arg(node, "data", 0)
        if data is None or any(a is not data and (a.keyword is None or a.keyword.value not in
                                                  ("dtype", "requires_grad", "device")) for a in node.args):
            return  # a size (`torch.FloatTensor(3)`) or a keyword we do not know
        device = get_arg(node, "device")
        if device is not None and literal_value(device.value) != "cpu":
            return  # copied to the device either way
        if not self._runs_often():
            return
        is_array, dtype = self._numpy_array(data.value, set())
        if not is_array:
            return
        wanted = get_arg(node, "dtype")
        if short != "tensor" or wanted is not None:  # converts, unless the array has that dtype already
            target = LEGACY_TENSOR_TYPES[short] if short != "tensor" else self._dtype(wanted.value)
            if target is None or dtype != target:
                return  # a conversion copies anyway (or the dtypes are not known)
        self.report(node, self.message.format(call=f"torch.{short}(...)"), fix=self._fix(node, short, data))

    def _runs_often(self) -> bool:
        """In a loop, a per-sample or per-batch data method (``__getitem__``, ``collate_fn``), or a
        function run every step; not in set-up or conversion code (``convert_*.py``,
        ``load_weights``), where one copy at start-up costs nothing."""
        stem = re.split(r"[\\/]", self.ctx.path)[-1].rsplit(".", 1)[0]
        if stem.isidentifier() and set(name_tokens(cst.Name(stem))) & SETUP_WORDS:
            return False
        function = enclosing_function(self.ctx)
        if function is not None and set(name_tokens(function.name)) & SETUP_WORDS:
            return False
        if enclosing_loops(self.ctx):
            return True
        if function is None:
            return False
        name = function.name.value
        return (name in _DATA_METHODS or "collate" in name.lower() or is_per_step_function(function)
                or runs_every_step(self.ctx, ("train", "eval")) is not None)

    def _numpy_array(self, value: cst.BaseExpression, seen: set):
        """(is a NumPy array, its dtype name or None when not known)."""
        if id(value) in seen:
            return _NOT_AN_ARRAY
        seen.add(id(value))
        if isinstance(value, cst.Call):
            qualified = self.ctx.resolve_call(value) or ""
            function = qualified[6:] if qualified.startswith("numpy.") else None
            if function in NUMPY_ARRAY_FUNCTIONS or (
                    function in NUMPY_RANDOM_SIZE and get_arg(value, "size", NUMPY_RANDOM_SIZE[function]) is not None):
                dtype = get_arg(value, "dtype")
                return True, self._dtype(dtype.value) if dtype is not None else None
            returned = self._file_function_array(value.func)
            if returned is not None:
                return True, returned or None  # a function of this file that returns an array
            call = method_call(value)
            if call is None:
                return _NOT_AN_ARRAY
            if call[1] == "numpy" and not value.args:
                return True, None  # Tensor.numpy()
            if call[1] in ARRAY_METHODS:
                is_array, dtype = self._numpy_array(call[0], seen)
                if call[1] == "astype":
                    given = get_arg(value, "dtype", 0)
                    dtype = self._dtype(given.value) if given is not None else None
                return is_array, dtype
            return _NOT_AN_ARRAY
        if isinstance(value, cst.Name):
            bindings = self.ctx.semantic.lookup(value)
            if not bindings:
                return _NOT_AN_ARRAY
            dtypes = set()
            for b in bindings:
                if b.kind == PARAM:
                    if not self._numpy_annotation(b.statement):
                        return _NOT_AN_ARRAY
                    dtypes.add(None)
                elif b.kind == ASSIGN and b.value is not None:
                    is_array, dtype = self._numpy_array(b.value, seen)
                    if not is_array:
                        return _NOT_AN_ARRAY
                    dtypes.add(dtype)
                else:
                    return _NOT_AN_ARRAY
            return True, dtypes.pop() if len(dtypes) == 1 else None
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == "self":
            values = self.ctx.semantic.values_of(value)
            if not values:
                return _NOT_AN_ARRAY
            found = [self._numpy_array(v, seen) for v in values]
            if not all(is_array for is_array, _ in found):
                return _NOT_AN_ARRAY
            dtypes = {dtype for _, dtype in found}
            return True, dtypes.pop() if len(dtypes) == 1 else None
        return _NOT_AN_ARRAY

    def _file_function_array(self, func: cst.BaseExpression) -> Optional[str]:
        """The dtype ("" when not known) of the NumPy array that the function of this file ``func``
        names (``load_frame``, ``self.load``) always returns, from the whole-file model; None when
        it is not one."""
        semantic = self.ctx.semantic
        if isinstance(func, cst.Name):
            bindings = semantic.lookup(func)
            if not bindings or len(bindings) != 1 or bindings[0].kind != DEF:
                return None
            where = _scope_path(bindings[0].scope) + (("d", func.value),)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            cls = semantic.enclosing_class(func)
            if cls is None:
                return None
            defs = semantic.scopes[id(cls)].bindings.get(func.attr.value, [])
            if len(defs) != 1 or defs[0].kind != DEF:
                return None
            where = _scope_path(defs[0].scope) + (("d", func.attr.value),)
        else:
            return None
        return self.ctx.model.numpy_function_dtype(where)

    def _dtype(self, node: cst.BaseExpression) -> Optional[str]:
        """The NumPy name of a dtype written ``np.float32``, ``torch.long``, ``"float32"``, ``float``."""
        literal = literal_value(node)
        if isinstance(literal, str):
            return _NUMPY_DTYPES.get(literal)
        if isinstance(node, cst.Name) and node.value in ("float", "bool") and self.ctx.resolve(node) is None:
            return _NUMPY_DTYPES[node.value]
        qualified = self.ctx.resolve(node) if dotted_name(node) else None
        if qualified and qualified.count(".") == 1:
            module, name = qualified.split(".")
            table = {"numpy": _NUMPY_DTYPES, "torch": _TORCH_DTYPES}.get(module, {})
            return table.get(name)
        return None

    def _numpy_annotation(self, param: cst.CSTNode) -> bool:
        if not isinstance(param, cst.Param) or param.annotation is None:
            return False
        annotation = param.annotation.annotation
        if isinstance(annotation, cst.Subscript):  # npt.NDArray[np.float32]
            annotation = annotation.value
        return self.ctx.resolve(annotation) in NUMPY_ANNOTATIONS if dotted_name(annotation) else False

    def _fix(self, node: cst.Call, short: str, data: cst.Arg) -> Optional[FixSpec]:
        """``torch.as_tensor(a[, dtype=...][, device="cpu"])``: the same values and dtype, sharing memory."""
        if not isinstance(node.func, cst.Attribute):
            return None  # `from torch import tensor`: no `torch.` to reuse
        torch_module = node.func.value
        keep: List[Tuple[str, cst.BaseExpression]] = []
        for arg in node.args:
            if arg is data:
                continue
            if arg.keyword.value == "requires_grad":
                return None  # as_tensor has no such parameter
            keep.append((arg.keyword.value, arg.value))
        if short == "Tensor":  # the default dtype, as `torch.Tensor(a)` gives
            keep.append(("dtype", cst.Call(cst.Attribute(torch_module, cst.Name("get_default_dtype")))))
        elif short != "tensor":
            keep.append(("dtype", cst.Attribute(torch_module, cst.Name(LEGACY_TENSOR_TYPES[short]))))
        first = data.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT, comma=cst.MaybeSentinel.DEFAULT)
        call = with_keyword_args(cst.Call(cst.Attribute(torch_module, cst.Name("as_tensor")), [first]), keep)
        return FixSpec(UNSAFE, "Use `torch.as_tensor` (shares the array's memory)", (NodeEdit(node, call),))


def _scope_path(scope) -> tuple:
    """The model's ``Scope`` of a semantic scope: its ``def``/``class`` names, outermost first."""
    path = []
    while scope is not None:
        node = scope.node
        if isinstance(node, cst.FunctionDef):
            path.append(("d", node.name.value))
        elif isinstance(node, cst.ClassDef):
            path.append(("c", node.name.value))
        scope = scope.parent
    return tuple(reversed(path))


# -- TL206 ----------------------------------------------------------------------------------------
_SCALAR_BUILTINS = {"float": "float", "int": "int", "len": "int", "bool": "bool", "round": None, "abs": None}
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool"})


class ScalarTensorOnDevice(Rule):
    """Flags ``torch.tensor(<python scalar>, device=<accelerator>)`` in a loop or in a function the
    project index proves runs every step.

    The scalar is a number literal, ``float(...)``/``int(...)``/``len(...)``/``.item()``,
    arithmetic of those, or a name every reaching binding of which is one (or a parameter
    annotated ``int``/``float``/``bool``). The device is one ``heuristics.is_accelerator_device``
    recognises. ``torch.tensor(data)`` of a list or a tensor, host tensors, and loops that run
    once stay silent.
    """

    code = "TL206"
    name = "scalar-tensor-on-device"
    summary = "`torch.tensor(scalar, device=cuda)` in a loop: a blocking host-to-device copy each time."
    message = "Scalar `torch.tensor(..., device=...)` copies from the host; use `torch.full((), v, device=...)`"
    hint = (
        "It builds the value on the host and copies it to the device, waiting for the copy, on every "
        "iteration; `torch.full((), value, dtype=..., device=...)` fills it on the device without a copy."
    )
    requires = (("tensor",), ("device",))
    ast_candidate = staticmethod(lambda index: any(
        index.keyword(call, "device") is not None for call, _ in index.qualified_calls(("torch.tensor",))))
    fix_applicability = SAFE
    preview = True  # too few findings on real code yet to show its precision
    tags = ("performance",)
    uses_project = True  # and FileModel.uses_accelerator's project half

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """No copy to a device in a program that never touches an accelerator
        (``FileModel.uses_accelerator``, issue 29 class 5)."""
        if self.ctx.model.uses_accelerator():
            super().report(node, message, fix, hint)

    def visit_Call(self, node: cst.Call) -> None:
        device = get_arg(node, "device")
        if device is None or isinstance(node.func, cst.Attribute) and node.func.attr.value != "tensor":
            return  # cheap: most calls are something else
        if self.ctx.resolve_call(node) != "torch.tensor" or has_star_args(node):
            return
        data = get_arg(node, "data", 0)
        if data is None or device is None or not is_accelerator_device(self.ctx, device.value):
            return
        loops = [l for l in enclosing_loops(self.ctx) if not _runs_once(l)]
        function = enclosing_function(self.ctx)
        if loops:
            if not _device_of_a_value(device.value) and any(
                    self.ctx.semantic.derives_from(device.value, l) for l in loops if isinstance(l, cst.For)):
                return  # a device per iteration: `for i in range(device_count())` initialises each once
            if function is not None and set(name_tokens(function.name)) & SETUP_WORDS:
                return  # `__init__`, `__setstate__`, `load_state_dict`: runs once
            if all(_over_parameters(l) for l in loops) and (function is None or (
                    not is_per_step_function(function) and runs_every_step(self.ctx, ("train", "eval")) is None)):
                return  # `for group in optimizer.param_groups:` in set-up code: once per group, not per step
            if _device_of_a_value(device.value) and self._step_counter(device.value.value, set()):
                return  # the device of an optimizer's step count: the host
            top: cst.CSTNode = loops[-1]
        elif runs_every_step(self.ctx, ("train", "eval")) is not None:
            top = function
        else:
            return
        if under_periodic_guard(self.ctx, top, node) or _under_nan_branch(self.ctx, top, self.ctx.ancestors):
            return
        kind = self._scalar(data.value, set())  # the data-flow model last: it is the costly part
        if kind is None:
            return
        self.report(node, fix=self._fix(node, data, kind))

    def _step_counter(self, value: cst.BaseExpression, seen: set) -> bool:
        """Is ``value`` an optimizer's step count: ``state["step"]``, an element of the
        ``state_steps`` list torch.optim's functional optimizers take, or a value every reaching
        binding of which is computed from one (``step = _get_value(state_steps[i])``)? torch.optim
        keeps step counts on the host unless ``capturable``/``fused``, so a tensor made on their
        device is no copy to the accelerator."""
        if id(value) in seen or len(seen) > 12:
            return False
        seen.add(id(value))
        if isinstance(value, cst.Subscript):
            index = value.slice[0].slice if len(value.slice) == 1 else None
            if isinstance(index, cst.Index) and literal_value(index.value) == "step":
                return True
            return self._step_counter(value.value, seen)
        if isinstance(value, cst.Call):
            args = [a.value for a in value.args if a.keyword is None and not a.star]
            return bool(args) and self._step_counter(args[0], seen)
        if isinstance(value, cst.Name):
            bindings = self.ctx.semantic.lookup(value)
            if not bindings:
                return False
            for b in bindings:
                if b.kind == PARAM:
                    if value.value != "state_steps":
                        return False
                elif b.kind in (ASSIGN, LOOP) and b.value is not None:
                    if not self._step_counter(b.value, seen):
                        return False
                else:
                    return False
            return True
        return False

    def _scalar(self, value: cst.BaseExpression, seen: set) -> Optional[str]:
        """"int"/"float"/"bool" for a Python scalar of that type, "number" when the type is not
        known from the text (``.item()``, a name), None when not known to be a Python scalar."""
        if id(value) in seen:
            return None
        seen.add(id(value))
        literal = literal_value(value)
        if literal is not UNKNOWN:
            if isinstance(literal, bool):
                return "bool"
            if isinstance(literal, int):
                return "int"
            if isinstance(literal, float):
                return "float"
            return None
        if isinstance(value, cst.Call):
            if isinstance(value.func, cst.Name) and value.func.value in _SCALAR_BUILTINS \
                    and self.ctx.semantic.lookup(value.func) is None:
                return _SCALAR_BUILTINS[value.func.value] or "number"
            call = method_call(value)
            if call is not None and call[1] == "item" and not value.args:
                return "number"
            return None
        if isinstance(value, cst.BinaryOperation):
            left, right = self._scalar(value.left, seen), self._scalar(value.right, seen)
            return "number" if left and right else None
        if isinstance(value, cst.Name):
            bindings = self.ctx.semantic.lookup(value)
            if not bindings:
                return None
            kinds = set()
            for b in bindings:
                if b.kind == PARAM:
                    param = b.statement
                    annotation = param.annotation.annotation if isinstance(param, cst.Param) and param.annotation else None
                    if not (isinstance(annotation, cst.Name) and annotation.value in _SCALAR_ANNOTATIONS):
                        return None
                    kinds.add("number")  # an annotation is not a promise: numpy scalars pass it
                elif b.kind == ASSIGN and b.value is not None:
                    kind = self._scalar(b.value, seen)
                    if kind is None:
                        return None
                    kinds.add(kind)
                else:
                    return None
            return kinds.pop() if len(kinds) == 1 else "number"
        return None

    def _fix(self, node: cst.Call, data: cst.Arg, kind: str) -> Optional[FixSpec]:
        """``torch.full((), value, <the same keywords>)``; a literal int/bool gets its dtype written
        out. Safe when the dtype is explicit or fixed by the literal's type; unsafe when the value's
        type is unknown (a NumPy scalar gives float64 to ``torch.tensor`` but the default dtype to
        ``torch.full``)."""
        if not isinstance(node.func, cst.Attribute):
            return None
        torch_module = node.func.value
        keywords = [a for a in node.args if a is not data]
        if any(a.keyword is None or a.keyword.value not in ("dtype", "device", "requires_grad") for a in keywords):
            return None
        has_dtype = any(a.keyword.value == "dtype" for a in keywords)
        new_args = [(a.keyword.value, a.value) for a in keywords]
        applicability = SAFE
        if not has_dtype:
            if kind == "int":
                new_args.insert(0, ("dtype", cst.Attribute(torch_module, cst.Name("int64"))))
            elif kind == "bool":
                new_args.insert(0, ("dtype", cst.Attribute(torch_module, cst.Name("bool"))))
            elif kind != "float":
                applicability = UNSAFE
        empty = cst.Tuple([], lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        call = cst.Call(cst.Attribute(torch_module, cst.Name("full")), [
            cst.Arg(empty, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(data.value)])
        call = with_keyword_args(call, new_args)
        return FixSpec(applicability, "Use `torch.full((), value, ...)` (filled on the device)", (NodeEdit(node, call),))


def _device_of_a_value(node: cst.BaseExpression) -> bool:
    """``p.device``: where a tensor already is (the same device on every iteration)."""
    return isinstance(node, cst.Attribute) and node.attr.value == "device"


_NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})


def _under_nan_branch(ctx, top: cst.CSTNode, ancestors) -> bool:
    """Inside an ``if`` (below ``top``) whose test checks for NaN/inf: a rare path."""
    below = False
    for parent, child in zip(ancestors, ancestors[1:]):
        if parent is top:
            below = True
        if below and isinstance(parent, cst.If) and child is parent.body:
            if any(isinstance(n, cst.Call) and set(name_tokens(n.func)) & _NAN_CHECKS for n in walk(parent.test)):
                return True
    return False


_PARAMETER_COLLECTIONS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "modules",
                                    "named_modules", "children", "named_children"})


def _over_parameters(loop: cst.CSTNode) -> bool:
    """A loop over an optimizer's ``param_groups`` or a module's parameters, buffers or
    submodules (``enumerate``/``zip`` around them too)."""
    if not isinstance(loop, cst.For):
        return False
    iterable = loop.iter
    while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and \
            iterable.func.value in ("enumerate", "zip", "list", "reversed") and iterable.args:
        iterable = iterable.args[0].value
    if isinstance(iterable, cst.Attribute):
        return iterable.attr.value == "param_groups"
    call = method_call(iterable) if isinstance(iterable, cst.Call) else None
    return call is not None and call[1] in _PARAMETER_COLLECTIONS


def _runs_once(loop: cst.CSTNode) -> bool:
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call)):
        return False
    func, args = loop.iter.func, loop.iter.args
    return isinstance(func, cst.Name) and func.value == "range" and len(args) == 1 and literal_value(args[0].value) in (0, 1)


RULES = [NonBlockingTransfer, CudaSynchronizeInLoop, TensorCopyFromNumpy, ScalarTensorOnDevice]
