"""TL401 zero-grad-set-to-none: exact findings and exact fixed text, per target torch version."""

from __future__ import annotations

import inspect
import textwrap

import libcst as cst
import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.edits import apply_edits
from torchlint.engine import lint_source


def lint(code: str, version: str = "2.13"):
    table = {"select": ["TL401"], "target-torch-version": version}
    settings = settings_from_table(table, "t.toml", Settings())
    return lint_source(textwrap.dedent(code), "t.py", settings)


def findings(code: str, version: str = "2.13"):
    return [(d.code, d.location.row, d.location.column) for d in lint(code, version)]


def fixed(code: str, version: str = "2.13") -> str:
    diagnostics = lint(code, version)
    assert len(diagnostics) == 1
    assert diagnostics[0].fix is not None and diagnostics[0].fix.applicability == "unsafe"
    out = apply_edits(textwrap.dedent(code), diagnostics[0].fix.edits)
    cst.parse_module(out)
    return out


def test_zero_grad_signatures_match_torch():
    torch = pytest.importorskip("torch")
    for fn in (torch.optim.Optimizer.zero_grad, torch.nn.Module.zero_grad):
        params = list(inspect.signature(fn).parameters.values())
        assert [p.name for p in params] == ["self", "set_to_none"]
        assert params[1].default is True


@pytest.mark.parametrize(
    "call",
    ["optimizer.zero_grad(set_to_none=False)", "model.zero_grad(False)", "self.opt.zero_grad( set_to_none = False )"],
)
def test_set_to_none_false_flagged(call):
    assert findings(f"{call}\n") == [("TL401", 1, 1)]
    assert findings(f"{call}\n", "1.13") == [("TL401", 1, 1)]


@pytest.mark.parametrize(
    "call",
    ["optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=True)", "optimizer.zero_grad(True)",
     "optimizer.zero_grad(set_to_none=flag)", "optimizer.zero_grad(**kw)", "zero_grad(False)",
     "x.zero_()", "torch.zeros(3)", "p.grad.zero_()"],
)
def test_silent_on_torch2(call):
    assert findings(f"{call}\n") == []


def test_plain_zero_grad_depends_on_version():
    assert findings("optimizer.zero_grad()\n", "1.13") == [("TL401", 1, 1)]
    assert findings("optimizer.zero_grad()\n", "2.0") == []
    assert findings("optimizer.zero_grad(set_to_none=True)\n", "1.13") == []
    assert findings("optimizer.zero_grad(**kw)\n", "1.13") == []


def test_fix_drops_argument_on_torch2():
    assert fixed("optimizer.zero_grad(set_to_none=False)\n") == "optimizer.zero_grad()\n"
    assert fixed("model.zero_grad(False)  # keep\n") == "model.zero_grad()  # keep\n"
    assert fixed("optimizer.zero_grad(\n    set_to_none=False,\n)\nstep()\n") == "optimizer.zero_grad()\nstep()\n"


def test_fix_sets_true_before_torch2():
    assert fixed("optimizer.zero_grad(set_to_none=False)\n", "1.13") == "optimizer.zero_grad(set_to_none=True)\n"
    assert fixed("model.zero_grad(False)\n", "1.13") == "model.zero_grad(set_to_none=True)\n"
    assert fixed("optimizer.zero_grad()\n", "1.13") == "optimizer.zero_grad(set_to_none=True)\n"


def test_a_plain_zero_grad_is_silent_before_set_to_none_existed():
    # torch>=0.4.0 declared (PyTorch-GAN): there is no argument to pass on the oldest torch
    # supported, and the torch installed today frees by default; an explicit False still counts
    assert lint("optimizer.zero_grad()\n", "1.6") == []
    assert lint("optimizer.zero_grad()\n", "0.4") == []
    assert [d.code for d in lint("optimizer.zero_grad()\n", "1.7")] == ["TL401"]


LOOP = """\
def step(model, optimizer):
    optimizer.step()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.detach_()
            p.grad.zero_()
    log(model)
"""


def test_manual_loop_flagged_at_zeroing_call():
    assert findings(LOOP) == [("TL401", 6, 13)]
    assert findings("for p in params:\n    p.grad.data.zero_()\n") == [("TL401", 2, 5)]
    assert findings("for n, p in model.named_parameters():\n    p.grad = None\n") == []


def test_manual_loop_fix_in_exact_shape():
    assert fixed(LOOP) == LOOP.replace(
        "    for p in model.parameters():\n        if p.grad is not None:\n"
        "            p.grad.detach_()\n            p.grad.zero_()\n",
        "    model.zero_grad()\n",
    )
    assert fixed(LOOP, "1.13").splitlines()[2] == "    model.zero_grad(set_to_none=True)"
    assert fixed("for w in self.net.parameters(): w.grad.zero_()\n") == "self.net.zero_grad()\n"


@pytest.mark.parametrize(
    "loop",
    [
        "for p in params:\n    p.grad.zero_()\n",  # not a module's parameters()
        "for p in model.parameters(recurse=False):\n    p.grad.zero_()\n",
        "for p in model.parameters():\n    p.grad.zero_()\n    count += 1\n",  # does more
        "for p in model.parameters():\n    if p.requires_grad:\n        p.grad.zero_()\n",  # other guard
        "for p in model.parameters():\n    p.grad.zero_()\nelse:\n    done()\n",
    ],
)
def test_manual_loop_without_fix(loop):
    (d,) = lint(loop)
    assert d.fix is None


def test_silent_where_zeroing_in_place_is_the_point():
    code = """\
    class Opt(torch.optim.Optimizer):
        def zero_grad(self, set_to_none=True):
            for p in self.params:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()
            self.inner.zero_grad(set_to_none=False)

    def capture(model, optimizer):
        with torch.cuda.graph(g):
            optimizer.zero_grad(set_to_none=False)
            for p in model.parameters():
                p.grad.zero_()
    """
    assert findings("import torch\n" + textwrap.dedent(code)) == []


def test_zero_on_non_loop_variable_is_silent():
    code = """\
    for _ in range(steps):
        loss(x).backward()
        x.grad.zero_()
        buf.zero_()
    """
    assert findings(code) == []


def _first_python_block(page: str, heading: str) -> str:
    section = page.split(f"## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_docs_examples():
    from fixture_support import ROOT

    page = (ROOT / "docs" / "rules" / "TL401.md").read_text()
    assert [d.code for d in lint(_first_python_block(page, "Example"))] == ["TL401"]
    assert lint(_first_python_block(page, "Use instead")) == []


def test_prefilter_tokens():
    from torchlint.rules.zero_grad import ZeroGradSetToNone as rule

    assert rule.may_fire("opt.zero_grad(set_to_none=False)")
    assert rule.may_fire("p.grad .data.\\\n zero_()")
    assert not rule.may_fire("nn.init.zeros_(m.bias)\nm.bias.data.zero_()")


def test_a_zero_grad_that_ignores_set_to_none_still_zeroes_every_step():
    """An optimizer's own `zero_grad` that always zeroes in place, although torch offers
    `set_to_none`, costs a memset per parameter every step (issue: the nine rules, deeper)."""
    code = """\
    class Opt(torch.optim.Optimizer):
        def zero_grad(self, set_to_none=True):
            for p in self.params:
                p.grad.zero_()
    """
    assert findings("import torch\n" + textwrap.dedent(code)) == [("TL401", 5, 13)]


@pytest.mark.parametrize("statement, accumulates", [
    ("p.grad += g", True), ("p.grad.data -= g", True), ("p.grad.add_(g)", True), ("(p.grad).copy_(x)", True),
    ("p.grad \\\n    += 1", True), ("p.grad.data.sub_( g)", True), ("(p.grad).data.add_(g)", True),
    ("((p.grad.data)).add_(g)", True), ("p.grad.  add_(g)", True),
    ("p.grad.zero_()", False), ("p.grad = None", False), ("x.gradient += 1", False), ("p.grad.datax += 1", False),
    ("p.grad.mul_(2)", False),
])
def test_the_text_shortcut_finds_every_accumulation_the_walk_finds(statement, accumulates):
    """The whole-file model (``model.py``) walks for ``.grad`` accumulations only when
    ``_ACCUMULATES`` matches the text (a 4,000-line Trainer is walked no more): it matches
    wherever the walk says yes, and the walk answers for the module outside classes."""
    import ast

    from torchlint.model import _ACCUMULATES, FileModel

    source = f"for p in params:\n    {statement}\n"
    assert bool(_ACCUMULATES.search(source)) is accumulates
    model = FileModel(ast.parse(source), source)
    assert model.accumulates_into_grads(()) is accumulates
    walked = FileModel(ast.parse(source), source)
    # the walk itself, without the text shortcut:
    import torchlint.model as model_module

    real = model_module._ACCUMULATES
    model_module._ACCUMULATES = type("Always", (), {"search": staticmethod(lambda text: True)})()
    try:
        assert walked.accumulates_into_grads(()) is accumulates
    finally:
        model_module._ACCUMULATES = real


def test_grad_accumulation_is_judged_per_class():
    """A class that adds into ``.grad`` silences TL401 in its own methods only; the module's
    functions are judged by the module's code outside classes."""
    import ast

    from torchlint.model import FileModel

    source = textwrap.dedent("""\
        class Server:
            def sync(self, grads):
                for p, g in zip(self.params, grads):
                    p.grad.add_(g)

        class Plain:
            def step(self):
                pass

        def f(params):
            for p in params:
                p.grad += 1
    """)
    model = FileModel(ast.parse(source), source)
    assert model.accumulates_into_grads((("c", "Server"), ("d", "sync")))
    assert not model.accumulates_into_grads((("c", "Plain"), ("d", "step")))
    assert model.accumulates_into_grads((("d", "f"),)) and model.accumulates_into_grads(())
