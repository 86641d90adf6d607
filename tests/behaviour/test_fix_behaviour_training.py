"""What TL404 and TL405 and their fixes mean when the code runs, with real torch (CPU).

TL404: `torch.amp.autocast("cpu"/"cuda", ...)` and `torch.amp.GradScaler(device, ...)` behave as
the legacy `torch.cpu.amp`/`torch.cuda.amp` spellings (same autocast state, dtype, results; same
scaler steps); the one case that differs (changed process-wide autocast defaults) gets no fix.
TL405: before the fix each step's graph stays alive through the accumulator (a `grad_fn` chain
and the activations it saved); after it they are freed and the numbers are the same; and a
program that backpropagates the accumulated values later is what makes the fix unsafe.
"""

from __future__ import annotations

import gc
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

from torchlint.config import Settings, settings_from_table  # noqa: E402
from rule_support import behaviour_fix, fixer_text, run_program  # noqa: E402
from torchlint.engine import lint_source  # noqa: E402


def fix(source: str, code: str, count: int = None, version: str = "2.13") -> str:
    return behaviour_fix(source, code, count=count, path="program.py", table={"target-torch-version": version})


def run(source: str, **names):
    return run_program(source, quiet=True, **names)


# -- TL404 -------------------------------------------------------------------------------------
AUTOCAST_CPU = """\
import torch
from torch.cpu.amp import autocast

torch.manual_seed(0)
layer = torch.nn.Linear(8, 8)
x = torch.randn(4, 8)
states = []
with torch.cpu.amp.autocast():
    states.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
    default_out = layer(x)
with autocast(True, torch.bfloat16, False):
    states.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
    positional_out = layer(x)
with torch.cpu.amp.autocast(enabled=False):
    states.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
    off_out = layer(x)

@torch.cpu.amp.autocast(dtype=torch.bfloat16)
def decorated(t):
    return layer(t)

decorated_out = decorated(x)
"""


def test_tl404_autocast_cpu_fix_keeps_state_dtype_and_results():
    fixed = fix(AUTOCAST_CPU, "TL404", count=4)
    assert 'torch.amp.autocast("cpu", enabled=True, dtype=torch.bfloat16, cache_enabled=False)' in fixed
    before, after = run(AUTOCAST_CPU), run(fixed)
    assert before["states"] == after["states"] == [(True, torch.bfloat16), (True, torch.bfloat16), (False, torch.bfloat16)]
    for name in ("default_out", "positional_out", "off_out", "decorated_out"):
        assert before[name].dtype == after[name].dtype
        assert torch.equal(before[name], after[name])
    assert before["default_out"].dtype == torch.bfloat16 and before["off_out"].dtype == torch.float32


SCALER = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cpu.amp.GradScaler(2.0 ** 8, growth_interval=2)
scales = []
for step in range(5):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    if step == 2:
        loss = loss * float("inf")  # an overflow: the step is skipped and the scale backs off
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    scales.append(scaler.get_scale())
cuda_scaler = torch.cuda.amp.GradScaler(enabled=False)
"""


def test_tl404_gradscaler_fix_keeps_every_step():
    fixed = fix(SCALER, "TL404", count=2)
    assert 'torch.amp.GradScaler("cpu", 2.0 ** 8, growth_interval=2)' in fixed
    assert 'torch.amp.GradScaler("cuda", enabled=False)' in fixed
    before, after = run(SCALER), run(fixed)
    assert before["scales"] == after["scales"]
    assert before["scales"][2] < before["scales"][1]  # the overflow was seen and handled
    for p, q in zip(before["model"].parameters(), after["model"].parameters()):
        assert torch.equal(p, q)
    assert before["cuda_scaler"].state_dict() == after["cuda_scaler"].state_dict()
    assert type(after["cuda_scaler"]) is torch.amp.GradScaler


def test_tl404_legacy_classes_are_the_new_ones_with_fixed_arguments():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert issubclass(torch.cuda.amp.autocast, torch.amp.autocast)
        assert issubclass(torch.cpu.amp.autocast, torch.amp.autocast)
        legacy, new = torch.cuda.amp.autocast(enabled=False), torch.amp.autocast("cuda", enabled=False)
    assert (legacy.device, legacy.fast_dtype) == (new.device, new.fast_dtype) == ("cuda", torch.float16)


def test_tl404_changed_autocast_default_is_why_those_files_get_no_fix():
    """The new class reads the process-wide dtype when none is given; the legacy class passes
    its fixed default. After `set_autocast_dtype` the two differ, so the rule offers no fix."""
    program = """\
    import torch
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        with torch.cpu.amp.autocast():
            legacy = torch.get_autocast_dtype("cpu")
        with torch.amp.autocast("cpu"):
            new = torch.get_autocast_dtype("cpu")
    finally:
        torch.set_autocast_dtype("cpu", torch.bfloat16)
    """
    ns = run(program)
    assert ns["legacy"] == torch.bfloat16 and ns["new"] == torch.float16
    settings = settings_from_table({"select": ["TL404"]}, "t.toml", Settings())
    found = lint_source(textwrap.dedent(program), "program.py", settings)
    assert [d.code for d in found] == ["TL404"] and found[0].fix is None


# -- TL405 -------------------------------------------------------------------------------------
LEAK = """\
import torch

