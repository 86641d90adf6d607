"""TL7xx: multi-GPU parallelism."""

from __future__ import annotations

from typing import Optional

from torchlint import _cst as cst

from torchlint.rules.base import Rule


class DataParallel(Rule):
    """Flags constructing ``torch.nn.DataParallel`` (or calling ``nn.parallel.data_parallel``).

    DataParallel runs one Python process that drives every GPU from threads: the GIL, a
    scatter/gather through GPU 0 and a model replica per step make it slower than
    DistributedDataParallel even on one machine. Mentions that construct nothing
    (``isinstance(m, nn.DataParallel)``, imports, subclassing), test code, and code in a class or
    function named for DataParallel (a library's ``DataParallelStrategy``) stay silent.
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
            if subclass is None or self._implements_data_parallel_support():
                return
            self.report(
                node,
                f"`{subclass}` subclasses `nn.DataParallel`; use `torch.nn.parallel.DistributedDataParallel`",
            )
            return
        if self._implements_data_parallel_support():
            return
        if name == "torch.nn.DataParallel":
            self.report(node)
        else:
            self.report(
                node,
                "`nn.parallel.data_parallel` replicates per call; use `torch.nn.parallel.DistributedDataParallel`",
                hint="It replicates the module on every call and drives all GPUs from one process.",
            )


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


RULES = [DataParallel]
