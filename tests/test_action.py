"""action.yml, the composite GitHub Action: it parses, installs torchlint, and its run step
reports with --output-format github. The run step's script is executed here with bash against a
scratch project, the way the runner would."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"


def action():
    return yaml.safe_load((ROOT / "action.yml").read_text())


def step(name):
    (found,) = [s for s in action()["runs"]["steps"] if s.get("name") == name]
    return found


def test_action_is_a_composite_with_the_documented_inputs():
    data = action()
    assert data["name"] == "torchlint"
    assert data["runs"]["using"] == "composite"
    assert {"args", "paths", "version", "python-version", "sarif-file"} <= set(data["inputs"])
    assert data["inputs"]["paths"]["default"] == "."
    setup = step("Set up Python")
    assert setup["uses"].startswith("actions/setup-python@") and "if" in setup
    install = step("Install torchlint")["run"]
    assert '"$ACTION_PATH"' in install and "torchlint==$TORCHLINT_VERSION" in install
    assert step("Install torchlint")["env"]["ACTION_PATH"] == "${{ github.action_path }}"


def test_run_step_calls_torchlint_with_github_format():
    run = step("Run torchlint")
    assert '"$TORCHLINT" --output-format github $INPUT_ARGS $INPUT_PATHS' in run["run"]
    assert run["shell"] == "bash"


def test_inputs_reach_scripts_only_through_the_environment():
    # `${{ inputs.x }}` inside a script is a shell-injection hole; env vars are not
    for s in action()["runs"]["steps"]:
        assert "${{" not in s.get("run", ""), s["name"]


@pytest.fixture
def torchlint_command(tmp_path):
    """A `torchlint` executable running this checkout, as the install step's output would be."""
    script = tmp_path / "bin" / "torchlint"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m torchlint \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_run_step_script_annotates_findings(tmp_path, torchlint_command):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    (project / "src" / "bad model.py").write_text(BAD)
    (project / "src" / "ok.py").write_text("x = 1\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TORCHLINT": str(torchlint_command),
        "INPUT_ARGS": "--select TL701 --no-cache",
        "INPUT_PATHS": "src",
        "INPUT_SARIF_FILE": "torchlint.sarif",
    }
    done = subprocess.run(
        ["bash", "-c", step("Run torchlint")["run"]], cwd=project, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "::warning file=src/bad model.py,line=3,col=9,endLine=3,endColumn=31,title=torchlint (TL701)::"
        + done.stdout.split("::")[-1].rstrip("\n")
    ]
    sarif = json.loads((project / "torchlint.sarif").read_text())
    assert sarif["runs"][0]["results"][0]["ruleId"] == "TL701"
