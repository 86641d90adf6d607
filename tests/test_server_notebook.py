"""End-to-end tests of LSP 3.17 notebook document sync in `torchlint server` (VS Code's notebook
editor): the server runs as a subprocess and the JSON-RPC client of tests/test_server.py opens a
notebook with several cells, edits a cell, reads diagnostics per cell, asks for quick fixes and
fix-all, and closes it. The code cells are one program: an import in cell 1 serves cell 3."""

from __future__ import annotations

from typing import Dict, List, Optional

import pytest

pytest.importorskip("pygls.lsp.server")
pytest.importorskip("lsprotocol")

import test_server  # noqa: E402  (the JSON-RPC client and the server fixtures of the .py tests)
from test_server import LspClient, code_action, uri_of  # noqa: E402

workspace = test_server.workspace
start = test_server.start

NOTEBOOK_CAPS = {
    "workspace": {"workspaceEdit": {"documentChanges": True}},
    "textDocument": {"publishDiagnostics": {"versionSupport": True}, "codeAction": {}},
    "notebookDocument": {"synchronization": {"dynamicRegistration": False}},
}
PUBLISH = "textDocument/publishDiagnostics"

IMPORTS = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
ZEROS = "%matplotlib inline\nx = torch.zeros(3).cuda()\n"  # TL202, after a line magic
PARALLEL = "model = nn.DataParallel(model)\n"  # TL701, no fix
LOADER = "!nvidia-smi\nloader = DataLoader(ds, num_workers=0, pin_memory=True)\nfor xb in loader:\n    opt.step()\n"
BROKEN = "def f(:\n"


class Notebook:
    """A notebook document on the client's side: its URI, version and cells."""

    def __init__(self, client: LspClient, uri: str, cells: List[tuple]) -> None:
        self.client, self.uri, self.version = client, uri, 1
        self.cells = [{"uri": f"vscode-notebook-cell:{uri[len('file:'):]}#C{i}", "kind": kind, "text": text, "version": 1}
                      for i, (kind, text) in enumerate(cells)]

    def cell_uri(self, index: int) -> str:
        return self.cells[index]["uri"]

    def open(self) -> None:
        self.client.notify("notebookDocument/didOpen", {
            "notebookDocument": {
                "uri": self.uri, "notebookType": "jupyter-notebook", "version": self.version,
                "cells": [{"kind": 2 if c["kind"] == "code" else 1, "document": c["uri"]} for c in self.cells],
            },
            "cellTextDocuments": [
                {"uri": c["uri"], "languageId": "python" if c["kind"] == "code" else "markdown", "version": 1, "text": c["text"]}
                for c in self.cells
            ],
        })

    def edit_cell(self, index: int, text: str) -> None:
        """Replace a cell's whole text, as one incremental change."""
        cell = self.cells[index]
        lines = cell["text"].split("\n")
        end = {"line": len(lines) - 1, "character": len(lines[-1])}
        cell["text"], cell["version"] = text, cell["version"] + 1
        self.version += 1
        self.client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": self.uri, "version": self.version},
            "change": {"cells": {"textContent": [{
                "document": {"uri": cell["uri"], "version": cell["version"]},
                "changes": [{"range": {"start": {"line": 0, "character": 0}, "end": end}, "text": text}],
            }]}},
        })

    def rerun(self) -> None:
        """An execution: only the cells' execution summaries change (no re-lint needed)."""
        self.version += 1
        self.client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": self.uri, "version": self.version},
            "change": {"cells": {"data": [
                {"kind": 2, "document": c["uri"], "executionSummary": {"executionOrder": 1, "success": True}}
                for c in self.cells if c["kind"] == "code"
            ]}},
        })

    def close(self) -> None:
        self.client.notify("notebookDocument/didClose", {
            "notebookDocument": {"uri": self.uri},
            "cellTextDocuments": [{"uri": c["uri"]} for c in self.cells],
        })

    def diagnostics(self, indexes: List[int], version: Optional[Dict[int, int]] = None) -> Dict[int, list]:
        """The next publish for each cell in ``indexes`` (at the cell's current version)."""
        out = {}
        for i in indexes:
            uri, want = self.cell_uri(i), self.cells[i]["version"]
            message = self.client.wait_for(
                lambda m: m.get("method") == PUBLISH and m["params"]["uri"] == uri and m["params"].get("version") == want,
                what=f"diagnostics for cell {i + 1} v{want}",
            )
            out[i] = message["params"]["diagnostics"]
        return out


