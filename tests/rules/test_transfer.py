"""TL203-TL206, the host-device transfer rules: exact findings and fix texts."""

from __future__ import annotations

import ast
import textwrap

from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.edits import apply_edits
from torchlint.engine import lint_source

HEADER = "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader\n"


def lint(code: str, body: str, path: str = "train.py", preview: bool = True):
    text = HEADER + textwrap.dedent(body)
    settings = settings_from_table({"select": [code], "preview": preview}, "t.toml", Settings())
    return text, lint_source(text, path, settings)


def positions(found):
    return [(d.code, d.location.row, d.location.column) for d in found]


def fixes(code: str, body: str):
    """[(fixed text of each finding, applicability)]."""
    text, found = lint(code, body)
    out = []
    for d in found:
        assert d.fix is not None
        fixed = apply_edits(text, d.fix.edits)
        ast.parse(fixed)
        out.append((fixed[len(HEADER):], d.fix.applicability))
    return out


def test_the_transfer_rules_are_preview_rules():
    body = "for x in loader:\n    torch.cuda.synchronize()\n"
    assert lint("TL204", body, preview=False)[1] == []
    assert positions(lint("TL204", body)[1]) == [("TL204", 5, 5)]


# -- TL203 ---------------------------------------------------------------------------------
PINNED = "loader = DataLoader(ds, num_workers=2, pin_memory=True)\n"


def test_tl203_positions_and_fixes():
    body = PINNED + textwrap.dedent("""\
        for x, y in loader:
            model(x.to(device), y.cuda(0), x.to("cuda", non_blocking=False))
        """)
    _, found = lint("TL203", body)
    assert positions(found) == [("TL203", 6, 11), ("TL203", 6, 25), ("TL203", 6, 36)]
    texts = [t for t, applicability in fixes("TL203", body) if applicability == SAFE]
    assert 'model(x.to(device, non_blocking=True), y.cuda(0), x.to("cuda", non_blocking=False))' in texts[0]
    assert "y.cuda(0, non_blocking=True)" in texts[1]
    assert 'x.to("cuda", non_blocking=True)' in texts[2]


def test_tl203_follows_reads_of_the_batch():
    _, found = lint("TL203", PINNED + textwrap.dedent("""\
        for batch in loader:
            images, labels = batch
            first = batch[0]
            inputs = {k: v.cuda() for k, v in batch.items()}
            model(images.cuda(), first.cuda(), labels.float().cuda())
        """))
    assert positions(found) == [("TL203", 8, 18), ("TL203", 9, 11), ("TL203", 9, 26)]


def test_tl203_silent_cases():
    _, found = lint("TL203", """\
        a = DataLoader(ds, pin_memory=True, collate_fn=collate)
        for x in a:
            x.cuda()
        b = DataLoader(ds, pin_memory=flag)
        for x in b:
            x.cuda()
        c = DataLoader(ds, pin_memory=True)
        for x in c:
            x.to(torch.float16)
            x.to(device, non_blocking=nb)
            x.cpu()
            x.to("cpu")
        def f(loader):
            for x in loader:
                x.cuda()
        """)
    assert found == []


# -- TL204 ---------------------------------------------------------------------------------

def test_tl204_positions_and_message():
    _, found = lint("TL204", """\
        for x, y in loader:
            model(x, y).backward()
            opt.step()
            torch.cuda.synchronize()
        """)
    assert positions(found) == [("TL204", 7, 5)]
    assert found[0].message.startswith("`torch.cuda.synchronize()` every step stalls the host; remove it")
    assert "training or evaluation loop" in found[0].hint
    assert found[0].fix is not None and found[0].fix.applicability == "unsafe"  # issue 31: the call goes


def test_tl204_a_helper_that_runs_every_step():
    _, found = lint("TL204", """\
        def sync_all():
            torch.cuda.synchronize()

        for x, y in loader:
            model(x, y).backward()
            opt.step()
            sync_all()
        """)
    assert positions(found) == [("TL204", 5, 5)]
    assert "`sync_all`, which runs every step" in found[0].hint


