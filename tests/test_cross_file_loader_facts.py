"""Cross-file loader facts (issue 29 class 2): ``summary["loader_params"]``
(``loaderfacts.loader_parameters``) and ``FileFacts.loader_helpers``, the functions of other
project files a loader may be handed to (TL102: their loop moves its batches; TL103: they
iterate it, or iterate it once per epoch of their own)."""

import ast
import textwrap

from torchlint.loaderfacts import loader_parameters
from torchlint.project import FileFacts, ProjectIndex, summarize_text

ENGINE = textwrap.dedent("""\
    import torch

    def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq):
        for images, targets in logger.log_every(data_loader, print_freq):
            images = list(image.to(device) for image in images)
            model(images, targets).backward()

    def count(loader):
        n = 0
        for batch in enumerate(loader, 1):
            n += 1
        return n

    def steps(n, model):
        for i in range(n):  # range(n) iterates no parameter
            model.cuda()

    def again(loader, device):
        loader = list(loader)  # bound again: what the loop iterates is not the parameter
        for x in loader:
            x.to(device)

    def host_only(loader):
        for x in loader:
            x.cpu()

    class SimCLR:
        def train(self, train_loader):
            for epoch in range(10):
                for images, _ in tqdm(train_loader):
                    images = torch.cat(images, dim=0)
                    images = images.to(self.args.device)

        @staticmethod
        def static(loader):
            for x in loader:
                x.cuda()

    def encode_all(texts, device):
        # a parameter not named for a loader: not recorded (a caller over texts gets no fact)
        for text in texts:
            text.to(device)
""")


def test_the_parameters_a_function_iterates_moves_and_repeats():
    found = loader_parameters(ast.parse(ENGINE), ENGINE)
    assert found == {
        "train_one_epoch": [["model", "optimizer", "data_loader", "device", "epoch", "print_freq"], [2], [2], [], 3],
        "count": [["loader"], [0], [], [], 8],
        "host_only": [["loader"], [0], [], [], 23],
        "SimCLR.train": [["train_loader"], [0], [0], [0], 28],
        "SimCLR.static": [["loader"], [0], [0], [], 35],
    }


def test_a_file_without_for_is_not_read():
    text = "def f(loader):\n    return loader\n"
    assert loader_parameters(ast.parse(text), text) == {}


def test_an_importer_that_spells_a_loader_gets_the_helpers_as_it_spells_them(tmp_path):
    files = {
        "engine.py": ENGINE,
        "train.py": "from engine import train_one_epoch, SimCLR\nimport engine as eng\nloader = make_loader()\n",
        "plain.py": "from engine import train_one_epoch\n",  # spells no loader: no facts (no second walk)
    }
    summaries = {}
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        summaries[str(path)] = summarize_text(text, str(path))
    project = ProjectIndex(summaries)
    helpers = project.facts_for(str(tmp_path / "train.py")).loader_helpers
    assert helpers["train_one_epoch"][2] == (2,)
    assert helpers["SimCLR.train"] == (("train_loader",), (0,), (0,), (0,), "engine.py:28")
    assert helpers["eng.count"][1:4] == ((0,), (), ())
    assert "eng.SimCLR.train" in helpers
    assert project.facts_for(str(tmp_path / "plain.py")).loader_helpers == {}


def test_loader_helpers_survive_the_results_cache_and_change_the_digest():
    helpers = {"train_one_epoch": (("model", "loader"), (1,), (1,), (), "engine.py:3")}
    facts = FileFacts(loader_helpers=helpers)
    assert facts.digest
    assert FileFacts.from_json(facts.to_json()) == facts
    assert FileFacts(loader_helpers={"f": (("loader",), (0,), (), (), "engine.py:3")}).digest != facts.digest
    assert facts.cross_file().loader_helpers == helpers
    assert facts.spelled_in("train_one_epoch(model, train_loader)").loader_helpers == helpers
    assert facts.spelled_in("train_one_epoch(model, data)").loader_helpers == {}  # spells no loader
