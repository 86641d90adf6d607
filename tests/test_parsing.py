"""The incremental parser gives the same tree as a whole parse, reuses unchanged statements, and
falls back to a whole parse whenever a split could be unfaithful."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

import libcst as cst
import pytest

from torchlint import parsing
from torchlint.parsing import IncrementalAst, IncrementalParser

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
        "a = 1\r\nb = 2\r\n",  # CRLF: cut after the \n of each \r\n
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
    # chunked parse found, without parsing CPython's tree a second time next to libcst's; a
    # finding inside a definition parses that one top-level statement's text (its lines come
    # first as blank lines), never more than the largest chunk
    import ast as real_ast
    import types

    from torchlint import positions
    from torchlint.rules import all_rules

    largest = max(len(c) for c in chunks)
    parsed = []

    def parse_one_statement(source, *args, **kwargs):
        assert len(source.lstrip("\n")) <= largest, "positions parsed CPython's tree again"
        parsed.append(source)
        return real_ast.parse(source, *args, **kwargs)

    monkeypatch.setattr(positions, "ast", types.SimpleNamespace(parse=parse_one_statement))
    assert lint_source(text, "big.py", Settings(), ast_codes={r.code for r in all_rules()}) == whole
    assert parsed  # the findings in methods and loops were placed from their own statement


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


# -- CPython's tree in chunks (large files) ----------------------------------------------------------

def _dump(parse, text):
    import ast

    try:
        return ast.dump(parse(text), include_attributes=True)
    except SyntaxError as exc:
        return ("error", type(exc).__name__, exc.msg, exc.lineno, exc.offset)


@pytest.fixture
def small_ast_chunks(monkeypatch):
    """Chunks of ~200 characters, so that small texts are cut many times; counts the parses."""
    import ast

    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 200)
    calls = []
    real = ast.parse
    monkeypatch.setattr(parsing.ast, "parse", lambda text, *a, **k: calls.append(len(text)) or real(text, *a, **k))
    return calls


def _joined_sources(paths):
    text = "".join(p.read_text(encoding="utf-8") for p in paths)
    return "\n".join(line for line in text.splitlines() if not line.startswith("from __future__")) + "\n"


def test_ast_in_chunks_is_the_whole_tree(small_ast_chunks):
    import ast

    text = _joined_sources(SOURCES)
    whole = ast.dump(ast.parse(text), include_attributes=True)
    small_ast_chunks.clear()
    assert ast.dump(parsing.parse_ast(text), include_attributes=True) == whole
    assert len(small_ast_chunks) > 100 and max(small_ast_chunks) < len(text) / 10  # really in chunks
    firsts = [parsing.statement_first_line(stmt) for stmt in ast.parse(text).body]
    assert parsing.statement_first_lines(text) == firsts


# Lines in column 0 that are not statement boundaries: the chunk before such a cut does not
# parse and grows; clauses are never cut at.
HOSTILE = [
    'x = """\nimport os\ndef f():\n"""\n',  # inside a string
    "x = [\n1,\n2]\n",  # inside brackets
    "x = 1 + \\\n2\n",  # after a backslash
    "@dec\n@other(\n1)\ndef f():\n    pass\n",  # decorators
    "if a:\n    pass\nelif b:\n    pass\nelse:\n    pass\n",  # clauses
    "try:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\n",
    "a = 1; b = 2\n# a comment\n\n\x0c\nc = 3\n",  # `;`, comments, a form feed line
    "class A:\n    x = f'''\n{y}\n'''\n",
]


@pytest.mark.parametrize("crlf", [False, True])
def test_ast_chunks_never_cut_inside_a_statement(small_ast_chunks, crlf):
    import ast

    text = "".join(HOSTILE[i % len(HOSTILE)] + f"v{i} = {i}\n" for i in range(200))
    if crlf:
        text = text.replace("\n", "\r\n")
    assert parsing.ast_chunks(text) is not None
    chunked = _dump(parsing.parse_ast, text)
    assert isinstance(chunked, str) and chunked == _dump(ast.parse, text)


@pytest.mark.parametrize("error", ["def f(:\n    pass\n", "x = (\n", 's = """\n', "    x = 1\n", "else:\n    pass\n"])
def test_ast_chunks_give_cpythons_error(small_ast_chunks, error):
    import ast

    text = "x = 1\n" * 100 + error + "y = 2\n" * 100
    assert parsing.ast_chunks(text) is not None
    chunked = _dump(parsing.parse_ast, text)
    assert isinstance(chunked, tuple) and chunked == _dump(ast.parse, text)
    assert parsing.statement_first_lines(text) is None


