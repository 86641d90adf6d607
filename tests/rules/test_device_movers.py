"""TL202 through helpers, device attributes and ``Variable`` (issue 29 classes 3 and 4): the
whole-file facts of ``torchlint/movers.py`` (``FileModel.movers``/``device_attributes``), the
rule's findings on them, and its ast question."""

from __future__ import annotations

import ast
import textwrap

import pytest

from torchlint.astindex import AstIndex
from torchlint.config import Settings
from torchlint.engine import lint_source
from torchlint.model import FileModel
from torchlint.rules import rules_by_code
from torchlint.rules.device import factory_then_move_ast

HEADER = "import torch\nfrom torch.autograd import Variable\n"


def lint(body: str):
    text = HEADER + textwrap.dedent(body)
    return lint_source(text, "train.py", Settings(), rules=[rules_by_code()["TL202"]])


def rows(body: str):
    return [d.location.row for d in lint(body)]


def model(body: str) -> FileModel:
    return FileModel.of_text(HEADER + textwrap.dedent(body))


# -- the facts -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "body, expected",
    [
        ("def to_gpu(t):\n    return t.cuda()\n", {((), "to_gpu", 0)}),
        ("def to_dev(x, t):\n    return t.to(DEVICE)\n", {((), "to_dev", 1)}),
        ("def to_dev(t):\n    return Variable(t.float()).to(device='cuda:0')\n", {((), "to_dev", 0)}),
        ("def to_dev(t):\n    return Variable(t.cuda())\n", {((), "to_dev", 0)}),
        ("class M:\n    def var(self, a):\n        if self.cuda:\n            return Variable(a).cuda(self.i)\n"
         "        return Variable(a)\n", {((("c", "M"),), "var", 0)}),
        ("class M:\n    @staticmethod\n    def var(a):\n        return a.cuda() if torch.cuda.is_available() else a\n",
         {((("c", "M"),), "var", 0)}),
        # a flag the caller passes: unknown
        ("def maybe(t, use_cuda):\n    if use_cuda:\n        return t.cuda()\n    return t\n", set()),
        ("def maybe(t, cuda):\n    return t.cuda() if cuda else t\n", set()),
        # a test that does not ask for a device
        ("class M:\n    def var(self, a):\n        if self.training:\n            return a.cuda()\n        return a\n", set()),
        # the move in the else: moved when there is no device?
        ("class M:\n    def var(self, a):\n        if self.cuda:\n            return a\n        else:\n            return a.cuda()\n", set()),
        # not the parameter; not a device; a nested function; a move in a loop
        ("def f(t):\n    return other.cuda()\n", set()),
        ("def f(t):\n    return t.to(torch.float16)\n", set()),
        ("def outer():\n    def f(t):\n        return t.cuda()\n    return f\n", set()),
        ("def f(ts):\n    for t in ts:\n        return t.cuda()\n", set()),
        # the return's first line does not spell the move: the cheap test says no
        ("def f(t):\n    return (\n        t.cuda()\n    )\n", set()),
    ],
)
def test_movers(body, expected):
    assert set(model(body).movers()) == expected


@pytest.mark.parametrize(
    "body, device",
    [
        ("class M:\n    def __init__(self):\n        self.i = 0\n    def f(self, x):\n        return x.cuda(self.i)\n", True),
        ("class M:\n    def __init__(self):\n        self.i = 'cuda:1'\n    def f(self, x):\n        return x.to(self.i)\n", True),
        ("class M:\n    def __init__(self, a):\n        self.i = 0\n    def g(self, a):\n        self.i = a.gpu\n"
         "    def f(self, x):\n        return x.cuda(self.i)\n", False),
        ("class M:\n    def __init__(self):\n        self.i = 0\n    def f(self, x):\n        self.i += 1\n        return x.cuda(self.i)\n", False),
        ("class M:\n    def __init__(self):\n        self.i, self.j = 0, 1\n    def f(self, x):\n        return x.cuda(self.i)\n", False),
        ("class M:\n    def __init__(self):\n        self.i = 'cpu'\n    def f(self, x):\n        return x.to(self.i)\n", False),
        ("class M:\n    def __init__(self):\n        self.i = True\n    def f(self, x):\n        return x.cuda(self.i)\n", False),
        ("class M:\n    def __init__(self):\n        self.i = 0\n    def f(self, x):\n        return x.cuda(self.i)\n"
         "m = M()\nm.i = args.gpu\n", False),  # bound elsewhere in the file too
    ],
)
def test_device_attributes(body, device):
    from torchlint.movers import is_device_attribute

    assert is_device_attribute(model(body).device_attributes(), (("c", "M"),), "i") is device


def test_no_move_no_work():
    """A file whose text hands nothing to a move asks nothing of the tree."""
    found = model("class M:\n    def __init__(self):\n        self.i = 0\n    def f(self, x):\n        return x + self.i\n")
    assert found.device_attributes() == frozenset() and found.movers() == frozenset()
    assert found._tree is None


