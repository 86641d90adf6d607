"""TL101 dataloader-num-workers and TL102 dataloader-pin-memory: exact findings and fix texts."""

from __future__ import annotations

import ast
import textwrap

import pytest

from torchlint.config import Settings
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.edits import apply_edits
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code

HEADER = "import torch\nfrom torch.utils.data import DataLoader\n"


def lint(code: str, body: str, path: str = "train.py"):
    text = HEADER + textwrap.dedent(body)
    found = lint_source(text, path, Settings(), rules=[rules_by_code()[code]])
    return text, found


def positions(found):
    return [(d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column) for d in found]


def fixed(code: str, body: str):
    text, found = lint(code, body)
    assert len(found) == 1, found
    out = apply_edits(text, found[0].fix.edits)
    ast.parse(out)
    return out, found[0].fix.applicability


# -- TL101 ---------------------------------------------------------------------------------

def test_tl101_positions():
    _, found = lint("TL101", """\
        a = DataLoader(ds, batch_size=8)
        b = DataLoader(ds, 8, True, None, None, 0)
        c = torch.utils.data.DataLoader(ds, num_workers=0)
        """)
    assert positions(found) == [
        ("TL101", 3, 5, 3, 33),
        ("TL101", 4, 5, 4, 43),
        ("TL101", 5, 5, 5, 51),
    ]


WORKERS = "min(4, os.cpu_count() or 1)"


def test_tl101_fix_adds_num_workers_and_import():
    out, applicability = fixed("TL101", "loader = DataLoader(ds, batch_size=8)\n")
    assert applicability == UNSAFE
    assert out == (
        "import os\n\nimport torch\nfrom torch.utils.data import DataLoader\n"  # isort's place
        f"loader = DataLoader(ds, batch_size=8, num_workers={WORKERS})\n"
    )


def test_tl101_fix_uses_existing_os_import():
    text = "import os as _os\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=0)\n"
    (d,) = lint_source(text, "train.py", Settings(), rules=[rules_by_code()["TL101"]])
    assert apply_edits(text, d.fix.edits) == (
        "import os as _os\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, num_workers=min(4, _os.cpu_count() or 1))\n"
    )


def test_tl101_fix_replaces_positional_zero():
    out, _ = fixed("TL101", "loader = DataLoader(ds, 8, True, None, None, 0, None, True)\n")
    assert out.endswith(f"loader = DataLoader(ds, 8, True, None, None, {WORKERS}, None, True)\n")


def test_tl101_fix_keeps_multiline_trailing_comma():
    out, _ = fixed("TL101", """\
        def make(ds):
            return DataLoader(
                ds,
                batch_size=8,
            )
        """)
    assert out.endswith(
        "def make(ds):\n    return DataLoader(\n        ds,\n        batch_size=8,\n"
        f"        num_workers={WORKERS},\n    )\n"
    )


@pytest.mark.parametrize(
    "src",
    [
        "DataLoader(ds, num_workers=n)\n",
        "DataLoader(ds, num_workers=2)\n",
        "DataLoader(ds, num_workers=cfg.workers or 0)\n",
        "DataLoader(ds, **kw)\n",
        "DataLoader(*args)\n",
        "DataLoader(ds, 8, True, None, None, 4)\n",
        "DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)\n",
        "MyDataLoader(ds)\n",
        "loader.DataLoader(ds)\n",
        "import torch_geometric.loader as pyg\npyg.DataLoader(ds)\n",
    ],
)
def test_tl101_lookalikes(src):
    assert lint("TL101", src)[1] == []


def test_tl101_project_dataloader_is_not_torch():
    text = "from mylib.data import DataLoader\nDataLoader(ds)\n"
    assert lint_source(text, "train.py", Settings(), rules=[rules_by_code()["TL101"]]) == []


def test_tl101_silent_in_test_code():
    assert lint("TL101", "DataLoader(ds)\n", path="tests/test_data.py")[1] == []
    assert lint("TL101", "def test_loader():\n    DataLoader(ds)\n")[1] == []


# -- TL102 ---------------------------------------------------------------------------------

TRAIN = """\
    def train(model, ds, device):
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            model(x, y)
    """


def test_tl102_position_and_fix():
    text, found = lint("TL102", TRAIN)
    assert positions(found) == [("TL102", 4, 14, 4, 57)]
    assert found[0].fix.applicability == SAFE
    out = apply_edits(text, found[0].fix.edits)
    assert "loader = DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True)\n" in out
    ast.parse(out)


def test_tl102_fix_turns_false_into_true():
    out, applicability = fixed("TL102", TRAIN.replace("num_workers=2", "num_workers=2, pin_memory=False"))
    assert applicability == SAFE
    assert "DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True)" in out


def test_tl102_fix_positional_false():
    body = TRAIN.replace("DataLoader(ds, batch_size=8, num_workers=2)", "DataLoader(ds, 8, True, None, None, 2, None, False)")
    out, _ = fixed("TL102", body)
    assert "DataLoader(ds, 8, True, None, None, 2, None, True)" in out


@pytest.mark.parametrize(
    "loop",
    [
        "for x in loader:\n    model(x.cuda())\n",
        "for i, (x, y) in enumerate(loader):\n    model(x.to('cuda:0'))\n",
        "for batch in loader:\n    batch = {k: v.to(dev, non_blocking=True) for k, v in batch.items()}\n",
        "for batch in loader:\n    inputs = batch['x']\n    model(inputs.to(self.device))\n",
        "for x in loader:\n    model(x.to(memory, non_blocking=True))\n",
    ],
)
def test_tl102_moves_it_recognises(loop):
    body = "loader = DataLoader(ds, num_workers=2)\n" + loop
    assert [d.code for d in lint("TL102", body)[1]] == ["TL102"]


