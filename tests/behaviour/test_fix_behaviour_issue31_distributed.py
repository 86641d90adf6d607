"""What the fixes of TL902, TL702, TL104 and TL703 (issue 31) change when the code runs, with
real torch on the CPU.

TL902's program runs in this process. The distributed ones run in two processes with the
``gloo`` backend: a small harness script (written to ``tmp_path``) is started twice, one
process per rank, and the two join through a ``FileStore``; each executes every program it is given
(the code before each fix and after it, for the three rules, in the same two processes: one
start-up serves all) and saves what each returns, or the error it raised. All four fixes are unsafe:
each test shows the program computing what it should after the fix, and the case that makes the
fix unsafe where one can be run here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():  # pragma: no cover - torch built without gloo
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from torchlint.config import Settings, settings_from_table  # noqa: E402
from torchlint.diagnostics import UNSAFE  # noqa: E402
from torchlint.fixer import fix_text  # noqa: E402
from torchlint.notebook import fix_notebook  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402

HARNESS = '''\
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

PROGRAMS = {programs!r}


def worker(rank, world, store_path, out_dir):
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=60))
    results = {{}}
    for key, (source, entry) in PROGRAMS.items():
        namespace = {{"__name__": "program_" + key}}
        try:
            exec(compile(source, key + ".py", "exec"), namespace)
            results[key] = ("ok", namespace[entry](rank, world))
        except Exception as error:  # the unsafe case: what it raised
            results[key] = ("error", type(error).__name__ + ": " + str(error))
    torch.save(results, out_dir + "/rank" + str(rank) + ".pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    worker(int(sys.argv[1]), 2, sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    __import__("os")._exit(0)  # results are saved: gloo's teardown at exit may abort ("terminate called ...")
'''


def run_ranks(tmp_path, programs: dict) -> list:
    """Run each ``name -> (source, entry)`` in two gloo ranks (two processes started side by
    side, as ``torchrun`` would); per rank, ``name -> ("ok", value)`` or ``("error", message)``."""
    script = tmp_path / "harness.py"
    script.write_text(HARNESS.format(programs={k: (textwrap.dedent(s), e) for k, (s, e) in programs.items()}))
    ranks = [
        subprocess.Popen([sys.executable, str(script), str(rank), str(tmp_path / "store"), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=240)[0] for p in ranks]
    finally:
        for p in ranks:
            if p.poll() is None:  # pragma: no cover - a hung rank
                p.kill()
    assert [p.returncode for p in ranks] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """The distributed programs, before and after their fixes, run in one pair of rank processes
    (starting torch twice costs more than the programs; one start serves the three tests)."""
    ddp = fix(DDP_TRAIN, "TL702", count=2)
    shards = fix(SHARDS, "TL104", count=1, preview=True)
    average = fix(AVERAGE, "TL703", count=2)
    return run_ranks(tmp_path_factory.mktemp("ranks"), {
        "tl702_before": (DDP_TRAIN, "train_all_used"),
        "tl702_after": (ddp, "train_all_used"),
        "tl702_unused_before": (DDP_TRAIN, "train_with_unused"),
        "tl702_unused_after": (ddp, "train_with_unused"),
        "tl104_before": (SHARDS, "main"),
        "tl104_after": (shards, "main"),
        "tl104_no_set_epoch": (shards.replace("        loader.sampler.set_epoch(epoch)\n", ""), "main"),
        "tl703_before": (AVERAGE, "main"),
        "tl703_after": (average, "main"),
    })


def fix(source: str, code: str, count: int = None, preview: bool = False) -> str:
    table = {"preview": True} if preview else None
    return behaviour_fix(source, code, UNSAFE, count, table=table)


def settings(code: str) -> Settings:
    return settings_from_table({"select": [code], "preview": True}, "t.toml", Settings())


def assert_fixed_point(text: str, code: str) -> None:
    """A second ``--fix --unsafe-fixes`` changes nothing and leaves code that compiles."""
    again = fix_text(text, "train.py", settings(code), unsafe=True)
    assert again.error is None and not again.changed, again.text
    compile(text, "fixed.py", "exec")


# -- TL902: model.eval() after the load -----------------------------------------------------------
PREDICT = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.BatchNorm1d(16), nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)


def predict(state, batch):
    model = Net()
    model.load_state_dict(state)  # the trained weights
    with torch.no_grad():
        scores = model(batch)
    stats = model.body[2].running_mean.clone()
    return scores, stats
"""


