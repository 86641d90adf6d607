"""Issue 31: the fixes of TL402, TL201, TL407, TL406, TL204 and TL403, run before and after with
real torch on the CPU (TL403: two processes with the gloo backend).

Each fix is unsafe; each test shows the results it keeps and, next to it, the program that makes
it unsafe. Every fixed text is also fixed a second time (nothing changes) and checked to parse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from torchlint.config import Settings, settings_from_table  # noqa: E402
from torchlint.engine import lint_source  # noqa: E402
from torchlint.fixer import fix_text  # noqa: E402
from torchlint.notebook import fix_notebook  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402

PREVIEW = {"preview": True}


def fix(source: str, code: str, count: int = None, table: dict = None) -> str:
    """``source`` through ``--fix --unsafe-fixes`` of ``code``; the result is a fixed point."""
    fixed = behaviour_fix(source, code, applicability="unsafe", count=count, path="program.py", table=table)
    settings = settings_from_table({"select": [code], **(table or {})}, "t.toml", Settings())
    again = fix_text(fixed, "program.py", settings, unsafe=True)
    assert again.error is None and not again.changed, "a second --fix pass changed the file"
    compile(fixed, "fixed.py", "exec")
    return fixed


def findings(source: str, code: str, table: dict = None):
    settings = settings_from_table({"select": [code], **(table or {})}, "t.toml", Settings())
    return lint_source(textwrap.dedent(source), "program.py", settings)


def run(source: str, **names):
    return run_program(source, quiet=True, **names)


def same_parameters(a, b) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


# -- TL402 -------------------------------------------------------------------------------------
EVALUATE = """\
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
val_loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(5)]


def evaluate(model, val_loader):
    model.eval()
    outputs, correct = [], 0
    for x, y in val_loader:
        out = model(x)
        outputs.append(out)
        correct += (out.argmax(1) == y).sum().item()
    return outputs, correct


outputs, correct = evaluate(model, val_loader)
"""


def test_tl402_decorator_same_outputs_no_graph():
    fixed = fix(EVALUATE, "TL402", count=1)
    assert "@torch.no_grad()\ndef evaluate(model, val_loader):" in fixed
    before, after = run(EVALUATE), run(fixed)
    assert before["correct"] == after["correct"]
    assert all(torch.equal(a.detach(), b) for a, b in zip(before["outputs"], after["outputs"]))
    assert all(o.grad_fn is not None for o in before["outputs"])  # a graph recorded per batch, for nothing
    assert all(o.grad_fn is None and not o.requires_grad for o in after["outputs"])


FIT_AND_EVALUATE = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
val_loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]


def fit(model, train_loader, val_loader, optimizer):
    for x, y in train_loader:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    correct = 0
    for x, y in val_loader:
        correct += (model(x).argmax(1) == y).sum().item()
    features = []
    for x, y in val_loader:
        features.append(model(x))
    return correct, features


correct, features = fit(model, train_loader, val_loader, optimizer)
head = torch.nn.Linear(3, 1)
head(features[0]).sum().backward()  # the features feed a new graph after the loop
"""


def test_tl402_with_block_inference_mode_only_where_nothing_escapes():
    fixed = fix(FIT_AND_EVALUATE, "TL402", count=2)
    assert "    with torch.inference_mode():\n        for x, y in val_loader:\n            correct +=" in fixed
    assert "    with torch.no_grad():\n        for x, y in val_loader:\n            features.append" in fixed
    before, after = run(FIT_AND_EVALUATE), run(fixed)
    assert before["correct"] == after["correct"]
    assert same_parameters(before["model"], after["model"])
    assert all(torch.equal(a.detach(), b) for a, b in zip(before["features"], after["features"]))
    assert after["head"].weight.grad is not None
    # inference_mode for the features' loop would break the backward after it: why it gets no_grad
    wrong = fixed.replace("    with torch.no_grad():\n        for x, y in val_loader:\n            features",
                          "    with torch.inference_mode():\n        for x, y in val_loader:\n            features")
    with pytest.raises(RuntimeError, match="[Ii]nference tensors"):
        run(wrong)


BACKPROP_THROUGH_VALIDATION = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 3)
val_loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]


def validate(model, val_loader):
    model.eval()
    total = 0
    for x, y in val_loader:
        total = total + torch.nn.functional.cross_entropy(model(x), y)
    return total


