"""What TL901, TL903, TL904, TL905 and TL906 and their fixes mean when the code runs, with real torch.

TL901: `weights_only=True` loads a plain state dict and refuses a pickled arbitrary object (why
the fix is unsafe). TL903: `use_reentrant=False` gives the same gradients. TL904: every pure
rename in the table returns equal results, and every entry is what the table says in torch.
TL905: the flagged order really fails and the fixed one works. TL906: `Variable(x)` is
`x.detach()`, which is what the fix writes.
"""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")

from torchlint.deprecations import DEPRECATIONS  # noqa: E402
from rule_support import behaviour_fix, run_program  # noqa: E402

TORCH_VERSION = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def fix(source: str, code: str, version: str = "2.13", count: int = None) -> str:
    return behaviour_fix(source, code, count=count, path="program.py", table={"target-torch-version": version})


def run(source: str, **names):
    return run_program(source, quiet=True, **names)


# -- TL901 -------------------------------------------------------------------------------------
LOAD = """\
import torch

def restore(buffer):
    buffer.seek(0)
    return torch.load(buffer)
"""


class Payload:
    """An arbitrary pickled object: what a crafted checkpoint smuggles in."""


def test_tl901_fix_loads_a_state_dict_and_refuses_arbitrary_objects():
    fixed = fix(LOAD, "TL901", version="2.4")
    assert "torch.load(buffer, weights_only=True)" in fixed
    restore = run(fixed)["restore"]
    model = torch.nn.Linear(3, 2)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    state = restore(buffer)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    evil = io.BytesIO()
    torch.save({"weights": torch.ones(1), "payload": Payload()}, evil)
    with pytest.raises(Exception, match="(?i)weights.only|unsupported global"):
        restore(evil)
    evil.seek(0)
    assert isinstance(torch.load(evil, weights_only=False)["payload"], Payload)  # what TL901 flags


# -- TL903 -------------------------------------------------------------------------------------
CHECKPOINTED = """\
import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

def grads(block, seq, x):
    y = checkpoint(block, x).sum() + checkpoint_sequential(seq, 2, x).sum()
    return torch.autograd.grad(y, [x, *block.parameters(), *seq.parameters()])
"""


def test_tl903_use_reentrant_false_gives_the_same_gradients():
    fixed = fix(CHECKPOINTED, "TL903", count=2)
    assert fixed.count("use_reentrant=False") == 2
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4), torch.nn.Sigmoid())
    x = torch.randn(5, 4, requires_grad=True)
    reference = torch.autograd.grad(block(x).sum() + seq(x).sum(), [x, *block.parameters(), *seq.parameters()])
    after = run(fixed)["grads"](block, seq, x)
    for r, a in zip(reference, after):
        assert torch.allclose(r, a)


# -- TL904 -------------------------------------------------------------------------------------
def _resolve(name):
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("entry", sorted(DEPRECATIONS.values(), key=lambda e: e.name), ids=lambda e: e.name)
def test_tl904_table_matches_torch(entry):
    """Each entry exists in this torch; a removed one raises when called; each replacement exists."""
    if TORCH_VERSION >= entry.deprecated:
        assert callable(_resolve(entry.name))
    if entry.replacement:
        assert callable(_resolve(entry.replacement))
    if entry.removed is not None and TORCH_VERSION >= entry.removed:
        a = torch.eye(2)
        with pytest.raises(RuntimeError, match="removed"):
            _resolve(entry.name)(a, a) if entry.name in ("torch.solve", "torch.lstsq") else _resolve(entry.name)(a)


RENAMES = """\
import torch
import torch.nn.functional as F
import functorch

def compute(a, v, x, img):
    def f(t):
        return (t.sin() * t).sum()
    return [
        torch.ger(v, v),
        torch.qr(a),
        torch.cholesky(a @ a.mT + torch.eye(3)),
        F.sigmoid(x),
        F.tanh(x),
        F.upsample(img, scale_factor=2, mode="bilinear", align_corners=False),
        functorch.vmap(torch.sin)(x),
        functorch.grad(f)(v),
        functorch.grad_and_value(f)(v),
        functorch.vjp(torch.sin, v)[0],
        functorch.jvp(torch.sin, (v,), (torch.ones(3),)),
        functorch.jacrev(torch.sin)(v),
        functorch.jacfwd(torch.sin)(v),
        functorch.hessian(f)(v),
        functorch.functionalize(torch.sin)(v),
    ]
"""


