"""TL7xx: multi-GPU parallelism."""

from __future__ import annotations

import re
from typing import Optional

from torchlint import _cst as cst

from torchlint.rules.base import Rule
from torchlint.semantic import ASSIGN, PARAM
from torchlint.syntax import get_arg
from torchlint.tree import walk


class DataParallel(Rule):
    """Flags constructing ``torch.nn.DataParallel`` (or calling ``nn.parallel.data_parallel``).

    DataParallel runs one Python process that drives every GPU from threads: the GIL, a
    scatter/gather through GPU 0 and a model replica per step make it slower than
    DistributedDataParallel even on one machine. Mentions that construct nothing
    (``isinstance(m, nn.DataParallel)``, imports, subclassing), test code, and code in a class or
    function named for DataParallel (a library's ``DataParallelStrategy``) stay silent; so do a
    program that never trains (the model's ``may_train``: DDP's gain is the gradient
    all-reduce), a single-device wrapper (``device_ids=[0]``) and a DataParallel built in the
    branch of a test that names DP as the configured mode (``elif accel.use_dp:``).
    """

    code = "TL701"
    name = "data-parallel"
    summary = "`nn.DataParallel` is constructed; DistributedDataParallel is faster even on one machine."
    message = "`nn.DataParallel` runs all GPUs from one process; use `torch.nn.parallel.DistributedDataParallel`"
    hint = (
        "It drives all GPUs from one process and replicates the model every step. No automatic fix (the "
        "launch changes): after `dist.init_process_group(\"nccl\")` write "
        "`model = DDP(model.to(local_rank), device_ids=[local_rank])`, give the loader a "
        "`DistributedSampler`, and run `torchrun --nproc-per-node=NUM_GPUS train.py` (see `torchlint rule TL701`)."
    )
    requires = (("DataParallel", "data_parallel"),)
    ast_candidate = staticmethod(lambda index: index.mentions("DataParallel", "data_parallel", substring=True))
    # A project subclass may be used under any name: files the index has facts about are read.
    project_requires = ()

    uses_project = True

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name not in ("torch.nn.DataParallel", "torch.nn.parallel.data_parallel"):
            subclass = self._project_subclass(node)
            if subclass is None or self._implements_data_parallel_support() or not self._applies(node):
                return
            self.report(
                node,
                f"`{subclass}` subclasses `nn.DataParallel`; use `torch.nn.parallel.DistributedDataParallel`",
            )
            return
        if self._implements_data_parallel_support() or not self._applies(node):
            return
        if name == "torch.nn.DataParallel":
            self.report(node)
        else:
            self.report(
                node,
                "`nn.parallel.data_parallel` replicates per call; use `torch.nn.parallel.DistributedDataParallel`",
                hint="It replicates the module on every call and drives all GPUs from one process.",
            )


    def _applies(self, node: cst.Call) -> bool:
        """Is DDP's advice right here? Not for a single-device wrapper, nor for a DataParallel
        built because a configuration already chose it, nor in a program that never trains
        (the model's ``may_train``: DDP's gain is the gradient all-reduce)."""
        if self._single_device(node) or self._chosen_by_configuration():
            return False
        return self.ctx.model.may_train()

    def _single_device(self, node: cst.Call) -> bool:
        """``device_ids`` is one device: ``[0]``, ``[local_rank]``, ``(gpu,)``, or a name bound only
        to one (a parameter whose default is ``[0]``, as LPIPS's ``gpu_ids=[0]``): DataParallel
        then calls the module directly, with no replica and no scatter."""
        arg = get_arg(node, "device_ids", 2 if self.ctx.resolve_call(node) == "torch.nn.parallel.data_parallel" else 1)
        if arg is None or arg.star:
            return False
        value = arg.value
        if isinstance(value, cst.Name):
            bindings = self.ctx.semantic.lookup(value)
            if not bindings:
                return False
            values = []
            for binding in bindings:
                if binding.kind == PARAM:
                    param = binding.statement
                    if not isinstance(param, cst.Param) or param.default is None:
                        return False
                    values.append(param.default)
                elif binding.kind == ASSIGN and binding.value is not None and _plain_assignment(binding.statement):
                    values.append(binding.value)
                else:
                    return False
            return all(_one_element(v) for v in values)
        return _one_element(value)

    def _chosen_by_configuration(self) -> bool:
        """In the body of an ``if``/``elif`` whose test names DataParallel as the strategy in use
        (``elif accel.use_dp:``, ``if strategy == "dp":``, ``isinstance(s, DataParallelStrategy)``):
        code that mirrors a choice made elsewhere (a Lightning callback following the Trainer's
        strategy); the advice belongs where DP is chosen."""
        ancestors = self.ctx.ancestors
        for i, parent in enumerate(ancestors[:-1]):
            if isinstance(parent, cst.If) and ancestors[i + 1] is parent.body and _names_dp(parent.test):
                return True
        return False

    def _project_subclass(self, node: cst.Call) -> Optional[str]:
        """The callee, when it names a project class deriving from ``nn.DataParallel`` (in this
        file or, through the project index, another)."""
        subclasses = self.ctx.project.subclasses
        if not subclasses or not isinstance(node.func, cst.Name):
            return None
        name = node.func.value
        return name if subclasses.get(name) == "torch.nn.DataParallel" else None

    def _implements_data_parallel_support(self) -> bool:
        """Inside a class or function named for DataParallel (Lightning's
        ``DataParallelStrategy``): a library offering DP as an option, not a user choosing it."""
        return any(
            isinstance(node, (cst.ClassDef, cst.FunctionDef))
            and "dataparallel" in node.name.value.lower().replace("_", "")
            for node in self.ctx.ancestors
        )


def _plain_assignment(statement: cst.CSTNode) -> bool:
    """``name = value`` (every target a plain name), not an unpacking."""
    if isinstance(statement, cst.Assign):
        return all(isinstance(t.target, cst.Name) for t in statement.targets)
    return isinstance(statement, cst.AnnAssign) and isinstance(statement.target, cst.Name)


def _one_element(value: cst.BaseExpression) -> bool:
    return isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) == 1 and not isinstance(
        value.elements[0], (cst.StarredElement,))


_WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _names_dp(test: cst.BaseExpression) -> bool:
    """Does the test name DataParallel as a mode: a name, attribute or string whose words are
    ``dp`` (``use_dp``, ``DistributedType.DP``, ``"dp"``) or ``data parallel`` (not ``ddp``,
    ``DistributedDataParallel``)?"""
    for node in walk(test):
        if isinstance(node, cst.Name):
            text = node.value
        elif isinstance(node, cst.SimpleString):
            text = node.value.strip("'\"bBrRuU")
        else:
            continue
        words = [w.lower() for part in text.split("_") for w in _WORD_PARTS.findall(part)]
        if "dp" in words:
            return True
        if "distributed" in words:
            continue
        for a, b in zip(words, words[1:]):
            if a == "data" and b == "parallel":
                return True
    return False


RULES = [DataParallel]
