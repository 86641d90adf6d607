"""What the fixes of TL101, TL102 and TL202 change when the code runs, with real torch.

Each test lints a small program, applies the rule's fixes to its text, runs both versions and
compares. Safe fixes must give exactly equal results. For unsafe fixes the test shows the case
that makes them unsafe. This machine may have no GPU: the device is a variable, and ``"cpu"``
stands in for ``"cuda"`` where values are compared; ``"meta"`` (a device that is not the host)
stands in where only the placement matters.
"""

from __future__ import annotations

import os
import warnings

import pytest

torch = pytest.importorskip("torch")

from torchlint.diagnostics import SAFE, UNSAFE  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402


def fix(source: str, code: str, applicability: str, count: int = None) -> str:
    """``source`` with every ``code`` fix applied; each must have ``applicability``."""
    # preview on: TL101 is a preview rule (issue 29); the others select one non-preview rule each
    return behaviour_fix(source, code, applicability, count, table={"preview": True})


run = run_program


# -- TL202: safe fixes give the same tensors ----------------------------------------------------
DETERMINISTIC = """\
import torch

def build(device):
    return [
        torch.zeros(3, 4).to(device),
        torch.ones(2, 3, dtype=torch.int32).to(device),
        torch.full((2, 2), 0.1).to(device),
        torch.arange(10).to(device),
        torch.arange(0, 1, 0.1).to(device),
        torch.linspace(0, 1, 7).to(device, non_blocking=True),
        torch.logspace(0, 2, 5).to(device=device),
        torch.eye(4).to(device, copy=True),
        torch.tensor([[1.5, 2.5], [3.0, 4.0]]).to(device),
        torch.tensor([1, 2, 3], dtype=torch.int16).to(device),
        torch.zeros(3).to(device, torch.half),
        torch.ones(2, 2).to(device, torch.bfloat16),
        torch.eye(3).to(device=device, dtype=torch.int8),
        torch.ones(2, requires_grad=False).to(device),
        torch.tril_indices(4, 4).to(device),
        torch.triu_indices(3, 5, 1).to(device),
    ]
"""


def test_tl202_safe_fixes_build_equal_tensors():
    fixed = fix(DETERMINISTIC, "TL202", SAFE, count=14)  # torch.tensor(data) is silent: host data either way
    assert "torch.zeros(3, 4, device=device)" in fixed
    assert "torch.linspace(0, 1, 7, device=device)" in fixed
    assert "torch.zeros(3, device=device, dtype=torch.half)" in fixed
    before = run(DETERMINISTIC)["build"]("cpu")
    after = run(fixed)["build"]("cpu")
    for b, a in zip(before, after):
        assert b.dtype == a.dtype and b.device == a.device and b.requires_grad == a.requires_grad
        assert torch.equal(b, a)


def test_tl202_safe_fix_of_a_device_string():
    source = 'import torch\n\ndef build():\n    return torch.ones(2, 3).to("cuda")\n'
    fixed = fix(source, "TL202", SAFE)
    assert 'torch.ones(2, 3, device="cuda")' in fixed
    cpu = lambda text: text.replace('"cuda"', '"cpu"')  # noqa: E731 - no GPU here
    assert torch.equal(run(cpu(source))["build"](), run(cpu(fixed))["build"]())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tl202_safe_fixes_on_cuda():  # pragma: no cover - runs where a GPU is present
    fixed = fix(DETERMINISTIC, "TL202", SAFE)
    for b, a in zip(run(DETERMINISTIC)["build"]("cuda"), run(fixed)["build"]("cuda")):
        assert a.device == b.device and torch.equal(b, a)


# -- TL202: why some fixes are unsafe -----------------------------------------------------------
RANDOM = """\
import torch

def draws(device):
    torch.manual_seed(0)
    noise = torch.randn(3).to(device)
    return noise, torch.randn(3)  # the next draw from the CPU generator
"""


def test_tl202_random_fix_no_longer_advances_the_cpu_generator():
    fixed = fix(RANDOM, "TL202", UNSAFE)
    assert "torch.randn(3, device=device)" in fixed
    # On the host both versions draw the same numbers...
    b_noise, b_next = run(RANDOM)["draws"]("cpu")
    a_noise, a_next = run(fixed)["draws"]("cpu")
    assert torch.equal(b_noise, a_noise) and torch.equal(b_next, a_next)
    # ...but built on another device, the CPU stream is not consumed: every later CPU draw of a
    # seeded run shifts (on CUDA the noise itself also comes from the CUDA generator).
    _, b_next = run(RANDOM)["draws"]("meta")
    _, a_next = run(fixed)["draws"]("meta")
    assert not torch.equal(b_next, a_next)
    torch.manual_seed(0)
    assert torch.equal(a_next, torch.randn(3))  # the fixed run got the first draw


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tl202_random_fix_changes_values_on_cuda():  # pragma: no cover
    fixed = fix(RANDOM, "TL202", UNSAFE)
    b_noise, _ = run(RANDOM)["draws"]("cuda")
    a_noise, _ = run(fixed)["draws"]("cuda")
    assert not torch.equal(b_noise, a_noise)


