"""What must never reach libcst: text nested or sized past what it can take without crashing.

libcst's native parser recurses once per nesting level and gets slow or huge long before CPython
stops: 5,000 nested parentheses or ``lambda:``s, 10,000 ``and``s or ``elif``s kill the process
(SIGSEGV, a native stack overflow, no report for any other file); 2,000 chained calls or
subscripts take seconds each, 2,000 nested ``lambda``s most of a gigabyte; a flat list costs
about 4 KB per element. CPython refuses 201 nested brackets (its tokenizer's ``MAXLEVEL``), 100
indentation levels, and trees about 3,000 deep (a RecursionError while building the ``ast``).

``refusal(text)`` says whether a file may go to libcst. It is one linear regex scan (strings,
comments, brackets, line breaks) that bounds bracket depth, each logical line's length outside
strings and the amount of code. Nesting depth cannot exceed a logical line's length (every
level costs at least one character of code), so only files with a long logical line, more than
200 nested brackets or a long ``elif`` chain need a closer look: CPython's ``ast`` (its verdict
on the file, TL001) and the real depth of its tree (TL003 past ``MAX_DEPTH``). ``too_large``
is the size half alone, for paths that only run CPython's parser (safe against depth itself).
"""

from __future__ import annotations

import ast
import re
import sys
import threading
import warnings
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Callable, Dict, Optional, TypeVar

from torchlint.parsing import parse_ast

T = TypeVar("T")

#: CPython's tokenizer refuses more nested brackets than this ("too many nested parentheses").
MAX_BRACKET_DEPTH = 200
#: Deepest tree handed to libcst (CPython takes ~3,000): 1,000 chained subscripts parse in ~1 s,
#: 1,000 nested lambdas in ~200 MB; both grow faster than linearly.
MAX_DEPTH = 1000
#: More ``elif`` branches than this may chain past ``MAX_DEPTH`` (libcst nests each in the last).
MANY_ELIFS = MAX_DEPTH // 2
#: Characters of code (outside strings and comments) in one statement / one file. The largest
#: statements in transformers and timm have ~21,000; a flat list of small ints costs libcst about
#: 1.3 KB of memory per character of code, ordinary code ~170 bytes per character of file.
MAX_STATEMENT_CODE = 200_000
MAX_FILE_CODE = 2_000_000

# Strings (their contents cannot nest anything) and comments. A string left open does not match:
# its quote stays, like any other character of code.
_HIDDEN = re.compile(
    r"""'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''|\"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*\"\"\""""
    r"""|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"|\#[^\r\n]*""",
    re.DOTALL,
)
_CONTINUATION = re.compile(r"\\\r?\n")
_BRACKETS = re.compile(r"([()\[\]{}])")
_OPEN = frozenset("([{")


@dataclass(frozen=True)
class Refusal:
    """Why a file is not handed to libcst: ``code`` is TL001 (CPython rejects it too) or TL003."""

    code: str
    message: str
    row: int = 1
    column: int = 1


@dataclass(frozen=True)
class Shape:
    """What one scan of a file found; lengths count a string or a comment as one character."""

    bracket_depth: int  # deepest nesting of brackets
    longest_line: int  # characters of code in the longest logical line
    code: int  # characters of code in the file
    nesting: int  # an upper bound on how deep any statement can nest (see nesting_bound)


