"""What identifies this installation of torchlint, and where it keeps files of its own.

Nothing is ever written inside the installed package (it may be read-only or shared): per-user
files go to the user's cache folder, per-project results to the project's cache (``cache.py``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Optional

from torchlint import __version__

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_CODE_SIGNATURE: Optional[str] = None


def code_signature() -> str:
    """The torchlint version plus (path, size, mtime) of every module of the package: editing
    or adding a rule, or upgrading torchlint, changes it. About 50 ``stat`` calls, once."""
    global _CODE_SIGNATURE
    if _CODE_SIGNATURE is None:
        parts = [__version__, sys.version.split()[0]]
        for folder, dirs, names in os.walk(PACKAGE_DIR):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    parts.append(f"{os.path.relpath(path, PACKAGE_DIR)}:{st.st_size}:{st.st_mtime_ns}")
        _CODE_SIGNATURE = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
    return _CODE_SIGNATURE


def user_cache_dir() -> str:
    """torchlint's folder in the user's cache: ``$XDG_CACHE_HOME/torchlint`` (default
    ``~/.cache/torchlint``), ``~/Library/Caches/torchlint`` on macOS, ``%LOCALAPPDATA%\\torchlint``
    on Windows. It may not exist, or not be writable: callers do without it."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(os.path.abspath(base), "torchlint")
