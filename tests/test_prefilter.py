"""The prefilter is sound: a rule skipped because its ``requires`` tokens are absent would not
have fired anyway. Every rule runs with and without the prefilter over the fixtures and, when
the benchmark has fetched them to this machine, the timm and transformers corpora (no test
downloads anything)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from corpora import corpus_files

from torchlint.config import Settings
from torchlint.engine import lint_source
from torchlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def difference(path: str):
    """None if both ways agree, else (path, with prefilter, without).

    Rules run independently on one tree, so it is enough to run the rules the prefilter dropped
    without it: they must find nothing. When it dropped every rule, the file is not parsed by
    libcst at all, so the syntax-error finding (TL001) must agree too."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    rules = all_rules()
    dropped = [rule for rule in rules if not rule.may_fire(text)]
    if not dropped:
        return None  # nothing is filtered: both ways run the same code
    settings = Settings()
    key = lambda ds: [(d.code, d.location, d.end_location, d.message) for d in ds]  # noqa: E731
    full = key(lint_source(text, path, settings, rules=dropped, prefilter=False))
    if len(dropped) < len(rules):
        fast = [f for f in full if f[0] == "TL001"]  # TL001 is the engine's, not a dropped rule's
    else:
        fast = key(lint_source(text, path, settings, rules=rules))
    return None if fast == full else (path, fast, full)


def ast_difference(path: str):
    """None if the ast-level prefilter (``Rule.ast_candidate``) drops no rule that would fire,
    else (path, [(code, row, col) of the findings it would lose])."""
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.engine import candidate_rules

    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None  # no tree: the ast prefilter is not asked
    settings = Settings(preview=True)  # preview rules too
    codes = settings.codes_for_path(path)
    # every rule's question, even where the engine would not ask it (it stops at the first yes)
    index = AstIndex(tree, text, settings.target_torch_version)
    dropped = [rule for rule in candidate_rules(text, path, settings, codes)
               if rule.ast_candidate is not None and not rule.ast_candidate(index)]
    if not dropped:
        return None
    lost = [(d.code, d.location.row, d.location.column)
            for d in lint_source(text, path, settings, rules=dropped, prefilter=False) if d.code != "TL001"]
    return (path, lost) if lost else None


def differences(files, check=difference):
    if len(files) < 20:
        return [d for d in map(check, files) if d]
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return [d for d in pool.map(check, files, chunksize=8) if d]


def test_prefilter_is_sound_on_the_fixtures():
    files = sorted(str(p) for p in (ROOT / "fixtures").glob("*.py"))
    assert files
    assert differences(files) == []


def _in_repo_python_files():
    """The fixtures, the multi-file fixture projects and the docs' examples: every shape the
    rules are known to fire on, and their look-alikes."""
    files = sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))
    assert len(files) > 40
    return files


def test_ast_prefilter_is_sound_on_the_fixtures():
    assert differences(_in_repo_python_files(), ast_difference) == []


