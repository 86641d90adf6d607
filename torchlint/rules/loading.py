"""TL1xx: data loading across epochs and processes (persistent workers, sharding)."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import INSERT_BEFORE, FixSpec, NodeEdit, block_indents
from torchlint.diagnostics import UNSAFE
from torchlint.imports import dotted_name
from torchlint.loops import calls_gradient_step
from torchlint.rules.base import Rule
from torchlint.semantic import ASSIGN, CLASS, IMPORT, PARAM
from torchlint.syntax import (
    UNKNOWN,
    enclosing_function,
    enclosing_loops,
    get_arg,
    has_star_args,
    literal_value,
    name_tokens,
)
from torchlint.torch_api import DATALOADER, DATALOADER_PARAMS
from torchlint.tree import iter_children, walk
from torchlint.words import DISTRIBUTED_WORDS, EVAL_WORDS, TRAIN_WORDS

NUM_WORKERS = DATALOADER_PARAMS.index("num_workers")
SHUFFLE = DATALOADER_PARAMS.index("shuffle")
SAMPLER = DATALOADER_PARAMS.index("sampler")
BATCH_SAMPLER = DATALOADER_PARAMS.index("batch_sampler")
PERSISTENT_WORKERS = DATALOADER_PARAMS.index("persistent_workers")
# Callees named for one pass over a loader (`train_one_epoch(model, loader)`, `evaluate(...)`):
# called from an epoch loop, each call iterates the loader it is given.
PER_EPOCH_WORDS = frozenset({"epoch"}) | TRAIN_WORDS | EVAL_WORDS
DISTRIBUTED_MARKERS = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.distributed.init_process_group"})
ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
# Libraries whose datasets are streams that shard themselves per node/worker.
STREAMING_LIBRARIES = frozenset({"webdataset", "torchdata", "datasets", "streaming", "ffcv"})


def _is_dataloader(node: cst.Call, ctx) -> bool:
    func = node.func
    if type(func) is cst.Attribute and func.attr.value != "DataLoader":
        return False  # `a.b.f(...)` resolves to a name ending in `f`
    return ctx.resolve_call(node) == DATALOADER


# Lightning's module classes: their `train_dataloader()`/`val_dataloader()` loaders are iterated
# once per epoch by the Trainer (`test_`/`predict_dataloader` once per run).
LIGHTNING_MODULES = frozenset({"LightningModule", "LightningDataModule"})
LIGHTNING_PACKAGES = frozenset({"pytorch_lightning", "lightning", "lightning_fabric"})
PER_EPOCH_HOOKS = frozenset({"train_dataloader", "val_dataloader"})
# `Trainer.fit`'s loader parameters (1.x and 2.x spellings)
FIT_LOADERS = frozenset({"train_dataloaders", "val_dataloaders", "train_dataloader", "val_dataloader"})


def _lightning_trainer(qualified: Optional[str]) -> bool:
    """``pytorch_lightning.Trainer(...)``, ``lightning.pytorch.Trainer(...)``,
    ``Trainer.from_argparse_args(...)``."""
    if not qualified or qualified.split(".", 1)[0] not in LIGHTNING_PACKAGES:
        return False
    parts = qualified.split(".")
    return parts[-1] == "Trainer" or (len(parts) > 1 and parts[-2] == "Trainer" and parts[-1].startswith("from_"))


def _loader_class_call(node: cst.Call, ctx) -> bool:
    """A call of a DataLoader subclass or a library's DataLoader: a class the whole-file model
    knows (``from monai.data import DataLoader``, ``class AudioDataLoader(DataLoader)`` of this
    file), one the project index traces to torch's DataLoader in another file, or a local bound
    only to such classes (``cls = DataLoader if plain else IterableDataLoader``). Its keywords are
    DataLoader's; its positional order may not be."""
    func = node.func
    if not isinstance(func, cst.Name) or func.value not in _class_names(ctx):
        return False  # the whole-file model's names first: most calls are of none of them
    return _names_loader_class(func, ctx, 0)


def _class_names(ctx) -> frozenset:
    """The names a loader class may be called by in this file (the model's classes and choices,
    the project's subclasses of torch's DataLoader), asked once per file."""
    names = getattr(ctx, "_tl_loader_class_names", None)
    if names is None:
        names = ctx.model.loader_classes() | ctx.model.loader_choices() | frozenset(
            name for name, base in ctx.project.subclasses.items() if base == DATALOADER)
        ctx._tl_loader_class_names = names
    return names


