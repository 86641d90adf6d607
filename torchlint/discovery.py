"""Stage 1 of the pipeline: find the Python files to lint.

Skips VCS folders, virtual environments, caches and build output, the configured ``exclude``
globs and what git ignores (``.gitignore`` files, ``.git/info/exclude``, the global excludes
file). A file named explicitly is always linted, unless
``--force-exclude`` asks that excludes apply to it too (pre-commit passes every changed file).

Nothing is silently dropped: a ``.py`` name that is not a regular file (a FIFO, a symlink to a
device) and a folder that cannot be listed are returned like files, and the read stage reports
each as TL002 with the reason. Temporary files left by killed ``--fix`` runs are reaped on the way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Pattern

from torchlint.config import SettingsResolver
from torchlint.globs import GlobError, compile_glob

DEFAULT_EXCLUDES = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist",
    "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchlint_cache", ".eggs",
    "site-packages", "_build", "buck-out", ".ipynb_checkpoints", ".direnv", "__pypackages__",
})
PY_SUFFIXES = (".py", ".pyi")
#: Also linted, unless ``include-notebooks = false`` or ``--extension`` leaves ipynb out
#: (``Settings.lint_suffixes``; docs/notebooks.md).
NOTEBOOK_SUFFIXES = (".ipynb",)


@dataclass(frozen=True)
class IgnoreRule:
    negated: bool
    dir_only: bool
    anchored: bool
    regex: Pattern[str]


def parse_gitignore(text: str) -> List[IgnoreRule]:
    """The rules of a ``.gitignore`` (or ``info/exclude``, a global excludes file), read as git
    reads them: a line git cannot match (an unclosed ``[``) is passed over, as git does."""
    rules = []
    for raw in text.splitlines():
        line = raw
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]  # trailing spaces do not count unless quoted with a backslash
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        try:
            regex = compile_glob(line.lstrip("/"))
        except GlobError:
            continue
        rules.append(IgnoreRule(negated, dir_only, anchored, regex))
    return rules


def _read_ignore_file(path: str) -> List[IgnoreRule]:
    """The rules of one ignore file; none if it is absent, unreadable or not a regular file."""
    from torchlint.source import UnreadableFile, read_bytes

    try:
        data, _ = read_bytes(path, MAX_IGNORE_FILE_BYTES)
    except UnreadableFile:
        return []
    return parse_gitignore(data.decode("utf-8", "replace"))


#: An ignore file larger than this is not read (no real one comes near).
MAX_IGNORE_FILE_BYTES = 16 * 1024 * 1024


class GitIgnore:
    """The .gitignore files met on the way down, evaluated like git: deeper and later wins.
    At the top of a git repository, ``$GIT_DIR/info/exclude`` and the user's global excludes
    file (``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore``) count too, below
    that folder's ``.gitignore``, as in git."""

    def __init__(self) -> None:
        self._rules: Dict[str, List[IgnoreRule]] = {}
        self._chains: Dict[str, List[str]] = {}
        self._user_config: Optional[Dict[str, str]] = None  # the git config files above a repository's

    def load_dir(self, directory: str) -> None:
        if directory in self._rules:
            return
        self._chains.clear()  # a chain asked before this folder's rules were known
        rules: List[IgnoreRule] = []
        if os.path.lexists(os.path.join(directory, ".git")):
            rules = self._repository_rules(directory)
        path = os.path.join(directory, ".gitignore")
        if os.path.isfile(path):
            rules = rules + _read_ignore_file(path)
        self._rules[directory] = rules

    def _repository_rules(self, top: str) -> List[IgnoreRule]:
        """The global excludes file's rules, then ``info/exclude``'s, of the repository at ``top``."""
        from torchlint import gitconfig

        git_dir = gitconfig.common_git_dir(top)
        if self._user_config is None:
            self._user_config = gitconfig.user_config()
        settings = dict(self._user_config)
        if git_dir is not None:
            settings.update(gitconfig.read_config(os.path.join(git_dir, "config")))
        rules = []
        excludes = gitconfig.excludes_file(settings, top)
        if excludes:
            rules += _read_ignore_file(excludes)
        if git_dir is not None:
            rules += _read_ignore_file(os.path.join(git_dir, "info", "exclude"))
        return rules

    def load_ancestors(self, directory: str) -> None:
        """Load .gitignore files from ``directory`` up to the enclosing git repository's root."""
        chain = []
        d = os.path.abspath(directory)
        while True:
            chain.append(d)
            if os.path.exists(os.path.join(d, ".git")):
                break
            parent = os.path.dirname(d)
            if parent == d:
                chain = [os.path.abspath(directory)]  # not in a git repository
                break
            d = parent
        for d in reversed(chain):
            self.load_dir(d)

    def _chain(self, directory: str) -> List[str]:
        """The folders from ``directory`` up whose .gitignore has rules (most have none),
        innermost first; the same for every entry of ``directory`` (its ancestors' files are
        loaded before its entries are asked about)."""
        chain = self._chains.get(directory)
        if chain is None:
            parent = os.path.dirname(directory)
            chain = [directory] if self._rules.get(directory) else []
            if parent != directory:
                chain = chain + self._chain(parent)
            self._chains[directory] = chain
        return chain

    def is_ignored(self, path: str, is_dir: bool) -> bool:
        path = os.path.abspath(path)
        ignored = False
        chain = self._chain(os.path.dirname(path))
        if not chain:
            return False
        name = os.path.basename(path)
        for directory in reversed(chain):
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            for rule in self._rules[directory]:
                if rule.dir_only and not is_dir:
                    continue
                target = rel if rule.anchored else name
                if rule.regex.match(target):
                    ignored = not rule.negated
        return ignored


def _is_venv(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "pyvenv.cfg"))


