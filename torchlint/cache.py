"""Stage 9 of the pipeline: the results cache, so that an unchanged tree lints instantly.

Layout (like ruff's ``.ruff_cache``)::

    .torchlint_cache/
        CACHEDIR.TAG  .gitignore
        v1/<key>.json      one index per (torchlint code, settings fingerprint)
        v1/summaries/<key>.json   project summaries (phase 1) per torchlint code
        v1/summaries/<key>.project.json   the last run's project facts, stats, summary hashes

An index maps each file's absolute path to ``[size, mtime_ns, content hash, racy, findings,
checksum]``; an entry whose checksum or shape is wrong is recomputed, never trusted.
A run loads each index it needs once, ``stat``s every file, and re-reads and re-hashes a file
only when its size or mtime changed (or when its mtime was too recent to trust, as git does for
"racily clean" entries). Findings are stored after ``noqa`` and ``per-file-ignores`` filtering,
without the path (a file can be named differently from another working directory). The text of
a file with findings is not stored: the reporter re-reads it for code frames.

The key covers the torchlint version, the size and mtime of every module of the installed
torchlint package (so a new or edited rule invalidates the cache, even in a development
checkout) and ``Settings.fingerprint`` (enabled codes, per-file-ignores, target torch version,
maximum file size, root).

A project summary is also keyed on the file's package layout (how many folders above it hold
an ``__init__.py``): the module name it records depends on it, not on the file's bytes. The
project snapshot carries a checksum of its bytes; a damaged or edited one is rebuilt.

Concurrent runs are safe: indexes are replaced atomically, the last writer wins, and an entry
lost that way is recomputed next time. A corrupt index or entry is ignored and rewritten.

The cache never destroys what it did not write: it uses a folder it creates, an empty one, or
one holding the ``CACHEDIR.TAG`` torchlint writes; any other folder (``--cache-dir .``) is left
alone with a one-line warning and the run is not cached. It writes ``.gitignore`` only into a
folder it creates, removes only files named as its indexes, and never follows a symbolic link
inside the cache (``v1``, ``v1/summaries``): a link there, as another user of a shared cache
could plant, turns caching off with a warning.

This module must stay light: a fully warm run imports neither libcst nor the rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from torchlint import __version__
from torchlint.diagnostics import Diagnostic
from torchlint.installation import code_signature

CACHE_DIR_NAME = ".torchlint_cache"
ENV_VAR = "TORCHLINT_CACHE_DIR"
FORMAT = "v1"
# An mtime this close to the moment it was recorded may hide a later same-size write within
# the filesystem's timestamp granularity; such entries are re-hashed on the next run.
RACY_NS = 2_000_000_000

_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
#: The names of the files torchlint writes in ``v1`` and ``v1/summaries`` (an index key is a
#: 12-byte blake2b digest); nothing else there is ever removed.
_INDEX_NAME = re.compile(r"[0-9a-f]{24}(?:\.project)?\.json\Z")
_PROJECT_HEADER = b"torchlint-project "


def is_torchlint_cache(directory: str) -> bool:
    """Does ``directory`` hold the ``CACHEDIR.TAG`` torchlint writes (a regular file, not a link,
    with torchlint's text)? Only such a folder is ever pruned or removed (``torchlint clean``)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.path.join(directory, "CACHEDIR.TAG"), flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
    return data.startswith(_CACHEDIR_TAG.encode()[:43]) and b"created by torchlint" in data


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(data: bytes, path: str) -> str:
    """``content_hash`` of a file's bytes; for a notebook, of what linting reads (its language,
    cell types, code cells' source), so re-running it (new outputs, counts) keeps its entry."""
    from torchlint.source import is_notebook_path

    if is_notebook_path(path):
        from torchlint.notebook import code_digest

        digest = code_digest(data.decode("utf-8-sig", "replace"))
        if digest is not None:
            return "nb-" + digest
    return content_hash(data)


def resolve_cache_dir(settings, flag: Optional[str] = None) -> str:
    """--cache-dir, then $TORCHLINT_CACHE_DIR, then the config's ``cache-dir`` (relative to the
    config's folder), then ``.torchlint_cache`` in the project root (config folder or cwd)."""
    if flag:
        return os.path.abspath(flag)
    env = os.environ.get(ENV_VAR)
    if env:
        return os.path.abspath(env)
    root = getattr(settings, "root", ".") or "."
    configured = getattr(settings, "cache_dir", None)
    if configured:
        return os.path.abspath(os.path.join(root, os.path.expanduser(configured)))
    return os.path.abspath(os.path.join(root, CACHE_DIR_NAME))


_ENCODE = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def entry_checksum(key: str, size: int, mtime_ns: int, digest: str, racy: bool, findings: list) -> str:
    """Integrity check over one entry and the path it belongs to: an entry damaged on disk,
    edited by hand or moved to another file's key is recomputed, never trusted."""
    text = f"{key}\0{size}:{mtime_ns}:{digest}:{racy:d}:{_ENCODE(findings) if findings else ''}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


class Entry:
    """What the cache knows of one file; ``findings`` stays JSON until a hit needs it. Stored as
    ``[size, mtime_ns, digest, racy, findings, checksum]``."""

    __slots__ = ("size", "mtime_ns", "digest", "racy", "findings", "checksum")

    def __init__(self, size: int, mtime_ns: int, digest: str, racy: bool, findings: list,
                 checksum: Optional[str] = None) -> None:
        self.size, self.mtime_ns, self.digest, self.racy, self.findings = size, mtime_ns, digest, racy, findings
        #: the checksum verified on load, while the entry is unchanged (``touch`` clears it)
        self.checksum = checksum

    def touch(self, size: int, mtime_ns: int, racy: bool) -> None:
        self.size, self.mtime_ns, self.racy, self.checksum = size, mtime_ns, racy, None

    def to_json(self, key: str) -> list:
        checksum = self.checksum or entry_checksum(key, self.size, self.mtime_ns, self.digest, self.racy, self.findings)
        return [self.size, self.mtime_ns, self.digest, self.racy, self.findings, checksum]

    @classmethod
    def from_json(cls, row, key: str) -> Optional["Entry"]:
        """The entry stored under ``key``, or None if it is malformed or fails its checksum."""
        try:
            size, mtime_ns, digest, racy, findings, checksum = row
        except (TypeError, ValueError):
            return None
        if not (
            type(size) is int and type(mtime_ns) is int and isinstance(digest, str)
            and type(racy) is bool and isinstance(findings, list) and isinstance(checksum, str)
        ):
            return None
        try:
            if checksum != entry_checksum(key, size, mtime_ns, digest, racy, findings):
                return None
        except (TypeError, ValueError, UnicodeError, RecursionError):
            return None
        return cls(size, mtime_ns, digest, racy, findings, checksum)


def _finding_to_json(d: Diagnostic) -> dict:
    data = d.to_json()
    del data["filename"], data["url"]
    if d.hint is not None:  # the full format's hint: not in the JSON output, kept here
        data["hint"] = d.hint
    return data


def _is_location(value) -> bool:
    return (
        isinstance(value, dict) and len(value) == 2
        and type(value.get("row")) is int and type(value.get("column")) is int
        and value["row"] >= 1 and value["column"] >= 1
    )


def _related_rows(row: dict) -> list:
    """A stored finding's ``related`` list ([None] when it is not a list: not a finding)."""
    related = row.get("related", [])
    return related if isinstance(related, list) else [None]


def _is_finding(row) -> bool:
    """A stored finding has exactly the shape ``_finding_to_json`` writes (a mistyped one would
    crash a reporter in every later run)."""
    if not (
        isinstance(row, dict) and isinstance(row.get("code"), str) and isinstance(row.get("name"), str)
        and isinstance(row.get("message"), str) and _is_location(row.get("location"))
        and _is_location(row.get("end_location"))
        and (row.get("noqa_row") is None or type(row.get("noqa_row")) is int)
        and (row.get("hint") is None or isinstance(row.get("hint"), str))
        and all(isinstance(r, dict) and isinstance(r.get("filename"), str) and isinstance(r.get("message"), str)
                and _is_location(r.get("location")) and _is_location(r.get("end_location"))
                for r in _related_rows(row))
    ):
        return False
    fix = row.get("fix")
    if fix is None:
        return True
    return (
        isinstance(fix, dict) and fix.get("applicability") in ("safe", "unsafe")
        and isinstance(fix.get("message"), str) and isinstance(fix.get("edits"), list)
        and all(
            isinstance(e, dict) and isinstance(e.get("content"), str)
            and _is_location(e.get("location")) and _is_location(e.get("end_location"))
            for e in fix["edits"]
        )
    )


def findings_from_json(rows: list, path: str) -> Optional[List[Diagnostic]]:
    """The stored findings of one file, re-attached to ``path``; None if the entry is corrupt."""
    if not all(_is_finding(row) for row in rows):
        return None
    try:
        return [Diagnostic.from_json(dict(row, filename=path)) for row in rows]
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


#: An index larger than this is not read (a symlink to a huge file, a damaged cache).
MAX_INDEX_BYTES = 512 * 1024 * 1024


class Index:
    """One index file: every file checked under one settings fingerprint."""

    def __init__(self, path: str, load: bool = True) -> None:
        self.path = path
        self.entries: Dict[str, Entry] = {}
        self.seen: set = set()
        self.dirty = False
        from torchlint.source import UnreadableFile, read_bytes

        try:
            if not load or not os.path.lexists(path):
                return
            raw, _ = read_bytes(path, MAX_INDEX_BYTES)  # a FIFO or device here is ignored, not read
            data = json.loads(raw)
            rows = data["files"] if data.get("format") == FORMAT else {}
            for key, row in rows.items():
                entry = Entry.from_json(row, key)
                if entry is None:
                    self.dirty = True  # damaged or forged: recomputed, never trusted
                else:
                    self.entries[key] = entry
        except (UnreadableFile, OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            self.entries, self.dirty = {}, True  # corrupt: start over, rewrite on save

    def prune(self) -> None:
        """Forget files that no longer exist (those this run did not see are checked)."""
        for key in [k for k in self.entries if k not in self.seen]:
            if not os.path.exists(key):
                del self.entries[key]
                self.dirty = True

    def save(self) -> None:
        from torchlint.atomic import atomic_write_bytes

        data = {"format": FORMAT, "version": __version__,
                "files": {k: e.to_json(k) for k, e in sorted(self.entries.items())}}
        atomic_write_bytes(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
        self.dirty = False


class ProjectSnapshot(NamedTuple):
    """``Cache.lookup_project``'s answer."""

    facts: Dict[str, list]  # abspath -> the file's FileFacts as stored
    stats: Dict[str, os.stat_result]  # path as given -> its stat now
    digests: Dict[str, str]  # abspath -> its summary's hash when the snapshot was taken
    changed: List[str]  # paths whose summaries must be made again
    resized: frozenset = frozenset()  # those of ``changed`` whose size differs: edited for sure


class Cache:
    """The results cache of one run. ``lookup`` before linting a file, ``store`` after,
    ``save`` at the end. Never raises for a bad or unwritable cache: it just does not help."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._indexes: Dict[str, Index] = {}
        self._summary_digests: Dict[str, str] = {}  # abspath -> hash of its compact summary JSON
        self._pending_summaries: List[tuple] = []  # see store_summary(persist=False)
        self._layouts: Dict[str, int] = {}  # folder -> how many folders from it up are packages
        self._refused: Optional[bool] = None  # see usable()

    def usable(self) -> bool:
        """May this run use the cache folder? Asked once; a folder the cache must not touch (see
        the module doc) is named in a one-line warning and the run goes on without a cache."""
        if self._refused is None:
            problem = _folder_problem(self.directory)
            if problem:
                print(f"torchlint: warning: not caching: {problem}", file=sys.stderr)
            self._refused = problem is not None
        return not self._refused

    def _index(self, settings) -> Index:
        key = hashlib.blake2b(f"{code_signature()}:{settings.fingerprint}".encode(), digest_size=12).hexdigest()
        index = self._indexes.get(key)
        if index is None:
            index = Index(os.path.join(self.directory, FORMAT, key + ".json"), load=self.usable())
            self._indexes[key] = index
        return index

    def package_layout(self, path: str) -> str:
        """What a file's module name depends on besides its path: how many folders from its own
        up hold an ``__init__.py`` (``project.module_name``), as a key (``"p2"``). Each folder is
        looked at once per run."""
        folder = os.path.dirname(os.path.abspath(path))
        depth = self._layouts.get(folder)
        if depth is None:
            chain = []  # packages whose depth is not known yet, innermost first
            current = folder
            while current not in self._layouts and os.path.isfile(os.path.join(current, "__init__.py")):
                chain.append(current)
                parent = os.path.dirname(current)
                if parent == current:
                    break
                current = parent
            if current in chain:  # the filesystem's root is a package
                depth = 0
            else:
                depth = self._layouts.setdefault(current, 0)  # known, or not a package
            for package in reversed(chain):
                depth += 1
                self._layouts[package] = depth
        return f"p{depth}"
        return f"p{depth}"

    def lookup(self, path: str, settings, facts: str = "",
               st: Optional[os.stat_result] = None) -> Tuple[Optional[List[Diagnostic]], Optional[os.stat_result]]:
        """(cached findings or None, the file's stat before any read). A stat of None means the
        file cannot be cached (it cannot be stat'ed). ``facts``: the digest of what the project
        index says about the file (``FileFacts.digest``); findings stored under other facts are
        stale (another file changed what this one's findings depend on). ``st``: the file's
        stat taken earlier in this run (``lookup_project``), not taken again."""
        entry, st = self._lookup_entry(self._index(settings), path, facts, st)
        return (findings_from_json(entry.findings, path) if entry is not None else None), st

    def _lookup_entry(self, index: "Index", path: str, facts: str,
                      st: Optional[os.stat_result] = None) -> Tuple[Optional["Entry"], Optional[os.stat_result]]:
        key = os.path.abspath(path)
        if st is None:
            try:
                st = os.stat(key)
            except OSError:
                return None, None
        index.seen.add(key)
        entry = index.entries.get(key)
        if entry is None or entry.digest.partition("+")[2] != facts:
            return None, st
        if entry.size == st.st_size and entry.mtime_ns == st.st_mtime_ns and not entry.racy:
            return entry, st
        notebook = entry.digest.startswith("nb-")  # keyed on its code cells: outputs may change
        if entry.size != st.st_size and not notebook:
            return None, st
        # same size, different or untrustworthy mtime: compare contents
        if not stat.S_ISREG(st.st_mode):  # a FIFO (size 0) would block the read below
            return None, st
        try:
            with open(key, "rb") as fh:
                digest = file_digest(fh.read(), key) if notebook else content_hash(fh.read())
        except OSError:
            return None, st
        if f"{digest}+{facts}" != entry.digest:
            return None, st
        entry.touch(st.st_size, st.st_mtime_ns, _is_racy(st.st_mtime_ns))
        index.dirty = True
        return entry, st

    def store(self, path: str, settings, st: os.stat_result, digest: str, diagnostics: List[Diagnostic],
              facts: str = "") -> None:
        """Remember the findings for ``path`` whose content hashed to ``digest`` and whose stat,
        taken before it was read, was ``st``, under the project ``facts`` they were found with."""
        self._store_entry(self._index(settings), path, st, f"{digest}+{facts}",
                          [_finding_to_json(d) for d in diagnostics])

    def _store_entry(self, index: "Index", path: str, st: os.stat_result, digest: str, payload: list) -> None:
        key = os.path.abspath(path)
        index.seen.add(key)
        index.entries[key] = Entry(st.st_size, st.st_mtime_ns, digest, _is_racy(st.st_mtime_ns), payload)
        index.dirty = True

    # -- project summaries (phase 1), independent of the settings -------------------------------
    def _summaries(self) -> "Index":
        key = hashlib.blake2b(code_signature().encode(), digest_size=12).hexdigest()
        index = self._indexes.get("summaries/" + key)
        if index is None:
            index = Index(os.path.join(self.directory, FORMAT, "summaries", key + ".json"), load=self.usable())
            self._indexes["summaries/" + key] = index
        return index

    def lookup_summary(self, path: str) -> Tuple[Optional[dict], Optional[os.stat_result]]:
        """(the file's cached project summary or None, its stat). A summary made under another
        package layout (an ``__init__.py`` added or removed since) is stale: its module name is."""
        entry, st = self._lookup_entry(self._summaries(), path, self.package_layout(path))
        if entry is not None and len(entry.findings) == 1 and isinstance(entry.findings[0], str):
            try:
                summary = json.loads(entry.findings[0])
            except (ValueError, RecursionError):
                return None, st
            if isinstance(summary, dict):
                self._summary_digests[os.path.abspath(path)] = content_hash(entry.findings[0].encode("utf-8"))
                return summary, st
        return None, st

    def store_summary(self, path: str, st: Optional[os.stat_result], digest: Optional[str],
                      summary: Optional[dict], persist: bool = True) -> None:
        """Remember ``path``'s summary (when it has a stat and a digest: else only its
        ``summary_digest`` for this run's project snapshot). ``persist=False``: kept aside
        until ``persist_summaries`` (a run whose stored project facts stand needs no summary
        written: the snapshot it stores covers the file, and writing means re-encoding every
        summary of the project)."""
        # kept as one JSON string: its checksum hashes a string, not a nested structure, and an
        # unchanged entry is written back without being encoded again
        if summary is not None:
            from torchlint.project import compact_summary

            text = json.dumps(compact_summary(summary), separators=(",", ":"))
            self._summary_digests[os.path.abspath(path)] = content_hash(text.encode("utf-8"))
            if st is not None and digest is not None:
                keyed = f"{digest}+{self.package_layout(path)}"
                if persist:
                    self._store_entry(self._summaries(), path, st, keyed, [text])
                else:
                    self._pending_summaries.append((path, st, keyed, [text]))

    def persist_summaries(self) -> None:
        """Store the summaries ``store_summary(..., persist=False)`` kept aside."""
        for path, st, digest, payload in self._pending_summaries:
            self._store_entry(self._summaries(), path, st, digest, payload)
        self._pending_summaries.clear()

    def summary_digest(self, path: str) -> str:
        """The hash of ``path``'s summary as this run last looked it up or stored it ("" for a
        file without one: unreadable, not Python, a notebook)."""
        return self._summary_digests.get(os.path.abspath(path), "")

    # -- the project index's product, so that an unchanged tree skips phases 1 and 2 ------------
    def _project_path(self) -> str:
        key = hashlib.blake2b(code_signature().encode(), digest_size=12).hexdigest()
        return os.path.join(self.directory, FORMAT, "summaries", key + ".project.json")

    def lookup_project(self, files: Sequence[str]) -> Optional["ProjectSnapshot"]:
        """What the last run over exactly these files (no file added or removed) left: the
        project facts of each file, every file's stat now, and the files changed since (size
        or mtime differ, or the mtime was too recent to trust then or now), whose summaries
        phase 1 must make again. The facts stand when every changed file's new summary hashes
        as its recorded one (``summary_digest``); otherwise phases 1 and 2 run. None when there
        is no snapshot for these files, when it fails its checksum, or when a file's package
        layout changed (``package_layout``: its module name, and so any file's facts, may)."""
        from torchlint.source import UnreadableFile, read_bytes

        if not self.usable():
            return None
        path = self._project_path()
        try:
            raw, _ = read_bytes(path, MAX_INDEX_BYTES)
            header, _, body = raw.partition(b"\n")
            if header != _PROJECT_HEADER + content_hash(body).encode("ascii"):
                return None  # damaged, edited by hand, or written by an older torchlint
            data = json.loads(body)
            if data.get("format") != FORMAT or data.get("version") != __version__:
                return None
            recorded, facts = data["files"], data["facts"]
            if not isinstance(recorded, dict) or not isinstance(facts, dict) or len(recorded) != len(files):
                return None
            stats: Dict[str, os.stat_result] = {}
            changed: List[str] = []
            resized: List[str] = []
            digests: Dict[str, str] = {}
            for file in files:
                key = os.path.abspath(file)
                row = recorded.get(key)
                if not isinstance(row, list) or len(row) != 5 or not isinstance(row[2], str):
                    return None
                if row[4] != self.package_layout(key):
                    return None
                st = stats[file] = os.stat(key)
                digests[key] = row[2]
                if st.st_size != row[0] or st.st_mtime_ns != row[1] or row[3] or _is_racy(st.st_mtime_ns):
                    changed.append(file)
                    if st.st_size != row[0]:
                        resized.append(file)
                elif row[2]:  # stands for this run's summary (a changed file's is made again)
                    self._summary_digests[key] = row[2]
            return ProjectSnapshot(facts, stats, digests, changed, frozenset(resized))
        except (UnreadableFile, OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None

    def store_project(self, stats: Dict[str, Optional[os.stat_result]], facts: Dict[str, list]) -> None:
        """Remember the facts of this run's files (``lookup_project``) with their stats, summary
        digests and package layouts; not when a file could not be stat'ed. A file whose mtime
        is too recent to trust is recorded as changed. The file is a header line holding the
        hash of the JSON that follows it."""
        if not self.usable():
            return
        recorded = {}
        for file, st in stats.items():
            if st is None:
                return
            recorded[os.path.abspath(file)] = [st.st_size, st.st_mtime_ns, self.summary_digest(file),
                                               1 if _is_racy(st.st_mtime_ns) else 0, self.package_layout(file)]
        data = {"format": FORMAT, "version": __version__, "files": recorded,
                "facts": {os.path.abspath(f): v for f, v in facts.items() if v}}
        body = json.dumps(data, separators=(",", ":")).encode("utf-8")
        try:
            _prepare_dir(self.directory)
            _cache_subfolder(self.directory, FORMAT, "summaries")
            from torchlint.atomic import atomic_write_bytes

            atomic_write_bytes(self._project_path(),
                               _PROJECT_HEADER + content_hash(body).encode("ascii") + b"\n" + body)
        except OSError as exc:
            print(f"torchlint: warning: cannot write cache {self._project_path()}: {exc}", file=sys.stderr)

    def save(self) -> None:
        if not self.usable():
            return
        for index in self._indexes.values():
            index.prune()
            if not index.dirty:
                continue
            try:
                _prepare_dir(self.directory)
                relative = os.path.relpath(os.path.dirname(index.path), self.directory)
                _cache_subfolder(self.directory, *relative.split(os.sep))
                from torchlint.atomic import reap_stale

                reap_stale(os.path.dirname(index.path))  # left by runs killed while saving
                index.save()
                _forget_other_versions(self.directory, relative.split(os.sep), index.path)
            except OSError as exc:  # read-only tree, full disk: the run still succeeds
                print(f"torchlint: warning: cannot write cache {index.path}: {exc}", file=sys.stderr)


#: Indexes of other torchlint code (another version, an edited checkout) unused this long are removed.
STALE_INDEX_SECONDS = 7 * 24 * 3600


def _forget_other_versions(directory: str, parts: Sequence[str], saved: str) -> None:
    """Remove the indexes beside ``saved`` (in ``directory``'s subfolder ``parts``) that no run
    has written for ``STALE_INDEX_SECONDS``: each torchlint version keys its own, so a cache
    would otherwise grow with every upgrade. Recently used ones stay (two versions may share a
    project, e.g. a pre-commit pin). Only files named as torchlint names its indexes are
    removed, through a descriptor of the folder opened without following links."""
    keep = os.path.basename(saved).split(".", 1)[0]
    cutoff = time.time() - STALE_INDEX_SECONDS
    try:
        fd = _open_subfolder(directory, parts)
    except OSError:
        return
    try:
        for name in os.listdir(fd):
            if not _INDEX_NAME.match(name) or name.split(".", 1)[0] == keep:
                continue  # not an index, or this one (and its project file)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                    os.unlink(name, dir_fd=fd)
            except OSError:
                pass
    finally:
        os.close(fd)


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_subfolder(directory: str, parts: Sequence[str]) -> int:
    """A descriptor of ``directory/parts...``, each part opened without following a link (the
    cache folder itself may be a link the user made)."""
    fd = os.open(directory, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    try:
        for part in parts:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _cache_subfolder(directory: str, *parts: str) -> None:
    """Make ``directory/parts...`` (``v1``, ``v1/summaries``) a real folder; a link or another
    kind of file there is refused (OSError), never followed."""
    path = directory
    for part in parts:
        path = os.path.join(path, part)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
            raise OSError(f"{path} is {kind}; torchlint does not follow it")


def _folder_problem(directory: str) -> Optional[str]:
    """Why ``directory`` must not be used as the cache (one line), or None: it does not exist
    yet, is empty, or holds torchlint's CACHEDIR.TAG, and its ``v1``, ``v1/summaries`` are
    real folders if they exist. A folder that cannot be read is left to the write's warning."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None  # the write fails and says so
    if not is_torchlint_cache(directory):
        try:
            with os.scandir(directory) as entries:
                empty = next(entries, None) is None
        except OSError:
            return None
        if not empty:
            return (f"{directory} is not empty and is not a torchlint cache (no CACHEDIR.TAG written by "
                    "torchlint); give the cache a folder of its own")
        return None
    path = directory
    for part in (FORMAT, "summaries"):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return f"{path} is a symbolic link; torchlint does not follow links inside its cache"
        if not stat.S_ISDIR(st.st_mode):
            return f"{path} is not a folder"
    return None


def _is_racy(mtime_ns: int) -> bool:
    return mtime_ns >= time.time_ns() - RACY_NS


def _prepare_dir(directory: str) -> None:
    """Make the cache folder (``Cache.usable`` said it is new, empty or torchlint's): its tag
    first (a run killed after it leaves a folder torchlint still knows as its own), then a
    ``.gitignore`` of ``*`` unless one is there."""
    if is_torchlint_cache(directory):
        return
    os.makedirs(directory, exist_ok=True)
    from torchlint.atomic import atomic_write_text

    atomic_write_text(os.path.join(directory, "CACHEDIR.TAG"), _CACHEDIR_TAG)
    if not os.path.lexists(os.path.join(directory, ".gitignore")):
        atomic_write_text(os.path.join(directory, ".gitignore"), "# Created by torchlint.\n*\n")


def open_cache(settings, flag: Optional[str] = None) -> Cache:
    return Cache(resolve_cache_dir(settings, flag))
