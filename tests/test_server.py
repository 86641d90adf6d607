"""End-to-end tests of `torchlint server`: the server runs as a subprocess and these tests speak
JSON-RPC to it over stdin/stdout with Content-Length framing, as an editor does. Every read has
a timeout, so a broken server fails a test instead of hanging it.

TL701 (data-parallel) is the probe rule for diagnostics. No shipped rule had a fix when this was
written, so the code-action tests start the server with two small fixing rules registered
(TL990 safe, TL991 unsafe), written out from FAKE_RULES below.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

pytest.importorskip("pygls.lsp.server")
pytest.importorskip("lsprotocol")

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 15.0
DEBOUNCE_MS = 150

BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"
TL701_MESSAGE = "`nn.DataParallel` runs all GPUs from one process; use `torch.nn.parallel.DistributedDataParallel`"
TL701_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/TL701.md"

FAKE_RULES = '''
import libcst as cst
from torchlint.context import FixSpec, NodeEdit
from torchlint.rules.base import Rule


def _called(node, name):
    return isinstance(node.func, cst.Name) and node.func.value == name


class SlowCall(Rule):
    code = "TL990"
    name = "slow-call"
    summary = "slow() is slow."
    message = "`slow()` is slow; use `fast()`."
    requires = (("slow",),)
    fix_applicability = "safe"

    def visit_Call(self, node):
        if _called(node, "slow"):  # the fix replaces the whole call: nested calls need two passes
            fixed = node.with_changes(func=cst.Name("fast"))
            self.report(node, fix=FixSpec("safe", "Replace `slow` with `fast`", (NodeEdit(node, fixed),)))


class RiskyCall(Rule):
    code = "TL991"
    name = "risky-call"
    summary = "risky() is risky."
    message = "`risky()` is risky; use `careful()`."
    requires = (("risky",),)
    fix_applicability = "unsafe"

    def visit_Call(self, node):
        if _called(node, "risky"):
            self.report(node, fix=FixSpec("unsafe", "Replace `risky` with `careful`", (NodeEdit(node.func, "careful"),)))


RULES = [SlowCall, RiskyCall]
'''
FAKE_LAUNCHER = (
    "import sys, torchlint.rules as r; r.RULE_MODULES = r.RULE_MODULES + ('lsp_fake_rules',); "
    "from torchlint.cli import main; sys.exit(main(['server', '--debounce-ms', '%d']))" % DEBOUNCE_MS
)


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


class LspClient:
    """A minimal editor: frames JSON-RPC, answers the server's requests, keeps what it reads."""

    def __init__(self, cwd: Path, command: List[str], env: Optional[Dict[str, str]] = None) -> None:
        self.stderr = open(cwd / ".server-stderr.log", "w+b")
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr
        )
        self.inbox: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.seen: List[dict] = []  # read but not yet claimed by a wait
        self.next_id = 0
        self.write_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read_loop, daemon=True)
        self.reader.start()

    # -- wire ------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                length = None
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    line = line.strip()
                    if not line:
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                message = json.loads(stream.read(length))
                if "method" in message and "id" in message:  # a request from the server
                    self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                self.inbox.put(message)
        finally:
            self.inbox.put(None)

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        with self.write_lock:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None, timeout: float = TIMEOUT) -> Any:
        self.next_id += 1
        msg_id = self.next_id
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout, f"reply to {method}")
        assert "error" not in reply, reply
        return reply["result"]

    def wait_for(self, match: Callable[[dict], bool], timeout: float = TIMEOUT, what: str = "a message") -> dict:
        for i, message in enumerate(self.seen):
            if match(message):
                return self.seen.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                message = self.inbox.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise AssertionError(f"timed out waiting for {what}; unclaimed: {self.seen}") from None
            if message is None:
                self.stderr.seek(0)
                raise AssertionError(f"server closed its output waiting for {what}: {self.stderr.read().decode()}")
            if match(message):
                return message
            self.seen.append(message)

    def drain(self, seconds: float) -> List[dict]:
        """Everything that arrives within ``seconds``, plus what was already unclaimed."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                break
            if message is not None:
                self.seen.append(message)
        out, self.seen = self.seen, []
        return out

    # -- editor actions --------------------------------------------------------------------
    def initialize(self, root: Path, capabilities: Optional[dict] = None) -> dict:
        caps = capabilities if capabilities is not None else {
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}, "workspaceEdit": {"documentChanges": True}},
            "textDocument": {"publishDiagnostics": {"versionSupport": True}, "codeAction": {}},
        }
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": uri_of(root), "capabilities": caps})
        self.notify("initialized", {})
        return result

    def open(self, uri: str, text: str, version: int = 1, language: str = "python") -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}})

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def diagnostics(self, uri: str, version: Optional[int] = None, timeout: float = TIMEOUT) -> dict:
        def match(m):
            return m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri and (
                version is None or m["params"].get("version") == version
            )

        return self.wait_for(match, timeout, f"diagnostics for {uri} v{version}")["params"]

    def close(self) -> int:
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None, timeout=5)
                self.notify("exit")
                return self.proc.wait(timeout=5)
            return self.proc.returncode
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
            self.stderr.close()


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / ".git").mkdir()  # config discovery stops at a repository root
    return tmp_path


@pytest.fixture
def start(workspace):
    clients: List[LspClient] = []

    def start_server(fake_rules: bool = False, capabilities: Optional[dict] = None, root: Optional[Path] = None) -> LspClient:
        env = dict(os.environ)
        paths = [str(ROOT)]
        if fake_rules:
            (workspace / "lsp_fake_rules.py").write_text(FAKE_RULES)
            paths.append(str(workspace))
            command = [sys.executable, "-c", FAKE_LAUNCHER]
        else:
            command = [sys.executable, "-m", "torchlint", "server", "--debounce-ms", str(DEBOUNCE_MS)]
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
        client = LspClient(workspace, command, env)
        clients.append(client)
        client.initialize_result = client.initialize(root or workspace, capabilities)
        return client

    yield start_server
    for client in clients:
        client.close()


def tl701(line: int, start: int, end: int, version: int = 1) -> dict:
    return {
        "range": {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}},
        "severity": 2,
        "code": "TL701",
        "codeDescription": {"href": TL701_URL},
        "source": "torchlint",
        "message": TL701_MESSAGE,
        "data": {"version": version},
    }


# -- diagnostics -------------------------------------------------------------------------------

def test_initialize_advertises_capabilities(start):
    client = start()
    caps = client.initialize_result["capabilities"]
    assert client.initialize_result["serverInfo"]["name"] == "torchlint"
    assert caps["positionEncoding"] == "utf-16"
    assert caps["codeActionProvider"] == {
        "codeActionKinds": ["quickfix", "source.fixAll.torchlint", "notebook.source.fixAll.torchlint"], "resolveProvider": True,
    }
    assert caps["textDocumentSync"]["openClose"] is True
    assert caps["textDocumentSync"]["save"] == {"includeText": False}
    registration = client.wait_for(lambda m: m.get("method") == "client/registerCapability")
    assert registration["params"]["registrations"][0]["method"] == "workspace/didChangeWatchedFiles"
    watchers = registration["params"]["registrations"][0]["registerOptions"]["watchers"]
    # the config and every file the declared torch version comes from (see dependencies.py)
    from torchlint.dependencies import WATCHED_GLOBS

    globs = [w["globPattern"] for w in watchers]
    assert globs == list(WATCHED_GLOBS) + ["**/torchlint.toml", "**/.torchlint.toml"]
    assert globs[:7] == [
        "**/pyproject.toml", "**/setup.cfg", "**/setup.py", "**/environment.yml", "**/environment.yaml",
        "**/requirements*.txt", "**/requirements/*.txt",
    ]


def test_diagnostics_on_open_change_save_and_close(start, workspace):
    client = start()
    path = workspace / "train.py"
    path.write_text(BAD)
    uri = uri_of(path)
    client.open(uri, BAD)
    assert client.diagnostics(uri, 1) == {"uri": uri, "version": 1, "diagnostics": [tl701(2, 8, 30)]}

    client.change(uri, "import torch.nn as nn\n\n\nx = 1; model = nn.DataParallel(m)\n", 2)
    assert client.diagnostics(uri, 2)["diagnostics"] == [tl701(3, 15, 33, version=2)]

    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri, 2)["diagnostics"] == [tl701(3, 15, 33, version=2)]

    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == {"uri": uri, "diagnostics": []}


def test_syntax_error_is_an_error(start, workspace):
    client = start()
    uri = uri_of(workspace / "broken.py")
    client.open(uri, "def f(:\n    pass\n")
    [diagnostic] = client.diagnostics(uri, 1)["diagnostics"]
    assert diagnostic["code"] == "TL001"
    assert diagnostic["severity"] == 1
    assert diagnostic["range"]["start"]["line"] == 0
    assert diagnostic["codeDescription"]["href"].endswith("/docs/rules/TL001.md")


def test_utf16_positions_count_astral_characters_twice(start, workspace):
    client = start()
    uri = uri_of(workspace / "emoji.py")
    # "🔥" is one Python character but two UTF-16 code units; "é" is one of each.
    line = 'label = "🔥é🔥"; model = nn.DataParallel(model)  # 🚀\n'
    client.open(uri, "import torch.nn as nn\n" + line)
    python_start = line.index("nn.DataParallel")
    python_end = line.index("  #")
    assert (python_start, python_end) == (23, 45)
    assert client.diagnostics(uri, 1)["diagnostics"] == [tl701(1, 25, 47)]


def test_utf8_position_encoding_when_the_client_prefers_it(start, workspace):
    client = start(capabilities={"general": {"positionEncodings": ["utf-8", "utf-16"]}})
    assert client.initialize_result["capabilities"]["positionEncoding"] == "utf-8"
    uri = uri_of(workspace / "emoji.py")
    client.open(uri, 'import torch.nn as nn\nlabel = "🔥é"; model = nn.DataParallel(model)\n')
    # 🔥 is 4 bytes and é 2 in UTF-8: the 22 characters before the call are 26 bytes.
    [diagnostic] = client.diagnostics(uri, 1)["diagnostics"]
    assert diagnostic["range"] == {"start": {"line": 1, "character": 26}, "end": {"line": 1, "character": 48}}


def test_rapid_changes_are_debounced_and_the_latest_version_wins(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, "import torch\n")
    assert client.diagnostics(uri, 1)["diagnostics"] == []
    header = "import torch.nn as nn\n"
    for version in range(2, 7):  # version v has v - 1 DataParallel calls
        client.change(uri, header + "m = nn.DataParallel(m)\n" * (version - 1), version)
    latest = client.diagnostics(uri, 6)
    assert [d["range"]["start"]["line"] for d in latest["diagnostics"]] == [1, 2, 3, 4, 5]
    assert all(d["data"] == {"version": 6} for d in latest["diagnostics"])
    later = client.drain(3 * DEBOUNCE_MS / 1000)
    published = [m for m in later if m.get("method") == "textDocument/publishDiagnostics"]
    assert published == []  # versions 2-5 were never linted, or their results were dropped


def test_untitled_documents_are_linted_with_workspace_settings(start, workspace):
    (workspace / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL701"]\n')
    client = start()
    uri = "untitled:Untitled-1"
    client.open(uri, BAD)
    assert client.diagnostics(uri, 1)["diagnostics"] == [tl701(2, 8, 30)]


def test_notebook_cells_and_other_languages_are_left_alone(start, workspace):
    client = start()
    cell = "vscode-notebook-cell:/work/nb.ipynb#W0sZmlsZQ%3D%3D"
    client.open(cell, BAD)
    client.open(uri_of(workspace / "notes.md"), BAD, language="markdown")
    probe = uri_of(workspace / "probe.py")
    client.open(probe, BAD)  # messages are handled in order: once the probe answers, the others would have
    client.diagnostics(probe, 1)
    published = [m for m in client.drain(0.3) if m.get("method") == "textDocument/publishDiagnostics"]
    assert published == []


# -- configuration -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, table", [("pyproject.toml", "[tool.torchlint]\n"), ("torchlint.toml", ""),
                                         (".torchlint.toml", "")])
def test_workspace_config_is_honoured_and_reloaded(start, workspace, name, table):
    pyproject = workspace / name
    pyproject.write_text(table + 'ignore = ["TL701"]\n')
    sub = workspace / "pkg"
    sub.mkdir()
    uri = uri_of(sub / "train.py")
    client = start()
    client.open(uri, BAD)
    assert client.diagnostics(uri, 1)["diagnostics"] == []

    pyproject.write_text(table + 'ignore = []\n')
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri_of(pyproject), "type": 2}]})
    assert client.diagnostics(uri, 1)["diagnostics"] == [tl701(2, 8, 30)]

    pyproject.write_text(table + 'per-file-ignores = { "pkg/*.py" = ["TL701"] }\n')
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri_of(pyproject)}})
    assert client.diagnostics(uri, 1)["diagnostics"] == []


def test_dependency_files_are_watched_and_reload_the_declared_torch_version(start, workspace):
    """TL401 flags a plain zero_grad() only below torch 2.0: the declared version must follow
    requirements.txt and the files it includes (see dependencies.py)."""
    (workspace / "requirements.txt").write_text("torch>=2.1\n")
    uri = uri_of(workspace / "train.py")
    client = start()
    client.open(uri, "for x in loader:\n    optimizer.zero_grad()\n    model(x).backward()\n    optimizer.step()\n")
    assert client.diagnostics(uri, 1)["diagnostics"] == []

    (workspace / "base.txt").write_text("torch==1.13.1\n")
    (workspace / "requirements.txt").write_text("-r base.txt\n")
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri_of(workspace / "requirements.txt"), "type": 2}]})
    assert [d["code"] for d in client.diagnostics(uri, 1)["diagnostics"]] == ["TL401"]

    # base.txt matches no watched glob, but it was read: saving it reloads too.
    (workspace / "base.txt").write_text("torch==2.0.1\n")
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri_of(workspace / "base.txt")}})
    assert client.diagnostics(uri, 1)["diagnostics"] == []


def test_a_bad_config_shows_an_error_and_falls_back_to_defaults(start, workspace):
    (workspace / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL7O1"]\n')
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, BAD)
    assert client.diagnostics(uri, 1)["diagnostics"] == [tl701(2, 8, 30)]
    message = client.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
    assert message["type"] == 1
    assert "TL7O1" in message["message"] and "default settings" in message["message"]
    client.change(uri, BAD + "\n", 2)
    client.diagnostics(uri, 2)
    assert [m for m in client.drain(0.2) if m.get("method") == "window/showMessage"] == []  # shown once
    assert client.proc.poll() is None


def test_excluded_files_get_no_diagnostics(start, workspace):
    (workspace / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["generated"]\n')
    (workspace / "generated").mkdir()
    client = start()
    uri = uri_of(workspace / "generated" / "model.py")
    client.open(uri, BAD)
    assert client.diagnostics(uri, 1)["diagnostics"] == []


# -- code actions ------------------------------------------------------------------------------

def code_action(client: LspClient, uri: str, diagnostics: List[dict], only: Optional[List[str]] = None,
                ignore: bool = False) -> Any:
    """The code actions for ``diagnostics``; without ``ignore``, less the "ignore this line"
    quick fix every finding has (tests/test_server_reasons.py tests it), None when none is left."""
    context: Dict[str, Any] = {"diagnostics": diagnostics}
    if only is not None:
        context["only"] = only
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": whole, "context": context})
    if ignore or actions is None:
        return actions
    return [a for a in actions if not a["title"].startswith("Ignore ")] or None


def doc_edit(uri: str, version: int, *edits: tuple) -> dict:
    return {"documentChanges": [{
        "textDocument": {"uri": uri, "version": version},
        "edits": [
            {"range": {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}, "newText": text}
            for (l1, c1, l2, c2, text) in edits
        ],
    }]}


def test_rules_without_fixes_offer_no_actions(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, BAD)
    published = client.diagnostics(uri, 1)["diagnostics"]
    assert code_action(client, uri, published) is None


def test_quick_fixes_and_fix_all(start, workspace):
    client = start(fake_rules=True)
    uri = uri_of(workspace / "job.py")
    text = "y = slow(slow(x))  # 🔥\nz = risky(y)\n"
    client.open(uri, text)
    published = client.diagnostics(uri, 1)["diagnostics"]
    assert [(d["code"], d["range"]) for d in published] == [
        ("TL990", {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 17}}),
        ("TL990", {"start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 16}}),
        ("TL991", {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 12}}),
    ]
    assert published[2]["data"] == {"version": 1, "fix": {
        "applicability": "unsafe",
        "message": "Replace `risky` with `careful`",
        "edits": [{"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 9}}, "newText": "careful"}],
    }}

    actions = code_action(client, uri, published)
    assert [(a["title"], a["kind"], a.get("isPreferred")) for a in actions] == [
        ("Replace `slow` with `fast`", "quickfix", True),
        ("Replace `slow` with `fast`", "quickfix", True),
        ("Replace `risky` with `careful` (unsafe)", "quickfix", False),
        ("Fix all torchlint findings", "source.fixAll.torchlint", None),
    ]
    assert actions[0]["diagnostics"] == [published[0]]
    assert actions[0]["edit"] == doc_edit(uri, 1, (0, 4, 0, 17, "fast(slow(x))"))
    assert actions[2]["edit"] == doc_edit(uri, 1, (1, 4, 1, 9, "careful"))
    # Two passes (the inner call overlaps the outer one's edit); the unsafe fix is left alone.
    assert actions[3]["edit"] == doc_edit(uri, 1, (0, 4, 0, 13, "fast(fast"))

    only_fix_all = code_action(client, uri, [], only=["source.fixAll"])
    assert [a["kind"] for a in only_fix_all] == ["source.fixAll.torchlint"]
    assert only_fix_all[0]["edit"] == actions[3]["edit"]
    assert [a["kind"] for a in code_action(client, uri, published, only=["quickfix"])] == ["quickfix"] * 3


def test_quick_fixes_from_an_older_version_are_not_offered(start, workspace):
    client = start(fake_rules=True)
    uri = uri_of(workspace / "job.py")
    client.open(uri, "y = slow(x)\n")
    old = client.diagnostics(uri, 1)["diagnostics"]
    client.change(uri, "# moved\ny = slow(x)\n", 2)
    assert code_action(client, uri, old, only=["quickfix"]) is None
    new = client.diagnostics(uri, 2)["diagnostics"]
    [action] = code_action(client, uri, new, only=["quickfix"])
    assert action["edit"] == doc_edit(uri, 2, (1, 4, 1, 11, "fast(x)"))


def test_fix_all_is_resolved_lazily_when_the_client_can(start, workspace):
    caps = {"textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}}}
    client = start(fake_rules=True, capabilities=caps)
    uri = uri_of(workspace / "job.py")
    client.open(uri, "a = slow(1)\r\nb = slow(2)\r\n")
    client.diagnostics(uri, 1)
    [action] = code_action(client, uri, [], only=["source.fixAll.torchlint"])
    assert "edit" not in action
    resolved = client.request("codeAction/resolve", action)
    # No documentChanges support declared: a plain `changes` map.
    assert resolved["edit"] == {"changes": {uri: [
        {"range": {"start": {"line": 0, "character": 4}, "end": {"line": 1, "character": 8}}, "newText": "fast(1)\r\nb = fast"}
    ]}}


def test_unfixable_codes_offer_no_fix(start, workspace):
    (workspace / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL990"]\n')
    client = start(fake_rules=True)
    uri = uri_of(workspace / "job.py")
    client.open(uri, "y = slow(x)\n")
    [diagnostic] = client.diagnostics(uri, 1)["diagnostics"]
    assert diagnostic["data"] == {"version": 1}
    assert code_action(client, uri, [diagnostic]) is None


# -- the command -------------------------------------------------------------------------------

def test_shutdown_and_exit(start):
    client = start()
    assert client.close() == 0


def test_without_pygls_the_command_says_how_to_install_it():
    code = (
        "import sys; sys.modules['pygls'] = None; sys.modules['pygls.lsp'] = None; "
        "sys.modules['pygls.lsp.server'] = None; from torchlint.cli import main; sys.exit(main(['server']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ['torchlint: error: `torchlint server` needs pygls 2: pip install "torchlint[lsp]"']


# -- helpers, in process -----------------------------------------------------------------------

def test_position_map_converts_character_columns_to_code_units():
    from torchlint.server import PositionMap

    text = "a = '🔥'\r\nb = 'é🔥' + x\rc\n"
    utf16, utf8, utf32 = PositionMap(text), PositionMap(text, "utf-8"), PositionMap(text, "utf-32")
    assert utf16.from_location(2, 11) == (1, 11)  # `x`: after é (1 unit) and 🔥 (2 units)
    assert utf8.from_location(2, 11) == (1, 14)
    assert utf32.from_location(2, 11) == (1, 10)
    assert utf16.from_location(3, 1) == (2, 0)  # a lone \r ends a line, as in LSP
    assert utf16.from_location(4, 1) == (3, 0)  # the empty line after the final newline
    assert utf16.from_location(9, 1) == (3, 0)  # past the end: clamped
    assert utf16.from_offset(len(text)) == (3, 0)


def test_minimal_replacement_keeps_crlf_whole():
    from torchlint.server import minimal_replacement

    assert minimal_replacement("a = slow(1)\n", "a = fast(1)\n") == (4, 8, "fast")
    assert minimal_replacement("a = slow(1)\n", "a = show(1)\n") == (5, 6, "h")
    assert minimal_replacement("x\r\ny\r\n", "x\ny\r\n") == (1, 3, "\n")
    old, new = "a\r\n", "a\r\nb\r\n"
    start, end, content = minimal_replacement(old, new)
    assert old[:start] + content + old[end:] == new and not old[:start].endswith("\r")
    assert minimal_replacement("same", "same") == (4, 4, "")


@pytest.fixture
def fake_rules(tmp_path, monkeypatch):
    import torchlint.rules as registry

    (tmp_path / "lsp_fake_rules.py").write_text(FAKE_RULES)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "RULE_MODULES", registry.RULE_MODULES + ("lsp_fake_rules",))
    registry.all_rules.cache_clear()
    registry.rules_by_code.cache_clear()
    yield
    monkeypatch.undo()
    registry.all_rules.cache_clear()
    registry.rules_by_code.cache_clear()


def test_fix_all_applies_the_fixers_safe_fixes_with_the_config(fake_rules):
    from torchlint import server
    from torchlint.config import Settings

    text = "y = slow(slow(x))\nz = risky(slow(y))\n"
    expected = "y = fast(fast(x))\nz = risky(fast(y))\n"
    assert server.fix_all_text(text, "job.py", Settings()) == expected
    promoted = Settings(extend_safe_fixes=("TL991",))
    assert server.fix_all_text(text, "job.py", promoted) == "y = fast(fast(x))\nz = careful(fast(y))\n"
    assert server.fix_all_text(text, "job.py", Settings(unfixable=("TL990",))) == text


# -- the project index ------------------------------------------------------------------------

METRICS_HELPER = "def accuracy(logits, y):\n    return (logits.argmax(1) == y).float().mean().item()\n"
TRAIN_LOOP = (
    "from metrics import accuracy\n\n"
    "def train(model, opt, loader):\n"
    "    for x, y in loader:\n"
    "        out = model(x.cuda())\n"
    "        out.sum().backward()\n"
    "        opt.step()\n"
    "        {call}\n"
)


def _tl201_rows(client, uri, version=1) -> List[int]:
    """The TL201 rows of the next publish for ``uri`` that has them settled (the index is built
    in the background: the first publish may come before it)."""
    published = client.diagnostics(uri, version)
    return [d["range"]["start"]["line"] for d in published["diagnostics"] if d["code"] == "TL201"]


def test_the_index_is_built_at_start_and_refreshed_on_save(start, workspace):
    """metrics.py's finding exists only because train.py calls `accuracy` every step."""
    (workspace / "metrics.py").write_text(METRICS_HELPER)
    train = workspace / "train.py"
    train.write_text(TRAIN_LOOP.format(call="acc = accuracy(out, y)"))
    client = start()
    uri = uri_of(workspace / "metrics.py")
    client.open(uri, METRICS_HELPER)
    rows = _tl201_rows(client, uri)
    if not rows:  # linted before the index was ready: the re-lint after indexing brings it
        rows = _tl201_rows(client, uri)
    assert rows == [1]
    # train.py now calls the helper once, after the loop: saving it removes metrics.py's finding
    train.write_text(TRAIN_LOOP.format(call="pass") + "    return accuracy(out, y)\n")
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri_of(train)}})
    assert _tl201_rows(client, uri) == []
