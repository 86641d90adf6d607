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