loss = validate(model, val_loader)
loss.backward()  # a caller that learns from the validation loss
"""


def test_tl402_unsafe_when_a_caller_backpropagates_through_the_result():
    fixed = fix(BACKPROP_THROUGH_VALIDATION, "TL402", count=1)
    assert run(BACKPROP_THROUGH_VALIDATION)["model"].weight.grad is not None
    with pytest.raises(RuntimeError, match="does not require grad"):
        run(fixed)


def test_tl402_no_fix_for_a_loop_that_yields():
    """A `with torch.no_grad():` around a loop that yields would leave gradients off in the
    caller while the generator is suspended: that shape gets no fix."""
    program = """\
    import torch

    model = torch.nn.Linear(2, 2)
    train_loader = val_loader = [torch.ones(1, 2)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def fit_and_stream(model, train_loader, val_loader, optimizer):
        for x in train_loader:
            model(x).sum().backward()
            optimizer.step()
        model.eval()
        for x in val_loader:
            yield model(x)


    def wrapped(val_loader):
        with torch.no_grad():
            for x in val_loader:
                yield model(x)


    for out in fit_and_stream(model, train_loader, val_loader, optimizer):
        pass
    for out in wrapped(val_loader):
        grad_on_in_caller = torch.is_grad_enabled()
    """
    found = [d for d in findings(program, "TL402") if d.location.row == 14]
    assert len(found) == 1 and found[0].fix is None
    assert run(program)["grad_on_in_caller"] is False


# -- TL201 -------------------------------------------------------------------------------------
LOGGED_TRAINING = """\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(8, 3).to("cuda" if torch.cuda.is_available() else "cpu")  # the GPU where there is one
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(12)]
logged, seen = [], []


def train(model, loader, optimizer, log_every=4):
    running = 0.0
    correct = 0
    accuracy = 0
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        running += loss.item() * x.size(0)
        correct += (out.argmax(1) == y).sum().item()
        accuracy += (out.argmax(1) == y).sum().item() / len(y)
        if (step + 1) % log_every == 0:
            logged.append(running / log_every)
            running = 0.0
        preds = out.argmax(1)
        for p in preds:
            seen.append(p.item())
    return correct, accuracy


correct, accuracy = train(model, loader, optimizer)
"""


class _HostReads:
    """Counts ``.item()`` and ``float()``/``int()`` of tensors (each one a host-device sync on
    an accelerator) while installed."""

    def __init__(self, monkeypatch):
        self.item = self.convert = self.tolist = 0
        item, to_float, to_int, tolist = torch.Tensor.item, torch.Tensor.__float__, torch.Tensor.__int__, torch.Tensor.tolist

        def counted(kind, original):
            def call(t, *args):
                setattr(self, kind, getattr(self, kind) + 1)
                return original(t, *args)
            return call

        monkeypatch.setattr(torch.Tensor, "item", counted("item", item))
        monkeypatch.setattr(torch.Tensor, "__float__", counted("convert", to_float))
        monkeypatch.setattr(torch.Tensor, "__int__", counted("convert", to_int))
        monkeypatch.setattr(torch.Tensor, "tolist", counted("tolist", tolist))


def test_tl201_sums_on_the_device_same_logs_fewer_syncs(monkeypatch):
    fixed = fix(LOGGED_TRAINING, "TL201", count=4)
    assert "running += loss.detach() * x.size(0)" in fixed
    assert "correct += (out.argmax(1) == y).sum()\n" in fixed
    assert "logged.append(float(running) / log_every)" in fixed and "return int(correct), float(accuracy)" in fixed
    assert "for p in preds.tolist():\n            seen.append(p)" in fixed
    before = run(LOGGED_TRAINING)
    with monkeypatch.context() as patch:
        counted_before = _HostReads(patch)
        run(LOGGED_TRAINING)
    with monkeypatch.context() as patch:
        counted_after = _HostReads(patch)
        after = run(fixed)
    assert same_parameters(before["model"], after["model"])  # training itself is untouched
    assert after["correct"] == before["correct"] and type(after["correct"]) is int
    # a fraction summed from an integer start stays a fraction (not `int(...)`, which would truncate it)
    assert after["accuracy"] == pytest.approx(before["accuracy"], rel=1e-6) and 0 < after["accuracy"] % 1
    assert after["seen"] == before["seen"]
    assert after["logged"] == pytest.approx(before["logged"], rel=1e-6)
    # 12 steps x (loss, count, fraction, 4 predictions) reads before; after: 3 logs, the count and
    # the fraction once each, 12 `.tolist()`
    assert counted_before.item == 12 * 7 and counted_before.tolist == 0
    assert counted_after.item == 0 and counted_after.convert == 3 + 2 and counted_after.tolist == 12


HALF_PRECISION_SUM = """\
import torch

