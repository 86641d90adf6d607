"""Positions of nodes, computed only for files that have findings, and only for the top-level
statements that hold them.

libcst's ``PositionProvider`` runs inside the metadata framework, which visits and rebuilds every
node (about twice the cost of the parse). The positions themselves come from code generation,
which is cheap: this codegen state counts characters instead of collecting tokens and records
each node's (start, end) offsets, with the same syntactic ranges as ``PositionProvider``; a
``Locator`` on the original text turns offsets into rows and columns (libcst round-trips the
source exactly).

A file with one finding used to pay the code generation of the whole module. ``Positions`` now
generates only the top-level statement that holds a node: the statement's first line comes
from CPython's tree (given by the caller, or parsed here: an order of magnitude cheaper than
generating a big module), minus the comment and blank lines libcst attaches in front of it. The
statement's generated length must end exactly where the next statement begins (or where the
module's footer begins), else the whole module is generated as before.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

from torchlint import _cst as cst

from torchlint.astindex import statement_first_line
from torchlint.guards import deep_call


class PartialMismatch(Exception):
    """A position was needed inside a stub, or a statement of a partial module could not be placed
    exactly in the text: the file is linted again from a whole parse."""

Span = Tuple[int, int]


class _OffsetState:
    """What ``CSTNode._codegen`` calls on its state, counting characters instead of collecting
    them, as libcst's own ``ByteSpanPositionProvider`` state does (which counts bytes).

    It is not a subclass of libcst's ``CodegenState`` (``libcst._nodes.internal``, private):
    the whole protocol is here (the fields and methods libcst's nodes use), so no private name
    is imported. The codegen entry point itself, ``CSTNode._codegen(state)``, has no public
    counterpart: libcst's public positions (``MetadataWrapper.resolve(PositionProvider)`` or
    ``ByteSpanPositionProvider``) generate the whole module and then visit every node, 5-7
    times the cost on the fixtures, and cannot generate one statement. ``protocol_ok()`` checks
    this state against the public provider once, on a sample of every construct; a libcst
    where they differ gets the public path (``_public_spans``): the same ranges, slower."""

    __slots__ = ("default_indent", "default_newline", "provider", "indent_tokens", "offset",
                 "spans", "_starts", "code")

    def __init__(self, module: cst.Module) -> None:
        self.default_indent: str = module.default_indent
        self.default_newline: str = module.default_newline
        self.provider: object = None
        self.indent_tokens: List[str] = []
        self.offset = 0
        self.spans: Dict[cst.CSTNode, Span] = {}
        self._starts: list = []
        self.code: Optional[List[str]] = None  # the generated code too, when it is to be checked

    @property
    def tokens(self) -> List[str]:
        """Not collected: ``Module`` only asks whether anything was generated (an empty module
        gets its newline), which the offset tells."""
        return [""] if self.offset else []

    def increase_indent(self, value: str) -> None:
        self.indent_tokens.append(value)

    def decrease_indent(self) -> None:
        self.indent_tokens.pop()

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.offset += len(token)
            if self.code is not None:
                self.code.append(token)

    def add_token(self, value: str) -> None:
        self.offset += len(value)
        if self.code is not None:
            self.code.append(value)

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


# Statements whose code generation records a syntactic range from their parts (start_node,
# end_node), blocks that indent, brackets, a line of two statements, a module without its last
# newline: ``protocol_ok`` generates this both ways (small: it runs once per process).
_SAMPLE = """\
@d(1)
def f(x, *a, y=(1 + 2), **k):
    if x: return [i for i in a]
    elif y: pass
    else:
        with g() as h, (j):
            for i in a: del i; continue
    try: x.y[0] = lambda z: {z: "s" f"{z!r}"}
    except (E, F) as e: raise
    finally: x += 1
class C(B):
    while not x: yield -x ** 2 if x else await y
x: int = 1  # footer"""


_PROTOCOL: Dict[str, bool] = {}


def protocol_ok() -> bool:
    """Whether this libcst's codegen, through ``_OffsetState``, gives the ranges its public
    ``ByteSpanPositionProvider`` gives (checked once per process, a few milliseconds)."""
    ok = _PROTOCOL.get("ok")
    if ok is None:
        try:
            module = cst.parse_module(_SAMPLE)
            state = _OffsetState(module)
            state.code = []
            module._codegen(state)
            code = "".join(state.code)
            ok = (code in (module.code, module.code + module.default_newline)  # the newline it keeps
                  and state.spans == _public_spans(module, module.code))
        except Exception:  # the protocol changed (a method or field this state lacks)
            ok = False
        _PROTOCOL["ok"] = ok
    return ok


