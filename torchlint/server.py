"""``torchlint server``: a Language Server over stdio (pygls + lsprotocol, ``torchlint[lsp]``).

Diagnostics are published on open, save and (debounced) change; each finding's fix is a
``quickfix`` code action, and ``source.fixAll.torchlint`` applies every safe fix to a fixed
point. Settings come from the nearest ``pyproject.toml`` (``SettingsResolver``, rooted at the
workspace) and are reloaded when a ``pyproject.toml`` or a file the declared torch version comes
from (``requirements*.txt``, ``setup.cfg``, ``setup.py``, ``environment.yml``) changes. A ``.ipynb``
file opened as a text document is linted as a notebook (``notebook.lint_for_editor``: findings and
fixes in its JSON text). LSP 3.17 notebook documents (VS Code's notebook editor) are synced through
``notebookDocument/*``: the code cells are linted as one program (``notebook.lint_cells``), findings
are published on each cell's URI, and quick fixes, ``source.fixAll.torchlint`` (the findings of one
cell) and ``notebook.source.fixAll.torchlint`` (the whole notebook) edit the cells.

The module imports without pygls, so ``torchlint server`` can say how to install it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple
from urllib.parse import unquote

from torchlint.diagnostics import SAFE, Diagnostic, Location
from torchlint.fixer import effective_fixes
from torchlint.locator import Locator
from torchlint.source import is_notebook_path

SOURCE = "torchlint"
FIX_ALL_KIND = "source.fixAll.torchlint"
FIX_ALL_TITLE = "Fix all torchlint findings"
#: A notebook-level kind (VS Code's ``notebook.codeActionsOnSave``): one edit over every cell.
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.torchlint"
CELL_FIX_ALL_TITLE = "Fix all torchlint findings in this cell"
NOTEBOOK_FIX_ALL_TITLE = "Fix all torchlint findings in the notebook"
DEFAULT_DEBOUNCE_MS = 150
# Engine findings (the file cannot be parsed or read) are errors; rule findings are warnings.
ERROR_CODES = frozenset({"TL001", "TL002", "TL003"})  # the file could not be read or analysed
# Standalone configuration files (pyproject.toml is a dependency file too): saving one reloads.
CONFIG_FILE_NAMES = ("torchlint.toml", ".torchlint.toml")
PYTHON_SUFFIXES = (".py", ".pyi")
# Notebook cells sent as plain text documents (without notebook sync) are not linted: a cell
# alone is not the program. Cells come through ``notebookDocument/*`` instead.
NOTEBOOK_SCHEMES = ("vscode-notebook-cell", "notebook-cell")
#: The notebooks and cells the server asks to be synced (the Jupyter notebook type in VS Code;
#: markdown cells too, so that cell numbers in messages count every cell as the editor does).
NOTEBOOK_TYPE = "jupyter-notebook"
NOTEBOOK_CELL_LANGUAGES = ("python", "markdown")

logger = logging.getLogger("torchlint.server")


# -- positions: our 1-based character columns <-> LSP 0-based lines and code units ------------

def code_units(text: str, encoding: str) -> int:
    """Length of ``text`` in the negotiated position encoding (LSP's default is UTF-16)."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class PositionMap:
    """Converts ``Location``s and offsets of one text to LSP ``(line, character)`` pairs."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.encoding = encoding
        self.locator = Locator(text)

    def from_offset(self, offset: int) -> Tuple[int, int]:
        offset = max(0, min(offset, len(self.text)))
        loc = self.locator.location(offset)
        start = self.locator.line_starts[loc.row - 1]
        return loc.row - 1, code_units(self.text[start:offset], self.encoding)

    def from_location(self, row: int, column: int) -> Tuple[int, int]:
        """``row``/``column`` 1-based, columns in characters; rows past the end clamp to it."""
        return self.from_offset(self.locator.offset(Location(row, column)))

    def range(self, start: Location, end: Location) -> dict:
        """An LSP ``Range`` as JSON (it travels in a diagnostic's ``data`` as is)."""
        (l1, c1), (l2, c2) = self.from_location(start.row, start.column), self.from_location(end.row, end.column)
        return {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}


# -- fixes ---------------------------------------------------------------------------------------
# fixer.py owns fixing (applicability from the config, choosing non-overlapping fixes, the
# fixed-point loop, refusing fixes that break the parse); notebook.py fixes a notebook's cells.

def fix_all_text(text: str, path: str, settings) -> Optional[str]:
    """``text`` with every safe, fixable fix applied, re-linting until nothing changes; None when
    a fix would break the file."""
    if is_notebook_path(path):
        from torchlint.notebook import fix_notebook

        result = fix_notebook(text, path, settings)
    else:
        from torchlint.fixer import fix_text

        result = fix_text(text, path, settings)
    return None if result.error else result.text


def minimal_replacement(old: str, new: str) -> Tuple[int, int, str]:
    """One replacement ``(start, end, content)`` turning ``old`` into ``new``: the changed middle,
    never splitting a ``\\r\\n``."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    if 0 < end_old < len(old) and old[end_old - 1] == "\r" and old[end_old] == "\n":
        end_old += 1
        end_new += 1
    return start, end_old, new[start:end_new]


# -- lint results ------------------------------------------------------------------------------

@dataclass
class LintResult:
    version: Optional[int]
    text: str
    diagnostics: List[Diagnostic]
    settings: Any
    path: str
    config_error: Optional[str] = None
    internal_error: Optional[str] = None


@dataclass
class DocumentTarget:
    """Where a document's settings come from: a file path, or the workspace default."""

    path: str
    on_disk: bool


def document_target(uri: str, language_id: Optional[str]) -> Optional[DocumentTarget]:
    """The path to lint ``uri`` as, or None when torchlint has nothing to say about it."""
    from pygls.uris import to_fs_path, uri_scheme

    scheme = uri_scheme(uri) or ""
    if scheme in NOTEBOOK_SCHEMES:
        return None
    if scheme == "file":
        path = to_fs_path(uri) or ""
        if path.endswith(PYTHON_SUFFIXES + (".ipynb",)) or (language_id == "python" and not path.endswith(".toml")):
            return DocumentTarget(path, True)
        return None
    if language_id not in (None, "python"):
        return None
    # untitled:Untitled-1, and editors' virtual schemes: lint with the workspace's settings.
    name = uri.rsplit("/", 1)[-1].split(":", 1)[-1] or "untitled"
    if not name.endswith(PYTHON_SUFFIXES):
        name += ".py"
    return DocumentTarget(name, False)


def notebook_target(uri: str) -> DocumentTarget:
    """The path to lint a notebook document as: its file, or a name for an untitled notebook."""
    from pygls.uris import to_fs_path, uri_scheme

    if (uri_scheme(uri) or "") == "file":
        return DocumentTarget(to_fs_path(uri) or "notebook.ipynb", True)
    name = uri.rsplit("/", 1)[-1].split(":", 1)[-1] or "untitled"
    return DocumentTarget(name if name.endswith(".ipynb") else name + ".ipynb", False)


@dataclass(frozen=True)
class CellSnapshot:
    """One cell of a notebook document as it was when a lint started."""

    uri: str
    kind: str  # "code" (a Python code cell), "markdown", or "raw" (a code cell in another language)
    version: Optional[int]
    text: str


@dataclass
class NotebookResult:
    cells: Tuple[CellSnapshot, ...]
    diagnostics: Dict[str, List[Diagnostic]]  # cell URI -> its findings, positioned in the cell
    settings: Any
    path: str
    config_error: Optional[str] = None
    internal_error: Optional[str] = None


@dataclass
class Session:
    """Server state that is not protocol: settings, the open documents, last results,
    pending lints, and which errors the user has already been shown."""

    root: str
    debounce: float
    encoding: str = "utf-16"
    resolver: Any = None
    documents: Dict[str, Optional[str]] = field(default_factory=dict)  # open URI -> languageId
    results: Dict[str, LintResult] = field(default_factory=dict)
    pending: Dict[str, "asyncio.Task"] = field(default_factory=dict)
    #: open notebook documents -> the cell URIs whose last publish had findings
    notebooks: Dict[str, Set[str]] = field(default_factory=dict)
    notebook_results: Dict[str, NotebookResult] = field(default_factory=dict)
    notebook_pending: Dict[str, "asyncio.Task"] = field(default_factory=dict)
    shown_errors: Set[str] = field(default_factory=set)
    config_error: Optional[str] = None
    #: the exit status the client's ``exit`` asked for (None: the input ended without one)
    exit_code: Optional[int] = None
    #: ``torchlint server --preview/--no-preview`` (the VS Code extension's ``torchlint.preview``):
    #: over the configuration's ``preview``; None leaves it to the configuration.
    preview: Optional[bool] = None
    executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "torchlint-lint"))
    #: The project index of the workspace (``project.py``), built in the background at start
    #: and refreshed on save; None until then (a document is then its own project).
    project: Any = None
    summaries: Dict[str, dict] = field(default_factory=dict)
    project_lock: threading.Lock = field(default_factory=threading.Lock)
    #: path -> (the index, the buffer's summary, its facts) of the last buffer linted there
    buffer_facts: Dict[str, tuple] = field(default_factory=dict)

    def build_project(self) -> None:
        """Phase 1 over the workspace and the index (on a background thread)."""
        from torchlint.discovery import discover
        from torchlint.project import ProjectIndex

        summaries: Dict[str, dict] = {}
        try:
            files = discover([self.root], self.resolver)
        except Exception:  # a bad tree must not take the server down; documents lint alone
            logger.exception("cannot index the workspace")
            return
        for path in files:
            summary = _summary_from_disk(path)
            if summary is not None:
                summaries[os.path.abspath(path)] = summary
        index = ProjectIndex(summaries)
        with self.project_lock:
            self.summaries, self.project = summaries, index

    def refresh_project(self, path: str) -> Set[str]:
        """Re-summarise one saved file; the paths whose project facts changed."""
        from torchlint.project import ProjectIndex

        path = os.path.abspath(path)
        summary = _summary_from_disk(path)
        with self.project_lock:
            if self.project is None:
                return set()
            before = {p: self.project.facts_for(p).digest for p in self.summaries}
            summaries = dict(self.summaries)
            if summary is None:
                summaries.pop(path, None)
            else:
                summaries[path] = summary
            self.summaries, self.project = summaries, ProjectIndex(summaries)
            after = {p: self.project.facts_for(p).digest for p in summaries}
        # (the saved file itself is re-linted by did_save already; here only when its facts moved)
        return {p for p in set(before) | set(after) if before.get(p) != after.get(p)}

    def facts_for(self, path: str, text: Optional[str] = None):
        """The project facts of ``path``; with ``text`` (an editor's buffer), of that text: its
        own summary replaces the one indexed from disk (a new or unsaved file is not on disk,
        or not as it is in the editor), the other files' come from the index. The index with the
        buffer's summary is built again only when that summary changes (typing inside a line
        rarely changes it)."""
        path = os.path.abspath(path)
        with self.project_lock:
            project, summaries = self.project, self.summaries
        if project is None:
            return None
        if text is None:
            with self.project_lock:
                return project.facts_for(path)
        from torchlint.engine import buffer_summary
        from torchlint.project import ProjectIndex

        summary = buffer_summary(text, path)
        if summary is None or summary == summaries.get(path):
            with self.project_lock:
                return project.facts_for(path)
        kept = self.buffer_facts.get(path)
        if kept is not None and kept[0] is project and kept[1] == summary:
            return kept[2]
        facts = ProjectIndex({**summaries, path: summary}).facts_for(path)
        self.buffer_facts[path] = (project, summary, facts)
        return facts

    def reload(self) -> None:
        """A fresh resolver (pyproject.toml changed); a bad config is remembered, not raised."""
        from torchlint.config import CliOverrides, ConfigError, SettingsResolver

        self.shown_errors.clear()
        self.config_error = None
        overrides = CliOverrides(preview=self.preview)
        try:
            self.resolver = SettingsResolver(cwd=self.root, overrides=overrides)
        except ConfigError as exc:
            self.config_error = str(exc)
            self.resolver = SettingsResolver(cwd=self.root, overrides=overrides, isolated=True)

    def default_settings(self):
        from torchlint.config import Settings

        return Settings(root=self.root)

    def settings_for(self, target: DocumentTarget):
        """Settings for ``target``, or the defaults and the config error that forced them."""
        from torchlint.config import ConfigError

        if self.config_error:
            return self.default_settings(), self.config_error
        try:
            settings = self.resolver.for_path(target.path) if target.on_disk else self.resolver.default
            settings.enabled_codes  # bad codes in the config raise here, not mid-lint
            return settings, None
        except ConfigError as exc:
            return self.default_settings(), str(exc)

    def lint(self, uri: str, version: Optional[int], text: str) -> Optional[LintResult]:
        """Runs on the lint thread."""
        from torchlint.engine import lint_source

        target = document_target(uri, self.documents.get(uri))
        if target is None:
            return None
        settings, config_error = self.settings_for(target)
        if target.on_disk and settings.is_excluded(target.path):
            return LintResult(version, text, [], settings, target.path, config_error)
        if target.path.endswith(".ipynb") and not settings.include_notebooks:
            return LintResult(version, text, [], settings, target.path, config_error)
        try:
            if target.path.endswith(".ipynb"):  # the notebook's JSON, or a client's Python view of it
                from torchlint.notebook import lint_for_editor

                diagnostics = effective_fixes(lint_for_editor(text, target.path, settings), settings)
            else:
                facts = self.facts_for(target.path, text) if target.on_disk else None
                diagnostics = effective_fixes(
                    lint_source(text, target.path, settings, incremental=True, project=facts), settings)
        except Exception as exc:  # a rule bug must not take the server down
            logger.exception("internal error linting %s", uri)
            return LintResult(
                version, text, [], settings, target.path, config_error,
                f"torchlint: internal error on {target.path}: {exc.__class__.__name__}: {exc}",
            )
        return LintResult(version, text, diagnostics, settings, target.path, config_error)

    def fix_all(self, uri: str, text: str) -> Optional[str]:
        target = document_target(uri, self.documents.get(uri))
        if target is None:
            return None
        settings, _ = self.settings_for(target)
        if target.on_disk and settings.is_excluded(target.path):
            return None
        try:
            return fix_all_text(text, target.path, settings)
        except Exception:  # a rule bug: offer no fix-all rather than fail the request
            logger.exception("internal error fixing %s", uri)
            return None


    def lint_notebook(self, uri: str, cells: Tuple[CellSnapshot, ...]) -> NotebookResult:
        """Runs on the lint thread: the notebook's code cells as one program, findings by cell."""
        from torchlint.notebook import lint_cells

        target = notebook_target(uri)
        settings, config_error = self.settings_for(target)
        result = NotebookResult(cells, {}, settings, target.path, config_error)
        if not settings.include_notebooks or (target.on_disk and settings.is_excluded(target.path)):
            return result
        try:
            found = effective_fixes(lint_cells([(c.kind, c.text) for c in cells], target.path, settings), settings)
        except Exception as exc:  # a rule bug must not take the server down
            logger.exception("internal error linting %s", uri)
            result.internal_error = f"torchlint: internal error on {target.path}: {exc.__class__.__name__}: {exc}"
            return result
        first_code = next((c for c in cells if c.kind == "code"), None)
        for d in found:
            cell = cells[d.cell - 1] if d.cell is not None and 1 <= d.cell <= len(cells) else first_code
            if cell is not None:
                result.diagnostics.setdefault(cell.uri, []).append(d)
        return result

    def fix_notebook(self, uri: str, cells: Tuple[CellSnapshot, ...], only_cell: Optional[int]) -> Optional[Dict[int, str]]:
        """Cell number -> fixed source of each cell the safe fixes change (of ``only_cell``'s
        findings, or all); None when there is nothing to do or a fix would break the code."""
        from torchlint.notebook import fix_cells

        target = notebook_target(uri)
        settings, _ = self.settings_for(target)
        if not settings.include_notebooks or (target.on_disk and settings.is_excluded(target.path)):
            return None
        try:
            return fix_cells([(c.kind, c.text) for c in cells], target.path, settings, only_cell=only_cell)
        except Exception:  # a rule bug: offer no fix-all rather than fail the request
            logger.exception("internal error fixing %s", uri)
            return None