total = 0.0
loader = [torch.ones(2) for _ in range(600)]
weight = torch.ones(1, requires_grad=True, device="cuda" if torch.cuda.is_available() else "cpu")
optimizer = torch.optim.SGD([weight], lr=0.0)
for batch in loader:
    loss = (batch * weight).to(torch.bfloat16).mean()  # a loss computed in bfloat16
    loss.backward()
    optimizer.step()
    total += loss.item()
mean = total / len(loader)
"""


def test_tl201_unsafe_when_the_loss_is_half_precision():
    """`.item()` sums in Python floats (float64); the fixed sum takes the loss's dtype: in
    bfloat16 it stops growing at 256 (8 bits of mantissa)."""
    fixed = fix(HALF_PRECISION_SUM, "TL201", count=1)
    assert "total += loss.detach()" in fixed and "mean = float(total) / len(loader)" in fixed
    assert run(HALF_PRECISION_SUM)["mean"] == 1.0
    assert run(fixed)["mean"] == pytest.approx(256 / 600)


def test_tl201_no_fix_where_the_sum_is_read_every_step():
    program = """\
    import torch
    total = 0.0
    for step, batch in enumerate(loader):
        loss = model(batch.cuda()).mean()
        loss.backward()
        optimizer.step()
        total += loss.item()
        print(total / (step + 1))
    """
    found = [d for d in findings(program, "TL201") if d.location.row == 7]
    assert len(found) == 1 and found[0].fix is None


# -- TL407 -------------------------------------------------------------------------------------
SOFTMAX_TRAINING = """\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
teacher = torch.randn(8, 3)
model = torch.nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
inputs = [torch.randn(16, 8) for _ in range(60)]
data = [(x, (x @ teacher).argmax(1)) for x in inputs]
losses, accuracy = [], []
for x, y in data:
    logits = model(x)
    probs = F.softmax(logits, dim=1)
    loss = F.cross_entropy(probs, y)
    accuracy.append((probs.argmax(1) == y).float().mean().item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
"""


def test_tl407_fixed_program_is_the_cross_entropy_of_the_logits():
    fixed = fix(SOFTMAX_TRAINING, "TL407", count=1, table=PREVIEW)
    assert "loss = F.cross_entropy(logits, y)" in fixed
    assert "probs = F.softmax(logits, dim=1)" in fixed  # still read for the accuracy
    reference = SOFTMAX_TRAINING.replace("F.cross_entropy(probs, y)", "F.cross_entropy(logits, y)")
    after, by_hand, before = run(fixed), run(reference), run(SOFTMAX_TRAINING)
    assert after["losses"] == by_hand["losses"] and same_parameters(after["model"], by_hand["model"])
    assert after["accuracy"] == by_hand["accuracy"]
    # the bug it fixes: softmax twice squashes the loss into a narrow band and learns slower
    x, y = torch.cat([x for x, _ in before["data"]]), torch.cat([y for _, y in before["data"]])
    with torch.no_grad():
        learnt_before = torch.nn.functional.cross_entropy(before["model"](x), y)
        learnt_after = torch.nn.functional.cross_entropy(after["model"](x), y)
    assert learnt_after < learnt_before


def test_tl407_nll_gets_log_softmax_and_an_unread_probability_line_goes():
    program = """\
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    logits = torch.randn(5, 4, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3, 0])
    probs = torch.softmax(logits, dim=1)
    nll = F.nll_loss(probs, y)
    """
    fixed = fix(program, "TL407", count=1, table=PREVIEW)
    assert "probs =" not in fixed and "nll = F.nll_loss(torch.log_softmax(logits, dim=1), y)" in fixed
    after = run(fixed)
    assert torch.allclose(after["nll"], F_cross_entropy(after["logits"], after["y"]))


def F_cross_entropy(logits, y):
    return torch.nn.functional.cross_entropy(logits, y)


def test_tl407_unsafe_the_loss_values_change_scale():
    """The loss takes other values: cross-entropy of probabilities never goes below
    log((e + 2) / e) = 0.55 for three classes, that of logits does. A program that stops early
    at a loss threshold tuned on the old values stops at another step after the fix."""
    program = SOFTMAX_TRAINING.replace("    losses.append(loss.item())\n",
                                       "    losses.append(loss.item())\n    if loss.item() < 0.55:\n        break\n")
    fixed = fix(program, "TL407", count=1, table=PREVIEW)
    before, after = run(program), run(fixed)
    assert len(before["losses"]) == 60 and min(before["losses"]) > 0.55
    assert len(after["losses"]) < 60


def test_tl407_no_fix_for_a_model_that_ends_in_softmax():
    program = """\
    import torch.nn as nn
    criterion = nn.CrossEntropyLoss()
    classifier = nn.Sequential(nn.Linear(16, 3), nn.Softmax(dim=1))
    def step(x, y):
        return criterion(classifier(x), y)
    """
    found = findings(program, "TL407", PREVIEW)
    assert len(found) == 1 and found[0].fix is None and "make the model return logits" in found[0].message


# -- TL406 -------------------------------------------------------------------------------------
NO_ZERO_GRAD = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(6)]


def train(model, loader, optimizer):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


train(model, loader, optimizer)
last_grad = model.weight.grad.clone()
"""


