"""Soundness on real code, tested rather than sampled: every file of the two pinned corpora (the
timm 1.0.11 and transformers 4.46.3 wheels, fetched by ``tests/corpora.py``; a corpus that
cannot be fetched fails, never skips) gets identical findings, ranges and fixes from

- a batch lint (the default: phase 1 in a pool, partial parses, walk plans),
- ``--jobs 1`` (one process),
- a whole lint (``TORCHLINT_WHOLE_PARSE=1``: libcst parses every file whole),
- a cold run writing the cache and the warm run reading it back,

and the editor path (``lint_source(..., incremental=True)``) after random edits of the corpus
files that have findings gives a fresh lint's findings after every edit."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from corpora import corpus, corpus_files
from test_editor_memo import _edit as editor_edit, _key
from torchlint import editor_memo, engine
from torchlint.config import Settings

#: edits per corpus in CI's profile (``TORCHLINT_SOUNDNESS_EDITS`` raises it for a long run)
EDITS = int(os.environ.get("TORCHLINT_SOUNDNESS_EDITS", "1000"))


def _lint(folder, *flags, env=None):
    """The JSON findings of a CLI run over ``folder`` (preview rules on, no configuration)."""
    command = [sys.executable, "-m", "torchlint", str(folder), "--isolated", "--preview",
               "--output-format", "json", "--exit-zero", *flags]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    findings = json.loads(done.stdout)
    return sorted(json.dumps(f, sort_keys=True) for f in findings)


@pytest.mark.parametrize("name", ["timm", "transformers"])
def test_every_way_of_linting_a_corpus_gives_the_same_findings(name, tmp_path):
    folder = corpus(name)
    batch = _lint(folder, "--no-cache")
    assert len(batch) > 20  # the corpora have findings (timm 36, transformers 138 with default rules)
    assert _lint(folder, "--no-cache", "--jobs", "1") == batch
    assert _lint(folder, "--no-cache", env={"TORCHLINT_WHOLE_PARSE": "1"}) == batch
    cache = tmp_path / "cache"
    assert _lint(folder, "--cache-dir", str(cache)) == batch
    assert any(cache.rglob("*.json"))
    assert _lint(folder, "--cache-dir", str(cache)) == batch  # warm


def _edit(rng: random.Random, lines):
    """``test_editor_memo._edit``, also typing a per-step sync and a loader (facts the whole-file
    model gives)."""
    return editor_edit(rng, lines, typed_lines=("    loss.item()\n", "        torch.cuda.synchronize()\n"),
                       typed=("DataLoader(ds)",))


@pytest.mark.parametrize("name", ["timm", "transformers"])
def test_random_edits_of_corpus_files_give_a_fresh_lints_findings(name):
    """The corpus files with findings of at most 600 lines, edited at random as in an editor:
    after each edit the editor path's findings are a fresh lint's."""
    settings = Settings(preview=True)
    chosen = []
    for path in corpus_files(name):
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.count("\n") <= 600 and engine.lint_source(text, str(path), settings):
            chosen.append((path, text))
    assert len(chosen) >= 5, [str(p) for p, _ in chosen]
    rng = random.Random(name)
    editor_memo.clear()
    done = 0
    per_file = max(1, EDITS // len(chosen))
    while done < EDITS:
        for path, text in chosen:
            lines = text.splitlines(keepends=True)
            engine.lint_source(text, str(path), settings, incremental=True)
            for _ in range(per_file):
                lines = _edit(rng, lines)
                variant = "".join(lines)
                found = engine.lint_source(variant, str(path), settings, incremental=True)
                assert _key(found) == _key(engine.lint_source(variant, str(path), settings)), (path, variant)
                done += 1
            if done >= EDITS:
                break
    editor_memo.clear()
    assert done >= EDITS
