"""What the fixes of TL103, TL203, TL205 and TL206 change when the code runs, with real torch.

Each test lints a small program, applies the rule's fixes to its text, runs both versions and
compares. Safe fixes must give equal results; for unsafe fixes the test shows the case that makes
them unsafe. This machine may have no GPU: the device is a variable and ``"cpu"`` stands in for
``"cuda"`` where values are compared; the CUDA-only parts are skipped without one.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torchlint.diagnostics import SAFE, UNSAFE  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402


def fix(source: str, code: str, applicability: str, count: int = None) -> str:
    """``source`` with every ``code`` fix applied; each must have ``applicability``."""
    return behaviour_fix(source, code, applicability, count, table={"preview": True})


run = run_program


# -- TL103: persistent workers -------------------------------------------------------------------
EPOCHS = """\
import torch
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __init__(self):
        self.scale = 1
    def __len__(self):
        return 6
    def __getitem__(self, i):
        return torch.tensor([i * i * self.scale])

def epochs(n, mutate=False):
    dataset = Squares()
    loader = DataLoader(dataset, batch_size=2, num_workers=1)
    seen, draws = [], []
    for epoch in range(n):
        for batch in loader:
            seen.append(batch.tolist())
        draws.append(torch.rand(1).item())  # the main process's generator, as a model would use it
        if mutate:
            dataset.scale += 1
    return seen, draws
"""


def test_tl103_fix_keeps_the_batches_of_a_deterministic_dataset():
    fixed = fix(EPOCHS, "TL103", UNSAFE, count=1)
    assert "DataLoader(dataset, batch_size=2, num_workers=1, persistent_workers=True)" in fixed
    torch.manual_seed(0)
    before, _ = run(EPOCHS)["epochs"](3)
    torch.manual_seed(0)
    after, _ = run(fixed)["epochs"](3)
    assert before == after == [[[0], [1]], [[4], [9]], [[16], [25]]] * 3


def test_tl103_fix_is_unsafe_seeded_draws_shift_after_the_first_epoch():
    fixed = fix(EPOCHS, "TL103", UNSAFE)
    torch.manual_seed(0)
    _, before = run(EPOCHS)["epochs"](3)
    torch.manual_seed(0)
    _, after = run(fixed)["epochs"](3)
    # Epoch 1 is the same; then a non-persistent loader draws a new worker seed from the global
    # generator at every epoch and a persistent one does not, so every later draw differs.
    assert before[0] == after[0]
    assert before[1:] != after[1:]


def test_tl103_fix_is_unsafe_workers_keep_their_copy_of_the_dataset():
    fixed = fix(EPOCHS, "TL103", UNSAFE)
    before, _ = run(EPOCHS)["epochs"](2, mutate=True)
    after, _ = run(fixed)["epochs"](2, mutate=True)
    assert before[4] == [[4 * 2], [9 * 2]]  # new workers see the dataset as it is now
    assert after[4] == [[4], [9]]  # persistent workers still hold the first epoch's copy


# -- TL203: non_blocking from pinned memory ------------------------------------------------------
PINNED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

def run(device):
    data = TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6))
    loader = DataLoader(data, batch_size=2, num_workers=0, pin_memory=True)
    total = torch.zeros(2, device=device)
    for x, y in loader:
        x = x.to(device)
        total += x.sum(0) * y.cuda().sum() if device == "cuda" else x.sum(0) * y.to(device).sum()
    return total
"""