AST_CASES = [
    # (source, rule, whether the ast prefilter keeps the rule): words only in docstrings and
    # comments are dropped; real sites, aliases and uses it cannot follow are kept.
    ('"""Wrap the model in nn.DataParallel for multi-GPU."""\n', "TL701", False),
    ("import torch.nn as nn\nm = nn.DataParallel(m)\n", "TL701", True),
    ("# torch.cuda.empty_cache() here would be slow\nimport torch\n", "TL501", False),
    ("import torch\nec = torch.cuda.empty_cache\nfor b in x:\n    ec()\n", "TL501", True),
    ("from torch.cuda import empty_cache as free\nfor b in x:\n    free()\n", "TL501", True),
    ("import torch\nf(torch.cuda.empty_cache)\n", "TL501", True),  # passed as a value
    ('"""Use a DataLoader."""\nfrom torch.utils.data import DataLoader\n', "TL101", False),
    ("from torch.utils.data import DataLoader as DL\nDL(ds)\n", "TL101", True),
    ("from torch.utils.data import DataLoader\nclass L(DataLoader):\n    pass\n", "TL101", True),
    ("from torch.utils.data import DataLoader\nisinstance(x, DataLoader)\n", "TL102", False),
    ('import torch\n"""torch.zeros(3).cuda()"""\nx = torch.ones(2)\n', "TL202", False),
    ("import torch\nx = torch.zeros(3).float().cuda()\n", "TL202", True),
    ("from torch import zeros as z\nx = z(3).cuda()\n", "TL202", True),
    ("import torch\nx = torch.eye(3)\ny = x.cuda()\n", "TL202", True),  # a name bound to a constructor
    # TL202's question: what ``_created_on_host`` accepts, through bindings, not the words
    ('import torch\nx = torch.zeros(3, device="cuda").to(torch.half)\n', "TL202", False),  # device= on purpose
    ("import torch\nx = torch.ones(3, **kw).cuda()\n", "TL202", False),
    ("import torch\nx = torch.tensor([1.0, 2.0]).cuda()\n", "TL202", False),  # host data: copied either way
    ("import torch\nx = torch.FloatTensor(3, 4).cuda()\n", "TL202", True),
    ("from torch import zeros as Z\ny = Z(3).float().cuda()\n", "TL202", True),  # bound to a constructor
    ("import torch\na, b = torch.zeros(2), 1\na.cuda()\n", "TL202", True),
    ("import torch\na, (b, c) = 1, [2, torch.zeros(2)]\nc.cuda()\n", "TL202", True),  # unpacked at any depth
    ("import torch\nx: torch.Tensor = torch.rand(2)\nx.to(d)\n", "TL202", True),
    # a loop target is not a binding the rule follows, nor a keyword argument's name
    ("import torch\nfor x in [torch.zeros(2)]:\n    x.cuda()\ny = f(x=torch.zeros(2))\n", "TL202", False),
    ("import torch.nn as nn\n# nn.BatchNorm2d after nn.Conv2d\nc = nn.Conv2d(3, 8, 3)\n", "TL301", False),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n", "TL301", True),
    # every TL301 finding is on a conv whose bias may be on: bias=False, **kwargs or a
    # non-literal positional bias never reach libcst (a string argument makes the text prefilter
    # pass); aliases are followed
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, padding='same', bias=False), nn.BatchNorm2d(8))\n", "TL301", False),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, padding='same', bias=flag), nn.BatchNorm2d(8))\n", "TL301", False),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, padding='same', **kw), nn.BatchNorm2d(8))\n", "TL301", False),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, 1, 'same', 1, 1, b), nn.BatchNorm2d(8))\n", "TL301", False),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, 1, 'same', 1, 1, True), nn.BatchNorm2d(8))\n", "TL301", True),
    ("import torch.nn as nn\nnn.Sequential(nn.Conv2d(3, 8, 3, bias=True), nn.BatchNorm2d(8))\n", "TL301", True),
    ("import torch.nn as nn\nnn.Sequential(nn.LazyConv2d(8, 3, 1, 1, 1, 1, True), nn.BatchNorm2d(8))\n", "TL301", True),
    ("from torch.nn import Conv2d as C\nimport torch.nn as nn\nnn.Sequential(C(3, 8, 3), nn.BatchNorm2d(8))\n", "TL301", True),
    ("import torch.nn as nn\nC = nn.Conv2d\nnn.Sequential(C(3, 8, 3), nn.BatchNorm2d(8))\n", "TL301", True),
    ("def f(p):\n    p.data.zero_()  # not zero_grad\n", "TL401", False),
    ("def f(p):\n    p.grad.data.zero_()\n", "TL401", True),
    ('"""The loader yields .item() values."""\nx.step\n', "TL201", False),
    ("for b in train_loader:\n    b.item()\n", "TL201", True),
    # qualified names (TL9xx, TL404, TL702, TL204-206...): through imports, `as`, assignments
    ('"""torch.load(f) is unsafe"""\nimport torch\n', "TL901", False),
    ("import torch\nx = torch.load(f)\n", "TL901", True),
    ("import torch\nx = torch.load(f, weights_only=True)\n", "TL901", False),
    ("import torch\nx = torch.load(f, **kw)\n", "TL901", False),
    ("from torch import load as L\nL(f, weights_only=False)\n", "TL901", True),
    ("import torch as th\nth.load(f)\n", "TL901", True),
    ("import torch\nT = torch\nser = T.serialization\nser.load(f)\n", "TL901", True),
    ("import torch\nload = torch.load\nload(f)\n", "TL901", True),
    ("import torch\nx = (torch.load)(f)\n", "TL901", True),
    ("import torch\nx = (torch\n     .load\n     (f))\n", "TL901", True),
    ("import json\nimport torch\nx = json.load(f)\n", "TL901", False),
    ("from .torch import load\nload(f)\n", "TL901", False),  # the project's own module
    ("from torch.utils.checkpoint import checkpoint\ncheckpoint(f, x)\n", "TL903", True),
    ("from torch.utils.checkpoint import checkpoint\ncheckpoint(f, x, use_reentrant=False)\n", "TL903", False),
    ("def f(checkpoint):\n    return checkpoint(x)\n", "TL903", False),
    ("import torch\n@torch.cuda.amp.custom_fwd\ndef f(x):\n    pass\n", "TL904", True),
    ("import torch\ntorch.range(3)\n", "TL904", True),
    ("import torch\nfor i in range(3):\n    y = x.norm()\n", "TL904", False),
    ("from torch import *\nrange(3)\n", "TL904", False),  # star imports resolve only known names
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.fc = nn.Linear(2, 2)\n", "TL905", False),
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n"
     "        super().__init__()\n", "TL905", True),
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n", "TL905", True),
    ("import torch.nn as nn  # an nn.Module below\nclass M(Base):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n", "TL905", False),
    # an __init__ opening with the init call (after a docstring) is answered from that opening
    ('import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        """Doc."""\n        super().__init__()\n'
     "        self.fc = nn.Linear(2, 2)\n", "TL905", False),
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__(); self.fc = nn.Linear(2, 2)\n",
     "TL905", True),  # a store on the init call's line may run first: kept
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)\n"
     "        if x:\n            self.fc = nn.Linear(2, 2)\n        super().__init__()\n", "TL905", False),
    ("from torch.autograd import Variable\nv = Variable(x)\n", "TL906", True),
    ("import torchvision\nm = torchvision.models.resnet50(pretrained=True)\n", "TL907", True),
    ("import torchvision, timm\nm = timm.create_model('r', pretrained=True)\n", "TL907", False),
    ("from torch.cuda.amp import autocast\nwith autocast():\n    pass\n", "TL404", True),
    ("from torch import amp\nwith amp.autocast('cuda'):\n    pass\n", "TL404", False),
    ("from torch.nn.parallel import DistributedDataParallel as DDP\nDDP(m, find_unused_parameters=True)\n", "TL702", True),
    ("from torch.nn.parallel import DistributedDataParallel as DDP\nDDP(m, find_unused_parameters=False)\n", "TL702", False),
    ('import torch\nt = torch.tensor(1.0, device="cuda")\n', "TL206", True),
    ("import torch\nt = torch.tensor(1.0)  # device\n", "TL206", False),
    ("import numpy as np\nimport torch\nt = torch.tensor(a)\n", "TL205", True),
    ("import torch\n# numpy\nt = torch.tensor(a)\n", "TL205", False),
    ("for b in data:\n    loss.backward()\n", "TL405", True),
    ('"""Call .backward() in the loop."""\n', "TL405", False),
    ('"""softmax then cross_entropy"""\nimport torch\n', "TL407", False),
    # method calls are looked for only where the word is an attribute called, as Python spaces it
    ("import torch\nx = torch.zeros(3).to  (d)\n", "TL202", True),
    ("import torch\nx = torch.zeros(3) . to(d)\n", "TL202", True),
    ("import torch\nx = torch.zeros(3).\\\n    cuda()\n", "TL202", True),
    # imports spread over continued lines; assignments of a name (not of a call of it)
    ("import os, \\\n    torch as th\nth.load(f)\n", "TL901", True),
    ("from \\\n    torch import load as L\nL(f)\n", "TL901", True),
    ("from .utils import load\nimport torch\nload(f)\n", "TL901", False),
    ("import torch\nser = torch.serialization.load(f)\nser(g)\n", "TL901", True),
    ("import torch\nx = torch.nn\ny = x.Linear(2, 2)\nz = (torch\n     .load)\nz(f)\n", "TL901", True),
    ("import torch\nL = torch.load if fast else None\nL(f)\n", "TL901", False),
    ("load = 1\nload(f)  # no torch here\n", "TL901", False),
    # TL201: a finding is in a training loop: over a possible loader (also one another function
    # binds: dataloader_names is the file's), or around .backward()/.step()
    ("import torch\n\ndef build(ds):\n    batches = torch.utils.data.DataLoader(ds)\n    return batches\n\n"
     "def run(batches, model):\n    for x in batches:\n        print(model(x).item())\n", "TL201", True),
    ("import torch\n\ndef report(loader_name, t):\n    print(loader_name, t.item())\n", "TL201", False),
    ("import torch\n\ndef fit(model, opt, data):\n    while True:\n        model(data).backward()\n"
     "        opt.step()\n", "TL201", True),
    # TL402: an evaluation loop is a `for` over a possible loader
    ("import torch\n\ndef evaluate(model, val_loader_path):\n    return model(val_loader_path)\n", "TL402", False),
    ("import torch\n\ndef evaluate(model, val_loader):\n    for x in val_loader:\n        model(x)\n", "TL402", True),
]


