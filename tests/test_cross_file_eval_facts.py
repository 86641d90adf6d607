"""Cross-file facts of issue 29 classes 3 and 8 (W3): ``FileFacts.eval_helpers`` (TL402 at the
call of an evaluation helper imported from another project file) and ``FileFacts.mode_free``
(TL902 silent for an imported class that reads no mode)."""

import json

from torchlint.model import FileModel
from torchlint.modefacts import judge_file
from torchlint.project import FileFacts, ProjectIndex, summarize_text

HELPERS = (
    "import torch\n"
    "def calc_loss_batch(x, y, model, device):\n"
    "    return torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))\n"
    "def calc_loss_loader(data_loader, model, device):\n"
    "    total = 0.\n"
    "    for i, (x, y) in enumerate(data_loader):\n"
    "        total += calc_loss_batch(x, y, model, device).item()\n"
    "    return total\n"
    "def accuracy(loader, model):\n"
    "    with torch.no_grad():\n"
    "        return sum((model(x).argmax(1) == y).sum().item() for x, y in loader)\n"
    "def fit(loader, model, opt):\n"
    "    for x, y in loader:\n"
    "        model(x).sum().backward()\n"
    "        opt.step()\n"
    "@torch.no_grad()\n"
    "def decorated(loader, model):\n"
    "    for x, y in loader:\n"
    "        model(x)\n"
    "def runs_nothing(loader, model):\n"
    "    for x, y in loader:\n"
    "        print(x, model)\n"
)
CALLER = "from gpt_train import calc_loss_loader, accuracy\nimport gpt_train as gt\n"
MODELS = (
    "from torch import nn\n"
    "class Generator(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(2, 2)\n"
    "class Classifier(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.drop = nn.Dropout(0.1)\n"
    "class Config:\n"
    "    pass\n"
)
LOADER = "import torch\nfrom models import Classifier, Config, Generator\nm = Generator()\nm.load_state_dict({})\n"


def index(tmp_path, files):
    summaries = {}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        summaries[str(path)] = summarize_text(text, str(path))
    return ProjectIndex(summaries), {name: str(tmp_path / name) for name in files}


def test_only_a_loop_running_a_parameter_with_gradients_left_to_the_caller_is_an_evaluation_helper(tmp_path):
    summary = summarize_text(HELPERS, str(tmp_path / "gpt_train.py"))
    # through the helper calc_loss_batch; not accuracy (no_grad), fit (steps), decorated, runs_nothing
    assert summary["evaluates"] == {"calc_loss_loader": ["data_loader", 0, "model", 1, 4]}


def test_a_caller_gets_the_helpers_it_imports_as_it_spells_them(tmp_path):
    project, paths = index(tmp_path, {"gpt_train.py": HELPERS, "run.py": CALLER})
    helpers = project.facts_for(paths["run.py"]).eval_helpers
    where = ("data_loader", 0, "model", 1, "gpt_train.py:4")
    assert helpers == {"calc_loss_loader": where, "gt.calc_loss_loader": where}
    assert not project.facts_for(paths["gpt_train.py"]).eval_helpers  # its own functions: not imported


def test_imports_resolve_from_the_importing_files_folder(tmp_path):
    # two folders of scripts, each with its own gpt_train.py: only the sibling counts
    project, paths = index(tmp_path, {"a/gpt_train.py": HELPERS, "a/run.py": CALLER,
                                      "b/gpt_train.py": "def calc_loss_loader(loader, model):\n    pass\n",
                                      "b/run.py": CALLER})
    assert project.facts_for(paths["a/run.py"]).eval_helpers
    assert not project.facts_for(paths["b/run.py"]).eval_helpers


def test_a_notebook_gets_the_helpers_of_its_folders_modules(tmp_path):
    project, paths = index(tmp_path, {"ch05/gpt_train.py": HELPERS, "ch06/other.py": HELPERS})
    helpers = project.facts_for(str(tmp_path / "ch05" / "nb.ipynb")).eval_helpers
    assert list(helpers) == ["gpt_train.calc_loss_loader"]
    assert project.facts_for(str(tmp_path / "ch05" / "nb.ipynb")).cross_file().eval_helpers == helpers
    assert not project.facts_for(str(tmp_path / "nb.ipynb")).eval_helpers


def test_imported_classes_with_bases_are_judged_in_their_own_file(tmp_path):
    project, paths = index(tmp_path, {"models.py": MODELS, "load.py": LOADER})
    facts = project.facts_for(paths["load.py"])
    assert set(facts.mode_free) == {"Generator", "Classifier"}  # Config has no bases: no model
    model = FileModel.of_text(LOADER)
    model.project = facts
    assert model.is_mode_free_class("Generator")
    assert not model.is_mode_free_class("Classifier")
    assert not model.is_mode_free_class("Other")
    # a file that gives no model weights gets no classes
    project, paths = index(tmp_path, {"models.py": MODELS, "use.py": "from models import Generator\n"})
    assert not project.facts_for(paths["use.py"]).mode_free


def test_an_edit_of_a_class_changes_the_summary_and_the_judgement_key(tmp_path):
    path = str(tmp_path / "models.py")
    before = summarize_text(MODELS, path)["class_text"]
    assert summarize_text(MODELS + "print('script code')\n", path)["class_text"] == before
    edited = MODELS.replace("nn.Dropout(0.1)", "nn.Identity()")
    assert summarize_text(edited, path)["class_text"] != before
    (tmp_path / "models.py").write_text(edited)
    assert "Classifier" in judge_file(path, summarize_text(edited, path)["class_text"])


def test_facts_json_round_trip_and_older_rows(tmp_path):
    project, paths = index(tmp_path, {"gpt_train.py": HELPERS, "run.py": CALLER + "x = 1\n", "models.py": MODELS,
                                      "load.py": LOADER})
    for name in ("run.py", "load.py"):
        facts = project.facts_for(paths[name])
        assert facts.digest
        assert FileFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
    old = [{}, {}, {}, {}, "", "", "main.py wraps a model in DistributedDataParallel"]
    assert FileFacts.from_json(old).ddp_program and not FileFacts.from_json(old).eval_helpers


def test_a_notebook_takes_only_the_helpers_its_text_spells(tmp_path):
    project, _ = index(tmp_path, {"ch05/gpt_train.py": HELPERS})
    cross = project.facts_for(str(tmp_path / "ch05" / "nb.ipynb")).cross_file()
    assert cross.spelled_in("x = calc_loss_loader(loader, model, 'cpu')\n").eval_helpers
    assert not cross.spelled_in("print('no helper called here')\n").digest
