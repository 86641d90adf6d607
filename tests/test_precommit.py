"""The pre-commit hooks in .pre-commit-hooks.yaml, run by pre-commit itself in a scratch git
repository: failing on a bad file, passing on a good one, and honouring the config's excludes
for the files pre-commit names (``--force-exclude``).

The hooks are run as ``repo: local`` / ``language: system`` hooks built from the manifest, with
this interpreter's torchlint, so the test needs no network. Set TORCHLINT_TEST_PRE_COMMIT_INSTALL=1
to also let pre-commit build the hook's own environment from this checkout's HEAD (``pip install``
from PyPI, about 40 s)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"
GOOD = "import torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"


def _has_pre_commit() -> bool:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        return False
    return shutil.which("git") is not None


needs_pre_commit = pytest.mark.skipif(not _has_pre_commit(), reason="pre-commit (and git) not installed")


def hooks():
    return {hook["id"]: hook for hook in yaml.safe_load(MANIFEST.read_text())}


def test_manifest_hooks():
    found = hooks()
    assert set(found) == {"torchlint", "torchlint-fix"}
    for hook in found.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is True
        assert shlex.split(hook["entry"])[:2] == ["torchlint", "--force-exclude"]
    assert "--fix" in shlex.split(found["torchlint-fix"]["entry"])
    assert "--fix" not in shlex.split(found["torchlint"]["entry"])


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _local_config(hook_ids) -> str:
    """The manifest's hooks as local hooks that run this interpreter's torchlint."""
    local = []
    for hook_id in hook_ids:
        hook = dict(hooks()[hook_id])
        words = shlex.split(hook["entry"])
        assert words[0] == "torchlint"
        hook["entry"] = " ".join([shlex.quote(sys.executable), "-m", "torchlint", *map(shlex.quote, words[1:])])
        hook["language"] = "system"
        hook.pop("minimum_pre_commit_version", None)
        local.append(hook)
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": local}]}, sort_keys=False)


@pytest.fixture
def scratch(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "pyproject.toml").write_text("[tool.torchlint]\nextend-exclude = ['generated']\n")
    (repo / "bad.py").write_text(BAD)
    (repo / "good.py").write_text(GOOD)
    (repo / "stub.pyi").write_text(GOOD)
    (repo / "notes.txt").write_text(BAD)
    (repo / "generated").mkdir()
    (repo / "generated" / "model_pb2.py").write_text(BAD)
    return repo


def pre_commit(repo: Path, *args: str, home: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "NO_COLOR": "1",
    }
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args, "--color", "never"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )


@needs_pre_commit
def test_hook_fails_on_bad_file_and_passes_on_good(scratch, tmp_path):
    (scratch / ".pre-commit-config.yaml").write_text(_local_config(["torchlint"]))
    _git(scratch, "add", ".")
    home = tmp_path / "pre-commit-home"

    done = pre_commit(scratch, "run", "torchlint", "--files", "bad.py", "good.py", home=home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "torchlint" in done.stdout and "Failed" in done.stdout
    assert "bad.py:3:9: TL701" in done.stdout
    assert "good.py" not in done.stdout

    done = pre_commit(scratch, "run", "torchlint", "--files", "good.py", "stub.pyi", "notes.txt", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout


@needs_pre_commit
def test_hook_applies_config_excludes_to_the_files_it_is_given(scratch, tmp_path):
    (scratch / ".pre-commit-config.yaml").write_text(_local_config(["torchlint"]))
    _git(scratch, "add", ".")
    done = pre_commit(scratch, "run", "torchlint", "--files", "generated/model_pb2.py", home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    # the same file is flagged when named without --force-exclude: the exclude did the work
    direct = subprocess.run(
        [sys.executable, "-m", "torchlint", "--no-cache", "--output-format", "concise", "generated/model_pb2.py"],
        cwd=scratch, capture_output=True, text=True,
    )
    assert direct.returncode == 1 and "TL701" in direct.stdout


@needs_pre_commit
def test_all_files_run_lints_only_python(scratch, tmp_path):
    (scratch / ".pre-commit-config.yaml").write_text(_local_config(["torchlint"]))
    _git(scratch, "add", ".")
    done = pre_commit(scratch, "run", "--all-files", home=tmp_path / "home")
    assert done.returncode == 1
    flagged = sorted({line.split(":")[0] for line in done.stdout.splitlines() if ": TL" in line})
    assert flagged == ["bad.py"]


@needs_pre_commit
@pytest.mark.skipif(
    os.environ.get("TORCHLINT_TEST_PRE_COMMIT_INSTALL") != "1",
    reason="builds the hook environment with pip from PyPI; set TORCHLINT_TEST_PRE_COMMIT_INSTALL=1",
)
def test_hook_installed_from_this_repository(scratch, tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    config = {"repos": [{"repo": str(ROOT), "rev": head.stdout.strip(), "hooks": [{"id": "torchlint"}]}]}
    (scratch / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git(scratch, "add", ".")
    done = pre_commit(scratch, "run", "--files", "bad.py", "good.py", home=tmp_path / "home")
    assert done.returncode == 1 and "bad.py:3:9: TL701" in done.stdout, done.stdout + done.stderr
    done = pre_commit(scratch, "run", "--files", "good.py", "generated/model_pb2.py", home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
