"""The whole-file model (``torchlint/model.py``): what a rule knows beyond the code it walks
comes from CPython's tree of the whole text, so a whole lint, a batch lint from a partial parse
and the editor path after an edit give the same findings. The cases are those of the issue "One
model, sound by construction"; each differed before the model."""

from __future__ import annotations

import ast
import textwrap

import pytest

import torchlint.engine as engine
import torchlint.partial as partial
from torchlint import editor_memo
from torchlint.config import Settings
from torchlint.model import FileModel

# definitions without a candidate site: a batch lint cuts them out (partial.py)
FILLER = "".join(f"\n\ndef _filler_{i}(x):\n" + "    x += 1\n" * 10 + "    return x\n" for i in range(10))


def _found(diagnostics):
    return [d.to_json() for d in diagnostics]


def _three_ways(monkeypatch, text: str, settings: Settings):
    """(whole lint, batch lint with partial parses allowed, editor path) of ``text``."""
    with monkeypatch.context() as m:
        m.setattr(engine, "plan_statements", lambda *a, **k: None)
        whole = _found(engine.lint_source(text, "m.py", settings))
    batch = _found(engine.lint_source(text, "m.py", settings))
    editor_memo.clear()
    editor = _found(engine.lint_source(text, "m.py", settings, incremental=True))
    return whole, batch, editor


TL907 = textwrap.dedent("""\
    import torch
    from torchvision import models


    def setup():
        try:
            import functorch as models
        except ImportError:
            models = None
        return models


    def build():
        model = models.resnet50(pretrained=True)
        return model
""")


@pytest.mark.parametrize("select", [None, ("TL907",)])
def test_a_function_local_compatibility_import_does_not_reach_another_function(monkeypatch, select):
    """``models`` in ``build`` is torchvision's: the ``import functorch as models`` in ``setup``
    binds a local of ``setup``. The whole lint once said nothing, the batch lint (``setup`` cut
    out) and the editor reported TL907."""
    settings = Settings(select=select) if select else Settings()
    planned = []
    real = engine.plan_statements
    monkeypatch.setattr(engine, "plan_statements", lambda *a: planned.append(real(*a)) or planned[-1])
    text = TL907 + FILLER
    whole, batch, editor = _three_ways(monkeypatch, text, settings)
    assert [(d["code"], d["location"]["row"]) for d in whole] == [("TL907", 14)]
    assert batch == whole == editor
    assert any(p is not None for p in planned)  # the batch lint did cut definitions out


GLOBAL_LOADER = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader

    dl = None


    def setup(ds):
        global dl
        dl = DataLoader(ds, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)


    def train(model):
        for x, y in dl:
            out = model(x.cuda(non_blocking=True))
            print(out.sum().item())
            torch.cuda.empty_cache()
""")


@pytest.mark.parametrize("select", [None, ("TL201",), ("TL501",)])
def test_a_loader_bound_in_another_function_makes_a_training_loop(monkeypatch, select):
    """``global dl; dl = DataLoader(ds)`` in ``setup`` makes ``for x, y in dl`` a loop over
    batches: TL201 and TL501 there. With ``--select TL501`` and definitions to cut, the batch lint
    once lost the finding (``setup`` stubbed out)."""
    settings = Settings(select=select) if select else Settings()
    whole, batch, editor = _three_ways(monkeypatch, GLOBAL_LOADER + FILLER, settings)
    expected = [c for c in ("TL201", "TL501") if select is None or c in select]
    assert [d["code"] for d in whole] == expected
    assert batch == whole == editor


def test_the_editor_sees_a_loader_edited_away_in_another_function():
    """After ``setup`` stops building the loader, ``train``'s loop is no longer over batches: the
    editor's kept TL201/TL501 findings in ``train`` (whose text did not change) must go, as a fresh
    lint says; and come back when the loader is typed in again."""
    editor_memo.clear()
    settings = Settings()
    text = GLOBAL_LOADER + FILLER
    first = engine.lint_source(text, "m.py", settings, incremental=True)
    assert [d.code for d in first] == ["TL201", "TL501"]
    edited = text.replace("dl = DataLoader(ds, batch_size=32", "dl = make(ds, batch_size=32")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert _found(after) == _found(engine.lint_source(edited, "m.py", settings)) == []
    again = engine.lint_source(text, "m.py", settings, incremental=True)
    assert _found(again) == _found(first)
    editor_memo.clear()


def test_loader_names_come_from_every_function_of_the_whole_text():
    text = textwrap.dedent("""\
        import torch.utils.data as tud
        from torch.utils.data import DataLoader as DL

        class Trainer:
            def __init__(self, ds):
                self.train_dl = DL(ds)
                self.val = tud.DataLoader(ds, batch_size=8)
                self.other = make_loader(ds)

        def setup(ds):
            global dl
            dl: DL = DL(ds)
            not_a_loader = something.DataLoaderish(ds)
    """)
    model = FileModel(ast.parse(text), text)
    assert model.loader_names() == {"self.train_dl", "self.val", "dl"}
    assert "loader_names" in model.answers


def test_the_digest_changes_with_a_fact_and_not_with_other_text():
    text = GLOBAL_LOADER
    base = FileModel(ast.parse(text), text).digest()
    renamed = text.replace("print(out.sum().item())", "print(out.mean().item())")
    assert FileModel(ast.parse(renamed), renamed).digest() == base
    no_loader = text.replace("dl = DataLoader(ds", "dl = make(ds")
    assert FileModel(ast.parse(no_loader), no_loader).digest() != base


def test_partial_parses_still_happen(monkeypatch):
    """The model lets the batch lint cut definitions a rule's facts come from: ``setup`` is left
    out of the text libcst parses for TL501 alone, and the finding is still there."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    text = GLOBAL_LOADER + FILLER
    settings = Settings(select=("TL501",))
    plan = engine.statement_plan(text, "m.py", settings, [r for r in engine.all_rules() if r.code == "TL501"])
    assert plan is not None
    cut = partial.partial_text(text, plan)
    assert "DataLoader(ds" not in cut and "def train" in cut
    assert [d.code for d in engine.lint_source(text, "m.py", settings)] == ["TL501"]