def scan(text: str) -> Shape:
    """C-speed regexes, then a Python step per bracket: the logical lines (a newline outside
    brackets ends one), and for the few longer than ``MAX_DEPTH`` a tighter bound on nesting."""
    code = _HIDDEN.sub("s", text)
    if "\r" in code:
        code = code.replace("\r\n", "\n").replace("\r", "\n")
    if "\\" in code:  # backslash continuations: one logical line
        code = _CONTINUATION.sub(" ", code)
    lines = code.split("\n")  # not splitlines: a form feed does not end a line
    longest = max(map(len, lines))
    long_lines = []  # (start, end) of logical lines longer than MAX_DEPTH
    if longest > MAX_DEPTH:
        offset = 0
        for line in lines:
            if len(line) > MAX_DEPTH:
                long_lines.append((offset, offset + len(line)))
            offset += len(line) + 1
    depth = deepest = 0
    offset = 0
    line_start = 0  # where the logical line of the current bracket group starts
    group_end = -1  # where the last top-level group closed
    find, rfind, size = code.find, code.rfind, len(code)
    for index, piece in enumerate(_BRACKETS.split(code)):
        if index % 2 == 0:
            offset += len(piece)
            continue
        if piece in _OPEN:
            if depth == 0 and (group_end < 0 or find("\n", group_end, offset) >= 0):
                line_start = rfind("\n", 0, offset) + 1  # else: same logical line as the last group
            depth += 1
            if depth > deepest:
                deepest = depth
        elif depth:
            depth -= 1
            if depth == 0:
                group_end = offset + 1
                line_end = find("\n", group_end)
                line_end = size if line_end < 0 else line_end
                if line_end - line_start > MAX_DEPTH:
                    long_lines.append((line_start, line_end))
                longest = max(longest, line_end - line_start)
        offset += 1
    if depth:  # a bracket never closed: its logical line runs to the end
        longest = max(longest, size - line_start)
        long_lines.append((line_start, size))
    nesting = max((nesting_bound(code, start, end) for start, end in _merged(long_lines)), default=longest)
    return Shape(deepest, longest, size, min(nesting, longest))


def _merged(spans):
    """Overlapping spans joined (a logical line is recorded once per top-level bracket group)."""
    merged = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


_STRUCTURE = re.compile(r"[()\[\]{},;:\n]|lambda")


def nesting_bound(code: str, start: int, end: int) -> int:
    """An upper bound on the nesting depth of the code in ``code[start:end]`` (strings already
    one character). Every level of a tree costs at least one character at its own bracket level,
    and commas (semicolons, line breaks outside brackets) separate siblings: a segment between
    them nests at most its own characters plus its deepest bracket group, a group one more than
    its deepest segment. A long flat list or dict is then as shallow as its longest element.
    A ``lambda``'s parameters are not siblings of what follows them (its body nests under the
    lambda): no comma splits a segment between a ``lambda`` and its ``:`` at the same level (the
    first one there: parameters hold colons only inside brackets or nested lambdas)."""
    # a frame per open bracket: [open offset, segment start, characters of child groups in the
    # segment, deepest child group in the segment, deepest segment so far, lambdas whose ':'
    # is still to come]
    frames = [[start - 1, start, 0, 0, 0, 0]]
    for match in _STRUCTURE.finditer(code, start, end):
        char, pos = match.group(), match.start()
        frame = frames[-1]
        if char == "lambda":  # also inside a longer name: only fewer splits, still a bound
            frame[5] += 1
            continue
        if char == ":":
            if frame[5]:
                frame[5] -= 1
            continue
        if char in "([{":
            frames.append([pos, pos + 1, 0, 0, 0, 0])
            continue
        if char in "\n;" and len(frames) > 1:  # inside brackets: a space / a syntax error
            continue
        if char in ")]}" and len(frames) == 1:
            continue  # a stray closing bracket (a syntax error): ignored
        if char == "," and frame[5]:
            continue  # between a lambda and its ':'
        frame[5] = 0  # a statement or bracket group ends here: so does any lambda in it
        segment = pos - frame[1] - frame[2] + frame[3]
        if segment > frame[4]:
            frame[4] = segment
        frame[1], frame[2], frame[3] = pos + 1, 0, 0
        if char in ")]}":
            frames.pop()
            parent = frames[-1]
            parent[2] += pos - frame[0] - 1
            parent[3] = max(parent[3], frame[4] + 1)
    while True:  # close what the span leaves open
        frame = frames[-1]
        frame[4] = max(frame[4], end - frame[1] - frame[2] + frame[3])
        if len(frames) == 1:
            return frame[4]
        frames.pop()
        parent = frames[-1]
        parent[2] += end - frame[0] - 1
        parent[3] = max(parent[3], frame[4] + 1)


