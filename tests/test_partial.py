"""Partial parses (torchlint/partial.py): libcst parses only the top-level definitions where a
finding can be; findings, ranges and fixes must be exactly those of a whole parse."""

from __future__ import annotations

import ast
import pickle
import textwrap
from pathlib import Path

import pytest

import torchlint.engine as engine
import torchlint.partial as partial
from torchlint.astindex import statement_first_line
from torchlint.config import Settings
from torchlint.partial import Piece, Plan, kept_rules, partial_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _as_json(diagnostics):
    return [d.to_json() for d in diagnostics]


def _whole(monkeypatch, text, path, settings):
    with monkeypatch.context() as m:
        m.setattr(engine, "plan_statements", lambda *a, **k: None)
        return engine.lint_source(text, path, settings)


@pytest.mark.parametrize("preview", [False, True])
def test_every_fixture_lints_the_same_from_a_partial_parse(monkeypatch, preview):
    """With no minimum cut, every fixture whose rules allow it is linted from a partial parse:
    the same findings, ranges and fixes as from the whole file."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    monkeypatch.setattr(partial, "MIN_TABLE_LINES", 1)  # every assignment of two lines or more
    real_plan = engine.plan_statements
    plans = []
    monkeypatch.setattr(engine, "plan_statements", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    settings = Settings(preview=preview)
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        # as written, and with a definition without candidate sites before and after the code
        # (a stub at each end, whatever the fixture's own definitions hold)
        for variant in (text, f"def _filler(x):\n    x += 1\n    return x\n\n\n{text}\n\nclass _Filler:\n    y = 1\n    z = 2\n"):
            if variant is not text and (text.startswith(("#!", "from __future__")) or "\nfrom __future__" in text):
                continue  # must stay first
            found = engine.lint_source(variant, str(path), settings)
            assert _as_json(found) == _as_json(_whole(monkeypatch, variant, str(path), settings)), path
    assert sum(plan is not None for plan in plans) >= 6  # the partial path was exercised (local rules)


SOURCE = '''\
"""Module docstring."""
import torch.nn as nn


@decorator(
    arg=1,
)
def helper(x):
    """A docstring."""
    return x + 1
    # a comment that closes the body


# leads the next class
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))

def one_liner(): return 1
a = 1; b = 2
'''


def test_partial_text_keeps_headers_and_the_lines_between_statements():
    tree = ast.parse(SOURCE)
    pieces = (
        Piece(1, 1, 0, 1), Piece(2, 4, 0, 2),
        Piece(5, 13, 8, 10),  # the decorated helper: its header is lines 5-8
        Piece(14, 18, 0, 18), Piece(19, 19, 0, 19), Piece(20, 21, 0, 20),
    )
    plan = Plan(pieces, tuple(statement_first_line(s) for s in tree.body), len(SOURCE))
    cut = partial_text(SOURCE, plan)
    assert cut == SOURCE.replace('    """A docstring."""\n    return x + 1\n', "    ...\n")
    assert partial_text(SOURCE + " ", plan) is None  # made for another text
    module = engine._parse_cut(cut, plan)[0]
    assert module is not None and len(module.body) == len(pieces)


def test_a_plan_cuts_only_definitions_without_candidate_sites(monkeypatch):
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    settings = Settings()
    rules = engine.candidate_rules(SOURCE, "m.py", settings, settings.codes_for_path("m.py"), tree=ast.parse(SOURCE))
    assert "TL301" in [r.code for r in rules] and all(r.statement_local for r in rules)
    plan = engine.statement_plan(SOURCE, "m.py", settings, rules)
    assert [p.stub_header for p in plan.pieces] == [0, 0, 8, 0, 0, 0]  # helper cut, Net kept, the one-liner cannot be
    assert _as_json(engine.lint_source(SOURCE, "m.py", settings)) == _as_json(_whole(monkeypatch, SOURCE, "m.py", settings))


def test_no_plan_for_rules_that_read_other_definitions_or_for_odd_line_ends(monkeypatch):
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    from torchlint.rules import rules_by_code

    by_code = rules_by_code()
    assert engine.statement_plan(SOURCE, "m.py", Settings(), [by_code["TL301"]]) is not None
    assert engine.statement_plan(SOURCE, "m.py", Settings(), [by_code["TL301"], by_code["TL102"]]) is not None  # TL102: no DataLoader
    with_loader = SOURCE + "from torch.utils.data import DataLoader\nloader = DataLoader(data)\n"
    assert engine.statement_plan(with_loader, "m.py", Settings(), [by_code["TL301"], by_code["TL102"]]) is None
    assert engine.statement_plan(SOURCE.replace("\n", "\r\n"), "m.py", Settings(), [by_code["TL301"]]) is None
    assert not by_code["TL101"].statement_local  # it reads a dataset class of the same file


def test_a_statement_that_cannot_be_placed_falls_back_to_a_whole_parse(monkeypatch):
    """A plan whose first lines do not match the text: positions cannot be placed, the file is
    linted again from a whole parse, with the same result."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    settings = Settings()
    real_plan = engine.plan_statements

    def shifted(*args):
        plan = real_plan(*args)
        return plan._replace(first_lines=tuple(line + 1 for line in plan.first_lines))

    whole = _whole(monkeypatch, SOURCE, "m.py", settings)
    assert [d.code for d in whole] == ["TL301"]
    parses = []
    real_parse = engine.parse_with_lines
    monkeypatch.setattr(engine, "parse_with_lines", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    monkeypatch.setattr(engine, "plan_statements", shifted)
    # The finding is in a method: its statement is placed from CPython's tree of its class's own
    # text and its code checked against the text there, whatever lines the plan gives.
    assert _as_json(engine.lint_source(SOURCE, "m.py", settings)) == _as_json(whole)
    assert parses == []
    # Placed from the plan's lines alone (no nested statement), the shifted plan is caught.
    from torchlint.positions import Positions

    monkeypatch.setattr(Positions, "_nested_span", lambda self, node, path: None)
    assert _as_json(engine.lint_source(SOURCE, "m.py", settings)) == _as_json(whole)
    assert parses == [1]  # the fallback


def test_phase_one_hands_its_plan_to_phase_three_through_the_pool():
    plan = Plan((Piece(1, 2, 0, 2),), (1,), 10)
    kept = pickle.loads(pickle.dumps(kept_rules(["TL301", "TL202"], plan)))
    assert kept == {"TL301", "TL202"} and kept.plan == plan
    assert pickle.loads(pickle.dumps(kept_rules([], None))).plan is None


def test_phase_one_makes_the_plan(monkeypatch):
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    kept = engine.first_pass(SOURCE, "m.py", Settings())[3]
    assert "TL301" in kept and kept.plan is not None and kept.plan.pieces[2].stub_header == 8
    text = textwrap.dedent("""\
        import torch.nn as nn
        m = nn.DataParallel(m)
    """)
    assert engine.first_pass(text, "m.py", Settings())[3].plan is None  # nothing to cut


def test_project_facts_keep_a_file_whole(tmp_path):
    """A helper the project index says runs every step (``log_stats``) has no candidate site of
    its own; a partial parse made for another rule's site (TL202 in ``make``) once stubbed it
    out, and TL201's finding there was lost."""
    from torchlint.project import ProjectIndex, summarize

    train = textwrap.dedent("""\
        from metrics import log_stats


        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                log_stats(loss)
    """)
    filler = "".join(f"\n\ndef helper_{i}(a, b):\n" + "".join(f"    a = a + b * {j}\n" for j in range(12))
                     + "    return a\n" for i in range(12))
    metrics = textwrap.dedent("""\
        import torch


        def log_stats(loss):
            value = loss.item()
            print(value)


        def make(device):
            x = torch.zeros(3).cuda()
            return x
    """) + filler
    texts = {"train.py": train, "metrics.py": metrics}
    facts = ProjectIndex({p: summarize(ast.parse(t), p, t) for p, t in texts.items()}).facts_for("metrics.py")
    assert facts.digest
    settings = Settings()
    found = [(d.code, d.location.row) for d in engine.lint_source(metrics, "metrics.py", settings, project=facts)]
    assert found == [("TL201", 5), ("TL202", 10)]
    assert engine.lint_source(metrics, "metrics.py", settings, project=facts, incremental=True)[0].code == "TL201"
    assert engine.statement_plan(metrics, "metrics.py", settings, engine.candidate_rules(
        metrics, "metrics.py", settings, settings.codes_for_path("metrics.py"))) is not None  # a cut was possible


@pytest.mark.parametrize("preview", [False, True])
def test_every_fixture_lints_the_same_when_rules_walk_only_their_definitions(monkeypatch, preview):
    """The editor's walk plan (``partial.walk_plan``): each rule walks only the definitions its
    question says yes to. The same findings, ranges and fixes as when every rule walks every
    statement, on every fixture, as written and between definitions no rule needs (one with a
    loop, which the loop rules' questions look for)."""
    real_plan = engine._walk_plan
    plans = []
    monkeypatch.setattr(engine, "_walk_plan", lambda *a: plans.append(real_plan(*a)) or plans[-1])
    settings = Settings(preview=preview)
    filler = "def _filler(x):\n    for i in range(3):\n        x += i\n    return x\n\n\n"
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for variant in (text, f"{filler}{text}\n\nclass _Filler:\n    y = 1\n    z = 2\n"):
            if variant is not text and (text.startswith(("#!", "from __future__")) or "\nfrom __future__" in text):
                continue  # must stay first
            found = engine.lint_source(variant, str(path), settings, incremental=True)
            with monkeypatch.context() as m:
                m.setattr(engine, "_walk_plan", lambda *a: None)
                every = engine.lint_source(variant, str(path), settings, incremental=True)
            assert _as_json(found) == _as_json(every), path
    spared = [plan for plan in plans if plan is not None and any(len(rules) < max(map(len, plan)) for rules in plan)]
    assert len(spared) >= 20  # definitions were left out of some rule's walk


def test_a_walk_plan_follows_the_module_statements():
    tree = ast.parse(SOURCE)
    groups = partial.statement_groups(tree.body)
    assert [len(g) for g in groups] == [1, 1, 1, 1, 1, 2]  # `a = 1; b = 2` is one libcst statement
    from torchlint.astindex import AstIndex
    from torchlint.rules import all_rules

    rules = [r for r in all_rules() if r.code in ("TL301", "TL701")]
    plan = partial.walk_plan(tree, rules, AstIndex(tree, SOURCE))
    codes = [[r.code for r in step] for step in plan]
    # both walk the statements that are not definitions; TL301 the class with the conv too, and
    # TL701 (no DataParallel anywhere) no definition; neither walks the functions
    assert codes == [["TL301", "TL701"], ["TL301", "TL701"], [], ["TL301"], [], ["TL301", "TL701"]]
    # a rule that reads other definitions walks nothing when its question says no for the file
    loaders = [r for r in all_rules() if r.code == "TL102"]
    assert partial.walk_plan(tree, loaders, AstIndex(tree, SOURCE)) == ((),) * 6


def test_an_editor_keeps_a_whole_file_yes_and_asks_a_no_again(monkeypatch):
    """``walk_plan(..., answers)``: a rule that reads other definitions is asked about the whole
    file once while its answer is yes (a yes kept after the edit that removed its last site only
    makes it walk and find nothing); a no is asked at every lint, so the rule starts walking as
    soon as a site is typed in. The findings are a fresh lint's throughout."""
    from torchlint.config import Settings
    from torchlint.rules import rules_by_code

    tl101, tl402 = rules_by_code()["TL101"], rules_by_code()["TL402"]
    asked, asked_402 = [], []
    real, real_402 = tl101.ast_candidate, tl402.ast_candidate
    monkeypatch.setattr(tl101, "ast_candidate", staticmethod(lambda index: asked.append(1) or real(index)))
    monkeypatch.setattr(tl402, "ast_candidate", staticmethod(lambda index: asked_402.append(1) or real_402(index)))
    settings = Settings(select=("TL101",), preview=True)  # TL101 is a preview rule (issue 29)
    filler = "".join(f"\n\ndef f{i}(x):\n    return x + {i}\n" for i in range(30))
    loader = "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef make(ds):\n    return DataLoader(ds)\n" + filler
    texts = [loader, loader.replace("x + 7", "x + 70"), loader.replace("DataLoader(ds)", "list(ds)"),
             loader.replace("DataLoader(ds)", "list(ds)").replace("x + 8", "x + 80"), loader]
    counts, found = [], []
    for text in texts:
        asked.clear()
        found.append([(d.code, d.location.row) for d in engine.lint_source(text, "w.py", settings, incremental=True)])
        counts.append(len(asked))
        assert found[-1] == [(d.code, d.location.row) for d in engine.lint_source(text, "w.py", settings)]
    assert found == [[("TL101", 6)], [("TL101", 6)], [], [], [("TL101", 6)]]
    # asked by the prefilter, then by the plan; then by the prefilter only while the file's
    # answer stays yes (the third text has no `DataLoader` call: its prefilter says no)
    assert counts[0] == 2 and counts[1] == 1 and counts[4] == 1
    # TL402 (an evaluation loop with autograd on) is asked by the plan alone (TL101's yes ends
    # the prefilter), says no while the file has no loop, and is asked again at each lint until
    # one is typed in
    settings = Settings(select=("TL101", "TL402"), preview=True)
    evaluation = "\n\ndef validate(net, loader):\n    for x, y in loader:\n        net(x)\n"
    base = loader + "\n\ndef evaluate(x):\n    return x\n"  # the words its prefilter needs, no loop
    for text, expected in ((base, 1), (base.replace("x + 5", "x + 50"), 1), (base + evaluation, 1),
                           ((base + evaluation).replace("x + 6", "x + 60"), 0)):
        asked_402.clear()
        found = [(d.code, d.location.row) for d in engine.lint_source(text, "w.py", settings, incremental=True)]
        assert len(asked_402) == expected
        assert found == [(d.code, d.location.row) for d in engine.lint_source(text, "w.py", settings)]


def test_loop_questions_see_loaders_bound_in_other_definitions():
    """``AstIndex.loader_loops`` asked of one definition: a loop over a name that another
    definition assigns a ``DataLoader`` to counts (``heuristics.dataloader_names`` is the whole
    file's), as do ``*loader*`` names and aliased ``DataLoader`` calls; a loop over anything
    else does not. ``stepping_loops``: a loop around ``.backward()``/``.step()``."""
    from torchlint.astindex import AstIndex

    source = textwrap.dedent("""\
        from torch.utils.data import DataLoader as DL


        def build(ds):
            batches = DL(ds)
            return batches


        def consume(batches):
            for x in batches:
                print(x)


        def plain(items):
            for x in items:
                print(x)


        def direct(ds):
            for x in DL(ds):
                print(x)


        def named(self):
            for x in enumerate(self.val_loader):
                print(x)


        def steps(model, opt):
            while True:
                model.loss().backward()
                opt.step()
    """)
    tree = ast.parse(source)
    index = AstIndex(tree, source)
    base = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]
    answers = {s.name: (index.restricted(base + [s]).loader_loops(), index.restricted(base + [s]).stepping_loops())
               for s in tree.body if isinstance(s, ast.FunctionDef)}
    assert answers == {"build": (False, False), "consume": (True, False), "plain": (False, False),
                       "direct": (True, False), "named": (True, False), "steps": (False, True)}


