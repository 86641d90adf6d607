"""Hostile and unlucky input, round two (issue 32), the run's side: absurd torch versions
(item 5), a pool worker killed mid-run (item 6), cross-file findings whatever files are named
(item 8) and unreadable dependency files (item 24)."""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from torchlint import dependencies
from torchlint.cli import main
from torchlint.config import SettingsResolver
from torchlint.dependencies import MAX_COMPONENT_DIGITS, parse_version, scan_project

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "torchlint"]
IS_ROOT = os.geteuid() == 0
HUGE = "1" * 5000  # above CPython's int-digits limit (4,300)
TRAIN = (
    "def train(model, optimizer, loader):\n"
    "    for x, y in loader:\n"
    "        optimizer.zero_grad()\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)


@pytest.fixture(autouse=True)
def fresh_warnings():
    dependencies._WARNED.clear()
    yield
    dependencies._WARNED.clear()


def cli(*args, cwd, timeout=120, **kw):
    return subprocess.run(CLI + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


# -- item 5: a 5,000-digit version -------------------------------------------------------------

def test_parse_version_caps_component_length(capsys):
    assert parse_version("1.13.1") == (1, 13)
    assert parse_version("v2") == (2, 0)
    assert parse_version("9" * MAX_COMPONENT_DIGITS + ".1") == (int("9" * MAX_COMPONENT_DIGITS), 1)
    assert parse_version(HUGE + ".0") is None
    assert parse_version("2." + HUGE) is None
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 2 and all(line.startswith("torchlint: warning: ignoring torch version") for line in lines)
    assert all(len(line) < 200 for line in lines)  # one short line, not 5,000 digits


@pytest.mark.parametrize("files", [
    {"requirements.txt": f"torch>={HUGE}.0\n"},
    {"pyproject.toml": f"[project]\nname = 'x'\ndependencies = ['torch>=2.{HUGE}']\n"},
    {"environment.yml": f"dependencies:\n  - pytorch={HUGE}\n"},
    {"setup.cfg": f"[options]\ninstall_requires = torch=={HUGE}\n"},
    {"Dockerfile": f"FROM pytorch/pytorch:{HUGE}.1-cuda\n"},
], ids=["requirements", "pyproject", "environment", "setup.cfg", "Dockerfile"])
def test_huge_declared_version_is_ignored_with_a_warning(tmp_path, files, capsys):
    """The parsing the CLI, the language server (``initialize`` builds a SettingsResolver) and
    the flake8 plugin share: scan_project and the resolver over it."""
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert scan_project(tmp_path).torch_version is None
    (tmp_path / "requirements-low.txt").write_text("torch>=1.12\n")
    assert scan_project(tmp_path).torch_version == (1, 12)  # the sane declaration still counts
    dependencies._WARNED.clear()
    settings = SettingsResolver(cwd=str(tmp_path)).for_path(str(tmp_path / "a.py"))
    assert settings.target_torch_version == (1, 12)
    assert "ignoring torch version" in capsys.readouterr().err


def test_huge_version_through_the_cli(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(f"torch>={HUGE}.0\n")
    (tmp_path / "train.py").write_text(TRAIN)
    done = cli("--no-cache", "--select", "TL401", "--output-format", "concise", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert done.stderr.count("torchlint: warning: ignoring torch version") == 1
    # the flag: a usage error, one short line, exit 2
    done = cli("--no-cache", "--target-torch-version", f"2.{HUGE}", ".", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("torchlint: error: --target-torch-version: expected a version")
    assert len(done.stderr.splitlines()) == 1 and len(done.stderr) < 300
    # in the configuration: a configuration error naming the key, exit 2
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\ntarget-torch-version = '{HUGE}.1'\n")
    done = cli("--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert "target-torch-version: expected a version" in done.stderr and len(done.stderr) < 300


def test_flake8_plugin_survives_a_huge_declared_version(tmp_path, capsys, monkeypatch):
    from torchlint.flake8_plugin import Plugin

    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(f"torch>={HUGE}.0\n")
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(Plugin, "_settings_by_dir", {})
    rows = list(Plugin(None, str(path), TRAIN.splitlines(True)).run())  # no exception
    assert rows == []  # the default target stands: a plain zero_grad() is fine there
    assert "ignoring torch version" in capsys.readouterr().err


# -- item 24: an unreadable dependency file ----------------------------------------------------

def _as_unprivileged(function, cwd: Path) -> tuple:
    """(result, stderr) of ``function()`` in a forked child that runs as ``nobody`` when this
    process is root (CI), else as the current user."""
    read_fd, write_fd = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(read_fd)
            os.close(err_r)
            if IS_ROOT:
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            os.chdir(cwd)
            sys.stderr = io.TextIOWrapper(os.fdopen(err_w, "wb"), write_through=True)
            result = function()
            os.write(write_fd, json.dumps(result).encode())
        except BaseException as exc:
            os.write(write_fd, json.dumps({"child failed": repr(exc)}).encode())
            code = 1
        finally:
            try:
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(write_fd)
    os.close(err_w)
    with os.fdopen(read_fd) as out, os.fdopen(err_r) as err:
        result, stderr = out.read(), err.read()
    os.waitpid(pid, 0)
    return json.loads(result), stderr


@pytest.fixture
def shared_dir():
    path = Path(tempfile.mkdtemp(prefix="torchlint-round2-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_unreadable_requirements_file_warns(shared_dir):
    (shared_dir / ".git").mkdir()
    req = shared_dir / "requirements.txt"
    req.write_text("torch>=1.12\n")
    req.chmod(0o000)
    (shared_dir / "requirements-dev.txt").write_text("torch>=2.1\n")
    (shared_dir / "requirements-dev.txt").chmod(0o644)

    def scan():
        dependencies._WARNED.clear()
        project = scan_project(Path("."))
        return [list(project.torch_version or ()), project.warnings]

    (version, warnings), stderr = _as_unprivileged(scan, shared_dir)
    assert version == [2, 1]
    assert warnings == ["requirements.txt: cannot be read (Permission denied); torch version not inferred from it"]
    assert stderr.splitlines() == ["torchlint: warning: " + warnings[0]]

    def run():
        dependencies._WARNED.clear()
        return main(["--no-cache", "--select", "TL401", "--output-format", "concise", "."])

    (shared_dir / "train.py").write_text(TRAIN)
    code, stderr = _as_unprivileged(run, shared_dir)
    assert code == 0, stderr  # torch>=2.1 from the readable file: no TL401
    assert "requirements.txt: cannot be read (Permission denied); torch version not inferred from it" in stderr


# -- item 8: cross-file findings whatever files are named ----------------------------------------

HELPER = ROOT / "fixtures" / "projects" / "per_step_helper"


@pytest.fixture
def helper_project(tmp_path, monkeypatch):
    """per_step_helper laid out as a package: pkg/metrics.py is per-step only because
    train.py (at the root) calls it in its training loop."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.torchlint]\n")
    train = (HELPER / "train.py").read_text().replace("from metrics import", "from pkg.metrics import")
    train = train.replace("import metrics", "import pkg.metrics as metrics")
    (tmp_path / "train.py").write_text(train)
    (tmp_path / "pkg" / "metrics.py").write_text((HELPER / "metrics.py").read_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _rows(capsys, *args, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = main(["--output-format", "json", *args])
    out = capsys.readouterr().out
    rows = sorted((os.path.normpath(d["filename"]).replace(os.sep, "/").split("/")[-2:][-1], d["code"],
                   d["location"]["row"]) for d in json.loads(out or "[]"))
    return code, rows


@pytest.mark.parametrize("cache", [["--no-cache"], ["--cache-dir", "CACHE"]], ids=["no-cache", "cache"])
def test_named_file_gets_the_cross_file_findings_of_the_whole_project(helper_project, capsys, monkeypatch, cache):
    cache = [c.replace("CACHE", str(helper_project / "cache")) for c in cache]
    code, everything = _rows(capsys, *cache, ".")
    expected = [row for row in everything if row[0] == "metrics.py"]
    assert code == 1 and expected and all(row[1] == "TL201" for row in expected)
    for _ in range(2):  # cold, then warm
        assert _rows(capsys, *cache, "pkg/metrics.py") == (1, expected)
        assert _rows(capsys, *cache, os.path.join(str(helper_project), "pkg", "metrics.py")) == (1, expected)
    text = (helper_project / "pkg" / "metrics.py").read_text()
    assert _rows(capsys, *cache, "--stdin-filename", "pkg/metrics.py", "-", stdin=text, monkeypatch=monkeypatch) == (1, expected)
    monkeypatch.chdir(helper_project / "pkg")  # named from inside the package
    assert _rows(capsys, *cache, "metrics.py") == (1, expected)
    assert _rows(capsys, *cache, "--stdin-filename", "metrics.py", stdin=text, monkeypatch=monkeypatch) == (1, expected)


def test_named_file_context_follows_excludes_and_the_stdin_text(helper_project, capsys, monkeypatch):
    (helper_project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.torchlint]\nextend-exclude = ['train.py']\n")
    assert _rows(capsys, "--no-cache", ".") == (0, [])
    assert _rows(capsys, "--no-cache", "pkg/metrics.py") == (0, [])  # train.py is not part of the project's run
    (helper_project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.torchlint]\n")
    code, rows = _rows(capsys, "--no-cache", "pkg/metrics.py")
    assert code == 1 and rows
    # stdin replaces the file's text: a helper that syncs nothing has no finding
    quiet = "def step_metrics(*args, **kwargs):\n    return None\n"
    assert _rows(capsys, "--no-cache", "--stdin-filename", "pkg/metrics.py", stdin=quiet, monkeypatch=monkeypatch) == (0, [])


def test_named_file_without_a_project_is_linted_alone(tmp_path, capsys, monkeypatch):
    """No configuration, no dependency file, no .git above it: nothing else is read."""
    from torchlint.config import SettingsResolver
    from torchlint.runner import project_context

    (tmp_path / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert project_context(["a.py"], ["a.py"], SettingsResolver()) == []
    assert main(["--no-cache", "a.py"]) == 0


def test_stdin_reuses_the_stored_project_facts_only_for_an_unchanged_summary(helper_project, capsys, monkeypatch):
    """An editor piping its buffer: when nothing else changed and the text summarises as the
    file on disk did, the facts of the last run stand (no summary of the project is loaded);
    a buffer whose summary differs gets its own index."""
    from torchlint import runner

    cache = ["--cache-dir", str(helper_project / "cache")]
    past = time.time() - 60  # mtimes the cache can trust (a file written this second may change again unseen)
    for path in helper_project.rglob("*.py"):
        os.utime(path, (past, past))
    code, everything = _rows(capsys, *cache, ".")
    expected = [row for row in everything if row[0] == "metrics.py"]
    text = (helper_project / "pkg" / "metrics.py").read_text()
    calls = []
    real = runner.project_summaries
    monkeypatch.setattr(runner, "project_summaries", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert _rows(capsys, *cache, "--stdin-filename", "pkg/metrics.py", stdin=text, monkeypatch=monkeypatch) == (1, expected)
    assert calls == []  # the stored facts stood
    edited = text + "\n\ndef unused_helper(x):\n    return x\n"
    assert _rows(capsys, *cache, "--stdin-filename", "pkg/metrics.py", stdin=edited, monkeypatch=monkeypatch) == (1, expected)
    assert len(calls) == 1  # a new function: the index was built again, with the same findings
    quiet = "def step_metrics(*args, **kwargs):\n    return None\n"
    assert _rows(capsys, *cache, "--stdin-filename", "pkg/metrics.py", stdin=quiet, monkeypatch=monkeypatch) == (0, [])
