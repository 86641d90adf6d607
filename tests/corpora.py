"""The pinned real corpora the soundness tests run on: the timm 1.0.11 and transformers 4.46.3
wheels, downloaded with pip (the package registry the install already uses) into a cache and
unzipped once. A corpus that cannot be fetched fails the test that asked for it, never skips it.

The cache is the benchmark's (``$TORCHLINT_BENCH_CACHE``, default ``~/.cache/torchlint-bench``):
``benchmarks/bench.py`` and the tests share one download."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("timm", "transformers")


def cache_root() -> Path:
    return Path(os.environ.get("TORCHLINT_BENCH_CACHE", "~/.cache/torchlint-bench")).expanduser()


def corpus(name: str) -> Path:
    """The unzipped wheel of the pinned corpus ``name``, fetched with pip on first use."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench

    try:
        return bench.fetch_corpus(name, cache_root(), download=True)
    except (OSError, SystemExit, Exception) as exc:  # pip's failure: the test fails, with the reason
        raise AssertionError(f"the pinned corpus {bench.CORPORA[name]} could not be fetched: {exc}") from exc


def corpus_files(name: str):
    files = sorted(p for p in corpus(name).rglob("*.py") if p.is_file())
    assert files, f"no Python files in the {name} corpus"
    return files