def _summary_from_disk(path: str) -> Optional[dict]:
    """Phase 1 for one file on disk, or None (unreadable, not Python, a notebook)."""
    from torchlint.project import summarize_text
    from torchlint.source import UnreadableFile, is_notebook_path, read_source

    if is_notebook_path(path):
        return None
    try:
        return summarize_text(read_source(path, MAX_INDEXED_BYTES).text, path)
    except (UnreadableFile, OSError):
        return None


MAX_INDEXED_BYTES = 10 * 1024 * 1024


# -- the protocol ------------------------------------------------------------------------------

def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    return 2 if ord(ch) > 0xFFFF else 1


def _change_offset(text: str, starts: List[int], line: int, character: int, encoding: str) -> int:
    """The offset of an LSP position in ``text``, clamped as VS Code's documents clamp it: a
    line past the end is the end of the text, a character past the line's end its end (before
    the line ending)."""
    if line < 0:
        return 0
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    units, at = 0, start
    while at < end and units < character:
        units += _units(text[at], encoding)
        at += 1
    return at


def apply_change(text: str, change_range: Any, new_text: str, encoding: str = "utf-16") -> str:
    """``text`` with one incremental change applied; a range out of the text or reversed is
    clamped and ordered (never an exception, never text lost outside the range)."""
    starts = Locator(text).line_starts
    a = _change_offset(text, starts, change_range.start.line, change_range.start.character, encoding)
    b = _change_offset(text, starts, change_range.end.line, change_range.end.character, encoding)
    if b < a:
        a, b = b, a
    return text[:a] + new_text + text[b:]