CLASS_SOURCE = '''\
import torch
from torch.utils.checkpoint import checkpoint

default_cfgs = dict(
    small=dict(url="a", crop=0.9),
    base=dict(url="b", crop=0.9),
    large=dict(url="c", crop=0.95),
    huge=dict(url="d", crop=1.0),
    giant=dict(url="e", crop=1.0),
    tiny=dict(url="f", crop=0.9),
)
VARIANTS = dict(
    a=1,
    b=2,
    c=3,
    d=4,
    e=5,
    f=6,
    g=7,
)


class Net(torch.nn.Module):
    width = 4

    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks
        self.scale = 2
        self.bias = 1

    @torch.no_grad()
    def reset(self):
        for block in self.blocks:
            block.reset()
        return self

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x)
        return x

    def extra(self, x): return (x +
        1)


def build(name):
    return Net(VARIANTS[name])
'''


def _plan(text, codes):
    from torchlint.rules import rules_by_code

    by_code = rules_by_code()
    return engine.statement_plan(text, "m.py", Settings(), [by_code[c] for c in codes])


def test_a_class_kept_for_method_local_rules_leaves_out_its_other_methods(monkeypatch):
    """TL903 is ``method_local``: of ``Net`` libcst reads ``forward`` and the headers of the other
    methods (``extra``, whose body starts on its header's line, stays whole); an assignment no
    other line reads is ``name = ...``; the finding, its range and its fix are the whole parse's."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    monkeypatch.setattr(partial, "MIN_TABLE_LINES", 5)
    plan = _plan(CLASS_SOURCE, ["TL903"])
    net = next(p for p in plan.pieces if p.holes)
    assert net.holes == ((26, 30), (33, 36))  # __init__ and reset (its decorator kept)
    assert [p.replacement for p in plan.pieces if p.replacement] == ["default_cfgs = ...\n"]  # VARIANTS is read
    cut = partial_text(CLASS_SOURCE, plan)
    assert "def __init__(self, blocks):\n        ...\n" in cut and "    @torch.no_grad()\n    def reset(self):\n        ...\n" in cut
    assert "x = checkpoint(block, x)" in cut and "def extra(self, x): return (x +\n        1)" in cut
    assert "crop" not in cut and "g=7" in cut
    settings = Settings()
    found = engine.lint_source(CLASS_SOURCE, "m.py", settings)
    assert [(d.code, d.location.row, d.location.column) for d in found] == [("TL903", 40, 17)]
    assert _as_json(found) == _as_json(_whole(monkeypatch, CLASS_SOURCE, "m.py", settings))


def test_no_holes_for_rules_that_pair_sites_across_methods(monkeypatch):
    """TL301 reads ``__init__`` and ``forward`` together (conv then BatchNorm): a class it keeps
    stays whole even beside a method-local rule."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    monkeypatch.setattr(partial, "MIN_TABLE_LINES", 5)
    text = CLASS_SOURCE.replace("        self.bias = 1\n", "        self.conv = torch.nn.Conv2d(3, 8, 3)\n        self.bn = torch.nn.BatchNorm2d(8)\n")
    assert _plan(text, ["TL903"]).pieces[4].holes  # TL903 alone: holes in Net
    plan = _plan(text, ["TL301", "TL903"])
    assert plan is not None and plan.pieces[2].replacement and not any(p.holes for p in plan.pieces)
    assert partial_text(text, plan).count("\n") == text.count("\n") - 7  # only default_cfgs left out


