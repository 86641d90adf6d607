"""ProjectIndex.ddp_programs / FileFacts.ddp_program (issue 29, class 3; TL403): the files with a
training loop that are part of a program wrapping a model in DistributedDataParallel."""

from torchlint.project import FileFacts, ProjectIndex, summarize_text

MAIN = (
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "from engine import train_one_epoch\n"
    "import helpers\n"
    "def main(net, loader, opt):\n"
    "    model = DDP(net)\n"
    "    train_one_epoch(model, loader, opt)\n"
    "if __name__ == '__main__':\n"
    "    main(None, None, None)\n"
)
ENGINE = (
    "def train_one_epoch(model, loader, opt, accum=4):\n"
    "    for i, (x, y) in enumerate(loader):\n"
    "        model(x, y).backward()\n"
    "        if (i + 1) % accum == 0:\n"
    "            opt.step()\n"
)
HELPERS = "def lr_at(step):\n    return 0.1 / (1 + step)\n"
SINGLE = "from single_engine import train_one_epoch\nif __name__ == '__main__':\n    train_one_epoch(None, [], None)\n"


def index(tmp_path, files):
    summaries = {}
    for name, text in files.items():
        path = str(tmp_path / name)
        summaries[path] = summarize_text(text, path)
    return ProjectIndex(summaries), {name: str(tmp_path / name) for name in files}


def test_a_loop_of_a_program_that_wraps_ddp_gets_the_fact(tmp_path):
    project, paths = index(tmp_path, {"main.py": MAIN, "engine.py": ENGINE, "helpers.py": HELPERS,
                                      "single.py": SINGLE, "single_engine.py": ENGINE})
    facts = project.facts_for(paths["engine.py"])
    assert facts.ddp_program == "main.py wraps a model in DistributedDataParallel"
    assert not project.facts_for(paths["helpers.py"]).ddp_program  # no training loop: no fact
    assert not project.facts_for(paths["single_engine.py"]).ddp_program  # only a program without DDP uses it
    assert FileFacts.from_json(facts.to_json()) == facts
    assert facts.digest != FileFacts(facts.per_step, facts.moved_loaders, facts.subclasses, facts.sites).digest


def test_no_builder_no_fact(tmp_path):
    project, paths = index(tmp_path, {"main.py": MAIN.replace("DDP(net)", "net"), "engine.py": ENGINE})
    assert project.ddp_programs == {}
    assert not project.facts_for(paths["engine.py"]).ddp_program


def test_older_facts_rows_still_read():
    row = FileFacts({"f": ("train", "why")}, cpu_program="cpu").to_json()
    assert FileFacts.from_json(row).ddp_program == ""
    assert FileFacts.from_json(FileFacts(ddp_program="x").to_json()).ddp_program == "x"