def test_a_long_string_is_not_parsed_once_per_line(small_ast_chunks):
    """Every line of the string is a cut candidate: the chunk grows geometrically instead."""
    import ast

    text = "x = 1\n" * 50 + 's = """\n' + "a line in column 0\n" * 20_000 + '"""\n' + "y = 2\n" * 50
    expected = _dump(ast.parse, text)
    small_ast_chunks.clear()
    assert _dump(parsing.parse_ast, text) == expected
    assert len(small_ast_chunks) < 40 and sum(small_ast_chunks) < 5 * len(text)


def test_lone_cr_and_small_texts_parse_whole():
    assert parsing.ast_chunks("x = 1\r" * 100_000) is None
    assert parsing.ast_chunks("x = 1\n" * 10) is None


def test_ast_in_chunks_peaks_lower():
    """The point of it: CPython's parser holds its C tree and tokens next to the Python tree
    for one chunk at a time, not for the whole file."""
    import ast
    import tracemalloc

    text = _joined_sources(sorted((ROOT / "torchlint").rglob("*.py")))
    assert len(text) > 4 * parsing.AST_CHUNK_CHARS
    peaks = []
    for parse in (ast.parse, parsing.parse_ast):
        tracemalloc.start()
        tree = parse(text)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        del tree
    assert peaks[1] < 0.75 * peaks[0]


def test_large_file_in_phase_3_never_parses_the_whole_cpython_tree(monkeypatch):
    """Phase 3 of a run (no CPython tree at hand): the chunked libcst parse and the positions
    get the statements' first lines chunk by chunk, never from one ast.parse of the file;
    the findings are those of a whole parse, with \\n or \\r\\n line ends."""
    import ast

    from torchlint.config import Settings
    from torchlint.engine import lint_source
    from torchlint.rules import all_rules

    from torchlint.project import EMPTY_FACTS

    text = _joined_sources(sorted((ROOT / "fixtures").glob("TL*.py")))
    whole = lint_source(text, "big.py", Settings(), project=EMPTY_FACTS)  # the runner gives facts
    assert whole
    monkeypatch.setattr(parsing, "LARGE_FILE_CHARS", 1_000)
    monkeypatch.setattr(parsing, "AST_CHUNK_CHARS", 2_000)
    real = ast.parse
    sizes = []
    monkeypatch.setattr(parsing.ast, "parse", lambda t, *a, **k: sizes.append(len(t)) or real(t, *a, **k))
    codes = {r.code for r in all_rules()}
    assert lint_source(text, "big.py", Settings(), project=EMPTY_FACTS, ast_codes=codes) == whole
    assert sizes and max(sizes) < len(text) / 4
    crlf = text.replace("\n", "\r\n")
    found = lint_source(crlf, "big.py", Settings(), project=EMPTY_FACTS, ast_codes=codes)
    assert [(d.code, d.location) for d in found] == [
        (d.code, d.location) for d in whole]


def test_two_space_file_joins_without_a_whole_parse(monkeypatch):
    """A chunk of simple statements has libcst's default indentation, not the file's: it must not
    send a 2-space file to a second, whole parse."""
    text = "import os\nx = f(\n    1)\n\ndef f():\n  return 1\n\n\nclass A:\n  def g(self):\n    if x:\n      pass\n"
    whole = cst.parse_module(text)
    chunks = []
    real = cst.parse_module
    monkeypatch.setattr(parsing.cst, "parse_module", lambda t, *a: chunks.append(t) or real(t, *a))
    module = IncrementalParser().parse(text)
    assert module.code == text and module.deep_equals(whole) and module.default_indent == "  "
    assert text not in chunks and len(chunks) == 4