def test_a_table_with_a_candidate_site_or_read_elsewhere_is_kept(monkeypatch):
    """An assignment is left out only where no question says yes for it and no other line
    names what it binds (not even a string: ``__all__``)."""
    from torchlint.astindex import AstIndex

    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    monkeypatch.setattr(partial, "MIN_TABLE_LINES", 5)
    site = CLASS_SOURCE.replace('    tiny=dict(url="f", crop=0.9),\n', '    tiny=checkpoint(f, x),\n')
    # its site is in every restricted question (module statements are): nothing is left out
    assert _plan(site, ["TL903"]) is None
    named = CLASS_SOURCE + '__all__ = ["default_cfgs"]\n'
    plan = _plan(named, ["TL903"])
    assert plan is not None and not any(p.replacement for p in plan.pieces)
    tree = ast.parse(CLASS_SOURCE)
    index = AstIndex(tree, CLASS_SOURCE, None)
    assert [partial._unread_assignment(s, index) for s in tree.body[2:4]] == [True, False]
    pair = ast.parse("a, b = (\n 1,\n 2)\n")
    assert not partial._unread_assignment(pair.body[0], AstIndex(pair, "a, b = (\n 1,\n 2)\n", None))


def test_each_method_local_rule_finds_the_same_in_a_class_with_holes(monkeypatch):
    """TL202, TL903 and TL904 (the ``method_local`` rules), each in one method of a class whose
    other methods are left out: findings, ranges and fixes as from the whole file."""
    from torchlint.rules import all_rules

    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    assert sorted(r.code for r in all_rules() if r.method_local) == ["TL202", "TL903", "TL904"]
    text = textwrap.dedent('''\
        import torch
        from torch.utils.checkpoint import checkpoint


        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = torch.nn.Linear(4, 4)
                self.scale = 1.0

            def mask(self, n, device):
                eye = torch.eye(n)
                return eye.to(device)

            def solve(self, a, b):
                solution = torch.solve(b, a)
                return solution

            def forward(self, x):
                x = checkpoint(self.layer, x)
                return x * self.scale

            def reset(self):
                self.scale = 1.0
                return self
    ''')
    settings = Settings()
    whole = _whole(monkeypatch, text, "m.py", settings)
    assert sorted(d.code for d in whole) == ["TL202", "TL903", "TL904"]
    for code, kept in (("TL202", "def mask"), ("TL903", "def forward"), ("TL904", "def solve")):
        plan = _plan(text, [code])
        cut = partial_text(text, plan)
        assert cut.count("        ...\n") == 4 and kept + "(self" in cut, code  # three methods and reset left out
        only = [d for d in whole if d.code == code]
        found = engine.lint_source(text, "m.py", Settings(select=(code,)))
        assert _as_json(found) == _as_json(only), code


