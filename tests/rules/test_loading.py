"""TL103 dataloader-persistent-workers and TL104 distributed-sampler: exact findings and fix texts."""

from __future__ import annotations

import ast
import textwrap

from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import UNSAFE
from torchlint.edits import apply_edits
from torchlint.engine import lint_source

HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"


def lint(code: str, body: str, path: str = "train.py"):
    text = HEADER + textwrap.dedent(body)
    settings = settings_from_table({"select": [code], "preview": True}, "t.toml", Settings())
    return text, lint_source(text, path, settings)


def positions(found):
    return [(d.code, d.location.row, d.location.column) for d in found]


def fixed(code: str, body: str):
    text, found = lint(code, body)
    assert len(found) == 1, found
    assert found[0].fix is not None
    out = apply_edits(text, found[0].fix.edits)
    ast.parse(out)
    return out, found[0].fix.applicability


EPOCHS = """\
for epoch in range(10):
    for batch in loader:
        step(batch)
"""


# -- TL103 ---------------------------------------------------------------------------------

def test_tl103_flags_a_loader_iterated_in_an_epoch_loop():
    _, found = lint("TL103", "loader = DataLoader(ds, num_workers=4)\n" + EPOCHS)
    assert positions(found) == [("TL103", 3, 10)]


def test_tl103_fix_adds_persistent_workers():
    out, applicability = fixed("TL103", "loader = DataLoader(ds, num_workers=4)\n" + EPOCHS)
    assert applicability == UNSAFE
    assert "loader = DataLoader(ds, num_workers=4, persistent_workers=True)\n" in out


def test_tl103_fix_guards_a_variable_worker_count():
    out, _ = fixed("TL103", "loader = DataLoader(ds, num_workers=args.workers)\n" + EPOCHS)
    assert "DataLoader(ds, num_workers=args.workers, persistent_workers=args.workers > 0)" in out


def test_tl103_fix_replaces_a_literal_false():
    out, _ = fixed("TL103", "loader = DataLoader(ds, num_workers=2, persistent_workers=False)\n" + EPOCHS)
    assert "DataLoader(ds, num_workers=2, persistent_workers=True)" in out


def test_tl103_no_fix_for_a_call():
    _, found = lint("TL103", "loader = DataLoader(ds, num_workers=os.cpu_count())\n" + EPOCHS)
    assert len(found) == 1 and found[0].fix is None


def test_tl103_through_a_function_of_the_file_and_a_method():
    _, found = lint("TL103", """\
        def run(model, loader):
            for x in loader:
                model(x)

        class T:
            def __init__(self, ds):
                self.loader = DataLoader(ds, num_workers=2)

            def epoch(self):
                for x in self.loader:
                    pass

            def fit(self):
                while True:
                    self.epoch()

        def main(ds, model):
            train_loader = DataLoader(ds, num_workers=2)
            for epoch in range(3):
                run(model, loader=train_loader)
        """)
    assert positions(found) == [("TL103", 9, 23), ("TL103", 20, 20)]


def test_tl103_silent_cases():
    _, found = lint("TL103", """\
        a = DataLoader(ds, num_workers=4)
        for x in a:  # one pass
            pass
        b = DataLoader(ds, num_workers=4, persistent_workers=True)
        c = DataLoader(ds)
        for epoch in range(3):
            for x in b:
                pass
            for x in c:
                pass
            d = DataLoader(ds, num_workers=4)
            for x in d:
                pass
            show(DataLoader(ds, num_workers=4))
        """)
    assert found == []


def test_tl103_respects_the_target_torch_version():
    text = HEADER + "loader = DataLoader(ds, num_workers=4)\n" + EPOCHS
    settings = settings_from_table({"select": ["TL103"], "target-torch-version": "1.6"}, "t.toml", Settings())
    assert lint_source(text, "train.py", settings) == []


# -- TL104 ---------------------------------------------------------------------------------

DDP = "import torch.distributed as dist\ndist.init_process_group('nccl')\n"


def test_tl104_flags_a_shuffled_loader_in_a_ddp_program():
    _, found = lint("TL104", DDP + "loader = DataLoader(ds, batch_size=8, shuffle=True)\n")
    assert positions(found) == [("TL104", 5, 10)]
    assert "DistributedSampler" in found[0].message


