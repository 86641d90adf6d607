"""Stage 2 of the pipeline: read a file's bytes and decode them as Python source.

Honours a UTF-8 BOM and PEP 263 coding declarations, and remembers both so that a fix can write
the file back byte-for-byte the same apart from the edits.

Only regular files are read (a FIFO named ``x.py`` would block forever, a symlink to ``/dev/zero``
would never end), and never more than ``max-file-size`` bytes: anything else is an
``UnreadableFile`` whose message says why, reported as TL002.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import sys
import tokenize
from dataclasses import dataclass
from itertools import accumulate
from typing import List, Optional, Tuple


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)

#: Files larger than this are not read (``max-file-size``); generated data, not code to lint.
DEFAULT_MAX_FILE_SIZE = 10 * 1024 * 1024


class UnreadableFile(Exception):
    """The file cannot be read or decoded; ``str(exc)`` is a one-line reason."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    encoding: str = "utf-8"
    bom: bool = False

    def encode(self, text: str) -> bytes:
        """Encode ``text`` the way this file was stored (same codec, same BOM)."""
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes, path: str = "<stdin>") -> SourceFile:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # also UTF-32 LE's BOM
        raise UnreadableFile("UTF-16/UTF-32 encoded file (byte order mark); save it as UTF-8")
    if b"\0" in data:  # anywhere: CPython rejects the whole file, wherever the NUL is
        even, odd = data[:4096:2], data[1:4096:2]
        if len(odd) > 1 and (not odd.strip(b"\0") or not even.strip(b"\0")):  # ASCII text as UTF-16
            raise UnreadableFile("UTF-16 encoded file (no byte order mark); save it as UTF-8")
        raise UnreadableFile("binary file (contains NUL bytes)")
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        cookie = _COOKIE.search(b"\n".join(data[3:].splitlines()[:2]))
        if cookie and _codec_name(cookie.group(1)) not in ("utf-8", None):
            raise UnreadableFile(  # CPython: "encoding problem: ... with BOM"
                f"UTF-8 byte order mark contradicts its coding declaration ({cookie.group(1).decode('ascii', 'replace')})"
            )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if _COOKIE.search(b"\n".join(data.splitlines()[:2])):  # unknown codec, BOM/cookie conflict
            raise UnreadableFile(f"bad encoding declaration: {exc}") from None
        encoding = "utf-8"  # no declaration: the first lines are not UTF-8; say where below
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(codecs.BOM_UTF8):] if bom else data
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        row = body.count(b"\n", 0, exc.start) + 1
        raise UnreadableFile(
            f"cannot decode as {encoding} (line {row}: {exc.reason}); save it as UTF-8 "
            "or declare its encoding (PEP 263)"
        ) from None
    except LookupError as exc:
        raise UnreadableFile(f"unknown encoding: {exc}") from None
    return SourceFile(path=path, text=text, encoding=encoding, bom=bom)


def _codec_name(name: bytes) -> Optional[str]:
    try:
        return codecs.lookup(name.decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
)


def _not_regular(path: str, mode: int) -> str:
    if stat.S_ISDIR(mode):
        try:  # discovery names a folder it could not list: say why
            with os.scandir(path):
                pass
        except OSError as exc:
            return f"cannot list folder: {exc.strerror or exc}"
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"not a regular file ({kind}); skipped"


def _too_large(size: int, limit: int, what: str = "max-file-size is") -> str:
    return f"file too large ({size:,} bytes; {what} {limit:,}); skipped"


#: A notebook's JSON may be this many times ``max-file-size``: its outputs (images as base64)
#: are not code. ``max-file-size`` applies to the code its cells hold (``notebook.check_code_size``);
#: this bound keeps a notebook of hundreds of megabytes from being read whole.
NOTEBOOK_SIZE_FACTOR = 20


def read_file_bytes(path: str, settings) -> Tuple[bytes, os.stat_result]:
    """``read_bytes`` with the limit ``settings`` give ``path``: ``max-file-size``, or for a
    notebook ``NOTEBOOK_SIZE_FACTOR`` times that (its code is measured once parsed)."""
    return read_bytes(path, *read_limit(path, settings))


def read_limit(path: str, settings) -> Tuple[Optional[int], str]:
    """(bytes ``path`` may have, how a refusal names that limit): see ``read_file_bytes``."""
    limit = max_file_size(settings)
    if limit is None or not is_notebook_path(path):
        return limit, "max-file-size is"
    return limit * NOTEBOOK_SIZE_FACTOR, f"a notebook may be {NOTEBOOK_SIZE_FACTOR} x max-file-size:"


