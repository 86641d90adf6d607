"""TL301 conv-bias-before-batchnorm: exact findings and exact fixed text."""

from __future__ import annotations

import inspect
import textwrap

import libcst as cst
import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.edits import apply_edits
from torchlint.engine import lint_source
from torchlint.torch_api import (
    CONV_BIAS_POSITION,
    CONV_BIAS_POSITIONS,
    CONV_CLASS_PARAMS,
    CONV_PARAMS,
    MEAN_SUBTRACTING_NORMS,
)

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


def test_conv_class_tables_match_torch():
    torch = pytest.importorskip("torch")
    assert len(CONV_CLASS_PARAMS) == 12
    for qualified, params in CONV_CLASS_PARAMS.items():
        cls = getattr(torch.nn, qualified.rsplit(".", 1)[1])
        assert tuple(inspect.signature(cls).parameters) == params, qualified
        assert params.index("bias") == CONV_BIAS_POSITIONS[qualified]
    for qualified in MEAN_SUBTRACTING_NORMS:
        cls = getattr(torch.nn, qualified.rsplit(".", 1)[1])
        assert issubclass(cls, torch.nn.modules.batchnorm._BatchNorm)


def test_positional_bias_of_transposed_and_lazy_convs():
    code = """\
    a = nn.Sequential(nn.ConvTranspose2d(4, 4, 2, 2, 0, 0, 1, True), nn.BatchNorm2d(4))
    b = nn.Sequential(nn.ConvTranspose2d(4, 4, 2, 2, 0, 0, 1, False), nn.BatchNorm2d(4))
    c = nn.Sequential(nn.LazyConv2d(4, 3, 1, 0, 1, 1, False), nn.BatchNorm2d(4))
    d = nn.Sequential(nn.LazyConvTranspose3d(4, 3, 1, 0, 0, 1, True), nn.LazyBatchNorm3d())
    """
    assert findings(code) == [("TL301", 3, 19), ("TL301", 6, 19)]
    assert fixed("s = nn.Sequential(nn.LazyConv1d(4, 3, 1, 0, 1, 1, True), nn.BatchNorm1d(4))\n") == (
        "s = nn.Sequential(nn.LazyConv1d(4, 3, 1, 0, 1, 1, False), nn.BatchNorm1d(4))\n"
    )


LIST_CASES = [
    # (body of `def f(c):` ending in `return nn.Sequential(*layers)`, flagged rows)
    ("layers = []\nlayers.append(nn.Conv2d(c, c, 3))\nlayers.append(nn.BatchNorm2d(c))\n", [5]),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers += [nn.BatchNorm2d(c), nn.ReLU()]\n", [4]),
    ("layers = []\nlayers.extend([nn.Conv2d(c, c, 3), nn.BatchNorm2d(c)])\n", [5]),
    ("layers = []\nfor _ in range(3):\n    layers += [nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), nn.ReLU()]\n", [6]),
    ("layers = []\nfor _ in range(3):\n    layers.append(nn.Conv2d(c, c, 3))\n    layers.append(nn.BatchNorm2d(c))\n", [6]),
    ("conv = nn.Conv2d(c, c, 3)\nlayers = [conv, nn.BatchNorm2d(c)]\n", [4]),
    # silent
    ("layers = []\nfor _ in range(3):\n    layers.append(nn.BatchNorm2d(c))\n    layers.append(nn.Conv2d(c, c, 3))\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers.insert(0, nn.Identity())\nlayers.append(nn.BatchNorm2d(c))\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers.append(nn.ReLU())\nlayers.append(nn.BatchNorm2d(c))\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers.append(nn.GroupNorm(1, c))\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers = layers + [nn.BatchNorm2d(c)]\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers += more\nlayers.append(nn.BatchNorm2d(c))\n", []),
    ("conv = nn.Conv2d(c, c, 3)\nlayers = [conv, nn.BatchNorm2d(c)]\nself.proj = conv\n", []),
    ("layers = [nn.Conv2d(c, c, 3)]\nlayers.append(nn.BatchNorm2d(c)) if c else None\n", []),
]


@pytest.mark.parametrize("body, rows", LIST_CASES)
def test_layers_collected_in_a_list(body, rows):
    code = "def f(c, more):\n" + textwrap.indent(body + "return nn.Sequential(*layers)\n", "    ")
    assert [r for _, r, _ in findings(code)] == rows


SEQUENTIAL_SUBCLASS = """\
class Stem(nn.Sequential):
    def __init__(self, c):
        super().__init__({args})
{body}
"""


