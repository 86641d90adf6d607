"""The editor path (``lint_source(..., incremental=True)``, what the language server runs) says
what a fresh lint of the same text says: TL003's row when libcst rejects one piece of a file
(issue 32, item 15), the parser's reuse on a buffer of millions of characters (item 23), and a
new, unsaved buffer's own cross-function facts (issue 28)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A lone `\\` line, then a `def` at column 0: CPython reads one logical line (the def), libcst
# rejects it. In a file large enough to be parsed by pieces, the piece's error counted its rows
# from the piece: "Syntax Error @ 1:1" where a whole lint said 869.
FILLER = "".join(f"def f{i}(x):\n    return torch.zeros({i}).sum() + x * {i} + {i}\n\n\n" for i in range(100))
LONE_BACKSLASH = (
    "import torch\nimport torch.nn as nn\nmodel = nn.DataParallel(m)\n\n\n" + FILLER + FILLER.replace("def f", "def g")
    + "def big():\n" + "".join(f"    x{i} = {i}\n" for i in range(60)) + "\\\ndef inner():\n    return 1\n"
)


def _tl003(text: str, incremental: bool) -> List[tuple]:
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    found = lint_source(text, "train.py", Settings(), incremental=incremental)
    return [(d.code, d.location.row, d.location.column, d.message) for d in found if d.code in ("TL001", "TL003")]


def test_tl003_of_a_piece_is_at_the_files_row_in_the_editor_path():
    fresh = _tl003(LONE_BACKSLASH, incremental=False)
    assert [row for _, row, _, _ in fresh] == [869]
    assert _tl003(LONE_BACKSLASH, incremental=True) == fresh  # the first lint of the text
    edited = LONE_BACKSLASH.replace("x3 = 3", "x3 = 33")
    assert _tl003(edited, incremental=True) == _tl003(edited, incremental=False)  # and after an edit


def test_tl003_of_a_piece_of_a_large_file_counts_the_rows_before_the_piece(monkeypatch):
    """Above ``LARGE_FILE_CHARS`` a whole lint parses by pieces too: both paths say the row of
    the piece in the file (the piece starts at `def big():`), not inside it."""
    from torchlint import parsing

    monkeypatch.setattr(parsing, "LARGE_FILE_CHARS", 5_000)
    first_row = LONE_BACKSLASH.splitlines().index("def big():") + 1
    fresh = _tl003(LONE_BACKSLASH, incremental=False)
    assert [row for _, row, _, _ in fresh] == [first_row]
    assert f"@ {first_row}:" in fresh[0][3]
    assert _tl003(LONE_BACKSLASH, incremental=True) == fresh


def test_the_language_server_reports_tl003_where_the_cli_does(tmp_path):
    import test_server

    (tmp_path / ".git").mkdir()
    path = tmp_path / "train.py"
    path.write_text(LONE_BACKSLASH)
    cli = subprocess.run([sys.executable, "-m", "torchlint", "--isolated", "--output-format", "json", "--no-cache", "train.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    [expected] = [d for d in json.loads(cli.stdout) if d["code"] == "TL003"]
    client = test_server.LspClient(tmp_path, [sys.executable, "-m", "torchlint", "server"],
                                   env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    try:
        client.initialize(tmp_path)
        uri = test_server.uri_of(path)
        client.open(uri, LONE_BACKSLASH)
        [got] = [d for d in client.diagnostics(uri, 1)["diagnostics"] if d["code"] == "TL003"]
        assert got["range"]["start"]["line"] + 1 == expected["location"]["row"] == 869
    finally:
        client.close()


# -- a buffer larger than the parser's cache ------------------------------------------------------

def test_a_buffer_larger_than_the_cache_reuses_its_trees_after_an_edit(monkeypatch):
    """2.5M characters (the cache was 2M: each lint evicted the pieces the next one needed,
    and every keystroke parsed the whole buffer again: 751 libcst parses of 751)."""
    import libcst

    from torchlint import engine, parsing
    from torchlint.config import Settings

    monkeypatch.setattr(engine, "_INCREMENTAL", parsing.IncrementalParser())
    text = "import torch.nn as nn\n\nmodel = nn.DataParallel(m)\n\n\n" + "".join(
        f"def f{i}(x):\n    doc = '{'a' * 10_000}'\n    return x.sum()\n\n\n" for i in range(250))
    assert len(text) > 2_500_000 > parsing.CACHE_CHARS
    parsed: List[str] = []
    real = libcst.parse_module

    def counting(source, *args, **kwargs):
        parsed.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", counting)
    settings = Settings()
    first = engine.lint_source(text, "big.py", settings, incremental=True)
    assert [d.code for d in first] == ["TL701"] and len(parsed) > 500
    parsed.clear()
    edited = text.replace("return x.sum()", "return x.mean()", 1)
    second = engine.lint_source(edited, "big.py", settings, incremental=True)
    assert [d.code for d in second] == ["TL701"]
    assert len(parsed) == 1 and "x.mean()" in parsed[0] and len(parsed[0]) < 100  # the edited statement only


# -- an unsaved buffer's own facts (issue 28) ------------------------------------------------------

NEW_TRAINING_FILE = (
    "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n\n\n"
    + "".join(f"def transform_{i}(x):\n    return x * {i} + 1\n\n\n" for i in range(20))
    + "def acc(logits, y):\n    return (logits.argmax(1) == y).float().mean().item()\n\n\n"
    "def train(model, opt, dataset):\n"
    "    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)\n"
    "    for x, y in loader:\n"
    "        out = model(x.cuda())\n"
    "        loss = nn.functional.cross_entropy(out, y.cuda())\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "        opt.zero_grad()\n"
    "        score = acc(out, y)\n"
)


def _as_lsp(finding: dict) -> tuple:
    return finding["code"], finding["location"]["row"] - 1, finding["location"]["column"] - 1, finding["message"]


def test_an_unsaved_buffers_own_facts_come_from_the_buffer(tmp_path):
    """A new training file, not on disk: `acc()` is called every step from the loop below it.
    The index of the files on disk knows nothing of it (the server published no TL201); the
    server's findings are the CLI's on the same text."""
    import os

    import test_server

    (tmp_path / ".git").mkdir()
    (tmp_path / "metrics.py").write_text(test_server.METRICS_HELPER)
    (tmp_path / "loop.py").write_text(test_server.TRAIN_LOOP.format(call="acc = accuracy(out, y)"))
    assert NEW_TRAINING_FILE.count("\n") > 90
    client = test_server.LspClient(tmp_path, [sys.executable, "-m", "torchlint", "server", "--debounce-ms", "50"],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        client.initialize(tmp_path)
        metrics = test_server.uri_of(tmp_path / "metrics.py")
        client.open(metrics, test_server.METRICS_HELPER)
        if not test_server._tl201_rows(client, metrics):  # the index is built once metrics.py has its TL201
            assert test_server._tl201_rows(client, metrics) == [1]
        new = tmp_path / "train_new.py"
        uri = test_server.uri_of(new)
        client.open(uri, NEW_TRAINING_FILE)
        published = client.diagnostics(uri, 1)["diagnostics"]
        later = [m for m in client.drain(1.0) if m.get("method") == "textDocument/publishDiagnostics"
                 and m["params"]["uri"] == uri]
        if later:
            published = later[-1]["params"]["diagnostics"]
        got = sorted((d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"], d["message"])
                     for d in published)
        # and after an edit that moves every line (the buffer's summary changes)
        client.change(uri, "\n" + NEW_TRAINING_FILE, 2)
        moved = sorted((d["code"], d["range"]["start"]["line"] - 1, d["range"]["start"]["character"], d["message"])
                       for d in client.diagnostics(uri, 2)["diagnostics"])
    finally:
        client.close()
    new.write_text(NEW_TRAINING_FILE)
    cli = subprocess.run([sys.executable, "-m", "torchlint", "--output-format", "json", "--no-cache", "."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    expected = sorted(_as_lsp(d) for d in json.loads(cli.stdout) if Path(d["filename"]).name == "train_new.py")
    # acc's `.item()`; and the blocking copies of the pinned batch (TL203, out of preview since issue 29)
    assert [(code, row) for code, row, _, _ in expected] == [("TL201", 86), ("TL203", 92), ("TL203", 93)]
    assert got == expected
    assert moved == expected