def test_tl406_fixed_loop_trains_as_the_loop_written_with_zero_grad():
    fixed = fix(NO_ZERO_GRAD, "TL406", count=1, table=PREVIEW)
    assert "        optimizer.zero_grad()\n        loss.backward()" in fixed
    by_hand = NO_ZERO_GRAD.replace("        loss.backward()", "        optimizer.zero_grad()\n        loss.backward()")
    before, after, reference = run(NO_ZERO_GRAD), run(fixed), run(by_hand)
    assert same_parameters(after["model"], reference["model"])
    assert not same_parameters(before["model"], after["model"])  # the bug: stale gradients pile up


def test_tl406_unsafe_when_the_gradients_are_meant_to_pile_up():
    """A program that reads the summed gradient of every batch after the loop (a gradient
    statistic, the optimizer only a no-op here) gets the last batch's alone after the fix."""
    program = NO_ZERO_GRAD.replace("lr=0.05", "lr=0.0")
    fixed = fix(program, "TL406", count=1, table=PREVIEW)
    before, after = run(program), run(fixed)
    model = before["model"]
    total = torch.zeros_like(model.weight)
    for x, y in before["loader"]:
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        total += model.weight.grad
    assert torch.allclose(before["last_grad"], total)
    assert not torch.allclose(after["last_grad"], total)
    assert torch.allclose(after["last_grad"], model.weight.grad)


# -- TL204 -------------------------------------------------------------------------------------
SYNCED_TRAINING = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(5)]
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
"""


def test_tl204_same_training_without_the_waits(monkeypatch):
    """The CPU build has no CUDA: ``torch.cuda.synchronize`` is replaced by a counter."""
    fixed = fix(SYNCED_TRAINING, "TL204", count=1, table=PREVIEW)
    assert "synchronize" not in fixed
    waits = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waits.append(device))
    before = run(SYNCED_TRAINING)
    assert len(waits) == 5
    after = run(fixed)
    assert len(waits) == 5  # none more
    assert same_parameters(before["model"], after["model"])


def test_tl204_unsafe_when_code_after_it_reads_asynchronous_results(monkeypatch):
    """What the sync guarantees, with a stand-in for the device (the CPU runs everything at
    once): work queued on a stream, here a device-to-host copy with ``non_blocking=True``, is
    done only once the host waits for it. Without the wait, the host reads the buffer first."""
    program = """\
    import torch

    copies = []
    loader = [torch.full((2,), float(i)) for i in range(3)]
    for batch in loader:
        host = torch.empty(2)
        stream.copy(host, batch * 2)  # an asynchronous copy, as `t.to("cpu", non_blocking=True)`
        loss = batch.sum()
        loss.backward() if loss.requires_grad else None
        torch.cuda.synchronize()
        copies.append(host.tolist())
    """

    class Stream:
        def __init__(self):
            self.queued = []

        def copy(self, dst, src):
            self.queued.append((dst, src))

        def synchronize(self, device=None):
            for dst, src in self.queued:
                dst.copy_(src)
            self.queued.clear()

    fixed = fix(program, "TL204", count=1, table=PREVIEW)
    stream = Stream()
    monkeypatch.setattr(torch.cuda, "synchronize", stream.synchronize)
    assert run(program, stream=stream)["copies"] == [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]
    stale = run(fixed, stream=stream)["copies"]
    assert stale != [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]


# -- TL403: two processes, gloo ------------------------------------------------------------------
DDP_ACCUMULATION = """\
import contextlib
import os

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", init_method=os.environ["INIT"], rank=rank, world_size=2)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
allreduces, grad_norms = [], []