def _names_loader_class(name: cst.BaseExpression, ctx, depth: int) -> bool:
    if isinstance(name, cst.Attribute):
        return ctx.resolve(name) == DATALOADER
    if not isinstance(name, cst.Name) or depth > 2:
        return False
    bindings = ctx.semantic.lookup(name)
    if not bindings:
        return False
    if all(b.kind in (IMPORT, CLASS) for b in bindings):
        return (ctx.resolve(name) == DATALOADER or name.value in ctx.model.loader_classes()
                or ctx.project.subclasses.get(name.value) == DATALOADER)
    values = ctx.semantic.values_of(name)
    if not values:
        return False
    branches: List[cst.BaseExpression] = []
    for value in values:
        branches += [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
    return all(isinstance(b, (cst.Name, cst.Attribute)) and _names_loader_class(b, ctx, depth + 1) for b in branches)


def _is_loader_call(node: cst.Call, ctx) -> bool:
    """torch's ``DataLoader(...)`` or a subclass's (``_loader_class_call``)."""
    return _is_dataloader(node, ctx) or _loader_class_call(node, ctx)


def _position(node: cst.Call, ctx, index: int) -> Optional[int]:
    """DataLoader's positional index for torch's own class; None (by keyword only) for others."""
    return index if _is_dataloader(node, ctx) else None


def _keyword_dict(node: cst.Call, ctx) -> Optional[Dict[str, cst.BaseExpression]]:
    """The keywords a ``**kwargs`` argument passes, where the name is bound once to
    ``dict(a=..., b=...)`` or ``{"a": ..., "b": ...}`` (barlowtwins: ``kwargs = dict(batch_size=...,
    num_workers=args.workers)``); None when a star argument's keywords are not known."""
    found: Dict[str, cst.BaseExpression] = {}
    for arg in node.args:
        if not arg.star:
            continue
        if arg.star != "**" or not isinstance(arg.value, cst.Name):
            return None
        values = ctx.semantic.values_of(arg.value)
        if not values or len(values) != 1:
            return None
        value = values[0]
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict" \
                and ctx.semantic.lookup(value.func) is None:
            if any(a.keyword is None for a in value.args):
                return None
            found.update((a.keyword.value, a.value) for a in value.args if a.keyword is not None)
        elif isinstance(value, cst.Dict):
            for element in value.elements:
                key = literal_value(element.key) if isinstance(element, cst.DictElement) else UNKNOWN
                if not isinstance(key, str):
                    return None
                found[key] = element.value
        else:
            return None
    return found


def _may_be_positive(value) -> bool:
    return value is UNKNOWN or (isinstance(value, int) and not isinstance(value, bool) and value > 0)


def _loader_with_workers(index) -> bool:
    """A ``DataLoader`` call that may start workers: ``num_workers`` passed (by keyword, or at
    its position); an omitted one means none, and TL103 has nothing to keep alive."""
    calls = index.calls_of("DataLoader")
    if calls is None or any(len(call.args) > NUM_WORKERS or any(k.arg in ("num_workers", None) for k in call.keywords)
                            for call, _ in calls):
        return True  # workers given, or maybe through `**kwargs`
    # a subclass's or a library's loader, or workers given through `**kwargs`: the rule decides
    return any(type(node).__name__ == "keyword" for node, _, _ in index.occurrences(("num_workers",)))


def _single_epoch(loop: cst.CSTNode) -> bool:
    """``for _ in range(1):`` runs its body once."""
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call)):
        return False
    func, args = loop.iter.func, loop.iter.args
    return (isinstance(func, cst.Name) and func.value == "range" and len(args) == 1
            and literal_value(args[0].value) in (0, 1))


class _Pending:
    """A loader call waiting for the end of the file, with the ancestors to report it at."""

    __slots__ = ("call", "ancestors")

    def __init__(self, call: cst.Call, ancestors: List[cst.CSTNode]) -> None:
        self.call, self.ancestors = call, ancestors