def test_tl203_fix_adds_non_blocking_and_keeps_results_on_the_host():
    fixed = fix(PINNED, "TL203", SAFE, count=3)
    assert "x = x.to(device, non_blocking=True)" in fixed
    assert "y.cuda(non_blocking=True)" in fixed and "y.to(device, non_blocking=True)" in fixed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without an accelerator warns and does nothing
        assert torch.equal(run(PINNED)["run"]("cpu"), run(fixed)["run"]("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tl203_fix_on_cuda():  # pragma: no cover - runs where a GPU is present
    fixed = fix(PINNED, "TL203", SAFE)
    assert torch.equal(run(PINNED)["run"]("cuda").cpu(), run(fixed)["run"]("cuda").cpu())


# -- TL205: as_tensor shares memory ---------------------------------------------------------------
FROM_NUMPY = """\
import numpy as np
import torch

def collate(batch):
    a = np.stack(batch)
    b = np.asarray(batch, dtype=np.float32)
    c = np.stack(batch).astype(np.int64)
    return a, b, c, (torch.tensor(a), torch.FloatTensor(b), torch.Tensor(b), torch.LongTensor(c),
                     torch.tensor(c, dtype=torch.long))
"""


def test_tl205_fix_gives_equal_values_and_dtypes():
    fixed = fix(FROM_NUMPY, "TL205", UNSAFE, count=5)
    assert "torch.as_tensor(a)" in fixed and "torch.as_tensor(c, dtype=torch.int64)" in fixed
    batch = [np.arange(3.0), np.arange(3.0, 6.0)]
    *_, before = run(FROM_NUMPY)["collate"](batch)
    *_, after = run(fixed)["collate"](batch)
    for b, a in zip(before, after):
        assert b.dtype == a.dtype and torch.equal(b, a)


def test_tl205_fix_is_unsafe_writes_to_the_array_reach_the_tensor():
    fixed = fix(FROM_NUMPY, "TL205", UNSAFE)
    batch = [np.arange(3.0), np.arange(3.0, 6.0)]
    a, *_, before = run(FROM_NUMPY)["collate"](batch)
    a2, *_, after = run(fixed)["collate"](batch)
    a[0, 0] = 100.0
    a2[0, 0] = 100.0
    assert before[0][0, 0].item() == 0.0  # torch.tensor copied
    assert after[0][0, 0].item() == 100.0  # torch.as_tensor shares the array's memory


# -- TL206: torch.full instead of a copied scalar ------------------------------------------------
SCALARS = """\
import torch

def make_scalars(device, n, margin):
    out = []
    for step in range(2):
        out += [torch.tensor(0.5, device=device), torch.tensor(3, device=device),
                torch.tensor(True, device=device), torch.tensor(len(n), device=device),
                torch.tensor(float(margin), device=device), torch.tensor(int(margin), device=device),
                torch.tensor(float(margin), dtype=torch.float16, device=device),
                torch.tensor(-2, dtype=torch.int8, device=device, requires_grad=False)]
    return out
"""


def _same(before, after):
    for b, a in zip(before, after):
        assert b.dtype == a.dtype and b.shape == a.shape == () and torch.equal(b, a)


def test_tl206_safe_fixes_give_equal_values_and_dtypes():
    fixed = fix(SCALARS, "TL206", SAFE, count=8)
    assert "torch.full((), 3, dtype=torch.int64, device=device)" in fixed
    assert "torch.full((), True, dtype=torch.bool, device=device)" in fixed
    _same(run(SCALARS)["make_scalars"]("cpu", [1, 2], 1.25), run(fixed)["make_scalars"]("cpu", [1, 2], 1.25))


def test_tl206_float_literals_follow_the_default_dtype_both_ways():
    fixed = fix(SCALARS, "TL206", SAFE)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _same(run(SCALARS)["make_scalars"]("cpu", [1], 0.5), run(fixed)["make_scalars"]("cpu", [1], 0.5))
    finally:
        torch.set_default_dtype(previous)


UNKNOWN_TYPE = """\
import torch

def per_step(device, values, margin: float):
    out = []
    for v in values:
        out.append(v + torch.tensor(margin, device=device))
    return out
"""


def test_tl206_fix_is_unsafe_when_the_type_is_unknown():
    fixed = fix(UNKNOWN_TYPE, "TL206", UNSAFE, count=1)
    assert "torch.full((), margin, device=device)" in fixed
    values = [torch.tensor(1.0, dtype=torch.float64)]
    # A Python float gives the same tensor...
    _same(run(UNKNOWN_TYPE)["per_step"]("cpu", values, 0.5), run(fixed)["per_step"]("cpu", values, 0.5))
    # ...but a NumPy scalar passes the `float` annotation and does not: torch.tensor keeps its
    # float64, torch.full uses the default dtype (and so does what is computed from it).
    before = run(UNKNOWN_TYPE)["per_step"]("cpu", [torch.tensor(1.0)], np.float64(0.1))[0]
    after = run(fixed)["per_step"]("cpu", [torch.tensor(1.0)], np.float64(0.1))[0]
    assert before.dtype == torch.float64 and after.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tl206_safe_fixes_on_cuda():  # pragma: no cover - runs where a GPU is present
    fixed = fix(SCALARS, "TL206", SAFE)
    before = run(SCALARS)["make_scalars"]("cuda", [1, 2], 1.25)
    after = run(fixed)["make_scalars"]("cuda", [1, 2], 1.25)
    for b, a in zip(before, after):
        assert a.device == b.device and b.dtype == a.dtype and torch.equal(b, a)