def counted_allreduce(state, bucket):
    allreduces.append(bucket.index())
    return default_hooks.allreduce_hook(state, bucket)


def train(net, loader, optimizer, accum_steps=4):
    model = DDP(net)
    model.register_comm_hook(None, counted_allreduce)
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y) / accum_steps
        loss.backward()
        grad_norms.append(float(sum(p.grad.norm() ** 2 for p in model.parameters())))
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


generator = torch.Generator().manual_seed(100 + rank)
loader = [(torch.randn(4, 8, generator=generator), torch.randn(4, 1, generator=generator)) for _ in range(8)]
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
train(net, loader, optimizer)
torch.save({"params": [p.detach().clone() for p in net.parameters()], "allreduces": len(allreduces),
            "grad_norms": grad_norms}, os.environ["OUT"])
dist.destroy_process_group()
os._exit(0)  # results are saved: gloo's teardown at interpreter exit may abort ("terminate called ...")
"""


def _run_two_ranks(source: str, folder) -> list:
    """Run ``source`` as ranks 0 and 1 of a gloo group (a FileStore in ``folder``); each rank's
    saved results."""
    script = folder / "program.py"
    script.write_text(source)
    store = folder / "store"
    if store.exists():
        store.unlink()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), INIT=f"file://{store}", OUT=str(folder / f"rank{rank}.pt"),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(outputs)
    return [torch.load(folder / f"rank{rank}.pt") for rank in (0, 1)]


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="this torch build has no gloo backend")
def test_tl403_no_sync_fewer_allreduces_same_parameters(tmp_path):
    fixed = fix(DDP_ACCUMULATION, "TL403", count=1)
    assert ("        with contextlib.nullcontext() if (i + 1) % accum_steps == 0 else model.no_sync():\n"
            "            loss = torch.nn.functional.mse_loss(model(x), y) / accum_steps\n"
            "            loss.backward()\n") in fixed
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before = _run_two_ranks(DDP_ACCUMULATION, tmp_path / "before")
    after = _run_two_ranks(fixed, tmp_path / "after")
    buckets = before[0]["allreduces"] // 8
    assert buckets >= 1 and before[0]["allreduces"] == 8 * buckets
    assert after[0]["allreduces"] == after[1]["allreduces"] == 2 * buckets  # once per optimizer step
    for rank in (0, 1):
        for p, q in zip(before[rank]["params"], after[rank]["params"]):
            assert torch.allclose(p, q, rtol=1e-5, atol=1e-6)
    # the ranks agree with each other after the fix too
    assert all(torch.equal(p, q) for p, q in zip(after[0]["params"], after[1]["params"]))
    # what makes it unsafe: code that reads `.grad` between micro-steps sees each rank's own sum
    # (not the average over ranks) until the last micro-step all-reduces
    norms_before = [r["grad_norms"] for r in before]
    norms_after = [r["grad_norms"] for r in after]
    assert norms_before[0] == pytest.approx(norms_before[1])
    assert norms_after[0][0] != pytest.approx(norms_after[1][0])
    assert norms_after[0][3] == pytest.approx(norms_after[1][3])


# -- notebooks ---------------------------------------------------------------------------------
def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": textwrap.dedent(s).splitlines(keepends=True)} for s in sources]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def _cells(raw: str):
    return ["".join(c["source"]) for c in json.loads(raw)["cells"]]


def test_fixes_in_a_notebook_stay_in_their_cells_and_converge():
    raw = _notebook(
        "import torch\nimport torch.nn.functional as F\n",
        """\
        total = 0.0
        for x, y in train_loader:
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            total += loss.item()
        """,
        "print(total / len(train_loader))\n",
        """\
        model.eval()
        correct = 0
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
        """,
    )
    settings = settings_from_table({"select": ["TL201", "TL402", "TL406"], **PREVIEW}, "t.toml", Settings())
    result = fix_notebook(raw, "nb.ipynb", settings, unsafe=True)
    assert result.error is None and not result.warnings
    cells = _cells(result.text)
    assert "    total += loss.detach()\n" in cells[1]
    assert "    optimizer.zero_grad()\n    loss.backward()" in cells[1]
    assert cells[2] == "print(float(total) / len(train_loader))\n"
    assert "with torch.inference_mode():\n    for x, y in val_loader:\n        correct +=" in cells[3]
    for cell in cells:
        compile(cell, "cell", "exec")
    again = fix_notebook(result.text, "nb.ipynb", settings, unsafe=True)
    assert again.text == result.text
