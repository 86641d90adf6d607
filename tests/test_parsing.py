"""The incremental parser gives the same tree as a whole parse, reuses unchanged statements, and
falls back to a whole parse whenever a split could be unfaithful."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from torchlint import parsing
from torchlint.parsing import IncrementalParser

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").glob("*.py")) + sorted((ROOT / "torchlint").rglob("*.py"))


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(parsing, "MIN_INCREMENTAL_CHARS", 0)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_same_tree_as_a_whole_parse(path):
    text = path.read_text(encoding="utf-8")
    module = IncrementalParser().parse(text)
    assert module.code == text
    assert module.deep_equals(cst.parse_module(text))


@pytest.mark.parametrize(
    "text",
    [
        "# header\n\nimport os\n# between\n\n\ndef f():\n    return 1\n    # indented trailer\n\n# footer\n",
        "@dec\n@other(1)\nclass A:\n    x = 1\nimport a; import b\nif x:\n    pass\nelse:\n    y = 2\n",
        "x = 1\ny = 2",  # no trailing newline
        '"""doc"""\nfrom __future__ import annotations\ns = """\nnot a statement\n"""\nz = 3\n',
    ],
)
def test_edge_cases_round_trip(text):
    module = IncrementalParser().parse(text)
    assert module.code == text
    assert module.deep_equals(cst.parse_module(text))


def test_unchanged_statements_are_reused_and_edits_are_seen():
    parser = IncrementalParser()
    text = "import torch\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n"
    first = parser.parse(text)
    second = parser.parse(text.replace("return 2", "return 3"))
    assert second.body[1].body is first.body[1].body  # `def a` was not parsed again
    assert second.body[2].body is not first.body[2].body
    assert second.code == text.replace("return 2", "return 3")


@pytest.mark.parametrize(
    "text",
    [
        "a = 1\r\nb = 2\r\n",  # CRLF: whole parse
        "def f(:\n    pass\n",  # syntax error: the whole parse raises as usual
        "def f():\n  return 1\n\ndef g():\n    return 2\n",  # chunks disagree on indentation
        "a = 1\x0cb = 2\n",  # a form feed that splitlines() would cut at
    ],
)
def test_fallbacks_match_a_whole_parse(text):
    try:
        expected = cst.parse_module(text)
    except cst.ParserSyntaxError:
        with pytest.raises(cst.ParserSyntaxError):
            IncrementalParser().parse(text)
        return
    module = IncrementalParser().parse(text)
    assert module.code == text and module.deep_equals(expected)


def test_cache_is_bounded():
    parser = IncrementalParser(max_chars=40)
    for i in range(20):
        parser.parse(f"x{i} = {i}\ny{i} = {i}\n")
    assert parser._chars <= 40 and len(parser._chunks) <= 4


def test_lint_source_incremental_gives_identical_findings():
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    for path in sorted((ROOT / "fixtures").glob("TL*.py")):
        text = path.read_text(encoding="utf-8")
        assert lint_source(text, str(path), Settings(), incremental=True) == lint_source(text, str(path), Settings())


def test_large_files_are_parsed_in_chunks_with_identical_findings(monkeypatch):
    """Batch runs parse files past LARGE_FILE_CHARS one top-level statement at a time (the
    parser's peak memory is then the largest statement's); findings do not change."""
    from torchlint import parsing
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    text = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "fixtures").glob("TL*.py")))
    text = "\n".join(line for line in text.splitlines() if not line.startswith("from __future__")) + "\n"
    whole = lint_source(text, "big.py", Settings())
    assert whole
    monkeypatch.setattr(parsing, "LARGE_FILE_CHARS", 1_000)
    chunks = []
    monkeypatch.setattr(parsing.IncrementalParser, "_chunk", lambda self, c: chunks.append(c) or cst.parse_module(c))
    assert lint_source(text, "big.py", Settings()) == whole
    assert len(chunks) > 10
    # the runner's phase 3 (no CPython tree at hand): positions come from the first lines the
    # chunked parse found, without parsing CPython's tree a second time next to libcst's
    from torchlint import positions
    from torchlint.rules import all_rules

    import types

    fake_ast = types.SimpleNamespace(parse=lambda *a, **k: pytest.fail("positions parsed CPython's tree again"))
    monkeypatch.setattr(positions, "ast", fake_ast)
    assert lint_source(text, "big.py", Settings(), ast_codes={r.code for r in all_rules()}) == whole


def test_the_editor_path_pauses_the_cyclic_collector(monkeypatch):
    import gc

    from torchlint import engine
    from torchlint.config import Settings

    seen = []
    real = engine.check_module
    monkeypatch.setattr(engine, "check_module", lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    text = "import torch.nn as nn\nmodel = nn.DataParallel(model)\n"
    assert gc.isenabled()
    assert [d.code for d in engine.lint_source(text, "m.py", Settings(), incremental=True)] == ["TL701"]
    assert seen == [False] and gc.isenabled()
    engine.lint_source(text, "m.py", Settings())
    assert seen == [False, True]
