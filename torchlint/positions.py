"""Positions of nodes, computed only for files that have findings.

libcst's ``PositionProvider`` runs inside the metadata framework, which visits and rebuilds every
node (about twice the cost of the parse). The positions themselves come from code generation,
which is cheap: this codegen state counts characters instead of collecting tokens and records
each node's (start, end) offsets, with the same syntactic ranges as ``PositionProvider``; a
``Locator`` on the original text turns offsets into rows and columns (libcst round-trips the
source exactly).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Dict, Iterator, Optional, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState  # the hook libcst's own providers use

from torchlint.guards import deep_call

Span = Tuple[int, int]


class _OffsetState(CodegenState):
    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.spans: Dict[cst.CSTNode, Span] = {}
        self._starts: list = []

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        pass  # only the end of the module moves; no node range depends on it

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if node not in self.spans:  # a syntactic range recorded inside wins
            self.spans[node] = (start, self.offset)

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> Iterator[None]:
        start = self.offset
        yield  # not in try/finally: a KeyError there would replace a KeyboardInterrupt in flight
        end = self.offset
        if start_node is not None:
            start = self.spans[start_node][0]
        if end_node is not None:
            end = self.spans[end_node][1]
        self.spans[node] = (start, end)


def node_spans(module: cst.Module) -> Dict[cst.CSTNode, Span]:
    """(start, end) string offsets of every node, end exclusive.

    Code generation recurses a few frames per level of the tree: a 500-term sum outgrows
    Python's default recursion limit. Such a tree (``guards.py`` lets through ~1,000 levels at
    most) is generated again on a thread with room for it."""
    try:
        return _spans(module)
    except RecursionError:
        return deep_call(_spans, module)


def _spans(module: cst.Module) -> Dict[cst.CSTNode, Span]:
    state = _OffsetState(module)
    module._codegen(state)
    return state.spans


class Positions:
    """Rows and columns (1-based, end exclusive) of the nodes of one parsed file."""

    def __init__(self, module: cst.Module, text: str) -> None:
        from torchlint.locator import Locator

        self.spans = node_spans(module)
        if not module.has_trailing_newline:  # codegen counted the newline libcst adds, then dropped it
            text += module.default_newline
        self.locator = Locator(text)

    def range(self, node: cst.CSTNode):
        start, end = self.spans[node]
        return self.locator.location(start), self.locator.location(end)
