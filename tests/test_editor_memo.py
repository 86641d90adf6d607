"""The editor path keeps statement-local rules' findings per definition between lints
(``torchlint/editor_memo.py``): the findings must be those of a fresh lint after any edit."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from torchlint import editor_memo, engine
from torchlint.config import Settings
from torchlint.rules.base import Rule

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted((ROOT / "fixtures").glob("*.py"))


def _key(diagnostics):
    return [d.to_json() | {"noqa_rows": d.noqa_rows} for d in diagnostics]


@pytest.fixture
def served(monkeypatch):
    """Counts the (rule, definition) pairs each lint serves from kept findings."""
    editor_memo.clear()
    counts = []
    real = editor_memo.plan

    def counting(*args, **kwargs):
        reuse = real(*args, **kwargs)
        counts.append(sum(len(codes) for codes in reuse._served.values()) if reuse is not None else 0)
        return reuse

    monkeypatch.setattr(editor_memo, "plan", counting)
    yield counts
    editor_memo.clear()


def _fresh(text: str, path: str, settings: Settings, **kwargs):
    return engine.lint_source(text, path, settings, **kwargs)


def _edit(rng: random.Random, lines, typed_lines=(), typed=()):
    """One random editor edit: a line typed, removed, duplicated or changed; definitions moved.
    ``typed_lines`` and ``typed``: more lines and pieces of text an edit may type in."""
    lines = list(lines)
    kind = rng.randrange(6)
    i = rng.randrange(len(lines)) if lines else 0
    if kind == 0:
        lines.insert(i, rng.choice(["\n", "# a note\n", "x = 1\n", "import torch as th\n", "    pass\n", *typed_lines]))
    elif kind == 1 and len(lines) > 1:
        del lines[i]
    elif kind == 2 and lines:
        lines.insert(i, lines[i])
    elif kind == 3 and lines:
        line = lines[i]
        j = rng.randrange(len(line)) if line else 0
        lines[i] = line[:j] + rng.choice(["", "a", " ", ")", ".cuda()", "(", ":", *typed]) + line[j + 1:]
    elif kind == 4:  # a definition at the top, pushing the others down
        lines[:0] = ["def _typed():\n", "    return 1\n", "\n", "\n"]
    else:  # the last lines moved to the front
        cut = rng.randrange(len(lines)) if lines else 0
        lines = lines[cut:] + lines[:cut]
    return lines


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_random_edits_give_the_findings_of_a_fresh_lint(path, served):
    """Each fixture (preview rules on) through 12 random edits, linted as an editor does after
    each: the same findings, ranges, fixes and noqa rows as a whole lint of that text."""
    settings = Settings(preview=True)
    text = path.read_text(encoding="utf-8")
    filler = "\n\ndef _other(a):\n    return a\n\n\nclass _Kept:\n    y = 1\n"
    lines = (text + filler).splitlines(keepends=True)
    rng = random.Random(path.name)
    engine.lint_source("".join(lines), str(path), settings, incremental=True)
    for _ in range(12):
        lines = _edit(rng, lines)
        variant = "".join(lines)
        found = engine.lint_source(variant, str(path), settings, incremental=True)
        assert _key(found) == _key(_fresh(variant, str(path), settings)), (path, variant)


def test_the_random_edits_serve_kept_findings(served):
    """The test above is not vacuous: over the fixtures, kept findings were served."""
    settings = Settings(preview=True)
    for path in FIXTURES:
        text = path.read_text(encoding="utf-8")
        engine.lint_source(text, str(path), settings, incremental=True)
        engine.lint_source("# typed\n" + text if not text.startswith(("#!", "from __future__", '"""')) else text + "\n# typed\n",
                           str(path), settings, incremental=True)
    assert sum(served) > 50


MOVED = '''import torch


def other():
    return 1


def make(device):
    x = torch.zeros(8).to(device)
    return x
'''


def test_a_kept_finding_moves_with_its_definition(served):
    settings = Settings()
    first = engine.lint_source(MOVED, "m.py", settings, incremental=True)
    assert [d.code for d in first] == ["TL202"]
    moved = MOVED.replace("    return 1\n", "    a = 1\n    b = 2\n    c = 3\n    return 1\n")
    second = engine.lint_source(moved, "m.py", settings, incremental=True)
    assert served[-1] >= 1  # TL202 in `make` came from the first lint
    assert _key(second) == _key(_fresh(moved, "m.py", settings))
    assert second[0].location.row == first[0].location.row + 3
    assert second[0].fix is not None
    assert [e.location.row for e in second[0].fix.edits] == [e.location.row + 3 for e in first[0].fix.edits]