# A line that starts a top-level statement, in text whose strings are "s" and comments "#":
# column 0, not blank, not a comment, not a clause of the statement before it.
_TOP_START = re.compile(r"^(?!(?:else|elif|except|finally)\b)[^\s#]", re.MULTILINE)


def longest_elif_run(text: str) -> int:
    """An upper bound on the length of any ``elif`` chain (libcst nests each branch in the one
    before): the most ``elif``s in one top-level statement. Counting them in the whole file
    would send every large file with many short chains to ``_closer_look`` (a second parse of
    CPython's tree and a walk of it). A top-level statement ends where a line starts in column
    0 outside strings and brackets and after no backslash, unless it is a clause."""
    code = _HIDDEN.sub(lambda m: "#" if m.group().startswith("#") else "s", text)
    if "\r" in code:
        code = code.replace("\r\n", "\n").replace("\r", "\n")
    if "\\" in code:
        code = _CONTINUATION.sub(" ", code)
    most = depth = 0
    start = last = 0  # where the current top-level statement starts; offset depth counts to
    count = code.count
    for match in _TOP_START.finditer(code):
        pos = match.start()
        depth += sum(map(count, "([{", repeat(last), repeat(pos))) - sum(map(count, ")]}", repeat(last), repeat(pos)))
        last = pos
        if depth <= 0:  # a stray closing bracket is a syntax error: counted as depth 0
            depth = 0
            most = max(most, count("elif", start, pos))
            start = pos
    return max(most, count("elif", start))


def too_large(text: str, shape: Optional[Shape] = None) -> Optional[Refusal]:
    """TL003 for more code than CPython's ``ast`` (let alone libcst) can hold in reasonable memory."""
    if len(text) <= MAX_FILE_CODE:  # nothing to count: cannot exceed the limit
        return None
    shape = shape or scan(text)
    if shape.code > MAX_FILE_CODE:
        return Refusal("TL003", f"too large to analyse: {shape.code:,} characters of code (limit {MAX_FILE_CODE:,})")
    return None


def refusal(text: str) -> Optional[Refusal]:
    """None if libcst may parse ``text``; else why not (TL001 where CPython rejects it too)."""
    shape = scan(text)
    refused = too_large(text, shape)
    if refused is not None:
        return refused
    if _shallow(text, shape):
        return None
    return _closer_look(text, shape)


def shallow(piece: str) -> bool:
    """Whether ``piece`` passes ``refusal``'s quick checks, which each hold for a file exactly
    when they hold for each of its top-level statements (brackets, logical lines and ``elif``
    chains never span two): a file whose size passed ``too_large``, cut at its top-level
    statements, needs only its pieces checked (an editor: those libcst has not parsed yet)."""
    return _shallow(piece, scan(piece))


def _shallow(text: str, shape: Shape) -> bool:
    return (
        shape.bracket_depth <= MAX_BRACKET_DEPTH
        and shape.nesting <= MAX_DEPTH
        and shape.longest_line <= MAX_STATEMENT_CODE
        and (text.count("elif") <= MANY_ELIFS or longest_elif_run(text) <= MANY_ELIFS)
    )


