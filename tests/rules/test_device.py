"""TL202 tensor-moved-after-creation: exact findings and the exact text of each fix."""

from __future__ import annotations

import ast
import textwrap

import pytest

from torchlint.config import Settings
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.edits import apply_edits
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code

HEADER = "import torch\n"


def lint(body: str):
    text = HEADER + textwrap.dedent(body)
    return text, lint_source(text, "train.py", Settings(), rules=[rules_by_code()["TL202"]])


def fixed(body: str):
    """(the rewritten source, the fix's applicability) for the one finding in ``body``."""
    text, found = lint(body)
    assert len(found) == 1, found
    assert found[0].fix is not None
    out = apply_edits(text, found[0].fix.edits)
    ast.parse(out)
    return out[len(HEADER):], found[0].fix.applicability


@pytest.mark.parametrize(
    "before, after, applicability",
    [
        ("x = torch.zeros(3, 4).cuda()\n", 'x = torch.zeros(3, 4, device="cuda")\n', SAFE),
        ("x = torch.zeros(3).cuda(1)\n", 'x = torch.zeros(3, device="cuda:1")\n', SAFE),
        ("x = torch.ones(3).to('cuda')\n", "x = torch.ones(3, device='cuda')\n", SAFE),
        ("x = torch.arange(10).to(device)\n", "x = torch.arange(10, device=device)\n", SAFE),
        ("x = torch.zeros(3).to(device, torch.half)\n", "x = torch.zeros(3, device=device, dtype=torch.half)\n", SAFE),
        ("x = torch.zeros(3).to(device=dev, dtype=t, non_blocking=True)\n", "x = torch.zeros(3, device=dev, dtype=t)\n", SAFE),
        ("x = torch.eye(3).to(device, copy=True)\n", "x = torch.eye(3, device=device)\n", SAFE),
        ("x = torch.zeros(3).cuda(non_blocking=True)\n", 'x = torch.zeros(3, device="cuda")\n', SAFE),
        ("x = torch.zeros(*shape).to(device)\n", "x = torch.zeros(*shape, device=device)\n", SAFE),
        ("x = torch.zeros().to(device)\n", "x = torch.zeros(device=device)\n", SAFE),
        ("x = (torch.zeros(3).to(device))\n", "x = (torch.zeros(3, device=device))\n", SAFE),
        # random constructors draw from the device's generator: unsafe
        ("x = torch.randn(3).to(device)\n", "x = torch.randn(3, device=device)\n", UNSAFE),
        ("x = torch.randint(0, 5, (3,)).cuda()\n", 'x = torch.randint(0, 5, (3,), device="cuda")\n', UNSAFE),
        ("x = torch.normal(0.0, 1.0, (3,)).to(device)\n", "x = torch.normal(0.0, 1.0, (3,), device=device)\n", UNSAFE),
        # a dtype folded into a constructor that is not exact in every dtype: unsafe
        ("x = torch.full((3,), 0.1).to(device, torch.half)\n", "x = torch.full((3,), 0.1, device=device, dtype=torch.half)\n", UNSAFE),
        ("x = torch.arange(10).to(device, torch.float16)\n", "x = torch.arange(10, device=device, dtype=torch.float16)\n", UNSAFE),
        # requires_grad: the result becomes the leaf
        ("w = torch.zeros(3, requires_grad=True).cuda()\n", 'w = torch.zeros(3, requires_grad=True, device="cuda")\n', UNSAFE),
        ("w = torch.zeros(3, requires_grad=False).cuda()\n", 'w = torch.zeros(3, requires_grad=False, device="cuda")\n', SAFE),
    ],
)
def test_fix_text(before, after, applicability):
    assert fixed(before) == (after, applicability)


def test_finding_spans_the_whole_expression():
    _, found = lint("def f(n, device):\n    return torch.zeros(n).to(device) + 1\n")
    assert [(d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column) for d in found] == [
        ("TL202", 3, 12, 3, 37)
    ]


