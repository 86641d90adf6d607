"""Is a program on an accelerator at all? (issue 29, class 5: ``FileModel.uses_accelerator``,
``torchlint/accelerator.py``, ``ProjectIndex.cpu_programs``). Host syncs, pinned memory and
loader workers feed or wait for an accelerator; on CPU-only teaching code TL101, TL102 and TL201
were wrong findings. Unknown is True: the rules then behave as before."""

from __future__ import annotations

import ast
import json
import os
import textwrap

import pytest

import torchlint.engine as engine
from torchlint import editor_memo
from torchlint.accelerator import accelerator_word, touches_accelerator
from torchlint.config import Settings
from torchlint.model import FileModel
from torchlint.notebook import lint_notebook
from torchlint.project import EMPTY_FACTS, FileFacts, ProjectIndex, summarize

GATED = Settings(select=("TL101", "TL102", "TL201"), preview=True)  # TL101 is a preview rule (issue 29)

CPU_SCRIPT = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader

    {device}
    model = torch.nn.Linear(8, 2){move}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=8)
    for x, y in loader:
        x, y = x{move}, y{move}
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
""")


def script(device: str = "", move: str = "") -> str:
    return CPU_SCRIPT.format(device=device, move=move)


def codes(text: str, path: str = "train.py", settings: Settings = GATED):
    return sorted({d.code for d in engine.lint_source(text, path, settings)})


@pytest.mark.parametrize("device, move", [
    ("", ""),  # no device at all: the host
    ('device = torch.device("cpu")', ".to(device)"),
    ('device = "cpu"', ".to(device)"),
    ("# model = model.cuda()  (commented out: no move)", ""),
    ("dtype = torch.float64", ".to(dtype)"),
    ("", ".to(torch.float32)"),
])
def test_a_program_that_never_touches_an_accelerator_gets_no_finding(device, move):
    assert codes(script(device, move)) == []


@pytest.mark.parametrize("device, move", [
    ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', ".to(device)"),
    ('device = "cuda"', ".to(device)"),
    ("", ".cuda()"),
    ("device = get_device()", ".to(device)"),  # not known to be the host
    ("", ".to(args.device)"),
    ("", ".to(0)"),  # cuda:0
    ('device = "cpu" if args.cpu else get_device()', ".to(device)"),
    ('device = torch.device("mps")', ".to(device)"),
])
def test_a_program_that_may_touch_an_accelerator_is_flagged_as_before(device, move):
    assert codes(script(device, move)) == ["TL101", "TL201"]  # no workers, blocking moves: not TL102 (its page)
    with_workers = script(device, move).replace("batch_size=8)", "batch_size=8, num_workers=2)")
    assert codes(with_workers) == ["TL102", "TL201"]


@pytest.mark.parametrize("text, expected", [
    ("x = x.cuda()", True),
    ("from accelerate import Accelerator", True),
    ("import lightning as L", True),
    ("from transformers import Trainer", True),
    ("model = nn.DataParallel(model)", True),
    ("backend = 'nccl'", True),
    ("import torch_xla.core.xla_model as xm", True),
    ("torch.backends.mps.is_available()", True),
    ("# x = x.cuda()\ny = 1", False),
    ("timestamps = dumps(output)", False),  # 'mps' and 'tpu' inside other words
    ("def f(x):\n    return x.to(x.device)", False),  # wherever the tensor already is
    ("for x in xs:\n    y = torch.zeros(3, device=x.device)", False),
    ("trainer = Trainer(cfg)\nx = x.to(trainer.device)", True),  # minGPT's trainer: cuda if available
    ("x = x.to(args.device)", True),
    ("y = x.to(self.device)", True),  # a class defined elsewhere (a Lightning module)
    ("def f(x, device='cpu'):\n    return x.to(device)", False),
    ("def f(x, device):\n    return x.to(device)", True),  # the caller decides
    ("state = torch.load(f, map_location=lambda s, loc: s)", False),
    ("state = torch.load(f, map_location=device)", True),
])
def test_touches_accelerator(text, expected):
    assert touches_accelerator(text, ast.parse(text)) is expected


def test_accelerator_words_are_cheap_and_skip_comment_lines():
    assert accelerator_word("a = 1  # cuda") == "cuda"  # a trailing comment still counts
    assert accelerator_word("    # model.to('cuda')\n") is None
    assert accelerator_word("use_mps = True") == "mps"


def test_the_model_records_its_answer_and_reads_the_project_half():
    text = script()
    model = FileModel(ast.parse(text), text)
    assert model.accelerator_evidence() == frozenset()
    assert "accelerator_evidence" in model.answers
    assert model.uses_accelerator()  # no project facts: unknown
    model.project = EMPTY_FACTS
    assert model.uses_accelerator()
    model.project = FileFacts(cpu_program="`train.py` and what it imports touch no accelerator")
    assert not model.uses_accelerator()
    gpu = script(move=".cuda()")
    model = FileModel(ast.parse(gpu), gpu)
    model.project = FileFacts(cpu_program="stale")
    assert model.accelerator_evidence() == {"cuda"} and model.uses_accelerator()


def test_the_digest_changes_when_the_file_starts_to_use_an_accelerator():
    text = script()
    moved = script(move=".cuda()")
    assert FileModel(ast.parse(text), text).digest() != FileModel(ast.parse(moved), moved).digest()


def test_facts_round_trip_through_json():
    facts = FileFacts(cpu_program="only imported by programs that touch no accelerator (a.py)")
    assert facts.digest and FileFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
    both = FileFacts({"f": ("train", "why")}, sites={"why": ("a.py", 3)}, cpu_program="x")
    assert FileFacts.from_json(json.loads(json.dumps(both.to_json()))) == both
    assert FileFacts.from_json(json.loads(json.dumps(FileFacts({"f": ("train", "why")}).to_json()))).cpu_program == ""


def _index(tmp_path, files):
    summaries = {}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        summaries[str(path)] = summarize(ast.parse(text), str(path), text)
    return ProjectIndex(summaries), {name: str(tmp_path / name) for name in files}


def test_programs_across_files(tmp_path):
    index, paths = _index(tmp_path, {
        "train.py": "import torch\nfrom helpers import acc\nfrom shared import f\nmodel.cuda()\n",
        "helpers.py": "def acc(x):\n    return x.item()\n",
        "host.py": "from host_helpers import g\nfrom shared import f\ng()\n",
        "host_helpers.py": "def g(x):\n    return x.item()\n",
        "shared.py": "def f(x):\n    return x.item()\n",
        "lonely.py": "def h(x):\n    return x.item()\n",  # no script imports it: used from outside
        "pkg/__init__.py": "",
        "pkg/mod.py": "def k(x):\n    return x.item()\n",  # a package's module: never read, unknown
        "pkg_user.py": "from pkg.mod import k\nk(1)\n",
    })
    cpu = index.cpu_programs()
    assert set(cpu) == {paths["host.py"], paths["host_helpers.py"]}
    assert index.facts_for(paths["host_helpers.py"]).cpu_program.startswith("only imported by")
    assert index.facts_for(paths["helpers.py"]) == EMPTY_FACTS  # train.py is on the GPU
    assert index.facts_for(paths["shared.py"]) == EMPTY_FACTS  # one of its programs is


def test_a_cpu_only_notebook_gets_no_finding_and_a_gpu_one_does():
    def notebook(*cells):
        return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
            for c in cells]})

    setup = "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n"
    loop = ("for x, y in loader:\n    loss = model({x}).sum()\n    loss.backward()\n    opt.step()\n"
            "    print(loss.item())\n")
    host = lint_notebook(notebook(setup, loop.format(x="x")), "nb.ipynb", GATED)
    assert [d.code for d in host] == []
    device = lint_notebook(notebook(setup, loop.format(x="x.cuda()")), "nb.ipynb", GATED)
    assert sorted(d.code for d in device) == ["TL101", "TL201"]


def test_the_editor_sees_an_accelerator_typed_in_another_function():
    """TL201's findings in ``train`` (text unchanged) depend on ``setup``, which starts to move
    the model to the GPU: the editor's kept answer must not stand."""
    editor_memo.clear()
    text = textwrap.dedent("""\
        import torch


        def setup(model):
            return model


        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                print(loss.item())


        if __name__ == "__main__":
            train(setup(Net()), loader, optimizer)
    """)
    settings = Settings(select=("TL201",))
    first = engine.lint_source(text, "m.py", settings, incremental=True)
    assert [d.code for d in first] == []
    edited = text.replace("return model\n", "return model.cuda()\n")
    after = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert [d.code for d in after] == ["TL201"]
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(edited, "m.py", settings)]
    back = engine.lint_source(text, "m.py", settings, incremental=True)
    assert [d.code for d in back] == []
    editor_memo.clear()


@pytest.mark.parametrize("trainer, gpu", [
    ('trainer = L.Trainer(accelerator="auto", devices=[0])', True),  # issue 29 class 2
    ('trainer = pl.Trainer(accelerator="auto", devices="auto", max_epochs=1)', True),
    ("trainer = L.Trainer(devices=1)", True),
    ('trainer = L.Trainer(accelerator="gpu")', True),
    ('trainer = L.Trainer(accelerator="cpu", devices=1)', False),
    ("trainer = L.Trainer(max_epochs=1)", False),  # Lightning 1.x ran it on the CPU: unknown
])
def test_a_lightning_trainer_on_the_gpu_moves_its_loaders(trainer, gpu):
    text = f"import lightning as L\nimport lightning as pl\n\n\ndef main(model):\n    {trainer}\n    trainer.fit(model)\n"
    assert summarize(ast.parse(text), "train.py", text)["gpu_trainer"] is gpu
