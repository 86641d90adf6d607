"""Kinds of values as whole-file model facts (issue 29 class 4, ``torchlint/kinds.py``): the
functions of a file that return NumPy arrays. A rule reads them from the model's recorded answers,
so a whole lint, a batch lint that cut the function out, and the editor after an edit of the
function agree."""

from __future__ import annotations

import ast
import textwrap

import torchlint.engine as engine
from torchlint import editor_memo
from torchlint.config import Settings
from torchlint.model import FileModel

FILLER = "".join(f"\n\ndef _filler_{i}(x):\n" + "    x += 1\n" * 10 + "    return x\n" for i in range(10))

LOADER = textwrap.dedent("""\
    import numpy as onp
    import torch
    from numpy import (concatenate,
                       load as L)


    def load_clip(path):
        clip = onp.load(path)
        return clip.astype(onp.float32)


    def joined(parts):
        if not parts:
            return onp.zeros(3, dtype="float64")
        return concatenate(parts)


    def not_always(path):
        if path:
            return L(path)
        return [0.0]


    class Clips:
        def frames(self, i):
            return onp.random.rand(3, 4)

        def __getitem__(self, i):
            return torch.FloatTensor(load_clip(self.paths[i])), torch.tensor(self.frames(i))
""")


def test_numpy_functions_names_each_function_with_its_dtype():
    model = FileModel(ast.parse(LOADER), LOADER)
    assert model.numpy_functions() == {
        ((("d", "load_clip"),), "float32"),
        ((("d", "joined"),), ""),
        ((("c", "Clips"), ("d", "frames")), ""),
    }
    assert model.numpy_function_dtype((("d", "load_clip"),)) == "float32"
    assert model.numpy_function_dtype((("d", "not_always"),)) is None
    assert "numpy_functions" in model.answers


def test_chunked_and_whole_models_agree(monkeypatch):
    from torchlint import parsing

    filler = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(60))
    head, rest = LOADER.split("\n\n\n", 1)
    text = head + "\n" + filler + "\n\n" + rest  # the imports far from the functions
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.numpy_functions() == whole.numpy_functions() and whole.numpy_functions()
    assert chunked.digest() == whole.digest()


def _three_ways(monkeypatch, text: str, settings: Settings):
    with monkeypatch.context() as m:
        m.setattr(engine, "plan_statements", lambda *a, **k: None)
        whole = [d.to_json() for d in engine.lint_source(text, "m.py", settings)]
    batch = [d.to_json() for d in engine.lint_source(text, "m.py", settings)]
    editor_memo.clear()
    editor = [d.to_json() for d in engine.lint_source(text, "m.py", settings, incremental=True)]
    return whole, batch, editor


def test_tl205_through_a_function_of_the_file_is_the_same_three_ways(monkeypatch):
    settings = Settings(select=("TL205",), preview=True)
    text = LOADER + FILLER
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL205", 29), ("TL205", 29)]
    assert batch == whole == editor
    editor_memo.clear()


def test_the_editor_drops_the_finding_when_the_function_stops_returning_an_array():
    """``__getitem__``'s text does not change; ``load_clip`` starts returning a list: the kept
    finding must go, as a fresh lint says."""
    editor_memo.clear()
    settings = Settings(select=("TL205",), preview=True)
    text = LOADER + FILLER
    first = engine.lint_source(text, "m.py", settings, incremental=True)
    assert len(first) == 2
    edited = text.replace("return clip.astype(onp.float32)", "return clip.tolist()")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    fresh = engine.lint_source(edited, "m.py", settings)
    assert [d.to_json() for d in after] == [d.to_json() for d in fresh]
    assert len(after) == 1
    editor_memo.clear()


MASKCONV = textwrap.dedent("""\
    import torch.nn as nn


    class MaskConv(nn.Module):
        def __init__(self, seq_module):
            super().__init__()
            self.seq_module = seq_module

        def forward(self, x):
            for i, module in enumerate(self.seq_module):
                x = module(x) * 0.5
            return x


    class Calls(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            for _ in range(3):
                x = self.body(x)
            return x
""")

MODEL = textwrap.dedent("""\


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = MaskConv(nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8)))
            self.b = Calls(nn.Sequential(nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8)))
""")


def test_layer_iterating_classes():
    model = FileModel(ast.parse(MASKCONV), MASKCONV)
    assert model.layer_iterating_classes() == {"MaskConv"}
    assert "layer_iterating_classes" in model.answers


def test_tl301_is_silent_inside_a_layer_iterating_wrapper_three_ways(monkeypatch):
    settings = Settings(select=("TL301",))
    text = MASKCONV + FILLER + MODEL
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [d["location"]["row"] for d in whole] == [text.count("\n", 0, text.index("self.b = ")) + 1]
    assert batch == whole == editor
    editor_memo.clear()


PINNED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    from transformers import default_data_collator as collate

    pin = torch.cuda.is_available()
    device = torch.device("cuda")
    loader = None


    def setup(ds, custom):
        global loader
        loader = DataLoader(ds, batch_size=8, collate_fn=collate, pin_memory=True)
        other = DataLoader(ds, pin_memory=pin, collate_fn=custom)
        both = DataLoader(ds, pin_memory=True)
        both = DataLoader(ds)
        return other, both


    def step(model):
        batch = next(iter(loader))
        batch = {k: v.to(device) for k, v in batch.items()}
        return model(**batch)
