"""The project model: phase-1 summaries from `ast`, the index, and findings across files that
follow edits of the other file through the results cache."""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap

import pytest

from torchlint import cache as cache_mod
from torchlint.cli import main
from torchlint.project import FileFacts, ProjectIndex, module_name, summarize

METRICS = '''\
def accuracy(logits, y):
    return (logits.argmax(1) == y).float().mean().item()
'''
TRAIN_EVERY_STEP = '''\
from metrics import accuracy

def train(model, opt, loader):
    for x, y in loader:
        out = model(x.cuda())
        out.sum().backward()
        opt.step()
        acc = accuracy(out, y)
'''
TRAIN_ONCE = '''\
from metrics import accuracy

def train(model, opt, loader):
    for x, y in loader:
        out = model(x.cuda())
        out.sum().backward()
        opt.step()
    return accuracy(out, y)
'''


def _summary(path, text):
    return summarize(ast.parse(textwrap.dedent(text)), str(path))


def test_module_names_follow_packages(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    assert module_name(str(tmp_path / "pkg" / "sub" / "m.py")) == ("pkg.sub.m", False)
    assert module_name(str(tmp_path / "pkg" / "sub" / "__init__.py")) == ("pkg.sub", True)
    assert module_name(str(tmp_path / "script.py")) == ("script", False)


def test_relative_imports_and_per_step_propagation_across_files(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    helpers = tmp_path / "pkg" / "helpers.py"
    train = tmp_path / "pkg" / "train.py"
    summaries = {
        str(helpers): _summary(helpers, "def outer(x):\n    return inner(x)\ndef inner(x):\n    return x.item()\n"
                                        "def once(x):\n    return x.item()\n"),
        str(train): _summary(train, "from .helpers import outer, once\n"
                                    "def fit(loader, opt):\n    for b in loader:\n        b.backward()\n"
                                    "        opt.step()\n        outer(b)\n    once(b)\n"),
    }
    facts = ProjectIndex(summaries).facts_for(str(helpers))
    assert set(facts.per_step) == {"outer", "inner"}
    assert facts.runs_every_step("inner") == "called every step from train.py:6"
    assert facts.runs_every_step("once") is None
    assert ProjectIndex(summaries).facts_for(str(train)).digest == ""


def test_calls_under_a_logging_guard_do_not_make_a_function_per_step(tmp_path):
    path = tmp_path / "t.py"
    summary = _summary(path, "def log(x):\n    x.item()\ndef fit(loader, opt):\n    for i, b in enumerate(loader):\n"
                             "        b.backward()\n        opt.step()\n        if i % 10 == 0:\n            log(b)\n")
    assert ProjectIndex({str(path): summary}).facts_for(str(path)).per_step == {}


def test_hooks_and_methods_through_self(tmp_path):
    path = tmp_path / "m.py"
    summary = _summary(path, "class M(Base):\n    def training_step(self, b):\n        return self.helper(b)\n"
                             "    def helper(self, b):\n        return b\n    def validation_step(self, b):\n        pass\n")
    per_step = ProjectIndex({str(path): summary}).facts_for(str(path)).per_step
    assert per_step["M.training_step"][0] == per_step["M.helper"][0] == "train"
    assert per_step["M.validation_step"][0] == "eval"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(cache_mod.ENV_VAR, raising=False)
    (tmp_path / ".git").mkdir()
    return tmp_path


def _findings(capsys):
    main(["--output-format", "json", "--exit-zero", "--select", "TL201", "."])
    return [(os.path.basename(d["filename"]), d["code"], d["location"]["row"]) for d in json.loads(capsys.readouterr().out)]


def test_editing_only_train_py_moves_the_finding_in_metrics_py(project, capsys):
    """The finding in metrics.py depends on train.py: the cache must follow that."""
    (project / "metrics.py").write_text(METRICS)
    (project / "train.py").write_text(TRAIN_EVERY_STEP)
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]  # warm
    (project / "train.py").write_text(TRAIN_ONCE)
    os.utime(project / "train.py", ns=(1, 1))
    assert _findings(capsys) == []
    (project / "train.py").write_text(TRAIN_EVERY_STEP)
    os.utime(project / "train.py", ns=(2, 2))
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]