@pytest.mark.parametrize("source, code, kept", AST_CASES)
def test_ast_prefilter_cases(source, code, kept):
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.rules import rules_by_code

    rule = rules_by_code()[code]
    assert rule.may_fire(source), "the text prefilter must pass for the case to mean anything"
    assert bool(rule.ast_candidate(AstIndex(ast.parse(source), source))) is kept


def test_ast_prefilter_knows_the_target_version():
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.rules import rules_by_code

    source = "import torch\nx = torch.load(f)\n"  # weights_only defaults to True from torch 2.6
    tl901 = rules_by_code()["TL901"]
    assert tl901.ast_candidate(AstIndex(ast.parse(source), source, (2, 4)))
    assert not tl901.ast_candidate(AstIndex(ast.parse(source), source, (2, 6)))


@pytest.mark.parametrize("name", ["timm", "transformers"])
def test_ast_prefilter_is_sound_on_the_corpora(name):
    """The pinned corpora (``tests/corpora.py`` fetches them; a corpus it cannot fetch fails)."""
    files = [str(p) for p in corpus_files(name)]
    assert differences(files, ast_difference) == []


def test_prefilter_is_sound_on_timm():
    """The text prefilter on the pinned timm corpus (fetched by ``tests/corpora.py``)."""
    files = [str(p) for p in corpus_files("timm")]
    assert len(files) > 200
    assert differences(files) == []