""")


def test_pinned_loaders_settings():
    model = FileModel(ast.parse(PINNED), PINNED)
    assert model.pinned_loader((("d", "step"),), "loader") == "default"  # `global loader` in setup
    assert model.pinned_loader((("d", "setup"),), "other") == "elements"
    assert model.pinned_loader((("d", "setup"),), "both") is None  # one of its two calls does not pin
    assert model.pinned_loader((("d", "step"),), "other") is None  # setup's local
    assert "pinned_loaders" in model.answers


def test_tl203_on_a_batch_drawn_with_next_is_the_same_three_ways(monkeypatch):
    settings = Settings(select=("TL203",), preview=True)
    text = PINNED + FILLER
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL203", 21)]
    assert batch == whole == editor
    editor_memo.clear()


def test_the_editor_drops_tl203_when_the_loader_stops_pinning():
    """``step``'s text does not change; ``setup`` stops pinning: the kept finding must go."""
    editor_memo.clear()
    settings = Settings(select=("TL203",), preview=True)
    text = PINNED + FILLER
    assert len(engine.lint_source(text, "m.py", settings, incremental=True)) == 1
    edited = text.replace("collate_fn=collate, pin_memory=True", "collate_fn=collate, pin_memory=False")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", settings)] == []
    editor_memo.clear()


VGG = textwrap.dedent("""\
    import torch.nn as nn


    def make_layers(cfg, batch_norm=False):
        layers = []
        for v in cfg:
            conv2d = nn.Conv2d(3, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
        return nn.Sequential(*layers)


    def block(c, normalize=True):
        layers = [nn.Conv2d(c, c, 3)]
        if normalize:
            layers.append(nn.BatchNorm2d(c))
        return layers
""")

VGG_CALLS = textwrap.dedent("""\


    def vgg11_bn():
        return make_layers([64], batch_norm=True)


    HEAD = nn.Sequential(*block(8, normalize=False), *block(8))
""")


def test_layer_list_functions_and_literal_flags():
    text = VGG + VGG_CALLS
    model = FileModel(ast.parse(text), text)
    assert model.layer_list_functions() == {"block"}
    assert model.literal_flags() == {("make_layers", "batch_norm", True), ("block", "normalize", False),
                                     ("ReLU", "inplace", True)}


def test_tl301_under_a_flag_true_in_another_function_is_the_same_three_ways(monkeypatch):
    settings = Settings(select=("TL301",))
    text = VGG + FILLER + VGG_CALLS
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL301", 7), ("TL301", 16)]
    assert batch == whole == editor
    editor_memo.clear()


def test_the_editor_drops_tl301_when_no_call_turns_the_flag_on():
    editor_memo.clear()
    settings = Settings(select=("TL301",))
    text = VGG + FILLER + VGG_CALLS
    assert len(engine.lint_source(text, "m.py", settings, incremental=True)) == 2
    edited = text.replace("batch_norm=True)", "batch_norm=False)")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", settings)]
    assert [d.location.row for d in after] == [16]
    editor_memo.clear()


HANDED = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cuda")


    def run_epoch(model, data_loader):
        for x, y in data_loader:
            x = x.to(device)
            model(x, y)


    def evaluate(model, data_loader):
        for x, y in data_loader:
            model(x.to(device), y)
""")

HANDED_MAIN = textwrap.dedent("""\


    def main(model, ds):
        train_loader = DataLoader(ds, pin_memory=True)
        test_loader = DataLoader(ds)
        run_epoch(model, train_loader)
        evaluate(model, data_loader=train_loader)
        evaluate(model, test_loader)
""")


def test_pinned_parameters():
    text = HANDED + HANDED_MAIN
    model = FileModel(ast.parse(text), text)
    assert model.pinned_parameters() == {("run_epoch", "data_loader")}


def test_tl203_on_a_pinned_loader_handed_in_is_the_same_three_ways(monkeypatch):
    settings = Settings(select=("TL203",), preview=True)
    text = HANDED + FILLER + HANDED_MAIN
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL203", 9)]
    assert batch == whole == editor
    edited = text.replace("test_loader = DataLoader(ds)", "test_loader = DataLoader(ds, pin_memory=True)")
    editor_memo.clear()
    engine.lint_source(text, "m.py", settings, incremental=True)
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", settings)]
    assert [d.location.row for d in after] == [9, 15]
    editor_memo.clear()


def test_pinned_parameters_agree_chunked_and_whole(monkeypatch):
    """The definition, a pinned call and an unpinned call of ``evaluate`` in three chunks: the
    chunked model must not say more than the whole one."""
    from torchlint import parsing

    filler = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(60))
    text = HANDED + filler + HANDED_MAIN.replace("        evaluate(model, test_loader)\n", "") + filler + (
        "\n\ndef later(model, ds):\n    test_loader = DataLoader(ds)\n    evaluate(model, test_loader)\n")
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.pinned_parameters() == whole.pinned_parameters() == {("run_epoch", "data_loader")}
    for question in ("pinned_loaders", "pinned_callees", "pinned_handoffs"):
        assert chunked.answers[question] == whole.answers[question]
