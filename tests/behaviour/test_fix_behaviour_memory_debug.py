"""What the unsafe fixes of TL501 and TL601 change when the code runs, with real torch.

Each test lints a small program, applies the rule's fixes to its text, runs both versions and
compares: where they agree (the reason the finding exists: the same numbers, less overhead) and
where they do not (the reason the fix is unsafe).
"""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

import rule_support  # noqa: E402


def fix_and_load(source: str, code: str):
    """(namespace of the original, namespace of the fixed program, fixed text)."""
    return rule_support.fix_and_load(source, code, "train.py")


@pytest.fixture(autouse=True)
def anomaly_mode_off():
    """Anomaly mode is process-global: leave it as the test found it."""
    was = torch.is_anomaly_enabled()
    yield
    torch.autograd.set_detect_anomaly(was)


# -- TL601 ---------------------------------------------------------------------------------------
SET_ANOMALY = """\
import torch

def train_step(x):
    torch.autograd.set_detect_anomaly(True)
    x = x.clone().requires_grad_(True)
    (x / x).sum().backward()  # 0/0: the backward of the division produces NaN
    return x.grad
"""

WITH_ANOMALY = """\
import torch

def train_step(x):
    x = x.clone().requires_grad_(True)
    with torch.autograd.detect_anomaly():  # debugging a NaN
        y = (x / x).sum()
        y.backward()
    return x.grad
"""


@pytest.mark.parametrize("program", [SET_ANOMALY, WITH_ANOMALY], ids=["set_detect_anomaly", "detect_anomaly"])
def test_anomaly_fix_keeps_finite_gradients(program):
    before, after, fixed = fix_and_load(program, "TL601")
    assert "anomaly" not in fixed.replace("# debugging a NaN", "")
    x = torch.tensor([2.0, 3.0])
    assert torch.equal(before["train_step"](x), after["train_step"](x))


@pytest.mark.parametrize("program", [SET_ANOMALY, WITH_ANOMALY], ids=["set_detect_anomaly", "detect_anomaly"])
def test_anomaly_fix_is_unsafe_a_nan_in_backward_no_longer_raises(program):
    before, after, _ = fix_and_load(program, "TL601")
    x = torch.tensor([0.0, 1.0])
    # The original names the forward op that made the NaN, then stops.
    with pytest.warns(UserWarning, match="Error detected in DivBackward0"):
        with pytest.raises(RuntimeError, match="returned nan values"):
            before["train_step"](x)
    torch.autograd.set_detect_anomaly(False)  # the original left it on, globally
    grad = after["train_step"](x)  # the fixed program trains on silently
    assert torch.isnan(grad[0]) and grad[1] == 0


def test_removing_one_with_item_keeps_the_other():
    program = """\
    import torch

    def predict(model, x):
        with torch.no_grad(), torch.autograd.detect_anomaly():
            return model(x)
    """
    before, after, fixed = fix_and_load(program, "TL601")
    assert "with torch.no_grad():" in fixed
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    with pytest.warns(UserWarning):
        out_before = before["predict"](model, x)
    out_after = after["predict"](model, x)
    assert torch.equal(out_before, out_after) and not out_after.requires_grad


# -- TL501 ---------------------------------------------------------------------------------------
EMPTY_CACHE_LOOP = """\
import torch

def train(model, optimizer, loader, device):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()
    return torch.cuda.memory_reserved() if device == "cuda" else 0
"""


def _run(namespace, device):
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(128, 64), torch.randn(128, 64)) for _ in range(3)]
    reserved = namespace["train"](model, optimizer, loader, device)
    return model.weight.detach().cpu(), reserved


def test_empty_cache_fix_trains_the_same():
    before, after, fixed = fix_and_load(EMPTY_CACHE_LOOP, "TL501")
    assert "empty_cache" not in fixed
    w_before, _ = _run(before, "cpu")
    w_after, _ = _run(after, "cpu")
    assert torch.equal(w_before, w_after)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_empty_cache_fix_is_unsafe_the_process_keeps_its_cached_memory():
    """After the fix the allocator keeps the step's blocks: other processes on the GPU see less
    free memory, and memory_reserved() (what logging and nvidia-smi show) goes up."""
    before, after, _ = fix_and_load(EMPTY_CACHE_LOOP, "TL501")
    torch.cuda.empty_cache()
    _, reserved_before = _run(before, "cuda")
    torch.cuda.empty_cache()
    _, reserved_after = _run(after, "cuda")
    assert reserved_after > reserved_before