@pytest.mark.parametrize(
    "loop",
    [
        "for x in loader:\n    model(x)\n",
        "for x in loader:\n    model(x.to('cpu'))\n",
        "for x in loader:\n    model(x.to(torch.float16))\n",
        "for x in loader:\n    model.to(device)\n    model(x)\n",
        "for x in other:\n    model(x.cuda())\n",
        "for x in loader:\n    model(y.cuda())\n",
    ],
)
def test_tl102_loops_that_do_not_move_its_batches(loop):
    body = "loader = DataLoader(ds, num_workers=2)\n" + loop
    assert lint("TL102", body)[1] == []


def test_tl102_class_attribute_loader():
    body = """\
        class Trainer:
            def __init__(self, ds):
                self.loader = DataLoader(ds, num_workers=2)

            def fit(self, model):
                for x in self.loader:
                    model(x.cuda())
        """
    assert positions(lint("TL102", body)[1]) == [("TL102", 5, 23, 5, 52)]


def test_tl102_scopes_do_not_mix():
    body = """\
        def make(ds):
            loader = DataLoader(ds, num_workers=2)
            return loader

        def run(model, loader):
            for x in loader:
                model(x.cuda())
        """
    assert lint("TL102", body)[1] == []


def test_tl102_module_loader_used_in_function():
    body = """\
        loader = DataLoader(ds, num_workers=2)

        def run(model):
            for x in loader:
                model(x.cuda())
        """
    assert positions(lint("TL102", body)[1]) == [("TL102", 3, 10, 3, 39)]


@pytest.mark.parametrize("arg", ["pin_memory=True", "pin_memory=flag", "**kw"])
def test_tl102_unknown_or_pinned_stays_silent(arg):
    body = f"loader = DataLoader(ds, num_workers=2, {arg})\nfor x in loader:\n    x.cuda()\n"
    assert lint("TL102", body)[1] == []


def test_tl102_noqa_on_the_loader_line():
    body = "loader = DataLoader(ds, num_workers=2)  # noqa: TL102\nfor x in loader:\n    x.cuda()\n"
    assert lint("TL102", body)[1] == []


# -- TL102, issue 29 classes 1 and 2 (W1) ---------------------------------------------------

def _tl102_notebook(*sources):
    import json

    from torchlint.notebook import lint_notebook

    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": s.splitlines(True),
              "execution_count": i + 1, "outputs": []} for i, s in enumerate(sources)]
    raw = json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                      "nbformat": 4, "nbformat_minor": 5})
    settings = Settings(select=("TL102",))
    return [(d.code, d.cell, d.location.row) for d in lint_notebook(raw, "nb.ipynb", settings)]


def test_tl102_loader_handed_to_a_function_of_another_cell():
    setup = ("import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
             "train_loader = DataLoader(ds, batch_size=32, num_workers=2)\nvalid_loader = DataLoader(ds, batch_size=32, num_workers=2)\n")
    train = ("def train(model, train_dataloader, epochs):\n"
             "    for epoch in range(epochs):\n"
             "        for xb, yb in train_dataloader:\n"
             "            model(xb.to(device)).sum().backward()\n")
    assert _tl102_notebook(setup, train, "train(model, train_loader, 3)\n") == [("TL102", 1, 4)]
    # a call IPython runs (`%time train(...)`) is masked: not seen, silent
    assert _tl102_notebook(setup, train, "%time train(model, train_loader, 3)\n") == []


def test_tl102_batches_moved_through_a_helper_of_another_cell():
    setup = ("import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'\n"
             "def send_to_device(batch):\n    for k in batch:\n        batch[k] = batch[k].to(device)\n"
             "    return batch\n")
    loop = ("train = DataLoader(ds, batch_size=8, num_workers=2)\n"
            "for batch in train:\n    batch = send_to_device(batch)\n    model(**batch).loss.backward()\n")
    assert _tl102_notebook(setup, loop) == [("TL102", 2, 1)]


def test_tl102_subclass_pin_memory_by_keyword_only():
    body = """\
    from monai.data import DataLoader as MonaiLoader
    def train(model, ds):
        pinned = MonaiLoader(ds, batch_size=2, num_workers=4, pin_memory=True)
        for x in pinned:
            model(x.cuda())
        loader = MonaiLoader(ds, batch_size=2, num_workers=4)
        for x in loader:
            model(x.cuda())
    """
    _, found = lint("TL102", body)
    assert [d.location.row for d in found] == [8]


def test_tl102_lightning_fit_needs_a_gpu_trainer_in_the_file():
    gpu = """\
    import lightning as L
    def main(model, ds):
        trainer = L.Trainer(accelerator="gpu", devices=1)
        loader = DataLoader(ds, num_workers=4)
        trainer.fit(model, train_dataloaders=loader)
    """
    assert len(lint("TL102", gpu)[1]) == 1
    # no accelerator argument: the device is unknown, silent; a CPU Trainer in the file: silent
    assert lint("TL102", gpu.replace('accelerator="gpu", devices=1', "max_epochs=1"))[1] == []
    assert lint("TL102", gpu.replace('"gpu"', '"cpu"'))[1] == []


def test_tl102_gpu_trainer_is_a_recorded_model_answer():
    from torchlint.model import FileModel

    gpu = FileModel.of_text("import lightning as L\ntrainer = L.Trainer(accelerator='gpu')\n")
    cpu = FileModel.of_text("import lightning as L\ntrainer = L.Trainer(accelerator='cpu')\n")
    assert gpu.gpu_trainer() == frozenset({"gpu"}) and cpu.gpu_trainer() == frozenset()
    assert gpu.digest() != cpu.digest()  # the editor keys kept findings on it