def test_tl902_fix_makes_inference_deterministic_and_in_eval_mode():
    fixed = fix(PREDICT, "TL902", count=1, preview=True)
    assert "    model.load_state_dict(state)  # the trained weights\n    model.eval()\n" in fixed
    assert_fixed_point(fixed, "TL902")
    before, after = run_program(PREDICT), run_program(fixed)
    torch.manual_seed(0)
    trained = before["Net"]()
    trained.body[2].running_mean.fill_(0.5)  # statistics a training run left
    trained.body[2].running_var.fill_(2.0)
    state = trained.state_dict()
    batch = torch.randn(32, 8)
    # Before: dropout draws a new mask each call and batch norm uses the batch's statistics and
    # overwrites the loaded running ones.
    (b1, s1), (b2, _) = before["predict"](state, batch), before["predict"](state, batch)
    assert not torch.allclose(b1, b2)
    assert not torch.allclose(s1, torch.full((16,), 0.5))
    # After: the same scores every call, the loaded statistics untouched, equal to eval mode.
    (a1, t1), (a2, _) = after["predict"](state, batch), after["predict"](state, batch)
    assert torch.equal(a1, a2)
    assert torch.equal(t1, torch.full((16,), 0.5))
    reference = before["Net"]()
    reference.load_state_dict(state)
    reference.eval()
    with torch.no_grad():
        assert torch.equal(a1, reference(batch))


def test_tl902_unsafe_case_a_model_whose_output_depends_on_its_mode():
    """The fix is unsafe where the code below relies on training-mode behaviour: a model that
    returns auxiliary outputs only in training (as torchvision's Inception does) is unpacked
    as a pair before the fix and raises after it."""
    source = """\
import torch
import torch.nn as nn


class WithAux(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)
        self.aux = nn.Linear(4, 2)

    def forward(self, x):
        if self.training:
            return self.head(x), self.aux(x)
        return self.head(x)


def scores(state, x):
    model = WithAux()
    model.load_state_dict(state)
    logits, aux = model(x)
    return logits
"""
    fixed = fix(source, "TL902", count=1, preview=True)
    before, after = run_program(source), run_program(fixed)
    state = before["WithAux"]().state_dict()
    x = torch.randn(3, 4)
    assert before["scores"](state, x).shape == (3, 2)
    with pytest.raises(ValueError):
        after["scores"](state, x)


# -- TL702: find_unused_parameters=False --------------------------------------------------------
DDP_TRAIN = """\
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 2)
        self.unused = nn.Linear(4, 2)  # never called in forward: no gradient

    def forward(self, x):
        return self.used(x)


def run(model, rank, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        loss = model(torch.randn(16, 4, generator=data)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def train_all_used(rank, world):
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), find_unused_parameters=True)
    return run(model, rank)


def train_with_unused(rank, world):
    torch.manual_seed(0)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    return run(model, rank)
"""


def test_tl702_fix_trains_identically_and_raises_for_an_unused_parameter(ranks):
    fixed = fix(DDP_TRAIN, "TL702", count=2)
    assert fixed.count("find_unused_parameters=False") == 2 and "=True" not in fixed
    assert_fixed_point(fixed, "TL702")
    ranks = [{k[len("tl702_"):]: v for k, v in r.items() if k.startswith("tl702_")} for r in ranks]
    for results in ranks:
        status, before = results["before"]
        assert status == "ok", before
        status, after = results["after"]
        assert status == "ok", after
        # every parameter gets a gradient every step: the same weights, bit for bit
        assert all(torch.equal(b, a) for b, a in zip(before, after))
        # the unsafe case: a parameter without gradient trains with the flag, raises without it
        assert results["unused_before"][0] == "ok", results["unused_before"]
        status, message = results["unused_after"]
        assert status == "error" and "RuntimeError" in message and "reduction" in message, message
    # DDP kept the two ranks' weights equal although they saw different data
    assert all(torch.equal(a, b) for a, b in zip(ranks[0]["after"][1], ranks[1]["after"][1]))