def short(diagnostics: list) -> list:
    return [(d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"],
             d["range"]["end"]["line"], d["range"]["end"]["character"]) for d in diagnostics]


def edits_by_cell(edit: dict) -> Dict[str, list]:
    return {
        change["textDocument"]["uri"]: [(change["textDocument"]["version"], e["range"]["start"]["line"],
                                         e["range"]["start"]["character"], e["range"]["end"]["line"],
                                         e["range"]["end"]["character"], e["newText"]) for e in change["edits"]]
        for change in edit["documentChanges"]
    }


def published(client: LspClient, seconds: float = 0.4) -> list:
    return [m["params"] for m in client.drain(seconds) if m.get("method") == PUBLISH]


def test_initialize_advertises_notebook_sync(start):
    client = start(capabilities=NOTEBOOK_CAPS)
    caps = client.initialize_result["capabilities"]
    assert caps["notebookDocumentSync"] == {
        "notebookSelector": [{"notebook": "jupyter-notebook", "cells": [{"language": "python"}, {"language": "markdown"}]}],
        "save": True,
    }
    assert caps["codeActionProvider"]["codeActionKinds"] == [
        "quickfix", "source.fixAll.torchlint", "notebook.source.fixAll.torchlint",
    ]


def test_notebook_sync_end_to_end(start, workspace):
    (workspace / "pyproject.toml").write_text("[tool.torchlint]\npreview = true\n")  # TL101: preview
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "train.ipynb"), [
        ("code", IMPORTS), ("markdown", "# Data\nx = torch.zeros(3).cuda()\n"), ("code", ZEROS), ("code", PARALLEL),
        ("code", LOADER), ("code", BROKEN), ("code", ""),
    ])
    nb.open()
    # One program: cell 1's imports resolve the names of cells 3-5; markdown is not code; the
    # line magic and the shell escape keep their lines; a cell that does not parse is TL001 alone.
    found = nb.diagnostics([2, 3, 4, 5])
    assert short(found[2]) == [("TL202", 1, 4, 1, 25)]
    assert short(found[3]) == [("TL701", 0, 8, 0, 30)]
    assert short(found[4]) == [("TL101", 1, 9, 1, 55)]
    assert short(found[5]) == [("TL001", 0, 6, 0, 6)] and found[5][0]["severity"] == 1
    assert found[2][0]["data"]["version"] == 1
    assert published(client) == []  # nothing for the import cell, the markdown cell, the empty cell

    # Quick fix in a cell: a versioned edit of that cell.
    [zeros_fix] = code_action(client, nb.cell_uri(2), found[2], only=["quickfix"])
    assert (zeros_fix["kind"], zeros_fix["isPreferred"], zeros_fix["diagnostics"]) == ("quickfix", True, found[2])
    assert edits_by_cell(zeros_fix["edit"]) == {nb.cell_uri(2): [(1, 1, 4, 1, 25, 'torch.zeros(3, device="cuda")')]}
    # TL101's (unsafe) fix adds `import os` after the imports of cell 1: one edit in each cell.
    [workers_fix] = code_action(client, nb.cell_uri(4), found[4], only=["quickfix"])
    assert workers_fix["title"].endswith("(unsafe)")
    edits = edits_by_cell(workers_fix["edit"])
    assert sorted(edits) == [nb.cell_uri(0), nb.cell_uri(4)]
    assert edits[nb.cell_uri(4)] == [(1, 1, 36, 1, 37, "min(4, os.cpu_count() or 1)")]
    [(version, line, column, end_line, end_column, text)] = edits[nb.cell_uri(0)]
    assert (version, line, column) == (1, end_line, end_column) and text.strip() == "import os"  # among cell 1's imports

    # Edit a cell: only the notebook is re-linted, the edited cell at its new version.
    nb.edit_cell(3, "\n" + PARALLEL + "y = torch.ones(2).cuda()\n")
    after = nb.diagnostics([3])
    assert short(after[3]) == [("TL701", 1, 8, 1, 30), ("TL202", 2, 4, 2, 24)]
    assert after[3][1]["data"]["version"] == 2
    # a fix found at the cell's old version is not offered any more
    assert code_action(client, nb.cell_uri(3), [dict(after[3][1], data={**after[3][1]["data"], "version": 1})],
                       only=["quickfix"]) is None

    # Fix-all from a cell fixes that cell's findings; the notebook kind fixes every cell.
    [cell_fix_all] = code_action(client, nb.cell_uri(3), [], only=["source.fixAll.torchlint"])
    assert cell_fix_all["kind"] == "source.fixAll.torchlint"
    assert edits_by_cell(cell_fix_all["edit"]) == {nb.cell_uri(3): [(2, 2, 16, 2, 23, ', device="cuda"')]}
    [notebook_fix_all] = code_action(client, nb.cell_uri(0), [], only=["notebook.source.fixAll"])
    assert notebook_fix_all["kind"] == "notebook.source.fixAll.torchlint"
    assert edits_by_cell(notebook_fix_all["edit"]) == {
        nb.cell_uri(2): [(1, 1, 17, 1, 24, ', device="cuda"')],
        nb.cell_uri(3): [(2, 2, 16, 2, 23, ', device="cuda"')],
    }
    # unasked (the light bulb): quick fixes, then fix-all for the cell when it has a safe fix
    assert [a["kind"] for a in code_action(client, nb.cell_uri(3), after[3])] == ["quickfix", "source.fixAll.torchlint"]
    assert code_action(client, nb.cell_uri(0), []) is None

    # An execution (execution summaries only) is not a change to lint again.
    published(client)  # (the edit re-published the other cells' findings, unchanged)
    nb.rerun()
    assert published(client) == []

    # Close: every cell's diagnostics are cleared.
    nb.close()
    cleared = published(client, 1.0)
    assert sorted(p["uri"] for p in cleared) == sorted(c["uri"] for c in nb.cells)
    assert all(p["diagnostics"] == [] for p in cleared)


