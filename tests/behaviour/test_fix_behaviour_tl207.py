"""What TL207's fix (``.pin_memory()`` on a source created in the copy's statement) changes when
the code runs, with real torch.

The fix exists for a GPU: on a CUDA device, the test measures that the fixed copy overlaps (the
host returns from ``.to(device, non_blocking=True)`` while the GPU is still busy, before the copy
has run) where the original waits for the GPU's queued work, and that both give the same values.
Without CUDA that test is skipped; what is left to test on the CPU is honest and small: the fix's
text, that the original program runs and gives the array's values (with the device a variable,
``"cpu"`` standing in), and that the fixed program raises there (``.pin_memory()`` needs an
accelerator: one reason the fix is unsafe). Nothing is mocked.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torchlint.diagnostics import UNSAFE  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402

PROGRAM = """\
import torch


def upload(frame, device):
    return torch.from_numpy(frame).float().to(device, non_blocking=True)
"""

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def fixed_program() -> str:
    return behaviour_fix(PROGRAM, "TL207", UNSAFE, count=1, table={"preview": True})


def test_the_fix_pins_the_source_in_the_statement():
    assert fixed_program() == PROGRAM.replace(".float().to(", ".float().pin_memory().to(")


def test_the_original_runs_on_the_host_and_the_fix_needs_an_accelerator():
    frame = np.arange(12, dtype=np.int64).reshape(3, 4)
    before = run_program(PROGRAM)["upload"](frame, "cpu")
    assert before.dtype == torch.float32 and before.tolist() == frame.astype(np.float32).tolist()
    upload = run_program(fixed_program())["upload"]
    if torch.cuda.is_available():
        assert torch.equal(upload(frame, "cpu"), before)  # pinned, then a host "copy": same values
    else:
        with pytest.raises(RuntimeError):  # "Cannot access accelerator device when none is available."
            upload(frame, "cpu")


def _cycles_per_ms() -> float:
    """How many ``torch.cuda._sleep`` cycles the GPU spins per millisecond."""
    torch.cuda._sleep(1_000_000)  # warm up
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 50_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


def _host_wait(upload, frame, busy_cycles: int):
    """Queue ``busy_cycles`` of GPU work, then call ``upload``: (seconds the host spent in the
    call, whether the copy had finished on the GPU when the call returned, the result)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(busy_cycles)
    begin = time.perf_counter()
    result = upload(frame, "cuda")
    spent = time.perf_counter() - begin
    after = torch.cuda.Event()
    after.record()  # on the same stream, after the copy
    finished = after.query()
    torch.cuda.synchronize()
    return spent, finished, result


@CUDA
def test_the_pinned_copy_overlaps_where_the_pageable_one_waits():
    frame = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)  # 64 MiB
    original = run_program(PROGRAM)["upload"]
    fixed = run_program(fixed_program())["upload"]
    original(frame, "cuda"), fixed(frame, "cuda")  # warm up: CUDA context, host allocator
    busy_ms = 200.0
    busy = int(_cycles_per_ms() * busy_ms)
    waited, _, before = _host_wait(original, frame, busy)
    spent, done_after, after = _host_wait(fixed, frame, busy)
    # pageable: the runtime waits for the stream (the queued 200 ms) before it stages the copy
    assert waited * 1000 > 0.5 * busy_ms, (waited, busy_ms)
    # pinned: the call returns at once and the copy runs later, behind the queued work
    assert spent * 1000 < 0.25 * busy_ms, (spent, busy_ms)
    assert not done_after
    assert torch.equal(before, after) and torch.equal(after.cpu(), torch.from_numpy(frame))