def test_an_edit_of_the_imports_is_not_served_stale(served):
    """The statements that are not definitions are part of every kept answer's key: with
    ``torch`` no longer imported, ``torch.zeros`` is not torch's."""
    settings = Settings()
    engine.lint_source(MOVED, "m.py", settings, incremental=True)
    changed = MOVED.replace("import torch\n", "import numpy as torch\n")
    found = engine.lint_source(changed, "m.py", settings, incremental=True)
    assert served[-1] == 0
    assert _key(found) == _key(_fresh(changed, "m.py", settings)) == []


TOP = '''import torch


def other():
    return 1


grid = [1, 2]


def make(device):
    return torch.zeros(8).to(device)
'''


def _served_statements(monkeypatch):
    """The statement indexes each lint serves something in."""
    found = []
    real = editor_memo.plan

    def recording(*args, **kwargs):
        reuse = real(*args, **kwargs)
        found.append(set(reuse._served) if reuse is not None else set())
        return reuse

    monkeypatch.setattr(editor_memo, "plan", recording)
    return found


def test_the_module_statements_are_served_once_no_definition_is_walked(monkeypatch):
    """A statement-local rule that walks no definition after an edit (its findings elsewhere
    are kept) leaves the module's own statements too: their kept answers serve them."""
    editor_memo.clear()
    served = _served_statements(monkeypatch)
    settings = Settings()
    first = engine.lint_source(TOP, "m.py", settings, incremental=True)
    assert [d.code for d in first] == ["TL202"]
    edited = TOP.replace("def other():\n", "def other():\n    a = 1\n    b = 2\n")
    second = engine.lint_source(edited, "m.py", settings, incremental=True)
    assert served[-1] == {0, 2, 3}  # the import, `grid = ...` and `make`: not walked again
    assert _key(second) == _key(_fresh(edited, "m.py", settings))
    assert second[0].location.row == first[0].location.row + 2
    # a module statement edited: no kept answer for it, every rule walks them all again
    changed = edited.replace("grid = [1, 2]", "grid = torch.ones(3).cuda()")
    found = engine.lint_source(changed, "m.py", settings, incremental=True)
    assert 0 not in served[-1] and 2 not in served[-1]
    assert [d.location.row for d in found] == [10, 14]
    assert _key(found) == _key(_fresh(changed, "m.py", settings))


class _CallsModuleName(Rule):
    """A statement-local rule that reads the module's statements through its own visits (as the
    contract allows): a call, in a function, of a name a module-level assignment binds."""

    code = "TL998"
    name = "test-calls-module-name"
    message = "calls a module-level name"
    ast_candidate = staticmethod(lambda index: True)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.names: set = set()

    def visit_Assign(self, node) -> None:
        if len(self.ctx.ancestors) <= 2:  # the module, its statement line
            self.names.update(t.target.value for t in node.targets if hasattr(t.target, "value"))

    def visit_Call(self, node) -> None:
        if getattr(node.func, "value", None) in self.names and len(self.ctx.ancestors) > 2:
            self.report(node)


def test_a_rule_walking_a_definition_walks_the_module_statements(monkeypatch):
    """A rule still walking an edited definition walks the module's statements too (it may have
    read there, in its visits, what it needs): not served from kept findings."""
    editor_memo.clear()
    served = _served_statements(monkeypatch)
    settings = Settings()
    text = "helper = print\n\n\ndef f():\n    helper(1)\n\n\ndef g():\n    return 2\n"
    assert [d.code for d in engine.lint_source(text, "m.py", settings, rules=[_CallsModuleName], incremental=True)] == ["TL998"]
    edited = text.replace("    helper(1)\n", "    helper(1)\n    helper(2)\n")
    found = engine.lint_source(edited, "m.py", settings, rules=[_CallsModuleName], incremental=True)
    assert 0 not in served[-1]
    assert [d.location.row for d in found] == [5, 6]
    assert _key(found) == _key(_fresh(edited, "m.py", settings, rules=[_CallsModuleName]))


COMPAT = '''from functorch import vmap


def batched(f, x):
    return vmap(f)(x)


def other():
    return 1
'''