def test_cells_added_and_removed(start, workspace):
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "nb.ipynb"), [("code", "import torch\n"), ("code", ZEROS)])
    nb.open()
    assert short(nb.diagnostics([1])[1]) == [("TL202", 1, 4, 1, 25)]
    # Remove cell 2 and add a new cell 2 that uses the import of cell 1.
    new = {"uri": nb.uri.replace("file:", "vscode-notebook-cell:") + "#new", "kind": "code",
           "text": "y = torch.ones(4).cuda()\n", "version": 1}
    removed = nb.cells[1]
    nb.cells[1] = new
    client.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": nb.uri, "version": 2},
        "change": {"cells": {"structure": {
            "array": {"start": 1, "deleteCount": 1, "cells": [{"kind": 2, "document": new["uri"]}]},
            "didOpen": [{"uri": new["uri"], "languageId": "python", "version": 1, "text": new["text"]}],
            "didClose": [{"uri": removed["uri"]}],
        }}},
    })
    cleared = client.wait_for(lambda m: m.get("method") == PUBLISH and m["params"]["uri"] == removed["uri"])
    assert cleared["params"]["diagnostics"] == []
    assert short(nb.diagnostics([1])[1]) == [("TL202", 0, 4, 0, 24)]


def test_the_project_index_publishes_a_notebook_again_only_when_its_findings_change(start, workspace):
    """Once the workspace's index is built, what is open is linted again with it. A notebook
    whose findings did not change gets no second publish, as a Python file gets none: the
    repeat could reach the client after an edit it had already sent (a removed cell shown its
    old findings until the next lint). The filler files make the index take longer than the
    notebook's first lint; metrics.py's finding exists only once the index is there."""
    for i in range(300):
        (workspace / f"filler_{i}.py").write_text(f"import torch\n\ndef f{i}(x):\n    return x + {i}\n")
    (workspace / "metrics.py").write_text(test_server.METRICS_HELPER)
    (workspace / "train.py").write_text(test_server.TRAIN_LOOP.format(call="acc = accuracy(out, y)"))
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "nb.ipynb"), [("code", "import torch\n"), ("code", ZEROS)])
    nb.open()
    assert short(nb.diagnostics([1])[1]) == [("TL202", 1, 4, 1, 25)]
    metrics = uri_of(workspace / "metrics.py")
    client.open(metrics, test_server.METRICS_HELPER)
    rows = test_server._tl201_rows(client, metrics)
    if not rows:  # linted before the index was ready: the re-lint after indexing brings it
        rows = test_server._tl201_rows(client, metrics)
    assert rows == [1]  # the index is built and the re-lint it asked for has run
    again = [m for m in client.drain(0.5) if m.get("method") == PUBLISH and m["params"]["uri"].startswith("vscode-notebook-cell:")]
    assert again == []


