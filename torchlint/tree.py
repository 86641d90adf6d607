"""Fast traversal of libcst trees.

``CSTNode.children`` and ``CSTNode.visit`` rebuild every node they pass (libcst's visitors are
written for transformers) and cost several times the parse; reading the dataclass fields
directly, and skipping whitespace and punctuation, is an order of magnitude cheaper. Every walk
in torchlint goes through here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, Iterator, List, Tuple, cast

from torchlint import _cst as cst

# Nodes that carry only layout or punctuation: no rule looks inside them, so the walk skips them.
# A function, not a module constant: naming libcst's classes at import would import libcst
# (torchlint/_cst.py); asked once per node type.
@functools.cache
def _trivia() -> Tuple[type, ...]:
    return (
        cst.BaseParenthesizableWhitespace,
        cst.TrailingWhitespace,
        cst.EmptyLine,
        cst.Comment,
        cst.Newline,
        cst.Comma,
        cst.Semicolon,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
        cst.Dot,
        cst.AssignEqual,
        cst.Colon,
        cst.BaseBinaryOp,
        cst.BaseBooleanOp,
        cst.BaseCompOp,
        cst.BaseUnaryOp,
        cst.BaseAugOp,
        cst.Asynchronous,
        cst.Annotation,  # type annotations never hold findings
    )


_SKIP_FIELDS = frozenset({
    "lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer", "comma",
    "semicolon", "newline", "trailing_whitespace", "equal", "colon", "dot", "arrow", "star",
    "operator", "asynchronous", "whitespace", "first_line", "default_indent", "default_newline",
    "encoding", "has_trailing_newline", "indent",
})
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}
# type -> does the walk descend into values of this type? Decided once per type: isinstance
# against the ABCs in _TRIVIA costs ~1 us a call, and the walk asks millions of times.
_WALKABLE: Dict[type, bool] = {}


def _child_fields(cls: type) -> Tuple[str, ...]:
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
        _CHILD_FIELDS[cls] = fields
    return fields


def _walkable(cls: type) -> bool:
    walkable = _WALKABLE.get(cls)
    if walkable is None:
        walkable = _WALKABLE[cls] = issubclass(cls, cst.CSTNode) and not issubclass(cls, _trivia())
    return walkable


def _children(node: cst.CSTNode) -> List[cst.CSTNode]:
    children = []
    for name in _CHILD_FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, name)
        cls = type(value)
        if cls is tuple or cls is list:
            for item in value:
                if _WALKABLE.get(type(item)) or (type(item) not in _WALKABLE and _walkable(type(item))):
                    children.append(item)
        elif _WALKABLE.get(cls) or (cls not in _WALKABLE and _walkable(cls)):
            children.append(value)
    return children


def iter_children(node: cst.CSTNode):
    """Child nodes in source order, without whitespace and punctuation."""
    return iter(_children(node))



def walk(root: cst.CSTNode, skip: Tuple[type, ...] = (), include_root: bool = True) -> Iterator[cst.CSTNode]:
    """``root`` and every node below it in source order, not descending into ``skip`` types
    (their nodes are yielded, their children are not)."""
    stack = [root] if include_root else _children(root)[::-1]
    # exact types when no skipped class has subclasses: a failed isinstance of a libcst node
    # class (an ABC) costs a Python call per node
    exact = frozenset(skip) if skip and not any(t.__subclasses__() for t in skip) else None
    while stack:
        node = stack.pop()
        yield node
        if skip and (type(node) in exact if exact is not None else isinstance(node, skip)) and node is not root:
            continue
        stack.extend(_children(node)[::-1])


# Where a statement keeps the statements under it: blocks, clauses and their bodies.
_STATEMENT_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")


def _push_statement_children(node: cst.CSTNode, stack: List[cst.CSTNode]) -> None:
    """Onto ``stack``, last first, what ``node`` holds in its statement fields (blocks, clauses,
    their statements): the step the statement walks below share."""
    for field in _STATEMENT_FIELDS:
        value = getattr(node, field, None)
        if value is None:
            continue
        if type(value) is tuple or type(value) is list:
            stack.extend(reversed(value))
        elif isinstance(value, cst.CSTNode):
            stack.append(value)


def small_statements(root: cst.CSTNode) -> Iterator[cst.BaseSmallStatement]:
    """Every simple statement under ``root`` (``x = f()``, ``return x``, ``import y``...), in
    functions and classes too, without visiting a single expression: a tenth of a walk."""
    stack: List[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            yield from cast(cst.SimpleStatementLine, node).body
            continue
        if kind is cst.Lambda or isinstance(node, cst.BaseExpression):
            continue  # `body` of a lambda is an expression
        _push_statement_children(node, stack)


def compound_statements(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``root`` that holds statements (``if``, ``try``, its handlers, ``def``,
    ``class``, blocks...), in functions and classes too, without visiting an expression or a
    simple statement: the ``try`` and ``if`` statements of a 5,000-line module for a tenth of a
    walk."""
    stack: List[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            continue
        if kind is cst.Lambda or isinstance(node, cst.BaseExpression):
            continue
        yield node
        _push_statement_children(node, stack)


@functools.cache
def statement_containers() -> frozenset:
    """The exact classes of the nodes that hold statements (suites, compound statements and
    their clauses): ``type(node) in statement_containers()`` is ``isinstance(node, (BaseSuite,
    BaseCompoundStatement, SimpleStatementLine, Else, Finally, ExceptHandler, ...))`` without a
    Python-level ``ABCMeta.__instancecheck__`` for every expression that fails it."""
    found = set()
    stack: List[type] = [cst.BaseSuite, cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Else, cst.Finally,
                         cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    return frozenset(found)
