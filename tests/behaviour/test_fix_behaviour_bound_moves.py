"""What the fixes of issue 9's new TL202 and TL301 forms change when the code runs, with real torch.

TL202: ``eye = torch.eye(n)`` ... ``eye.cuda()`` becomes ``torch.eye(n, device=...)``; the values
must be exactly equal (``"cpu"`` stands in for the accelerator: a name ``device`` holds it), and
for random constructors the fix is unsafe because the draws change. TL301: a conv collected in a
list before a BatchNorm gets ``bias=False``; in training mode the outputs stay equal.
"""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from torchlint.config import Settings, settings_from_table  # noqa: E402
from torchlint.diagnostics import SAFE, UNSAFE  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402
from torchlint.engine import lint_source  # noqa: E402


def fix(source: str, code: str, applicability: str) -> str:
    return behaviour_fix(source, code, applicability)


run = run_program


BOUND = """\
import torch


def forward(x, device):
    eye = torch.eye(x.shape[-1])
    scale = torch.full((x.shape[-1],), 0.5)
    scale = scale.to(device)  # half of it
    return x @ eye.to(device) * scale
"""


def test_bound_constructor_fix_keeps_values():
    fixed = fix(BOUND, "TL202", SAFE)
    assert "torch.eye(x.shape[-1], device=device)" in fixed and ".to(device)" not in fixed
    assert "    # half of it\n" in fixed  # the removed line's comment stays
    x = torch.randn(4, 3)
    before = run(BOUND)["forward"](x, "cpu")
    after = run(fixed)["forward"](x, "cpu")
    assert torch.equal(before, after) and after.device == before.device
    assert lint_source(fixed, "train.py", settings_from_table({"select": ["TL202"]}, "t.toml", Settings())) == []


RANDOM = """\
import torch


def noise(n, device):
    z = torch.randn(n)
    return z.to(device)
"""


def test_bound_random_constructor_fix_is_unsafe_because_draws_change():
    fixed = fix(RANDOM, "TL202", UNSAFE)
    torch.manual_seed(0)
    before = run(RANDOM)["noise"](8, "cpu")
    after_cpu_generator = torch.randn(8)  # the CPU generator moved on: the next draw differs
    torch.manual_seed(0)
    run(fixed)["noise"](8, "cpu")  # on "cpu" the same generator is used ...
    again = torch.randn(8)
    assert torch.equal(after_cpu_generator, again)
    # ... but on an accelerator the draws come from its own generator, so values change: the
    # fix is unsafe. Placement: a device tensor is built directly (meta stands in).
    meta = run(fixed)["noise"](8, "meta")
    assert meta.device.type == "meta" and before.device.type == "cpu"


def test_no_fix_when_the_move_is_conditional():
    source = textwrap.dedent("""\
        import torch


        def f(n, device, flag):
            m = torch.zeros(n)
            if flag:
                return m.to(device)
            return None
        """)
    settings = settings_from_table({"select": ["TL202"]}, "t.toml", Settings())
    (d,) = lint_source(source, "train.py", settings)
    assert d.fix is None  # the move runs on one path only: the fix would not be proven equal


LIST_CONV_BN = """\
import torch
import torch.nn as nn


def block(c):
    layers = []
    layers.append(nn.Conv2d(c, c, 3, padding=1))
    layers.append(nn.BatchNorm2d(c))
    return nn.Sequential(*layers)
"""


def test_list_conv_bias_fix_keeps_training_outputs():
    fixed = fix(LIST_CONV_BN, "TL301", UNSAFE)
    assert "bias=False" in fixed
    x = torch.randn(4, 3, 8, 8)
    torch.manual_seed(0)
    before = run(LIST_CONV_BN)["block"](3)
    torch.manual_seed(0)
    after = run(fixed)["block"](3)
    with torch.no_grad():
        after[0].weight.copy_(before[0].weight)
        before[0].bias.uniform_(-1, 1)  # any bias: BatchNorm subtracts it again
    torch.testing.assert_close(before(x), after(x), rtol=1e-4, atol=1e-5)
    # unsafe: the state dict loses a key, so old checkpoints no longer load strictly
    with pytest.raises(RuntimeError):
        after.load_state_dict(before.state_dict())
