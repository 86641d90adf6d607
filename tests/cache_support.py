"""What the cache tests share: a project folder the cache treats as one, and files written with
an old modification time (so that no stat is "racily clean")."""

from __future__ import annotations

import os
from pathlib import Path

from torchlint import cache as cache_mod

OLD = 1_600_000_000_000_000_000  # an mtime far in the past: not "racily clean"


def new_project(tmp_path: Path, monkeypatch) -> Path:
    """``tmp_path`` as a project root (a ``.git`` folder), with no cache folder set outside it."""
    monkeypatch.delenv(cache_mod.ENV_VAR, raising=False)
    (tmp_path / ".git").mkdir()
    return tmp_path


def write(path: Path, text: str, mtime_ns: int = OLD) -> None:
    path.write_text(text)
    os.utime(path, ns=(mtime_ns, mtime_ns))