def test_multiline_fix_keeps_layout_and_comments():
    before = """\
        def f(n, device):
            if n:
                x = torch.zeros(
                    n,  # rows
                    n,
                ).to(device)
                return x
        """
    after = """\
        def f(n, device):
            if n:
                x = torch.zeros(
                    n,  # rows
                    n,
                    device=device,
                )
                return x
        """
    assert fixed(before) == (textwrap.dedent(after), SAFE)


def test_multiline_without_trailing_comma():
    before = "x = torch.ones(\n    3,\n    4\n).cuda()\n"
    assert fixed(before) == ('x = torch.ones(\n    3,\n    4,\n    device="cuda"\n)\n', SAFE)


def test_comment_in_dropped_part_means_no_fix():
    _, found = lint("x = (torch.zeros(3)  # buffer\n     .to(device))\n")
    assert [d.code for d in found] == ["TL202"] and found[0].fix is None


def test_two_dtypes_mean_no_fix():
    _, found = lint("x = torch.zeros(3, dtype=torch.float).to(device, torch.half)\n")
    assert [d.code for d in found] == ["TL202"] and found[0].fix is None


def test_import_aliases():
    text = "import torch as th\nfrom torch import ones\nx = th.zeros(3).cuda()\ny = ones(2).to(dev)\n"
    found = lint_source(text, "m.py", Settings(), rules=[rules_by_code()["TL202"]])
    assert [(d.location.row, d.location.column) for d in found] == [(3, 5), (4, 5)]


@pytest.mark.parametrize(
    "src",
    [
        "x = torch.zeros(3).to(torch.float16)\n",
        "x = torch.zeros(3).to(dtype=torch.float16)\n",
        "x = torch.zeros(3).to(other)\n",
        "x = torch.zeros(3).to(dtype)\n",
        "x = torch.zeros(3).to('cpu')\n",
        "x = torch.zeros(3).to(torch.device('cpu'))\n",
        "x = torch.zeros(3).to(cpu_device)\n",
        "x = torch.zeros(3).cpu()\n",
        "x = torch.zeros(3).to('meta')\n",
        "x = torch.from_numpy(a).to(device)\n",
        "x = torch.as_tensor(a).to(device)\n",
        "x = torch.zeros_like(a).to(device)\n",
        "x = torch.zeros(3, device=d).to(device)\n",
        "x = torch.zeros(3, out=buf).to(device)\n",
        "x = torch.empty(3, pin_memory=True).cuda()\n",
        "x = torch.randn(3, generator=g).to(device)\n",
        "x = torch.zeros(3).to(memory_format=torch.channels_last)\n",
        "x = torch.zeros(3).to(device, memory_format=torch.channels_last)\n",
        "x = torch.zeros(3).to(*args)\n",
        "x = torch.zeros(3).to(**kwargs)\n",
        "x = torch.zeros(**kw).to(device)\n",
        "x = torch.zeros(3).cuda(rank)\n",
        "x = torch.bernoulli(p).to(device)\n",
        "x = torch.normal(mean, std).to(device)\n",
        # host data: torch.tensor(data, device=d) builds on the CPU and copies too
        "x = torch.tensor([1, 2]).to(self.device)\n",
        "x = model.to(device)\n",
        "x = np.zeros(3).to(device)\n",
        "x = torch.zeros(3).to(device, torch.half, False, False, extra)\n",
    ],
)
def test_lookalikes_stay_silent(src):
    assert lint(src)[1] == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ("torch.zeros(3).cuda()", True),
        ("torch.zeros(3) . to (d)", True),
        ("torch.zeros(\n 3,\n).to(d)", True),
        ("torch.zeros(3)\\\n.cuda()", True),
        ("torch.zeros (3).to(d)", True),
        ("(torch.zeros(3)  # c\n  .to(d))", True),
        ("torch.ones(f(x)[0]).to(d)", True),
        ("torch.tensor([')']).to(d)", False),  # torch.tensor copies host data anyway
        ("from torch import zeros as z\nz(3).cuda()", True),  # an alias hides the name
        ("from torch import zeros\tas\tz\n", False),  # imported, never moved
        ("np.zeros(3).to(d)", True),  # not torch's, but the question does not resolve names
        ("th.randn(2, 3)  # c\n", False),
        ("x = torch.tensor(a)\ny.to(d)", False),
        ("x = torch.zeros(a)\ny.to(d)", False),  # y is not bound to the constructor
        ("y = torch.FloatTensor(2, 3)\n(y).cuda()", True),
        ("x = torch.FloatTensor(2, 3)\n(y).cuda()", False),  # y is never bound to a constructor
        ("for i in range(3):\n    y = list(range(i))\ny.to(d)", False),  # Python's range
        ("from torch import range\ny = range(0, 3)\ny.to(d)", True),
        ("a, y = torch.zeros(1), 2\ny.to(d)", True),
        ("y: Tensor = (\n    torch.zeros(1)\n)\ny.to(d)", True),
        ("torch.ones(1).fill_(v).type_as(x).to(d)", True),  # a chain of host methods
        ("torch.FloatTensor(n, m).zero_().cuda()", True),
        ("torch.ones(1).sum().to(d)", False),  # sum is not a host method: the walk stops
        ("torch.nn.functional.pad(x).to(d)", False),
        ("x.view(2).to(d)", False),
        ("import numpy as np\n(3).to(d)", False),
    ],
)
def test_the_ast_question_for_constructor_then_move(text, expected):
    """The ast question alone decides (the text scan that stood in for it where there was no
    tree is gone: a rule's precision lives in its question)."""
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.rules.device import factory_then_move_ast

    assert factory_then_move_ast(AstIndex(ast.parse(text), text)) is expected


