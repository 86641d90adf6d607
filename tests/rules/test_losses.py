"""TL407 softmax-before-cross-entropy: exact findings through names, attributes and models."""

from __future__ import annotations

from functools import partial

import rule_support

findings = partial(rule_support.findings, rule="TL407")


def _lint(code):
    from torchlint.config import Settings, settings_from_table
    from torchlint.engine import lint_source
    import textwrap

    settings = settings_from_table({"select": ["TL407"], "preview": True}, "t.toml", Settings())
    return [(d.code, d.location.row, d.location.column) for d in lint_source(textwrap.dedent(code), "train.py", settings)]


def test_preview_only():
    code = "import torch.nn.functional as F\nF.cross_entropy(F.softmax(x, 1), y)\n"
    assert findings(code) == []
    assert _lint(code) == [("TL407", 2, 17)]


def test_self_attributes_loss_and_model():
    code = """\
    import torch.nn as nn

    class Trainer:
        def __init__(self):
            self.criterion = nn.CrossEntropyLoss()
            self.head = nn.Sequential(nn.Linear(4, 2), nn.Softmax(dim=-1))

        def step(self, x, y):
            return self.criterion(self.head(x), y)
    """
    assert _lint(code) == [("TL407", 9, 31)]


def test_nll_after_log_softmax_and_unknowns_are_silent():
    code = """\
    import torch
    import torch.nn.functional as F

    def f(model, logits, y, probs):
        a = F.nll_loss(F.log_softmax(logits, 1), y)
        b = F.cross_entropy(model(logits), y)
        c = F.cross_entropy(probs, y)
        p = F.softmax(logits, 1) if y is None else logits
        d = F.cross_entropy(p, y)
        return a, b, c, d
    """
    assert _lint(code) == []


def test_function_returning_softmax():
    code = """\
    import torch
    import torch.nn.functional as F

    def predict(x):
        return torch.softmax(x, dim=1)

    loss = F.cross_entropy(predict(x), y)
    """
    assert _lint(code) == [("TL407", 7, 24)]