@pytest.mark.parametrize(
    "args, body, flagged",
    [
        ("", 'self.add_module("conv", nn.Conv2d(c, c, 3))\nself.add_module("bn", nn.BatchNorm2d(c))', True),
        ("nn.Conv2d(c, c, 3)", 'self.add_module("bn", nn.BatchNorm2d(c))', True),
        ("nn.Conv2d(c, c, 3), nn.BatchNorm2d(c)", "self.stride = 2", True),
        ("", "self.conv = nn.Conv2d(c, c, 3)\nself.bn = nn.BatchNorm2d(c)", True),
        ("", 'self.add_module("conv", nn.Conv2d(c, c, 3))\nif c:\n    self.add_module("bn", nn.BatchNorm2d(c))', False),
        ("", 'self.add_module("conv", nn.Conv2d(c, c, 3))\nself.act = act\nself.add_module("bn", nn.BatchNorm2d(c))', False),
        ("nn.Conv2d(c, c, 3)", "self.add_module(name, act())\nself.add_module('bn', nn.BatchNorm2d(c))", False),
    ],
)
def test_sequential_subclass_registrations(args, body, flagged):
    code = SEQUENTIAL_SUBCLASS.format(args=args, body=textwrap.indent(body, " " * 8))
    assert bool(findings(code)) is flagged


PAIRED = """\
class Branches(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(c, c, 3) for _ in range(n)])
        self.bns = nn.ModuleList([{norm} for _ in range(n)])

    def forward(self, x):
{forward}
"""


@pytest.mark.parametrize(
    "norm, forward, flagged",
    [
        ("nn.BatchNorm2d(c)", "return [bn(conv(x)) for conv, bn in zip(self.convs, self.bns)]", True),
        ("nn.BatchNorm2d(c)", "for conv, bn in zip(self.convs, self.bns):\n    x = bn(conv(x))\nreturn x", True),
        ("nn.BatchNorm2d(c)", "for i in range(len(self.convs)):\n    x = self.bns[i](self.convs[i](x))\nreturn x", True),
        ("nn.BatchNorm2d(c)", "y = self.convs[0](x)\nreturn self.bns[0](y)", True),
        ("nn.SyncBatchNorm(c)", "for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):\n    x = bn(conv(x))\nreturn x", True),
        ("nn.LayerNorm(c)", "return [bn(conv(x)) for conv, bn in zip(self.convs, self.bns)]", False),
        ("nn.BatchNorm2d(c)", "return [bn(conv(x)) for conv, bn in zip(self.bns, self.convs)]", False),
        ("nn.BatchNorm2d(c)", "return [bn(x) + conv(x) for conv, bn in zip(self.convs, self.bns)]", False),
        ("nn.BatchNorm2d(c)", "return self.bns[0](self.convs[1](x))", False),
        ("nn.BatchNorm2d(c)", "return self.bns[i](self.convs[j](x))", False),
        ("nn.BatchNorm2d(c)", "return [bn(conv(x)) for conv, bn in zip(self.convs, self.bns)] + [self.convs[0](x)]", False),
        ("nn.BatchNorm2d(c)", "return nn.Sequential(*self.convs)(x)", False),
    ],
)
def test_paired_module_lists(norm, forward, flagged):
    code = PAIRED.format(norm=norm, forward=textwrap.indent(forward, " " * 8))
    assert bool(findings(code)) is flagged


@pytest.mark.parametrize(
    "signature, prelude, flagged",
    [
        ("norm_layer=nn.BatchNorm2d", "", True),
        ("norm_layer=torch.nn.SyncBatchNorm", "", True),
        ("norm_layer=None", "if norm_layer is None:\n    norm_layer = nn.BatchNorm2d\n", True),
        ("norm_layer=None", "", False),
        ("norm_layer=nn.GroupNorm", "", False),
        ("norm_layer", "", False),
        ("norm_layer=nn.BatchNorm2d", "norm_layer = make_norm(norm_layer)\n", False),
        ("norm_layer=None", "if norm_layer is None:\n    norm_layer = nn.GroupNorm\n", False),
    ],
)
def test_norm_layer_parameter_defaults(signature, prelude, flagged):
    code = (
        f"def block(c, {signature}):\n"
        + textwrap.indent(prelude + "return nn.Sequential(nn.Conv2d(c, c, 3), norm_layer(c))\n", "    ")
    )
    found = lint(code)
    assert bool(found) is flagged
    if found:
        assert "`norm_layer` defaults to" in found[0].message
        assert found[0].fix is None  # a caller may pass another norm: the bias may matter there


def test_add_module_attribute_and_bias_touch():
    code = """\
    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.add_module("conv", nn.Conv2d(c, c, 1))
            self.add_module("norm", nn.BatchNorm2d(c))
            nn.init.zeros_(self.conv.bias)

        def forward(self, x):
            y = self.conv(x)
            return self.norm(y)
    """
    (d,) = lint(code)
    assert (d.location.row, d.location.column) == (6, 33) and d.fix is None