def _clean_change_params(data: dict) -> bool:
    """Negative or reversed positions in a ``didChange`` as JSON, made valid in place (LSP's
    ``uinteger`` would reject the message, and with it the edit); False when a range is not one."""
    params = data.get("params")
    changes = params.get("contentChanges") if isinstance(params, dict) else None
    if not isinstance(changes, list):
        return False
    for change in changes:
        if not isinstance(change, dict) or "range" not in change:
            continue
        span = change["range"]
        points = [span.get(end) if isinstance(span, dict) else None for end in ("start", "end")]
        if not all(isinstance(p, dict) for p in points):
            return False
        for point in points:
            for key in ("line", "character"):
                value = point.get(key)
                if type(value) is not int:
                    return False
                point[key] = min(max(value, 0), 2 ** 31 - 1)
        if (points[1]["line"], points[1]["character"]) < (points[0]["line"], points[0]["character"]):
            span["start"], span["end"] = points[1], points[0]
        change.pop("rangeLength", None)  # deprecated, and wrong whenever the range was
    return True


def _protocol_class():
    """pygls' protocol with what the LSP asks of a server and pygls 2.1 does not do:

    - a request after ``shutdown`` is answered with ``InvalidRequest`` (pygls drops it silently,
      and the client waits for good);
    - the futures of finished notification handlers are dropped (pygls keeps each one in
      ``_request_futures``, ~1 KB per keystroke for the life of the server);
    - a ``didChange`` whose range is outside the document, reversed or negative is clamped and
      applied (pygls drops a negative one, and the document is out of sync and never linted
      again at that version); one that cannot be read at all re-reads the document from disk;
      in every case the server's own ``didChange`` handler runs, so the version is linted.
    """
    from lsprotocol import types as lsp
    from pygls.exceptions import JsonRpcInvalidRequest
    from pygls.protocol import LanguageServerProtocol
    from pygls.protocol.json_rpc import RPCRequest
    from pygls.protocol.language_server import lsp_method

    class Protocol(LanguageServerProtocol):
        #: called with the URI of a document re-read after an edit that could not be applied
        on_resync: Optional[Any] = None

        def handle_message(self, message):
            if (self._shutdown and isinstance(message, RPCRequest) and getattr(message, "method", None)
                    and message.method != lsp.EXIT):
                self._send_response(message.id, None, JsonRpcInvalidRequest(
                    f"the server is shutting down: {message.method} after shutdown").to_response_error())
                return
            try:
                super().handle_message(message)
            finally:
                futures = self._request_futures
                for key in [key for key, future in futures.items() if future.done()]:
                    futures.pop(key, None)

        def structure_message(self, data):
            if isinstance(data, dict) and data.get("method") == lsp.TEXT_DOCUMENT_DID_CHANGE and "jsonrpc" in data:
                if _clean_change_params(data):
                    try:
                        return super().structure_message(data)
                    except Exception:
                        pass
                resync = self._resync_params(data)
                if resync is not None:
                    return super().structure_message(resync)
            return super().structure_message(data)

        def _resync_params(self, data: dict) -> Optional[dict]:
            """A ``didChange`` that cannot be applied, as the whole text of the file on disk
            (or the text the server has, for a buffer without a file)."""
            params = data.get("params")
            ident = params.get("textDocument") if isinstance(params, dict) else None
            uri = ident.get("uri") if isinstance(ident, dict) else None
            if not isinstance(uri, str) or self._workspace is None:
                return None
            doc = self._workspace.text_documents.get(unquote(uri))
            if doc is None:
                return None
            text = doc.source
            if uri.startswith("file:"):
                from pygls.uris import to_fs_path

                try:
                    with open(to_fs_path(uri) or "", encoding="utf-8", newline="") as f:
                        text = f.read()
                except (OSError, ValueError):
                    pass
            logger.error("an edit to %s could not be applied; re-read the document", uri)
            if self.on_resync is not None:
                self.on_resync(uri)
            version = ident.get("version")
            return {**data, "params": {"textDocument": {"uri": uri, "version": version if type(version) is int else doc.version or 0},
                                       "contentChanges": [{"text": text}]}}

        @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
        def lsp_text_document__did_change(self, params: "lsp.DidChangeTextDocumentParams"):
            doc = self.workspace.text_documents.get(unquote(params.text_document.uri))
            if doc is not None:
                encoding = getattr(self.workspace.position_encoding, "value", None) or "utf-16"
                text = doc.source
                for change in params.content_changes:
                    if isinstance(change, lsp.TextDocumentContentChangePartial):
                        text = apply_change(text, change.range, change.text, encoding)
                    else:
                        text = change.text
                whole = lsp.TextDocumentContentChangeWholeDocument(text=text)
                self.workspace.update_text_document(params.text_document, whole)
            if (user_handler := self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)) is not None:
                yield user_handler, (params,), None

    return Protocol


