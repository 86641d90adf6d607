"""The reason behind each finding, everywhere (issue 30, item 4): LSP diagnostics link the rule's
page and carry the call that makes a helper run every step as ``relatedInformation``, hover
shows the rule's hint, an "ignore this line" quick fix adds ``# noqa: TLxxx``; the JSON output
has a ``related`` list and the full output a note, on a cold and a warm run alike."""

from __future__ import annotations

import json
import subprocess
import sys
import re
from pathlib import Path
from typing import List

import pytest

pytest.importorskip("pygls.lsp.server")
pytest.importorskip("lsprotocol")

import test_server  # noqa: E402  (the JSON-RPC client and the server fixtures of the .py tests)
from test_server import BAD, METRICS_HELPER, TRAIN_LOOP, code_action, uri_of  # noqa: E402

workspace = test_server.workspace
start = test_server.start
ROOT = test_server.ROOT
STEP_CALL_ROW = 8  # TRAIN_LOOP's `{call}` line, 1-based


def _project(workspace: Path) -> None:
    (workspace / "metrics.py").write_text(METRICS_HELPER)
    (workspace / "train.py").write_text(TRAIN_LOOP.format(call="acc = accuracy(out, y)"))


def _tl201(client, uri) -> dict:
    """metrics.py's TL201, once the index is built (the first publish may come before it)."""
    for _ in range(2):
        found = [d for d in client.diagnostics(uri, 1)["diagnostics"] if d["code"] == "TL201"]
        if found:
            return found[0]
    raise AssertionError("no TL201")


def test_a_cross_file_reason_is_related_information_and_the_rule_page_is_linked(start, workspace):
    _project(workspace)
    client = start()
    uri = uri_of(workspace / "metrics.py")
    client.open(uri, METRICS_HELPER)
    d = _tl201(client, uri)
    assert d["relatedInformation"] == [{
        "location": {"uri": uri_of(workspace / "train.py"), "range": {
            "start": {"line": STEP_CALL_ROW - 1, "character": 0}, "end": {"line": STEP_CALL_ROW - 1, "character": 0}}},
        "message": f"called every step from train.py:{STEP_CALL_ROW}",
    }]
    homepage = re.search(r'^Homepage = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert d["codeDescription"]["href"] == f"{homepage}/blob/main/docs/rules/TL201.md"
    assert (ROOT / "docs" / "rules" / "TL201.md").is_file()


def test_hover_shows_the_hint_and_where_the_reason_is(start, workspace):
    _project(workspace)
    client = start()
    uri = uri_of(workspace / "metrics.py")
    client.open(uri, METRICS_HELPER)
    d = _tl201(client, uri)
    at = {"textDocument": {"uri": uri}, "position": d["range"]["start"]}
    hover = client.request("textDocument/hover", at)
    text = hover["contents"]["value"]
    assert hover["contents"]["kind"] == "markdown"
    assert text.startswith("**TL201** `host-sync-in-loop`: `.item()` syncs with the GPU every step")
    assert f"`accuracy` runs every step (called every step from train.py:{STEP_CALL_ROW})" in text  # the hint
    assert f"[train.py:{STEP_CALL_ROW}]({uri_of(workspace / 'train.py')}#L{STEP_CALL_ROW})" in text
    assert "[TL201 documentation](https://github.com/torchlint/torchlint/blob/main/docs/rules/TL201.md)" in text
    nowhere = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
    assert client.request("textDocument/hover", nowhere) is None


def _ignore_actions(client, uri, diagnostics) -> List[dict]:
    return [a for a in code_action(client, uri, diagnostics, ignore=True) or [] if a["title"].startswith("Ignore ")]


@pytest.mark.parametrize("line, fixed", [
    ("model = nn.DataParallel(model)\n", "model = nn.DataParallel(model)  # noqa: TL701\n"),
    ("model = nn.DataParallel(model)  # noqa: E501\n", "model = nn.DataParallel(model)  # noqa: E501, TL701\n"),
])
def test_ignore_this_line_adds_a_noqa_and_the_finding_goes(start, workspace, line, fixed):
    client = start()
    uri = uri_of(workspace / "train.py")
    text = "import torch.nn as nn\n\n" + line
    client.open(uri, text)
    published = client.diagnostics(uri, 1)["diagnostics"]
    [action] = _ignore_actions(client, uri, published)
    assert action["title"] == "Ignore TL701 on this line (# noqa: TL701)"
    assert action["kind"] == "quickfix" and action["diagnostics"] == published
    [change] = action["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": uri, "version": 1}
    [edit] = change["edits"]
    lines = text.splitlines(keepends=True)
    start_, end = edit["range"]["start"], edit["range"]["end"]
    assert start_["line"] == end["line"] == 2
    new_line = lines[2][:start_["character"]] + edit["newText"] + lines[2][end["character"]:]
    assert new_line == fixed
    client.change(uri, "".join(lines[:2]) + new_line, 2)
    assert client.diagnostics(uri, 2)["diagnostics"] == []


def test_no_ignore_action_for_an_old_version_or_an_engine_error(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, BAD)
    old = client.diagnostics(uri, 1)["diagnostics"]
    client.change(uri, "# moved\n" + BAD, 2)
    client.diagnostics(uri, 2)
    assert _ignore_actions(client, uri, old) == []  # found in a text the editor no longer has
    client.change(uri, "def f(:\n", 3)
    assert _ignore_actions(client, uri, client.diagnostics(uri, 3)["diagnostics"]) == []  # TL001: noqa cannot help


# -- the command line: JSON's `related`, the full format's note, the same when cached ---------------

def _cli(cwd: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stderr
    return done.stdout


def test_json_and_full_output_carry_the_related_call(tmp_path):
    (tmp_path / ".git").mkdir()
    _project(tmp_path)
    related = [{"filename": "train.py", "message": f"called every step from train.py:{STEP_CALL_ROW}",
                "location": {"row": STEP_CALL_ROW, "column": 1}, "end_location": {"row": STEP_CALL_ROW, "column": 1}}]
    for run in ("cold", "warm"):
        [finding] = [d for d in json.loads(_cli(tmp_path, "--output-format", "json", ".")) if d["code"] == "TL201"]
        assert finding["filename"] == "metrics.py" and finding["related"] == related, run
    full = _cli(tmp_path, "--output-format", "full", "--no-cache", ".")
    assert f"  = note: train.py:{STEP_CALL_ROW}:1: called every step from train.py:{STEP_CALL_ROW}\n" in full
    # a finding without a reason elsewhere has no `related` key (the JSON stays ruff's shape)
    (tmp_path / "parallel.py").write_text(BAD)
    [plain] = [d for d in json.loads(_cli(tmp_path, "--output-format", "json", "parallel.py")) if d["code"] == "TL701"]
    assert "related" not in plain