def test_the_facts_are_in_the_editor_digest():
    """A helper elsewhere in the file decides a finding: an edit there must change the digest."""
    mover = "def to_gpu(t):\n    return t.cuda()\n"
    assert model(mover).digest() != model(mover.replace("t.cuda()", "t")).digest()


# -- the rule ----------------------------------------------------------------------------------------

GAN = """\
class Gan:
    def __init__(self, n):
        self.n = n
        self.cuda = False
        self.cuda_index = 0

    def variable(self, arg):
        if self.cuda:
            return Variable(arg).cuda(self.cuda_index)
        else:
            return Variable(arg)

    def step(self, images):
        z = torch.randn(self.n, 100)
        images, z = self.variable(images), self.variable(z)
        fake = self.variable(torch.randn(self.n, 100))
        real = Variable(torch.ones(self.n)).cuda(self.cuda_index)
        other = Variable(torch.zeros(self.n).cuda(self.cuda_index))
        return images, z, fake, real, other
"""


def test_helper_variable_and_device_attribute():
    found = lint(GAN)
    assert [d.location.row for d in found] == [17, 18, 19, 20]
    assert [d.message for d in found[:2]] == [
        "`z` created on the CPU then moved by `self.variable`; pass `device=` to the factory",
        "Tensor created on the CPU then moved by `self.variable`; pass `device=` to the factory",
    ]
    assert [d.fix is None for d in found] == [True, True, True, False]  # Variable(...).cuda(): which wrapper stays is the author's
    text = HEADER + GAN
    assert "torch.zeros(self.n, device=self.cuda_index)" in _apply(text, found[3])


def _apply(text, finding):
    from torchlint.edits import apply_edits

    return apply_edits(text, finding.fix.edits)


@pytest.mark.parametrize(
    "change, expected",
    [
        (("z = torch.randn(self.n, 100)", "z = images * 2"), [18, 19, 20]),  # no constructor's result
        (("fake = self.variable(", "fake = self.other("), [17, 19, 20]),  # not a mover
        (("if self.cuda:\n            return Variable(arg).cuda", "if self.training:\n            return Variable(arg).cuda"),
         [19, 20]),  # moves on a test that does not ask for a device
    ],
)
def test_helper_lookalikes(change, expected):
    body = GAN.replace(*change)
    assert body != GAN
    assert rows(body) == expected


def test_the_device_attribute_decides_the_direct_moves():
    body = GAN.replace("self.cuda_index = 0", "self.cuda_index = None")
    assert rows(body) == [17, 18]  # the helper still moves (`.cuda(x)` moves to some GPU); the direct ones are unknown


def test_a_flag_the_caller_passes_is_unknown():
    body = "def maybe(t, use_cuda):\n    if use_cuda:\n        return t.cuda()\n    return t\n\ndef f(flag):\n    return maybe(torch.zeros(3), flag)\n"
    assert rows(body) == []
    assert rows(body.replace("if use_cuda:", "if torch.cuda.is_available():")) == [9]


def test_a_local_name_shadows_the_module_helper():
    body = "def to_gpu(t):\n    return t.cuda()\n\ndef f(to_gpu):\n    return to_gpu(torch.zeros(3))\n"
    assert rows(body) == []
    assert rows(body.replace("def f(to_gpu):", "def f():")) == [7]


@pytest.mark.parametrize(
    "body, expected",
    [
        # the host copy is read only in the else of the device test
        ("def f(n, use_cuda):\n    z = torch.randn(n)\n    if use_cuda:\n        z = Variable(z).cuda()\n"
         "    else:\n        z = Variable(z)\n    return z\n", [6]),
        # ... and after an if/else that rebinds it in both blocks
        ("def f(n, use_cuda):\n    z = torch.randn(n)\n    if use_cuda:\n        a, z = 1, z.cuda()\n"
         "    else:\n        a, z = 2, z\n    return z\n", [6]),
        # a read after an if without an else sees the host tensor
        ("def f(n, use_cuda):\n    z = torch.randn(n)\n    if use_cuda:\n        a, z = 1, z.cuda()\n    return z\n", []),
        # the else is of a test that does not ask for a device
        ("def f(n, flag):\n    z = torch.randn(n)\n    if flag:\n        z = Variable(z).cuda()\n"
         "    else:\n        z = Variable(z)\n    return z\n", []),
        # rebound through host methods under the same name, then moved
        ("def f(n, use_cuda):\n    eta = torch.FloatTensor(n, 1).uniform_(0, 1)\n    eta = eta.expand(n, 3)\n"
         "    if use_cuda:\n        eta = eta.cuda()\n    else:\n        eta = eta\n    return eta\n", [7]),
        # ... but not when the first binding is read elsewhere too
        ("def f(n, use_cuda):\n    eta = torch.rand(n, 1)\n    print(eta)\n    eta = eta.expand(n, 3)\n    return eta.cuda()\n", []),
        # moved through host methods
        ("def f(x, n):\n    alpha = torch.rand(n, 1)\n    alpha = alpha.expand_as(x).to(x.device)\n    return alpha\n", [5]),
        # another name: the rule follows one binding of the moved name only
        ("def f(x, n):\n    a = torch.rand(n, 1)\n    b = a.expand_as(x)\n    return b.to(x.device)\n", []),
    ],
)
def test_bound_forms(body, expected):
    assert rows(body) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("from torch.autograd import Variable\nVariable(torch.zeros(3)).cuda(i)\n", True),
        ("from torch.autograd import Variable\nz = torch.zeros(3)\nVariable(z).cuda(i)\n", True),
        ("Variable(torch.zeros(3)).cuda(i)\n", False),  # not torch's Variable
        ("a = torch.rand(3)\na = a.expand_as(x).to(d)\n", True),
        ("def f(t):\n    return t.cuda()\nf(torch.zeros(3))\n", True),
        ("def f(t):\n    return t.cuda()\nz = torch.zeros(3)\nf(z)\n", True),
        ("def f(t):\n    return t.cuda()\nf(x)\ny = torch.zeros(3)\n", False),
        ("def f(t):\n    return t\nf(torch.zeros(3))\n", False),
        ("x.cuda()\ny.to(d)\n", False),  # no constructor called: nothing else is asked
        ("x = torch.\uff5a\uff45\uff52\uff4f\uff53(3)\nx.cuda()\n", True),  # zeros in full-width letters: the tree's name
        ("from torch import zeros as z\ny = z(3)\ny.cuda()\n", True),  # an alias: its calls are constructor calls
        ("import torch\nmake = torch.ones\ny = make(3)\ny.cuda()\n", True),
        ("def f(x: torch.Tensor = None):\n    y = x.float()\n    return y.cuda()\n", False),
    ],
)
def test_the_ast_question(text, expected):
    assert factory_then_move_ast(AstIndex(ast.parse(text), text)) is expected