def _kind_wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """LSP kinds are hierarchical: asking for ``source`` includes ``source.fixAll.torchlint``."""
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def create_server(debounce_ms: int = DEFAULT_DEBOUNCE_MS, preview: Optional[bool] = None):
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    from torchlint import __version__

    notebook_sync = lsp.NotebookDocumentSyncOptions(
        notebook_selector=[lsp.NotebookDocumentFilterWithCells(
            notebook=NOTEBOOK_TYPE, cells=[lsp.NotebookCellLanguage(language) for language in NOTEBOOK_CELL_LANGUAGES],
        )],
        save=True,
    )
    server = LanguageServer(
        "torchlint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
        notebook_document_sync=notebook_sync, protocol_cls=_protocol_class(),
    )
    session = Session(root=os.getcwd(), debounce=debounce_ms / 1000.0, preview=preview)
    server.torchlint_session = session  # for tests and debugging

    def show_once(message: str, kind=lsp.MessageType.Error) -> None:
        if message in session.shown_errors:
            return
        session.shown_errors.add(message)
        server.window_show_message(lsp.ShowMessageParams(type=kind, message=message))

    server.protocol.on_resync = lambda uri: show_once(
        f"torchlint: an edit to {uri} could not be applied (invalid change); the document was re-read",
        lsp.MessageType.Warning)

    def lsp_range(json_range: dict) -> "lsp.Range":
        start, end = json_range["start"], json_range["end"]
        return lsp.Range(lsp.Position(start["line"], start["character"]), lsp.Position(end["line"], end["character"]))

    def to_lsp(d: Diagnostic, pm: PositionMap, version: Optional[int], edit_json=None) -> "lsp.Diagnostic":
        """``edit_json``: how a fix edit travels when it may land in another document (a cell)."""
        data: Dict[str, Any] = {"version": version}
        if d.fix is not None:
            data["fix"] = {
                "applicability": d.fix.applicability,
                "message": d.fix.message,
                "edits": [
                    edit_json(e) if edit_json else {"range": pm.range(e.location, e.end_location), "newText": e.content}
                    for e in d.fix.edits
                ],
            }
        related = None
        if d.related and edit_json is None:  # (a notebook's rows are the joined cells', not a file's)
            from pygls.uris import from_fs_path

            related = [lsp.DiagnosticRelatedInformation(
                location=lsp.Location(uri=from_fs_path(os.path.abspath(r.path)) or r.path, range=lsp.Range(
                    lsp.Position(r.location.row - 1, r.location.column - 1),
                    lsp.Position(r.end_location.row - 1, r.end_location.column - 1))),
                message=r.message) for r in d.related]
        return lsp.Diagnostic(
            range=lsp_range(pm.range(d.location, d.end_location)),
            severity=lsp.DiagnosticSeverity.Error if d.code in ERROR_CODES else lsp.DiagnosticSeverity.Warning,
            code=d.code,
            code_description=lsp.CodeDescription(href=d.url),
            source=SOURCE,
            message=d.message,
            data=data,
            related_information=related,
        )

    def publish(uri: str, result: LintResult) -> None:
        if result.config_error:
            show_once(f"torchlint: {result.config_error} (using default settings until it is fixed)")
        if result.internal_error:
            show_once(result.internal_error)
        pm = PositionMap(result.text, session.encoding)
        session.results[uri] = result
        server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=result.version, diagnostics=[to_lsp(d, pm, result.version) for d in result.diagnostics])
        )

    async def lint_later(uri: str, delay: float, quiet: bool = False) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            doc = server.workspace.get_text_document(uri)
        except Exception:
            return
        version, text = doc.version, doc.source
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(session.executor, session.lint, uri, version, text)
        if result is None or session.pending.get(uri) is not asyncio.current_task():
            return
        session.pending.pop(uri, None)
        if uri not in session.documents or server.workspace.get_text_document(uri).version != version:
            return  # closed or edited meanwhile: a newer lint is on its way
        before = session.results.get(uri)
        if quiet and before is not None and before.version == version and before.diagnostics == result.diagnostics:
            return  # the project index changed nothing here: no second publish of the same findings
        publish(uri, result)

    def schedule(uri: str, delay: float, quiet: bool = False) -> None:
        """Lint ``uri`` after ``delay``; a newer request replaces a waiting one. ``quiet`` (the
        project index changed): publish only findings that differ, and leave a lint already
        waiting (a debounced edit) alone: it reads the new index when it runs."""
        if uri not in session.documents:
            return
        previous = session.pending.get(uri)
        if previous is not None:
            if quiet and not previous.done():
                return
            previous.cancel()
        session.pending[uri] = asyncio.ensure_future(lint_later(uri, delay, quiet))

    def relint_all(quiet: bool = False) -> None:
        for uri in list(session.documents):
            schedule(uri, 0, quiet)
        for uri in list(session.notebooks):
            schedule_notebook(uri, 0, quiet)

    # -- notebook documents (LSP 3.17): pygls keeps the notebook and its cells' text ----------

    def notebook_cells(uri: str) -> Optional[Tuple[CellSnapshot, ...]]:
        notebook = server.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is None:
            return None
        docs = server.workspace.text_documents
        cells = []
        for cell in notebook.cells:
            doc = docs.get(unquote(cell.document))
            if cell.kind == lsp.NotebookCellKind.Markup:
                kind = "markdown"
            elif doc is not None and (doc.language_id or "python") == "python":
                kind = "code"
            else:
                kind = "raw"  # a code cell in another language (or not synced): not Python
            cells.append(CellSnapshot(cell.document, kind, doc.version if doc else None, doc.source if doc else ""))
        return tuple(cells)

    def notebook_of_cell(uri: str) -> Optional[str]:
        notebook = server.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None and notebook.uri in session.notebooks else None

    def open_version(uri: str) -> Optional[int]:
        doc = server.workspace.text_documents.get(unquote(uri))
        return doc.version if doc is not None else None

    def cancel(pending: Dict[str, "asyncio.Future"], uri: str) -> None:
        """Forget the lint waiting for ``uri``, if any (the document is closing)."""
        task = pending.pop(uri, None)
        if task is not None:
            task.cancel()

    def clear(uris) -> None:
        for uri in uris:
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def publish_notebook(uri: str, result: NotebookResult) -> None:
        if result.config_error:
            show_once(f"torchlint: {result.config_error} (using default settings until it is fixed)")
        if result.internal_error:
            show_once(result.internal_error)
        session.notebook_results[uri] = result
        maps: Dict[str, PositionMap] = {}

        def position_map(cell: CellSnapshot) -> PositionMap:
            if cell.uri not in maps:
                maps[cell.uri] = PositionMap(cell.text, session.encoding)
            return maps[cell.uri]

        def edit_json(home: CellSnapshot):
            def convert(e) -> dict:  # a fix edit (diagnostics.Edit) naming its cell
                cell = result.cells[e.cell - 1] if e.cell is not None and 1 <= e.cell <= len(result.cells) else home
                return {"uri": cell.uri, "version": cell.version,
                        "range": position_map(cell).range(e.location, e.end_location), "newText": e.content}
            return convert

        before = session.notebooks.get(uri, set())
        with_findings: Set[str] = set()
        for cell in result.cells:
            found = result.diagnostics.get(cell.uri, [])
            if not found and cell.uri not in before:
                continue
            if found:
                with_findings.add(cell.uri)
            pm = position_map(cell)
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                uri=cell.uri, version=cell.version, diagnostics=[to_lsp(d, pm, cell.version, edit_json(cell)) for d in found],
            ))
        clear(before - {c.uri for c in result.cells})  # cells removed meanwhile
        session.notebooks[uri] = with_findings

    async def lint_notebook_later(uri: str, delay: float, quiet: bool = False) -> None:
        if delay:
            await asyncio.sleep(delay)
        cells = notebook_cells(uri)
        if cells is None:
            return
        result = await asyncio.get_running_loop().run_in_executor(session.executor, session.lint_notebook, uri, cells)
        if session.notebook_pending.get(uri) is not asyncio.current_task():
            return
        session.notebook_pending.pop(uri, None)
        now = notebook_cells(uri)
        if uri not in session.notebooks or now is None or [(c.uri, c.kind, c.version) for c in now] != [
            (c.uri, c.kind, c.version) for c in cells
        ]:
            return  # closed or edited meanwhile: a newer lint is on its way
        before = session.notebook_results.get(uri)
        if (quiet and before is not None and before.diagnostics == result.diagnostics
                and [(c.uri, c.version) for c in before.cells] == [(c.uri, c.version) for c in result.cells]):
            return  # the project index changed nothing here: no second publish of the same findings
        publish_notebook(uri, result)

    def schedule_notebook(uri: str, delay: float, quiet: bool = False) -> None:
        if uri not in session.notebooks:
            return
        previous = session.notebook_pending.get(uri)
        if previous is not None:
            if quiet and not previous.done():
                return  # a waiting lint reads the new project index when it runs
            previous.cancel()
        session.notebook_pending[uri] = asyncio.ensure_future(lint_notebook_later(uri, delay, quiet))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(params: lsp.DidOpenNotebookDocumentParams) -> None:
        session.notebooks.setdefault(params.notebook_document.uri, set())
        schedule_notebook(params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(params: lsp.DidChangeNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        cells = params.change.cells
        if uri not in session.notebooks or cells is None:
            return  # notebook metadata only
        structure = cells.structure
        if structure and structure.did_close:
            published = session.notebooks[uri]
            closed = {c.uri for c in structure.did_close} & published
            published -= closed
            clear(sorted(closed))
        if structure or cells.text_content:  # not for outputs, execution summaries, cell metadata
            schedule_notebook(uri, session.debounce)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(params: lsp.DidSaveNotebookDocumentParams) -> None:
        schedule_notebook(params.notebook_document.uri, 0)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(params: lsp.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        cancel(session.notebook_pending, uri)
        session.notebook_results.pop(uri, None)
        published = session.notebooks.pop(uri, None)
        if published is not None:  # every cell, so that no finding outlives the notebook
            clear(sorted(published | {c.uri for c in params.cell_text_documents}))

    def is_pyproject(uri: str) -> bool:
        """A config or dependency file (the declared torch version), or a file one includes."""
        from torchlint.dependencies import is_dependency_file

        if is_dependency_file(uri) or uri.rsplit("/", 1)[-1] in CONFIG_FILE_NAMES:
            return True
        included = getattr(session.resolver, "dependency_files", ())
        if not included or not uri.startswith("file:"):
            return False
        from pygls.uris import to_fs_path

        return (to_fs_path(uri) or "") in included

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        root = server.workspace.root_path
        if not root and params.workspace_folders:
            from pygls.uris import to_fs_path

            root = to_fs_path(params.workspace_folders[0].uri)
        session.root = root or os.getcwd()
        encoding = server.workspace.position_encoding or "utf-16"
        session.encoding = getattr(encoding, "value", encoding)
        session.reload()

    def dependency_globs() -> Sequence[str]:
        from torchlint.dependencies import WATCHED_GLOBS

        return WATCHED_GLOBS + tuple(f"**/{name}" for name in CONFIG_FILE_NAMES)

    @server.feature(lsp.INITIALIZED)
    def initialized(params: lsp.InitializedParams) -> None:
        caps = server.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched and watched.dynamic_registration:
            options = lsp.DidChangeWatchedFilesRegistrationOptions(
                watchers=[lsp.FileSystemWatcher(glob_pattern=glob) for glob in dependency_globs()]
            )
            server.client_register_capability(
                lsp.RegistrationParams([lsp.Registration("torchlint-pyproject", lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, options)])
            )
        if session.config_error:
            show_once(f"torchlint: {session.config_error} (using default settings until it is fixed)")
        asyncio.ensure_future(index_workspace())

    async def index_workspace() -> None:
        """Build the project index off the event loop; then re-lint what is open with it."""
        await asyncio.get_running_loop().run_in_executor(None, session.build_project)
        relint_all(quiet=True)

    async def refresh_after_save(path: str) -> None:
        changed = await asyncio.get_running_loop().run_in_executor(None, session.refresh_project, path)
        from pygls.uris import to_fs_path

        for uri in list(session.documents):  # the open files whose findings depend on the change
            if os.path.abspath(to_fs_path(uri) or "") in changed:
                schedule(uri, 0, quiet=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if document_target(doc.uri, doc.language_id) is None:
            return
        session.documents[doc.uri] = doc.language_id
        schedule(doc.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        schedule(params.text_document.uri, session.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if is_pyproject(uri):
            session.reload()
            relint_all()
        else:
            schedule(uri, 0)
            from pygls.uris import to_fs_path

            path = to_fs_path(uri) if uri.startswith("file:") else None
            if path and path.endswith(".py"):
                asyncio.ensure_future(refresh_after_save(path))

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        cancel(session.pending, uri)
        session.results.pop(uri, None)
        if uri.startswith("file:"):
            from pygls.uris import to_fs_path

            session.buffer_facts.pop(os.path.abspath(to_fs_path(uri) or ""), None)
        if session.documents.pop(uri, "absent") != "absent":
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(params: lsp.DidChangeWatchedFilesParams) -> None:
        if any(is_pyproject(change.uri) for change in params.changes):
            session.reload()
            relint_all()

    def workspace_edit(uri: str, version: Optional[int], edits: List["lsp.TextEdit"]) -> "lsp.WorkspaceEdit":
        caps = server.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            return lsp.WorkspaceEdit(document_changes=[
                lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits)
            ])
        return lsp.WorkspaceEdit(changes={uri: edits})

    def workspace_edits(docs: List[Tuple[str, Optional[int], List["lsp.TextEdit"]]]) -> "lsp.WorkspaceEdit":
        """One edit over several documents (the cells of a notebook)."""
        if len(docs) == 1:
            return workspace_edit(*docs[0])
        caps = server.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            return lsp.WorkspaceEdit(document_changes=[
                lsp.TextDocumentEdit(lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits)
                for uri, version, edits in docs
            ])
        return lsp.WorkspaceEdit(changes={uri: edits for uri, _, edits in docs})

    def quick_fixes(uri: str, version: Optional[int], diagnostics: Sequence["lsp.Diagnostic"]) -> List["lsp.CodeAction"]:
        actions = []
        for diagnostic in diagnostics:
            if diagnostic.source != SOURCE or not isinstance(diagnostic.data, dict):
                continue
            fix = diagnostic.data.get("fix")
            if not fix or diagnostic.data.get("version") != version:
                continue  # no fix, or found in an older text: the edits would land in the wrong place
            # A notebook cell's fix may also edit another cell (an added import): each such edit
            # names its cell and that cell's version, which must still be current.
            docs: Dict[str, Tuple[Optional[int], List[lsp.TextEdit]]] = {}
            for e in fix["edits"]:
                target, target_version = e.get("uri", uri), e.get("version", version)
                docs.setdefault(target, (target_version, []))[1].append(lsp.TextEdit(lsp_range(e["range"]), e["newText"]))
            if any(target != uri and open_version(target) != v for target, (v, _) in docs.items()):
                continue
            unsafe = fix["applicability"] != SAFE
            actions.append(lsp.CodeAction(
                title=f"{fix['message']} (unsafe)" if unsafe else fix["message"],
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=not unsafe,
                edit=workspace_edits([(target, v, edits) for target, (v, edits) in docs.items()]),
            ))
        return actions

    def findings_at(uri: str, version: Optional[int]) -> Optional[Tuple[str, List[Diagnostic]]]:
        """(the text, the findings) of the last lint of ``uri`` (a file or a notebook's cell, its
        findings in the cell's rows) when it is of ``version``; else None."""
        result = session.results.get(uri)
        if result is not None:
            return (result.text, result.diagnostics) if result.version == version else None
        notebook_uri = notebook_of_cell(uri)
        nb = session.notebook_results.get(notebook_uri) if notebook_uri is not None else None
        cell = next((c for c in nb.cells if c.uri == uri), None) if nb is not None else None
        if cell is None or cell.version != version:
            return None
        return cell.text, nb.diagnostics.get(uri, [])

    def ignore_actions(uri: str, version: Optional[int], diagnostics: Sequence["lsp.Diagnostic"]) -> List["lsp.CodeAction"]:
        """"Ignore this line": ``# noqa: TLxxx`` at the end of the finding's line (merged into a
        ``# noqa`` the line has; on the statement's last line when the first ends inside a
        string or after a backslash), as ``--add-noqa`` writes it."""
        import dataclasses

        from torchlint.suppression import add_noqa

        found = findings_at(uri, version)
        if found is None:
            return []
        text, findings = found
        pm = PositionMap(text, session.encoding)
        actions = []
        for diagnostic in diagnostics:
            if diagnostic.source != SOURCE or not isinstance(diagnostic.data, dict) or diagnostic.data.get("version") != version:
                continue
            wanted = lsp_range(json_range(diagnostic.range))
            match = next((d for d in findings if d.code == diagnostic.code
                          and lsp_range(pm.range(d.location, d.end_location)) == wanted), None)
            if match is None:
                continue
            new, added = add_noqa(text, [dataclasses.replace(match, cell=None)])
            if not added:
                continue
            start, end, content = minimal_replacement(text, new)
            edit = lsp.TextEdit(lsp.Range(lsp.Position(*pm.from_offset(start)), lsp.Position(*pm.from_offset(end))), content)
            actions.append(lsp.CodeAction(
                title=f"Ignore {match.code} on this line (# noqa: {match.code})", kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[diagnostic], edit=workspace_edit(uri, version, [edit]),
            ))
        return actions

    def json_range(span: "lsp.Range") -> dict:
        return {"start": {"line": span.start.line, "character": span.start.character},
                "end": {"line": span.end.line, "character": span.end.character}}

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(params: lsp.HoverParams) -> Optional[lsp.Hover]:
        """The findings under the cursor: message, why (the rule's hint), where the reason is,
        and the rule's page."""
        uri = params.text_document.uri
        found = findings_at(uri, open_version(uri))
        if found is None:
            return None
        text, findings = found
        pm = PositionMap(text, session.encoding)
        at = (params.position.line, params.position.character)
        parts = []
        for d in findings:
            span = pm.range(d.location, d.end_location)
            start, end = span["start"], span["end"]
            if not ((start["line"], start["character"]) <= at <= (end["line"], end["character"])):
                continue
            lines = [f"**{d.code}** `{d.name}`: {d.message}"]
            if d.hint:
                lines.append(d.hint)
            if notebook_of_cell(uri) is None:
                from pygls.uris import from_fs_path

                for r in d.related:
                    target = from_fs_path(os.path.abspath(r.path)) or r.path
                    lines.append(f"Why: {r.message} ([{os.path.basename(r.path)}:{r.location.row}]({target}#L{r.location.row}))")
            lines.append(f"[{d.code} documentation]({d.url})")
            parts.append("\n\n".join(lines))
        if not parts:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))

    def has_safe_fix(uri: str, version: Optional[int]) -> bool:
        result = session.results.get(uri)
        return bool(result and result.version == version and any(
            d.fix is not None and d.fix.applicability == SAFE for d in result.diagnostics
        ))

    async def fix_all_action(uri: str) -> Optional["lsp.CodeAction"]:
        doc = server.workspace.get_text_document(uri)
        version, text = doc.version, doc.source
        loop = asyncio.get_running_loop()
        fixed = await loop.run_in_executor(session.executor, session.fix_all, uri, text)
        if fixed is None or fixed == text:
            return None
        start, end, content = minimal_replacement(text, fixed)
        pm = PositionMap(text, session.encoding)
        edit = lsp.TextEdit(lsp.Range(lsp.Position(*pm.from_offset(start)), lsp.Position(*pm.from_offset(end))), content)
        return lsp.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, edit=workspace_edit(uri, version, [edit]))

    def cell_has_safe_fix(notebook_uri: str, uri: str, version: Optional[int]) -> bool:
        result = session.notebook_results.get(notebook_uri)
        if result is None or not any(c.uri == uri and c.version == version for c in result.cells):
            return False
        return any(d.fix is not None and d.fix.applicability == SAFE for d in result.diagnostics.get(uri, ()))

    async def notebook_fix_all_action(uri: str, notebook_uri: str, whole: bool) -> Optional["lsp.CodeAction"]:
        """Fix-all for the findings of the cell ``uri`` (``source.fixAll``) or of the whole
        notebook (``notebook.source.fixAll``): one versioned edit per changed cell."""
        cells = notebook_cells(notebook_uri)
        if cells is None:
            return None
        number = next((n for n, c in enumerate(cells, 1) if c.uri == uri), None)
        if number is None:
            return None
        fixed = await asyncio.get_running_loop().run_in_executor(
            session.executor, session.fix_notebook, notebook_uri, cells, None if whole else number)
        if not fixed:
            return None
        docs = []
        for n, new_text in sorted(fixed.items()):
            cell = cells[n - 1]
            start, end, content = minimal_replacement(cell.text, new_text)
            pm = PositionMap(cell.text, session.encoding)
            span = lsp.Range(lsp.Position(*pm.from_offset(start)), lsp.Position(*pm.from_offset(end)))
            docs.append((cell.uri, cell.version, [lsp.TextEdit(span, content)]))
        if whole:
            return lsp.CodeAction(title=NOTEBOOK_FIX_ALL_TITLE, kind=NOTEBOOK_FIX_ALL_KIND, edit=workspace_edits(docs))
        return lsp.CodeAction(title=CELL_FIX_ALL_TITLE, kind=FIX_ALL_KIND, edit=workspace_edits(docs))

    async def cell_code_actions(uri: str, notebook_uri: str, params: "lsp.CodeActionParams") -> Optional[List["lsp.CodeAction"]]:
        version = open_version(uri)
        only = params.context.only
        actions: List[lsp.CodeAction] = []
        if _kind_wanted(lsp.CodeActionKind.QuickFix, only):
            actions.extend(quick_fixes(uri, version, params.context.diagnostics))
            actions.extend(ignore_actions(uri, version, params.context.diagnostics))
        wanted = []
        if (only and _kind_wanted(FIX_ALL_KIND, only)) or (not only and cell_has_safe_fix(notebook_uri, uri, version)):
            wanted.append((FIX_ALL_KIND, CELL_FIX_ALL_TITLE, False))
        if only and _kind_wanted(NOTEBOOK_FIX_ALL_KIND, only):
            wanted.append((NOTEBOOK_FIX_ALL_KIND, NOTEBOOK_FIX_ALL_TITLE, True))
        for kind, title, whole in wanted:
            if lazy_edits():
                actions.append(lsp.CodeAction(title=title, kind=kind, data={"uri": uri, "version": version}))
            else:
                action = await notebook_fix_all_action(uri, notebook_uri, whole)
                if action is not None:
                    actions.append(action)
        return actions or None

    def lazy_edits() -> bool:
        caps = server.client_capabilities.text_document
        support = caps and caps.code_action and caps.code_action.resolve_support
        return bool(support and "edit" in support.properties)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(
            code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND], resolve_provider=True,
        ),
    )
    async def code_action(params: lsp.CodeActionParams) -> Optional[List[lsp.CodeAction]]:
        uri = params.text_document.uri
        notebook_uri = notebook_of_cell(uri)
        if notebook_uri is not None:
            return await cell_code_actions(uri, notebook_uri, params)
        if uri not in session.documents:
            return None
        version = server.workspace.get_text_document(uri).version
        only = params.context.only
        actions: List[lsp.CodeAction] = []
        if _kind_wanted(lsp.CodeActionKind.QuickFix, only):
            actions.extend(quick_fixes(uri, version, params.context.diagnostics))
            actions.extend(ignore_actions(uri, version, params.context.diagnostics))
        # Unasked (the light bulb), offer fix-all only when there is something safe to fix.
        if (only and _kind_wanted(FIX_ALL_KIND, only)) or (not only and has_safe_fix(uri, version)):
            if lazy_edits():
                actions.append(lsp.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, data={"uri": uri, "version": version}))
            else:
                action = await fix_all_action(uri)
                if action is not None:
                    actions.append(action)
        return actions or None

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def code_action_resolve(action: lsp.CodeAction) -> lsp.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        notebook_uri = notebook_of_cell(uri) if isinstance(uri, str) else None
        if notebook_uri is not None and action.kind in (FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND):
            resolved = await notebook_fix_all_action(uri, notebook_uri, action.kind == NOTEBOOK_FIX_ALL_KIND)
            action.edit = resolved.edit if resolved else lsp.WorkspaceEdit(changes={uri: []})
            return action
        if action.kind != FIX_ALL_KIND or uri not in session.documents:
            return action
        resolved = await fix_all_action(uri)
        action.edit = resolved.edit if resolved else lsp.WorkspaceEdit(changes={uri: []})
        return action

    @server.feature(lsp.EXIT)
    def exit_(params: Any = None) -> None:
        # pygls ends the loop with SystemExit(0 or 1) and then swallows it: ``serve_stdio``
        # exits with this code (LSP: 1 when ``shutdown`` did not come first)
        session.exit_code = 0 if server.protocol._shutdown else 1

    @server.feature(lsp.SHUTDOWN)
    def shutdown(params: Any = None) -> None:
        for task in list(session.pending.values()) + list(session.notebook_pending.values()):
            task.cancel()
        session.pending.clear()
        session.notebook_pending.clear()
        session.executor.shutdown(wait=False, cancel_futures=True)

    return server