# -- CPython's tree of an editor's buffer, parsed again where it changed ----------------------

def _edits(text: str, rng) -> List[str]:
    """Buffers as someone typing would make them, each one edit away from the last text that
    parsed: names renamed, comments and numbers typed (the same lines: the statement is parsed
    again alone), characters typed and deleted anywhere (in code, strings, comments, at
    statement starts), lines duplicated, indented and removed, clauses and future imports added."""
    import re

    out, base = [], text
    words = [m for m in re.finditer(r"\b[A-Za-z_]\w*\b", base)]
    for _ in range(60):
        text = base if rng.random() < 0.7 else (out[-1] if out else base)
        kind = rng.randrange(10)
        at = rng.randrange(len(text) + 1)
        if kind <= 2 and words and text is base:  # rename one occurrence of a name
            m = rng.choice(words)
            text = text[:m.start()] + m.group() + rng.choice(["x", "_1", "loader", "cuda"]) + text[m.end():]
        elif kind == 3:
            line_end = text.find("\n", at)
            if line_end >= 0:
                text = text[:line_end] + "  # note" + text[line_end:]
        elif kind == 4:
            text = text[:at] + rng.choice("abcxyz_0( )[]:'\"#.\\") + text[at:]
        elif kind == 5 and at < len(text):
            text = text[:at] + text[at + 1:]
        elif kind == 6:
            line_start = text.rfind("\n", 0, at) + 1
            text = text[:line_start] + rng.choice(["    ", "else:\n", "from __future__ import annotations\n"]) + text[line_start:]
        elif kind == 7:
            lines = text.splitlines(keepends=True)
            if lines:
                i = rng.randrange(len(lines))
                lines.insert(i, lines[rng.randrange(len(lines))])
                text = "".join(lines)
        elif kind == 8:
            lines = text.splitlines(keepends=True)
            if lines:
                del lines[rng.randrange(len(lines))]
                text = "".join(lines)
        else:
            digits = [m for m in re.finditer(r"\d", text)]
            if digits:
                m = rng.choice(digits)
                text = text[:m.start()] + rng.choice("0123456789") + text[m.end():]
        out.append(text)
    return out


def _same_as_cpython(parser: IncrementalAst, text: str) -> None:
    try:
        expected = ast.dump(ast.parse(text), include_attributes=True)
    except SyntaxError as exc:
        with pytest.raises(SyntaxError) as raised:
            parser.parse(text, "f.py")
        assert (raised.value.msg, raised.value.lineno, raised.value.offset) == (exc.msg, exc.lineno, exc.offset)
        return
    assert ast.dump(parser.parse(text, "f.py"), include_attributes=True) == expected


@pytest.mark.parametrize("seed", range(6))
def test_incremental_ast_is_cpythons_tree_after_every_edit(seed, monkeypatch):
    """Random typing on real files: after each edit the tree (every position included) or the
    error is what ``ast.parse`` of the whole buffer gives."""
    import random

    pieces = _type_randomly(monkeypatch, "_reparse", SOURCES, random.Random(seed))
    assert sum(tree is not None for tree in pieces) >= 40  # most valid edits parsed one piece


def _type_randomly(monkeypatch, method: str, sources, rng) -> list:
    """``_edits`` on four of ``sources``, each edit's tree or error checked against CPython's;
    what ``IncrementalAst.<method>`` returned each time it was called."""
    real, pieces = getattr(IncrementalAst, method), []
    monkeypatch.setattr(IncrementalAst, method, staticmethod(lambda *a: pieces.append(real(*a)) or pieces[-1]))
    for path in rng.sample(sources, 4):
        parser = IncrementalAst()
        text = path.read_text(encoding="utf-8")
        _same_as_cpython(parser, text)
        for edited in _edits(text, rng):
            _same_as_cpython(parser, edited)
    return pieces