def _messages(body: str):
    return [(d.location.row, d.message) for d in lint(body)[1]]


@pytest.mark.parametrize(
    "body, row",
    [
        ("def f(n, device):\n    m = torch.zeros(n)\n    return m.to(device)\n", 4),
        ("def f(n):\n    m = torch.eye(n).float()\n    return m.cuda()\n", 4),
        ("def f(n, device):\n    m = torch.FloatTensor(n, n).zero_()\n    return m.to(device)\n", 4),
        ("def f(n, device):\n    m: torch.Tensor = torch.ones(n)\n    return (m).to(device)\n", 4),
    ],
)
def test_bound_then_moved_is_flagged(body, row):
    found = _messages(body)
    assert [r for r, _ in found] == [row]
    legacy = "FloatTensor" in body  # a legacy constructor takes no device=: torch.empty does
    advice = "build it with `torch.empty(" if legacy else "pass `device=`"
    assert found[0][1].startswith(f"`m` created on the CPU then moved; {advice}")


@pytest.mark.parametrize(
    "body",
    [
        "m = torch.zeros(3)\nx = m.cuda()\n",  # module level: built once
        "class A:\n    def __init__(self, device):\n        m = torch.zeros(3)\n        self.m = m.to(device)\n",
        "def f(device):\n    m = torch.zeros(3)\n    m.add_(1)\n    return m.to(device)\n",
        "def f(device):\n    m = torch.zeros(3)\n    return m.to(device), m\n",
        "def f():\n    m = torch.zeros(3)\n    return m.to('cuda:0'), m.to('cuda:1')\n",
        "def f(device, k):\n    m = torch.zeros(3)\n    if k:\n        m = g()\n    return m.to(device)\n",
        "def f(device, v):\n    m = torch.tensor(v)\n    return m.to(device)\n",
        "def f(device, a):\n    m = torch.from_numpy(a)\n    return m.to(device)\n",
        "def f(device):\n    m = torch.zeros(3, device='cpu')\n    return m.to(device)\n",
        "def f(device):\n    m = torch.zeros(3)\n    g = lambda: m\n    return m.to(device)\n",
        "def f(device):\n    m = torch.zeros(3).sum()\n    return m.to(device)\n",
        "def f(device, values):\n    m = torch.FloatTensor(values)\n    return m.to(device)\n",
    ],
)
def test_bound_lookalikes_stay_silent(body):
    assert lint(body)[1] == []