# -- TL104: a DistributedSampler and set_epoch ----------------------------------------------------
SHARDS = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main(rank, world):
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    dataset = TensorDataset(torch.arange(16.0).unsqueeze(1))
    loader = DataLoader(dataset, batch_size=4, shuffle=True)
    seen = []
    for epoch in range(3):
        order = []
        for (x,) in loader:
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            order += x.flatten().long().tolist()
        seen.append(order)
    return seen
"""


def test_tl104_fix_gives_each_rank_a_distinct_shard_reshuffled_every_epoch(ranks):
    fixed = fix(SHARDS, "TL104", count=1, preview=True)
    assert "from torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n" in fixed
    assert "loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset))" in fixed
    assert "    for epoch in range(3):\n        loader.sampler.set_epoch(epoch)\n" in fixed
    assert_fixed_point(fixed, "TL104")
    ranks = [{k[len("tl104_"):]: v for k, v in r.items() if k.startswith("tl104_")} for r in ranks]
    everything = list(range(16))
    for results in ranks:
        assert results["before"][0] == "ok" and results["after"][0] == "ok", (results["before"], results["after"])
        # before: every rank trains on the whole dataset every epoch
        assert all(sorted(epoch) == everything for epoch in results["before"][1])
        # after: half of it per rank...
        assert all(len(epoch) == 8 for epoch in results["after"][1])
        # ...in a new order each epoch, which set_epoch is for: without it every epoch repeats
        epochs = results["after"][1]
        assert epochs[0] != epochs[1] or epochs[1] != epochs[2]
        repeated = results["no_set_epoch"][1]
        assert repeated[0] == repeated[1] == repeated[2]
    for epoch in range(3):  # the two shards are disjoint and cover the dataset
        first, second = ranks[0]["after"][1][epoch], ranks[1]["after"][1][epoch]
        assert not set(first) & set(second) and sorted(first + second) == everything


def test_tl104_unsafe_case_a_loader_built_before_the_process_group_raises():
    """`DistributedSampler(dataset)` asks the process group for the world size when it is built:
    a loader built before `init_process_group` worked before the fix and raises after it."""
    source = """\
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def setup():
    dist.init_process_group("gloo")


def main(dataset):
    loader = DataLoader(dataset, batch_size=4, shuffle=True)
    seen = 0
    for epoch in range(2):
        for (x,) in loader:
            seen += len(x)
    return seen
"""
    fixed = fix(source, "TL104", count=1, preview=True)
    assert "loader.sampler.set_epoch(epoch)" in fixed
    assert not dist.is_initialized()
    dataset = torch.utils.data.TensorDataset(torch.arange(8.0))
    assert run_program(source)["main"](dataset) == 16
    with pytest.raises((RuntimeError, ValueError), match="process group"):
        run_program(fixed)["main"](dataset)


# -- TL703: one all-reduce over a flat buffer -----------------------------------------------------
AVERAGE = """\
import torch
import torch.distributed as dist


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():  # one collective per tensor
        if param.grad is not None:
            dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
            param.grad.data /= size


def train_summing_weights(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        for p in model.parameters():
            dist.all_reduce(p.data)  # the weights themselves, every step


def main(rank, world):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3), torch.nn.Linear(3, 1))
    model[1].bias.requires_grad_(False)  # no gradient: the guard skips it
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(rank + 1))
    model(x).sum().backward()
    local = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    average_gradients(model)
    averaged = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    train_summing_weights(model, [x, x + 1])
    return local, averaged, [p.detach().clone() for p in model.parameters()]