@pytest.mark.parametrize(
    "spelling, matches",
    [
        ("torch.zeros(3).to(device)", True),
        ("torch.ones(2) . cuda ()", True),
        ("(torch.zeros(3)\n   .  # comment\n   to(device))", True),
        ("torch.arange(4) \\\n    .to(device)", True),
        ("torch.arange(4) \\\r\n    .cuda()", True),
        ("import torch\nx = torch.zeros(3)\ntotal = x.total()\n", False),  # "to" in torch/total only
        ("x.cuda", False),  # not called
        ("x.auto(1)", False),
    ],
)
def test_tl202_prefilter_pattern(spelling, matches):
    from torchlint.rules.device import TensorMovedAfterCreation

    assert TensorMovedAfterCreation.may_fire("import torch\n" + spelling + " zeros") is matches


def test_tl202_prefilter_pattern_is_linear_on_long_comments():
    import time

    from torchlint.rules.device import MOVE_CALL

    text = ("x = 1  # see foo. " + "#" * 400 + "\n") * 50
    start = time.perf_counter()
    assert MOVE_CALL.search(text) is None
    assert time.perf_counter() - start < 0.5


def test_a_file_whose_words_are_only_in_docstrings_never_reaches_libcst(monkeypatch):
    import libcst

    from torchlint import engine, positions

    positions.protocol_ok()  # libcst's codegen probe parses a sample once per process: not a file
    parsed = []
    real = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda text, *a, **k: parsed.append(text) or real(text, *a, **k))
    words_only = '"""Wraps the model in nn.DataParallel (see DataLoader)."""\n\nx = 1\n'
    # the text prefilter alone would parse it
    assert [r.code for r in engine.candidate_rules(words_only, "m.py", Settings(), Settings().codes_for_path("m.py"))]
    assert lint_source(words_only, "m.py", Settings()) == []
    # final findings here (TL701 may still fire where the project index has facts: True)
    assert engine.first_pass(words_only, "m.py", Settings())[1:] == ([], True, None)
    assert parsed == []
    real_site = "import torch.nn as nn\nmodel = nn.DataParallel(model)\n"
    assert [d.code for d in lint_source(real_site, "m.py", Settings())] == ["TL701"]
    assert "TL701" in engine.first_pass(real_site, "m.py", Settings())[3]
    assert parsed == [real_site]


