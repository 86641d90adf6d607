"""The prefilter is sound: a rule skipped because its ``requires`` tokens are absent would not
have fired anyway. Every rule runs with and without the prefilter over the fixtures and the timm
corpus (from the benchmark's cache folder, downloaded if missing; skipped offline)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from torchlint.config import Settings
from torchlint.engine import lint_source
from torchlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def difference(path: str):
    """None if both ways agree, else (path, with prefilter, without).

    Rules run independently on one tree, so it is enough to run the rules the prefilter dropped
    without it: they must find nothing. When it dropped every rule, the file is not parsed by
    libcst at all, so the syntax-error finding (TL001) must agree too."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    rules = all_rules()
    dropped = [rule for rule in rules if not rule.may_fire(text)]
    if not dropped:
        return None  # nothing is filtered: both ways run the same code
    settings = Settings()
    key = lambda ds: [(d.code, d.location, d.end_location, d.message) for d in ds]  # noqa: E731
    full = key(lint_source(text, path, settings, rules=dropped, prefilter=False))
    if len(dropped) < len(rules):
        fast = [f for f in full if f[0] == "TL001"]  # TL001 is the engine's, not a dropped rule's
    else:
        fast = key(lint_source(text, path, settings, rules=rules))
    return None if fast == full else (path, fast, full)


def differences(files):
    if len(files) < 20:
        return [d for d in map(difference, files) if d]
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return [d for d in pool.map(difference, files, chunksize=8) if d]


def test_prefilter_is_sound_on_the_fixtures():
    files = sorted(str(p) for p in (ROOT / "fixtures").glob("*.py"))
    assert files
    assert differences(files) == []


def test_prefilter_is_sound_on_timm():
    import bench

    cache_root = Path(os.environ.get("TORCHLINT_BENCH_CACHE", "~/.cache/torchlint-bench")).expanduser()
    try:
        corpus = bench.fetch_corpus("timm", cache_root, download=True)
    except (Exception, SystemExit) as exc:  # offline
        pytest.skip(f"timm corpus unavailable: {exc}")
    files = sorted(str(p) for p in corpus.rglob("*.py"))
    assert len(files) > 200
    assert differences(files) == []


@pytest.mark.parametrize(
    "spelling, matches",
    [
        ("torch.zeros(3).to(device)", True),
        ("torch.ones(2) . cuda ()", True),
        ("(torch.zeros(3)\n   .  # comment\n   to(device))", True),
        ("torch.arange(4) \\\n    .to(device)", True),
        ("torch.arange(4) \\\r\n    .cuda()", True),
        ("import torch\nx = torch.zeros(3)\ntotal = x.total()\n", False),  # "to" in torch/total only
        ("x.cuda", False),  # not called
        ("x.auto(1)", False),
    ],
)
def test_tl202_prefilter_pattern(spelling, matches):
    from torchlint.rules.device import TensorMovedAfterCreation

    assert TensorMovedAfterCreation.may_fire("import torch\n" + spelling + " zeros") is matches


def test_tl202_prefilter_pattern_is_linear_on_long_comments():
    import time

    from torchlint.rules.device import MOVE_CALL

    text = ("x = 1  # see foo. " + "#" * 400 + "\n") * 50
    start = time.perf_counter()
    assert MOVE_CALL.search(text) is None
    assert time.perf_counter() - start < 0.5