@pytest.mark.parametrize(
    "text",
    [
        "x = torch.zeros(3) + zeros (2) + torch.FloatTensor(\n 2) + myzeros(3) + zeros_like(x)\n",
        "y = torch.range(0, 3) + torch . range (1)  + th.randn(2) + randperm(4) + random(3)\n",
        "z = torch.Tensor  # c\n(3)\nw = torch.eye(2); v = eyes(3); u = np.full(3, 1.0); t = fully(2)\n",
        "a = torch.ones\nb = normalize(x) + torch.normal(0, 1, (3,)) + torch.empty_strided((2,), (1,))\n",
    ],
)
def test_the_constructor_scan_finds_what_the_regex_finds(text):
    """``_factory_calls`` (a literal-led regex per stem) finds the calls ``_FACTORY_CALL`` (one
    alternation of the words, ~4x slower) finds: where each starts and where its ``(`` ends."""
    from torchlint.rules.device import _FACTORY_CALL, _factory_calls

    assert _factory_calls(text)[0] == [(m.start(), m.end()) for m in _FACTORY_CALL.finditer(text)]


@pytest.mark.parametrize(
    "text, aliased",
    [
        ("import torch\nx = torch.zeros(3)\ndef f(a: torch.Tensor) -> torch.Tensor:\n    return a\n", False),
        ("from torch import zeros as z\n", True),
        ("import torch\nmake = torch.ones\n", True),
        ("from torch import (arange, range)\n", True),
        ("import torch\nif a == torch.Tensor:\n    pass\n", False),
    ],
)
def test_the_scan_says_where_a_constructor_may_have_another_name(text, aliased):
    from torchlint.rules.device import _factory_calls

    assert _factory_calls(text)[1] is aliased


@pytest.mark.parametrize(
    "body, expected",
    [
        ("def f(b, n, device):\n    a = torch.tensor(b, device=device)\n    return torch.arange(n).to(a)\n", [5]),
        ("def f(b, n):\n    s = torch.from_numpy(b).cuda()\n    return torch.zeros(n).to(s, non_blocking=True)\n", [5]),
        ("def f(b, n):\n    s = torch.from_numpy(b).cuda()\n    return torch.zeros(n).to(s.dtype)\n", []),  # metadata
        ("def f(b, n):\n    h = torch.tensor(b)\n    return torch.zeros(n).to(h)\n", []),  # a host tensor
        ("def f(b, n, other):\n    return torch.zeros(n).to(other)\n", []),  # unknown
        ("def f(b, n):\n    s = torch.from_numpy(b).cuda()\n    return torch.zeros(n).to(s, torch.half)\n", []),  # other's device, a dtype of its own
    ],
)
def test_moved_to_a_device_tensor(body, expected):
    found = lint(body)
    assert [d.location.row for d in found] == expected
    assert all(d.fix is None and "pass `device=" in d.message for d in found)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_movers_whatever_ends_the_lines(newline):
    """A lone CR ends a line as CPython reads it: every mover's ``return`` line is read."""
    body = "def a(t):\n    return t\n\ndef b(t):\n    return t.cuda()\n\ndef c(t):\n    return t.to(DEVICE)\n"
    found = FileModel.of_text((HEADER + body).replace("\n", newline)).movers()
    assert set(found) == {((), "b", 0), ((), "c", 0)}
