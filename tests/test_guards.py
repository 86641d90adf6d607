"""guards.py's cheap bounds stay upper bounds, and are tight enough that ordinary large files
never pay for the closer look (a second CPython parse of the whole file and a walk of it)."""

from __future__ import annotations

import ast

import pytest

from torchlint import guards


@pytest.fixture
def no_closer_look(monkeypatch):
    monkeypatch.setattr(guards, "_closer_look", lambda text, shape: pytest.fail("closer look taken"))


@pytest.mark.parametrize(
    "text",
    [
        "f = " + "lambda a, b: " * 300 + "1",  # parameters separated by commas, bodies nested
        "f = g(x, " + "lambda a, b=[1, lambda c, d: 0]: " * 300 + "1, 2)",
        "f = " + "lambda z, a=lambda b, c: 1, d=2: " * 300 + "1",
        "f = {1: " + "lambda a, b: " * 300 + "1, 2: 3}",
        "f = " + "lambda a, b: (" * 150 + "1" + ")" * 150,
        "f = " + "lambda a, b: x if y else " * 300 + "1",
        "def f(my_lambda, x: int, y=" + "lambda a, b: " * 300 + "1): pass",
    ],
)
def test_lambda_nesting_bound_is_an_upper_bound(text):
    depth, _ = guards.tree_depth(ast.parse(text))
    assert guards.scan(text).nesting >= depth - 3


def test_a_lambda_in_a_long_config_does_not_make_it_deep(no_closer_look):
    """timm's model tables: a dict of 20k characters with one lambda in it bounded ~130 deep,
    not 20k (every file holding one went through the closer look)."""
    entry = "    m{i}=Cfg(blocks=(Blk(type='basic', d=1, c=128), Blk(type='bottle', d=6, c=640)), act=lambda x, y: x),\n"
    text = "cfgs = dict(\n" + "".join(entry.format(i=i) for i in range(300)) + ")\n"
    assert guards.scan(text).nesting < 100
    assert guards.refusal(text) is None


def test_many_short_elif_chains_are_not_one_long_one(no_closer_look):
    text = "".join(f"def f{i}(x):\n    if x == 0:\n        pass\n    elif x == 1:\n        pass\n" for i in range(800))
    assert guards.longest_elif_run(text) == 1
    assert guards.refusal(text) is None


@pytest.mark.parametrize("between", ["# a comment in column 0\n", "    y = [\n1]\n", '    s = """\nz = 1\n"""\n', "    y = 1 + \\\n2\n"])
def test_one_long_elif_chain_is_counted_whole(between):
    """Lines in column 0 inside the chain (comments, brackets, strings, continuations) do not end it."""
    text = "if x == 0:\n    pass\n" + "".join(f"elif x == {i}:\n{between}" for i in range(1, 700)) + "z = 1\n"
    assert guards.longest_elif_run(text) == 699
    assert guards.longest_elif_run(text + "if a:\n    pass\nelif b:\n    pass\n") == 699


def test_a_chain_too_deep_for_libcst_is_still_refused():
    text = "if x == 0:\n    pass\n" + "".join(f"elif x == {i}:\n    pass\n" for i in range(1, 1500))
    refused = guards.refusal(text)
    assert refused is not None and refused.code == "TL003"


def test_an_editor_checks_only_the_statements_libcst_has_not_parsed(monkeypatch):
    """``engine._editor_refusal``: a large buffer linted again after an edit scans the edited
    top-level statement, not the file; an ``elif`` chain too deep for libcst typed into it is
    refused as a whole lint refuses it (same finding), and nothing is scanned twice."""
    from torchlint import engine
    from torchlint.config import Settings

    settings = Settings()
    body = "".join(f"def f{i}(x):\n    return torch.zeros(3).to(x) + {i}\n\n\n" for i in range(200))
    text = "import torch\n\n\n" + body
    assert len(text) > 8_000
    engine.lint_source(text, "big.py", settings, incremental=True)
    scanned = []
    real = guards.scan
    monkeypatch.setattr(guards, "scan", lambda piece: scanned.append(piece) or real(piece))
    edited = text.replace("+ 7\n", "+ 77\n")
    found = engine.lint_source(edited, "big.py", settings, incremental=True)
    assert scanned == ["def f7(x):\n    return torch.zeros(3).to(x) + 77\n\n\n"]
    assert [(d.code, d.location.row) for d in found] == [(d.code, d.location.row) for d in engine.lint_source(edited, "big.py", settings)]

    chain = "def deep(x):\n    if x == 0:\n        pass\n" + "".join(f"    elif x == {i}:\n        pass\n" for i in range(1, 1200))
    deep = edited + chain
    whole = [(d.code, d.message, d.location.row) for d in engine.lint_source(deep, "big.py", settings)]
    assert whole and whole[0][0] == "TL003"
    assert [(d.code, d.message, d.location.row) for d in engine.lint_source(deep, "big.py", settings, incremental=True)] == whole