def test_an_unchanged_tree_reuses_the_project_facts_and_a_change_rebuilds_them(project, capsys, monkeypatch):
    """With mtimes old enough to trust, a warm run skips phases 1 and 2 (the stored facts
    stand); a change to train.py alone still moves metrics.py's finding."""
    from torchlint import project as project_mod
    from torchlint import runner

    old = 1_600_000_000_000_000_000
    for name, text in (("metrics.py", METRICS), ("train.py", TRAIN_EVERY_STEP)):
        (project / name).write_text(text)
        os.utime(project / name, ns=(old, old))
    built = []
    real_index = project_mod.ProjectIndex

    def counting_index(summaries):
        if sys._getframe(1).f_code.co_name != "_own_facts":  # the project's, not phase 1's over one file
            built.append(len(summaries))
        return real_index(summaries)

    monkeypatch.setattr(project_mod, "ProjectIndex", counting_index)
    first = []
    real_first = runner._first_pass
    monkeypatch.setattr(runner, "_first_pass", lambda path, settings: first.append(path) or real_first(path, settings))
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]
    assert built == [2] and len(first) == 2
    assert list((project / ".torchlint_cache").rglob("*.project.json"))
    built.clear(), first.clear()
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]  # warm: the stored facts
    assert built == [] and first == []
    (project / "train.py").write_text(TRAIN_ONCE)
    os.utime(project / "train.py", ns=(old + 1, old + 1))
    assert _findings(capsys) == []
    assert built == [2] and [os.path.basename(p) for p in first] == ["train.py"]  # metrics.py's summary is cached
    built.clear(), first.clear()
    assert _findings(capsys) == []
    assert built == [] and first == []
    (project / "new.py").write_text("x = 1\n")  # another file: the stored facts no longer cover the tree
    os.utime(project / "new.py", ns=(old, old))
    assert _findings(capsys) == []
    assert built == [3]


def test_a_damaged_project_file_is_ignored(project, capsys):
    old = 1_600_000_000_000_000_000
    for name, text in (("metrics.py", METRICS), ("train.py", TRAIN_EVERY_STEP)):
        (project / name).write_text(text)
        os.utime(project / name, ns=(old, old))
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]
    (stored,) = (project / ".torchlint_cache").rglob("*.project.json")
    header, body = stored.read_text().split("\n", 1)  # a checksum line, then the JSON
    data = json.loads(body)
    data["facts"] = {key: [1, 2, 3] for key in data["facts"]}
    stored.write_text(header + "\n" + json.dumps(data))
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]
    stored.write_text("{not json")
    assert _findings(capsys) == [("metrics.py", "TL201", 2)]


def test_a_single_buffer_is_its_own_project():
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    text = METRICS + "\n" + TRAIN_EVERY_STEP.replace("from metrics import accuracy\n", "")
    found = [(d.code, d.location.row) for d in lint_source(text, "train.py", Settings(select=("TL201",)))]
    assert found == [("TL201", 2)]


def test_an_epoch_loop_around_the_batch_loop_is_not_a_training_loop(tmp_path):
    """`display(...)` once an epoch is not per step (notebook false positive)."""
    path = tmp_path / "t.py"
    summary = _summary(path, "def display(x):\n    x.cpu()\ndef fit(loader, opt):\n    for epoch in range(3):\n"
                             "        for b in loader:\n            b.backward()\n            opt.step()\n"
                             "        display(b)\n")
    assert ProjectIndex({str(path): summary}).facts_for(str(path)).per_step == {}