def _closer_look(text: str, shape: Shape) -> Optional[Refusal]:
    """CPython's verdict, then the size of the largest statement and the real depth of the tree."""
    try:
        with warnings.catch_warnings():  # SyntaxWarnings of the linted code are not ours to print
            warnings.simplefilter("ignore")
            tree = parse_ast(text)  # in chunks when large: the same tree and errors, less memory
    except SyntaxError as exc:
        return Refusal("TL001", f"SyntaxError: {exc.msg or 'invalid syntax'}", exc.lineno or 1, max(exc.offset or 1, 1))
    except (RecursionError, MemoryError, ValueError) as exc:  # out of depth; NUL bytes
        return Refusal("TL001", parse_failure(exc))
    if shape.longest_line > MAX_STATEMENT_CODE:
        return Refusal(
            "TL003",
            f"too large to analyse: a statement of {shape.longest_line:,} characters of code "
            f"(limit {MAX_STATEMENT_CODE:,})",
            _largest_statement_row(text, tree),
        )
    depth, row = tree_depth(tree)
    if depth > MAX_DEPTH:
        return Refusal("TL003", f"too complex to analyse: code nested {depth:,} deep (limit {MAX_DEPTH:,})", row)
    return None


def parse_failure(exc: BaseException) -> str:
    """TL001's message when CPython's parser fails other than with a SyntaxError: never empty
    (a MemoryError says nothing: the parser's stack ran out on ``- - - ... 1`` or 50,000 nested
    ``not``s)."""
    if isinstance(exc, (RecursionError, MemoryError)):
        return "SyntaxError: too deeply nested for Python's parser"
    return f"cannot parse: {exc or exc.__class__.__name__}"


def _largest_statement_row(text: str, tree: ast.Module) -> int:
    """Row where the statement with the most characters starts (compound statements by header)."""
    from torchlint.locator import Locator

    starts = Locator(text).line_starts  # CPython's columns are UTF-8 bytes: close enough here

    def size(node: ast.stmt) -> int:
        end = getattr(node, "body", [node])[0] if isinstance(getattr(node, "body", None), list) else node
        if end is node:
            return starts[node.end_lineno - 1] + node.end_col_offset - starts[node.lineno - 1] - node.col_offset  # type: ignore[operator]  # set by ast.parse
        return starts[end.lineno - 1] - starts[node.lineno - 1]

    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    return max(statements, key=size).lineno if statements else 1


def tree_depth(tree: ast.AST):
    """(deepest nesting, row where it is) of an ``ast`` tree, counted as libcst nests: each
    operand of ``a and b and c`` one level deeper than the one before (libcst chains them)."""
    deepest, row = 0, 1
    stack = [(tree, 1, 1)]
    pop, push = stack.pop, stack.append
    ctx = (ast.Load, ast.Store, ast.Del)
    while stack:
        node, depth, line = pop()
        line = getattr(node, "lineno", line)
        if depth > deepest:
            deepest, row = depth, line
        if isinstance(node, ast.BoolOp):
            for i, value in enumerate(node.values):
                push((value, depth + max(i, 1), line))
            continue
        for name in node._fields:
            value = getattr(node, name, None)  # type: ignore[assignment]  # any field, not only an expr
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        push((item, depth + 1, line))
            elif isinstance(value, ast.AST) and not isinstance(value, ctx):
                push((value, depth + 1, line))
    return deepest, row


#: Stack and recursion limit for ``deep_call``: room for far deeper trees than libcst is given.
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000
_DEEP_LOCK = threading.Lock()


def deep_call(fn: Callable[..., T], *args) -> T:
    """``fn(*args)`` on a thread with a large stack and a high recursion limit, for recursive
    code (libcst's code generation, rules' helpers) on trees deeper than Python's default limit
    of 1,000 frames allows. The stack is reserved, not committed: only what is used costs
    memory. The result, or the exception, is the caller's."""
    outcome: Dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    with _DEEP_LOCK:  # the recursion limit and the stack size are process-wide settings
        limit = sys.getrecursionlimit()
        size = threading.stack_size()
        try:
            threading.stack_size(DEEP_STACK_BYTES)
            sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
            thread = threading.Thread(target=run, name="torchlint-deep", daemon=True)
            thread.start()
        finally:
            threading.stack_size(size)
        try:
            thread.join()
        finally:
            sys.setrecursionlimit(limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
