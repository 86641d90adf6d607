"""Paths as CI systems want them: relative to the repository root, with ``/`` separators.

GitHub matches annotations and code-scanning results against files in the checkout, so a path
must be relative to the repository root whatever folder torchlint ran from.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Optional


def repository_root(start: str) -> str:
    """The enclosing git repository's root, or ``start`` itself outside a repository."""
    return _repository_root(os.path.abspath(start))


@lru_cache(maxsize=64)
def _repository_root(start: str) -> str:
    d = start
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return start
        d = parent


def relative_path(path: str, root: str) -> Optional[str]:
    """``path`` relative to the repository holding ``root``, '/'-separated; None if outside it."""
    if path == "-":
        return "-"
    base = repository_root(root)
    rel = os.path.relpath(os.path.abspath(path), base)
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def display_path(path: str, root: str) -> str:
    """The repository-relative path, or the absolute path for a file outside the repository."""
    rel = relative_path(path, root)
    return rel if rel is not None else os.path.abspath(path).replace(os.sep, "/")