"""


def test_tl703_flat_all_reduce_gives_the_per_parameter_gradients(ranks):
    fixed = fix(AVERAGE, "TL703", count=2)
    assert fixed.count("all_reduce(") == 2 and "torch.cat(" in fixed
    assert "    dist.all_reduce(flat, op=dist.ReduceOp.SUM)\n" in fixed
    assert "            param.grad.data /= size\n" in fixed  # the rest of the loop stays
    assert_fixed_point(fixed, "TL703")
    ranks = [{k[len("tl703_"):]: v for k, v in r.items() if k.startswith("tl703_")} for r in ranks]
    for results in ranks:
        assert results["before"][0] == "ok" and results["after"][0] == "ok", (results["before"], results["after"])
        _, b_grads, b_weights = results["before"][1]
        _, a_grads, a_weights = results["after"][1]
        assert [g is None for g in b_grads] == [g is None for g in a_grads] == [False, False, False, True, False, False]
        assert all(torch.equal(b, a) for b, a in zip(b_grads, a_grads) if b is not None)
        assert all(torch.equal(b, a) for b, a in zip(b_weights, a_weights))
    # the average of the two ranks' own gradients, on both ranks
    local0, local1 = ranks[0]["after"][1][0], ranks[1]["after"][1][0]
    for g0, g1, averaged in zip(local0, local1, ranks[0]["after"][1][1]):
        if g0 is not None:
            assert torch.allclose((g0 + g1) / 2, averaged)


def test_tl703_unsafe_case_no_gradient_yet_raises_where_the_loop_did_nothing():
    """Before any backward pass every `.grad` is None: the guarded loop reduced nothing, the
    fixed code concatenates an empty list, which raises (before reaching any collective, so no
    process group is needed to show it)."""
    fixed = fix(AVERAGE, "TL703", count=2)
    model = torch.nn.Linear(2, 2)
    before = run_program(AVERAGE)
    before["dist"] = _OneRank()
    before["average_gradients"](model)  # nothing to reduce: nothing happens
    after = run_program(fixed)
    after["dist"] = _OneRank()
    with pytest.raises((RuntimeError, ValueError)):  # "expected a non-empty list of Tensors"
        after["average_gradients"](model)


class _OneRank:
    """Stands for `torch.distributed` where no collective may be reached."""

    ReduceOp = dist.ReduceOp

    @staticmethod
    def get_world_size():
        return 1

    @staticmethod
    def all_reduce(*args, **kwargs):  # pragma: no cover - reaching it fails the test
        raise AssertionError("no collective expected")


# -- notebooks ---------------------------------------------------------------------------------
def notebook(*sources: str) -> str:
    return json.dumps({"cells": [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": textwrap.dedent(s)}
        for s in sources
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 4})


def fix_twice(raw: str, table: dict):
    settings = settings_from_table(table, "t", Settings())
    result = fix_notebook(raw, "nb.ipynb", settings, unsafe=True)
    assert result.error is None and not result.warnings
    again = fix_notebook(result.text, "nb.ipynb", settings, unsafe=True)
    assert again.error is None and again.text == result.text  # a second pass changes nothing
    cells = ["".join(c["source"]) for c in json.loads(result.text)["cells"]]
    for cell in cells:
        compile(cell, "cell", "exec")
    return result, cells


def test_distributed_fixes_work_in_notebooks():
    raw = notebook(
        "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader\n",
        "dist.init_process_group('gloo')\nmodel = DDP(Net(), find_unused_parameters=True)\n"
        "loader = DataLoader(train_ds, batch_size=4, shuffle=True)\n",
        "for epoch in range(3):\n    for x in loader:\n        model(x).sum().backward()\n"
        "        for p in model.parameters():\n            dist.all_reduce(p.grad)",
    )
    result, cells = fix_twice(raw, {"select": ["TL702", "TL104", "TL703"], "preview": True})
    assert dict(result.applied) == {"TL702": 1, "TL104": 1, "TL703": 1}
    assert "from torch.utils.data import DataLoader, DistributedSampler" in cells[0]
    assert "find_unused_parameters=False" in cells[1] and "sampler=DistributedSampler(train_ds)" in cells[1]
    assert cells[2].startswith("for epoch in range(3):\n    loader.sampler.set_epoch(epoch)\n")
    assert "        dist.all_reduce(flat)\n" in cells[2] and "for p in model.parameters():" not in cells[2]


def test_eval_fix_works_in_notebooks():
    """The load is the last line of its cell, without a newline; the model runs in the next."""
    raw = notebook("import torch\nfrom models import Net\n", "net = Net()\nnet.load_state_dict(torch.load('w.pt', weights_only=True))",
                   "net(torch.ones(1))\n")
    result, cells = fix_twice(raw, {"select": ["TL902"], "preview": True})
    assert dict(result.applied) == {"TL902": 1}
    assert cells[1] == "net = Net()\nnet.load_state_dict(torch.load('w.pt', weights_only=True))\nnet.eval()"
    assert cells[0] == "import torch\nfrom models import Net\n" and cells[2] == "net(torch.ones(1))\n"
