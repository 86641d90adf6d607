"""The language server under a careless or hostile client (issue 32, item 21-22): the LSP's
rules for `exit` and requests after `shutdown`, a Content-Length longer than its message,
edits whose ranges are out of the document, and memory over a long flood of notifications.

The server runs as a subprocess, driven over stdin/stdout by tests/test_server.py's client;
one test drives pygls' protocol in process to count its bookkeeping directly."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

pytest.importorskip("pygls.lsp.server")
pytest.importorskip("lsprotocol")

import test_server  # noqa: E402  (the JSON-RPC client and the server fixtures of the .py tests)
from test_server import BAD, LspClient, tl701, uri_of  # noqa: E402

workspace = test_server.workspace
start = test_server.start


def reply_to(client: LspClient, msg_id: int, timeout: float = test_server.TIMEOUT) -> dict:
    return client.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout, f"reply {msg_id}")


def send_request(client: LspClient, method: str, params=None) -> int:
    client.next_id += 1
    client._send({"jsonrpc": "2.0", "id": client.next_id, "method": method, "params": params})
    return client.next_id


# -- shutdown and exit (LSP: "exit" without "shutdown" is status 1; requests after it fail) --------

def test_exit_without_shutdown_exits_with_status_1(start):
    client = start()
    client.notify("exit")
    assert client.proc.wait(timeout=10) == 1


def test_exit_after_shutdown_exits_with_status_0(start):
    client = start()
    assert client.request("shutdown") is None
    client.notify("exit")
    assert client.proc.wait(timeout=10) == 0


def test_requests_after_shutdown_get_invalid_request(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, BAD)
    client.diagnostics(uri, 1)
    assert client.request("shutdown") is None
    for method, params in [
        ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0},
         "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}}),
        ("shutdown", None),
    ]:
        reply = reply_to(client, send_request(client, method, params), timeout=5)
        assert reply["error"]["code"] == -32600, reply  # InvalidRequest
        assert "shutting down" in reply["error"]["message"]
    client.notify("exit")
    assert client.proc.wait(timeout=10) == 0


# -- a Content-Length too long ---------------------------------------------------------------------

def test_a_content_length_too_long_does_not_stall_the_server(start, workspace):
    """The client declares 100 KB more than it sends and waits for the answer: the server
    answers it after a short stall, and the messages after it are not swallowed."""
    client = start()
    uri = uri_of(workspace / "train.py")
    client.next_id += 1
    body = json.dumps({"jsonrpc": "2.0", "id": client.next_id, "method": "textDocument/codeAction", "params": {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": []}}}).encode()
    began = time.monotonic()
    with client.write_lock:
        client.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % (len(body) + 100_000) + body)
        client.proc.stdin.flush()
    assert "error" not in reply_to(client, client.next_id, timeout=10)
    assert time.monotonic() - began < 8
    client.open(uri, BAD)  # and the stream is in step again
    assert client.diagnostics(uri, 1)["diagnostics"] == [tl701(2, 8, 30)]


def test_a_content_length_too_long_swallowing_the_next_message_resyncs(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    first = json.dumps({"jsonrpc": "2.0", "method": "$/noSuchNotification", "params": {}}).encode()
    opened = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": BAD}}}).encode()
    with client.write_lock:  # the first length covers the second message and 100 KB more
        client.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % (len(first) + 100_000) + first
                                + b"Content-Length: %d\r\n\r\n" % len(opened) + opened)
        client.proc.stdin.flush()
    assert client.diagnostics(uri, 1, timeout=10)["diagnostics"] == [tl701(2, 8, 30)]


def test_the_reader_waits_for_a_slow_body_that_is_not_json_yet():
    """A stall inside a body that is not a whole JSON message yet (a slow client) loses
    nothing: the reader keeps reading."""
    import threading

    from torchlint.server import FramedReader

    read_end, write_end = os.pipe()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"text": "a" * 1000}}).encode()

    def slow_writer():
        os.write(write_end, b"Content-Length: %d\r\n\r\n" % len(body) + body[:300])
        time.sleep(0.5)  # longer than the reader's stall time
        os.write(write_end, body[300:])
        os.close(write_end)

    writer = threading.Thread(target=slow_writer)
    writer.start()
    with os.fdopen(read_end, "rb") as stream:
        reader = FramedReader(stream, stall_s=0.1)
        assert reader.readline() == b"Content-Length: %d\r\n" % len(body)
        assert reader.readline() == b"\r\n"
        assert reader.read(len(body)) == body
        assert reader.malformed == 0
    writer.join()


# -- edits whose ranges are not in the document ---------------------------------------------------

def change(client: LspClient, uri: str, version: int, *changes: dict) -> None:
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": list(changes)})


def span(l1, c1, l2, c2) -> dict:
    return {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}


def test_invalid_change_ranges_are_clamped_and_every_version_is_linted(start, workspace):
    """Past the end, reversed, negative, a character past the line's end (on a last line
    without a newline too): each edit lands where VS Code's own documents put it, and each
    version is published (the server never stops linting the document)."""
    client = start()
    uri = uri_of(workspace / "train.py")
    parallel = "model = nn.DataParallel(model)"
    client.open(uri, "import torch.nn as nn\n")
    assert client.diagnostics(uri, 1)["diagnostics"] == []
    # 2: lines 50-60 do not exist: the end of the text
    change(client, uri, 2, {"range": span(50, 0, 60, 0), "text": parallel + "\n"})
    assert client.diagnostics(uri, 2)["diagnostics"] == [tl701(1, 8, 30, version=2)]
    # 3: negative positions: the start of the text (pygls' types reject them: the edit was lost)
    change(client, uri, 3, {"range": span(-1, -5, 0, 0), "text": "x = 1\n"})
    assert client.diagnostics(uri, 3)["diagnostics"] == [tl701(2, 8, 30, version=3)]
    # 4: a reversed range is the same range
    change(client, uri, 4, {"range": span(1, 0, 0, 0), "text": ""})
    assert client.diagnostics(uri, 4)["diagnostics"] == [tl701(1, 8, 30, version=4)]
    # 5: a character past the end of the last line (no newline after it): its end
    change(client, uri, 5, {"range": span(1, 100, 1, 100), "text": "\n" + parallel})
    assert [d["range"]["start"]["line"] for d in client.diagnostics(uri, 5)["diagnostics"]] == [1, 2]
    # 6: a character past the end of a line: before its newline
    change(client, uri, 6, {"range": span(0, 500, 0, 900), "text": ", torch"})
    assert [d["range"]["start"]["line"] for d in client.diagnostics(uri, 6)["diagnostics"]] == [1, 2]


def test_a_change_that_cannot_be_read_re_reads_the_file(start, workspace):
    client = start()
    path = workspace / "train.py"
    path.write_text(BAD)
    uri = uri_of(path)
    client.open(uri, "x = 1\n")
    assert client.diagnostics(uri, 1)["diagnostics"] == []
    change(client, uri, 2, {"range": {"start": "nowhere", "end": None}, "text": "y"})
    assert client.diagnostics(uri, 2)["diagnostics"] == [tl701(2, 8, 30, version=2)]
    shown = client.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert "could not be applied" in shown["params"]["message"]


def test_apply_change_counts_code_units_and_clamps():
    from types import SimpleNamespace as NS

    from torchlint.server import apply_change

    def rng(l1, c1, l2, c2):
        return NS(start=NS(line=l1, character=c1), end=NS(line=l2, character=c2))

    text = "a = '🔥x'\r\nb\rc"
    assert apply_change(text, rng(0, 7, 0, 8), "Y") == "a = '🔥Y'\r\nb\rc"  # 🔥 is two UTF-16 units
    assert apply_change(text, rng(0, 9, 0, 10), "Y", "utf-8") == "a = '🔥Y'\r\nb\rc"
    assert apply_change(text, rng(0, 99, 0, 99), "!") == "a = '🔥x'!\r\nb\rc"
    assert apply_change(text, rng(2, 1, 1, 0), "") == "a = '🔥x'\r\n"
    assert apply_change(text, rng(9, 0, 9, 9), "\nd") == text + "\nd"


# -- memory over a long editing session ---------------------------------------------------------

def test_notification_futures_are_not_kept(tmp_path):
    """pygls 2.1 keeps every notification handler's future in ``_request_futures`` (~1.8 KB a
    keystroke, measured before the fix: 1,003 futures after 1,000 edits, 5,002 after 5,000;
    after it: none, and 0.2 bytes per edit over 18,000 edits)."""
    from torchlint.server import create_server

    server = create_server(50)
    protocol = server.protocol

    class Sink:
        def write(self, data):
            pass

        def close(self):
            pass

    protocol.set_writer(Sink())

    def feed(message: dict) -> None:
        protocol.handle_message(json.loads(json.dumps(message), object_hook=protocol.structure_message))

    async def edit_flood():
        feed({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}})
        uri = (tmp_path / "train.py").as_uri()
        feed({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}})
        await asyncio.sleep(0.3)
        marks = []
        tracemalloc.start()
        try:
            for version in range(2, 3002):
                feed({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": span(0, 4, 0, 5), "text": str(version % 10)}]}})
                if version % 100 == 0:
                    await asyncio.sleep(0)
                if version in (1001, 3001):
                    marks.append((len(protocol._request_futures), tracemalloc.get_traced_memory()[0]))
        finally:
            tracemalloc.stop()
            for task in list(server.torchlint_session.pending.values()):
                task.cancel()
        return marks

    (before, memory_before), (after, memory_after) = asyncio.run(edit_flood())
    assert before <= 2 and after <= 2
    assert memory_after - memory_before < 300_000, memory_after - memory_before  # 2,000 edits: ~3.6 MB without the fix


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's RSS from /proc")
def test_the_servers_memory_stays_flat_over_thousands_of_edits(start, workspace):
    client = start()
    uri = uri_of(workspace / "train.py")
    client.open(uri, "x = 1\n")
    client.diagnostics(uri, 1)

    def flood(first: int, last: int) -> int:
        for version in range(first, last):
            change(client, uri, version, {"range": span(0, 4, 0, 5), "text": str(version % 10)})
        # a request after them: answered once every notification before it was handled
        reply_to(client, send_request(client, "textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": span(0, 0, 0, 0), "context": {"diagnostics": []}}), timeout=60)
        return _rss_kb(client.proc.pid)

    warm = flood(2, 3002)
    grown = flood(3002, 11002) - warm
    assert grown < 5_000, f"RSS grew {grown} KB over 8,000 edits"  # 15.5 MB without the fix
    client.drain(0.5)