def test_tl104_ddp_wrapper_marks_the_program():
    _, found = lint("TL104", """\
        from torch.nn.parallel import DistributedDataParallel
        def main(model, ds, opt):
            model = DistributedDataParallel(model)
            loader = DataLoader(ds)
            for x in loader:
                model(x).backward()
                opt.step()
        """)
    assert positions(found) == [("TL104", 6, 14)]


def test_tl104_silent_without_ddp():
    _, found = lint("TL104", "# DistributedDataParallel is only named here\nloader = DataLoader(ds, shuffle=True)\n")
    assert found == []


def test_tl104_silent_when_sharded():
    _, found = lint("TL104", DDP + """\
        from torch.utils.data.distributed import DistributedSampler
        a = DataLoader(ds, sampler=DistributedSampler(ds))
        b = DataLoader(ds, 8, False, sampler)
        c = DataLoader(ds, batch_sampler=bs)
        d = DataLoader(ds.shard(num_shards=world_size, index=rank), shuffle=True)
        e = DataLoader(ds, shuffle=True, **kw)
        val_loader = DataLoader(ds)
        f = DataLoader(ds, shuffle=True)
        f = accelerator.prepare(f)
        """)
    assert found == []


def test_tl104_is_a_preview_rule():
    text = HEADER + DDP + "loader = DataLoader(ds, shuffle=True)\n"
    settings = settings_from_table({"select": ["TL104"]}, "t.toml", Settings())
    assert lint_source(text, "train.py", settings) == []


def test_tl103_silent_when_the_loader_is_rebound_inside_the_epoch_loop():
    # flair's language model trainer: the first loader serves epoch 0 only; each later epoch
    # builds its own (judged on real code: issue 10's judgement table)
    rebound = """\
    def fit(ds, model, epochs):
        loader = DataLoader(ds, shuffle=False, num_workers=4)
        for epoch in range(epochs):
            if epoch > 0:
                loader = DataLoader(ds, shuffle=True, num_workers=4)
            for batch in loader:
                model(batch)
    """
    assert positions(lint("TL103", rebound)[1]) == []
    handed = rebound.replace("            for batch in loader:\n                model(batch)\n",
                             "            train_one_epoch(model, loader)\n")
    assert positions(lint("TL103", handed)[1]) == []
    # without the rebinding the first loader runs every epoch: flagged
    kept = rebound.replace("            if epoch > 0:\n                loader = DataLoader(ds, shuffle=True, num_workers=4)\n", "")
    assert positions(lint("TL103", kept)[1]) == [("TL103", 4, 14)]


def test_tl103_silent_for_a_loader_a_function_builds_on_each_call():
    # avalanche's hash_dataset: called once per dataset, each call builds and iterates its own loader
    built = """\
    def hash_dataset(dataset, num_workers=0):
        loader = DataLoader(dataset, num_workers=num_workers)
        for batch in loader:
            print(batch)

    def hash_all(datasets, num_workers):
        for dataset in datasets:
            hash_dataset(dataset, num_workers=num_workers)
    """
    assert positions(lint("TL103", built)[1]) == []
    # a loader built once and iterated by the called function each time: flagged
    shared = """\
    loader = DataLoader(ds, num_workers=4)

    def one_pass():
        for batch in loader:
            print(batch)

    for epoch in range(10):
        one_pass()
    """
    assert positions(lint("TL103", shared)[1]) == [("TL103", 3, 10)]


def test_tl103_workers_through_a_dict_literal_alone_or_with_every_rule():
    """``num_workers`` in a ``{...}`` literal handed as ``**params``: TL103 alone reaches the file
    too (its question on CPython's tree once said no: no ``num_workers=`` keyword anywhere)."""
    import textwrap

    from torchlint.config import Settings
    from torchlint.engine import lint_source

    text = textwrap.dedent("""\
        from torch.utils.data import DataLoader

        params = {"batch_size": 8, "shuffle": True, "num_workers": 8}
        loader = DataLoader(ds, **params)
        for epoch in range(3):
            for batch in loader:
                model(batch)
    """)
    alone = [(d.code, d.location.row) for d in lint_source(text, "t.py", Settings(select=("TL103",)))]
    every = [(d.code, d.location.row) for d in lint_source(text, "t.py", Settings()) if d.code == "TL103"]
    assert alone == every == [("TL103", 4)]
