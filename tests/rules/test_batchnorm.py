"""TL301 conv-bias-before-batchnorm: exact findings and exact fixed text."""

from __future__ import annotations

import inspect
import textwrap

import libcst as cst
import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.edits import apply_edits
from torchlint.engine import lint_source
from torchlint.torch_api import CONV_BIAS_POSITION, CONV_PARAMS

HEADER = "import torch\nimport torch.nn as nn\n"


def lint(code: str):
    settings = settings_from_table({"select": ["TL301"]}, "t.toml", Settings())
    return lint_source(HEADER + textwrap.dedent(code), "t.py", settings)


def findings(code: str):
    return [(d.code, d.location.row, d.location.column) for d in lint(code)]


def fixed(code: str) -> str:
    text = HEADER + textwrap.dedent(code)
    diagnostics = lint(code)
    assert len(diagnostics) == 1
    assert diagnostics[0].fix.applicability == "unsafe"
    out = apply_edits(text, diagnostics[0].fix.edits)
    cst.parse_module(out)
    return out[len(HEADER):]


def test_conv_bias_position_matches_torch():
    torch = pytest.importorskip("torch")
    for cls in (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d):
        params = [p for p in inspect.signature(cls).parameters]
        assert tuple(params) == CONV_PARAMS
        assert params.index("bias") == CONV_BIAS_POSITION == 7


def test_sequential_default_bias():
    assert findings("seq = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())\n") == [("TL301", 3, 21)]


def test_sequential_spellings():
    code = """\
    from collections import OrderedDict
    from torch.nn import Conv1d as C, BatchNorm1d
    a = torch.nn.Sequential(torch.nn.Conv3d(1, 2, 3, bias=True), torch.nn.BatchNorm3d(2))
    b = nn.Sequential(OrderedDict([("conv", C(1, 2, 3)), ("bn", BatchNorm1d(2))]))
    c = nn.Sequential({"conv": nn.Conv2d(1, 2, 3, 1, 0, 1, 1, True), "bn": nn.BatchNorm2d(2)})
    d = nn.Sequential(nn.Conv2d(1, 2, 3), nn.SyncBatchNorm(2))
    e = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, affine=False))
    """
    assert findings(code) == [
        ("TL301", 5, 25), ("TL301", 6, 41), ("TL301", 7, 28), ("TL301", 8, 19), ("TL301", 9, 19),
    ]


@pytest.mark.parametrize(
    "layers",
    [
        "nn.Conv2d(1, 2, 3, bias=False), nn.BatchNorm2d(2)",
        "nn.Conv2d(1, 2, 3, 1, 0, 1, 1, False), nn.BatchNorm2d(2)",
        "nn.Conv2d(1, 2, 3, bias=use_bias), nn.BatchNorm2d(2)",
        "nn.Conv2d(1, 2, 3, **kw), nn.BatchNorm2d(2)",
        "nn.Conv2d(*args), nn.BatchNorm2d(2)",
        "nn.Conv2d(1, 2, 3), nn.ReLU(), nn.BatchNorm2d(2)",
        "nn.Conv2d(1, 2, 3), nn.GroupNorm(1, 2)",
        "nn.Conv2d(1, 2, 3), nn.LayerNorm(2)",
        "nn.Conv2d(1, 2, 3), nn.InstanceNorm2d(2)",
        "nn.Conv2d(1, 2, 3), *extra, nn.BatchNorm2d(2)",
        "nn.Linear(1, 2), nn.BatchNorm1d(2)",
        "create_conv2d(1, 2, 3), nn.BatchNorm2d(2)",
        "nn.BatchNorm2d(2), nn.Conv2d(2, 2, 3)",
    ],
)
def test_sequential_silent(layers):
    assert findings(f"seq = nn.Sequential({layers})\n") == []


def test_not_torch_sequential_is_silent():
    assert findings("seq = keras.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))\n") == []


BLOCK = """\
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
{forward}
"""


def block(forward: str) -> str:
    return BLOCK.format(forward=textwrap.indent(textwrap.dedent(forward), " " * 8))


@pytest.mark.parametrize(
    "forward",
    [
        "return self.bn(self.conv(x))",
        "x = self.conv(x)\nx = self.bn(x)\nreturn x",
        "out = self.conv(x)\n\nout = self.bn(out)\nreturn out",
        "y = self.conv(x)\nreturn torch.relu(self.bn(y))",
        "y = self.conv(x)\nz = self.bn(y)\nreturn z",
        "x = torch.relu(self.bn(self.conv(x)))\nreturn self.bn(self.conv(x))",
        "x = self.conv(x)\nout = self.bn(x)\nreturn out",  # x read before, never after
        "for _ in range(2):\n    y = self.conv(x)\n    x = self.bn(y)\nreturn x",
    ],
)
def test_attributes_flagged_at_constructor(forward):
    assert findings(block(forward)) == [("TL301", 6, 21)]