def test_incremental_ast_parses_only_the_statement_typed_in(monkeypatch):
    text = "import torch\n\n\ndef f(x):\n    return x\n\n\ndef g(y):\n    return y\n\n\nz = 1\n"
    parser = IncrementalAst()
    first = parser.parse(text)
    parsed = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **k: parsed.append(source) or real(source, *a, **k))
    second = parser.parse(text.replace("return y", "return y + 1"))
    assert len(parsed) == 1 and "return y + 1" in parsed[0] and "return x" not in parsed[0]
    assert second.body[0] is first.body[0] and second.body[1] is first.body[1] and second.body[3] is first.body[3]
    assert second.body[2] is not first.body[2]
    assert parser.parse(text.replace("return y", "return y\n")) is not None and len(parsed) == 2  # a new line: whole
    assert "import torch" in parsed[1]


def test_incremental_ast_sees_text_inserted_before_a_statement():
    """Two changes far apart, the second one indenting a top-level ``def`` (an editor's replace
    or a formatter sends the whole text): the indented statement is parsed again with the rest,
    and CPython's error comes out. Before, only the chunks up to the one before it were."""
    text = '"""Doc A."""\nimport torch\n\n\nclass C:\n    def m(self):\n        return 1\n\n\ndef f(x):\n    y = x\n    return y\n'
    parser = IncrementalAst()
    parser.parse(text)
    _same_as_cpython(parser, text.replace("Doc A", "Doc B").replace("def f(x):", "    def f(x):"))
    _same_as_cpython(parser, text.replace("Doc A", "Doc B").replace("\n\n\ndef f(x):", "\n\n\n    def g(x):\n        pass\ndef f(x):"))


def test_a_statement_after_a_multiline_one_on_its_last_line_is_not_cut_from_it():
    """``x = (1,\\n 2); y = 3``: ``y`` starts on the last line of ``x``, not on its first. The
    editor's parser cut the text at that line, inside ``x``, and libcst's error on the piece
    became TL003 for the whole buffer; the chunks now follow ``astindex.statement_groups``."""
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    filler = "".join(f"def f{i}(a):\n    return a + {i}\n\n\n" for i in range(400))
    text = "import torch\n" + filler + "x = (1,\n     2); y = 3\n" + filler.replace("def f", "def g")
    text += "m = torch.nn.DataParallel(m)\n"
    assert len(text) > parsing.MIN_INCREMENTAL_CHARS
    chunks = parsing._split(text, ast.parse(text))
    assert "".join(chunks) == text and any(c.startswith("x = (1,\n     2); y = 3\n") for c in chunks)
    assert parsing._split(text) == chunks  # without the caller's tree, found chunk by chunk
    found = [d.code for d in lint_source(text, "a.py", Settings(), incremental=True)]
    assert found == [d.code for d in lint_source(text, "a.py", Settings())] == ["TL701"]