def test_with_project_asks_only_the_project_prefilter():
    """A file no rule fires on may still go to libcst when the project index has facts about it:
    through a project rule whose project prefilter passes (TL102: its text prefilter)."""
    from torchlint import engine

    only_tl102 = Settings(select=("TL102",))
    assert engine.first_pass("x = 1\n", "m.py", only_tl102)[1:] == ([], False, None)
    in_docstring = '"""Build the DataLoader elsewhere."""\nx = 1\n'  # the text passes, the tree says no
    assert engine.first_pass(in_docstring, "m.py", only_tl102)[1:] == ([], True, None)
    assert engine.first_pass("x = (\n", "m.py", only_tl102)[2] is False  # no tree, no facts
    # TL201 fires in any function the index says runs every step: no token needed
    assert engine.first_pass("x = 1\n", "m.py", Settings(select=("TL201",)))[1:] == ([], True, None)


def test_ast_index_questions():
    import ast

    from torchlint.astindex import AstIndex

    def index(source):
        return AstIndex(ast.parse(source), source)

    source = "import torch\n# x.to(d) in a comment\ny = x.to(d)\nz = to(d)\nw = x.to\nv = (x.to)(d)\n"
    assert sorted(call.lineno for call, _ in index(source).method_calls("to")) == [3, 6]
    bindings = index("import os, \\\n    torch as th\nfrom .torch import load\nec = th.cuda.empty_cache\n"
                     "m = th.zeros(3)\nv = th.ones(2)[0]\n").bindings()
    assert bindings == {"th": {"torch"}, "ec": {"torch.cuda.empty_cache"}}
    assert index("import os\nx = os.path\n").bindings() == {}


def test_attribute_lines_find_every_spelling_of_an_attribute():
    """``AstIndex.attribute_lines``: one regex for a set of attribute names, through what Python
    allows between the dot and the name; not a bare name, a longer identifier or a word in prose."""
    import ast

    from torchlint.astindex import AstIndex

    source = (
        "x.norm(1)\n"              # 1
        "y = a . norm\n"           # 2: spaces
        "z = (b.  # why\n"         # 3: a comment, then the name on the next line
        "     norm)\n"             # 4
        "w = c.\\\n"               # 5: a continuation
        "    vmap(f)\n"            # 6
        "norm(2)\n"                # 7: a bare name
        "d.normal_(0)\n"           # 8: a longer identifier
        "# the norm and vmap here\n"  # 9: prose
        "e.vmap (g)\n"             # 10: called, a space before the bracket
    )
    index = AstIndex(ast.parse(source), source)
    assert index.attribute_lines(["norm", "vmap"]) == [1, 2, 4, 6, 10]
    assert index.attribute_lines(["norm", "vmap"], call=True) == [1, 6, 10]
    assert index.attribute_lines([]) == []


def test_references_find_a_class_used_but_not_a_type_test():
    """``AstIndex.references`` (TL301's question: a norm its code builds or takes): a call, a
    default, an alias's value, a star import's name; not ``isinstance``, not another module's
    class of the same name, not a comment."""
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.torch_api import MEAN_SUBTRACTING_NORMS

    def refs(source: str) -> bool:
        return AstIndex(ast.parse(source), source).references(MEAN_SUBTRACTING_NORMS)

    assert refs("import torch.nn as nn\nbn = nn.BatchNorm2d(8)\n")
    assert refs("from torch import nn\ndef f(norm_layer=nn.SyncBatchNorm):\n    pass\n")
    assert refs("from torch.nn import BatchNorm1d as BN\nlayer = BN\n")
    assert refs("import torch\nBN = torch.nn.BatchNorm3d\nx = BN\n")
    assert refs("from torch.nn import *\nm = LazyBatchNorm2d()\n")
    assert refs("import torch\nm = torch.nn.modules.batchnorm.BatchNorm2d(3)\n")
    assert not refs("import torch.nn as nn\nif isinstance(m, (nn.Conv2d, nn.BatchNorm2d)):\n    pass\n")
    assert not refs("from timm.layers import BatchNormAct2d, BatchNorm2d\nm = BatchNorm2d(3)\n")
    assert not refs("import torch\n# nn.BatchNorm2d(3) in a comment\nx = torch.nn.GroupNorm(2, 4)\n")


