"""The whole-file model's loader and batch facts (``FileModel.loader_classes``, ``batch_names``,
``batch_loaders``; ``torchlint/loaderfacts.py``): issue 29's classes 1 (batches, in every way
real code draws them) and 2 (loaders, wherever they come from)."""

from __future__ import annotations

import ast
import textwrap

from torchlint import parsing
from torchlint.model import FileModel


def _model(text: str) -> FileModel:
    text = textwrap.dedent(text)
    return FileModel(ast.parse(text), text)


def test_loader_classes_are_library_loaders_and_the_files_own_subclasses():
    model = _model("""\
        import torch.utils.data as tud
        from monai.data import DataLoader as MonaiLoader
        from torch.utils.data import Dataset

        class AudioDataLoader(tud.DataLoader):
            pass

        class BucketLoader(AudioDataLoader):
            pass

        class AudioDataset(Dataset):  # a dataset, not a loader
            pass

        train = AudioDataLoader(ds, num_workers=4)
        val = MonaiLoader(ds, num_workers=4)
        other = AudioDataset()
    """)
    assert model.loader_classes() == {"MonaiLoader", "AudioDataLoader", "BucketLoader"}
    assert model.loader_names() == {"train", "val"}
    assert "loader_classes" in model.answers


def test_a_look_alike_named_dataloader_is_not_a_loader_class():
    model = _model("""\
        from mylib import DataLoader

        class Sub(DataLoader):
            pass
    """)
    assert model.loader_classes() == frozenset()


BATCHES = """\
    import torch
    from torch.utils.data import DataLoader


    def cycle(dl):
        while True:
            for data in dl:
                yield data


    class Trainer:
        def __init__(self, ds):
            dl = DataLoader(ds, num_workers=4, pin_memory=True)
            self.dl = cycle(dl)

        def train(self, device):
            data = next(self.dl)  # a batch, drawn through the infinite generator
            moved = next(self.dl).to(device)  # a moved copy: not a batch as drawn


    def fit(model, train_loader, device):
        it = iter(train_loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                it = iter(train_loader)
                batch = next(it)
            batch = [t.to(device) for t in batch]  # `batch` now moved; `t` is a part as drawn
        first = next(iter(train_loader))
        for i, (x, y) in enumerate(train_loader):
            x = x.to(device)  # rebound to a moved copy: `x` is not a batch, `y` is
        for step, b in enumerate(train_loader):
            moved = {k: v.to(device) for k, v in b.items()}
            ids = b["input_ids"]
            images, labels = b
            both = tuple(q.to(device) for q in b)
        for epoch in range(3):  # not a loader: `epoch` is a number
            pass
"""


def test_batch_names_in_every_way_real_code_draws_batches():
    model = _model(BATCHES)
    assert model.batch_names((("d", "fit"),)) == {"t", "first", "y", "b", "v", "ids", "images", "labels", "q"}
    assert model.batch_names((("c", "Trainer"), ("d", "train"))) == {"data"}
    assert model.batch_loaders((("c", "Trainer"), ("d", "train"))) == {"data": {"dl"}}
    assert model.batch_loaders((("d", "fit"),))["t"] == {"train_loader"}
    assert any(question.startswith("batches") for question in model.answers)  # recorded


def test_one_scope_asked_alone_answers_as_the_whole_file():
    """A rule's question reads one scope (the others are not scanned); the editor's digest holds
    the whole-file answer: both agree on every scope."""
    whole = _model(BATCHES).batches()
    for scope in [(), (("d", "fit"),), (("c", "Trainer"), ("d", "train")), (("c", "Trainer"), ("d", "__init__")),
                  (("d", "cycle"),)]:
        alone = _model(BATCHES)
        assert alone.batch_names(scope) == frozenset(n for k, n, _ in whole.get(scope, ()) if k == "batch")
        assert "batches" not in alone.answers


def test_batch_names_do_not_take_look_alikes():
    model = _model("""\
        def evaluate(model, loaders, sizes, device):
            for loader in loaders:  # a collection of loaders: `loader` is one, not a batch
                pass
            for s in sizes:
                pass
            x = next(iter(sizes))  # not a loader
            item = [t.to(device) for t in sizes]
            return x

        def rebound(train_loader):
            for batch in train_loader:
                pass
            batch = make_batch()  # another binding: not known to be a batch
    """)
    assert model.batch_names((("d", "evaluate"),)) == frozenset()
    assert model.batch_names((("d", "rebound"),)) == frozenset()


def test_the_digest_follows_the_batches():
    base = _model(BATCHES).digest()
    assert _model(BATCHES.replace("# not a loader", "# a loop")).digest() == base
    assert _model(BATCHES.replace("first = next(iter(train_loader))", "first = next(iter(sizes))")).digest() != base


def test_a_large_text_gives_the_same_batches_in_functions(monkeypatch):
    filler = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(60))
    text = textwrap.dedent(BATCHES) + filler + "\n\ndef late(val_loader):\n    for v in val_loader:\n        pass\n"
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.batch_names((("d", "fit"),)) == whole.batch_names((("d", "fit"),))
    assert chunked.batch_names((("d", "late"),)) == {"v"}


def test_loader_locals_are_wrappers_and_parameters_every_caller_gives_a_loader():
    model = _model("""\
        from tqdm import tqdm

        def evaluate(model, data):
            for x, y in data:
                pass

        def score(model, data):
            for x in data:
                pass

        def validate(model, val_loader):
            bar = tqdm(val_loader)
            it = iter(val_loader)
            rows = tqdm(range(3))  # not a loader
            for x in bar:
                pass

        def main(model, val_loader, inputs):
            evaluate(model, val_loader)
            evaluate(model, data=val_loader)
            score(model, val_loader)
            score(model, inputs)  # another call gives something else: not known
    """)
    assert model.loader_locals((("d", "evaluate"),)) == {"data"}
    assert model.loader_locals((("d", "score"),)) == frozenset()
    assert model.loader_locals((("d", "validate"),)) == {"bar", "it"}
    assert model.batch_names((("d", "evaluate"),)) == {"x", "y"}
    assert model.batch_names((("d", "validate"),)) == {"x"}


def test_an_attribute_iterator_bound_again_in_another_method_is_not_a_batch_source():
    # `self.it = iter(loader)` in one method, `next(self.it)` in another: a batch; unless a
    # third method binds `self.it` to something else (that method's lines spell no `iter(`:
    # it is read because it spells the attribute)
    text = """\
        class Drawn:
            def start(self):
                self.it = iter(self.train_loader)

            def step(self):
                batch = next(self.it)
                return batch

        class Reset:
            def start(self):
                self.it = iter(self.train_loader)

            def stop(self):
                self.it = None

            def step(self):
                batch = next(self.it)
                return batch
    """
    model = _model(text)
    assert model.batch_names((("c", "Drawn"), ("d", "step"))) == {"batch"}
    assert model.batch_names((("c", "Reset"), ("d", "step"))) == frozenset()
