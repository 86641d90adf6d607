"""FileModel.mode_free_classes (issue 29, class 8): which classes of a file compute the same in
training and evaluation mode, so that TL902 knows when `.eval()` changes nothing."""

import ast

from torchlint.model import FileModel

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom timm.layers import Mlp\n"


def free(body: str):
    text = HEADER + body
    return FileModel(ast.parse(text), text).mode_free_classes()


def test_known_layers_without_a_mode_are_mode_free():
    assert free(
        "class A(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "        self.norm = nn.LayerNorm(2)\n"
        "        self.rnn = nn.LSTM(2, 2, 2, batch_first=True)\n"
        "        self.scale = math.sqrt(2)\n"
        "    def forward(self, x):\n"
        "        for layer in [self.fc, self.norm]:\n"
        "            x = layer(x)\n"
        "        return F.gelu(x).view(-1)\n"
    ) == {"A"}


def test_dropout_batch_norm_and_the_mode_itself_are_not():
    body = (
        "class Drop(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.d = nn.Dropout(0.1)\n"
        "class BN(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.b = nn.BatchNorm2d(3)\n"
        "class Reads(nn.Module):\n    def forward(self, x):\n        return x if self.training else -x\n"
        "class Rnn(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.r = nn.GRU(2, 2, dropout=0.2)\n"
        "class Stats(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.n = nn.InstanceNorm1d(2, track_running_stats=True)\n"
        "class Attn(nn.Module):\n    def __init__(self, p):\n        super().__init__()\n"
        "        self.a = nn.MultiheadAttention(4, 2, dropout=p)\n"
        "class Enc(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.e = nn.TransformerEncoderLayer(4, 2)\n"
        "class Outer(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = Drop()\n"
        "class Sub(BN):\n    pass\n"
    )
    assert free(body) == set()


def test_unknown_layers_are_never_mode_free():
    body = (
        "class Lib(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.m = Mlp(4)\n"
        "class Handed(nn.Module):\n    def __init__(self, norm_layer):\n        super().__init__()\n"
        "        self.n = norm_layer(4)\n"
        "class Base(SomethingElse):\n    pass\n"
        "class Kw(nn.Module):\n    def __init__(self, **kw):\n        super().__init__()\n        self.r = nn.LSTM(2, 2, **kw)\n"
        "class Dyn(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.x = getattr(nn, 'Dropout')(0.5)\n"
    )
    assert free(body) == set()


def test_builders_and_classes_of_the_file_are_followed_and_the_answer_is_recorded():
    body = (
        "def conv3x3(c):\n    return nn.Conv2d(c, c, 3, padding=1)\n"
        "def dropper(c):\n    return nn.Sequential(nn.Conv2d(c, c, 1), nn.Dropout2d(0.1))\n"
        "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = conv3x3(3)\n"
        "class Net(Block):\n    def __init__(self):\n        super().__init__()\n        self.b = nn.ModuleList([Block() for _ in range(2)])\n"
        "class Cycle(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = Cycle()\n"
        "class Noisy(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = dropper(3)\n"
    )
    text = HEADER + body
    model = FileModel(ast.parse(text), text)
    assert model.mode_free_classes() == {"Block", "Net"}
    assert model.answers["mode_free_classes"] == {"Block", "Net"}


def test_a_large_text_read_in_chunks_answers_as_the_whole_tree(monkeypatch):
    from torchlint import parsing

    filler = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(80))
    text = (HEADER + "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(2, 2)\n" + filler
            + "class Net(Block):\n    def __init__(self):\n        super().__init__()\n        self.b = Block()\n")
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.mode_free_classes() == whole.mode_free_classes() == {"Block", "Net"}