def test_tl202_dtype_folded_into_linspace_rounds_differently():
    source = """\
    import torch

    def grid(device):
        return torch.linspace(0, 1, 1000).to(device, torch.half), torch.arange(0, 1, 0.01).to(device, torch.half)
    """
    fixed = fix(source, "TL202", UNSAFE, count=2)
    assert "torch.linspace(0, 1, 1000, device=device, dtype=torch.half)" in fixed
    before = run(source)["grid"]("cpu")
    after = run(fixed)["grid"]("cpu")
    assert not torch.equal(before[0], after[0])  # computed in float16 vs computed, then cast
    assert not torch.equal(before[1], after[1])


def test_tl202_requires_grad_fix_makes_the_moved_tensor_the_leaf():
    source = """\
    import torch

    def weights(device):
        return torch.zeros(3, requires_grad=True).to(device)
    """
    fixed = fix(source, "TL202", UNSAFE)
    assert "torch.zeros(3, requires_grad=True, device=device)" in fixed
    assert run(source)["weights"]("meta").is_leaf is False  # grads would land on a CPU tensor
    assert run(fixed)["weights"]("meta").is_leaf is True


# -- TL102: pinned batches are the same batches -------------------------------------------------
LOADER = """\
import torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i, i * i], dtype=torch.float32), i % 3

def batches(device):
    loader = DataLoader(Squares(), batch_size=4, num_workers=0)
    out = []
    for x, y in loader:  # no workers: TL102 flags it because the copies are non_blocking
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out.append((x, y))
    return out
"""


def test_tl102_pin_memory_gives_equal_batches():
    fixed = fix(LOADER, "TL102", SAFE)
    assert "DataLoader(Squares(), batch_size=4, num_workers=0, pin_memory=True)" in fixed
    before = run(LOADER)["batches"]("cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        after = run(fixed)["batches"]("cpu")
    assert len(before) == len(after) == 3
    for (bx, by), (ax, ay) in zip(before, after):
        assert torch.equal(bx, ax) and torch.equal(by, ay)
    if not torch.cuda.is_available():
        # Without an accelerator torch warns and does not pin; the batches are unchanged.
        assert any("no accelerator is found" in str(w.message) for w in caught)


# -- TL101: why adding workers is unsafe --------------------------------------------------------
LOCAL_DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset

def make_loader():
    class Local(Dataset):  # a class defined in a function cannot be pickled
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor(i)

    return DataLoader(Local(), batch_size=2)
"""


@pytest.mark.filterwarnings("ignore:Got pickle error")
def test_tl101_fix_needs_a_picklable_dataset_under_spawn():
    fixed = fix(LOCAL_DATASET, "TL101", UNSAFE)
    assert "import os\n" in fixed and "num_workers=min(4, os.cpu_count() or 1)" in fixed
    before = run(LOCAL_DATASET)["make_loader"]()
    assert [b.tolist() for b in before] == [[0, 1], [2, 3]]
    after = run(fixed)["make_loader"]()
    assert after.num_workers >= 1
    after.multiprocessing_context = "spawn"  # the default start method on Windows and macOS
    with pytest.raises((AttributeError, TypeError, RuntimeError)) as info:  # pickling fails
        list(after)
    assert "pickle" in str(info.value).lower() or "local" in str(info.value).lower()


ITERABLE = """\
import torch
from torch.utils.data import DataLoader, IterableDataset

class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(4))

def make_stream():  # out of TL101's sight, like a stream imported from another module
    return Stream()

def items():
    return [int(x) for x in DataLoader(make_stream(), batch_size=None)]
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the fix picks one worker on one CPU")
def test_tl101_fix_replicates_an_unsharded_iterable_dataset():
    fixed = fix(ITERABLE, "TL101", UNSAFE)
    assert sorted(run(ITERABLE)["items"]()) == [0, 1, 2, 3]
    after = run(fixed)["items"]()
    workers = min(4, os.cpu_count() or 1)
    assert sorted(after) == sorted([0, 1, 2, 3] * workers)  # every worker yields every item