@pytest.mark.parametrize(
    "forward",
    [
        "return self.bn(torch.relu(self.conv(x)))",  # activation in between
        "return self.bn(self.conv(x)), self.conv(x)",  # second use not normalised
        "x = self.conv(x)\nx = x + 1\nx = self.bn(x)\nreturn x",  # something in between
        "y = self.conv(x)\nz = self.bn(y)\nreturn z + y",  # conv output read again
        "y = self.conv(x)\nreturn self.bn(y) + y",  # conv output read twice in one statement
        "return checkpoint(self.conv, x)",  # conv handed elsewhere
        "return self.conv(x)",  # no norm at all
        "x = self.conv(x)\nif flag:\n    x = self.bn(x)\nreturn x",  # norm under a condition
        "x = self.conv(x)\nout = self.bn(x)\nreturn out + x",  # conv output read after the norm
        "for _ in range(2):\n    x = self.conv(x)\n    z = self.bn(x)\nreturn z",  # next turn reads x
    ],
)
def test_attributes_silent(forward):
    assert findings(block(forward)) == []


def test_attribute_assigned_conditionally_or_twice_is_silent():
    code = """\
    class A(nn.Module):
        def __init__(self, c, use_bn):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3)
            if use_bn:
                self.bn = nn.BatchNorm2d(c)
            else:
                self.bn = nn.Identity()

        def forward(self, x):
            return self.bn(self.conv(x))

    class B(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3)
            self.bn = nn.BatchNorm2d(c)

        def fuse(self):
            self.conv = fuse_conv_bn_eval(self.conv, self.bn)

        def forward(self, x):
            return self.bn(self.conv(x))

    class C(nn.Module):
        def __init__(self, c, stride):
            super().__init__()
            if stride > 1:
                self.conv = nn.Conv2d(c, c, 3, stride)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return self.bn(self.conv(x))
    """
    assert findings(code) == []


def test_evidence_in_another_method_and_nested_class():
    code = """\
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem_conv = nn.Conv2d(3, 8, 3)
            self.stem_bn = nn.BatchNorm2d(8)

        def forward_features(self, x):
            return self.stem_bn(self.stem_conv(x))

        class Inner(nn.Module):
            def forward(self, x):
                return self.stem_conv(x)
    """
    assert findings(code) == [("TL301", 6, 26)]


def test_fix_adds_keyword():
    assert fixed("seq = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n") == (
        "seq = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8))\n"
    )


def test_fix_replaces_true_keyword_and_positional():
    assert fixed("s = nn.Sequential(nn.Conv2d(3, 8, 3, bias=True), nn.BatchNorm2d(8))\n") == (
        "s = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8))\n"
    )
    assert fixed("s = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, 1, 1, True), nn.BatchNorm2d(8))\n") == (
        "s = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, 1, 1, False), nn.BatchNorm2d(8))\n"
    )


def test_fix_one_argument_per_line_keeps_layout():
    code = """\
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(
                c,
                c,  # same width
                kernel_size=3,
            )
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return self.bn(self.conv(x))
    """
    assert fixed(code) == textwrap.dedent(code).replace(
        "kernel_size=3,\n", "kernel_size=3,\n            bias=False,\n"
    )


def test_fix_trailing_comment_and_hanging_indent():
    code = """\
    def stem():
        return nn.Sequential(
            nn.Conv2d(3, 8,
                      kernel_size=3,  # keep
            ),
            nn.BatchNorm2d(8),
        )
    """
    assert fixed(code) == textwrap.dedent(code).replace("kernel_size=3,  # keep", "kernel_size=3, bias=False,  # keep")
    code = """\
    def stem():
        return nn.Sequential(nn.Conv2d(3, 8,
                                       kernel_size=3),
                             nn.BatchNorm2d(8))
    """
    assert fixed(code) == textwrap.dedent(code).replace("kernel_size=3)", "kernel_size=3, bias=False)")


def _first_python_block(page: str, heading: str) -> str:
    section = page.split(f"## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_docs_examples():
    from fixture_support import ROOT

    page = (ROOT / "docs" / "rules" / "TL301.md").read_text()
    settings = settings_from_table({"select": ["TL301"]}, "t.toml", Settings())
    assert [d.code for d in lint_source(_first_python_block(page, "Example"), "e.py", settings)] == ["TL301"]
    assert lint_source(_first_python_block(page, "Use instead"), "u.py", settings) == []


def test_no_fix_when_the_class_touches_the_bias():
    code = """\
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3)
            self.bn = nn.BatchNorm2d(c)
            nn.init.zeros_(self.conv.bias)

        def forward(self, x):
            return self.bn(self.conv(x))
    """
    (d,) = lint(code)
    assert (d.location.row, d.location.column) == (6, 21)
    assert d.fix is None