def protocol_failed() -> None:
    """The private path raised on a real tree (a node calling what this state lacks): from now
    on, this process takes the public path."""
    _PROTOCOL["ok"] = False


def _public_spans(module: cst.Module, text: str) -> Dict[cst.CSTNode, Span]:
    """(start, end) character offsets of every node through libcst's public API only: the
    metadata wrapper's ``ByteSpanPositionProvider`` (UTF-8 byte offsets, turned into characters)."""
    from libcst.metadata import ByteSpanPositionProvider, MetadataWrapper

    spans = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ByteSpanPositionProvider)
    if text.isascii():
        return {node: (span.start, span.start + span.length) for node, span in spans.items()}
    import bisect
    from itertools import accumulate

    ends = list(accumulate(len(char.encode("utf-8", "surrogatepass")) for char in text))  # byte end of each char

    def char(offset: int) -> int:
        return bisect.bisect_right(ends, offset) if offset else 0

    return {node: (char(span.start), char(span.start + span.length)) for node, span in spans.items()}


def node_spans(module: cst.Module) -> Dict[cst.CSTNode, Span]:
    """(start, end) string offsets of every node, end exclusive.

    Code generation recurses a few frames per level of the tree: a 500-term sum outgrows
    Python's default recursion limit. Such a tree (``guards.py`` lets through ~1,000 levels at
    most) is generated again on a thread with room for it."""
    if protocol_ok():
        try:
            try:
                return _spans(module)
            except RecursionError:
                return deep_call(_spans, module)
        except (AttributeError, TypeError):  # a node calls what this state lacks: see _OffsetState
            protocol_failed()
    try:
        return _public_spans(module, module.code)
    except RecursionError:
        return deep_call(lambda m: _public_spans(m, m.code), module)


def render_code(module: cst.Module, node: cst.CSTNode, indent: Tuple[str, ...] = ()) -> str:
    """``node``'s code as it prints inside blocks indented by ``indent`` (what libcst's own
    ``CodegenState`` collects; ``Module.code_for_node`` renders at column 0 only). On a libcst
    whose codegen protocol this state does not follow, ``code_for_node``: the same code, but
    continuation lines inside brackets lose the blocks' indentation (still valid Python)."""
    if protocol_ok():
        state = _OffsetState(module)
        state.indent_tokens = list(indent)
        state.code = []
        try:
            node._codegen(state)
            return "".join(state.code)
        except (AttributeError, TypeError):
            protocol_failed()
    return module.code_for_node(node)


def _spans(module: cst.Module) -> Dict[cst.CSTNode, Span]:
    state = _OffsetState(module)
    module._codegen(state)
    return state.spans


def _statement_spans(module: cst.Module, stmt: cst.CSTNode, start: int, text: Optional[str] = None,
                     indents: Tuple[str, ...] = ()) -> Tuple[Dict[cst.CSTNode, Span], int]:
    """The spans of ``stmt``'s nodes generated from ``start``, and where it ends; with ``text``,
    an end of -1 unless the generated code is exactly ``text`` there (a partial module's code is
    not the text, and a nested statement's place is derived: they are checked, not just their
    lengths). ``indents``: those of the indented blocks around a nested statement."""
    state = _OffsetState(module)
    state.offset = start
    state.indent_tokens = list(indents)
    if text is not None:
        state.code = []
    stmt._codegen(state)
    if text is not None and "".join(state.code) != text[start:state.offset]:
        return state.spans, -1
    return state.spans, state.offset


def _quiet_parse(text: str) -> ast.Module:
    """``ast.parse`` without printing the linted code's SyntaxWarnings (``"\\d"``, ``x is 1``)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _leading_line_count(stmt: cst.CSTNode) -> int:
    """Lines libcst prints before the line CPython gives as the statement's first."""
    count = len(getattr(stmt, "leading_lines", ()))
    decorators = getattr(stmt, "decorators", ())
    if decorators:
        count += len(decorators[0].leading_lines)
    return count


