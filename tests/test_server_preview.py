"""`torchlint server --preview/--no-preview` (the VS Code extension's `torchlint.preview`): over
the configuration's `preview`, as on the command line; without either, `pyproject.toml` decides."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_server import ROOT, LspClient, uri_of  # noqa: E402  (the JSON-RPC client of the server tests)

pytest.importorskip("pygls")

# TL104 is a preview rule: a shuffled DataLoader without a DistributedSampler under DDP.
SOURCE = (Path(ROOT) / "fixtures" / "TL104.py").read_text()


def codes(workspace: Path, flags: List[str], pyproject: str) -> List[str]:
    (workspace / ".git").mkdir(exist_ok=True)
    (workspace / "pyproject.toml").write_text(pyproject)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = LspClient(workspace, [sys.executable, "-m", "torchlint", "server", "--debounce-ms", "0", *flags], env)
    try:
        client.initialize(workspace)
        uri = uri_of(workspace / "train.py")
        client.open(uri, SOURCE)
        return sorted({d["code"] for d in client.diagnostics(uri, 1)["diagnostics"]})
    finally:
        client.close()


@pytest.mark.parametrize("flags, pyproject, has_preview", [
    ([], "[tool.torchlint]\n", False),
    (["--preview"], "[tool.torchlint]\n", True),
    ([], "[tool.torchlint]\npreview = true\n", True),
    (["--no-preview"], "[tool.torchlint]\npreview = true\n", False),
])
def test_preview_flag_overrides_the_configuration(tmp_path, flags, pyproject, has_preview):
    assert ("TL104" in codes(tmp_path, flags, pyproject)) is has_preview


def test_the_server_help_lists_the_preview_flags():
    from torchlint.commands.server import build_parser

    text = build_parser().format_help()
    assert "--preview" in text and "--no-preview" in text
