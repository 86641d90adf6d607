"""Stage 2 of the pipeline: read a file's bytes and decode them as Python source.

Honours a UTF-8 BOM and PEP 263 coding declarations, and remembers both so that a fix can write
the file back byte-for-byte the same apart from the edits.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import tokenize
from dataclasses import dataclass


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+", re.MULTILINE)


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
    if b"\0" in data[:8192]:
        raise UnreadableFile("binary file (contains NUL bytes)")
    bom = data.startswith(codecs.BOM_UTF8)
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


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    return decode_source(data, path)


def file_signature(path: str):
    """(size, mtime_ns) of a file, used to notice that it changed since it was read."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns
