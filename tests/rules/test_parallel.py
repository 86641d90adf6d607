"""TL701 data-parallel (issue 29): silent where DDP's advice does not apply: a program that never
trains (the model's ``may_train``: this file's text and, through the project index, the rest of
its program), a single-device wrapper, and a DataParallel built because a configuration already
chose it. The training fact is the model's, so a whole lint, a batch lint and the editor agree."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

import torchlint.engine as engine
from torchlint import editor_memo
from torchlint.config import Settings
from torchlint.model import FileModel
from torchlint.project import FileFacts, ProjectIndex, summarize
from torchlint.training import training_word

SETTINGS = Settings(select=("TL701",))
FILLER = "".join(f"\n\ndef _filler_{i}(x):\n" + "    x += 1\n" * 10 + "    return x\n" for i in range(10))

SCRIPT = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    def build(model):
        return nn.DataParallel(model).cuda()


    def score(model, loader, opt):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()


    if __name__ == "__main__":
        model = build(nn.Linear(2, 2))
        print(model(torch.randn(4, 2, device="cuda")))
""")
# the same script with no gradient step anywhere: an inference program
INFERENCE = SCRIPT.replace("        loss.backward()\n        opt.step()\n", "        print(loss)\n")
assert INFERENCE != SCRIPT


def lint(text: str, path: str = "script.py", settings: Settings = SETTINGS):
    return [(d.code, d.location.row) for d in engine.lint_source(text, path, settings)]


def test_a_script_that_never_trains_is_silent_and_one_that_trains_is_flagged():
    assert lint(SCRIPT) == [("TL701", 6)]
    assert lint(INFERENCE) == []


def test_a_module_is_unknown_whatever_its_own_text():
    module = INFERENCE.split('if __name__')[0]  # no code that runs: any program may import it
    assert lint(module) == [("TL701", 6)]


@pytest.mark.parametrize("words, trains", [
    ("loss.backward()", True),
    ("accelerator.backward(loss)", True),
    ("optimizer = torch.optim.SGD(params, lr=0.1)", True),
    ("scheduler.step()", True),
    ("trainer.fit(model)", True),
    ("train_one_epoch(model, loader)", True),
    ("model.train()", True),
    ("learn.fine_tune(1)", True),
    ("grads = torch.autograd.grad(out, x)", True),
    ("retrain(model)", True),
    ("model.train(False)", False),
    ("model = AutoModel.from_pretrained('x')", False),
    ("net = inception_v3(pretrained=True)", False),
    ("preds = model(x, is_train=False)", False),
    ("ctx.save_for_backward(x)", False),
    ("def backward(ctx, grad):\n    return grad", False),
    ("constrain(x)", False),
])
def test_training_words(words, trains):
    assert (training_word(words) is not None) is trains


def test_model_may_train_reads_its_own_text_then_the_project():
    model = FileModel(ast.parse(INFERENCE), INFERENCE)
    assert model.training_evidence() == frozenset()
    assert model.may_train()  # no project facts: unknown
    model.project = FileFacts(inference_program="`script.py` and what it imports never compute gradients")
    assert not model.may_train()
    trains = FileModel(ast.parse(SCRIPT), SCRIPT)
    trains.project = model.project
    assert trains.training_evidence() == frozenset({".step("}) and trains.may_train()
    assert "training_evidence" in trains.answers


def test_facts_round_trip_through_json():
    facts = FileFacts(inference_program="why")
    assert FileFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
    both = FileFacts(cpu_program="cpu", inference_program="why")
    assert FileFacts.from_json(json.loads(json.dumps(both.to_json()))) == both
    assert facts.digest and facts.digest != FileFacts(cpu_program="why").digest
    with pytest.raises(ValueError):
        FileFacts.from_json([{}, {}, {}, {}, "", 3])


def _summary(text: str, path: str) -> dict:
    return summarize(ast.parse(text), path, text)


def test_index_inference_programs_follow_imports_both_ways(tmp_path):
    infer = "import torch.nn as nn\nimport helpers\nif __name__ == '__main__':\n    m = nn.DataParallel(helpers.net())\n"
    helpers_ok = "import torch.nn as nn\ndef net():\n    return nn.Linear(2, 2)\n"
    helpers_trains = helpers_ok + "def fit(m, x):\n    m(x).sum().backward()\n"
    paths = {name: str(tmp_path / f"{name}.py") for name in ("infer", "helpers", "train")}
    index = ProjectIndex({paths["infer"]: _summary(infer, paths["infer"]),
                          paths["helpers"]: _summary(helpers_ok, paths["helpers"])})
    assert set(index.inference_programs) == {paths["infer"]}
    assert index.facts_for(paths["infer"]).inference_program
    assert not index.facts_for(paths["helpers"]).inference_program  # a module: only scripts get it
    # what it imports trains: unknown
    index = ProjectIndex({paths["infer"]: _summary(infer, paths["infer"]),
                          paths["helpers"]: _summary(helpers_trains, paths["helpers"])})
    assert index.inference_programs == {}
    # a training script imports it: part of a training program
    train = "import infer\nif __name__ == '__main__':\n    opt.step()\n"
    index = ProjectIndex({paths["infer"]: _summary(infer, paths["infer"]),
                          paths["helpers"]: _summary(helpers_ok, paths["helpers"]),
                          paths["train"]: _summary(train, paths["train"])})
    assert index.inference_programs == {}


def test_only_files_that_ask_get_the_fact(tmp_path):
    path = str(tmp_path / "plot.py")
    text = "import torch\nif __name__ == '__main__':\n    print(torch.zeros(2))\n"
    index = ProjectIndex({path: _summary(text, path)})
    assert index.inference_programs == {} and not index.facts_for(path).inference_program


def _three_ways(monkeypatch, text: str):
    with monkeypatch.context() as m:
        m.setattr(engine, "plan_statements", lambda *a, **k: None)
        whole = [d.to_json() for d in engine.lint_source(text, "m.py", SETTINGS)]
    batch = [d.to_json() for d in engine.lint_source(text, "m.py", SETTINGS)]
    editor_memo.clear()
    editor = [d.to_json() for d in engine.lint_source(text, "m.py", SETTINGS, incremental=True)]
    editor_memo.clear()
    return whole, batch, editor


@pytest.mark.parametrize("text, rows", [(SCRIPT + FILLER, [6]), (INFERENCE + FILLER, [])])
def test_whole_batch_and_editor_agree(monkeypatch, text, rows):
    whole, batch, editor = _three_ways(monkeypatch, text)
    assert [d["location"]["row"] for d in whole] == rows
    assert batch == whole == editor


def test_the_editor_follows_a_gradient_step_added_or_removed_in_another_function():
    """``build``'s text never changes; ``fit`` loses its backward and step, then gets them back:
    the kept finding goes and comes back as a fresh lint says."""
    editor_memo.clear()
    text = SCRIPT + FILLER
    assert len(engine.lint_source(text, "m.py", SETTINGS, incremental=True)) == 1
    edited = INFERENCE + FILLER
    after = engine.lint_source(edited, "m.py", SETTINGS, incremental=True)
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", SETTINGS)] == []
    again = engine.lint_source(text, "m.py", SETTINGS, incremental=True)
    assert [d.to_json() for d in again] == [d.to_json() for d in engine.lint_source(text, "m.py", SETTINGS)]
    assert len(again) == 1
    editor_memo.clear()


def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": i + 1, "outputs": [],
              "source": src.splitlines(True)} for i, src in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_a_notebook_is_one_program():
    from torchlint.notebook import lint_notebook

    load = "import torch\nimport torch.nn as nn\nmodel = nn.DataParallel(nn.Linear(2, 2)).cuda()\n"
    infer = "model.eval()\nwith torch.no_grad():\n    print(model(torch.randn(4, 2, device='cuda')))\n"
    train = "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(torch.randn(4, 2)).sum().backward()\nopt.step()\n"
    found = lambda raw: [(d.code, d.cell, d.location.row) for d in lint_notebook(raw, "nb.ipynb", SETTINGS)]
    assert found(_notebook(load, infer)) == []  # a feature-extraction notebook: no gradient anywhere
    assert found(_notebook(load, infer, train)) == [("TL701", 1, 3)]  # a later cell trains it