def read_bytes(path: str, max_size: Optional[int] = DEFAULT_MAX_FILE_SIZE,
               what: str = "max-file-size is") -> Tuple[bytes, os.stat_result]:
    """The bytes of the regular file at ``path`` (symlinks followed) and its ``fstat``.

    Raises ``UnreadableFile`` for anything that is not a regular file (checked before opening,
    so that opening a device has no side effect, and again on the open descriptor, in case the
    path was swapped in between), and for files over ``max_size`` bytes (``None``: no limit),
    including files that grow past it while being read."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(_not_regular(path, st.st_mode))
    if max_size is not None and st.st_size > max_size:
        raise UnreadableFile(_too_large(st.st_size, max_size, what))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO swapped in after the stat does not block
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    with open(fd, "rb", closefd=True) as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(_not_regular(path, st.st_mode))
        try:
            data = fh.read() if max_size is None else fh.read(max_size + 1)
        except OSError as exc:
            raise UnreadableFile(exc.strerror or str(exc)) from None
    if max_size is not None and len(data) > max_size:
        raise UnreadableFile(_too_large(len(data), max_size, what))
    return data, st


def read_stdin(max_size: Optional[int] = DEFAULT_MAX_FILE_SIZE, what: str = "max-file-size") -> bytes:
    """The bytes on stdin, at most ``max_size`` (``None``: no limit): ``cat /dev/zero |
    torchlint -`` stops after the limit instead of growing until memory runs out. Raises
    ``UnreadableFile`` (a one-line reason) past the limit, for a closed stdin (``<&-``: Python
    sets ``sys.stdin`` to None) and for a read error."""
    stream = sys.stdin
    if stream is None:
        raise UnreadableFile("stdin is closed; nothing to lint")
    buffer = getattr(stream, "buffer", None)
    limit = -1 if max_size is None else max_size + 1
    try:
        if buffer is not None:
            data = buffer.read(limit)
        else:  # a text stream put in its place (tests, embedding): its characters as UTF-8
            data = stream.read(limit).encode("utf-8", "surrogateescape")
    except (OSError, ValueError) as exc:  # EBADF, EIO; ValueError: a stream closed in-process
        raise UnreadableFile(f"cannot read stdin: {getattr(exc, 'strerror', None) or exc}") from None
    if max_size is not None and len(data) > max_size:
        raise UnreadableFile(f"more than {max_size:,} bytes on stdin ({what}); not linted")
    return data


def stdin_limit(name: str, settings) -> Tuple[Optional[int], str]:
    """``read_stdin``'s arguments for a buffer named ``name`` (``--stdin-filename``)."""
    limit, _ = read_limit(name, settings)
    return limit, "max-file-size" if limit == max_file_size(settings) else f"{NOTEBOOK_SIZE_FACTOR} x max-file-size for a notebook"


def copy_stdin() -> None:
    """stdin to stdout unchanged, in blocks (a force-excluded file given to ``--fix``): no
    bound needed, nothing is kept; a closed stdin copies nothing."""
    import shutil

    if sys.stdin is None or sys.stdout is None:
        return
    source, target = getattr(sys.stdin, "buffer", None), getattr(sys.stdout, "buffer", None)
    if source is None or target is None:  # text streams put in their place (tests, embedding)
        sys.stdout.write(sys.stdin.read())
        return
    sys.stdout.flush()
    shutil.copyfileobj(source, target)
    target.flush()


def read_source(path: str, max_size: Optional[int] = DEFAULT_MAX_FILE_SIZE) -> SourceFile:
    data, _ = read_bytes(path, max_size)
    return decode_source(data, path)


def max_file_size(settings) -> Optional[int]:
    """The configured ``max-file-size`` of ``settings`` (0 or None: no limit)."""
    return getattr(settings, "max_file_size", DEFAULT_MAX_FILE_SIZE) or None


_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")


def split_lines(text: str, keepends: bool = False) -> List[str]:
    """``text.splitlines(keepends)`` as CPython's tokenizer ends lines: at ``\\n``, ``\\r\\n`` or a
    lone ``\\r`` only. ``str.splitlines`` also cuts at a form feed, ``\\x1c``-``\\x1e``, ``\\x85`` and
    ``\\u2028``/``\\u2029``, which may stand in a line of code (a comment, a string): the rows after
    one would drift from CPython's and libcst's."""
    lines = _LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


_LINE_END = re.compile(r"\r\n?|\n")
_PLUS_ONE = (1).__add__  # a line's length with its newline


def line_starts(text: str) -> List[int]:
    """The offset where each line of ``text`` starts, then one past the end (for
    ``bisect_right(starts, offset)``: the 1-based line of an offset). Lines end at ``\n``,
    ``\r\n`` or a lone ``\r``, as CPython's tokenizer counts them."""
    if "\r" in text:
        starts = [0]
        starts.extend(match.end() for match in _LINE_END.finditer(text))
        starts.append(len(text) + 1)
        return starts
    return list(accumulate(map(_PLUS_ONE, map(len, text.split("\n"))), initial=0))



NOTEBOOK_SUFFIX = ".ipynb"


def is_notebook_path(path: str) -> bool:
    """A Jupyter notebook: read as JSON and linted as its code cells (see notebook.py)."""
    return str(path).lower().endswith(NOTEBOOK_SUFFIX)