def test_attribute_lines_lose_no_attribute_of_the_fixtures():
    """Every ``<x>.<name>`` node of the fixtures (and every call of one) is on a line
    ``attribute_lines`` gives, for the method names the rules ask about: the questions built on
    it see every site a ``str.find`` per word saw."""
    import ast

    from torchlint.astindex import AstIndex
    from torchlint.rules.compat import DEPRECATED_TOKENS

    words = {"to", "cuda", "backward", "step", "item", "load", "load_state_dict", *DEPRECATED_TOKENS}
    checked = 0
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        index = AstIndex(tree, text)
        lines, called = set(index.attribute_lines(words)), set(index.attribute_lines(words, call=True))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in words:
                assert node.end_lineno in lines, (path, node.end_lineno)
                checked += 1
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in words:
                assert node.func.end_lineno in called, (path, node.lineno)
    assert checked > 100


def test_the_faster_text_tokens_answer_as_the_regexes_they_replace():
    """``gated`` tokens (a regex searched only where its word is) and the lower-cased substring
    tests of TL402 give the answers of the plain regexes on every fixture and on spellings the
    regexes allow (a comment or a continuation between the dot and the method)."""
    import re

    from torchlint.rules.base import GAP, gated, mentions_loader
    from torchlint.rules.training import _BACKWARD, _BACKWARD_TOKEN, _STEP, _STEP_TOKEN, _mentions_evaluation

    either = re.compile(rf"\.{GAP}(?:backward|step){GAP}\(")
    pairs = [
        (_BACKWARD_TOKEN, _BACKWARD.search),
        (_STEP_TOKEN, _STEP.search),
        (gated(either, "backward", "step"), either.search),
        (mentions_loader, re.compile("(?i)loader").search),
        (_mentions_evaluation, re.compile("(?i)eval|val|test|predict|infer").search),
    ]
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    texts += ["loss.  # why\n  backward()\n", "opt .\\\n step ()\n", "x.backward\n", "TRAIN_LOADER = 1\n",
              "def Predict(): pass\n", "x = 1\n"]
    answers = set()
    for text in texts:
        for token, regex in pairs:
            assert token(text) == bool(regex(text)), (token, text[:80])
            answers.add((token, token(text)))
    assert len(answers) == 2 * len(pairs)  # each token said yes and no somewhere


def _naive(groups, text):
    from torchlint.rules.base import _present

    return all(any(_present(token, text) for token in group) for group in groups)


def test_token_answers_shared_between_rules_and_scanned_in_order_are_the_same():
    """``all_present`` scans short substrings first and keeps the last text's answers by token:
    the same answer as each group's tokens tried in the rule's own order, for every rule's
    ``requires`` and ``project_requires``, over the fixtures and texts with one token each,
    asked in turn about the same text and then about another."""
    from torchlint.rules.base import all_present

    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    tokens = {t for r in all_rules() for g in r.requires for t in g if isinstance(t, str)}
    texts += [f"x = {t}\n" for t in sorted(tokens)] + ["", "loader LOADER .backward( .step("]
    for text in texts:
        for rule in all_rules():
            for groups in (rule.requires, rule.project_requires or ()):
                assert all_present(groups, text) == _naive(groups, text), (rule.code, text[:80])
    for rule in all_rules():  # a fresh copy of a text: its own answers
        a, b = "model.to(x) range", "".join(["model.to(x) ", "range"])
        assert all_present(rule.requires, a) == all_present(rule.requires, b) == _naive(rule.requires, a)


class _CountingText(str):
    """A text that counts the substring searches made in it."""

    searches = 0

    def __contains__(self, token):
        _CountingText.searches += 1
        return super().__contains__(token)


