"""TL407 softmax-before-cross-entropy: exact findings through names, attributes and models."""

from __future__ import annotations

import ast
import json
import textwrap
from functools import partial

import pytest
import rule_support

import torchlint.engine as engine
from torchlint import editor_memo
from torchlint.model import FileModel

findings = partial(rule_support.findings, rule="TL407")


def _lint(code):
    from torchlint.config import Settings, settings_from_table
    from torchlint.engine import lint_source
    import textwrap

    settings = settings_from_table({"select": ["TL407"], "preview": True}, "t.toml", Settings())
    return [(d.code, d.location.row, d.location.column) for d in lint_source(textwrap.dedent(code), "train.py", settings)]


def test_preview_only():
    # precise on issue 29's real code, but its ast question sends too many files to libcst (the page)
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


# -- issue 29 class 3: the module a name holds, as a whole-file model fact ------------------------
NOTEBOOK_CELLS = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n",
    textwrap.dedent("""\
        class MyModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.d1 = nn.Linear(784, 10)

            def forward(self, x):
                logits = self.d1(x.flatten(start_dim=1))
                out = F.softmax(logits, dim=1)
                return out
        """),
    "model = MyModel()\nfor images, labels in trainloader:\n    print(model(images).shape)\n    break\n",
    "model = MyModel()\nmodel = model.to(device)\ncriterion = nn.CrossEntropyLoss()\n",
    textwrap.dedent("""\
        for epoch in range(2):
            model = model.train()
            for images, labels in trainloader:
                predictions = model(images)
                loss = criterion(predictions, labels)
                loss.backward()
        """),
)


def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": i + 1, "outputs": [],
              "source": src.splitlines(True)} for i, src in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_notebook_cells_are_one_program():
    """omarsar/pytorch_notebooks: the forward returns F.softmax in one cell, the loss is made in
    another, they meet in a third (the model rebound with .to(device) and .train())."""
    from torchlint.config import Settings, settings_from_table
    from torchlint.notebook import lint_notebook

    settings = settings_from_table({"select": ["TL407"], "preview": True}, "t.toml", Settings())
    found = [(d.code, d.cell, d.location.row, d.location.column)
             for d in lint_notebook(_notebook(*NOTEBOOK_CELLS), "nb.ipynb", settings)]
    assert found == [("TL407", 5, 5, 26)]
    logits = NOTEBOOK_CELLS[1].replace("out = F.softmax(logits, dim=1)", "out = logits")
    assert lint_notebook(_notebook(NOTEBOOK_CELLS[0], logits, *NOTEBOOK_CELLS[2:]), "nb.ipynb", settings) == []


def test_sequential_behind_a_move():
    """huggingface/peft examples/pvera: ``Sequential(LazyLinear(n), Softmax(-1)).to(device)``."""
    code = """\
    import torch
    from torch.nn import LazyLinear, Sequential, Softmax

    linear_probe = Sequential(LazyLinear(3), Softmax(-1)).to(device)
    criterion = torch.nn.CrossEntropyLoss()
    for batch in loader:
        pred = linear_probe(model(batch["x"]).pooler_output)
        loss = criterion(pred, batch["y"])
    """
    assert _lint(code) == [("TL407", 8, 22)]


@pytest.mark.parametrize("rebinding", [
    "model = Other()",  # another class, returning logits
    "model = build(model)",  # a function of another file
    "for model in (Net(), Other()):\n    pass",  # a loop variable
    "def swap():\n    global model\n    model = Other()",  # rebound from a function
])
def test_a_name_bound_any_other_way_is_unknown(rebinding):
    code = textwrap.dedent("""\
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def forward(self, x):
                return F.softmax(self.fc(x), dim=1)

        class Other(nn.Module):
            def forward(self, x):
                return self.fc(x)

        criterion = nn.CrossEntropyLoss()
        model = Net().cuda()
        """) + rebinding + "\nloss = criterion(model(x), y)\n"
    assert _lint(code) == []
    assert _lint(code.replace(rebinding, "model = model.eval()")) == [("TL407", code.count("\n") - rebinding.count("\n"), 18)]


def test_probability_modules_fact():
    text = textwrap.dedent("""\
        import torch.nn as nn
        import torch.nn.functional as F

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Sequential(nn.Linear(4, 2), nn.Softmax(dim=1))

            def forward(self, x):
                return self.head(x)

        class Branchy(nn.Module):
            def forward(self, x, p=False):
                x = self.fc(x)
                if p:
                    x = F.softmax(x, 1)
                return x

        net = Net().to("cuda")
        branchy = Branchy()

        def train():
            local = nn.Softmax(dim=-1)
            return net, local

        def shadow(net):
            return net
        """)
    model = FileModel(ast.parse(text), text)
    modules = model.probability_modules()
    assert modules[()] == {"net"}
    assert modules[(("d", "train"),)] == {"net", "local"}
    assert (("d", "shadow"),) not in modules  # its parameter hides the module's `net`
    assert modules[(("c", "Net"), ("d", "forward"))] == {"net", "self.head"}
    assert model.holds_probability_module((), "net") and not model.holds_probability_module((), "branchy")
    assert "probability_modules" in model.answers


def test_chunked_and_whole_models_agree(monkeypatch):
    from torchlint import parsing

    text = "import torch.nn as nn\n" + "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(60)) + (
        "\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n\n\nnet = Net().cuda()\n")
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.probability_modules() == whole.probability_modules() and whole.probability_modules()[()] == {"net"}


FILLER = "".join(f"\n\ndef _filler_{i}(x):\n" + "    x += 1\n" * 10 + "    return x\n" for i in range(10))
SCRIPT = textwrap.dedent("""\
    import torch.nn as nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def forward(self, x):
            x = self.fc(x)
            x = F.softmax(x, dim=1)
            return x


    model = Net()
    model = model.cuda()
    criterion = nn.CrossEntropyLoss()


    def step(x, y):
        return criterion(model(x), y)
""")


def test_whole_batch_and_editor_agree(monkeypatch):
    from torchlint.config import Settings

    settings = Settings(select=("TL407",), preview=True)
    text = SCRIPT + FILLER
    with monkeypatch.context() as m:
        m.setattr(engine, "plan_statements", lambda *a, **k: None)
        whole = [d.to_json() for d in engine.lint_source(text, "m.py", settings)]
    batch = [d.to_json() for d in engine.lint_source(text, "m.py", settings)]
    editor_memo.clear()
    editor = [d.to_json() for d in engine.lint_source(text, "m.py", settings, incremental=True)]
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL407", 18)]
    assert batch == whole == editor
    # `step` unchanged, the forward returns logits: the finding goes, as a fresh lint says
    edited = text.replace("        x = F.softmax(x, dim=1)\n", "")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", settings)] == []
    editor_memo.clear()