@pytest.mark.parametrize("source", [
    # a compatibility import in another function does not reach `batched`'s scope: TL904's
    # `vmap(...)` is reported both ways (the whole-file model scopes compat_imported_names)
    "import torch\nfrom functorch import vmap\n\n\ndef batched(f, x):\n    return vmap(f)(x)\n\n\n"
    "def setup():\n    try:\n        from functorch import vmap\n    except ImportError:\n        vmap = None\n"
    "    a = 1\n    return a\n",
    # a changed autocast default in another function withholds TL404's fix
    "import torch\n\n\ndef train(model, x):\n    with torch.cuda.amp.autocast():\n        y = model(x)\n"
    "    return y\n\n\ndef setup():\n    torch.set_autocast_dtype('cuda', torch.float16)\n    a = 1\n"
    "    b = 2\n    return a + b\n",
    # gradients added into in another function silence TL401 (`_accumulates_into_grads`)
    "import torch\n\n\ndef sync(params):\n    for p in params:\n        p.grad += 1\n    return params\n\n\n"
    "def train(model, opt, loader):\n    for x in loader:\n        opt.zero_grad(set_to_none=False)\n"
    "        model(x).sum().backward()\n        opt.step()\n",
])
def test_what_a_rule_reads_in_other_definitions_is_not_cut_out(monkeypatch, source):
    """Findings and fixes of a partial parse are the whole parse's when a statement-local rule
    reads other definitions for something no question asks about: TL904/TL404's compatibility
    imports (from the whole-file model, ``model.py``), TL401's gradient accumulation
    (``keep_question`` keeps that definition), TL404's autocast setters (read from the text). All
    three once differed: a TL904 and a TL401 finding the whole parse does not have, a TL404 fix it
    withholds."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    for settings in (Settings(), Settings(select=("TL401", "TL404", "TL904"))):
        whole = _whole(monkeypatch, source, "m.py", settings)
        assert _as_json(engine.lint_source(source, "m.py", settings)) == _as_json(whole)
    if "try:" in source:  # the model reads the compatibility import: its definition may be cut
        plan = _plan(source, ["TL904"])
        assert plan is not None and any(p.stub_header or p.dropped for p in plan.pieces)
        assert [d.code for d in engine.lint_source(source, "m.py", Settings(select=("TL904",)))] == ["TL904"]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("TL*.py")), ids=lambda p: p.stem)
def test_each_rule_alone_lints_its_fixture_the_same_from_a_partial_parse(monkeypatch, path):
    """Each rule selected alone on its own fixture (between fillers): with every rule selected, a
    rule that reads other definitions keeps most files whole, and a statement-local rule that
    reads them too went unseen (TL401, TL404 and TL904 did)."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    monkeypatch.setattr(partial, "MIN_TABLE_LINES", 1)
    text = path.read_text(encoding="utf-8")
    settings = Settings(select=(path.stem.split("_")[0],), preview=True)
    variants = [text]
    if not (text.startswith(("#!", "from __future__")) or "\nfrom __future__" in text):
        variants.append(f"def _filler(x):\n    x += 1\n    return x\n\n\n{text}\n\nclass _Filler:\n    y = 1\n    z = 2\n")
    for variant in variants:
        whole = _whole(monkeypatch, variant, str(path), settings)
        assert _as_json(engine.lint_source(variant, str(path), settings)) == _as_json(whole)


