"""Our codegen-based positions agree with libcst's PositionProvider on every node."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.positions import Positions

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").glob("*.py")) + sorted((ROOT / "torchlint").glob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_positions_match_libcst(path):
    text = path.read_text(encoding="utf-8")
    _check(text)


@pytest.mark.parametrize(
    "text",
    [
        "x = 1",  # no trailing newline
        "a = (\r\n    1,\r\n)\r\n",  # CRLF
        "@dec\nclass A:\n    def f(self):\n        return (yield)\n",
        "if x:\n\tpass\nelse:\n\ty = '😀' + 'é'\n",  # tabs, astral characters
        "s = '''multi\nline'''; t = f'{s!r:>{10}}'\n",
    ],
)
def test_positions_match_libcst_on_edge_cases(text):
    _check(text)


def _check(text: str) -> None:
    module = cst.parse_module(text)
    ours = Positions(module, text)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    for node, span in theirs.items():
        if isinstance(node, cst.Module):
            continue  # only its end differs (the trailing newline), and no finding spans a module
        start, end = ours.range(node)
        assert (start.row, start.column - 1, end.row, end.column - 1) == (
            span.start.line, span.start.column, span.end.line, span.end.column
        ), type(node).__name__


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_positions_of_one_statement_match_the_whole_module(path):
    """A finding's top-level statement is generated alone (no whole-module pass) and gives the
    same ranges as libcst's PositionProvider."""
    _check_statements(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        "x = 1",  # no trailing newline
        "a = (\r\n    1,\r\n)\r\n",  # CRLF
        "# header\n\n@dec  # c\n\n# between\n@dec2\nclass A:\n    def f(self):\n        return 1\n    # block footer\n# dedented\n\n\nx = 2; y = 3\n# footer\n",
        "if x:\n\tpass\nelse:\n\ty = '😀' + 'é'\n",  # tabs, astral characters
        "s = '''multi\nline'''; t = f'{s!r:>{10}}'\n",
        "(a\n +b)\n[c]\nx = \\\n  1\n",
    ],
)
def test_positions_of_one_statement_on_edge_cases(text):
    _check_statements(text)


def _check_statements(text: str) -> None:
    module = cst.parse_module(text)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = Positions(module, text)
    for stmt in module.body:
        stack = [stmt]
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            span = theirs[node]
            start, end = ours.range(node, stmt)
            assert (start.row, start.column - 1, end.row, end.column - 1) == (
                span.start.line, span.start.column, span.end.line, span.end.column
            ), type(node).__name__
    assert not ours._whole, "a statement could not be placed: the whole module was generated"


NESTED_CASES = [
    "# header\nclass A(Base):\n    '''Doc.'''\n\n    # about f\n    @dec\n    @dec2(1)  # c\n    def f(self, x):\n"
    "        for i in x:\n            if i:\n                y = i; z = y\n            # c\n            with w:\n"
    "                try:\n                    g(i)\n                except E:\n                    pass\n"
    "        return y\n\n    def g(self):\n        def inner():\n            return 1\n        return inner\n",
    "class A:\r\n    def f(self):\r\n        x = [\r\n            1,\r\n        ]\r\n        return x\r\n",  # CRLF
    "class A:\n\tdef f(self):\n\t\tif x:\n\t\t\ty = '😀' + 'é'\n\t\telse:\n\t\t\tpass\n",  # tabs, astral characters
    "def f():\n  while True:\n    a = 1\n    b = \\\n      2\n  # trailing comment of the block\n",  # 2 spaces
    "class A:\n    x = 1\n\n\n    # comments\n\n    class B:\n        def g(self):\n            return '''multi\nline'''\n",
    "def f(x):\n    if x: return 1\n    for a in b: pass\n    else:\n        c = 2\n",  # suites and else blocks
]


@pytest.mark.parametrize("path", [p for p in SOURCES if p.parent.name == "fixtures"] + [ROOT / "torchlint" / "engine.py"],
                         ids=lambda p: p.name)
def test_positions_of_nested_statements_match_the_whole_module(path):
    _check_nested(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("text", NESTED_CASES)
def test_positions_of_nested_statements_on_edge_cases(text):
    _check_nested(text)


def _check_nested(text: str) -> None:
    """Given the ancestors of a node (as the engine's walk gives them), only the innermost
    statement of a method, loop or branch body holding it is generated, with libcst's ranges;
    the top-level statement around it is not generated at all."""
    module = cst.parse_module(text)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    paths = []
    stack = [(stmt, [module]) for stmt in module.body]
    while stack:
        node, path = stack.pop()
        paths.append((node, path))
        stack.extend((child, path + [node]) for child in node.children)
    ours = Positions(module, text)
    deep = [(node, path) for node, path in paths if len(path) > 3 and isinstance(path[2], cst.IndentedBlock)
            and path[1].body is path[2] and path[3] in path[2].body]
    for node, path in deep:
        start, end = ours.range(node, path[1], path)
        span = theirs[node]
        assert (start.row, start.column - 1, end.row, end.column - 1) == (
            span.start.line, span.start.column, span.end.line, span.end.column
        ), type(node).__name__
    assert not ours._whole
    assert not any(id(stmt) in ours._done for stmt in module.body), "a top-level statement was generated"
    if any(isinstance(s, (cst.ClassDef, cst.FunctionDef)) for s in module.body):
        assert deep, "the case has nested statements to place"
    for node, path in paths:  # and every other node, from what was generated or its statement
        start, end = ours.range(node, path[1] if len(path) > 1 else node, path)
        span = theirs[node]
        assert (start.row, start.column - 1, end.row, end.column - 1) == (
            span.start.line, span.start.column, span.end.line, span.end.column
        ), type(node).__name__
