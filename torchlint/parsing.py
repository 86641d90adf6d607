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
import bisect
import copy
import re
import warnings
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union, cast

from torchlint import _cst as cst

from torchlint.astindex import statement_first_line, statement_groups

# Below this size a whole parse is cheap enough and chunking is not worth its bookkeeping.
MIN_INCREMENTAL_CHARS = 8_000
# Cached chunk text, in characters, across all buffers: a few large files. A libcst tree takes
# about 22 bytes per source character (trainer.py: 247k characters, 5.4 MB), so about 45 MB.
CACHE_CHARS = 2_000_000


# Above this size a file is parsed one top-level statement at a time: libcst's parser holds
# ~170-270 bytes per character at its peak (a 2.6M-character file: 450 MB), the joined tree ~30.
LARGE_FILE_CHARS = 400_000


# Above this size CPython's parser too works on groups of top-level statements of about this
# many characters: ``ast.parse`` holds ~90 bytes per character at its peak (its C tree, the
# tokens and the Python tree at once), the Python tree alone ~40.
AST_CHUNK_CHARS = 100_000


def parse_ast(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(text, filename)``: the same tree, the same errors; a large text is parsed in
    chunks (``ast_chunks``) and their statements joined, so that the parser's own peak memory
    is that of one chunk, not of the whole file, next to the tree."""
    body: List[ast.stmt] = []
    chunks = ast_chunks(text, filename)
    if chunks is not None:
        try:
            for tree in chunks:
                body.extend(tree.body)
        except _Unsplittable:
            body = []
        else:
            return ast.Module(body=body, type_ignores=[])
    return ast.parse(text, filename=filename)


def statement_first_lines(text: str) -> Optional[List[int]]:
    """The first line (decorators included) of each top-level statement of ``text``, as in
    CPython's tree, without ever holding the whole tree; None for text CPython rejects."""
    spans = _statement_spans(text)
    return [first for first, _ in spans] if spans is not None else None


def _statement_spans(text: str) -> Optional[List[Tuple[int, int]]]:
    """(first line with decorators, last line) of each top-level statement of ``text``, found
    chunk by chunk (``ast_chunks``) when it is large; None for text CPython rejects."""
    chunks = ast_chunks(text)
    try:
        if chunks is not None:
            return [(statement_first_line(s), s.end_lineno or s.lineno) for tree in chunks for s in tree.body]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
        return [(statement_first_line(s), s.end_lineno or s.lineno) for s in tree.body]
    except (_Unsplittable, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _lone_cr(text: str) -> bool:
    """A ``\\r`` not followed by ``\\n``: a line end for CPython that ``\\n`` counts miss."""
    return "\r" in text and text.count("\r") != text.count("\r\n")


class _Unsplittable(Exception):
    """No cut of the text parses: it is not valid Python (``ast.parse`` of the whole says why)."""


# Where a top-level statement may begin: a line starting in column 0 with neither a blank, a
# comment, a closing bracket nor a clause that continues the statement before it.
_CUT = re.compile(r"^(?![\s#)\]}\\]|(?:else|elif|except|finally)\b)", re.MULTILINE)


def ast_chunks(text: str, filename: str = "<unknown>") -> Optional[Iterator[ast.Module]]:
    """CPython's trees of consecutive chunks of whole top-level statements of ``text``, each of
    about ``AST_CHUNK_CHARS`` characters, with the line numbers of ``text`` (each chunk is
    parsed after as many empty lines as come before it); None where the text is small or its
    line ends are not all ``\\n`` or ``\\r\\n``. Raises ``_Unsplittable`` where no cut parses.

    A cut is a line that starts in column 0 (``_CUT``). Where it is not a statement boundary of
    the whole text, it lies inside a string or brackets, after a backslash or a decorator, or
    before an ``else``-like clause: the chunk before it does not parse (the clauses are never
    cut at). A chunk that does not parse is extended to the next cut at least twice as far, so
    a cut inside a long string costs a few parses of the chunk, never one per line in it."""
    size = len(text)
    if size < 2 * AST_CHUNK_CHARS:
        return None
    if _lone_cr(text):
        return None  # a line end for CPython, not for the cut finder
    return _chunk_trees(text, filename)


def _chunk_trees(text: str, filename: str) -> Iterator[ast.Module]:
    size = len(text)
    cuts = [m.start() for m in _CUT.finditer(text, AST_CHUNK_CHARS // 2)]
    start, row = 0, 1
    with warnings.catch_warnings():  # SyntaxWarnings of the parsed code are not ours to print
        warnings.simplefilter("ignore")
        while start < size:
            want = start + AST_CHUNK_CHARS
            while True:
                i = bisect.bisect_left(cuts, want)
                end = cuts[i] if i < len(cuts) else size
                if size - end < AST_CHUNK_CHARS // 2:
                    end = size  # no small last chunk
                try:
                    tree = ast.parse("\n" * (row - 1) + text[start:end], filename=filename)
                    break
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    if end == size:
                        raise _Unsplittable() from None
                    want = start + 2 * (end - start)
            yield tree
            del tree
            row += text.count("\n", start, end)
            start = end


def parse(text: str) -> cst.Module:
    """The whole-file parse of a batch run: in chunks for large files (``LARGE_FILE_CHARS``),
    so that the parser's peak memory is that of the largest top-level statement."""
    return parse_with_lines(text)[0]


def parse_with_lines(text: str, tree: Optional[ast.Module] = None) -> Tuple[cst.Module, Optional[List[int]]]:
    """``parse``, and for a large file the first line of each top-level statement of CPython's
    tree (decorators included), which ``positions.Positions`` needs: CPython's tree of a 60k-line
    file takes ~100 MB, and is not kept alive next to libcst's for that (``tree``: the caller's,
    when it has one; else the lines are found chunk by chunk, see ``statement_first_lines``)."""
    if len(text) >= LARGE_FILE_CHARS:
        parser = IncrementalParser(max_chars=0, split_definitions=False)
        module = parser.parse(text, tree)
        return module, parser.first_lines
    return cst.parse_module(text), None


# A class chunk this large is parsed statement by statement of its body (``_definition_chunk``),
# so that an edit in one method of a 4,000-line class parses that method again, not the class.
MIN_CLASS_SPLIT_CHARS = 10_000
# Likewise a function this large (a training loop of 100 lines: libcst takes ~6 ms for it at each
# keystroke, ~0.5 ms for the statement of its body typed in).
MIN_FUNCTION_SPLIT_CHARS = 2_000
# What a class or function body's statements are parsed under: the body's own text, indented
# as it is.
_WRAPPER = "class _C:\n"
_Definition = Union[ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef]
# The definitions parsed by parts, and the name of the libcst node each is (libcst is imported
# when first needed)
_BY_PARTS = {ast.ClassDef: "ClassDef", ast.FunctionDef: "FunctionDef", ast.AsyncFunctionDef: "FunctionDef"}


class IncrementalParser:
    def __init__(self, max_chars: int = CACHE_CHARS, split_definitions: bool = True) -> None:
        self.max_chars = max_chars
        #: what the cache holds for the text being parsed: ``max_chars``, or more for a buffer
        #: whose pieces alone would not fit (``_budget``)
        self._limit = max_chars
        self.split_definitions = split_definitions
        self._chunks: "OrderedDict[Union[str, Tuple[str, int]], cst.Module]" = OrderedDict()
        self._chars = 0
        #: first line of each top-level statement of the last text split in chunks, else None
        self.first_lines: Optional[List[int]] = None
        # (text, tree, its chunks, first lines, groups) of the last split, for ``parse`` after
        # ``unparsed_chunks``
        self._split: Optional[tuple] = None
        # text -> how many times one ``parse`` has placed it so far: a text met twice in one file
        # (two identical statements of a body, `torch.cuda.synchronize()` before and after a
        # timed call, `import torch` twice) is cached as (text, 1) the second time, a tree of its
        # own: node identity is position, so no tree may stand at two places
        self._seen: Dict[str, int] = {}

    def unparsed_chunks(self, text: str, tree: ast.Module) -> Optional[List[str]]:
        """The chunks of ``text`` that ``parse`` would hand libcst (those not parsed before);
        None when it would parse the whole text."""
        split = self._split_of(text, tree)
        if split[0] is None or len(split[0]) < 2:
            return None
        return [chunk for chunk in split[0] if chunk not in self._chunks]

    def _split_of(self, text: str, tree: Optional[ast.Module]) -> tuple:
        last = self._split
        if last is not None and last[0] is text and last[1] is tree:
            return last[2:]
        firsts: List[int] = []
        groups: List[Tuple[int, List[ast.stmt]]] = []
        if len(text) < MIN_INCREMENTAL_CHARS or _lone_cr(text):
            chunks = None
        else:
            chunks = _split(text, tree, firsts, groups if tree is not None and self.split_definitions else None)
        self._split = (text, tree, chunks, firsts, groups)
        return chunks, firsts, groups

    def parse(self, text: str, tree: Optional[ast.Module] = None) -> cst.Module:
        """``tree``: CPython's tree of ``text`` when the caller has it (saves parsing it again;
        with it, a large class is parsed statement by statement of its body)."""
        self.first_lines = None
        self._limit = self._budget(len(text))
        chunks, firsts, groups = self._split_of(text, tree)
        self._split = None  # the texts are not kept alive
        if chunks is None or len(chunks) < 2:
            return cst.parse_module(text)
        self._seen.clear()
        modules: List[cst.Module] = []
        failed: Optional[Tuple[int, cst.ParserSyntaxError]] = None
        try:
            for i, chunk in enumerate(chunks):
                modules.append(self._chunk(chunk, groups[i]) if groups else self._chunk(chunk))
        except cst.ParserSyntaxError as exc:
            # libcst rejects a piece of a file CPython accepts: the error must be the file's, at
            # the file's row (what a whole lint says), not one counted inside the piece
            failed = (len(modules), exc)
        finally:
            self._seen.clear()
        if failed is not None:
            del modules
            if len(text) < LARGE_FILE_CHARS:  # as ``parse_with_lines`` parses it: whole
                return cst.parse_module(text)
            raise _shifted(failed[1], sum(chunk.count("\n") for chunk in chunks[:failed[0]]))
        joined = _join(modules)
        if joined is None:
            return cst.parse_module(text)
        self.first_lines = firsts
        return joined

    def _chunk(self, chunk: str, group: Optional[Tuple[int, List[ast.stmt]]] = None) -> cst.Module:
        key = self._key(chunk)
        module = self._cached(key)
        if module is not None:
            return module
        if group is not None and len(group[1]) == 1:
            kind = type(group[1][0])
            if len(chunk) >= (MIN_CLASS_SPLIT_CHARS if kind is ast.ClassDef else MIN_FUNCTION_SPLIT_CHARS) and kind in _BY_PARTS:
                module = self._definition_chunk(chunk, group[0], cast(_Definition, group[1][0]))
        if module is None:
            module = cst.parse_module(chunk)
        self._store(key, module)
        return module

    def _parsed(self, text: str) -> cst.Module:
        """libcst's tree of ``text``, from the cache when it was parsed before."""
        key = self._key(text)
        module = self._cached(key)
        if module is None:
            module = cst.parse_module(text)
            self._store(key, module)
        return module

    def _key(self, text: str) -> Union[str, Tuple[str, int]]:
        """The cache key of ``text`` at its next place in this parse (``_seen``)."""
        count = self._seen.get(text, 0)
        self._seen[text] = count + 1
        return text if not count else (text, count)

    def _cached(self, key: Union[str, Tuple[str, int]]) -> Optional[cst.Module]:
        module = self._chunks.get(key)
        if module is not None:
            self._chunks.move_to_end(key)
        return module

    def _store(self, key: Union[str, Tuple[str, int]], module: cst.Module) -> None:
        self._chunks[key] = module
        self._chars += len(key if isinstance(key, str) else key[0])
        while self._chars > self._limit and len(self._chunks) > 1:
            old, _ = self._chunks.popitem(last=False)
            self._chars -= len(old if isinstance(old, str) else old[0])

    def _budget(self, size: int) -> int:
        """The cache's size while a text of ``size`` characters is parsed: a buffer larger than
        the cache would evict its own pieces before its next parse (every keystroke in a 2.5M
        character file was a whole parse), so the cache grows with it: room for each piece of
        the text twice (a large definition is cached whole and by parts) and a quarter of the
        usual cache for the other buffers. A parser without a cache (``max_chars=0``) keeps none."""
        if not self.max_chars or 2 * size <= self.max_chars:
            return self.max_chars
        return 2 * size + self.max_chars // 4

    def _definition_chunk(self, chunk: str, first_line: int, node: "_Definition") -> Optional[cst.Module]:
        """The chunk holding one class or function, from libcst's trees of its parts: the text
        up to its body's first statement with ``pass`` as the body, and each statement of the
        body (``statement_groups``) with the comment and blank lines up to the next, parsed
        under ``class _C:`` as they are indented (libcst's grammar, like CPython's, takes a
        ``return``, ``yield`` or ``await`` there: where they may stand is the compiler's rule,
        not the parser's). Each part is cached by its text, so an edit in one method, or in
        one statement of a long function, parses that part again. The parts' leading and
        trailing lines go where libcst puts them in a whole parse (the lines between two
        statements lead the second; those after the last one are the block's footer, then the
        module's); None where that cannot be done faithfully (a part parses otherwise than
        alone, a line in the gap between statements indented less than the body but not at
        column 0, indentation that differs between parts): the caller parses the chunk whole."""
        groups = statement_groups(node.body)
        if len(groups) < 2:
            return None
        starts = [statement_first_line(group[0]) - first_line for group in groups]  # 0-based, in the chunk
        bounds = _cut_offsets(chunk, [line + 1 for line in starts]) + [len(chunk)]
        head_end = bounds[1]
        body_line = chunk[head_end:chunk.find("\n", head_end) + 1 or len(chunk)]
        indent = body_line[: len(body_line) - len(body_line.lstrip(" \t"))]
        if not indent or starts[0] <= node.lineno - first_line:
            return None  # the body starts on the header's line (`class A: x = 1`)
        try:
            head = self._parsed(chunk[:head_end] + indent + "pass\n")
            parts = [self._parsed(_WRAPPER + chunk[a:b]) for a, b in zip(bounds[1:], bounds[2:])]
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return None
        if len(head.body) != 1 or type(head.body[0]).__name__ != _BY_PARTS[type(node)] or head.footer:
            return None
        definition = cast(Union[cst.ClassDef, cst.FunctionDef], head.body[0])
        block = definition.body
        if type(block) is not cst.IndentedBlock or len(block.body) != 1 or block.footer:
            return None
        carried = list(cast(Any, block.body[0]).leading_lines)  # comment lines between the header and the body
        body: List[cst.BaseStatement] = []
        for k, part in enumerate(parts):
            if (len(part.body) != 1 or type(part.body[0]) is not cst.ClassDef or part.header
                    or part.default_indent != head.default_indent or part.default_newline != head.default_newline):
                return None
            inner = part.body[0].body  # one statement: those after `;` on its line are in it
            if type(inner) is not cst.IndentedBlock or inner.indent != block.indent or len(inner.body) != 1:
                return None
            stmts = list(inner.body)
            if carried:
                stmts[0] = stmts[0].with_changes(leading_lines=[*carried, *cast(Any, stmts[0]).leading_lines])
            body.extend(stmts)
            if k == len(parts) - 1:
                footer, tail, trailing = list(inner.footer), list(part.footer), part.has_trailing_newline
                break
            carried = list(inner.footer)
            for line in part.footer:  # lines after a dedent: at column 0 inside the class
                if line.whitespace.value:
                    return None
                carried.append(line.with_changes(indent=False) if line.indent else line)
        whole = definition.with_changes(body=block.with_changes(body=body, footer=footer))
        return head.with_changes(body=[whole], footer=tail, has_trailing_newline=trailing)


def _shifted(exc: "cst.ParserSyntaxError", lines: int) -> "cst.ParserSyntaxError":
    """libcst's error in a piece that starts after ``lines`` lines, at the file's row."""
    return cst.ParserSyntaxError(exc.message, lines=["\n"] * lines + list(exc._lines),
                                 raw_line=exc.raw_line + lines, raw_column=exc.raw_column)


def _split(text: str, tree: Optional[ast.Module] = None, firsts: Optional[List[int]] = None,
           groups: Optional[List[Tuple[int, List[ast.stmt]]]] = None) -> Optional[List[str]]:
    """The text cut at the first line of each top-level statement (decorators included) that
    does not start on a line of the one before (``statement_groups``); ``firsts`` receives the
    first lines, one per statement of CPython's tree (``tree`` when the caller has it; else found
    chunk by chunk, never holding CPython's whole tree); ``groups`` (with ``tree``), one per
    chunk: the line it starts at and its statements."""
    if tree is not None:
        spans = [(statement_first_line(s), s.end_lineno or s.lineno) for s in tree.body]
    else:
        spans = _statement_spans(text) or []
    if not spans:
        return None
    if firsts is not None:
        firsts.extend(first for first, _ in spans)
    cuts = [first for (first, _), (_, end) in zip(spans[1:], spans) if first > end]
    bounds = _cut_offsets(text, cuts) + [len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    if groups is not None and tree is not None:
        lines = [1] + cuts
        members: List[List[ast.stmt]] = [[] for _ in lines]
        for stmt in tree.body:
            members[bisect.bisect_right(lines, statement_first_line(stmt)) - 1].append(stmt)
        groups.extend((line, stmts) for line, stmts, a, b in zip(lines, members, bounds, bounds[1:]) if b > a)
        if len(groups) != len(chunks):
            groups.clear()
    return chunks


def _cut_offsets(text: str, lines: List[int]) -> List[int]:
    """0, then where each of ``lines`` (increasing, 1-based) starts: after the (line - 1)th
    ``"\\n"``, as CPython counts lines (a form feed or another character that splitlines() cuts
    at does not end a line)."""
    offsets, row, offset = [0], 1, 0
    for line in lines:
        while row < line:
            offset = text.index("\n", offset) + 1
            row += 1
        offsets.append(offset)
    return offsets


def _join(modules: List[cst.Module]) -> Optional[cst.Module]:
    """One Module from consecutive chunk modules; None if they cannot be joined faithfully."""
    first = modules[0]
    # A chunk without compound statements has no indented block: its default indentation is
    # libcst's default, not the file's (a 2-space file starting with imports).
    indent = next((m.default_indent for m in modules if _has_blocks(m)), first.default_indent)
    body: List[cst.BaseStatement] = list(first.body)
    carried = list(first.footer)  # comment lines after a chunk's last statement
    for module in modules:
        if (module.default_indent != indent and _has_blocks(module)) or module.default_newline != first.default_newline:
            return None  # blocks with indent=None would print with the wrong indentation
    for module in modules[1:]:
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
    return first.with_changes(body=body, footer=carried, has_trailing_newline=last.has_trailing_newline,
                              default_indent=indent)


def _has_blocks(module: cst.Module) -> bool:
    """Whether some statement of ``module`` may hold an indented block (simple ones cannot)."""
    return not all(isinstance(stmt, cst.SimpleStatementLine) for stmt in module.body)


class IncrementalAst:
    """CPython's tree of an editor's buffer, re-parsing only the top-level statements an edit
    touched: the common prefix and suffix of the new text and the last one keep their trees.

    The statements around the change are cut where top-level statements began in the last
    text, so the piece parsed again is whole statements; where it does not parse alone (an
    open bracket or string, an indented line, a clause such as ``else:``), where the number of
    lines changed (the statements after it would need new line numbers), or where it holds a
    ``__future__`` import, the whole text is parsed, with CPython's own error. Nothing of a
    tree is ever modified: an unchanged statement is the same object in the next tree."""

    def __init__(self, buffers: int = 8) -> None:
        self.buffers = buffers
        # path -> (text, tree, the offset where each top-level statement's chunk begins)
        self._last: "OrderedDict[str, Tuple[str, ast.Module, List[int]]]" = OrderedDict()

    def parse(self, text: str, path: str = "<unknown>") -> ast.Module:
        last = self._last.pop(path, None)
        tree = self._reparse(last, text, path) if last is not None else None
        if tree is None:
            try:
                tree = parse_ast(text, path)
            except BaseException:
                if last is not None:  # typing through a syntax error: the next valid text is
                    self._last[path] = last  # compared with the last one that parsed
                raise
        if len(text) < LARGE_FILE_CHARS and not _lone_cr(text):  # a larger tree is not kept alive
            self._last[path] = (text, tree, _chunk_starts(text, tree))
            while len(self._last) > self.buffers:
                self._last.popitem(last=False)
        return tree

    @staticmethod
    def _reparse(last: Tuple[str, ast.Module, List[int]], text: str, path: str) -> Optional[ast.Module]:
        old, tree, starts = last
        if len(starts) < 2 or _lone_cr(text):
            return None
        prefix = _common_prefix(old, text)
        if prefix == len(old) == len(text):
            return tree
        suffix = _common_suffix(old, text, prefix)
        old_end, new_end = len(old) - suffix, len(text) - suffix
        if old.count("\n", prefix, old_end) != text.count("\n", prefix, new_end):
            return None  # the statements after the change would move
        first, last_chunk, begin, stop = _changed_chunks(starts, prefix, old_end, len(old))
        groups = statement_groups(tree.body)
        if first == last_chunk and stop - begin >= MIN_CLASS_SPLIT_CHARS and len(groups[first]) == 1 \
                and type(groups[first][0]) is ast.ClassDef:
            cls = IncrementalAst._reparse_in_class(old, text, cast(ast.ClassDef, groups[first][0]), begin, stop, prefix,
                                                   old_end, path)
            if cls is not None:
                return ast.Module(body=_spliced(groups, first, first, [cls]), type_ignores=[])
        piece = text[begin: stop + len(text) - len(old)]
        if "__future__" in piece and begin:
            return None  # a future import is an error anywhere but at the top of the file
        parsed = _parse_piece(piece, old.count("\n", 0, begin) + 1, path)
        if parsed is None:
            return None
        return ast.Module(body=_spliced(groups, first, last_chunk, parsed.body), type_ignores=[])

    @staticmethod
    def _reparse_in_class(old: str, text: str, cls: ast.ClassDef, begin: int, stop: int, prefix: int,
                          old_end: int, path: str) -> Optional[ast.ClassDef]:
        """A change inside the body of a large class (``begin``-``stop`` in ``old``): the body
        statements around it parsed again under ``class _C:`` at their own lines, the others and
        the class's header kept (the same objects; the class node is a copy). None where the
        change touches the header, the piece does not parse there, or a statement it gives is
        not at the body's indentation (a whole parse would say "unexpected indent")."""
        groups = statement_groups(cls.body)
        if len(groups) < 2:
            return None
        column = cls.body[0].col_offset
        starts = _cut_offsets(old, [statement_first_line(g[0]) for g in groups])[1:]
        if starts[0] <= begin or prefix < starts[0] or not column:
            return None  # the change reaches the header or what comes before the body
        first, last, piece_begin, piece_stop = _changed_chunks(starts, prefix, old_end, stop)
        piece = text[piece_begin: piece_stop + len(text) - len(old)]
        row = old.count("\n", 0, piece_begin) + 1
        if row < 2 or "__future__" in piece:
            return None
        wrapper = _parse_piece(_WRAPPER + piece, row - 1, path)  # the wrapper's line just above
        if wrapper is None or len(wrapper.body) != 1 or type(wrapper.body[0]) is not ast.ClassDef:
            return None  # a statement dedented out of the class: a whole parse decides
        parsed = wrapper.body[0].body
        if any(stmt.col_offset != column for stmt in parsed):
            return None
        body = _spliced(groups, first, last, parsed)
        new = copy.copy(cls)
        new.body = body
        new.end_lineno, new.end_col_offset = body[-1].end_lineno, body[-1].end_col_offset
        return new


def _changed_chunks(starts: List[int], prefix: int, old_end: int, end: int) -> Tuple[int, int, int, int]:
    """(first, last, where the first begins, where the one after the last begins or ``end``):
    the chunks (beginning at ``starts``) that hold the characters changed between ``prefix`` and
    ``old_end`` of the last text, the one before (an insertion at a chunk's start may belong to
    the chunk before it) and the one holding the first unchanged character after them (text
    inserted before a chunk's first line, `    def f():`, changes that statement)."""
    first = max(bisect.bisect_right(starts, max(prefix - 1, 0)) - 1, 0)
    last = max(bisect.bisect_right(starts, min(old_end, end - 1)) - 1, first)
    return first, last, starts[first], starts[last + 1] if last + 1 < len(starts) else end


def _parse_piece(piece: str, row: int, path: str) -> Optional[ast.Module]:
    """CPython's tree of ``piece`` placed at line ``row``; None where it does not parse alone."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse("\n" * (row - 1) + piece, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _spliced(groups: List[List[ast.stmt]], first: int, last: int, new: List[ast.stmt]) -> List[ast.stmt]:
    """The statements of ``groups`` with groups ``first`` to ``last`` replaced by ``new``."""
    return [s for g in groups[:first] for s in g] + new + [s for g in groups[last + 1:] for s in g]


def _chunk_starts(text: str, tree: ast.Module) -> List[int]:
    """Where each chunk (``statement_groups``) begins in ``text``: the start of its first line;
    the first chunk begins at 0 (comments and blank lines before it are its own)."""
    return _cut_offsets(text, [statement_first_line(g[0]) for g in statement_groups(tree.body)[1:]])


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (bisected on C-speed slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, prefix: int) -> int:
    """The length of the longest common suffix that does not overlap ``prefix`` in either."""
    lo, hi = 0, min(len(a), len(b)) - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid: len(a) - lo] == b[len(b) - mid: len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo
