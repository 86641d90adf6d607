"""Functions a program runs only before it first touches an accelerator (issue 29, class 5:
``torchlint/hostphase.py``, ``FileModel.host_phase_functions``, TL201). dlwpt-code's
1_convolution.ipynb runs a first ``training_loop`` on the CPU (cells 30-31), picks a device in
cell 35 and defines the loop again for it: only the second one syncs with a GPU."""

from __future__ import annotations

import ast
import json
import textwrap

from torchlint.config import Settings
from torchlint.hostphase import host_phase_functions
from torchlint.notebook import lint_notebook

TL201 = Settings(select=("TL201",))

LOOP = """\
def {name}(model, optimizer, loader):
    for x, y in loader:
        loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def found(source: str):
    source = textwrap.dedent(source)
    return host_phase_functions(source, ast.parse(source))


def test_called_only_before_the_device_is_picked():
    source = "import torch\n" + LOOP.format(name="fit") + textwrap.dedent("""\
        fit(model, optimizer, loader)
        device = torch.device("cuda")
        model.to(device)
    """)
    assert found(source) == {("fit", 0)}


def test_called_again_after_the_device_is_picked():
    source = "import torch\n" + LOOP.format(name="fit") + textwrap.dedent("""\
        fit(model, optimizer, loader)
        model = model.cuda()
        fit(model, optimizer, loader)
    """)
    assert found(source) == frozenset()


def test_a_redefinition_takes_the_later_calls():
    source = "import torch\n" + LOOP.format(name="fit") + "fit(m, o, l)\nm = m.cuda()\n" + LOOP.format(
        name="fit") + "fit(m, o, l)\n"
    assert found(source) == {("fit", 0)}  # the second `fit` is defined after the move


def test_a_conditional_redefinition_does_not_take_the_later_calls():
    source = "import torch\n" + LOOP.format(name="fit") + textwrap.dedent("""\
        fit(m, o, l)
        m = m.cuda()
        if again:
            def fit(m, o, l):
                pass
        fit(m, o, l)
    """)
    assert found(source) == frozenset()


def test_reads_from_functions_callbacks_and_globals_disqualify():
    base = "import torch\n" + LOOP.format(name="fit") + "fit(m, o, l)\n"
    assert found(base + "def later():\n    fit(m, o, l)\nm = m.cuda()\n") == frozenset()
    assert found(base + "hooks = [lambda: fit(m, o, l)]\nm = m.cuda()\n") == frozenset()
    assert found(base + "def rebind():\n    global fit\nm = m.cuda()\n") == frozenset()


def test_what_may_touch_an_accelerator_first():
    base = "import torch\n" + LOOP.format(name="fit")
    # a project module may move the program's tensors; torch.load may restore device tensors
    assert found(base + "from helpers import prepare\nfit(m, o, l)\nm.cuda()\n") == frozenset()
    assert found(base + "from . import helpers\nfit(m, o, l)\nm.cuda()\n") == frozenset()
    assert found(base + "state = torch.load('ckpt.pt')\nfit(m, o, l)\nm.cuda()\n") == frozenset()
    assert found(base + "x = x.to(dev)\nfit(m, o, l)\n") == frozenset()
    # a comment line naming a device does not; a docstring runs nothing
    assert found('"""Trains on the GPU later."""\n' + base + "# move to the device later\nfit(m, o, l)\n") == {
        ("fit", 0)}
    # code run unseen (IPython's %run, masked in a notebook's program)
    assert found(base + "get_ipython().run_line_magic('run', 'setup.py')\nfit(m, o, l)\n") == frozenset()


def _notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": textwrap.dedent(c)} for c in cells],
                       "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_notebook_cpu_loop_then_gpu_loop():
    """dlwpt-code p1ch8/1_convolution.ipynb, rewritten: cell 2's loop runs on the CPU (cell 3)
    before cell 4 picks a device; cell 5's loop runs on it (cell 6)."""
    raw = _notebook(
        "import torch\nfrom torch import nn, optim\n",
        LOOP.format(name="training_loop"),
        "model = nn.Linear(4, 2)\ntraining_loop(model, optim.SGD(model.parameters(), lr=0.1), loader)\n",
        "device = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')\n",
        LOOP.format(name="training_loop").replace("for x, y in loader:\n",
                                                  "for x, y in loader:\n        x, y = x.to(device), y.to(device)\n"),
        "model = model.to(device)\ntraining_loop(model, optim.SGD(model.parameters(), lr=0.1), loader)\n",
    )
    found_cells = sorted({(d.cell, d.location.row) for d in lint_notebook(raw, "nb.ipynb", TL201) if d.code == "TL201"})
    assert found_cells == [(5, 8)]


def test_the_editor_digest_follows_the_fact():
    """A finding in an unchanged function depends on the statements around it: the whole-file
    digest an editor keys kept findings on changes with the answer."""
    from torchlint.model import FileModel

    early = "import torch\n" + LOOP.format(name="fit") + "fit(m, o, l)\nm = m.cuda()\n"
    late = "import torch\n" + LOOP.format(name="fit") + "m = m.cuda()\nfit(m, o, l)\n"
    assert FileModel(ast.parse(early), early).host_phase_functions() == {("fit", 0)}
    assert FileModel(ast.parse(late), late).host_phase_functions() == frozenset()
    assert FileModel(ast.parse(early), early).digest() != FileModel(ast.parse(late), late).digest()


def test_a_module_has_none():
    """A module's functions may be called from another file at any time."""
    from torchlint.model import FileModel

    text = "import torch\n" + LOOP.format(name="fit")
    assert FileModel(ast.parse(text), text).host_phase_functions() == frozenset()