class _LoaderRule(Rule):
    """Collects loader calls while walking and decides at the end of the file."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.pending: List[_Pending] = []

    def report_pending(self, chosen, fix_for=None) -> None:
        walking = self.ctx.ancestors
        for item in self.pending:
            if not chosen(item):
                continue
            self.ctx.ancestors = item.ancestors  # report as if at the call: noqa on its statement
            try:
                self.report(item.call, fix=fix_for(item) if fix_for else None)
            finally:
                self.ctx.ancestors = walking


class DataLoaderPersistentWorkers(_LoaderRule):
    """Flags a ``torch.utils.data.DataLoader`` with worker processes, iterated once per epoch,
    without ``persistent_workers=True``.

    "Workers": ``num_workers=`` a positive literal or an expression (not a literal 0); omitted
    means 0, silent. "Once per epoch": a ``for`` over the loader (through names, ``self``
    attributes, ``enumerate``/``tqdm``) sits inside another loop of the same function that does
    not build the loader itself, or the loader is handed, inside a loop, to a function of this
    file whose ``for`` iterates that parameter (``train(train_loader, ...)``), to a function
    named for one pass (``train_one_epoch``, ``evaluate``), or the function holding the ``for``
    is called from a loop (``self.train_epoch()``). Loaders wherever they come from: DataLoader
    subclasses (the whole-file model's ``loader_classes``; another file's through the project
    index), ``train_dataloader()``/``val_dataloader()`` of a Lightning module, a generator of the
    file that drains its parameter in a loop (``cycle(dl)``), ``accelerator.prepare``.
    ``persistent_workers=<variable>``, ``**kwargs`` not bound to a dict literal and loops that run
    once (``range(1)``) stay silent.
    """

    code = "TL103"
    statement_local = False  # reads loaders and epoch loops anywhere in the file
    name = "dataloader-persistent-workers"
    summary = "A multi-worker `DataLoader` iterated every epoch re-forks its workers (`persistent_workers` not set)."
    message = "`DataLoader` restarts its workers every epoch; pass `persistent_workers=True`"
    hint = (
        "It is iterated once per epoch and starts its worker processes anew each time (fork, dataset "
        "copy, worker_init_fn)."
    )
    requires = (("DataLoader",), ("num_workers",))
    ast_candidate = staticmethod(lambda index: _loader_with_workers(index))
    uses_project = True  # a DataLoader subclass of another file (``ctx.project.subclasses``)
    # its visits collect loader calls, calls made in loops and the loaders loops iterate
    walk_candidate = staticmethod(lambda index: index.called("DataLoader") or bool(index.loops()))
    fix_applicability = UNSAFE
    min_torch_version = (1, 7)
    tags = ("performance",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.per_epoch: Set[int] = set()  # ids of loader calls iterated once per epoch
        self.loops_in: Dict[int, List[cst.Call]] = {}  # id(function) -> loaders its top-level loops iterate
        self.calls_in_loops: List[Tuple[cst.Call, List[cst.CSTNode]]] = []
        # id(function) -> (the function, parameters it iterates inside a loop of its own):
        # `def cycle(dl): while True: for b in dl: yield b` iterates whatever loader it is given again
        self.repeating: Dict[int, Tuple[cst.FunctionDef, Set[str]]] = {}
        self._preparing: Set[int] = set()  # `accelerator.prepare(...)` calls being followed
        self.appended: Dict[str, List[cst.Call]] = {}  # list -> loaders appended to it
        self.restarted_lists: Set[str] = set()  # lists whose loaders are restarted on StopIteration
        #: loader call id -> calls of the functions of the file it is built in and returned from
        #: (``set_loader(opt)``): a factory called inside an epoch loop builds a loader per epoch
        self.sites: Dict[int, List[cst.Call]] = {}

    def loader_factory(self, call: cst.Call) -> List[cst.Call]:
        """The loader calls a call that is not torch's ``DataLoader(...)`` gives: a subclass's own
        call; the loader handed to ``accelerator.prepare(dl)`` (accelerate wraps it in a loader
        built with the same keywords, ``persistent_workers`` and ``num_workers`` included)."""
        if _loader_class_call(call, self.ctx):
            return [call]
        func = call.func
        function = self.ctx.semantic.module_function(func)
        if function is not None:  # `train_loader = set_loader(opt)`: what a function of the file returns
            found: List[cst.Call] = []
            for value in self.ctx.semantic.returned_values(function):
                found += self.ctx.semantic.loader_calls(value, lambda c: [c] if _loader_class_call(c, self.ctx) else [])
            for loader in found:
                self.sites.setdefault(id(loader), []).append(call)
            return found
        if (isinstance(func, cst.Attribute) and func.attr.value == "prepare" and len(call.args) == 1
                and call.args[0].keyword is None and not call.args[0].star and id(call) not in self._preparing
                and "accelerator" in (dotted_name(func.value) or "").lower()):
            self._preparing.add(id(call))
            try:
                return self.ctx.semantic.loader_calls(call.args[0].value, self.loader_factory)
            finally:
                self._preparing.discard(id(call))
        return []

    def visit_Call(self, node: cst.Call) -> None:
        if _is_loader_call(node, self.ctx):
            if (not has_star_args(node) or _keyword_dict(node, self.ctx) is not None) and self._has_workers(node) \
                    and self._not_persistent(node):
                self.pending.append(_Pending(node, list(self.ctx.ancestors)))
            return
        if enclosing_loops(self.ctx):
            self.calls_in_loops.append((node, list(self.ctx.ancestors)))
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "fit":
            self._fitted(node)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "append" and len(node.args) == 1:
            owner = dotted_name(node.func.value)  # `self.loaders.append(loader)`: kept for a restart
            if owner is not None:
                self.appended.setdefault(owner, []).extend(
                    self.ctx.semantic.loader_calls(node.args[0].value, self.loader_factory))
        elif (isinstance(node.func, cst.Name) and node.func.value == "iter" and len(node.args) == 1
              and not self.ctx.semantic.lookup(node.func)):  # the builtin
            self._restarted(node.args[0].value)

    def _restarted(self, iterable: cst.BaseExpression) -> None:
        """``iter(loader)`` again in an ``except StopIteration:`` (a step loop that restarts the
        loader when it runs out, minGPT, deep-text-recognition): a pass per restart."""
        handler = next((a for a in reversed(self.ctx.ancestors) if isinstance(a, (cst.ExceptHandler, cst.FunctionDef))), None)
        if not isinstance(handler, cst.ExceptHandler) or handler.type is None:
            return
        types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
        if not any(dotted_name(t.value if isinstance(t, cst.Element) else t) == "StopIteration" for t in types):
            return
        if isinstance(iterable, cst.Subscript):  # `iter(self.loaders[i])`
            owner = dotted_name(iterable.value)
            if owner is not None:
                self.restarted_lists.add(owner)
            return
        self.per_epoch.update(id(c) for c in self.ctx.semantic.loader_calls(iterable, self.loader_factory))

    def _fitted(self, node: cst.Call) -> None:
        """``trainer.fit(model, train_loader, val_loader)`` on a Lightning ``Trainer``: the
        Trainer iterates both every epoch."""
        receiver = node.func.value if isinstance(node.func, cst.Attribute) else None
        values = self.ctx.semantic.values_of(receiver) if isinstance(receiver, cst.Name) else None
        if not values or not all(isinstance(v, cst.Call) and _lightning_trainer(self.ctx.resolve_call(v))
                                 for v in values):
            return
        for index, arg in enumerate(node.args):
            if arg.star:
                return
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword in FIT_LOADERS or (keyword is None and index in (1, 2)):
                self.per_epoch.update(id(c) for c in self.ctx.semantic.loader_calls(arg.value, self.loader_factory))

    def _prepared(self, iterable: cst.BaseExpression) -> List[cst.Call]:
        """Loaders a name unpacked from ``accelerator.prepare(model, opt, dl)`` stands for (the
        argument at the name's position)."""
        found: List[cst.Call] = []
        for value in self.ctx.semantic.iterated_values(iterable):
            inner = self._prepared_name(value, set()) if isinstance(value, cst.Name) else []
            if not inner:
                return []
            found += inner
        return found

    def _prepared_name(self, name: cst.Name, seen: Set[int]) -> List[cst.Call]:
        semantic = self.ctx.semantic
        bindings = semantic.lookup(name)
        if not bindings or id(name) in seen:
            return []
        seen.add(id(name))
        found: List[cst.Call] = []
        for b in bindings:
            statement = b.statement
            if b.value is not None:  # `dl = DataLoader(...)` reaching beside the unpacking
                inner = semantic.loader_calls(b.value, self.loader_factory)
            elif (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0].target, cst.Tuple) and isinstance(statement.value, cst.Call)):
                call, elements = statement.value, statement.targets[0].target.elements
                func = call.func
                position = next((i for i, e in enumerate(elements) if e.value is b.node), None)
                if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare" and position is not None
                        and "accelerator" in (dotted_name(func.value) or "").lower()
                        and len(call.args) == len(elements) and all(a.keyword is None and not a.star for a in call.args)):
                    return []
                given = call.args[position].value
                inner = semantic.loader_calls(given, self.loader_factory)
                if not inner and isinstance(given, cst.Name):
                    inner = self._prepared_name(given, seen)
            else:
                return []
            if not inner:
                return []
            found += inner
        return found

    def visit_For(self, node: cst.For) -> None:
        loaders = (self.ctx.semantic.loader_calls(node.iter, self.loader_factory) or self._prepared(node.iter)
                   or loader_calls_through(self.ctx, node.iter, self.loader_factory, self.sites))
        if not loaders:
            self._repeats_parameter(node)
            return
        outer = [l for l in enclosing_loops(self.ctx) if not _single_epoch(l)]
        if outer:
            epoch = outer[-1]
            self.per_epoch.update(_built_before(epoch, loaders, self.sites))
        else:
            function = enclosing_function(self.ctx)
            if function is not None:
                self.loops_in.setdefault(id(function), []).extend(loaders)

    def _repeats_parameter(self, node: cst.For) -> None:
        """A ``for`` over a parameter of its function inside another loop of that function."""
        if not isinstance(node.iter, cst.Name) or not [l for l in enclosing_loops(self.ctx) if not _single_epoch(l)]:
            return
        function = enclosing_function(self.ctx)
        bindings = self.ctx.semantic.lookup(node.iter) or ()
        if function is not None and bindings and all(b.kind == PARAM for b in bindings):
            self.repeating.setdefault(id(function), (function, set()))[1].add(node.iter.value)

    def leave_Module(self, node: cst.Module) -> None:
        if not self.pending:
            return
        semantic = self.ctx.semantic
        if self.repeating:
            self._loaders_given_to_repeating(node)
        for owner in self.restarted_lists:
            self.per_epoch.update(id(c) for c in self.appended.get(owner, ()))
        for call, ancestors in self.calls_in_loops:
            epoch = next((a for a in reversed(ancestors) if isinstance(a, (cst.For, cst.While))), None)
            if epoch is None or _single_epoch(epoch):
                continue
            function = semantic.module_function(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
            if function is not None:
                # the function's own loops run once per call: once per epoch; a loader the
                # function builds itself is a new one each call (persistence cannot help)
                self.per_epoch.update(id(c) for c in self.loops_in.get(id(function), ())
                                      if not any(_contains(epoch, n) or _contains(function, n)
                                                 for n in (c, *self.sites.get(id(c), ()))))
            helper = helper_facts(call, self.ctx) if function is None else None
            iterated = handed_at(call, helper, ITERATED) if helper is not None else []
            for index, arg in enumerate(call.args):
                if arg.star:
                    break
                given = loader_calls_through(self.ctx, arg.value, self.loader_factory, self.sites)
                built = _built_before(epoch, given, self.sites)
                loaders = [c for c in given if id(c) in built]
                if not loaders:
                    continue
                if function is not None:
                    param = _parameter_for(function, index, arg)
                    if param is None or not _iterates_parameter(function, param, semantic):
                        continue
                elif not (any(v is arg.value for v in iterated) or set(name_tokens(call.func)) & PER_EPOCH_WORDS):
                    continue  # (a function of another file that iterates the parameter: the project index)
                self.per_epoch.update(id(c) for c in loaders)
        if self.ctx.project.loader_helpers:
            self._given_to_repeating_helpers(node)
        self.report_pending(lambda item: id(item.call) in self.per_epoch or self._lightning_per_epoch(item),
                            lambda item: self._fix(item.call))

    def _given_to_repeating_helpers(self, module: cst.Module) -> None:
        """Loaders handed (anywhere) to a function of another project file that iterates that
        parameter inside a loop of its own (``simclr.train(train_loader)``, whose ``for epoch``
        iterates it each epoch; ``FileFacts.loader_helpers``)."""
        for call in walk(module):
            if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            facts = helper_facts(call, self.ctx)
            if facts is None or not facts[REPEATED]:
                continue
            for value in handed_at(call, facts, REPEATED):
                self.per_epoch.update(id(c) for c in loader_calls_through(self.ctx, value, self.loader_factory, self.sites))

    def _loaders_given_to_repeating(self, module: cst.Module) -> None:
        """Loaders handed (anywhere) to a function that iterates that parameter again and again
        (``self.dl = cycle(dl)``): each pass re-forks the workers."""
        semantic = self.ctx.semantic
        for call in walk(module):
            if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            function = semantic.module_function(call.func)
            if function is None or id(function) not in self.repeating:
                continue
            params = self.repeating[id(function)][1]
            for index, arg in enumerate(call.args):
                if arg.star:
                    break
                if _parameter_for(function, index, arg) in params:
                    self.per_epoch.update(id(c) for c in semantic.loader_calls(arg.value, self.loader_factory))

    def _lightning_per_epoch(self, item: _Pending) -> bool:
        """A loader a Lightning module's ``train_dataloader()``/``val_dataloader()`` returns
        (directly, through a name, or through a method of the class it returns the value of:
        ``return self._data_loader(ds)``): the Trainer iterates it once per epoch."""
        function = next((a for a in reversed(item.ancestors) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
        if not isinstance(function, cst.FunctionDef) or not self._returns(function, item.call):
            return False
        cls = item.ancestors[item.ancestors.index(function) - 1] if item.ancestors.index(function) > 0 else None
        if isinstance(cls, cst.IndentedBlock):
            index = item.ancestors.index(cls)
            cls = item.ancestors[index - 1] if index > 0 else None
        if not isinstance(cls, cst.ClassDef) or not self._lightning_class(cls):
            return False
        if function.name.value in PER_EPOCH_HOOKS:
            return True
        for hook in cls.body.body:  # `def train_dataloader(self): return self._data_loader(...)`
            if isinstance(hook, cst.FunctionDef) and hook.name.value in PER_EPOCH_HOOKS:
                for value in self.ctx.semantic.returned_values(hook):
                    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                            and self.ctx.semantic.module_function(value.func) is function:
                        return True
        return False

    def _returns(self, function: cst.FunctionDef, call: cst.Call) -> bool:
        for value in self.ctx.semantic.returned_values(function):
            if value is call:
                return True
            if isinstance(value, cst.Name) and any(v is call for v in self.ctx.semantic.values_of(value) or ()):
                return True
        return False

    def _lightning_class(self, cls: cst.ClassDef) -> bool:
        for base in cls.bases:
            name = self.ctx.resolve(base.value) or ""
            if name.split(".", 1)[0] in LIGHTNING_PACKAGES and name.rsplit(".", 1)[-1] in LIGHTNING_MODULES:
                return True
        return False

    def _argument(self, node: cst.Call, keyword: str, position: int) -> Optional[cst.BaseExpression]:
        """The value bound to a DataLoader parameter, by keyword, position (torch's class only) or
        through a known ``**kwargs`` dict."""
        arg = get_arg(node, keyword, _position(node, self.ctx, position))
        if arg is not None:
            return arg.value
        if has_star_args(node):
            return (_keyword_dict(node, self.ctx) or {}).get(keyword)
        return None

    def _has_workers(self, node: cst.Call) -> bool:
        value = self._argument(node, "num_workers", NUM_WORKERS)
        if value is None:
            return False  # the default: no workers
        values = [value]
        if isinstance(value, cst.Name):  # `num_workers = 0` ... `num_workers=num_workers`
            values = self.ctx.semantic.values_of(value) or self._given_to_parameter(value) or values
        return any(_may_be_positive(literal_value(v)) for v in values)

    def _given_to_parameter(self, name: cst.Name) -> Optional[List[cst.BaseExpression]]:
        """What the calls of the file give a parameter of a module-level function (its default
        where a call leaves it out): ``def create_dataloader(txt, num_workers=0)`` called only
        as ``create_dataloader(data, num_workers=0)`` starts no workers. None when unknown: no
        call seen, a star argument, the function's name used otherwise than called."""
        semantic = self.ctx.semantic
        bindings = semantic.lookup(name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != PARAM:
            return None
        function = bindings[0].scope.node
        if not isinstance(function, cst.FunctionDef) or not any(s is function for s in self.ctx.module.body):
            return None
        params = [*function.params.posonly_params, *function.params.params]
        param = next((p for p in params if p.name.value == name.value), None)
        if param is None:
            return None
        index = params.index(param)
        found: List[cst.BaseExpression] = []
        uses = 0
        for node in walk(self.ctx.module):
            if isinstance(node, cst.Name) and node.value == function.name.value and node is not function.name:
                uses += 1
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)
                    and node.func.value == function.name.value and semantic.module_function(node.func) is function):
                continue
            if has_star_args(node):
                return None
            given = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == name.value), None)
            if given is None:
                positional = [a for a in node.args if a.keyword is None]
                given = positional[index].value if index < len(positional) else (
                    param.default if param.default is not None else None)
            if given is None:
                return None
            found.append(given)
        return found if found and len(found) == uses else None

    def _not_persistent(self, node: cst.Call) -> bool:
        value = self._argument(node, "persistent_workers", PERSISTENT_WORKERS)
        return value is None or literal_value(value) is False

    def _fix(self, node: cst.Call) -> Optional[FixSpec]:
        """``persistent_workers=True`` for a positive literal ``num_workers``;
        ``persistent_workers=<workers> > 0`` for a name or attribute (0 workers would raise).
        None where ``num_workers`` comes through ``**kwargs``."""
        arg = get_arg(node, "num_workers", _position(node, self.ctx, NUM_WORKERS))
        if arg is None:
            return None
        workers = arg.value
        if literal_value(workers) is not UNKNOWN:
            value: cst.BaseExpression = cst.Name("True")
        elif dotted_name(workers) is not None:
            value = cst.Comparison(workers, [cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))])
        else:
            return None  # a call may differ between two evaluations
        current = get_arg(node, "persistent_workers", _position(node, self.ctx, PERSISTENT_WORKERS))
        if current is not None:
            edit = NodeEdit(current.value, value)
        else:
            from torchlint.fixbuilders import with_keyword_args

            edit = NodeEdit(node, with_keyword_args(node, [("persistent_workers", value)]))
        code = cst.Module([]).code_for_node(value)
        return FixSpec(UNSAFE, f"Set `persistent_workers={code}`", (edit,))


