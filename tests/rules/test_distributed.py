"""TL702 ddp-find-unused-parameters and TL703 per-parameter-all-reduce: exact findings."""

from __future__ import annotations

import textwrap

from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source

HEADER = "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"


def findings(code: str, body: str, path: str = "train.py"):
    settings = settings_from_table({"select": [code]}, "t.toml", Settings())
    found = lint_source(HEADER + textwrap.dedent(body), path, settings)
    return [(d.code, d.location.row, d.location.column, d.end_location.column) for d in found]


def test_tl702_flags_the_argument():
    assert findings("TL702", "m = DDP(model, device_ids=[0], find_unused_parameters=True)\n") == [
        ("TL702", 4, 32, 59)]


def test_tl702_through_the_full_name():
    body = "m = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)\n"
    assert findings("TL702", body) == [("TL702", 4, 54, 81)]


def test_tl702_silent_cases():
    assert findings("TL702", """\
        a = DDP(model, find_unused_parameters=False)
        b = DDP(model, find_unused_parameters=args.unused)
        c = DDPStrategy(find_unused_parameters=True)
        d = DDP(model, **kwargs)
        """) == []


def test_tl703_gradient_averaging_anywhere():
    assert findings("TL703", """\
        def average_gradients(model):
            for name, p in model.named_parameters():
                dist.all_reduce(p.grad.data)
        """) == [("TL703", 6, 9, 37)]


def test_tl703_weights_only_every_step():
    body = """\
        def sync(model):
            for p in model.parameters():
                dist.all_reduce(p.data)

        for x in loader:
            model(x).backward()
            for p in model.parameters():
                dist.all_reduce(p)
            opt.step()
        """
    assert findings("TL703", body) == [("TL703", 11, 9, 27)]


def test_tl703_through_a_name_and_silent_cases():
    assert findings("TL703", """\
        params = list(model.parameters())
        for p in params:
            dist.all_reduce(p.grad)
        for p in grads:
            dist.all_reduce(p.grad)
        for p in model.parameters():
            dist.broadcast(p.grad, 0)
            dist.all_reduce(p.grad.norm())
        for b in model.buffers():
            dist.all_reduce(b)
        """) == [("TL703", 6, 5, 28)]


def test_tl703_skips_test_code():
    body = "def test_sync(model):\n    for p in model.parameters():\n        dist.all_reduce(p.grad)\n"
    assert findings("TL703", body) == []
