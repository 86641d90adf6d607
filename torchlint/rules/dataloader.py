"""TL1xx: data loading."""

from __future__ import annotations

import ast
import re

from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.fixbuilders import with_keyword_args
from torchlint.heuristics import is_accelerator_device, moves_to_accelerator
from torchlint.rules.base import Rule
from torchlint.rules.loading import (
    FIT_LOADERS,
    MOVED,
    _is_loader_call,
    _lightning_trainer,
    _loader_class_call,
    _parameter_for,
    handed_at,
    helper_facts,
    loader_calls_through,
)
from torchlint.semantic import PARAM
from torchlint.syntax import (
    name_tokens,
    body_simple_statements,
    bound_names,
    enclosing_function,
    get_arg,
    has_star_args,
    literal_value,
    memo,
    method_call,
    qualified_name,
    tensor_factory,
)
from torchlint.torch_api import DATALOADER, DATALOADER_PARAMS
from torchlint.tree import walk

NUM_WORKERS = DATALOADER_PARAMS.index("num_workers")
PIN_MEMORY = DATALOADER_PARAMS.index("pin_memory")
# Datasets of tensors already in memory: TL101 leaves their loaders alone.
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
# A stream the training process feeds (an RL replay buffer): every worker would replay it whole.
ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})

# Calls that build a tensor from host data, and methods that keep one a tensor.
_TENSOR_BUILDERS = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor",
                              "torch.LongTensor", "torch.DoubleTensor", "torch.IntTensor", "torch.stack", "torch.cat"})
_TENSOR_CASTS = frozenset({"type", "float", "double", "long", "int", "half", "view", "reshape", "unsqueeze",
                           "permute", "contiguous", "clone", "to", "squeeze", "flatten"})
# Objects holding configuration values: `args.class_prompt` is a string or a number.
_CONFIG_NAMES = frozenset({"args", "cfg", "config", "opt", "opts", "hparams", "params", "FLAGS", "flags"})
# Datasets fed by the training process (reinforcement learning): workers cannot run the agent.
_STREAM_WORDS = frozenset({"experience", "replay", "rollout", "rollouts", "episode", "episodes", "environment"})

# What TL101's fix passes: a few workers overlap loading with the step; more rarely help and
# multiply memory, and the cap keeps a small machine from being oversubscribed.
DEFAULT_WORKERS = "min(4, os.cpu_count() or 1)"



# A loader class under another name: `class AudioDataLoader(DataLoader)`, `import ... ThreadDataLoader`,
# `cls = DataLoader if streaming else IterableLoader` (the model's loader_classes/loader_choices).
_OTHER_LOADER_NAME = re.compile(r"\w+DataLoader\b|\bDataLoader\s+if\b|\belse\s+DataLoader\b|\(\s*DataLoader\s*\)")


def _may_call_a_loader(index) -> bool:
    """A call of torch's DataLoader, or a name that may be a subclass or library loader."""
    return index.called("DataLoader") or bool(index.lines_matching(_OTHER_LOADER_NAME))


def _position(node: cst.Call, ctx, index: int) -> Optional[int]:
    """DataLoader's positional index for torch's own class; None (keyword only) for others."""
    return index if _is_dataloader(node, ctx) else None


def _is_dataloader(node: cst.Call, ctx) -> bool:
    """torch's own DataLoader; project classes and other libraries' loaders resolve elsewhere."""
    func = node.func
    if type(func) is cst.Attribute and func.attr.value != "DataLoader":
        return False  # `a.b.f(...)` resolves to a name ending in `f` (4,700 calls of trainer.py)
    return ctx.resolve_call(node) == DATALOADER