def test_parser_output_skips_validation_and_hand_built_nodes_still_get_it():
    """``_cst.unvalidated``: parsing builds nodes without ``_validate()`` (it cannot fail on
    parser output); afterwards, and in another thread's parse, hand-built nodes are checked."""
    import threading

    import libcst
    from torchlint import _cst

    original = libcst.CSTNode.__dict__["__post_init__"]
    module = _cst.parse_module("x = f(a, *b)\nclass C(B):\n    def m(self):\n        return 1\n")
    assert module.code.startswith("x = f(a, *b)")
    assert libcst.CSTNode.__dict__["__post_init__"] is original
    with pytest.raises(libcst.CSTValidationError):
        libcst.Name("not a name")
    seen = []
    with _cst.unvalidated():
        inner = threading.Thread(target=lambda: seen.append(_cst.parse_module("y = 2\n").code))
        inner.start()
        inner.join()
        assert libcst.CSTNode.__dict__["__post_init__"] is not original  # the outer use still holds it
    assert seen == ["y = 2\n"]
    assert libcst.CSTNode.__dict__["__post_init__"] is original
    with pytest.raises(libcst.ParserSyntaxError):
        _cst.parse_module("def (:\n")
    assert libcst.CSTNode.__dict__["__post_init__"] is original  # restored after an error too


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_same_tree_with_classes_parsed_statement_by_statement(path, monkeypatch):
    """With CPython's tree, a large class or function is parsed a body statement at a time
    (``IncrementalParser._definition_chunk``): the tree is still libcst's own, to the last blank line."""
    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    monkeypatch.setattr(parsing, "MIN_FUNCTION_SPLIT_CHARS", 0)
    text = path.read_text(encoding="utf-8")
    module = IncrementalParser().parse(text, ast.parse(text))
    assert module.code == text
    assert module.deep_equals(cst.parse_module(text))


CLASS_EDGES = [
    # comments between the header and the body, between methods (indented, at column 0, blank
    # lines), after the last method (indented: the block's footer; at column 0: the module's)
    "import torch\n\n\n@dec(1)\nclass A(\n    Base,\n):  # header\n    # first\n\n    x = 1; y = 2\n\n"
    "    def f(self):\n        return 1\n\n    # indented\n\n# column 0\n\n    @property\n    def g(self):\n"
    "        if self:\n            pass\n        # inner trailer\n\n    class Inner:\n        z = 3\n"
    "    # last indented\n\n# after\n\n\nx = A()\n",
    # a comment dedented but not to column 0 between two methods: the class is parsed whole
    "class B:\n        def f(self):\n            return 1\n    # odd\n        def g(self):\n            return 2\n\ny = 1\n",
    # the body on the header's line, and a one-statement body
    "class C: x = 1; y = 2\n\nclass D(object):\n    '''doc'''\n\nz = 0\n",
    # tabs, and a class that ends the file without a newline
    "import os\n\nclass E:\n\tdef f(self):\n\t\treturn 1\n\n\tdef g(self):\n\t\treturn 2",
]


FUNCTION_EDGES = [
    # decorators, a signature over several lines, a docstring, comments at column 0 and indented
    # in the body, a nested function, statements only a function may hold
    "import torch\n\n\n@torch.no_grad()\n@dec(\n    1,\n)\ndef f(\n    a,\n    b: int = 2,\n) -> None:  # header\n"
    "    '''doc'''\n    # first\n    global G\n    x = yield a\n\n# column 0\n    def inner():\n        nonlocal x\n"
    "        return x\n\n    y = [i async for i in b] if a else (lambda: a)\n    return (yield from inner())\n"
    "    # trailer\n\n# after\nz = f\n",
    "async def g(s):\n    async with s as t:\n        await t\n    async for u in s:\n        pass\n"
    "    match s:\n        case [1, *rest]:\n            return rest\n        case _:\n            pass\n    return await s\n\ny = 1\n",
    # a dedented comment between statements, the body on the header's line, a one-statement body
    "def h():\n        a = 1\n    # odd\n        return a\n\ndef i(): return 1\n\ndef j():\n    return 2\n",
    # tabs, and a function that ends the file without a newline
    "import os\n\ndef k(x):\n\tif x:\n\t\treturn 1\n\treturn 2",
]


@pytest.mark.parametrize("text", CLASS_EDGES + FUNCTION_EDGES)
def test_class_parts_round_trip(text, monkeypatch):
    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    monkeypatch.setattr(parsing, "MIN_FUNCTION_SPLIT_CHARS", 0)
    monkeypatch.setattr(parsing, "MIN_INCREMENTAL_CHARS", 0)
    module = IncrementalParser().parse(text, ast.parse(text))
    assert module.code == text
    assert module.deep_equals(cst.parse_module(text))


