"""What the unsafe fixes of TL301 and TL401 change when the code runs, with real torch.

Each test lints a small program, applies the rule's fix to its text, runs both versions and
compares: where they agree (the reason the finding exists) and where they do not (the reason
the fix is unsafe).
"""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

import rule_support  # noqa: E402


def fix_and_load(source: str, code: str):
    """(namespace of the original, namespace of the fixed program, fixed text)."""
    return rule_support.fix_and_load(source, code, "t.py")


# -- TL301 ---------------------------------------------------------------------------------------
CONV_BN = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x))
"""


def _pair():
    before, after, fixed = fix_and_load(CONV_BN, "TL301")
    assert "nn.Conv2d(3, 8, 3, padding=1, bias=False)" in fixed
    torch.manual_seed(0)
    with_bias = before["Block"]()
    without_bias = after["Block"]()
    with torch.no_grad():
        without_bias.conv.weight.copy_(with_bias.conv.weight)
        with_bias.conv.bias.uniform_(-3.0, 3.0)  # a large bias makes any difference visible
    return with_bias, without_bias


def test_tl301_bias_is_cancelled_in_train_mode():
    with_bias, without_bias = _pair()
    assert without_bias.conv.bias is None
    x = torch.randn(4, 3, 16, 16)
    out_with, out_without = with_bias.train()(x), without_bias.train()(x)
    torch.testing.assert_close(out_with, out_without, rtol=1e-4, atol=1e-4)
    out_with.square().sum().backward()
    # the bias gets no gradient to speak of: nothing downstream depends on it
    assert with_bias.conv.bias.grad.abs().max() < 1e-3


def test_tl301_old_checkpoint_no_longer_loads_strictly():
    with_bias, without_bias = _pair()
    checkpoint = with_bias.state_dict()
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: \"conv.bias\""):
        without_bias.load_state_dict(checkpoint, strict=True)


def test_tl301_non_strict_load_shifts_eval_outputs():
    with_bias, without_bias = _pair()
    for _ in range(20):  # the running mean learns the bias
        with_bias.train()(torch.randn(8, 3, 16, 16))
    result = without_bias.load_state_dict(with_bias.state_dict(), strict=False)
    assert result.unexpected_keys == ["conv.bias"]
    x = torch.randn(2, 3, 16, 16)
    assert not torch.allclose(with_bias.eval()(x), without_bias.eval()(x), atol=1e-2)


# -- TL401 ---------------------------------------------------------------------------------------
TRAINING = """\
import torch

def train(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad(set_to_none=False)
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    return model
"""

GRAD_REPORT = """\
def clear_and_measure(model):
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()
    return sum(float(p.grad.abs().sum()) for p in model.parameters())
"""


def _model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    batches = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(5)]
    return model, batches


def test_tl401_training_step_results_are_equal():
    before, after, fixed = fix_and_load(TRAINING, "TL401")
    assert "optimizer.zero_grad()\n" in fixed
    results = []
    for namespace in (before, after):
        model, batches = _model_and_data()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
        results.append(namespace["train"](model, optimizer, batches))
    for p, q in zip(results[0].parameters(), results[1].parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-7)


def test_tl401_grad_is_none_after_the_fix():
    before, after, fixed = fix_and_load(GRAD_REPORT, "TL401")
    assert "    model.zero_grad()\n" in fixed
    model, batches = _model_and_data()
    x, y = batches[0]
    ((model(x) - y) ** 2).mean().backward()
    assert before["clear_and_measure"](model) == 0.0
    ((model(x) - y) ** 2).mean().backward()
    with pytest.raises(AttributeError):  # p.grad is None: None.abs()
        after["clear_and_measure"](model)
    assert all(p.grad is None for p in model.parameters())