torch.manual_seed(0)
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
running = 0.0
for step in range(STEPS):
    x = torch.randn(32, 16)
    loss = torch.tanh(model(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
    running += loss
del loss, x
"""


def _graph_size(tensor) -> int:
    """Autograd nodes reachable from ``tensor``: the graph it keeps alive."""
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def test_tl405_before_the_fix_every_graph_stays_alive_after_it_none_does():
    fixed = fix(LEAK, "TL405", count=2)
    assert "losses.append(loss.detach())" in fixed and "running += loss.detach()" in fixed
    short, long = run(LEAK, STEPS=3), run(LEAK, STEPS=12)
    # the accumulator holds a chain through every step's graph: it grows with the step count
    per_step = (_graph_size(long["running"]) - _graph_size(short["running"])) / 9
    assert per_step >= 5
    assert all(l.grad_fn is not None for l in long["losses"])
    assert len({id(l.grad_fn) for l in long["losses"]}) == 12
    after = run(fixed, STEPS=12)
    assert after["running"].grad_fn is None and not after["running"].requires_grad
    assert all(l.grad_fn is None for l in after["losses"])
    # the numbers are the same
    assert torch.allclose(long["running"].detach(), after["running"])
    assert [l.item() for l in long["losses"]] == [l.item() for l in after["losses"]]


def test_tl405_graph_not_yet_backpropagated_keeps_its_activations():
    """A stored model output keeps the tensors its graph saved (here, activations of a step
    whose loss is backpropagated later): with `.detach()` they are freed."""
    program = """\
    import weakref
    import torch

    class Holder:
        def __init__(self, t):
            self.t = t

    saved = []
    def pack(t):
        holder = Holder(t.detach())  # no grad_fn: no cycle through the graph
        saved.append(weakref.ref(holder))
        return holder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = {}
    for step in range(4):
        x = torch.randn(128, 64)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda h: h.t):
            out = model(x)
            aux = model(x * 2)
        loss = out.mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        history[step] = aux + out
    del x, out, aux, loss
    """
    source = textwrap.dedent(program)
    settings = settings_from_table({"select": ["TL405"]}, "t.toml", Settings())
    found = lint_source(source, "program.py", settings)
    assert [(d.code, d.location.row) for d in found] == [("TL405", 27)]
    before = run(source)
    fixed = fixer_text(source, "program.py", settings)
    assert "history[step] = (aux + out).detach()" in fixed
    after = run(fixed)
    gc.collect()
    alive_before = sum(ref() is not None for ref in before["saved"])
    alive_after = sum(ref() is not None for ref in after["saved"])
    assert alive_before >= 4 * 3  # `aux`'s graph was never backpropagated: its saved tensors live on
    assert alive_after == 0
    assert all(torch.equal(before["history"][k].detach(), after["history"][k]) for k in range(4))


UNROLLED = """\
import torch

torch.manual_seed(0)
log_lr = torch.zeros((), requires_grad=True)  # a hyperparameter learnt through the unrolled steps
w = torch.randn(4, requires_grad=True)
losses = []
for step in range(3):
    loss = (w * log_lr.exp()).pow(2).sum()
    loss.backward(retain_graph=True)
    losses.append(loss)
meta = torch.stack(losses).mean()
meta.backward()  # backpropagates through every stored loss: the graphs were kept on purpose
hyper_grad = log_lr.grad.clone()
"""


def test_tl405_fix_is_unsafe_when_the_accumulated_values_are_backpropagated_later():
    fixed = fix(UNROLLED, "TL405", count=1)
    before = run(UNROLLED)
    assert before["hyper_grad"].item() != 0.0
    with pytest.raises(RuntimeError, match="does not require grad"):
        run(fixed)