def _parsed_again(monkeypatch, text: str, edited: str):
    """libcst's trees of ``text`` then ``edited`` through one IncrementalParser, and the texts
    libcst parsed for the second; the second tree is a whole parse's."""
    parser = IncrementalParser()
    first = parser.parse(text, ast.parse(text))
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(parsing.cst, "parse_module", lambda t: parsed.append(t) or real(t))
    second = parser.parse(edited, ast.parse(edited))
    assert second.code == edited and second.deep_equals(real(edited))
    return first, second, parsed


def test_an_edit_in_one_method_of_a_large_class_parses_that_method_again(monkeypatch):
    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    methods = "".join(f"    def m{i}(self, x):\n        y = x + {i}\n        return y * 2\n\n" for i in range(40))
    text = f"import torch\n\n\nclass Big(torch.nn.Module):\n    scale = 2\n\n{methods}\nbig = Big()\n"
    first, second, parsed = _parsed_again(monkeypatch, text, text.replace("y = x + 17\n", "y = x + 17  # typed\n"))
    assert parsed == [parsing._WRAPPER + "    def m17(self, x):\n        y = x + 17  # typed\n        return y * 2\n\n"]
    old_body, new_body = first.body[1].body.body, second.body[1].body.body
    # each method's own tree is reused but m17's (a method led by blank lines is a new node
    # around the same body, as for top-level statements)
    assert [a.body is b.body for a, b in zip(old_body, new_body)].count(False) == 1


def test_an_edit_in_one_statement_of_a_long_function_parses_that_statement_again(monkeypatch):
    steps = "".join(f"        loss{i} = model(batch).sum() * {i}\n        loss{i}.backward()\n" for i in range(60))
    text = f"import torch\n\n\ndef train(model, loader):\n    model.train()\n    for batch in loader:\n{steps}    return model\n\n\nx = 1\n"
    assert len(text.split("def train")[1]) > parsing.MIN_FUNCTION_SPLIT_CHARS
    first, second, parsed = _parsed_again(monkeypatch, text, text.replace("    return model\n", "    return model  # typed\n"))
    assert parsed == [parsing._WRAPPER + "    return model  # typed\n\n\n"]
    assert first.body[1].body.body[1] is second.body[1].body.body[1]  # the loop's tree is reused


@pytest.mark.parametrize("seed", range(2))
def test_random_typing_in_classes_parsed_by_parts(seed, monkeypatch):
    """Random typing (``_edits``) on real files whose classes and functions are parsed a body
    statement at a time: after each edit that parses, libcst's tree of the whole buffer, to the
    last blank line, and its code; an edit that does not parse raises as a whole parse does."""
    import random

    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    monkeypatch.setattr(parsing, "MIN_FUNCTION_SPLIT_CHARS", 0)
    monkeypatch.setattr(parsing, "MIN_INCREMENTAL_CHARS", 0)
    real, parts = parsing.IncrementalParser._definition_chunk, []
    monkeypatch.setattr(parsing.IncrementalParser, "_definition_chunk",
                        lambda self, *a: parts.append(real(self, *a)) or parts[-1])
    rng = random.Random(seed)
    with_classes = [p for p in SOURCES if "\nclass " in p.read_text(encoding="utf-8")]
    for path in rng.sample(with_classes, 2):
        parser = IncrementalParser()
        for text in [path.read_text(encoding="utf-8")] + _edits(path.read_text(encoding="utf-8"), rng):
            try:
                tree = ast.parse(text)
                expected = cst.parse_module(text)
            except (SyntaxError, ValueError, cst.ParserSyntaxError):
                continue
            module = parser.parse(text, tree)
            assert module.code == text and module.deep_equals(expected), path
    assert sum(part is not None for part in parts) >= 5  # classes were parsed by parts