@pytest.mark.parametrize(
    "trainer, moved",
    [('L.Trainer(accelerator="gpu", devices=2)', True), ("pl.Trainer(gpus=1, max_epochs=3)", True),
     ('L.Trainer(accelerator="cpu")', False), ("L.Trainer(max_epochs=3)", False)],
)
def test_lightning_loader_hooks_are_moved_only_when_the_trainer_is_on_gpu(tmp_path, trainer, moved):
    data = tmp_path / "data.py"
    train = tmp_path / "train.py"
    data_text = ("from torch.utils.data import DataLoader\nclass D(LightningDataModule):\n"
                 "    def train_dataloader(self):\n        return DataLoader(self.ds)\n")
    train_text = f"def main(m, d):\n    {trainer}.fit(m, datamodule=d)\n"
    summaries = {str(data): summarize(ast.parse(data_text), str(data), data_text),
                 str(train): summarize(ast.parse(train_text), str(train), train_text)}
    facts = ProjectIndex(summaries).facts_for(str(data))
    assert ("D.train_dataloader" in facts.moved_loaders) is moved


def test_calls_are_read_off_the_text_of_each_function(tmp_path):
    """The cheap summary (no gradient step in the file) takes the calls from each function's
    text: spacing before `(` as Python allows, dotted names through imports, not a name glued to
    a word before it, not calls under a periodic guard."""
    text = textwrap.dedent("""\
        import helpers
        import tools

        def first(x):
            helpers.run (x)
            tools.prep\t(x)
            x.total(1)
            second(x);third(x)
            s = "9fourth(x)"
            if step % 100 == 0:
                fifth(x)
            return _sixth(x)

        def second(x): pass
        def third(x): pass
        def fourth(x): pass
        def fifth(x): pass
        def _sixth(x): pass
        """)
    summary = summarize(ast.parse(text), str(tmp_path / "m.py"), text)
    assert sorted(summary["functions"]["first"]["calls"]) == ["@helpers.run", "@tools.prep", "_sixth", "second", "third"]


@pytest.mark.parametrize("class_parts", [False, True])
def test_an_editors_summary_reuses_unchanged_functions_and_equals_a_fresh_one(class_parts, monkeypatch):
    """``summarize(..., reuse)`` on an editor's trees (``IncrementalAst`` keeps unchanged
    statements as the same objects): the same summary as a fresh one after every edit, records
    of unchanged functions replayed (a property setter still replaces its getter's record), and
    records of functions edited away dropped. ``class_parts``: every class's body is parsed again
    a statement at a time (the class node is a copy; its methods' records are replayed)."""
    import random
    import re
    from pathlib import Path

    from torchlint import parsing
    from torchlint.parsing import IncrementalAst

    if class_parts:
        monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)

    root = Path(__file__).resolve().parent.parent
    setter = textwrap.dedent("""\
        import torch


        class Box:
            @property
            def size(self):
                return helper(1)

            @size.setter
            def size(self, value):
                self.value = value


        def helper(n):
            return n


        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                helper(loss)
    """)
    rng = random.Random(7)
    sources = [("fixture.py", setter)] + [(p.name, p.read_text(encoding="utf-8"))
                                           for p in sorted((root / "fixtures").glob("*.py"))[:12]]
    replayed = 0
    for name, text in sources:
        parser, reuse = IncrementalAst(), {}
        words = list(re.finditer(r"\b[A-Za-z_]\w*\b", text))
        for step in range(25):
            edited = text
            if step and words:
                m = rng.choice(words)
                edited = text[:m.start()] + m.group() + rng.choice(["x", "loader", "step"]) + text[m.end():]
            try:
                tree = parser.parse(edited, name)
            except SyntaxError:
                continue
            before = len(reuse)
            got = summarize(tree, name, edited, reuse)
            assert json.dumps(got, sort_keys=True) == json.dumps(summarize(ast.parse(edited), name, edited), sort_keys=True)
            replayed += bool(before)
            live = {id(n) for n in ast.walk(tree)}
            assert all(key[0] in live for key in reuse)  # nothing kept of a function edited away
    assert replayed > 100
    box = summarize(ast.parse(setter), "fixture.py", setter, {})
    assert box["functions"]["Box.size"]["calls"] == []  # the setter's record, as without reuse