def test_tl204_timing_code_is_silent():
    _, found = lint("TL204", """\
        import time
        for x in loader:
            model(x)
            torch.cuda.synchronize(); elapsed = time.perf_counter() - start
        def time_sync():
            torch.cuda.synchronize()
            return time.time()
        for x in loader:
            if measure:
                torch.cuda.synchronize()
            else:
                pass
            t = timer.toc()
        for x in loader:
            end.record()
            torch.cuda.synchronize()
        for x in loader:
            ms = start.elapsed_time(end)
            model(x)
            torch.cuda.synchronize()
        """, path="speed_test.py")
    assert found == []
    _, found = lint("TL204", "for x in loader:\n    model(x)\n    torch.cuda.synchronize()\n", path="benchmark.py")
    assert found == []


# -- TL205 ---------------------------------------------------------------------------------

def test_tl205_positions_and_fixes():
    body = """\
        def collate(batch):
            a = np.stack(batch)
            b = np.zeros(3, dtype=np.float32)
            return torch.tensor(a), torch.FloatTensor(b), torch.Tensor(b), torch.tensor(b, dtype=torch.float)
        """
    _, found = lint("TL205", body)
    assert positions(found) == [("TL205", 7, 12), ("TL205", 7, 29), ("TL205", 7, 51), ("TL205", 7, 68)]
    texts = fixes("TL205", body)
    assert {applicability for _, applicability in texts} == {UNSAFE}
    assert "return torch.as_tensor(a), torch.FloatTensor(b)" in texts[0][0]
    assert "torch.as_tensor(b, dtype=torch.float32), torch.Tensor(b)" in texts[1][0]
    assert "torch.as_tensor(b, dtype=torch.get_default_dtype()), torch.tensor" in texts[2][0]
    assert "torch.as_tensor(b, dtype=torch.float)\n" in texts[3][0]


def test_tl205_no_fix_with_requires_grad():
    _, found = lint("TL205", "def __getitem__(self, i):\n    a = np.ones(3)\n    return torch.tensor(a, requires_grad=True)\n")
    assert len(found) == 1 and found[0].fix is None


def test_tl205_silent_cases():
    _, found = lint("TL205", """\
        def __getitem__(self, i):
            a = np.linspace(0, 1, 5)
            b = self.items[i]
            return (torch.FloatTensor(a), torch.tensor(a, device="cuda"), torch.tensor(b),
                    torch.tensor(np.mean(a)), torch.tensor(np.random.rand()), torch.FloatTensor(3))
        a = np.ones(3)
        t = torch.tensor(a)
        """)
    assert found == []
    _, found = lint("TL205", "for a in arrays:\n    t = torch.tensor(np.asarray(a))\n", path="convert_weights.py")
    assert found == []


# -- TL206 ---------------------------------------------------------------------------------

def test_tl206_positions_and_fixes():
    body = """\
        for x in loader:
            a = torch.tensor(0.5, device="cuda")
            b = torch.tensor(3, device=device)
            c = torch.tensor(x.sum().item(), device=device, requires_grad=True)
            d = torch.tensor(float(n), dtype=torch.half, device=device)
        """
    _, found = lint("TL206", body)
    assert positions(found) == [("TL206", 5, 9), ("TL206", 6, 9), ("TL206", 7, 9), ("TL206", 8, 9)]
    texts = fixes("TL206", body)
    assert texts[0] == (texts[0][0], SAFE) and 'a = torch.full((), 0.5, device="cuda")' in texts[0][0]
    assert texts[1][1] == SAFE and "b = torch.full((), 3, dtype=torch.int64, device=device)" in texts[1][0]
    assert texts[2][1] == UNSAFE and "c = torch.full((), x.sum().item(), device=device, requires_grad=True)" in texts[2][0]
    assert texts[3][1] == SAFE and "d = torch.full((), float(n), dtype=torch.half, device=device)" in texts[3][0]


def test_tl206_in_a_function_that_runs_every_step():
    _, found = lint("TL206", """\
        def penalty(device):
            return torch.tensor(1.0, device=device)

        for x in loader:
            model(x).add(penalty(x.device)).backward()
            opt.step()
        """)
    assert positions(found) == [("TL206", 5, 12)]