class Positions:
    """Rows and columns (1-based, end exclusive) of the nodes of one parsed file.

    ``tree``: CPython's tree of the same text, when the caller has it. ``range(node, top)``:
    ``top`` is the top-level statement holding ``node`` when the caller knows it."""

    def __init__(self, module: cst.Module, text: str, tree: Optional[ast.Module] = None,
                 first_lines: Optional[List[int]] = None, stubs: Optional[frozenset] = None,
                 ends: Optional[Dict[int, int]] = None) -> None:
        from torchlint.locator import Locator

        self.module = module
        #: ids of the statements standing for left-out bodies when ``module`` is a partial parse
        #: (``partial.py``): its code is not ``text``, so only its other statements are placed
        self.stubs = stubs
        #: ids of a partial module's statements that a definition left out follows -> the line
        #: after their own last one, where the next code of the text begins
        self.ends = ends or {}
        self.tree = tree
        self.first_lines = first_lines  # of CPython's top-level statements, instead of ``tree``
        self.spans: Dict[cst.CSTNode, Span] = {}
        self._whole = False
        self._done: set = set()  # ids of the statements generated (top-level or nested)
        self._top_trees: Dict[int, Optional[ast.stmt]] = {}  # CPython's tree of a top-level statement
        self._starts: Optional[List[Optional[int]]] = None
        self._tops = {id(stmt): i for i, stmt in enumerate(module.body)}
        if not module.has_trailing_newline:  # codegen counted the newline libcst adds, then dropped it
            text += module.default_newline
        self.text = text
        self.locator = Locator(text)

    def range(self, node: cst.CSTNode, top: Optional[cst.CSTNode] = None,
              path: Optional[List[cst.CSTNode]] = None):
        try:
            return self._range(node, top, path)
        except (AttributeError, TypeError):
            if not protocol_ok():
                raise
            protocol_failed()  # a node called what _OffsetState lacks: the public path from now on
            self.spans, self._whole, self._done = {}, False, set()
            return self._range(node, top, path)

    def _range(self, node: cst.CSTNode, top: Optional[cst.CSTNode] = None,
               path: Optional[List[cst.CSTNode]] = None):
        """``path``: the nodes from the module down to where ``node`` was reported (the walk's
        ancestors), when the caller has them: the innermost statement of that path holding
        ``node`` is generated instead of the whole top-level statement (a method of a
        1,000-line class)."""
        span = self.spans.get(node)
        if span is None and not self._whole and not protocol_ok():  # this libcst: the public path only
            if self.stubs is not None:
                raise PartialMismatch()  # its code is not the text: the caller parses the whole file
            self._generate_all()
            span = self.spans[node]
        if span is None and path is not None and len(path) > 3 and not self._whole:
            span = self._nested_span(node, path)
        if span is None:
            if top is None and id(node) in self._tops:
                top = node
            if self.stubs is not None:
                span = self._partial_span(node, top)
            else:
                if top is None or not self._statement(top) or node not in self.spans:
                    self._generate_all()
                span = self.spans[node]
        start, end = span
        return self.locator.location(start), self.locator.location(end)

    def _partial_span(self, node: cst.CSTNode, top: Optional[cst.CSTNode]) -> Span:
        """``node``'s span in a partial module: from ``top``, else from each statement that is
        not a stub in turn; ``PartialMismatch`` when it is in a stub or cannot be placed."""
        stubs = self.stubs or frozenset()
        order = [top] if top is not None else []
        order += [stmt for stmt in self.module.body if stmt is not top]
        for stmt in order:
            if id(stmt) in stubs:
                continue
            if not self._statement(stmt):
                break
            if node in self.spans:
                return self.spans[node]
        raise PartialMismatch()

    def _nested_span(self, node: cst.CSTNode, path: List[cst.CSTNode]) -> Optional[Span]:
        """``node``'s span from the innermost statement of ``path`` (module, top-level
        statement, then block, statement... down through compound statements' own bodies) that
        holds it; None when none below the top-level statement does or one cannot be placed."""
        top = path[1]
        chain: List[Tuple[cst.CSTNode, Tuple[str, ...]]] = []  # (nested statement, indents of its blocks)
        indents: Tuple[str, ...] = ()
        k = 1
        while k + 2 < len(path):
            parent, block, child = path[k], path[k + 1], path[k + 2]
            if (not isinstance(block, cst.IndentedBlock) or getattr(parent, "body", None) is not block
                    or not isinstance(child, (cst.SimpleStatementLine, cst.BaseCompoundStatement))):
                break  # an else/except clause, or the block's own header or footer lines
            indents = indents + (self.module.default_indent if block.indent is None else block.indent,)
            chain.append((child, indents))
            k += 2
        for depth in range(len(chain) - 1, -1, -1):
            stmt, stmt_indents = chain[depth]
            if id(stmt) not in self._done:
                start = self._nested_start(top, [c for c, _ in chain[:depth + 1]])
                if start is None:
                    continue
                try:
                    spans, end = _statement_spans(self.module, stmt, start, self.text, stmt_indents)
                except RecursionError:  # a 500-term sum: the whole module on node_spans' deep stack
                    break
                if end < 0:
                    continue
                self.spans.update(spans)
                self._done.add(id(stmt))
            if node in self.spans:
                return self.spans[node]
        return None

    def _nested_start(self, top: cst.CSTNode, stmts: List[cst.CSTNode]) -> Optional[int]:
        """Where the code of ``stmts[-1]`` (its leading comment and blank lines included)
        begins: its first line from CPython's tree of ``top``'s text, the same statement
        reached through the same bodies."""
        node = self._top_ast(top)
        if node is None:
            return None
        parent_cst = top
        for stmt in stmts:
            block = parent_cst.body  # an IndentedBlock: checked by the caller
            body = getattr(node, "body", None)
            if type(body) is not list:
                return None
            j = 0
            for sibling in block.body:
                if sibling is stmt:
                    break
                j += len(sibling.body) if isinstance(sibling, cst.SimpleStatementLine) else 1
            else:
                return None
            if j >= len(body):
                return None
            node, parent_cst = body[j], stmt
        row = statement_first_line(node) - _leading_line_count(stmts[-1])
        line_starts = self.locator.line_starts
        return line_starts[row - 1] if 1 <= row <= len(line_starts) else None

    def _top_ast(self, top: cst.CSTNode) -> Optional[ast.stmt]:
        """CPython's tree of one top-level compound statement, parsed from its own text at its
        own lines (a small parse next to generating a whole class)."""
        key = id(top)
        if key in self._top_trees:
            return self._top_trees[key]
        self._top_trees[key] = None
        index = self._tops.get(key)
        starts = self._statement_starts()
        start = starts[index] if index is not None and starts is not None else None
        if index is None or starts is None or start is None or (self.stubs and key in self.stubs):
            return None
        end = self._following(top, index, starts)
        if end is None or end <= start:
            return None
        row = self.locator.location(start).row
        try:
            tree = _quiet_parse("\n" * (row - 1) + self.text[start:end])
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(tree.body) != 1:
            return None
        self._top_trees[key] = tree.body[0]
        return tree.body[0]

    def _generate_all(self) -> None:
        if not self._whole:
            self.spans = node_spans(self.module)
            self._whole = True

    def _statement(self, stmt: cst.CSTNode) -> bool:
        """Generate one top-level statement where it starts in the text; False if that cannot
        be placed for sure."""
        if self._whole or id(stmt) in self._done:
            return True
        index = self._tops.get(id(stmt))
        starts = self._statement_starts()
        if index is None or starts is None or starts[index] is None:
            return False
        following = self._following(stmt, index, starts)
        try:
            spans, end = _statement_spans(self.module, stmt, starts[index], self.text if self.stubs is not None else None)
        except RecursionError:
            return False  # the whole module then goes through node_spans' deep-stack path
        if end != following:
            return False
        self.spans.update(spans)
        self._done.add(id(stmt))
        return True

    def _following(self, stmt: cst.CSTNode, index: int, starts: List[Optional[int]]) -> Optional[int]:
        """Where the text after top-level statement ``stmt`` (at ``index``) goes on: the next
        statement's code, the module's footer, or the line after ``stmt`` when the next
        statement of the text is a definition left out of a partial module (``ends``)."""
        row = self.ends.get(id(stmt))
        if row is not None:
            line_starts = self.locator.line_starts
            return line_starts[row - 1] if row <= len(line_starts) else len(self.text)
        return starts[index + 1] if index + 1 < len(starts) else self._footer_start()

    def _footer_start(self) -> int:
        """Where the module's trailing comment and blank lines begin (the text's end if none)."""
        state = _OffsetState(self.module)
        for line in self.module.footer:
            line._codegen(state)
        return len(self.text) - state.offset

    def _statement_starts(self) -> Optional[List[Optional[int]]]:
        """Text offset where each top-level statement's code (its leading comment and blank
        lines included) begins, from CPython's tree; None when the trees do not line up."""
        if self._starts is not None:
            return self._starts or None
        self._starts = []
        firsts = self.first_lines
        if self.tree is not None or firsts is None:
            tree = self.tree
            if tree is None:
                try:
                    tree = _quiet_parse(self.text)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return None
            firsts = [statement_first_line(stmt) for stmt in tree.body]
        j, starts = 0, []
        line_starts = self.locator.line_starts
        for stmt in self.module.body:
            if j >= len(firsts):
                return None
            row = firsts[j] - _leading_line_count(stmt)
            starts.append(line_starts[row - 1] if 1 <= row <= len(line_starts) else None)
            j += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        if j != len(firsts):
            return None
        self._starts = starts
        return starts