class DistributedSampler(_LoaderRule):
    """Flags a training ``torch.utils.data.DataLoader`` in a DDP program whose dataset is not
    sharded across ranks.

    "A DDP program": the file wraps a model in ``DistributedDataParallel`` or calls
    ``torch.distributed.init_process_group``. "Training loader": ``shuffle=True``, iterated by a
    loop that takes a gradient step, or bound to a name that says train (``train_loader``).
    "Sharded": a ``sampler=``/``batch_sampler=`` argument (any value but a literal ``None``), a
    dataset built with the rank or world size (``Subset(ds, idx[rank::world])``), a stream
    dataset (an ``IterableDataset`` subclass of the file, webdataset, HF ``datasets``), or a
    loader handed to ``accelerator.prepare(...)``. Loaders built on a branch that tests the
    distributed mode (``if args.distributed: ... else: DataLoader(ds, shuffle=True)``) and
    ``**kwargs`` stay silent.
    """

    code = "TL104"
    statement_local = False  # reads loaders and epoch loops anywhere in the file
    name = "distributed-sampler"
    summary = "A training `DataLoader` in a DDP program is not sharded: every rank trains on the whole dataset."
    message = "Every DDP rank iterates the whole dataset; pass `sampler=DistributedSampler(dataset)`"
    hint = (
        "Without a distributed sampler each epoch trains on the dataset world-size times; call "
        "`sampler.set_epoch(epoch)` each epoch too."
    )
    requires = (("DataLoader",), ("DistributedDataParallel", "init_process_group"))
    preview = True  # no finding on real code yet to show its precision
    fix_applicability = UNSAFE
    ast_candidate = staticmethod(lambda index: index.called("DataLoader") and index.mentions(
        "DistributedDataParallel", "init_process_group", substring=True))
    tags = ("correctness", "distributed")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.distributed = False
        self.trained: Set[int] = set()
        self.prepared: Set[str] = set()  # names handed to `.prepare(...)` (accelerate shards them)

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name in DISTRIBUTED_MARKERS:
            self.distributed = True
        elif name == DATALOADER:
            if not has_star_args(node) and not self._sharded(node) and not self._on_single_process_branch():
                self.pending.append(_Pending(node, list(self.ctx.ancestors)))
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "prepare":
            self.prepared.update(dotted_name(a.value) or "" for a in node.args)

    def visit_For(self, node: cst.For) -> None:
        if self.pending and calls_gradient_step(self.ctx, node):
            self.trained.update(id(c) for c in self.ctx.semantic.loader_calls(node.iter))

    def leave_Module(self, node: cst.Module) -> None:
        if self.distributed:
            self.report_pending(self._training_loader, self._fix)

    def _fix(self, item: _Pending) -> Optional[FixSpec]:
        """``sampler=DistributedSampler(dataset)`` in place of ``shuffle=`` (moved into the
        sampler: ``shuffle=False`` when the loader did not shuffle), and
        ``<loader>.sampler.set_epoch(<epoch>)`` first in the loop that iterates the loader once
        per epoch. Only for a loader bound to a name of its function (or module) whose every use
        is visible there: iterated by ``for`` (directly, through ``enumerate``/``tqdm``) or
        handed to a call, in one epoch loop with a name as its target, or in none (one pass).
        A dataset given as an expression other than a name would be evaluated twice: no fix."""
        from torchlint.fixbuilders import from_import_edit, with_keyword_args

        call, ctx = item.call, self.ctx
        parent = item.ancestors[-1] if item.ancestors else None
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name) and parent.value is call):
            return None
        loader = parent.targets[0].target.value
        dataset = get_arg(call, "dataset", 0)
        if dataset is None or dotted_name(dataset.value) is None:
            return None
        if any(a.keyword is None for a in call.args[2:]):
            return None  # shuffle or sampler by position
        shuffle = get_arg(call, "shuffle", SHUFFLE)
        sampler = get_arg(call, "sampler", SAMPLER)
        if shuffle is not None and sampler is not None:
            return None
        epoch = self._epoch_loop(item, loader)
        if epoch is False:
            return None
        spelling = self._sampler_name()
        if spelling is None:
            return None
        edits: List[NodeEdit] = []
        if spelling == "DistributedSampler" and spelling not in ctx.imports.aliases:
            edits.append(from_import_edit(ctx, ("torch.utils.data", "torch.utils.data.distributed"), spelling))
        code = ctx.module.code_for_node
        args = code(dataset.value)
        shuffled = shuffle is not None and literal_value(shuffle.value) is True
        if not shuffled:
            args += f", shuffle={code(shuffle.value)}" if shuffle is not None and literal_value(shuffle.value) is UNKNOWN else ", shuffle=False"
        value = cst.parse_expression(f"{spelling}({args})")
        if shuffle is not None:
            edits += [NodeEdit(shuffle.keyword, "sampler"), NodeEdit(shuffle.value, value)]
        elif sampler is not None:
            edits.append(NodeEdit(sampler.value, value))
        else:
            edits.append(NodeEdit(call, with_keyword_args(call, [("sampler", value)])))
        message = f"Pass `sampler={spelling}({args})`"
        if epoch is not None and (shuffled or shuffle is not None and literal_value(shuffle.value) is UNKNOWN):
            loop, target, path = epoch  # (an unshuffled sampler's epoch changes nothing)
            first = loop.body.body[0]
            indent = loop.body.indent if loop.body.indent is not None else ctx.module.default_indent
            outer = "".join(block_indents(ctx.module, path))
            edits.append(NodeEdit(first, f"{loader}.sampler.set_epoch({target})\n{outer}{indent}", INSERT_BEFORE))
            message += f" and call `{loader}.sampler.set_epoch({target})` each epoch"
        return FixSpec(UNSAFE, message, tuple(edits))

    def _sampler_name(self) -> Optional[str]:
        """How the file can spell ``DistributedSampler``: a name it imports it under, or
        ``DistributedSampler`` when the name is free (the fix imports it); None if taken."""
        aliases = self.ctx.imports.aliases
        for local, target in aliases.items():
            if target in ("torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"):
                return local
        for local, target in aliases.items():  # `import torch.utils.data as tud`: tud.DistributedSampler
            if target in ("torch.utils.data", "torch.utils.data.distributed") and local != "torch":
                return f"{local}.DistributedSampler"
        taken = any(isinstance(n, cst.Name) and n.value == "DistributedSampler" for n in walk(self.ctx.module))
        return None if taken else "DistributedSampler"

    def _epoch_loop(self, item: _Pending, loader: str):
        """(the epoch loop, its target's name) for the loader bound to ``loader``; None when it
        is iterated in one pass only; False when a use is out of sight (returned, stored,
        rebound, used in two epoch loops, a ``while`` or a loop without a plain name)."""
        scope = next((a for a in reversed(item.ancestors) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))),
                     self.ctx.module)
        if isinstance(scope, (cst.Lambda, cst.ClassDef)):
            return False
        epochs: Set[int] = set()
        found = None
        iterated = False
        stack: List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]] = [(scope, ())]
        while stack:
            node, path = stack.pop()
            if isinstance(node, cst.Name) and node.value == loader:
                parent = path[-1] if path else None
                if isinstance(parent, cst.AssignTarget) or isinstance(parent, (cst.Attribute,)) and parent.value is not node:
                    if isinstance(parent, cst.AssignTarget) and parent.target is node and node is not item.ancestors[-1].targets[0].target:
                        return False  # rebound
                    continue
                use = _loader_use(node, path)
                if use is None:
                    if isinstance(parent, (cst.Return, cst.Yield, cst.Element, cst.DictElement, cst.Assign,
                                           cst.AnnAssign, cst.AugAssign, cst.Global, cst.Nonlocal)):
                        return False  # handed on or stored: its epochs are out of sight
                    continue
                iterated = True
                loops = [a for a in path if isinstance(a, (cst.For, cst.While)) and a is not use]
                if not loops:
                    continue
                epoch = loops[-1]
                if not (isinstance(epoch, cst.For) and isinstance(epoch.target, cst.Name) and epoch.target.value != "_"
                        and isinstance(epoch.body, cst.IndentedBlock)):
                    return False
                epochs.add(id(epoch))
                prefix = [a for a in item.ancestors[:next(i for i, a in enumerate(item.ancestors) if a is scope)]]
                found = (epoch, epoch.target.value, [*prefix, *path[:path.index(epoch)]])
                continue
            if node is not scope and isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                continue
            for child in reversed(list(iter_children(node))):
                stack.append((child, path + (node,)))
        if not iterated or len(epochs) > 1:
            return False
        return found

    def _training_loader(self, item: _Pending) -> bool:
        target = _bound_name(item)
        if target in self.prepared:
            return False
        shuffle = get_arg(item.call, "shuffle", SHUFFLE)
        if shuffle is not None and literal_value(shuffle.value) is True:
            return True
        if id(item.call) in self.trained:
            return True
        words = set(name_tokens(cst.parse_expression(target))) if target else set()
        return bool(words & TRAIN_WORDS) and not words & EVAL_WORDS

    def _sharded(self, node: cst.Call) -> bool:
        for keyword, position in (("sampler", SAMPLER), ("batch_sampler", BATCH_SAMPLER)):
            arg = get_arg(node, keyword, position)
            if arg is not None and literal_value(arg.value) is not None:
                return True
        dataset = get_arg(node, "dataset", 0)
        if dataset is None:
            return True  # nothing to judge
        values = [dataset.value]
        if isinstance(dataset.value, (cst.Name, cst.Attribute)):
            values = self.ctx.semantic.values_of(dataset.value) or values
        return any(self._sharded_dataset(v) for v in values)

    def _sharded_dataset(self, value: cst.BaseExpression) -> bool:
        for n in walk(value):
            if isinstance(n, (cst.Name, cst.Attribute)) and set(name_tokens(n)) & DISTRIBUTED_WORDS:
                return True  # built with the rank or world size: sharded by hand
        if not isinstance(value, cst.Call):
            return False
        qualified = self.ctx.resolve_call(value) or ""
        if qualified.split(".", 1)[0] in STREAMING_LIBRARIES:
            return True
        if isinstance(value.func, cst.Name):
            for statement in self.ctx.module.body:
                if isinstance(statement, cst.ClassDef) and statement.name.value == value.func.value:
                    return any(self.ctx.resolve(b.value) in ITERABLE_DATASETS for b in statement.bases)
        return False

    def _on_single_process_branch(self) -> bool:
        """Under an ``if``/``else`` whose test asks about the distributed mode: the code chooses a
        loader per mode."""
        for parent, child in zip(self.ctx.ancestors, self.ctx.ancestors[1:]):
            if isinstance(parent, cst.If) and (child is parent.body or child is parent.orelse):
                if any(isinstance(n, (cst.Name, cst.Attribute)) and set(name_tokens(n)) & DISTRIBUTED_WORDS
                       for n in walk(parent.test)):
                    return True
        return False


