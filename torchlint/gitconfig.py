"""What file discovery needs from git's own configuration, read without running git: where a
repository's git folder is (``.git`` may be a ``gitdir:`` file, as in a worktree or submodule)
and the user's global excludes file (``core.excludesFile``).

The configuration files are read in git's order, a later value winning: the system file
(``$GIT_CONFIG_SYSTEM`` or ``/etc/gitconfig``, unless ``$GIT_CONFIG_NOSYSTEM``), the user's
(``$GIT_CONFIG_GLOBAL``, else ``$XDG_CONFIG_HOME/git/config`` or ``~/.config/git/config``, then
``~/.gitconfig``) and the repository's ``config``. ``include``/``includeIf`` are not followed.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

#: A git config file larger than this is not read (no real one comes near).
MAX_CONFIG_BYTES = 1024 * 1024

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


def _value(raw: str) -> Tuple[str, bool]:
    """A value's text after ``=``: quotes removed, escapes read, a comment cut off, unquoted
    spaces at either end dropped; and whether a backslash continues it on the next line."""
    out: List[str] = []
    quoted = False
    kept = 0  # the length of ``out`` that ends in something quoted or not a space
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 >= len(raw):
                return "".join(out), True
            out.append(_ESCAPES.get(raw[i + 1], raw[i + 1]))
            kept = len(out)
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            kept = len(out)
        elif not quoted and c in "#;":
            break
        elif not quoted and c.isspace():
            if out:
                out.append(c)
        else:
            out.append(c)
            kept = len(out)
        i += 1
    return "".join(out[:kept]), False


def parse_config(text: str) -> Dict[str, str]:
    """``section.key`` (``section.subsection.key`` for ``[section "subsection"]``; section and
    key in lower case) -> the last value given; a key without ``=`` is ``"true"``."""
    values: Dict[str, str] = {}
    section = ""
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k].strip()
        k += 1
        if line.startswith("["):
            end = line.find("]")
            if end < 0:
                section = ""
                continue
            header = line[1:end].strip()
            name, _, sub = header.partition(" ")
            sub = sub.strip()
            if sub.startswith('"') and sub.endswith('"') and len(sub) >= 2:
                section = f"{name.lower()}.{sub[1:-1]}"
            else:
                section = header.lower()
            line = line[end + 1:].strip()
        if not line or line[0] in "#;" or not section:
            continue
        name, eq, raw = line.partition("=")
        key = name.strip().lower()
        if not key:
            continue
        if not eq:
            values[f"{section}.{key}"] = "true"
            continue
        value, more = _value(raw)
        while more and k < len(lines):
            tail, more = _value(lines[k])
            k += 1
            value += tail
        values[f"{section}.{key}"] = value
    return values


def read_config(path: str) -> Dict[str, str]:
    """``parse_config`` of the file at ``path``; nothing if it is absent or unreadable."""
    from torchlint.source import UnreadableFile, read_bytes

    try:
        data, _ = read_bytes(path, MAX_CONFIG_BYTES)
    except UnreadableFile:
        return {}
    return parse_config(data.decode("utf-8", "replace"))


def _xdg_config_home() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


def user_config() -> Dict[str, str]:
    """The system's and the user's git configuration, merged as git merges them."""
    files: List[str] = []
    if not os.environ.get("GIT_CONFIG_NOSYSTEM"):
        files.append(os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig")
    if os.environ.get("GIT_CONFIG_GLOBAL"):
        files.append(os.environ["GIT_CONFIG_GLOBAL"])
    else:
        files += [os.path.join(_xdg_config_home(), "git", "config"), os.path.join(os.path.expanduser("~"), ".gitconfig")]
    merged: Dict[str, str] = {}
    for path in files:
        merged.update(read_config(path))
    return merged


def common_git_dir(top: str) -> Optional[str]:
    """The git folder holding ``config`` and ``info/`` for the repository whose working tree
    is ``top``: ``top/.git``, or where a ``.git`` file's ``gitdir:`` (and that folder's
    ``commondir``, for a worktree) points. None if there is none."""
    dotgit = os.path.join(top, ".git")
    if os.path.isdir(dotgit):
        git_dir = dotgit
    elif os.path.isfile(dotgit):
        text = _first_line(dotgit)
        if not text or not text.startswith("gitdir:"):
            return None
        git_dir = os.path.join(top, text[len("gitdir:"):].strip())
    else:
        return None
    common = _first_line(os.path.join(git_dir, "commondir"))
    return os.path.normpath(os.path.join(git_dir, common)) if common else os.path.normpath(git_dir)


def _first_line(path: str) -> Optional[str]:
    from torchlint.source import UnreadableFile, read_bytes

    try:
        data, _ = read_bytes(path, 64 * 1024)
    except UnreadableFile:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else None


def excludes_file(settings: Dict[str, str], top: str) -> Optional[str]:
    """The global excludes file ``settings`` name (``core.excludesFile``; unset:
    ``$XDG_CONFIG_HOME/git/ignore`` or ``~/.config/git/ignore``, as git), or None when it is
    set empty. A relative path is taken from the working tree's top."""
    value = settings.get("core.excludesfile")
    if value is None:
        return os.path.join(_xdg_config_home(), "git", "ignore")
    if not value:
        return None
    path = os.path.expanduser(value)
    return path if os.path.isabs(path) else os.path.join(top, path)