def test_a_file_phase_1_lints_is_linted_again_when_the_index_has_facts_about_it(project, capsys, monkeypatch):
    """Phase 1 lints a file the prefilters keep without project facts (``runner._first_pass``);
    when the index then has facts about it, those findings are dropped and it is linted with them:
    a finding only the facts give appears, one that needs none stays, nothing is reported twice."""
    from torchlint import runner

    (project / "metrics.py").write_text(METRICS + "\n\ndef zeros():\n    import torch\n    return torch.zeros(3).cuda()\n")
    (project / "train.py").write_text(TRAIN_EVERY_STEP)
    phase3 = []
    real_lint = runner._lint_for_cache
    monkeypatch.setattr(runner, "_lint_for_cache", lambda path, *rest: phase3.append(os.path.basename(path)) or real_lint(path, *rest))
    main(["--output-format", "json", "--exit-zero", "--no-cache", "--select", "TL201,TL202", "."])
    found = [(os.path.basename(d["filename"]), d["code"], d["location"]["row"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [("metrics.py", "TL201", 2), ("metrics.py", "TL202", 7)]
    # metrics.py linted again with the facts train.py's loop gives it; train.py, linted in phase 1
    # with the facts its own loop gives it (``runner._own_facts``), gets just those from the index
    assert phase3 == ["metrics.py"]
    (project / "train.py").write_text(TRAIN_ONCE)
    phase3.clear()
    main(["--output-format", "json", "--exit-zero", "--no-cache", "--select", "TL201,TL202", "."])
    found = [(os.path.basename(d["filename"]), d["code"], d["location"]["row"]) for d in json.loads(capsys.readouterr().out)]
    assert found == [("metrics.py", "TL202", 7)] and phase3 == []  # phase 1's findings stand


def test_a_file_linted_with_its_own_facts_is_linted_again_when_other_files_add_some(project, capsys, monkeypatch):
    """``runner._own_facts``: a training script whose own loop runs its ``log`` helper every step
    is linted in phase 1 with that fact; when another file's loop also runs its ``evaluate``
    every step, the index's facts differ and phase 3 lints it again: both findings, once each,
    as a run that lints every file after the index (``--jobs 1`` with the phase-1 lint off)."""
    from torchlint import runner

    script = ("import torch\n\ndef log(loss):\n    print(loss.item())\n\ndef evaluate(out):\n"
              "    return out.sum().item()\n\ndef train(model, opt, loader):\n    for x in loader:\n"
              "        loss = model(x.cuda()).sum()\n        loss.backward()\n        opt.step()\n        log(loss)\n")
    other = ("from script import evaluate\n\ndef fit(model, opt, loader):\n    for x in loader:\n"
             "        out = model(x.cuda())\n        out.sum().backward()\n        opt.step()\n        evaluate(out)\n")
    (project / "script.py").write_text(script)
    (project / "fit.py").write_text(other)
    phase3 = []
    real_lint = runner._lint_for_cache
    monkeypatch.setattr(runner, "_lint_for_cache", lambda path, *rest: phase3.append(os.path.basename(path)) or real_lint(path, *rest))
    args = ["--output-format", "json", "--exit-zero", "--no-cache", "--select", "TL201", "."]
    main(args)
    found = sorted((os.path.basename(d["filename"]), d["code"], d["location"]["row"]) for d in json.loads(capsys.readouterr().out))
    assert found == [("script.py", "TL201", 4), ("script.py", "TL201", 7)]
    assert phase3 == ["script.py"]
    phase3.clear()
    # facts the index never gives: every phase-1 lint is discarded, every file linted in phase 3
    never = FileFacts(subclasses={"never": "given"})
    monkeypatch.setattr(runner, "_own_facts", lambda path, summary: never)
    main(args)
    assert sorted((os.path.basename(d["filename"]), d["code"], d["location"]["row"])
                  for d in json.loads(capsys.readouterr().out)) == found
    assert sorted(phase3) == ["fit.py", "script.py"]