def test_per_step_messages():
    body = """\
        class M(torch.nn.Module):
            def forward(self, x):
                return x + torch.zeros(3).to(x.device)

        def train(loader, device):
            for batch in loader:
                w = torch.ones(3)
                batch = batch * w.to(device)

        def once(device):
            return torch.ones(3).to(device)
        """
    found = [(d.location.row, d.hint) for d in lint(body)[1]]
    assert [r for r, _ in found] == [4, 9, 12]
    # where the move repeats is the why: in the full format's hint, not in the short message
    assert found[0][1].endswith("`forward` runs every step.")
    assert found[1][1].endswith("This runs on every iteration of the loop around it.")
    assert found[2][1].endswith("`device=` builds it in place.")
    assert [d.message.split(" on the CPU")[0] for d in lint(body)[1]] == ["Tensor created", "`w` created", "Tensor created"]


def test_bound_fix_text():
    before = "def f(n, device):\n    m = torch.zeros(n)\n    m = m.to(device)\n    return m\n"
    assert fixed(before) == ("def f(n, device):\n    m = torch.zeros(n, device=device)\n    return m\n", SAFE)
    before = "def f(n):\n    m = torch.eye(n)\n    return 2 * m.cuda()\n"
    assert fixed(before) == ('def f(n):\n    m = torch.eye(n, device="cuda")\n    return 2 * m\n', SAFE)


@pytest.mark.parametrize(
    "body",
    [
        # the device is bound after the constructor: it cannot move up
        "def f(n, x):\n    m = torch.zeros(n)\n    device = x.device\n    return m.to(device)\n",
        # the move runs on one branch only
        "def f(n, device, k):\n    m = torch.zeros(n)\n    if k:\n        return m.to(device)\n",
        # a host chain: which fill to keep is for the author
        "def f(n, device):\n    m = torch.ones(n).fill_(2)\n    return m.to(device)\n",
    ],
)
def test_bound_without_fix(body):
    _, found = lint(body)
    assert len(found) == 1 and found[0].fix is None


# -- issue 29 class 4 -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "body, row",
    [
        ("def f(x, device):\n    return torch.Tensor(x.size()).zero_().to(device)\n", 3),
        ("def f(x, device):\n    return torch.FloatTensor(x.shape[0]).cuda()\n", 3),
        ("def f(x, n):\n    m = torch.zeros(n)\n    if x.is_cuda:\n        m = m.cuda()\n    return m + 1\n", 5),
        ("def f(x, n):\n    m = torch.zeros(n)\n    if x.device.type == 'cuda':\n        m = m.to('cuda')\n    return m\n", 5),
    ],
)
def test_sized_legacy_and_guarded_moves_are_flagged(body, row):
    assert [r for r, _ in _messages(body)] == [row]


@pytest.mark.parametrize(
    "body",
    [
        "def f(x, device):\n    return torch.Tensor(x).to(device)\n",
        "def f(x, device):\n    return torch.Tensor(x.tolist()).to(device)\n",
        "def f(x, n):\n    m = torch.zeros(n)\n    if x.is_cuda:\n        m = m.cuda()\n        print(1)\n    return m\n",
        "def f(x, n):\n    m = torch.zeros(n)\n    if x.is_cuda:\n        k = m.cuda()\n        return k\n    return m\n",
        "def f(x, n, ok):\n    m = torch.zeros(n)\n    if x.is_cuda or ok:\n        m = m.cuda()\n    return m\n",
    ],
)
def test_legacy_data_and_other_guards_stay_silent(body):
    assert _messages(body) == []


def test_silent_in_a_program_on_the_host():
    """Issue 29 class 5: a script whose only device is the host moves nothing over a bus."""
    body = ('device = torch.device("cpu")\n'
            "def step(n):\n    return torch.zeros(n).to(device)\n"
            'if __name__ == "__main__":\n    step(3)\n')
    assert _messages(body) == []
    assert [r for r, _ in _messages(body.replace('"cpu"', '"cuda"'))] == [4]