def discover(
    paths: Iterable[str],
    resolver: SettingsResolver,
    force_exclude: bool = False,
) -> List[str]:
    """Python files under ``paths``, sorted, each once."""
    from torchlint.atomic import reap_stale

    found: Dict[str, None] = {}
    for given in paths:
        if not os.path.isdir(given):  # a file, a FIFO, a device, or nothing: the user named it
            if os.path.lexists(given) and force_exclude and _explicit_excluded(given, resolver):
                continue
            found[given] = None  # anything but a regular file is reported by the read stage
            continue
        gitignore = GitIgnore()
        settings = resolver.for_path(given)
        if settings.respect_gitignore:
            gitignore.load_ancestors(given)
        unlistable: List[str] = []
        for root, dirs, files in os.walk(given, onerror=lambda exc: unlistable.append(exc.filename)):
            while unlistable:  # a folder os.walk could not list: TL002 for it, not silence
                found[os.path.normpath(unlistable.pop())] = None
            settings = resolver.for_path(root)
            if settings.respect_gitignore:
                gitignore.load_dir(os.path.abspath(root))
            kept = []
            for d in sorted(dirs):
                full = os.path.join(root, d)
                if d in DEFAULT_EXCLUDES or d.endswith(".egg-info") or _is_venv(full):
                    continue
                if settings.is_excluded(full):
                    continue
                if settings.respect_gitignore and gitignore.is_ignored(full, True):
                    continue
                kept.append(d)
            dirs[:] = kept
            if any(f.startswith(".torchlint-") for f in files):
                reap_stale(root, files)
            suffixes = settings.lint_suffixes
            for f in sorted(files):
                if not f.endswith(suffixes):
                    continue
                full = os.path.join(root, f)
                if settings.is_excluded(full):
                    continue
                if settings.respect_gitignore and gitignore.is_ignored(full, False):
                    continue
                found[os.path.normpath(full)] = None
        while unlistable:  # the last folder listed, or ``given`` itself
            found[os.path.normpath(unlistable.pop())] = None
    return sorted(found)


def _explicit_excluded(path: str, resolver: SettingsResolver) -> bool:
    settings = resolver.for_path(path)
    if settings.is_excluded(path):
        return True
    # pre-commit names every changed file: a suffix left out (``include-notebooks = false``,
    # ``--extension py``) is skipped, as in a folder; a name without a known suffix is linted.
    if path.endswith(PY_SUFFIXES + NOTEBOOK_SUFFIXES) and not path.endswith(settings.lint_suffixes):
        return True
    return any(part in DEFAULT_EXCLUDES for part in Path(path).parts[:-1])
