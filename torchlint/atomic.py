"""Atomic file writes: a temporary file in the same folder, then a rename over the target."""

from __future__ import annotations

import os
import tempfile


def atomic_write_bytes(path: str, data: bytes, mode: "int | None" = None) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".torchlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None and os.path.exists(path):
            mode = os.stat(path).st_mode & 0o7777
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
