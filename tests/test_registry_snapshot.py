"""The rule registry's snapshot (code -> name, preview) lives in the user's cache folder, never
inside the installed package: a read-only or shared install works, and stays unchanged."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import torchlint
from torchlint.rules import rules_by_code

PACKAGE = Path(torchlint.__file__).resolve().parent
PROBE = (
    "import sys\nfrom torchlint.cli import main\n"
    "code = main(['--select', 'ALL', '--output-format', 'json', '--exit-zero', '.'])\n"
    "sys.stderr.write(' '.join(sorted(m for m in sys.modules if m == 'libcst' or m.startswith('torchlint.rules.'))))\n"
    "sys.exit(code)\n"
)


def _listing(root: Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _set_writable(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        if writable:
            path.chmod(mode | stat.S_IWUSR)
        else:
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_a_read_only_install_writes_nothing_in_the_package_and_warm_runs_skip_the_rules(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    before = _listing(site)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nmodel = torch.nn.DataParallel(model)\n")
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    _set_writable(site, False)
    try:
        runs = [subprocess.run([sys.executable, "-c", PROBE], cwd=project, env=env, capture_output=True,
                               text=True) for _ in range(2)]
        after = _listing(site)
    finally:
        _set_writable(site, True)
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert '"TL701"' in runs[0].stdout and runs[1].stdout == runs[0].stdout
    assert after == before  # nothing written inside the package (no registry-*.json, no __pycache__)
    snapshots = list((tmp_path / "xdg" / "torchlint").glob("registry-*.json"))
    assert len(snapshots) == 1
    # every registered rule, as the rules say (a warm run selects and fingerprints from this alone)
    recorded = json.loads(snapshots[0].read_text())
    assert recorded == {code: [rule.name, rule.preview] for code, rule in rules_by_code().items()}
    assert recorded["TL207"] == ["non-blocking-from-pageable", True]
    cold, warm = (r.stderr.split() for r in runs)
    assert "libcst" in cold
    assert "libcst" not in warm and not any(m.startswith("torchlint.rules.") for m in warm)


def test_an_unwritable_cache_folder_still_lints(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import torch\nmodel = torch.nn.DataParallel(model)\n")
    (tmp_path / "xdg").write_text("a file where the cache folder would be")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=project, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert '"TL701"' in run.stdout
