"""TL407's model fact, probability modules (``outputs.py``, ``FileModel.probability_modules``), at
the cost of the files where it can matter: a file whose classes return no softmax and that never
builds an ``nn.Softmax`` has none, and is not walked; TL407 asks the fact only of a loss's input;
a file read in chunks (phase 3) collects each chunk's bindings in turn, never the whole tree, with
the whole file's answer."""

from __future__ import annotations

import ast
import textwrap

from torchlint import outputs, parsing
from torchlint.model import FileModel

ATTENTION = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Attention(nn.Module):
        def forward(self, q, k, v):
            weights = F.softmax(q @ k.T, dim=-1)
            return weights @ v, weights


    model = Attention().cuda()
    out = model(q, k, v)
""")


def _no_walk(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("every scope's bindings were collected")
    monkeypatch.setattr(outputs, "_collect", refuse)


def test_a_softmax_no_module_returns_is_not_walked(monkeypatch):
    """Attention weights: `softmax` is spelt, but no class returns one alone and no `nn.Softmax` is
    built: no name can hold a probability module, and no scope's bindings are read."""
    _no_walk(monkeypatch)
    model = FileModel(ast.parse(ATTENTION), ATTENTION)
    assert model.probability_modules() == {}


def test_a_class_returning_softmax_is_found_through_an_alias(monkeypatch):
    """`softmax as sm`: the class's lines spell the alias, not `softmax` alone after the import."""
    text = ATTENTION + textwrap.dedent("""\
        from torch.nn.functional import softmax as sm


        class Classifier(nn.Module):
            def forward(self, x):
                return sm(self.fc(x), dim=1)


        clf = Classifier().cuda()
    """)
    model = FileModel(ast.parse(text), text)
    assert model.probability_modules()[()] == {"clf"}
    assert not outputs.may_hold([ast.parse(ATTENTION)], ATTENTION, lambda node, name: False)


def test_an_nn_softmax_is_read_as_before():
    text = ATTENTION + "\nhead = nn.Sequential(nn.Linear(4, 2), nn.Softmax(dim=1)).cuda()\n"
    model = FileModel(ast.parse(text), text)
    assert model.probability_modules()[()] == {"head"}


def test_tl407_asks_the_fact_only_of_a_losss_input(monkeypatch):
    """Calls that are not a loss (`model(q, k, v)`, `print(out)`) do not ask for the file's
    probability modules; a loss does."""
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    asked = []
    real = FileModel._probability_modules
    monkeypatch.setattr(FileModel, "_probability_modules", lambda self: asked.append(1) or real(self))
    text = ATTENTION + "print(out)\nnn.functional.nll_loss  # named, not called\n"
    settings = Settings(select=("TL407",), preview=True)
    assert lint_source(text, "attn.py", settings) == []
    assert asked == []
    flagged = text + "loss = nn.CrossEntropyLoss()(model(q, k, v), y)\n"
    lint_source(flagged, "attn.py", settings)
    assert asked == [1]


def test_a_file_in_chunks_has_the_whole_files_answer_without_its_whole_tree(monkeypatch):
    """A class in one chunk, its instance bound in a second and moved in a third, a Sequential
    ending in a softmax in a function of a fourth: the answer of the whole tree, and no parse of
    more than a chunk."""
    pad = "".join(f"\n\ndef pad_{{k}}_{i}(x):\n    return x + {i}\n" for i in range(40))
    parts = [
        "import torch.nn as nn\nimport torch.nn.functional as F\n",
        "\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return F.softmax(self.fc(x), 1)\n",
        "\n\nnet = Net()\n",
        "\n\nnet = net.cuda()\n\n\ndef make():\n    head = nn.Sequential(nn.Linear(2, 2), nn.Softmax(1))\n    return head\n",
    ]
    text = "".join(part + pad.replace("{k}", str(k)) for k, part in enumerate(parts))
    whole = FileModel(ast.parse(text), text).probability_modules()
    assert whole[()] == {"net"} and whole[(("d", "make"),)] == {"net", "head"}
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    real, sizes = ast.parse, []
    monkeypatch.setattr(parsing.ast, "parse", lambda t, *a, **k: sizes.append(len(t.lstrip("\n"))) or real(t, *a, **k))
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.probability_modules() == whole
    assert sizes and max(sizes) < len(text) / 4


def test_a_loss_is_resolved_only_where_its_callee_may_name_one(monkeypatch):
    """Only calls whose callee's last name a loss can be reached by are resolved (a loss's name, a
    name on a line that spells one, an `a = b` alias of those); the aliases stay flagged."""
    from torchlint.config import Settings
    from torchlint.context import FileContext
    from torchlint.engine import lint_source

    resolved = []
    real = FileContext.resolve_call
    monkeypatch.setattr(FileContext, "resolve_call", lambda self, node: resolved.append(node) or real(self, node))
    text = textwrap.dedent("""\
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.functional import cross_entropy as ce

        loss_fn = ce
        criterion = nn.CrossEntropyLoss()


        def step(model, x, y):
            print(len(x), max(y))
            a = ce(F.softmax(model(x), 1), y)
            b = loss_fn(F.softmax(model(x), 1), y)
            c = nn.NLLLoss()(F.softmax(model(x), 1), y)
            d = criterion(x.softmax(1), y)
            return a + b + c + d
    """)
    settings = Settings(select=("TL407",), preview=True)
    rows = sorted(d.location.row for d in lint_source(text, "train.py", settings))
    assert rows == [11, 12, 13, 14]
    def callee(node):
        func = node.func
        return func.value if hasattr(func, "value") and isinstance(func.value, str) else (
            func.attr.value if hasattr(func, "attr") else "<call>")
    names = {callee(node) for node in resolved}
    assert {"ce", "loss_fn", "NLLLoss", "<call>", "criterion"} <= names  # the losses, resolved
    assert not names & {"print", "len", "max"}  # no line spells a loss with them: never resolved