def test_include_notebooks_false_turns_the_editor_off_too(start, workspace):
    (workspace / "pyproject.toml").write_text("[tool.torchlint]\ninclude-notebooks = false\n")
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "nb.ipynb"), [("code", "import torch\n" + ZEROS)])
    nb.open()
    probe = uri_of(workspace / "probe.py")
    client.open(probe, "import torch\nx = torch.zeros(3).cuda()\n")  # handled in order: after the notebook
    assert [d["code"] for d in client.diagnostics(probe, 1)["diagnostics"]] == ["TL202"]
    assert published(client) == []


def test_python_files_are_unchanged_beside_a_notebook(start, workspace):
    """A .py document and a notebook open together: the file's findings and fixes are its own."""
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "nb.ipynb"), [("code", "import torch\n" + ZEROS)])
    nb.open()
    nb.diagnostics([0])
    uri = uri_of(workspace / "train.py")
    client.open(uri, "import torch\nx = torch.zeros(3).cuda()\n")
    [d] = client.diagnostics(uri, 1)["diagnostics"]
    assert d["data"]["fix"]["edits"] == [
        {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 25}}, "newText": 'torch.zeros(3, device="cuda")'}
    ]
    [action] = code_action(client, uri, [d], only=["quickfix"])
    assert action["edit"] == {"documentChanges": [{"textDocument": {"uri": uri, "version": 1}, "edits": d["data"]["fix"]["edits"]}]}
    assert code_action(client, uri, [], only=["notebook.source.fixAll"]) is None


def test_notebook_fix_all_is_resolved_lazily_when_the_client_can(start, workspace):
    caps = {
        "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}},
        "notebookDocument": {"synchronization": {}},
    }
    client = start(capabilities=caps)
    nb = Notebook(client, uri_of(workspace / "nb.ipynb"), [("code", "import torch\n"), ("code", ZEROS), ("code", ZEROS)])
    nb.open()
    nb.diagnostics([1, 2])
    [action] = code_action(client, nb.cell_uri(0), [], only=["notebook.source.fixAll.torchlint"])
    assert action["kind"] == "notebook.source.fixAll.torchlint" and "edit" not in action
    resolved = client.request("codeAction/resolve", action)
    # No documentChanges support declared: a plain `changes` map, one edit per changed cell.
    edit = {"range": {"start": {"line": 1, "character": 17}, "end": {"line": 1, "character": 24}}, "newText": ', device="cuda"'}
    assert resolved["edit"] == {"changes": {nb.cell_uri(1): [edit], nb.cell_uri(2): [edit]}}


def test_ignore_this_line_in_a_cell(start, workspace):
    """The "ignore this line" quick fix edits the cell the finding is in, at the cell's row."""
    client = start(capabilities=NOTEBOOK_CAPS)
    nb = Notebook(client, uri_of(workspace / "train.ipynb"), [("code", IMPORTS), ("code", "y = 1\n" + PARALLEL)])
    nb.open()
    found = nb.diagnostics([1])[1]
    assert short(found) == [("TL701", 1, 8, 1, 30)]
    actions = code_action(client, nb.cell_uri(1), found, only=["quickfix"], ignore=True)
    [ignore] = [a for a in actions if a["title"].startswith("Ignore ")]
    assert ignore["title"] == "Ignore TL701 on this line (# noqa: TL701)"
    assert edits_by_cell(ignore["edit"]) == {nb.cell_uri(1): [(1, 1, 30, 1, 30, "  # noqa: TL701")]}
    nb.edit_cell(1, "y = 1\n" + PARALLEL.rstrip("\n") + "  # noqa: TL701\n")
    assert nb.diagnostics([1])[1] == []
