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
