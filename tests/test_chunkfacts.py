"""A large file read in chunks (phase 3 of a run, ``FileModel.of_text``) has the whole file's
model (issue 28): the loader facts whose chunk answers do not merge (``chunkfacts.py``) equal
the whole tree's, when what decides them is in another chunk. TL203 reads them: its findings on
such a file are those of a whole lint."""

from __future__ import annotations

import ast
import textwrap

import pytest

from torchlint import parsing
from torchlint.model import FileModel

PAD = "".join(f"\n\ndef pad_{{k}}_{i}(x):\n    return x + {i}\n" for i in range(40))


def _chunked_text(*parts: str) -> str:
    """``parts`` with filler functions between them: each part in a chunk of its own."""
    out = []
    for k, part in enumerate(parts):
        out.append(textwrap.dedent(part))
        out.append(PAD.replace("{k}", str(k)))
    return "".join(out)


def _models(monkeypatch, text):
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    chunks = list(parsing.ast_chunks(text) or ())
    assert len(chunks) >= len(text) // 2_000  # really in chunks
    return whole, chunked


HEAD = """\
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cuda")
    train_dataloader = DataLoader(range(8), pin_memory=True)
"""


def test_a_local_rebinding_in_another_chunk_is_not_the_pinned_loader(monkeypatch):
    """``train_dataloader = make_loader()`` in a function far from the module's pinned loader of
    that name: the function's own binding, of unknown settings (found by
    test_large_file_in_phase_3_never_parses_the_whole_cpython_tree once TL203 ran by default)."""
    text = _chunked_text(HEAD, """\


        def from_factory(model, make_loader):
            train_dataloader = make_loader()
            for batch in train_dataloader:
                model(batch.to(device))
    """)
    whole, chunked = _models(monkeypatch, text)
    scope = (("d", "from_factory"),)
    assert whole.pinned_loader(scope, "train_dataloader") is None
    assert chunked.pinned_loaders() == whole.pinned_loaders()
    assert chunked.pinned_loader(scope, "train_dataloader") is None


def test_batches_drawn_through_facts_of_other_chunks(monkeypatch):
    """A generator defined in one chunk and drawn from in another; a function every call of which
    (in two other chunks) hands it a loader; one whose second call, in a later chunk, does not;
    a loop at the module's level over a loader bound in the first chunk."""
    text = _chunked_text(HEAD, """\


        def cycle(dl):
            while True:
                for b in dl:
                    yield b
    """, """\


        def stream(model):
            it = cycle(train_dataloader)
            x = next(it)
            return model(x.to(device))


        def evaluate(model, data):
            for x in data:
                model(x.to(device))


        def sometimes(model, data):
            for x in data:
                model(x.to(device))


        evaluate(None, train_dataloader)
        sometimes(None, train_dataloader)
    """, """\


        evaluate(None, train_dataloader)
        sometimes(None, [torch.zeros(3)])

        for images in train_dataloader:
            out = images.to(device)
    """)
    whole, chunked = _models(monkeypatch, text)
    assert whole.batch_names((("d", "stream"),)) == {"x"}
    assert whole.batch_names((("d", "evaluate"),)) == {"x"}
    assert whole.batch_names((("d", "sometimes"),)) == frozenset()
    assert "images" in whole.batch_names(())
    assert chunked.batches() == whole.batches()
    for scope in [(), (("d", "stream"),), (("d", "evaluate"),), (("d", "sometimes"),)]:
        assert chunked.batch_loaders(scope) == whole.batch_loaders(scope)
    assert chunked.digest() == whole.digest()


def test_loader_classes_from_bases_and_imports_in_other_chunks(monkeypatch):
    """A subclass of the file's own DataLoader subclass, and of a library's loader imported at
    the top, each in a later chunk than what it derives from."""
    text = _chunked_text(HEAD + "    from monai.data import DataLoader as MonaiLoader\n", """\


        class BaseDataLoader(DataLoader):
            pass
    """, """\


        class AudioDataLoader(BaseDataLoader):
            pass


        class ImageDataLoader(MonaiLoader):
            pass


        def fit(model, ds):
            dl = AudioDataLoader(ds, pin_memory=True)
            for x in dl:
                model(x.to(device))
    """)
    whole, chunked = _models(monkeypatch, text)
    assert whole.loader_classes() == {"MonaiLoader", "BaseDataLoader", "AudioDataLoader", "ImageDataLoader"}
    assert chunked.loader_classes() == whole.loader_classes()
    assert chunked.pinned_loaders() == whole.pinned_loaders()
    assert chunked.batch_loaders((("d", "fit"),)) == whole.batch_loaders((("d", "fit"),)) == {"x": {"dl"}}


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_tl203_on_a_file_in_chunks_is_a_whole_lint(monkeypatch, line_end):
    """The engine in phase 3 (a large file: libcst in chunks, the model of the text): the same
    TL203 findings as a whole lint, never one CPython parse of the whole text."""
    import torchlint.engine as engine
    from torchlint.config import Settings
    from torchlint.project import EMPTY_FACTS

    text = _chunked_text(HEAD, """\


        def from_factory(model, make_loader):
            train_dataloader = make_loader()
            for batch in train_dataloader:
                batch = {k: v.to(device) for k, v in batch.items()}
                model(batch)


        def epoch(model):
            for batch in train_dataloader:
                model(batch.to(device))
    """, """\


        def evaluate(model, data):
            for x in data:
                model(x.to(device))


        evaluate(None, train_dataloader)
    """, """\


        evaluate(None, train_dataloader)

        for images in train_dataloader:
            out = images.to(device)
    """).replace("\n", line_end)
    settings = Settings(select=("TL203",), preview=True)
    whole = engine.lint_source(text, "big.py", settings, project=EMPTY_FACTS)
    assert sorted(d.location.row for d in whole) == [
        i for i, line in enumerate(text.split(line_end), 1)
        if line.strip() in ("model(batch.to(device))", "model(x.to(device))", "out = images.to(device)")]
    monkeypatch.setattr(parsing, "LARGE_FILE_CHARS", 1_000)
    monkeypatch.setattr(parsing, "MIN_INCREMENTAL_CHARS", 1_000)  # a small text in pieces too
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    real, sizes = ast.parse, []
    # a chunk is parsed after as many empty lines as come before it: its own text is what counts
    monkeypatch.setattr(parsing.ast, "parse", lambda t, *a, **k: sizes.append(len(t.lstrip("\n"))) or real(t, *a, **k))
    chunked = engine.lint_source(text, "big.py", settings, project=EMPTY_FACTS, ast_codes={"TL203"})
    assert [(d.code, d.location) for d in chunked] == [(d.code, d.location) for d in whole]
    assert sizes and max(sizes) < len(text) / 4