def test_a_common_short_token_ends_the_scan_and_shared_tokens_are_searched_once():
    from torchlint.rules import rules_by_code
    from torchlint.rules.base import all_present

    by_code = rules_by_code()
    text = _CountingText("import torch\nvalue = 3\n")
    _CountingText.searches = 0
    assert all_present(by_code["TL904"].requires, text)  # `lu` (in `value`): one of its 39 names
    assert _CountingText.searches == 2  # `lu`, then `torch`; was: a search for each name before `lu`
    loaders = ("TL101", "TL102", "TL103", "TL104")
    _CountingText.searches = 0
    assert not any(all_present(by_code[code].requires, text) for code in loaders)
    assert _CountingText.searches == 1  # `DataLoader`, once for the four rules


def test_token_answers_are_never_those_of_another_thread_s_text():
    """The language server lints from threads: answers kept for one text never serve another
    (a smoke test with threads taking turns as often as CPython allows; what makes it safe is
    that the text and its answers are replaced as one tuple and read once per call)."""
    import threading

    from torchlint.rules import rules_by_code
    from torchlint.rules.base import all_present

    requires = rules_by_code()["TL101"].requires
    wrong = []

    def ask(text, expected):
        for _ in range(3000):
            if all_present(requires, text) != expected:
                wrong.append(text)

    threads = [threading.Thread(target=ask, args=(f"from x import DataLoader  # {i}\n" * (i % 2) + f"y = {i}\n", i % 2 == 1))
               for i in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between almost any two bytecodes
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []


def test_no_rule_writes_its_own_text_prefilter():
    """Issue 28: a rule declares where it can fire (its tokens, its ast question); it does not
    hand-write how the engine reads it. The text prefilter is the ``requires`` tokens, the same
    with or without CPython's tree: no rule overrides ``may_fire`` or ``may_fire_in_project``
    (TL202's and TL301's text scans that stood in for their questions where there was no tree
    are gone), and the engine asks one text prefilter only."""
    from torchlint.rules.base import Rule, all_present

    for rule in all_rules():
        for method in ("may_fire", "may_fire_in_project"):
            owner = next(k for k in rule.__mro__ if method in vars(k))
            assert owner is Rule, (rule.code, method)
        assert not hasattr(rule, "may_fire_before_ast"), rule.code
        text = "import torch\nx = torch.zeros(3)\ny = x.to(device)\n"
        assert rule.may_fire(text) == all_present(rule.requires, text), rule.code


def test_a_rule_declares_the_calls_it_subscribes_to_and_the_engine_derives_its_prefilters():
    """Issue 28: where a rule can fire is declared (``calls``), not hand-written: its text
    tokens and its ast question are derived, and a rule declaring ``calls`` cannot write them
    too. TL404, TL906 and TL204 ask exactly for such calls."""
    import ast
    import inspect

    from torchlint.astindex import AstIndex
    from torchlint.rules import rules_by_code
    from torchlint.rules.base import Rule

    by_code = rules_by_code()
    for code in ("TL404", "TL906", "TL204"):
        rule = by_code[code]
        source = inspect.getsource(rule)
        assert rule.calls and "requires =" not in source and "ast_candidate =" not in source, code
        assert rule.requires == (tuple(sorted({name.rsplit(".", 1)[-1] for name in rule.calls})),), code

    class Subscriber(Rule):
        code, name = "TL999", "subscriber"
        calls = frozenset({"torch.cuda.synchronize"})

    assert Subscriber.requires == (("synchronize",),)
    for source, called in [("import torch\ntorch.cuda.synchronize()\n", True),
                           ("from torch.cuda import synchronize as s\ns()\n", True),
                           ("import torch\n# torch.cuda.synchronize()\nx = 'synchronize()'\n", False),
                           ("import os\nos.synchronize()\n", False)]:
        assert Subscriber.ast_candidate(AstIndex(ast.parse(source), source)) is called, source
        assert Subscriber.may_fire(source) or not called  # the tokens never drop what the question keeps
    with pytest.raises(TypeError):
        type("Both", (Rule,), {"code": "TL998", "calls": frozenset({"torch.x"}), "requires": (("x",),)})