class FramedReader:
    """stdin for pygls, one well-formed LSP message at a time.

    pygls reads headers with ``readline`` and the body with ``read(Content-Length)``; a header
    it cannot parse makes it skip lines, and since a body ends without a newline every later
    message is glued to the one before and lost: the server goes silent for good. Here each
    header block is checked first (``Content-Length`` digits only, at most ``MAX_BODY``) and
    a body must look like JSON; after a malformed message the reader logs one line and resyncs
    at the next line that ends with a valid ``Content-Length`` header. At the end of input it
    returns b"", and pygls stops.

    A ``Content-Length`` too long would otherwise wait for bytes the client never sends (it is
    waiting for the answer): when the stream is a pipe or a file (it has a descriptor) and no
    byte has come for ``STALL_S`` seconds in the middle of a body, the bytes read so far are
    taken for what they are: a complete JSON message at their start is that message, and a
    ``Content-Length`` header after it is where the next one starts."""

    MAX_BODY = 64 * 1024 * 1024
    STALL_S = 1.0
    _HEADER = re.compile(rb"Content-Length:[ \t]*(\d{1,12})[ \t]*\r?\n\Z", re.IGNORECASE)

    def __init__(self, stream, stall_s: Optional[float] = None) -> None:
        self._stream = stream
        self._buffer = bytearray()  # bytes read from the stream but not yet parsed
        self._pending = b""  # the canonical message being handed to pygls
        self._eof = False
        self.malformed = 0
        self.stall_s = self.STALL_S if stall_s is None else stall_s
        self._fd: Optional[int] = None
        if os.name != "nt":  # select() on a pipe: not on Windows
            try:
                self._fd = stream.fileno()
            except (AttributeError, OSError, ValueError):  # io.BytesIO and other in-memory streams
                self._fd = None

    # -- what pygls calls --
    def readline(self) -> bytes:
        if not self._pending:
            self._pending = self._next_message()
        line, sep, rest = self._pending.partition(b"\n")
        self._pending = rest
        return line + sep

    def read(self, n: int) -> bytes:
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    # -- the stream --
    def _fill(self, want: int = 65536, timeout: Optional[float] = None) -> Optional[bool]:
        """Read more bytes into the buffer: True, False at the end of input, None when nothing
        came within ``timeout`` seconds."""
        if self._eof:
            return False
        want = max(65536, min(want, 1 << 20))
        if self._fd is None:
            read1 = getattr(self._stream, "read1", None)
            chunk = read1(want) if read1 is not None else self._stream.read(want)
        else:
            if timeout is not None:
                import select

                ready, _, _ = select.select([self._fd], [], [], timeout)
                if not ready:
                    return None
            chunk = os.read(self._fd, want)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _line(self) -> bytes:
        searched = 0
        while True:
            at = self._buffer.find(b"\n", searched)
            if at >= 0 or len(self._buffer) > self.MAX_BODY:
                end = at + 1 if at >= 0 else len(self._buffer)
                line = bytes(self._buffer[:end])
                del self._buffer[:end]
                return line
            searched = len(self._buffer)
            if not self._fill():
                line = bytes(self._buffer)
                self._buffer.clear()
                return line

    def _body(self, n: int) -> Optional[bytes]:
        """``n`` bytes (fewer at the end of input), or None when the stream stalled before
        them (the bytes read so far stay in the buffer)."""
        while len(self._buffer) < n:
            got = self._fill(n - len(self._buffer), self.stall_s if self._fd is not None else None)
            if got is None:
                return None
            if not got:
                break
        body = bytes(self._buffer[:n])
        del self._buffer[:n]
        return body

    def _stalled(self) -> Optional[bytes]:
        """After a stall in a body: the JSON message at the start of the bytes read, with what
        follows it left to parse; else, with a ``Content-Length`` header among them, b"" and the
        buffer resynced there; else None (keep waiting)."""
        data = bytes(self._buffer)
        text = data.decode("utf-8", "surrogateescape")
        try:
            _, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
        except ValueError:
            end = 0
        if end and text[:end].rstrip()[-1:] in ("}", "]"):
            size = len(text[:end].encode("utf-8", "surrogateescape"))
            del self._buffer[:size]
            self._bad("Content-Length longer than the message; the message is used as it is")
            return data[:size]
        at = data.find(b"Content-Length:", 1)
        if at >= 0:
            del self._buffer[:at]
            self._bad("Content-Length longer than the message")
            return b""
        return None

    def _bad(self, why: str) -> None:
        self.malformed += 1
        logger.error("malformed message from the client (%s); skipping to the next Content-Length header", why)

    def _next_message(self) -> bytes:
        length: Optional[int] = None
        while True:
            line = self._line()
            if not line:
                return b""  # end of input: pygls stops, the server exits
            match = self._HEADER.search(line)
            if match and (match.start() == 0 or length is None):
                if match.start() != 0:  # a header glued to the end of a broken body: resync here
                    self._bad("header not at the start of a line")
                size = int(match.group(1))
                length = size if size <= self.MAX_BODY else None
                if length is None:
                    self._bad(f"Content-Length {size} over {self.MAX_BODY}")
                continue
            if line.strip():  # another header (Content-Type) or garbage
                if length is None or b":" not in line:
                    self._bad(f"unexpected header line {line[:40]!r}")
                    length = None
                continue
            if length is None:  # a blank line without a valid Content-Length before it
                self._bad("no valid Content-Length")
                continue
            body = self._body(length)
            while body is None:  # the stream stalled inside the body
                recovered = self._stalled()
                if recovered is not None:
                    break
                body = self._body(length)
            if body is None:
                if recovered:
                    return b"Content-Length: %d\r\n\r\n%s" % (len(recovered), recovered)
                length = None
                continue
            if len(body) < length:
                return b""
            if not body.lstrip()[:1] in (b"{", b"[") or body.rstrip()[-1:] not in (b"}", b"]"):
                self._bad("body is not a JSON message")
                at = body.find(b"Content-Length:")  # the length was too long: the next message is in it
                if at >= 0:
                    self._buffer[:0] = body[at:]
                length = None
                continue
            return b"Content-Length: %d\r\n\r\n%s" % (length, body)


def serve_stdio(debounce_ms: int = DEFAULT_DEBOUNCE_MS, preview: Optional[bool] = None) -> None:
    """Run the server over stdin/stdout until the client exits (``torchlint server``)."""
    server = create_server(debounce_ms, preview)
    # The workers' collector policy (runner.QUIET_GC_THRESHOLD) for the server's process: every
    # lint builds ~10^5 acyclic libcst nodes that refcounting frees; with the default thresholds
    # the cyclic collector re-scans them and the parser's cached statement trees on every edit.
    import gc

    from torchlint import _cst
    from torchlint.engine import lint_source  # noqa: F401  (the engine and rules, before freezing)
    from torchlint.rules import all_rules
    from torchlint.runner import QUIET_GC_THRESHOLD

    all_rules()
    _cst.load()  # libcst too (imported on first use elsewhere): every lint here parses with it
    gc.freeze()
    gc.set_threshold(*QUIET_GC_THRESHOLD)
    server.start_io(FramedReader(sys.stdin.buffer), sys.stdout.buffer)
    if server.torchlint_session.exit_code:  # `exit` without `shutdown`
        raise SystemExit(server.torchlint_session.exit_code)