def test_a_compatibility_import_typed_into_another_definition_is_judged_by_scope(served):
    """TL904 is silenced by a compatibility import visible where the call is (the whole-file
    model, ``model.py``): one typed into another function does not reach ``batched``, so the kept
    finding stays, as a fresh lint says; one typed at module level silences it."""
    settings = Settings(preview=True)
    before = engine.lint_source(COMPAT, "c.py", settings, incremental=True)
    compat = COMPAT.replace("def other():\n    return 1\n", "def other():\n    try:\n        from functorch import vmap\n"
                            "    except ImportError:\n        vmap = None\n    return vmap\n")
    after = engine.lint_source(compat, "c.py", settings, incremental=True)
    assert [d.code for d in before] == ["TL904"]
    assert _key(after) == _key(_fresh(compat, "c.py", settings)) == _key(before)
    module_level = COMPAT.replace("from functorch import vmap\n", "try:\n    from functorch import vmap\n"
                                  "except ImportError:\n    vmap = None\n")
    assert _key(engine.lint_source(module_level, "c.py", settings, incremental=True)) == _key(_fresh(module_level, "c.py", settings)) == []
    again = engine.lint_source(COMPAT, "c.py", settings, incremental=True)
    assert _key(again) == _key(before)


STEP = '''import torch


def helper():
    torch.cuda.empty_cache()


def train(model, loader, optimizer):
    for batch in loader:
        model(batch).sum().backward()
        optimizer.step()
        helper()
'''


def test_project_facts_are_part_of_the_key_of_rules_that_read_them(served):
    """TL501 in a helper fires because a training loop in another definition calls it every
    step (the file's own project facts): once the call is gone, so is the finding."""
    settings = Settings()
    before = engine.lint_source(STEP, "s.py", settings, incremental=True)
    assert [d.code for d in before] == ["TL501"]
    assert _key(before) == _key(_fresh(STEP, "s.py", settings))
    gone = STEP.replace("        helper()\n", "        pass\n")
    after = engine.lint_source(gone, "s.py", settings, incremental=True)
    assert _key(after) == _key(_fresh(gone, "s.py", settings)) == []
    again = engine.lint_source(STEP, "s.py", settings, incremental=True)
    assert _key(again) == _key(before)


def test_a_fix_reaching_outside_its_definition_is_not_kept():
    from torchlint.diagnostics import Diagnostic, Edit, Fix, Location

    inside = Diagnostic("TL202", "n", "m", "p.py", Location(5, 1), Location(5, 9),
                        Fix("safe", "f", (Edit(Location(5, 1), Location(5, 9), "y"),)), 5, (5,))
    outside = Diagnostic("TL202", "n", "m", "p.py", Location(5, 1), Location(5, 9),
                         Fix("safe", "f", (Edit(Location(1, 1), Location(1, 1), "import torch\n"),)), 5, (5,))
    assert editor_memo._within(inside, 4, 6)
    assert not editor_memo._within(outside, 4, 6)
    moved = editor_memo._moved(inside, 2)
    assert (moved.location.row, moved.end_location.row, moved.fix.edits[0].location.row, moved.noqa_row,
            moved.noqa_rows) == (7, 7, 7, 7, (7,))


# -- rules that read other definitions by name (``reads_by_name``): one kept answer per file ----

BY_NAME = '''import torch
from torch.utils.data import DataLoader


def resize(image, size):
    width, height = image.size
    return image.resize((size, size * height // width))


def build_loader(dataset):
    return DataLoader(dataset, batch_size=8, num_workers=2)


def evaluate(model, dataset):
    model.eval()
    for x, y in build_loader(dataset):
        out = model(x.cuda())


def main():
    evaluate(torch.nn.Linear(4, 2), torch.randn(8, 4))


if __name__ == "__main__":
    main()
'''


@pytest.fixture
def walked(monkeypatch):
    """The by-name rules' ``visit_For`` calls, by code (a served rule does not walk)."""
    from torchlint.rules.dataloader import DataLoaderPinMemory
    from torchlint.rules.training import NoGradInEval

    editor_memo.clear()
    calls = []
    for rule in (DataLoaderPinMemory, NoGradInEval):
        real = rule.visit_For

        def counting(self, node, real=real):
            calls.append(self.code)
            return real(self, node)

        monkeypatch.setattr(rule, "visit_For", counting)
    yield calls
    editor_memo.clear()


