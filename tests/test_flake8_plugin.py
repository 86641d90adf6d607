"""The flake8 plugin: real ``flake8 --select TL`` on each fixture reports what torchlint reports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fixture_support import ROOT, expected_for, fixture_files
from torchlint.engine import lint_source

pytest.importorskip("flake8")


def _flake8(path, *options):
    done = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--format", "%(row)d:%(col)d %(code)s", *options, str(path)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


def _options(settings, code):
    options = ["--select", code, f"--torchlint-target-torch-version={'.'.join(map(str, settings.target_torch_version))}"]
    return options + (["--torchlint-preview"] if settings.preview else [])


def test_plugin_is_registered():
    done = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert "torchlint" in done.stdout


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_flake8_reports_the_same_findings_as_torchlint(path):
    settings, _ = expected_for(path)
    code = sorted(settings.enabled_codes)[0]
    ours = [f"{d.location.row}:{d.location.column} {d.code}" for d in lint_source(path.read_text(), str(path), settings)]
    assert ours, path.name
    assert _flake8(path, *_options(settings, code)) == ours


def test_flake8_noqa_and_torchfix_noqa(tmp_path):
    source = tmp_path / "load.py"
    source.write_text(
        "import torch\n"
        "a = torch.load(p, weights_only=False)  # noqa: TL901\n"
        "b = torch.load(p, weights_only=False)  # noqa: TOR102\n"
        "c = torch.load(p, weights_only=False)\n"
    )
    assert _flake8(source, "--select", "TL") == ["4:5 TL901"]
    assert _flake8(source, "--select", "TL", "--extend-ignore", "TL901") == []


def test_flake8_target_version_option(tmp_path):
    source = tmp_path / "load.py"
    source.write_text("import torch\na = torch.load(p)\n")
    assert _flake8(source, "--select", "TL") == []
    assert _flake8(source, "--select", "TL", "--torchlint-target-torch-version=2.4") == ["2:5 TL901"]
