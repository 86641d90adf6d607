"""TL501 empty-cache: exact findings and exact fixed text."""

from __future__ import annotations

import textwrap
from functools import partial

import pytest

import rule_support


lint = partial(rule_support.lint, rule="TL501")
findings = partial(rule_support.findings, rule="TL501")
fixed = partial(rule_support.fixed, rule="TL501")


def test_removed_from_training_loop():
    code = """\
    import torch
    for batch in loader:
        loss = model(batch).sum()
        loss.backward()
        torch.cuda.empty_cache()
        optimizer.step()
    """
    assert findings(code) == [("TL501", 5, 5)]
    assert fixed(code) == textwrap.dedent("""\
    import torch
    for batch in loader:
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
    """)


def test_trailing_comment_stays_and_comment_above_stays():
    code = """\
    import torch
    def forward(self, x):
        # release memory
        torch.cuda.empty_cache()  # see issue 12
        return self.net(x)
    """
    assert fixed(code) == textwrap.dedent("""\
    import torch
    def forward(self, x):
        # release memory
        # see issue 12
        return self.net(x)
    """)


def test_block_left_empty_gets_pass():
    code = """\
    from torch.cuda import empty_cache
    def train_step(model, batch):
        if batch.numel() > 10:
            empty_cache()  # big batch
        return model(batch)
    """
    assert fixed(code) == textwrap.dedent("""\
    from torch.cuda import empty_cache
    def train_step(model, batch):
        if batch.numel() > 10:
            pass  # big batch
        return model(batch)
    """)


def test_one_line_suite_gets_pass():
    code = """\
    import torch
    def step(self):
        if self.big: torch.cuda.empty_cache()
        return 1
    """
    assert fixed(code) == textwrap.dedent("""\
    import torch
    def step(self):
        if self.big: pass
        return 1
    """)


def test_shared_line_has_no_fix():
    code = """\
    import torch
    def forward(self, x):
        torch.cuda.empty_cache(); y = x + 1
        return y
    """
    (d,) = lint(code)
    assert (d.location.row, d.location.column, d.fix) == (3, 5, None)


@pytest.mark.parametrize(
    "call", ["torch.cuda.memory.empty_cache()", "torch.xpu.empty_cache()", "torch.mps.empty_cache()"]
)
def test_other_spellings_and_devices(call):
    code = f"import torch\ndef forward(self, x):\n    {call}\n    return x\n"
    assert findings(code) == [("TL501", 3, 5)]


@pytest.mark.parametrize(
    "code",
    [
        # an out-of-memory handler
        """\
        import torch
        for batch in loader:
            try:
                model(batch).sum().backward()
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
        """,
        """\
        import torch
        for batch in loader:
            try:
                model(batch).sum().backward()
            except torch.OutOfMemoryError as e:
                torch.cuda.empty_cache()
        """,
        """\
        import torch
        for batch in loader:
            try:
                model(batch).sum().backward()
            except RuntimeError as e:
                if "out of memory" in str(e):
                    torch.cuda.empty_cache()
                else:
                    raise
        """,
        # periodic guard
        """\
        import torch
        for step, batch in enumerate(loader):
            model(batch).sum().backward()
            if step % 100 == 0:
                torch.cuda.empty_cache()
        """,
        # once, outside loops, after del
        """\
        import torch
        def swap(model):
            del model
            torch.cuda.empty_cache()
        """,
        # a loop over models, not training steps
        """\
        import torch
        for name in names:
            m = build(name)
            del m
            torch.cuda.empty_cache()
        """,
        # a function containing a training loop: its top level runs once per call
        """\
        import torch
        def train(loader):
            torch.cuda.empty_cache()
            for b in loader:
                model(b).sum().backward()
            torch.cuda.empty_cache()
        """,
        "import torch\ntorch.cuda.empty_cache()\n",
        "import torch\ntorch.cuda.memory_allocated()\n",
    ],
)
def test_silent(code):
    assert findings(code) == []


def test_silent_in_test_code():
    code = "import torch\nfor b in loader:\n    torch.cuda.empty_cache()\n"
    assert findings(code) == [("TL501", 3, 5)]
    assert findings(code, "tests/test_memory_use.py") == []
    assert findings("import torch\ndef test_step():\n    for b in loader:\n        torch.cuda.empty_cache()\n") == []