def _loader_use(name: cst.Name, path: Tuple[cst.CSTNode, ...]) -> Optional[cst.CSTNode]:
    """The ``for`` that iterates the loader ``name`` (``for b in loader``, ``enumerate(loader)``,
    ``tqdm(loader)``), or the call it is handed to (``train_one_epoch(model, loader)``); None for
    any other use (``len(loader)``)."""
    for i in range(len(path) - 1, -1, -1):
        node = path[i]
        if isinstance(node, cst.For):
            return node if (path[i + 1] if i + 1 < len(path) else name) is node.iter else None
        if isinstance(node, cst.Call):
            inner = path[i + 1] if i + 1 < len(path) else name
            if isinstance(inner, cst.Arg) and inner.value is (path[i + 2] if i + 2 < len(path) else name):
                if isinstance(node.func, cst.Name) and node.func.value in ("len", "print", "iter", "next", "str", "repr"):
                    return None
                outer = path[i - 1] if i > 0 else None
                if isinstance(outer, cst.For) and outer.iter is node:
                    return outer
                if isinstance(outer, (cst.Call, cst.Arg)):
                    continue  # enumerate(tqdm(loader))
                return node
            return None
        if not isinstance(node, cst.Arg):
            return None
    return None


# -- loaders handed to functions of other project files (issue 29 class 2) -----------------------
HelperFacts = Tuple[Tuple[str, ...], Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], str]
ITERATED, MOVED, REPEATED = 1, 2, 3  # the positions of ``HelperFacts`` a rule asks about