def _same_as_fresh(text: str, settings: Settings, path: str = "t.py"):
    found = engine.lint_source(text, path, settings, incremental=True)
    assert _key(found) == _key(_fresh(text, path, settings))
    return found


def test_an_edit_no_by_name_rule_reads_spares_their_walk(walked):
    """``resize`` names nothing the loader code names: editing it (a line more: the findings
    below it move) leaves TL102 and TL402 unwalked, their findings kept and moved."""
    settings = Settings()
    first = _same_as_fresh(BY_NAME, settings)
    assert {d.code for d in first} >= {"TL102", "TL402"}
    assert {"TL102", "TL402"} <= set(walked)
    walked.clear()
    edited = BY_NAME.replace("    width, height = image.size\n", "    width, height = image.size\n    width += 1\n")
    second = engine.lint_source(edited, "t.py", settings, incremental=True)
    assert walked == []
    assert _key(second) == _key(_fresh(edited, "t.py", settings))
    assert [d.location.row for d in second] == [d.location.row + 1 for d in first]
    added = edited.replace("\n\ndef resize", "\n\ndef first(image):\n    return image\n\n\ndef resize")
    walked.clear()
    third = engine.lint_source(added, "t.py", settings, incremental=True)
    assert {"TL102", "TL402"} <= set(walked)  # a definition added: the layout changed
    assert _key(third) == _key(_fresh(added, "t.py", settings))


def test_an_edit_of_a_caller_reaches_the_callee_finding(walked):
    """TL402 reads the callers of ``evaluate``: ``main`` calling it under ``no_grad`` silences it."""
    settings = Settings()
    assert "TL402" in {d.code for d in _same_as_fresh(BY_NAME, settings)}
    silenced = BY_NAME.replace("    evaluate(torch.nn.Linear(4, 2), torch.randn(8, 4))\n",
                               "    with torch.no_grad():\n        evaluate(torch.nn.Linear(4, 2), torch.randn(8, 4))\n")
    assert "TL402" not in {d.code for d in _same_as_fresh(silenced, settings)}
    assert "TL402" in {d.code for d in _same_as_fresh(BY_NAME, settings)}


def test_an_edit_of_a_loader_factory_reaches_the_loader_finding(walked):
    """TL102 flags the loader ``build_loader`` returns because ``evaluate``'s loop moves its batches:
    pinned in ``build_loader``, the finding goes; batches no longer moved, too."""
    settings = Settings()
    assert "TL102" in {d.code for d in _same_as_fresh(BY_NAME, settings)}
    pinned = BY_NAME.replace("num_workers=2)", "num_workers=2, pin_memory=True)")
    assert "TL102" not in {d.code for d in _same_as_fresh(pinned, settings)}
    assert "TL102" in {d.code for d in _same_as_fresh(BY_NAME, settings)}
    unmoved = BY_NAME.replace("out = model(x.cuda())", "out = model(x)")
    assert "TL102" not in {d.code for d in _same_as_fresh(unmoved, settings)}


# unrelated definitions: an edit elsewhere is a small share of the file (else the walk plan
# is made afresh: ``partial.FRESH_SHARE``)
FILLER = "".join(f"\n\ndef filler_{k}(a):\n    b = a * {k}\n    return b + 1\n" for k in range(20))

DATASET = '''import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 4)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


def unrelated(a):
    return a + 1


def loaders():
    return DataLoader(Rows(8), batch_size=2)
''' + FILLER


def test_an_edit_of_a_dataset_class_reaches_tl101(walked):
    """TL101 is silent on a dataset whose items are rows it holds; items computed make it fire."""
    settings = Settings(preview=True)  # TL101 is a preview rule (issue 29)
    assert "TL101" not in {d.code for d in _same_as_fresh(DATASET, settings)}
    assert "TL101" not in {d.code for d in _same_as_fresh(DATASET.replace("a + 1", "a + 2"), settings)}
    scaled = DATASET.replace("        return self.x[i]\n", "        return self.x[i] * 2\n")
    assert "TL101" in {d.code for d in _same_as_fresh(scaled, settings)}


SMOKE = '''import torch
from torch.utils.data import DataLoader


def show(batches):
    print(batches)


if __name__ == "__main__":
    loader = DataLoader(range(10), batch_size=2)
    print(next(iter(loader)).cuda())
''' + FILLER


