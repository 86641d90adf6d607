"""benchmarks/realcode.py, the scorer of issue 29's evaluation: its matching and arithmetic on a
small repository made here (a git repository with a training script and a notebook), and the
committed labels' own consistency (every file loads, names known rules and pinned repositories).
The real repositories are not fetched here: the labels are scored against them by hand
(`realcode.py checkout` + `score`), as the closing note of issue 29 shows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import realcode  # noqa: E402

from torchlint.rules import known_codes  # noqa: E402

TRAIN = """\
import torch
from torch.utils.data import DataLoader


def train(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=32)
    total = 0.0
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
"""

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# training"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["import torch\n", "x = torch.zeros(4).cuda()\n"]},
    ],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture
def repo(tmp_path):
    """A bare 'mirror' with one commit, as `fetch` leaves them, and the Repo pinned to it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(TRAIN)
    (work / "nb.ipynb").write_text(json.dumps(NOTEBOOK))
    (work / "big.bin").write_bytes(b"\0" * 100)  # not a text file: never written out
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    mirror = tmp_path / "mirror" / "me+train" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror)], check=True)
    return realcode.Repo("me/train", commit, "training"), tmp_path / "mirror"


def _lines(text):
    return {line.strip(): number for number, line in enumerate(text.splitlines(), 1)}


def test_checkout_writes_the_text_files_at_the_commit(repo, tmp_path):
    pinned, mirror = repo
    root = realcode.checkout(pinned, mirror, tmp_path / "out")
    assert sorted(p.name for p in root.iterdir()) == ["nb.ipynb", "train.py"]
    assert (root / "train.py").read_text() == TRAIN


def test_score_matches_findings_to_labels(repo, tmp_path):
    pinned, mirror = repo
    root = realcode.checkout(pinned, mirror, tmp_path / "out")
    findings = realcode.run_torchlint(root, pinned, None, None)
    keys = {realcode.finding_key(root, f) for f in findings}
    line = _lines(TRAIN)
    # the findings this tiny program gives today (the scorer is what is tested here, not them)
    assert ("train.py", None, "TL201", line["total += loss.item()"]) in keys
    assert ("nb.ipynb", 2, "TL202", 2) in keys
    assert ("train.py", None, "TL101", line["loader = DataLoader(dataset, batch_size=32)"]) in keys
    sites = [
        realcode.Site("TL201", "train.py", line["total += loss.item()"], "tp", "total += loss.item()"),
        realcode.Site("TL202", "nb.ipynb", 2, "fp", "x = torch.zeros(4).cuda()", cell=2),
        # a real site the build does not report: a false negative, with its class
        realcode.Site("TL203", "train.py", line["x, y = x.cuda(), y.cuda()"], "missed",
                      "x, y = x.cuda(), y.cuda()", klass=1),
        # a stale label: its text is not the file's line
        realcode.Site("TL999", "train.py", 1, "fp", "import numpy"),
    ]
    result = realcode.score_repo(pinned, root, findings, sites)
    by_rule = result.by_rule
    assert (by_rule["TL201"].tp, by_rule["TL201"].fp, by_rule["TL201"].fn) == (1, 0, 0)
    assert (by_rule["TL202"].tp, by_rule["TL202"].fp) == (0, 1)
    assert by_rule["TL203"].fn == 1 and by_rule["TL203"].recall == 0.0
    assert by_rule["TL101"].unjudged == 1 and by_rule["TL101"].precision is None
    assert any("class 1" in line for line in result.listed["fn"])
    assert len(result.stale) == 1 and "import numpy" in result.stale[0]
    total = realcode.Counts()
    for counts in by_rule.values():
        total.add(counts)
    assert total.precision == 0.5 and total.recall == 0.5
    table = realcode.table(by_rule, {"TL203"})
    rows = {row.split()[0]: row for row in table.splitlines()}
    assert rows["TL203"].split() == ["TL203", "0", "0", "1", "0", "-", "0.00", "(preview)"]
    assert rows["preview"].split() == ["preview", "0", "0", "1", "0", "-", "0.00"]
    assert rows["default"].split()[1:4] == ["1", "1", "0"]


def test_a_missed_site_that_is_now_reported_counts_as_found(repo, tmp_path):
    pinned, mirror = repo
    root = realcode.checkout(pinned, mirror, tmp_path / "out")
    findings = realcode.run_torchlint(root, pinned, None, None)
    line = _lines(TRAIN)["total += loss.item()"]
    result = realcode.score_repo(pinned, root, findings,
                                 [realcode.Site("TL201", "train.py", line, "missed", "total += loss.item()")])
    assert (result.by_rule["TL201"].tp, result.by_rule["TL201"].fn) == (1, 0)


def test_a_bad_label_file_is_a_one_line_error(tmp_path, capsys):
    pinned = realcode.Repo("me/train", "0" * 40, "training")
    (tmp_path / "me+train.toml").write_text('[[site]]\nrule = "TL201"\npath = "a.py"\nline = 1\nverdict = "maybe"\n')
    with pytest.raises(SystemExit) as exit:
        realcode.load_labels(pinned, tmp_path)
    assert exit.value.code == 2
    assert "verdict 'maybe' is not one of tp, fp, missed" in capsys.readouterr().err


def test_the_committed_labels_are_consistent():
    repos = realcode.load_manifest()
    assert len(repos) >= 20
    assert len({r.name for r in repos}) == len(repos)
    slugs = {r.slug for r in repos}
    codes = set(known_codes())
    label_files = sorted(realcode.LABELS.glob("*.toml"))
    for path in label_files:
        assert path.stem in slugs, f"{path.name}: not a repository of repos.toml"
    for pinned in repos:
        assert len(pinned.commit) == 40
        for site in realcode.load_labels(pinned):  # loads: verdicts known, no key twice
            assert site.rule in codes, f"{pinned.name}: unknown rule {site.rule}"
            assert site.text, f"{pinned.name}: {site.key} has no source line to anchor it"
            assert site.line > 0
