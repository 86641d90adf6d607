"""``torchlint clean``: remove torchlint's results caches (``torchlint.cache``): the project's
(``cache-dir``, ``--cache-dir``) and every cache folder under the current folder (or the
folders given), as ``ruff clean`` does. Only a folder holding the ``CACHEDIR.TAG`` torchlint
writes is ever removed; symbolic links are not followed."""

from __future__ import annotations

import os
import shutil
import sys
from typing import List, Sequence

from torchlint.commands.usage import EXIT_ERROR, EXIT_OK, Parser

#: Folders ``clean`` does not search (never a cache of torchlint's; costly to walk).
NOT_SEARCHED = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__"})


def main(argv: Sequence[str]) -> int:
    """``torchlint clean [PATHS] [--cache-dir PATH] [--config PATH] [--isolated]``."""
    parser = Parser(prog="torchlint clean", description="Remove torchlint's results caches (the project's and every one under PATHS).")
    parser.add_argument("paths", nargs="*", help="folders to search for caches (default: .)")
    parser.add_argument("--cache-dir", metavar="PATH", help="the cache folder (default: .torchlint_cache)")
    parser.add_argument("--config", metavar="PATH", help="the pyproject.toml whose cache-dir to use")
    parser.add_argument("--isolated", action="store_true", help="ignore configuration files")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not list the folders removed")
    args = parser.parse_args(list(argv))
    from torchlint.cache import is_torchlint_cache, resolve_cache_dir
    from torchlint.config import ConfigError, SettingsResolver

    for path in args.paths:
        if not os.path.isdir(path):
            print(f"torchlint: error: {path}: not a folder", file=sys.stderr)
            return EXIT_ERROR
    try:
        settings = SettingsResolver(config_file=args.config, isolated=args.isolated).default
    except ConfigError as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    code = EXIT_OK
    directory = resolve_cache_dir(settings, args.cache_dir)
    targets: List[str] = []
    if os.path.isdir(directory):
        if not is_torchlint_cache(directory) and os.listdir(directory):
            # Never delete a folder torchlint did not create (a mistyped --cache-dir).
            print(f"torchlint: error: {directory} is not a torchlint cache (no CACHEDIR.TAG); not removing it",
                  file=sys.stderr)
            code = EXIT_ERROR
        else:
            targets.append(directory)
    if not args.cache_dir:  # and every cache under the folders searched
        targets.extend(find_caches(args.paths or ["."]))
    removed = set()
    for target in targets:
        key = os.path.realpath(target)
        if key in removed:
            continue
        removed.add(key)
        try:
            shutil.rmtree(target)
        except OSError as exc:
            print(f"torchlint: error: cannot remove {target}: {exc}", file=sys.stderr)
            code = EXIT_ERROR
            continue
        if not args.quiet:
            print(f"Removed {target}", file=sys.stderr)
    return code


def find_caches(roots: Sequence[str]) -> List[str]:
    """Every folder under ``roots`` holding torchlint's ``CACHEDIR.TAG`` (not searched further),
    without following symbolic links; unreadable folders are passed over."""
    from torchlint.cache import is_torchlint_cache

    found: List[str] = []
    for root in roots:
        for folder, dirs, _ in os.walk(root, followlinks=False, onerror=lambda exc: None):
            if is_torchlint_cache(folder):
                found.append(os.path.normpath(folder))
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d not in NOT_SEARCHED]
    return found