def test_a_large_text_is_read_in_chunks_with_the_same_answers(monkeypatch):
    """Phase 3 has no CPython tree at hand: a large text's model reads its chunks of top-level
    statements one at a time (never one ``ast.parse`` of the file, whose tree would sit next to
    libcst's), with names resolved through the whole file's imports, and answers as the whole
    tree's model does."""
    from torchlint import parsing

    parts = [
        "import torch\nfrom torch.utils.data import DataLoader as DL\n",
        "try:\n    import functorch as ft\nexcept ImportError:\n    ft = None\n",
        GLOBAL_LOADER.replace("DataLoader", "DL"),
        "class Server:\n    def sync(self, g):\n        for p in self.params:\n            p.grad.add_(g)\n",
    ]
    filler = "".join(f"\n\ndef pad_{i}(x):\n    return x + {i}\n" for i in range(60))
    text = parts[0] + filler + parts[1] + filler + parts[2] + filler + parts[3]
    whole = FileModel(ast.parse(text), text)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 1_000)
    real, sizes = ast.parse, []
    monkeypatch.setattr(parsing.ast, "parse", lambda t, *a, **k: sizes.append(len(t)) or real(t, *a, **k))
    chunked = FileModel.of_text(text)
    assert chunked._chunked
    assert chunked.loader_names() == whole.loader_names() == {"dl"}
    assert chunked.compat_bindings() == whole.compat_bindings() and whole.compat_bindings()
    assert chunked.grad_accumulators() == whole.grad_accumulators() == {(("c", "Server"),)}
    assert chunked.digest() == whole.digest()
    assert sizes and max(sizes) < len(text) / 4


PERIODIC = textwrap.dedent("""\
    import torch.nn.functional as F


    def divisible_by(num, den):
        return (num % den) == 0


    def train(model, optimizer, loader, every=100):
        for i, (x, y) in enumerate(loader):
            x, y = x.cuda(), y.cuda()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if divisible_by(i, every):
                print(loss.item())
""")


def test_periodic_names_of_the_whole_file():
    """Names holding a periodic test (issue 29): a predicate of the file, and variables bound only
    to periodic tests, in any order of the file; a name rebound to anything else is not one."""
    text = PERIODIC + textwrap.dedent("""\


        def loop(args, n):
            for i in range(n):
                is_metric_step = (i % args.metric_every == 0) or is_console_step
                is_console_step = (i % args.log_every == 0) or i == n - 1
                regular = divisible_by(i, 4)
                show = i % 10 == 0
                show = show or args.show_all
    """)
    model = FileModel.of_text(text)
    assert model.periodic_names_at((("d", "loop"),)) == {"divisible_by", "is_metric_step", "is_console_step", "regular"}
    assert model.periodic_names_at((("d", "train"),)) == {"divisible_by"}


def test_a_periodic_predicate_in_another_function_is_read_whole_batch_and_editor(monkeypatch):
    """``if divisible_by(i, every):`` in ``train`` is periodic because of what ``divisible_by``
    returns: all three ways agree, and the editor's kept finding state follows an edit of the
    predicate alone (its answer is in the model's digest)."""
    settings = Settings(select=("TL201",))
    whole, batch, editor = _three_ways(monkeypatch, PERIODIC + FILLER, settings)
    assert whole == batch == editor == []
    editor_memo.clear()
    text = PERIODIC + FILLER
    assert engine.lint_source(text, "m.py", settings, incremental=True) == []
    edited = text.replace("return (num % den) == 0", "return num > den")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.code for d in after] == ["TL201"]
    assert _found(after) == _found(engine.lint_source(edited, "m.py", settings))
    assert engine.lint_source(text, "m.py", settings, incremental=True) == []
    editor_memo.clear()