@pytest.mark.parametrize("seed", range(3))
def test_incremental_ast_inside_classes_is_cpythons_tree_after_every_edit(seed, monkeypatch):
    """Random typing with every class parsed again a body statement at a time
    (``IncrementalAst._reparse_in_class``): CPython's tree, every position included, or its error."""
    import random

    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    # files mostly made of classes (the package's own files change from commit to commit: random
    # typing in a file with one small class may never land in a class body)
    with_classes = [p for p in SOURCES if _class_share(p.read_text(encoding="utf-8")) >= 0.8]
    pieces = _type_randomly(monkeypatch, "_reparse_in_class", with_classes, random.Random(seed))
    assert sum(tree is not None for tree in pieces) >= 10


def _class_share(text: str) -> float:
    """The share of a file's lines that top-level classes hold."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return 0.0
    inside = sum(s.end_lineno - s.lineno + 1 for s in tree.body if isinstance(s, ast.ClassDef))
    return inside / max(1, text.count("\n"))


def test_incremental_ast_keeps_the_other_methods_of_a_large_class(monkeypatch):
    monkeypatch.setattr(parsing, "MIN_CLASS_SPLIT_CHARS", 0)
    methods = "".join(f"    def m{i}(self, x):\n        return x + {i}\n\n" for i in range(20))
    text = f"import torch\n\n\nclass Big:\n    scale = 2\n\n{methods}\nbig = Big()\n"
    parser = IncrementalAst()
    first = parser.parse(text)
    edited = text.replace("return x + 7\n", "return x + 70\n")
    second = parser.parse(edited)
    assert ast.dump(second, include_attributes=True) == ast.dump(ast.parse(edited), include_attributes=True)
    old_body, new_body = first.body[1].body, second.body[1].body
    assert [a is b for a, b in zip(old_body, new_body)].count(False) == 1  # m7 alone is new
    assert second.body[0] is first.body[0] and second.body[2] is first.body[2]
    # a method dedented out of the class, or indented under the one before: CPython decides
    _same_as_cpython(parser, edited.replace("    def m9(", "def m9("))
    _same_as_cpython(parser, edited.replace("    def m9(", "      def m9("))


def _all_nodes(node: cst.CSTNode) -> List[cst.CSTNode]:
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.children)
    return found


def test_identical_statements_get_trees_of_their_own(monkeypatch):
    """Parts are cached by their text, so two identical statements of one body (or two
    identical top-level definitions) would be one node at two places: every position and
    every rule's per-node memo would see the first twice (TL404 reported the first of two
    identical `GradScaler()` lines twice). Each place gets its own tree, and the next parse
    still reuses both."""
    monkeypatch.setattr(parsing, "MIN_FUNCTION_SPLIT_CHARS", 0)
    text = ("import torch\n\n\ndef timed(f):\n    torch.cuda.synchronize()\n    f()\n    torch.cuda.synchronize()\n"
            "    return f\n\n\ndef same():\n    return 1\n\n\ndef same():\n    return 1\n\n\nx = 1\n")
    parser = IncrementalParser()
    for version in (text, text.replace("    f()\n", "    f(1)\n")):
        module = parser.parse(version, ast.parse(version))
        assert module.code == version
        assert module.deep_equals(cst.parse_module(version))
        nodes = _all_nodes(module)
        assert len({id(n) for n in nodes}) == len(nodes)
    parsed = []  # the second place of a text is cached too: the same text again parses nothing
    real = parsing.cst.parse_module
    monkeypatch.setattr(parsing.cst, "parse_module", lambda source: parsed.append(source) or real(source))
    again = parser.parse(version, ast.parse(version))
    assert parsed == [] and again.code == version
    nodes = _all_nodes(again)
    assert len({id(n) for n in nodes}) == len(nodes)
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    source = ("import torch\n\n\ndef train(model, data):\n" + "    x = 1\n" * 60
              + "    scaler = torch.cuda.amp.GradScaler()\n    scaler = torch.cuda.amp.GradScaler()\n")
    found = lint_source(source, "t.py", Settings(), incremental=True)
    assert [(d.code, d.location.row) for d in found] == [("TL404", 65), ("TL404", 66)]