def _flatten(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _flatten(item)]


def test_tl904_each_pure_rename_returns_equal_results():
    fixed = fix(RENAMES, "TL904", count=15)
    for new in ("torch.outer(", "torch.linalg.qr(", "torch.linalg.cholesky(", "torch.sigmoid(", "torch.tanh(",
                "F.interpolate(", "torch.func.vmap(", "torch.func.functionalize("):
        assert new in fixed
    torch.manual_seed(0)
    args = (torch.randn(3, 3), torch.randn(3), torch.randn(2, 3), torch.randn(1, 1, 2, 2))
    before = _flatten(run(RENAMES)["compute"](*args))
    after = _flatten(run(fixed)["compute"](*args))
    assert len(before) == len(after) > 15
    for b, a in zip(before, after):
        assert torch.equal(b, a)


def test_tl904_pytree_and_functional_call_renames():
    source = """\
    import torch
    import torch.utils._pytree as pytree
    from torch.nn.utils import stateless

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    pytree._register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda xs, _: Pair(*xs))

    def use(module, params, x):
        leaves, _ = pytree.tree_flatten(Pair(x, x + 1))
        return leaves, stateless.functional_call(module, params, (x,))
    """
    fixed = fix(source, "TL904", count=2)
    assert "pytree.register_pytree_node(Pair" in fixed and "torch.func.functional_call(module" in fixed
    module = torch.nn.Linear(2, 2)
    params = {k: torch.ones_like(v) for k, v in module.named_parameters()}
    x = torch.randn(2)
    before, after = run(source)["use"](module, params, x), run(fixed)["use"](module, params, x)
    assert all(torch.equal(b, a) for b, a in zip(_flatten(before), _flatten(after)))


# -- TL905 -------------------------------------------------------------------------------------
LATE_SUPER = """\
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        self.dim = 3
        self.fc = nn.Linear(self.dim, 2)
        super().__init__()
        self.out = nn.Linear(2, 1)

class Forgotten(nn.Module):
    def __init__(self):
        self.fc = nn.Linear(3, 2)
"""


def test_tl905_flagged_classes_fail_and_fixed_ones_work():
    before = run(LATE_SUPER)
    for name in ("Encoder", "Forgotten"):
        with pytest.raises(AttributeError, match="before Module.__init__"):
            before[name]()
    after = run(fix(LATE_SUPER, "TL905", count=2))
    encoder = after["Encoder"]()
    assert encoder.dim == 3 and {n for n, _ in encoder.named_children()} == {"fc", "out"}
    assert [n for n, _ in after["Forgotten"]().named_children()] == ["fc"]


# -- TL906 -------------------------------------------------------------------------------------
VARIABLES = """\
import torch
from torch.autograd import Variable

def wrap(x, y):
    a = Variable(x)
    b = Variable(y * 2)
    c = Variable(x, requires_grad=True)
    return a, b, c
"""


def test_tl906_fix_returns_what_variable_returned():
    fixed = fix(VARIABLES, "TL906", count=3)
    assert "(y * 2).detach()" in fixed and "x.detach().requires_grad_()" in fixed
    x = torch.randn(3)
    y = torch.randn(3, requires_grad=True)
    before, after = run(VARIABLES)["wrap"](x, y), run(fixed)["wrap"](x, y)
    for b, a in zip(before, after):
        assert torch.equal(b, a)
        assert (b.requires_grad, b.grad_fn, b.is_leaf) == (a.requires_grad, a.grad_fn, a.is_leaf)
    for i in (0, 2):  # both alias x's storage
        assert before[i].data_ptr() == after[i].data_ptr() == x.data_ptr()
    assert before[1].grad_fn is None  # Variable(y * 2) cut the graph: `y * 2` alone would not
    assert not x.requires_grad  # requires_grad=True made a new leaf, x itself is untouched
