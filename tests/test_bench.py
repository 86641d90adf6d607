"""The benchmark's own code path, on the fixtures, so that it cannot rot (no download, one round;
its timings mean nothing here)."""

from __future__ import annotations

import ast
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
    (corpus / "broken.py").write_text("def f(:\n    pass\n")  # one file CPython rejects
    code = bench.main(["--corpus-dir", str(corpus), "--repeat", "1", "--no-download", "--with-ast-floor",
                       "--single-repeat", "2", "--cache-root", str(tmp_path / "cache"), "--json", str(out)])
    assert code == 0
    report = capsys.readouterr().out
    assert "torchlint warm, one file touched" in report and "libcst.parse_module floor" in report
    data = json.loads(out.read_text())
    [corpus] = data["corpora"]
    runs = corpus["runs"]
    assert set(runs) == {"cold", "warm", "touched", "floor", "ast_floor"}
    assert "CPython ast.parse of every file" in report
    # the parse floor's pool parsed every file: its count of files CPython rejects is exact
    rejected = 0
    for path in sorted((tmp_path / "fixtures").rglob("*.py")):
        try:
            ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            rejected += 1
    assert rejected > 0
    assert runs["ast_floor"][0]["findings"] == rejected and runs["ast_floor"][0]["wall"] > 0
    # Warm and touched runs find exactly what the cold run found; the touched file is restored.
    assert runs["cold"][0]["findings"] == runs["warm"][0]["findings"] == runs["touched"][0]["findings"] > 0
    assert all(r["maxrss_mb"] > 0 for kind in runs.values() for r in kind)
    assert data["single_file"]["median_s"] > 0
    assert data["single_file"]["findings"] > 0  # the editor path is timed on a file with findings
    assert data["single_file"]["lsp_s"] > 0  # change -> published diagnostics through the server
    assert not (tmp_path / "cache").exists()  # a local corpus downloads nothing


def test_bench_scaling_mode(tmp_path, capsys):
    corpus = tmp_path / "fixtures"
    shutil.copytree(ROOT / "fixtures", corpus)
    out = tmp_path / "bench.json"
    code = bench.main(["--corpus-dir", str(corpus), "--repeat", "1", "--no-download", "--scaling-only",
                       "--cache-root", str(tmp_path / "cache"), "--json", str(out)])
    assert code == 0
    assert "Scaling on fixtures" in capsys.readouterr().out
    cases = json.loads(out.read_text())["scaling"]
    assert [c["case"].split(" of ")[0] for c in cases[:4]] == ["10%", "25%", "50%", "100%"]
    assert [c["files"] for c in cases[4:]] == [1, 1, 1, 1]
    assert all(r["maxrss_mb"] > 0 and r["findings"] is not None for c in cases for r in c["runs"])