def test_tl206_silent_cases():
    _, found = lint("TL206", """\
        t = torch.tensor(1.0, device="cuda")
        for x in loader:
            torch.tensor(1.0)
            torch.tensor(1.0, device="cpu")
            torch.tensor([1.0], device="cuda")
            torch.tensor(values, device="cuda")
        for i in range(torch.cuda.device_count()):
            torch.tensor(0, device=torch.device("cuda", i))
        class S:
            def __setstate__(self, state):
                for p in state:
                    p["step"] = torch.tensor(0.0, device=p["device"])
        """)
    assert found == []


def test_tl204_silent_in_a_loop_driven_by_a_timing_or_logging_iterator():
    # DETR/DeiT/MAE/DINO/ConvNeXt: `metric_logger.log_every` reads the clock at each yield,
    # right after the sync that ends the body
    logged = """\
    def train_one_epoch(model, optimizer, loader, metric_logger):
        for x, y in metric_logger.log_every(loader, 10):
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
    """
    assert positions(lint("TL204", logged)[1]) == []
    own = """\
    import time

    def timed(iterable):
        for item in iterable:
            start = time.perf_counter()
            yield item
            print(time.perf_counter() - start)

    def train_one_epoch(model, optimizer, loader):
        for x, y in enumerate(timed(loader)):
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
    """
    assert positions(lint("TL204", own)[1]) == []
    other = logged.replace("metric_logger.log_every(loader, 10)", "prefetch(loader)")
    assert positions(lint("TL204", other)[1]) == [("TL204", 9, 9)]
    untimed = own.replace("            start = time.perf_counter()\n", "").replace(
        "            print(time.perf_counter() - start)\n", "")
    assert positions(lint("TL204", untimed)[1]) == [("TL204", 15, 9)]


def test_tl206_silent_on_the_device_of_an_optimizer_step_count():
    # timm's adafactor_bv: torch.optim keeps step counts on the host unless capturable
    functional = """\
    def adafactor(params, state_steps, cap: float):
        for i, param in enumerate(params):
            step_t = state_steps[i]
            step = float_of(step_t)
            beta = torch.tensor(cap, dtype=step.dtype, device=step.device)
            param.mul_(beta)
    """
    assert positions(lint("TL206", functional)[1]) == []
    stateful = """\
    def step(params, state):
        for p in params:
            count = state[p]["step"]
            p.add_(torch.tensor(1.0, device=count.device))
    """
    assert positions(lint("TL206", stateful)[1]) == []
    # a parameter's device is flagged
    on_param = functional.replace("device=step.device", "device=param.device")
    assert positions(lint("TL206", on_param)[1]) == [("TL206", 8, 16)]
    assert positions(lint("TL206", stateful.replace("count.device", "p.device"))[1]) == [("TL206", 7, 16)]


# -- issue 29 class 8: TL204 and where the clock is read -------------------------------------------

def test_tl204_flags_a_sync_when_the_clock_is_read_only_before_it():
    body = """\
    import time
    loader = DataLoader(ds)
    for x in loader:
        t0 = time.perf_counter()
        out = model(x)
        took = time.perf_counter() - t0
        torch.cuda.synchronize()
        print(out.sum().item(), took)
    """
    assert [r for _, r, _ in positions(lint("TL204", body)[1])] == [10]


def test_tl204_is_silent_when_the_clock_is_read_later_in_the_step():
    body = """\
    import time
    loader = DataLoader(ds)
    for i, x in enumerate(loader):
        out = model(x)
        torch.cuda.synchronize()
        print(out.sum().item())
        if i % 10 == 0:
            meter.update(time.perf_counter() - t0)
    """
    assert lint("TL204", body)[1] == []


# -- issue 29 class 5: a program that never touches an accelerator ---------------------------------

CPU_SCRIPT = """\
device = torch.device("cpu")
loader = DataLoader(ds, batch_size=8, pin_memory=True)
for x in loader:
    x = x.to(device)
    scale = torch.tensor(0.5, device=device)
    model(x * scale)

if __name__ == "__main__":
    main()
"""


def test_transfer_rules_are_silent_in_a_program_on_the_host():
    for code in ("TL203", "TL206"):
        assert lint(code, CPU_SCRIPT)[1] == []
        gpu = CPU_SCRIPT.replace('torch.device("cpu")', 'torch.device("cuda")')
        assert [d.code for d in lint(code, gpu)[1]] == [code]