DROP_SOURCE = '''\
import torch.nn as nn


def unused(x):
    x += 1
    return x


# leads Net
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))

    def forward(self, x):
        return self.layer(scaled(x))


def make(x=Net):
    x = x(2)
    return x

def base():
    y = 2
    return y


@register(base)
def scaled(x):
    x *= 2
    return x


def closes_with_a_comment():
    z = 3
    return z
    # indented: libcst gives it to this body


def after_the_comment():
    w = 4
    return w
'''


def test_definitions_no_kept_line_names_are_left_out_altogether(monkeypatch):
    """``unused`` and ``make`` are named by no line libcst reads (``make`` names ``Net``, not the
    other way round): dropped, with the blank and comment lines before them. ``scaled`` is
    named in ``Net``: its stub stays, and so does ``base``, named in its decorator. A body
    followed by an indented comment keeps its next definition, and itself, in place. The
    finding right before a dropped definition is placed from the plan's lines alone (no
    nested statement, no whole parse), as the whole parse places it."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    plan = _plan(DROP_SOURCE, ["TL301"])
    names = ["import", "unused", "Net", "make", "base", "scaled", "closes_with_a_comment", "after_the_comment"]
    assert [name for name, p in zip(names, plan.pieces) if p.dropped] == ["unused", "make"]
    assert [name for name, p in zip(names, plan.pieces) if p.stub_header and not p.dropped] == [
        "base", "scaled", "closes_with_a_comment", "after_the_comment"]
    assert plan.first_lines == (1, 10, 23, 28, 34, 40)
    cut = partial_text(DROP_SOURCE, plan)
    lines = DROP_SOURCE.splitlines(keepends=True)
    assert cut == "".join(
        lines[0:1] + lines[6:16] + lines[21:23] + ["    ...\n"] + lines[25:29] + ["    ...\n"]
        + lines[31:34] + ["    ...\n"] + lines[36:40] + ["    ...\n"])
    module, first_lines = engine._parse_cut(cut, plan)
    assert module is not None and len(module.body) == 6
    assert list(engine._ends(module, plan).values()) == [1 + 1, 16 + 1]  # the import, Net

    settings = Settings()
    whole = _whole(monkeypatch, DROP_SOURCE, "m.py", settings)
    assert [(d.code, d.location.row) for d in whole] == [("TL301", 13)]
    parses = []
    real_parse = engine.parse_with_lines
    monkeypatch.setattr(engine, "parse_with_lines", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    assert _as_json(engine.lint_source(DROP_SOURCE, "m.py", settings)) == _as_json(whole)
    from torchlint.positions import Positions

    monkeypatch.setattr(Positions, "_nested_span", lambda self, node, path: None)
    assert _as_json(engine.lint_source(DROP_SOURCE, "m.py", settings)) == _as_json(whole)
    assert parses == []
    # Without the lines after Net's own last one (``ends``), Net cannot be placed: a whole parse
    monkeypatch.setattr(engine, "_ends", lambda module, plan: {})
    assert _as_json(engine.lint_source(DROP_SOURCE, "m.py", settings)) == _as_json(whole)
    assert parses == [1]


def test_a_stub_named_only_by_dropped_or_left_out_lines_is_dropped_too(monkeypatch):
    """Lines libcst does not read name nothing: a left-out body, a dropped definition's header."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    text = DROP_SOURCE.replace("return self.layer(scaled(x))", "return self.layer(x)").replace(
        "def unused(x):\n    return x + 1", "def unused(x=scaled):\n    return make(x)")
    plan = _plan(text, ["TL301"])
    names = ["import", "unused", "Net", "make", "base", "scaled", "closes_with_a_comment", "after_the_comment"]
    assert [name for name, p in zip(names, plan.pieces) if p.dropped] == ["unused", "make", "base", "scaled"]
    settings = Settings()
    assert _as_json(engine.lint_source(text, "m.py", settings)) == _as_json(_whole(monkeypatch, text, "m.py", settings))
