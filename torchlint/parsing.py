"""Stage 4 of the pipeline: parse a file with libcst, once.

For an editor, which lints the same buffer after every keystroke, ``IncrementalParser`` reuses
the trees of top-level statements whose text did not change: CPython's parser (an order of
magnitude faster than libcst's) finds where each top-level statement starts, each chunk of text
is parsed by libcst on its own (or taken from the cache), and the chunks are joined into one
``Module`` whose code is exactly the input text. Whenever the split could be unfaithful (mixed or
``\\r`` line endings, chunks that disagree on the default indentation, a syntax error), it falls
back to parsing the whole text.
"""

from __future__ import annotations

import ast
from collections import OrderedDict
from typing import List, Optional, Tuple

import libcst as cst

# Below this size a whole parse is cheap enough and chunking is not worth its bookkeeping.
MIN_INCREMENTAL_CHARS = 8_000
# Cached chunk text, in characters, across all buffers: a few large files. A libcst tree takes
# about 22 bytes per source character (trainer.py: 247k characters, 5.4 MB), so about 45 MB.
CACHE_CHARS = 2_000_000


# Above this size a file is parsed one top-level statement at a time: libcst's parser holds
# ~170 bytes per character at its peak (a 2.6M-character file: 450 MB), the joined tree ~22.
LARGE_FILE_CHARS = 400_000


def parse(text: str) -> cst.Module:
    """The whole-file parse of a batch run: in chunks for large files (``LARGE_FILE_CHARS``),
    so that the parser's peak memory is that of the largest top-level statement."""
    return parse_with_lines(text)[0]


def parse_with_lines(text: str) -> Tuple[cst.Module, Optional[List[int]]]:
    """``parse``, and for a large file the first line of each top-level statement of CPython's
    tree (decorators included), which ``positions.Positions`` needs: CPython's tree of a 60k-line
    file takes ~100 MB, and is not kept alive next to libcst's for that."""
    if len(text) >= LARGE_FILE_CHARS:
        parser = IncrementalParser(max_chars=0)
        module = parser.parse(text)
        return module, parser.first_lines
    return cst.parse_module(text), None


class IncrementalParser:
    def __init__(self, max_chars: int = CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self._chunks: "OrderedDict[str, cst.Module]" = OrderedDict()
        self._chars = 0
        #: first line of each top-level statement of the last text split in chunks, else None
        self.first_lines: Optional[List[int]] = None

    def parse(self, text: str, tree: Optional[ast.Module] = None) -> cst.Module:
        """``tree``: CPython's tree of ``text`` when the caller has it (saves parsing it again)."""
        self.first_lines = None
        if len(text) < MIN_INCREMENTAL_CHARS or "\r" in text:
            return cst.parse_module(text)
        firsts: List[int] = []
        chunks = _split(text, tree, firsts)
        if chunks is None or len(chunks) < 2:
            return cst.parse_module(text)
        modules = [self._chunk(chunk) for chunk in chunks]
        joined = _join(modules)
        if joined is None:
            return cst.parse_module(text)
        self.first_lines = firsts
        return joined

    def _chunk(self, chunk: str) -> cst.Module:
        module = self._chunks.get(chunk)
        if module is not None:
            self._chunks.move_to_end(chunk)
            return module
        module = cst.parse_module(chunk)
        self._chunks[chunk] = module
        self._chars += len(chunk)
        while self._chars > self.max_chars and len(self._chunks) > 1:
            old, _ = self._chunks.popitem(last=False)
            self._chars -= len(old)
        return module


def _split(text: str, tree: Optional[ast.Module] = None, firsts: Optional[List[int]] = None) -> Optional[List[str]]:
    """The text cut at the first line of each top-level statement (decorators included);
    ``firsts`` receives those lines, one per statement of CPython's tree."""
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    starts: List[int] = []
    for stmt in tree.body:
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        if firsts is not None:
            firsts.append(first)
        if not starts or first > starts[-1]:  # statements after `;` stay with their line
            starts.append(first)
    if not starts:
        return None
    lines = text.splitlines(keepends=True)
    if len(lines) != text.count("\n") + (0 if text.endswith("\n") else 1):
        return None  # form feeds or other characters that splitlines() treats as line ends
    bounds = [0] + [s - 1 for s in starts[1:]] + [len(lines)]
    return ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


def _join(modules: List[cst.Module]) -> Optional[cst.Module]:
    """One Module from consecutive chunk modules; None if they cannot be joined faithfully."""
    first = modules[0]
    body: List[cst.BaseStatement] = list(first.body)
    carried = list(first.footer)  # comment lines after a chunk's last statement
    for module in modules[1:]:
        if module.default_indent != first.default_indent or module.default_newline != first.default_newline:
            return None  # blocks with indent=None would print with the wrong indentation
        if not module.body:
            carried += list(module.header) + list(module.footer)
            continue
        lead = carried + list(module.header)
        stmts = list(module.body)
        if lead:
            stmts[0] = stmts[0].with_changes(leading_lines=[*lead, *stmts[0].leading_lines])
        body.extend(stmts)
        carried = list(module.footer)
    last = modules[-1]
    return first.with_changes(body=body, footer=carried, has_trailing_newline=last.has_trailing_newline)