def helper_facts(call: cst.Call, ctx) -> Optional[HelperFacts]:
    """What the project index says (``FileFacts.loader_helpers``) of the function of another
    project file that ``call`` calls: by the name the file imports (``train_one_epoch(...)``,
    ``engine.evaluate(...)``), or a method of an imported class through a name bound only to
    instances of it (``simclr = SimCLR(...)`` ... ``simclr.train(loader)``; bound to instances of
    several such classes, ``model = DCGAN(...)`` or ``model = WGAN(...)``: only what every one
    of their methods does). None when unknown."""
    helpers = ctx.project.loader_helpers
    if not helpers:
        return None
    func = call.func
    name = dotted_name(func)
    if name is None:
        return None
    found = helpers.get(name)
    semantic = ctx.semantic
    if found is not None:
        head = func
        while isinstance(head, cst.Attribute):
            head = head.value
        bindings = semantic.lookup(head) if isinstance(head, cst.Name) else None
        return found if bindings and all(b.kind == IMPORT for b in bindings) else None
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    values = semantic.values_of(func.value)
    if not values:
        return None
    each: List[HelperFacts] = []
    for value in values:
        cls = dotted_name(value.func) if isinstance(value, cst.Call) else None
        facts = helpers.get(f"{cls}.{func.attr.value}") if cls else None
        if facts is None or (each and facts[0] != each[0][0]):
            return None
        each.append(facts)
    if len(each) == 1:
        return each[0]
    first = each[0]
    def common(kind: int) -> Tuple[int, ...]:
        positions: Set[int] = set(first[kind])
        for facts in each[1:]:
            positions &= set(facts[kind])
        return tuple(sorted(positions))

    return (first[0], common(ITERATED), common(MOVED), common(REPEATED), first[4])


