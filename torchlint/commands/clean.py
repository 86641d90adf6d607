"""``torchlint clean``: remove the results cache (``torchlint.cache``) of the project."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Sequence

from torchlint.commands.usage import EXIT_ERROR, EXIT_OK, Parser


def main(argv: Sequence[str]) -> int:
    """``torchlint clean [--cache-dir PATH] [--config PATH] [--isolated]``: remove the cache."""
    parser = Parser(prog="torchlint clean", description="Remove the results cache.")
    parser.add_argument("--cache-dir", metavar="PATH", help="the cache folder (default: .torchlint_cache)")
    parser.add_argument("--config", metavar="PATH", help="the pyproject.toml whose cache-dir to use")
    parser.add_argument("--isolated", action="store_true", help="ignore configuration files")
    args = parser.parse_args(list(argv))
    from torchlint.cache import is_torchlint_cache, resolve_cache_dir
    from torchlint.config import ConfigError, SettingsResolver

    try:
        settings = SettingsResolver(config_file=args.config, isolated=args.isolated).default
    except ConfigError as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    directory = resolve_cache_dir(settings, args.cache_dir)
    if not os.path.isdir(directory):
        return EXIT_OK
    if not is_torchlint_cache(directory) and os.listdir(directory):
        # Never delete a folder torchlint did not create (a mistyped --cache-dir, another
        # program's cache with its own CACHEDIR.TAG).
        print(f"torchlint: error: {directory} is not a torchlint cache (no CACHEDIR.TAG written by torchlint); "
              "not removing it", file=sys.stderr)
        return EXIT_ERROR
    try:
        shutil.rmtree(directory)
    except OSError as exc:
        print(f"torchlint: error: cannot remove {directory}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(f"Removed {directory}", file=sys.stderr)
    return EXIT_OK
