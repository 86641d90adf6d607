"""The benchmark's own code path, on the fixtures, so that it cannot rot (no download, one round;
its timings mean nothing here)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench  # noqa: E402


def test_bench_runs_on_the_fixtures(tmp_path, capsys):
    out = tmp_path / "bench.json"
    corpus = tmp_path / "fixtures"  # a copy: the touched-file run edits (and restores) a file
    shutil.copytree(ROOT / "fixtures", corpus)
    code = bench.main(["--corpus-dir", str(corpus), "--repeat", "1", "--no-download",
                       "--single-repeat", "2", "--cache-root", str(tmp_path / "cache"), "--json", str(out)])
    assert code == 0
    report = capsys.readouterr().out
    assert "torchlint warm, one file touched" in report and "libcst.parse_module floor" in report
    data = json.loads(out.read_text())
    [corpus] = data["corpora"]
    runs = corpus["runs"]
    assert set(runs) == {"cold", "warm", "touched", "floor"}
    # Warm and touched runs find exactly what the cold run found; the touched file is restored.
    assert runs["cold"][0]["findings"] == runs["warm"][0]["findings"] == runs["touched"][0]["findings"] > 0
    assert all(r["maxrss_mb"] > 0 for kind in runs.values() for r in kind)
    assert data["single_file"]["median_s"] > 0
    assert not (tmp_path / "cache").exists()  # a local corpus downloads nothing