def handed_at(call: cst.Call, facts: HelperFacts, kind: int) -> List[cst.BaseExpression]:
    """The arguments of ``call`` bound to the parameters ``facts`` lists under ``kind``
    (``ITERATED``, ``MOVED``, ``REPEATED``); none after a star argument."""
    params, positions = facts[0], facts[kind]
    found: List[cst.BaseExpression] = []
    for index, arg in enumerate(call.args):
        if arg.star:
            break
        if arg.keyword is None:
            position: Optional[int] = index
        else:
            position = params.index(arg.keyword.value) if arg.keyword.value in params else None
        if position is not None and position in positions:
            found.append(arg.value)
    return found


def loader_calls_through(ctx, iterable: cst.BaseExpression, factory, sites: Optional[Dict[int, List[cst.Call]]] = None
                         ) -> List[cst.Call]:
    """``semantic.loader_calls``, and also through a name unpacked from what a function of this
    file returns (``train_loader, val_loader = set_loader(opt)`` where ``set_loader`` returns
    ``train_loader, val_loader``; every binding of the name that reaches must give loaders, and
    every ``return`` of the function a tuple of the same length). ``sites``: loader call id ->
    the calls of the functions it came through (a factory called inside an epoch loop builds a
    new loader each epoch)."""
    semantic = ctx.semantic
    found = semantic.loader_calls(iterable, factory)
    if found:
        return found
    for value in semantic.iterated_values(iterable):
        inner = _unpacked_loaders(value, ctx, factory, sites) if isinstance(value, cst.Name) else []
        if not inner:
            return []
        found += inner
    return found