class DataLoaderNumWorkers(Rule):
    """Flags ``torch.utils.data.DataLoader(...)`` with ``num_workers`` omitted or a literal 0.

    With no workers, every batch is read, decoded and collated in the training process between
    steps, and the accelerator waits. Only an omitted argument or a literal ``0`` (by keyword or
    at position 5) is flagged: a variable, an expression or ``**kwargs`` is unknown and stays
    silent, as do loaders that are not torch's (a project's ``DataLoader``, torch_geometric's),
    loaders over a ``TensorDataset`` or over a dataset class of the same file whose items are rows
    of tensors it builds in ``__init__`` (in memory already: workers would only pickle them), over
    an ``IterableDataset`` subclass of the same file (each worker would replay the whole stream),
    a loader built to take one batch (``next(iter(DataLoader(...)))``) and loaders in test code
    (tests keep loading in-process on purpose).
    """

    code = "TL101"
    statement_local = False  # reads a dataset class of the same file
    reads_by_name = True  # that class by its name; a smoke test's loader by the name it is bound to
    walk_candidate = staticmethod(lambda index: index.called("DataLoader"))  # its visits: loader calls
    name = "dataloader-num-workers"
    summary = "`DataLoader` loads data in the main process (`num_workers` omitted or 0)."
    message = "`DataLoader` loads batches in the main process; set `num_workers` > 0"
    hint = "While the main process loads each batch the model waits; worker processes load the next batches in the background."
    requires = (("DataLoader",),)
    ast_candidate = staticmethod(lambda index: index.called("DataLoader"))
    fix_applicability = UNSAFE
    # Back in preview (issue 29): on real code most loaders left in the main process are right
    # there (a small in-memory dataset, a preview batch, a dataset already on the GPU): precision
    # 0.59 on benchmarks/realcode's dev set and 0.17 on its held-out set.
    preview = True
    uses_project = True  # FileModel.uses_accelerator's project half

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """Workers keep an accelerator fed: none in a program that never touches one
        (``FileModel.uses_accelerator``, issue 29 class 5)."""
        if self.ctx.model.uses_accelerator():
            super().report(node, message, fix, hint)

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_dataloader(node, self.ctx) or has_star_args(node):
            return
        arg = get_arg(node, "num_workers", NUM_WORKERS)
        if arg is not None and literal_value(arg.value) != 0:
            return  # a positive literal, or unknown
        if self._takes_one_batch() or self._workers_do_not_apply(node) or self._smoke_test(node):
            return
        if self._purpose_needs_no_workers(node):
            return
        self.report(node, fix=self._fix(node, arg))

    # -- purpose and scale (issue 29, class 6) ---------------------------------------------------
    def _purpose_needs_no_workers(self, node: cst.Call) -> bool:
        """A loader workers cannot help or must not serve: its collate moves batches to the device
        (CUDA in a worker fails: ``num_workers=0`` is required) or only pads pre-tokenized text
        (``default_data_collator``, a ``DataCollator*``, ``tokenizer.pad``); its dataset is a
        stream an environment feeds (``ExperienceSourceDataset``, a replay buffer), a tensor, or
        rows of tensors the caller built; one batch holds the whole dataset
        (``batch_size=len(ds)``); or the loader is never iterated, or only looked at (a preview:
        ``for x, y in loader: print(x.shape); break``)."""
        collate = get_arg(node, "collate_fn", DATALOADER_PARAMS.index("collate_fn"))
        if collate is not None and self._light_collate(collate.value):
            return True
        dataset = get_arg(node, "dataset", 0)
        if dataset is not None and self._in_memory_or_stream(dataset.value):
            return True
        size = get_arg(node, "batch_size", DATALOADER_PARAMS.index("batch_size"))
        if (dataset is not None and size is not None and isinstance(size.value, cst.Call)
                and isinstance(size.value.func, cst.Name) and size.value.func.value == "len"
                and len(size.value.args) == 1 and self.ctx.semantic is not None
                and _same_code(self.ctx, size.value.args[0].value, dataset.value)):
            return True  # one batch is the whole dataset: no worker can split it
        if _compared_setting(self.ctx, node, "num_workers", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0):
            return True
        return self._only_looked_at(node)

    def _light_collate(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Call):
            name = self.ctx.resolve_call(value) or ""
            if name in ("functools.partial", "partial") and value.args:
                return self._light_collate(value.args[0].value)
            return name.startswith("transformers.") and "Collator" in name  # DataCollatorWithPadding(tok)
        resolved = self.ctx.resolve(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if resolved and resolved.startswith("transformers.") and (
                "collator" in resolved.lower()):
            return True  # default_data_collator: stacks the pre-tokenized features
        body: Optional[cst.CSTNode] = None
        if isinstance(value, cst.Lambda):
            body = value.body
        elif isinstance(value, cst.Name):
            body = self.ctx.semantic.module_function(value)
        if body is None:
            return False
        calls = [n for n in walk(body) if isinstance(n, cst.Call)]
        if any(moves_to_accelerator(self.ctx, c) for c in calls):
            return True  # batches built on the device: workers would have to touch CUDA
        if isinstance(body, cst.FunctionDef):
            statements = [s for s in body_simple_statements(body) if not _is_docstring_expr(s)]
            if len(statements) == 1 and isinstance(statements[0], cst.Return) and statements[0].value is not None:
                mc = method_call(statements[0].value)
                return mc is not None and mc[1] == "pad"  # tokenizer.pad(examples, ...)
        return False

    def _in_memory_or_stream(self, value: cst.BaseExpression) -> bool:
        seen = value
        if isinstance(value, (cst.Name, cst.Attribute)):
            value = _assigned_value(self.ctx, value) or value
        if self._tensor_made(value):
            return True  # DataLoader(X_tensor): rows of a tensor in memory
        if isinstance(value, cst.Name) and self._every_call_passes(value, self._tensor_made):
            return True  # train(model, X_train_tensor): a parameter every call of the file gives a tensor
        callee = value.func if isinstance(value, cst.Call) else seen
        if set(name_tokens(callee)) & _STREAM_WORDS:
            return True  # fed by an environment, a replay buffer: workers would replay it
        if isinstance(value, cst.Call):
            cls = _module_class(self.ctx.module, value.func)
            positional = [a.value for a in value.args if a.keyword is None]
            if cls is not None and _returns_stored_rows(cls) and positional:
                if all(self._tensor_made(a) for a in positional):
                    return True  # ToyDataset(X_train, y_train) over tensors the caller built
                if _stores_without_calls(cls) and all(self._plain(a) for a in positional):
                    return True  # PromptDataset(args.prompt, n): items are values held, nothing loaded
        return False

    def _tensor_made(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """A tensor built here: a torch constructor (``torch.tensor``, ``torch.from_numpy``,
        ``torch.FloatTensor``...), a cast or reshape of one, or a name bound only to one."""
        if depth > 4:
            return False
        if isinstance(value, (cst.Name, cst.Attribute)):
            values = self.ctx.semantic.values_of(value)
            return bool(values) and values != [value] and all(self._tensor_made(v, depth + 1) for v in values)
        if not isinstance(value, cst.Call):
            return False
        if tensor_factory(self.ctx, value) is not None:
            return True
        name = self.ctx.resolve_call(value) or ""
        if name in _TENSOR_BUILDERS:
            return True
        mc = method_call(value)
        return mc is not None and mc[1] in _TENSOR_CASTS and self._tensor_made(mc[0], depth + 1)

    def _plain(self, value: cst.BaseExpression) -> bool:
        """A literal, a number computed from names, or a configuration value (``args.prompt``)."""
        if isinstance(value, (cst.SimpleString, cst.Integer, cst.Float, cst.BinaryOperation, cst.ConcatenatedString)):
            return True
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value in _CONFIG_NAMES:
            return True
        if isinstance(value, cst.Name):
            values = self.ctx.semantic.values_of(value)
            return bool(values) and values != [value] and all(
                not isinstance(v, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)) for v in values)
        return False

    def _every_call_passes(self, name: cst.Name, accept) -> bool:
        """``name`` is a parameter of a module-level function that every call of the file
        (positionally, at least one call) gives a value ``accept`` takes."""
        function = enclosing_function(self.ctx)
        if function is None or not any(isinstance(s, cst.FunctionDef) and s is function for s in self.ctx.module.body):
            return False
        params = [p.name.value for p in function.params.params]
        if name.value not in params or self.ctx.semantic.values_of(name) is not None:
            return False
        position = params.index(name.value)
        calls = [n for n in walk(self.ctx.module) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                 and n.func.value == function.name.value]
        if not calls:
            return False
        for call in calls:
            if has_star_args(call):
                return False
            arg = get_arg(call, name.value, position)
            if arg is None or not accept(arg.value):
                return False
        return True


    def _only_looked_at(self, node: cst.Call) -> bool:
        """Bound to a plain name that nothing iterates in earnest: never read again (in a script
        or notebook, or in a function), or read only by ``next(iter(...))``/``len``/``print``
        and loops that stop after their first batch (an unconditional ``break``)."""
        parent = self.ctx.parent
        if not (isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return False
        target = parent.targets[0].target
        semantic = self.ctx.semantic
        scope = semantic.scope_for(target)
        if scope is None:
            return False
        binding = next((b for b in scope.bindings.get(target.value, ()) if b.node is target), None)
        if binding is None:
            return False
        if scope.node is self.ctx.module and not _is_program(self.ctx):
            return False  # a module's name: another file may import it
        if _MASKED_LINE.search(self.ctx.text) is not None:
            return False  # a notebook's IPython line (`%time train(loader)`) may read it: unseen
        uses = [n for n in walk(self.ctx.module) if isinstance(n, cst.Name) and n.value == target.value
                and n is not target and any(b is binding for b in semantic.lookup(n) or ())]
        return all(self._looks_once(n) for n in uses)

    def _looks_once(self, name: cst.Name) -> bool:
        for loop in walk(self.ctx.module):
            if isinstance(loop, cst.For) and any(n is name for n in walk(loop.iter)):
                body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else []
                return any(isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in stmt.body)
                           for stmt in body)
            if isinstance(loop, cst.Call) and isinstance(loop.func, cst.Name) and loop.func.value in ("next", "iter", "len", "print"):
                if any(a.value is name for a in loop.args):
                    return True
        return False

    def _smoke_test(self, node: cst.Call) -> bool:
        """Under ``if __name__ == "__main__":``, a loader bound to a name that is only looked at
        for a few batches: every loop over it stops at a ``break``, or it is only handed to
        ``next(iter(...))``/``len``/``print``. A ``__main__`` block that trains is not a smoke test."""
        if not any(isinstance(a, cst.If) and _is_main_guard(a.test) for a in self.ctx.ancestors):
            return False
        parent = self.ctx.parent
        if not (isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            return False
        semantic = self.ctx.semantic
        target = parent.targets[0].target
        binding = next((b for b in semantic.scopes[id(semantic.module)].bindings.get(target.value, ()) if b.node is target), None)
        if binding is None:
            return False
        uses = [n for n in walk(self.ctx.module) if isinstance(n, cst.Name) and n.value == target.value
                and n is not target and any(b is binding for b in semantic.lookup(n) or ())]
        return bool(uses) and all(self._only_looks(n) for n in uses)

    def _only_looks(self, name: cst.Name) -> bool:
        for loop in walk(self.ctx.module):
            if isinstance(loop, cst.For) and any(n is name for n in walk(loop.iter)):
                return any(isinstance(n, cst.Break) for n in walk(loop.body, (cst.For, cst.While, cst.FunctionDef)))
            if isinstance(loop, cst.Call) and isinstance(loop.func, cst.Name) and loop.func.value in ("next", "iter", "len", "print"):
                if any(a.value is name for a in loop.args):
                    return True
        return False

    def _takes_one_batch(self) -> bool:
        """``next(iter(DataLoader(...)))``: one batch, where starting workers costs more."""
        up = self.ctx.ancestors[-4:]
        return (
            len(up) == 4
            and isinstance(up[0], cst.Call) and isinstance(up[0].func, cst.Name) and up[0].func.value == "next"
            and isinstance(up[1], cst.Arg) and len(up[0].args) == 1
            and isinstance(up[2], cst.Call) and isinstance(up[2].func, cst.Name) and up[2].func.value == "iter"
            and isinstance(up[3], cst.Arg) and len(up[2].args) == 1
        )

    def _workers_do_not_apply(self, node: cst.Call) -> bool:
        """The dataset (``DataLoader(ds_call)``, or a name this scope binds to one) is a
        ``TensorDataset``, or a class of this file that keeps its rows in memory or streams
        from the training process (an ``IterableDataset``)."""
        dataset = get_arg(node, "dataset", 0)
        value = dataset.value if dataset is not None else None
        if isinstance(value, cst.Name):
            value = _assigned_value(self.ctx, value)
        if not isinstance(value, cst.Call):
            return False
        if self.ctx.resolve_call(value) in TENSOR_DATASETS:
            return True  # in memory already (on the device, or on the host: workers only pickle rows)
        if self.ctx.resolve_call(value) == "torch.load":
            location = get_arg(value, "map_location", 1)  # loaded onto the device: workers cannot help
            return location is not None and is_accelerator_device(self.ctx, location.value)
        cls = _module_class(self.ctx.module, value.func)
        return cls is not None and (
            any(self.ctx.resolve(base.value) in ITERABLE_DATASETS for base in cls.bases)
            or _items_are_tensor_rows(cls, self.ctx)
        )

    def _fix(self, node: cst.Call, arg: Optional[cst.Arg]) -> FixSpec:
        import_edit, os_name = self.ctx.import_edit("os")
        value = cst.parse_expression(DEFAULT_WORKERS.replace("os.", f"{os_name}.", 1))
        if arg is None:
            edit = NodeEdit(node, with_keyword_args(node, [("num_workers", value)]))
        else:
            edit = NodeEdit(arg.value, value)
        edits = (edit,) if import_edit is None else (import_edit, edit)
        return FixSpec(UNSAFE, f"Set `num_workers={DEFAULT_WORKERS}`", edits)


class DataLoaderPinMemory(Rule):
    """Flags ``torch.utils.data.DataLoader(...)`` without ``pin_memory=True`` whose batches the
    same code moves to an accelerator.

    "Moves to an accelerator": a ``for`` loop iterates the loader (directly, through
    ``enumerate``/``tqdm``/``zip``, through a name or ``self.<attr>`` whose every binding that
    reaches the loop is this loader, or through a function that returns it — in this file or,
    through the project index, in another) and its body calls ``.cuda()``, ``.to(<device>)`` or
    ``.to(..., non_blocking=True)`` on a value derived from the loop variables.
    Also (issue 29 classes 1 and 2): DataLoader subclasses and library loaders (the model's
    ``loader_classes``; ``pin_memory`` by keyword only), a loader handed to a function of the file
    whose loop iterates that parameter and moves the items, batches moved through a helper of the
    file that moves its parameter (``send_to_device(batch)``), and loaders handed to
    ``trainer.fit`` of a Lightning Trainer in a file that spells a GPU Trainer
    (``FileModel.gpu_trainer``).
    ``pin_memory=<variable>`` and ``**kwargs`` are unknown: silent; ``pin_memory=False`` flags.
    A loader bound again (``loader = accelerator.prepare(loader)``) is not followed: the loop
    iterates a wrapper that may move or pin batches itself. Test code is left alone.
    """

    code = "TL102"
    statement_local = False  # reads loops and loader factories anywhere in the file
    reads_by_name = True  # factories by the names called; loops where it walks; loader assignments
    name = "dataloader-pin-memory"
    summary = "`DataLoader` batches are copied to the GPU from pageable memory (`pin_memory` not set)."
    message = "Batches go to the GPU from pageable memory; pass `pin_memory=True` to this `DataLoader`"
    hint = "Pinned memory makes the copy faster and lets `non_blocking=True` overlap it with GPU work."
    requires = (("DataLoader",),)
    ast_candidate = staticmethod(lambda index: _may_call_a_loader(index))
    # its visits collect loader calls and loops that move what they iterate to a device
    walk_candidate = staticmethod(lambda index: _may_call_a_loader(index) or any(
        any(type(p) in (ast.For, ast.AsyncFor) for p in parents) for _, parents in index.method_calls("cuda", "to")))
    fix_applicability = SAFE
    uses_project = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.loaders: List[Tuple[cst.Call, List[cst.CSTNode]]] = []  # unpinned loaders, where they are
        self.moved: Set[int] = set()  # ids of loader calls whose batches some loop moves
        # ids of loader calls whose batches some move copies with non_blocking=True (or Lightning,
        # which moves with non_blocking=True): pinning pays off even without workers
        self.overlapped: Set[int] = set()
        # id(function) -> (function, its parameters a loop of it iterates and moves the items of)
        self.moving_params: Dict[int, Tuple[cst.FunctionDef, Set[str]]] = {}
        self.fits: List[cst.Call] = []  # `<receiver>.fit(...)` calls: a Lightning Trainer's?

    def visit_Call(self, node: cst.Call) -> None:
        # torch's DataLoader, or a subclass / a library's loader the whole-file model knows
        # (``monai.data.DataLoader``, ``class AudioDataLoader(DataLoader)``, ``cls = DataLoader if
        # x else Sub``; issue 29 class 2): their keywords are DataLoader's, positions may not be.
        if not _is_loader_call(node, self.ctx) or has_star_args(node):
            return
        position = _position(node, self.ctx, PIN_MEMORY)
        if position is None and sum(1 for a in node.args if a.keyword is None) > PIN_MEMORY:
            return  # a subclass's positional order is its own: whether it pins is unknown
        arg = get_arg(node, "pin_memory", position)
        if arg is not None and literal_value(arg.value) is not False:
            return  # True, or unknown
        if _compared_setting(self.ctx, node, "pin_memory", lambda v: v is True):
            return  # a benchmark of loader settings: unpinned on purpose (issue 29 class 6)
        self.loaders.append((node, list(self.ctx.ancestors)))

    def leave_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "fit" and node.args:
            self.fits.append(node)

    def visit_For(self, node: cst.For) -> None:
        if not _body_moves_items(node, self.ctx):
            return
        semantic = self.ctx.semantic
        overlapped = _body_moves_async(node, self.ctx)
        for call in loader_calls_through(self.ctx, node.iter, self._factory_loaders):
            self.moved.add(id(call))
            if overlapped:
                self.overlapped.add(id(call))
        function = enclosing_function(self.ctx)
        if function is None:
            return
        for value in semantic.iterated_values(node.iter):  # `def train(model, data): for x in data:`
            for param in _parameters_in(value, function, semantic):
                self.moving_params.setdefault(id(function), (function, set()))[1].add(param)

    def leave_Module(self, node: cst.Module) -> None:
        if self.loaders and self.moving_params:
            self._given_to_movers(node)
        if self.loaders and self.ctx.project.loader_helpers:
            self._given_to_other_files(node)
        if self.loaders and self.fits:
            self._given_to_a_gpu_trainer()
        walking = self.ctx.ancestors
        for call, ancestors in self.loaders:
            self.ctx.ancestors = ancestors  # report as if at the call: noqa on its statement
            try:
                if (id(call) in self.moved or self._returned_to_a_mover(call)) and (
                        id(call) in self.overlapped or self._starts_workers(call)):
                    self.report(call, fix=self._fix(call))
            finally:
                self.ctx.ancestors = walking

    def _given_to_movers(self, module: cst.Module) -> None:
        """Loaders handed to a function of this file whose loop iterates that parameter and moves
        its items (``train(model, train_dataloader)``, the loop in another notebook cell; issue
        29 class 2)."""
        semantic = self.ctx.semantic
        for call in walk(module):
            if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            function = semantic.module_function(call.func)
            if function is None or id(function) not in self.moving_params:
                continue
            params = self.moving_params[id(function)][1]
            for index, arg in enumerate(call.args):
                if arg.star:
                    break
                if _parameter_for(function, index, arg) in params:
                    self.moved.update(id(c) for c in loader_calls_through(self.ctx, arg.value, self._factory_loaders))

    def _given_to_other_files(self, module: cst.Module) -> None:
        """Loaders handed to a function of another project file whose loop iterates that
        parameter and moves its items (``train_one_epoch(model, optimizer, data_loader, ...)``
        of engine.py; ``simclr.train(train_loader)`` of an imported class; issue 29 class 2,
        ``FileFacts.loader_helpers``)."""
        for call in walk(module):
            if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            facts = helper_facts(call, self.ctx)
            if facts is None or not facts[MOVED]:
                continue
            for value in handed_at(call, facts, MOVED):
                self.moved.update(id(c) for c in loader_calls_through(self.ctx, value, self._factory_loaders))

    def _given_to_a_gpu_trainer(self) -> None:
        """``trainer.fit(model, train_loader, val_loader)`` on a Lightning ``Trainer`` of a file
        that spells a GPU Trainer (``FileModel.gpu_trainer``: ``accelerator="gpu"``, ``gpus=1``):
        Lightning moves every batch to the device."""
        if not self.ctx.model.gpu_trainer():
            return
        semantic = self.ctx.semantic
        for fit in self.fits:
            receiver = fit.func.value if isinstance(fit.func, cst.Attribute) else None
            values = semantic.values_of(receiver) if isinstance(receiver, cst.Name) else None
            if not values or not all(isinstance(v, cst.Call) and _lightning_trainer(self.ctx.resolve_call(v))
                                     for v in values):
                continue
            for index, arg in enumerate(fit.args):
                if arg.star:
                    break
                keyword = arg.keyword.value if arg.keyword is not None else None
                if keyword in FIT_LOADERS or (keyword is None and index in (1, 2)):
                    loaders = [id(c) for c in semantic.loader_calls(arg.value, self._factory_loaders)]
                    self.moved.update(loaders)
                    self.overlapped.update(loaders)  # Lightning copies batches with non_blocking=True

    def _factory_loaders(self, call: cst.Call) -> List[cst.Call]:
        """The loaders a function of this file returns, for ``loader = build_loader(...)``."""
        if _loader_class_call(call, self.ctx):
            return [call]
        semantic = self.ctx.semantic
        values = semantic.iterated_values(call)
        if len(values) != 1 or values[0] is not call:  # `bar = tqdm(enumerate(loader))` (MONAI tutorials)
            return semantic.loader_calls(call, self._factory_loaders)
        function = semantic.module_function(call.func)
        return _returned_loaders(function, self.ctx) if function is not None else []

    def _starts_workers(self, call: cst.Call) -> bool:
        """Does the loader (maybe) start worker processes? Without them (``num_workers`` left out
        or 0) torch's single-process iterator pins each batch inline, in the main thread, before
        returning it: a page-locked copy on the step's path that a blocking ``.to(device)`` from
        pageable memory makes anyway (the driver stages it). Only the workers' pin-memory thread
        takes that copy off the step, and only a ``non_blocking=True`` copy gains by itself."""
        arg = get_arg(call, "num_workers", _position(call, self.ctx, NUM_WORKERS))
        return arg is not None and literal_value(arg.value) != 0

    def _returned_to_a_mover(self, call: cst.Call) -> bool:
        """Is ``call`` (being reported) returned by a function whose callers, per the project
        index, move the batches (``def build_loader(): return DataLoader(...)`` in data.py,
        ``for x, y in build_loader(): x.cuda()`` in train.py)?"""
        if not self.ctx.project.moved_loaders:
            return False
        function = enclosing_function(self.ctx)
        if function is None or qualified_name(self.ctx, function) not in self.ctx.project.moved_loaders:
            return False
        return any(c is call for c in _returned_loaders(function, self.ctx))

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """Pinned memory speeds copies to an accelerator: none in a program that never touches
        one (``FileModel.uses_accelerator``, issue 29 class 5)."""
        if self.ctx.model.uses_accelerator():
            super().report(node, message, fix, hint)

    def _fix(self, node: cst.Call) -> FixSpec:
        arg = get_arg(node, "pin_memory", _position(node, self.ctx, PIN_MEMORY))
        true = cst.Name("True")
        if arg is None:
            edit = NodeEdit(node, with_keyword_args(node, [("pin_memory", true)]))
        else:
            edit = NodeEdit(arg.value, true)
        return FixSpec(SAFE, "Set `pin_memory=True`", (edit,))


# A notebook line notebook.py masked (`%time f(x)` -> `#` and blanks of the same length): its
# names are not in the text.
_MASKED_LINE = re.compile(r"(?m)^[ \t]*0?#[ \t]+$")


def _is_program(ctx) -> bool:
    """A notebook, or a script (an ``if __name__ == "__main__":`` block at module level): its
    module-level names are its own."""
    if ctx.path.endswith(".ipynb"):
        return True
    return any(isinstance(s, cst.If) and _is_main_guard(s.test) for s in ctx.module.body)


def _same_code(ctx, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return ctx.module.code_for_node(a).strip() == ctx.module.code_for_node(b).strip()


def _compared_setting(ctx, node: cst.Call, param: str, wanted) -> bool:
    """Another loader of the file bound to the same name sets ``param`` to a value
    ``wanted`` takes: the program compares loader settings (a benchmark), on purpose."""
    parent = ctx.parent
    if not (isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1):
        return False
    target = ctx.module.code_for_node(parent.targets[0].target).strip()
    index = DATALOADER_PARAMS.index(param)
    function = enclosing_function(ctx)  # the same name in the same scope
    scope = function.body if function is not None else ctx.module
    for n in walk(scope, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if (isinstance(n, cst.Assign) and n.value is not node and isinstance(n.value, cst.Call)
                and len(n.targets) == 1 and _is_dataloader(n.value, ctx)
                and ctx.module.code_for_node(n.targets[0].target).strip() == target):
            arg = get_arg(n.value, param, index)
            if arg is not None and wanted(literal_value(arg.value)):
                return True
    return False


def _stores_without_calls(cls: cst.ClassDef) -> bool:
    """``__init__`` only stores (no call but ``super().__init__()``): nothing is opened or read."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    init = methods.get("__init__")
    if init is None:
        return False
    for n in walk(init.body):
        if isinstance(n, cst.Call):
            mc = method_call(n)
            if isinstance(n.func, cst.Name) and n.func.value == "super":
                continue
            if not (mc is not None and mc[1] == "__init__" and isinstance(mc[0], cst.Call)
                    and isinstance(mc[0].func, cst.Name) and mc[0].func.value == "super"):
                return False
    return True


def _returns_stored_rows(cls: cst.ClassDef) -> bool:
    """``__getitem__`` only indexes what the instance holds (``return self.x[i], self.y[i]``): no
    call, so no loading or decoding (the rows are whatever the caller passed in)."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    getitem = methods.get("__getitem__")
    if getitem is None:
        return False
    return not any(isinstance(n, cst.Call) for n in walk(getitem.body))


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = {cst.Module([]).code_for_node(test.left).strip(), cst.Module([]).code_for_node(test.comparisons[0].comparator).strip()}
    return "__name__" in sides and bool(sides & {'"__main__"', "'__main__'"})


def _returned_loaders(function: cst.FunctionDef, ctx) -> List[cst.Call]:
    found: List[cst.Call] = []
    for value in ctx.semantic.returned_values(function):
        found += ctx.semantic.loader_calls(value, lambda call: [call] if _loader_class_call(call, ctx) else [])
    return found


def _assigned_value(ctx, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The one value ``name`` holds where it is read (None if several or unknown)."""
    values = ctx.semantic.values_of(name)
    return values[0] if values and len(values) == 1 else None


def _module_class(module: cst.Module, func: cst.BaseExpression) -> Optional[cst.ClassDef]:
    """The class ``func`` names when the module defines it once at top level."""
    if not isinstance(func, cst.Name):
        return None
    found = [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == func.value]
    return found[0] if len(found) == 1 else None


def _items_are_tensor_rows(cls: cst.ClassDef, ctx) -> bool:
    """``__getitem__`` only returns ``self.a[i]`` (or a tuple of those), and ``__init__`` builds
    each such ``self.a`` with a torch constructor (``torch.randn(n, d)``): items are in memory."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    getitem, init = methods.get("__getitem__"), methods.get("__init__")
    if getitem is None or init is None:
        return False
    body = [s for s in body_simple_statements(getitem) if not _is_docstring_expr(s)]
    if len(body) != 1 or not isinstance(body[0], cst.Return) or body[0].value is None:
        return False
    value = body[0].value
    rows = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    attrs = set()
    for row in rows:
        if not (
            isinstance(row, cst.Subscript)
            and isinstance(row.value, cst.Attribute)
            and isinstance(row.value.value, cst.Name)
            and row.value.value.value == "self"
        ):
            return False
        attrs.add(row.value.attr.value)
    top_level = {
        target.target.attr.value: small.value
        for small in body_simple_statements(init)
        if isinstance(small, cst.Assign) and len(small.targets) == 1
        for target in small.targets
        if _self_attr(target.target)
    }
    writes: Dict[str, int] = {}  # every store to self.<attr> anywhere in the class
    for n in walk(cls.body):
        stores = [t.target for t in n.targets] if isinstance(n, cst.Assign) else (
            [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign)) else [])
        for t in stores:
            for inner in walk(t):
                if _self_attr(inner):
                    writes[inner.attr.value] = writes.get(inner.attr.value, 0) + 1
    return all(
        writes.get(attr) == 1 and attr in top_level and tensor_factory(ctx, top_level[attr]) is not None
        for attr in attrs
    )


def _self_attr(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _is_docstring_expr(small: cst.BaseSmallStatement) -> bool:
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))


def _parameters_in(value: cst.BaseExpression, function: cst.FunctionDef, semantic) -> List[str]:
    """The parameters of ``function`` a ``for`` over ``value`` iterates: a name bound only as
    one, or a name bound only by a ``for`` over a literal list of tuples, at the same place in
    each (``for name, loader in [("train", train_loader), ("val", val_loader)]``)."""
    if not isinstance(value, cst.Name):
        return []
    bindings = semantic.lookup(value)
    if not bindings or len(bindings) != 1:
        return []
    binding = bindings[0]
    if binding.kind == PARAM:
        return [value.value]
    loop = binding.statement
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, (cst.List, cst.Tuple)) and loop.iter.elements):
        return []
    path: List[int] = []  # where the name sits in the loop's target
    target: cst.BaseExpression = loop.target
    while target is not binding.node:
        if not isinstance(target, (cst.Tuple, cst.List)):
            return []
        index = next((i for i, e in enumerate(target.elements) if _holds(e.value, binding.node)), None)
        if index is None or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return []
        path.append(index)
        target = target.elements[index].value
    found: List[str] = []
    for element in loop.iter.elements:
        item = element.value
        for index in path:
            if not isinstance(item, (cst.Tuple, cst.List)) or index >= len(item.elements):
                return []
            item = item.elements[index].value
        inner = semantic.lookup(item) if isinstance(item, cst.Name) else None
        if not (inner and len(inner) == 1 and inner[0].kind == PARAM and inner[0].node is not None
                and inner[0].scope.node is function):
            return []
        found.append(item.value)
    return found


def _holds(outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    return outer is node or any(n is node for n in walk(outer))


def _body_moves_items(loop: cst.For, ctx) -> bool:
    """Does the loop body move a value derived from the loop variables to an accelerator, itself
    or through a function of the file that moves that parameter (``send_to_device(batch)``)?"""
    def compute():
        for n in walk(loop.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if not isinstance(n, cst.Call):
                continue
            if moves_to_accelerator(ctx, n) and ctx.semantic.derives_from(n.func.value, loop):
                return True
            if isinstance(n.func, (cst.Name, cst.Attribute)) and n.args and _moves_argument(n, loop, ctx):
                return True
        return False

    return memo(ctx, "body_moves_items", loop, compute)


def _body_moves_async(loop: cst.For, ctx) -> bool:
    """Does the loop body copy a value derived from the loop variables to an accelerator with
    ``non_blocking=True`` (a copy that overlaps GPU work only from pinned memory)?"""
    def compute():
        for n in walk(loop.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if (isinstance(n, cst.Call) and moves_to_accelerator(ctx, n)
                    and literal_value(getattr(get_arg(n, "non_blocking"), "value", None)) is True
                    and ctx.semantic.derives_from(n.func.value, loop)):
                return True
        return False

    return memo(ctx, "body_moves_async", loop, compute)


def _moves_argument(call: cst.Call, loop: cst.For, ctx) -> bool:
    """``send_to_device(batch)``: a function of this file that moves the parameter given a value
    derived from the loop's variables to an accelerator (issue 29 class 1)."""
    function = ctx.semantic.module_function(call.func)
    if function is None:
        return False
    moved = _moved_parameters(function, ctx)
    if not moved:
        return False
    for index, arg in enumerate(call.args):
        if arg.star:
            return False
        if _parameter_for(function, index, arg) in moved and ctx.semantic.derives_from(arg.value, loop):
            return True
    return False


def _moved_parameters(function: cst.FunctionDef, ctx) -> FrozenSet[str]:
    """Parameters of ``function`` it moves to an accelerator (``batch[k].to(device)``,
    ``x.cuda()``): a receiver that reads a name bound only as this function's parameter."""
    def compute():
        found: Set[str] = set()
        semantic = ctx.semantic
        for n in walk(function.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if not (isinstance(n, cst.Call) and moves_to_accelerator(ctx, n)):
                continue
            for name in walk(n.func.value):
                if isinstance(name, cst.Name):
                    bindings = semantic.lookup(name)
                    if bindings and len(bindings) == 1 and bindings[0].kind == PARAM \
                            and bindings[0].scope.node is function:
                        found.add(name.value)
        return frozenset(found)

    return memo(ctx, "moved_parameters", function, compute)


RULES = [DataLoaderNumWorkers, DataLoaderPinMemory]