def test_a_function_reading_a_smoke_tests_loader_reaches_tl101(walked):
    """A ``__main__`` loader only looked at is a smoke test (TL101 silent); a function of the
    file that loops over it all makes it a real loader."""
    settings = Settings(preview=True)  # TL101 is a preview rule (issue 29)
    assert "TL101" not in {d.code for d in _same_as_fresh(SMOKE, settings)}
    looping = SMOKE.replace("    print(batches)\n", "    for b in loader:\n        print(b)\n")
    assert "TL101" in {d.code for d in _same_as_fresh(looping, settings)}
    assert "TL101" not in {d.code for d in _same_as_fresh(SMOKE, settings)}


def test_the_name_closure_over_approximates_what_a_rule_reads():
    import ast as std_ast

    text = '''import torch
from torch.utils.data import DataLoader as DL
TABLE = {"a": helper_a}


def seed():
    callee()


def callee():
    return 1


def caller():
    seed()


def helper_a():
    return 2


def aliased():
    return DL([1])


def declares():
    global TABLE
    TABLE = {}


def uses_loader():
    return loader


def alone():
    return 3


if __name__ == "__main__":
    loader = DL([1, 2])
'''
    tree = std_ast.parse(text)
    groups = [[s] for s in tree.body]
    definitions = [i for i, s in enumerate(tree.body) if isinstance(s, std_ast.FunctionDef)]
    others = [i for i in range(len(groups)) if i not in definitions]
    texts = {i: std_ast.get_source_segment(text, s) for i, s in enumerate(tree.body)}
    by_name = {s.name: i for i, s in enumerate(tree.body) if isinstance(s, std_ast.FunctionDef)}
    names = [editor_memo._names(groups[i], texts[i], {}) for i in range(len(groups))]
    relevant = editor_memo._Closure(definitions, others, groups, texts, names, frozenset({"DL"})).read_from(
        frozenset({by_name["seed"]}))
    assert {tree.body[i].name for i in relevant} == {
        "seed", "callee", "caller", "helper_a", "aliased", "declares", "uses_loader"}


def test_an_end_at_the_next_lines_start_moves_with_its_statement():
    """A deleted line's edit ends at column 1 of the next row, which may belong to the next
    statement: it moves with the line it deletes; an insertion there stays with its own row."""
    from torchlint.diagnostics import Diagnostic, Edit, Fix, Location

    deleting = Diagnostic("TL501", "n", "m", "p.py", Location(5, 5), Location(5, 9),
                          Fix("safe", "f", (Edit(Location(5, 1), Location(6, 1), ""),)), 5, (5,))
    assert editor_memo._within(deleting, 4, 5)
    # statements began on rows 1 and 6; now on 1 and 9 (three lines typed between them)
    moved = editor_memo._remapped(deleting, (1, 6), [(1, 5), (9, 12)])
    assert (moved.fix.edits[0].location, moved.fix.edits[0].end_location) == (Location(5, 1), Location(6, 1))
    inserting = Diagnostic("TL101", "n", "m", "p.py", Location(7, 5), Location(7, 9),
                           Fix("safe", "f", (Edit(Location(6, 1), Location(6, 1), "import os\n"),)), 7, (7,))
    moved = editor_memo._remapped(inserting, (1, 6), [(1, 5), (9, 12)])
    assert (moved.fix.edits[0].location, moved.fix.edits[0].end_location) == (Location(9, 1), Location(9, 1))
    assert moved.location == Location(10, 5)


def test_the_name_closure_is_linear_in_the_links():
    """A chain of 10,000 functions, each calling the one before it, the rule walking the last:
    a pass over the definitions per link found took ~10 s; the walk over the links is linear."""
    import ast as std_ast
    import time

    n = 10_000
    text = "def f0():\n    return 1\n" + "".join(f"def f{k}():\n    return f{k - 1}()\n" for k in range(1, n + 1))
    tree = std_ast.parse(text)
    groups = [[s] for s in tree.body]
    definitions = list(range(len(groups)))
    texts = [f"f{k}" for k in range(len(groups))]  # only read for `DataLoader`
    names = [editor_memo._names(groups[i], str(i), {}) for i in definitions]
    start = time.process_time()
    relevant = editor_memo._Closure(definitions, [], groups, texts, names, frozenset()).read_from(frozenset({n}))
    assert len(relevant) == n + 1
    assert time.process_time() - start < 2  # ~0.04 s