def _unpacked_loaders(name: cst.Name, ctx, factory, sites: Optional[Dict[int, List[cst.Call]]]) -> List[cst.Call]:
    semantic = ctx.semantic
    bindings = semantic.lookup(name)
    if not bindings or all(b.value is not None for b in bindings):
        return []  # loader_calls answered for those
    found: List[cst.Call] = []
    for b in bindings:
        if b.kind != ASSIGN:
            return []
        if b.value is not None:
            inner = semantic.loader_calls(b.value, factory)
        else:
            statement = b.statement
            if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0].target, (cst.Tuple, cst.List))
                    and isinstance(statement.value, cst.Call)
                    and isinstance(statement.value.func, (cst.Name, cst.Attribute))):
                return []
            elements = statement.targets[0].target.elements
            position = next((i for i, e in enumerate(elements) if e.value is b.node), None)
            function = semantic.module_function(statement.value.func)
            if position is None or function is None or any(isinstance(e, cst.StarredElement) for e in elements):
                return []
            returned = semantic.returned_values(function)
            inner = []
            for value in returned:
                if not (isinstance(value, cst.Tuple) and len(value.elements) == len(elements)
                        and not any(isinstance(e, cst.StarredElement) for e in value.elements)):
                    return []
                got = semantic.loader_calls(value.elements[position].value, factory)
                if not got:
                    return []
                inner += got
            if sites is not None:
                for call in inner:
                    sites.setdefault(id(call), []).append(statement.value)
        if not inner:
            return []
        found += inner
    return found


def _bound_name(item: _Pending) -> Optional[str]:
    """``train_loader`` / ``self.train_loader`` for ``<name> = DataLoader(...)``."""
    parent = item.ancestors[-1] if item.ancestors else None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


def _contains(outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    return any(n is node for n in walk(outer))


def _built_before(epoch: cst.CSTNode, loaders: List[cst.Call], sites: Optional[Dict[int, List[cst.Call]]] = None) -> Set[int]:
    """Ids of the loader calls, among those an iteration in ``epoch`` may reach, that are built
    before the epoch loop and so iterated once per epoch; none when one of them is built inside
    it: the name is rebound per epoch (``if epoch > 0: loader = DataLoader(...)``), so how often
    the one built before runs is not known. A loader returned by a function of the file counts
    as built where that function is called (``sites``)."""
    if any(_contains(epoch, c) or any(_contains(epoch, site) for site in (sites or {}).get(id(c), ()))
           for c in loaders):
        return set()
    return {id(c) for c in loaders}


def _parameter_for(function: cst.FunctionDef, index: int, arg: cst.Arg) -> Optional[str]:
    """The parameter of ``function`` an argument binds (``self`` skipped for methods)."""
    if arg.keyword is not None:
        return arg.keyword.value
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    return params[index] if index < len(params) else None


def _iterates_parameter(function: cst.FunctionDef, param: str, semantic) -> bool:
    """Does a ``for`` of ``function`` iterate its parameter ``param`` (through ``enumerate``...)?"""
    for loop in walk(function.body, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if not isinstance(loop, cst.For):
            continue
        for value in semantic.iterated_values(loop.iter):
            if isinstance(value, cst.Name) and value.value == param:
                bindings = semantic.lookup(value) or ()
                if any(b.kind == PARAM for b in bindings):
                    return True
    return False


RULES = [DataLoaderPersistentWorkers, DistributedSampler]
