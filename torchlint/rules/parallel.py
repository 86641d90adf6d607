"""TL7xx: multi-GPU parallelism."""

from __future__ import annotations

import libcst as cst

from torchlint.rules.base import Rule


class DataParallel(Rule):
    """Flags constructing ``torch.nn.DataParallel`` (or calling ``nn.parallel.data_parallel``).

    DataParallel runs one Python process that drives every GPU from threads: the GIL, a
    scatter/gather through GPU 0 and a model replica per step make it slower than
    DistributedDataParallel even on one machine. Mentions that construct nothing
    (``isinstance(m, nn.DataParallel)``, imports, subclassing) stay silent.
    """

    code = "TL701"
    name = "data-parallel"
    summary = "`nn.DataParallel` is constructed; DistributedDataParallel is faster even on one machine."
    message = (
        "`nn.DataParallel` drives all GPUs from one process and replicates the model every step; "
        "use `torch.nn.parallel.DistributedDataParallel` (one process per GPU, e.g. via `torchrun`)."
    )
    requires = (("DataParallel", "data_parallel"),)

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name == "torch.nn.DataParallel":
            self.report(node)
        elif name == "torch.nn.parallel.data_parallel":
            self.report(
                node,
                "`nn.parallel.data_parallel` replicates the module on every call and drives all GPUs "
                "from one process; use `torch.nn.parallel.DistributedDataParallel`.",
            )


RULES = [DataParallel]
