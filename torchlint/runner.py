"""Run the per-file pipeline over many files: (cache) -> read -> lint (engine) -> collect, in a
process pool when there is enough work to pay for it.

The engine (libcst, the rules) is imported only when some file actually has to be linted, so a
fully cached run never loads it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from torchlint.diagnostics import Diagnostic
from torchlint.source import (
    SourceFile, UnreadableFile, decode_source, is_notebook_path, read_file_bytes, read_source,
)
from torchlint.workers import collector_paused, fault_hook, reraise_interrupt

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.cache import Cache
    from torchlint.project import FileFacts
    from torchlint.config import Settings, SettingsResolver

# A pool costs ~30 ms to fork and more to feed; below this much work one process is faster.
MIN_FILES_FOR_POOL = 4
MIN_BYTES_FOR_POOL = 64 * 1024
# Files per task (see workers.map_chunked).
MAX_CHUNK = 16


class SourceTexts(dict):
    """path -> text of files with findings, read on first use: code frames need it, JSON does not,
    and cached findings come without text."""

    def __missing__(self, path: str) -> str:
        text = read_source(path, None).text  # a file with findings was read whole already
        self[path] = text
        return text

    def get(self, path, default=None):
        try:
            return self[path]
        except (UnreadableFile, OSError):
            return default


@dataclass
class RunResult:
    diagnostics: List[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    #: Text of each file that has findings, for code frames (read lazily; see SourceTexts).
    sources: Dict[str, str] = field(default_factory=SourceTexts)
    #: One-line internal errors (a rule crashed on a file); they make the exit code 2.
    errors: List[str] = field(default_factory=list)
    #: Files whose findings came from the results cache.
    cached: int = 0
    #: Files whose worker process died each time it analysed them (``lost_file``).
    lost: List[str] = field(default_factory=list)


class FileRead(NamedTuple):
    """One file on disk as linting and fixing read it (``read_file``)."""

    data: Optional[bytes]  # None: it could not be read
    stat: Optional[os.stat_result]  # its fstat while read
    source: Optional[SourceFile]  # None: it could not be read or decoded
    findings: List[Diagnostic]  # why not (TL002), when TL002 is enabled for it


def read_file(path: str, settings: "Settings") -> FileRead:
    """Read and decode one file (regular files only, at most ``max-file-size``): the one path
    by which the runner and the fixer read a file and report TL002."""
    try:
        data, st = read_file_bytes(path, settings)  # a notebook's outputs are not code: more room
    except UnreadableFile as exc:
        return FileRead(None, None, None, unreadable_findings(path, exc, settings))
    try:
        return FileRead(data, st, decode_source(data, path), [])
    except UnreadableFile as exc:
        return FileRead(data, st, None, unreadable_findings(path, exc, settings))


def unreadable_findings(path: str, exc: Exception, settings: "Settings") -> List[Diagnostic]:
    """[TL002 with the reason], or [] where TL002 is not enabled for ``path``."""
    from torchlint.engine import unreadable

    return [unreadable(path, str(exc))] if "TL002" in settings.codes_for_path(path) else []


def lint_text(source: SourceFile, settings: "Settings", project=None, ast_codes=None):
    from torchlint.engine import lint_source

    try:
        if is_notebook_path(source.path):  # JSON: its code cells are the program
            from torchlint.notebook import lint_notebook

            diagnostics = lint_notebook(source.text, source.path, settings, project=project)
        else:
            diagnostics = lint_source(source.text, source.path, settings, project=project, ast_codes=ast_codes)
    except UnreadableFile as exc:  # not a notebook: TL002 with the reason, never read as Python
        return unreadable_findings(source.path, exc, settings), None, None
    except RecursionError:  # code nested past what some recursive step took: the file is TL003
        from torchlint.engine import too_complex

        return too_complex(source.path, settings), None, None
    except Exception as exc:  # a rule bug must not take the whole run down
        reraise_interrupt(exc)
        return [], None, f"{source.path}: internal error: {exc.__class__.__name__}: {exc}"
    return diagnostics, (source.text if diagnostics else None), None


def _read_for_cache(path: str, settings: "Settings"):
    """(source, digest, None) or (None, digest or None, findings reporting why it cannot be read)."""
    from torchlint.cache import file_digest

    read = read_file(path, settings)
    digest = file_digest(read.data, path) if read.data is not None else None
    return read.source, digest, (None if read.source is not None else read.findings)


def _first_pass(path: str, settings: "Settings"):
    """Phase 1 for one file on disk: (path, digest, summary, (final findings or None, whether
    project facts could make a rule fire, codes of the rules the ast prefilter kept or None,
    (the findings with the file's own facts, an internal error or None, the digest of those
    facts) or None), error). Findings are final when the file could not be read or no rule can
    fire on it without facts; None means it is linted after the project index is built. Either
    way, where the index gives the file facts with the digest of the last item's, the findings
    there stand instead. That lint is done here, while the file's text is at hand, in the same
    pool, with the facts the file gives itself (``_own_facts``), for a file some rule may fire
    on, and for one its own facts may make a rule fire on: the index gives a file the facts of
    its own loops and only rarely more (on transformers 6 small files of 1,813, which phase 3
    lints again; trainer.py and the other files with facts of their own get just those)."""
    from torchlint.engine import first_pass

    source, digest, unread = _read_for_cache(path, settings)
    if source is None:
        return path, digest, None, (unread, False, None, None), None
    if is_notebook_path(path):  # no summary: the notebook is read as one in phase 3
        return path, digest, None, (None, False, None, None), None
    try:
        summary, findings, with_project, ast_codes = first_pass(source.text, path, settings)
    except Exception as exc:  # a bug in the summary must not take the whole run down
        reraise_interrupt(exc)
        return path, None, None, ([], False, None, None), f"{path}: internal error: {exc.__class__.__name__}: {exc}"
    speculative = None
    if summary is not None and (ast_codes is not None if findings is None else with_project):
        facts = _own_facts(path, summary).for_rules(settings.codes_for_path(path))
        # final findings (no rule can fire without facts) stand unless its own facts may change them
        if findings is None or facts.digest:
            # as phase 3 would lint it with these facts: the rules phase 1 kept stand only without any
            diagnostics, _, error = lint_text(source, settings, facts, None if facts.digest else ast_codes)
            speculative = (diagnostics, error, facts.digest)
    return path, digest, summary, (findings, with_project, ast_codes, speculative), None


def _own_facts(path: str, summary: dict) -> "FileFacts":
    """The facts the project index would give a file were it the whole project (phase 1 lints it
    with them): none unless its own summary has a training loop's calls, a step hook or a loader
    factory moved to the device (the index is then built over that one summary)."""
    from torchlint.project import EMPTY_FACTS, ProjectIndex

    records = [summary.get("top", {}), *summary.get("functions", {}).values()]
    if not any(r.get("step_calls") or r.get("hook") or r.get("moved_factories") for r in records):
        return EMPTY_FACTS
    return ProjectIndex({path: summary}).facts_for(path)


def _first_pass_items(items: Sequence[Tuple[str, int]], settings: Sequence["Settings"]):
    rows = []
    for path, index in items:
        fault_hook(path)
        rows.append(collector_paused(_first_pass, path, settings[index]))
    return rows


def _first_pass_chunk(items: Sequence[Tuple[str, int]]):
    return _first_pass_items(items, _WORKER_SETTINGS)


def _summary_only(path: str, settings: "Settings"):
    """Phase 1 for a file the project index needs but the run does not lint (``lint_paths``'s
    ``context``): (path, digest, summary or None). Its errors are not this run's to report."""
    from torchlint.engine import _ast_parse
    from torchlint.project import summarize

    source, digest, _ = _read_for_cache(path, settings)
    if source is None or is_notebook_path(path):
        return path, digest, None
    try:
        tree, _ = _ast_parse(source.text, path)
        return path, digest, (summarize(tree, path, source.text) if tree is not None else None)
    except Exception as exc:
        reraise_interrupt(exc)
        return path, None, None


def _summary_items(items: Sequence[Tuple[str, int]], settings: Sequence["Settings"]):
    rows = []
    for path, index in items:
        fault_hook(path)
        rows.append(collector_paused(_summary_only, path, settings[index]))
    return rows


def _summary_chunk(items: Sequence[Tuple[str, int]]):
    return _summary_items(items, _WORKER_SETTINGS)


def _lint_for_cache(path: str, settings: "Settings", project=None,
                    ast_codes=None) -> Tuple[List[Diagnostic], Optional[str], Optional[str]]:
    """(findings, hash of the exact bytes linted or None if not cacheable, internal error)."""
    from torchlint.cache import file_digest

    read = read_file(path, settings)
    digest = file_digest(read.data, path) if read.data is not None else None
    if read.source is None:
        return read.findings, digest, None
    diagnostics, _, error = lint_text(read.source, settings, project, ast_codes)
    return diagnostics, (None if error else digest), error


# -- the worker side of the pool ---------------------------------------------------------------

_WORKER_SETTINGS: Sequence["Settings"] = ()


def _load_engine() -> None:
    """Import the engine and every rule once per process (before forking, the parent's copy is
    inherited; with spawn, the initializer pays it once per worker, never per task)."""
    from torchlint.engine import lint_source  # noqa: F401
    from torchlint.rules import all_rules

    all_rules()


QUIET_GC_THRESHOLD = (50_000, 20, 100)


def _init_worker(settings: Sequence["Settings"]) -> None:
    global _WORKER_SETTINGS
    _WORKER_SETTINGS = settings
    _load_engine()
    # libcst builds ~10^5 acyclic objects per file: the cyclic collector re-scans them again and
    # again for nothing (refcounting frees trees). Freeze what is loaded, collect rarely: ~8%.
    import gc

    gc.freeze()
    gc.set_threshold(*QUIET_GC_THRESHOLD)


@contextmanager
def quiet_collector():
    """The workers' collector policy (see ``_init_worker``) for work done in this process
    (``--jobs 1``, small runs, editors), restored afterwards."""
    import gc

    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*QUIET_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _lint_items(items: Sequence[tuple], settings: Sequence["Settings"]):
    """Phase 3: lint (path, settings index, project facts, rules phase 1 kept or None) items."""
    rows = []
    for path, index, facts, *rest in items:
        fault_hook(path)
        rows.append((path,) + collector_paused(_lint_for_cache, path, settings[index], facts, *rest))
    return rows


def _lint_chunk(items: Sequence[Tuple[str, int]]):
    return _lint_items(items, _WORKER_SETTINGS)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _size(path: str, st) -> int:
    if st is not None:
        return st.st_size
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def lint_paths(
    files: Sequence[str],
    resolver: "SettingsResolver",
    jobs: Optional[int] = None,
    cache: Optional["Cache"] = None,
    context: Optional[Sequence[str]] = None,
) -> RunResult:
    """Lint a project in three steps (see docs/architecture.md):

    1. every file's summary, from CPython's ``ast`` (cached by content, independent of the
       settings); files no rule can fire on are finished here and never reach libcst;
    2. the project index over all summaries (``project.ProjectIndex``), in this process: which
       functions run every step, which loader factories' batches are moved elsewhere;
    3. libcst and the rules on the remaining files, each with the facts the index gives it; a
       file's cached findings count only under the same facts.

    ``context``: the files of the project ``files`` belong to (``project_files``): their
    summaries join the index, so that a file's cross-file findings are the same whichever files
    are named (``torchlint pkg/metrics.py`` as ``torchlint .``); only ``files`` are linted.
    """
    from torchlint.project import EMPTY_FACTS

    result = RunResult(files_checked=len(files))
    linted = set(files)
    every = list(files) + [path for path in dict.fromkeys(context or ()) if path not in linted]
    settings_ids: Dict[int, int] = {}
    settings_list: List["Settings"] = []
    index_of: Dict[str, int] = {}
    stats: Dict[str, Optional[os.stat_result]] = {}
    summaries: Dict[str, dict] = {}
    first_todo: List[str] = []
    # The facts the project index gave last time stand when no file's summary changed: phase 1
    # runs for the changed files only, phase 2 not at all (one file touched: no index rebuilt)
    known = cache.lookup_project(every) if cache is not None else None
    known_facts: Dict[str, "FileFacts"] = {}
    if known is not None:
        from torchlint.project import FileFacts

        try:
            # files only in the index need their facts only when a new snapshot is stored
            wanted = every if known.changed else files
            known_facts = {path: FileFacts.from_json(known.facts.get(os.path.abspath(path))) for path in wanted}
        except (ValueError, TypeError, IndexError, KeyError, AttributeError):
            known = None
        else:
            stats.update(known.stats)
            for path in known.changed:  # a touch without an edit still finds its summary cached;
                # an edit that changed the size has none to find (the summaries are not loaded)
                _cached_summary(None if path in known.resized else cache, path, summaries, stats, first_todo)
    for path in every:
        settings = resolver.for_path(path)
        index = settings_ids.get(id(settings))
        if index is None:
            index = settings_ids[id(settings)] = len(settings_list)
            settings_list.append(settings)
        index_of[path] = index
        if known is None:
            _cached_summary(cache, path, summaries, stats, first_todo)

    jobs = jobs or default_jobs()
    # Phase 1 (only for files whose summary is not cached)
    finished: Dict[str, Tuple[Optional[str], List[Diagnostic], bool]] = {}
    ast_codes: Dict[str, frozenset] = {}  # the rules phase 1's prefilters kept, per file
    # phase 1's findings for files it linted with their own facts: (digest or None, findings,
    # error), and the digest of those facts
    speculative: Dict[str, Tuple[Tuple[Optional[str], List[Diagnostic], Optional[str]], str]] = {}

    def first_phase(paths: Sequence[str]) -> None:
        items = [(path, index_of[path]) for path in paths if path in linted]
        others = [(path, index_of[path]) for path in paths if path not in linted]
        for path, digest, summary in _run(others, stats, settings_list, jobs, first=True, summary_only=True):
            if summary is not None:
                summaries[path] = summary
                if cache is not None:
                    cache.store_summary(path, stats.get(path), digest, summary, persist=known is None)
        for path, digest, summary, (findings, with_project, kept, guess), error in _run(items, stats, settings_list, jobs, first=True, lost=result.lost):
            if error:
                result.errors.append(error)
                finished[path] = (None, [], False)
                continue
            if summary is not None:
                summaries[path] = summary
                if cache is not None:  # written only if the index is built (see below)
                    cache.store_summary(path, stats.get(path), digest, summary, persist=known is None)
            if findings is not None:
                finished[path] = (digest, findings, with_project)
            elif kept is not None:
                ast_codes[path] = kept
            if guess is not None:  # an error's findings are not cached (no digest)
                speculative[path] = ((None if guess[1] else digest, guess[0], guess[1]), guess[2])

    first_phase(first_todo)
    if known is not None and cache is not None and any(
            cache.summary_digest(path) != known.digests.get(os.path.abspath(path), "") for path in known.changed):
        known = None  # a changed summary may change any file's facts: the whole index is built
        cache.persist_summaries()
        redone, rest = set(first_todo), []  # type: Set[str], List[str]
        for path in every:
            if path not in redone and path not in summaries:
                _cached_summary(cache, path, summaries, stats, rest)
        first_phase(rest)

    # Phase 2
    from torchlint.project import ProjectIndex

    project = ProjectIndex(summaries) if summaries and known is None else None
    todo: List[tuple] = []
    facts_of: Dict[str, "FileFacts"] = {}  # what the index says (stored for the next run)
    used_of: Dict[str, "FileFacts"] = {}  # what the file's enabled rules read of it (its findings' key)

    def record(path: str, digest: Optional[str], findings: List[Diagnostic], error: Optional[str]) -> None:
        """A file's findings into the result, and into the cache under its facts (``digest``:
        of the bytes linted; None: not cacheable)."""
        result.diagnostics.extend(findings)
        if error:
            result.errors.append(error)
        st = stats.get(path)
        if cache is not None and st is not None and digest is not None:
            cache.store(path, settings_list[index_of[path]], st, digest, findings, used_of[path].digest)

    for path in every:
        if known is not None:
            if path not in known_facts:  # only in the index, and no snapshot to store
                continue
            facts = known_facts[path]
        else:
            facts = project.facts_for(path) if project is not None else EMPTY_FACTS
        facts_of[path] = facts
        if path not in linted:  # in the index only: its facts are stored for the next run
            continue
        settings = settings_list[index_of[path]]
        facts = used_of[path] = facts.for_rules(settings.codes_for_path(path))
        if path in finished and not (facts.digest and finished[path][2]):
            digest, findings, _ = finished[path]
            record(path, digest, findings, None)
            continue
        if path in speculative and speculative[path][1] == facts.digest:  # linted in phase 1, as
            record(path, *speculative[path][0])  # phase 3 would have: with these facts
            continue
        if cache is not None:
            found, st = cache.lookup(path, settings, facts.digest, stats.get(path))
            stats.setdefault(path, st)
            if found is not None:
                result.diagnostics.extend(found)
                result.cached += 1
                continue
        # the rules phase 1 kept stand only without project facts (they widen the prefilter)
        todo.append((path, index_of[path], facts, None if facts.digest else ast_codes.get(path)))

    # Phase 3
    for path, diagnostics, digest, error in _run(todo, stats, settings_list, jobs, first=False, lost=result.lost):
        record(path, digest, diagnostics, error)
    if cache is not None:
        cache.save()
        if (known is None or known.changed) and not result.errors and not result.lost:
            cache.store_project({path: stats.get(path) for path in every},
                                {path: facts.to_json() for path, facts in facts_of.items()})
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def _cached_summary(cache: Optional["Cache"], path: str, summaries: Dict[str, dict],
                    stats: Dict[str, Optional[os.stat_result]], todo: List[str]) -> None:
    """``path``'s cached summary into ``summaries``, else ``path`` onto phase 1's ``todo`` (a
    notebook has no summary: it goes straight to phase 3)."""
    summary = None
    if cache is not None:
        summary, stats[path] = cache.lookup_summary(path)
    if summary is not None:
        summaries[path] = summary
    elif not is_notebook_path(path):
        todo.append(path)


def _run(items: Sequence[tuple], stats, settings_list, jobs: int, first: bool,
         lost: Optional[List[str]] = None, summary_only: bool = False) -> list:
    """Phase 1 (``first``) or phase 3 over ``items``, in a pool when there is enough work."""
    if not items:
        return []
    sizes = [_size(item[0], stats.get(item[0])) for item in items]
    if jobs > 1 and len(items) >= MIN_FILES_FOR_POOL and sum(sizes) >= MIN_BYTES_FOR_POOL:
        task = _summary_chunk if summary_only else _first_pass_chunk if first else _lint_chunk
        return _run_pool(items, sizes, settings_list, jobs, task, lost)
    with quiet_collector():
        return (_summary_items if summary_only else _first_pass_items if first else _lint_items)(items, settings_list)


def _run_pool(items, sizes, settings_list, jobs: int, task, lost: Optional[List[str]] = None):
    from torchlint.workers import map_chunked

    _load_engine()  # forked workers inherit it
    from torchlint import _cst  # both phases parse with libcst (phase 1: files without facts)

    _cst.load()  # imported here once, not once per worker
    first = task is _first_pass_chunk

    def on_lost(item: tuple) -> tuple:
        """The row of a file whose worker died each time it was analysed (see map_chunked)."""
        findings, error = lost_file(item[0], settings_list[item[1]])
        if lost is not None:
            lost.append(item[0])
        if task is _summary_chunk:  # only the index missed it
            return item[0], None, None
        if first:  # final findings: never linted again, never cached (no digest)
            return item[0], None, None, (findings, False, None, None), error
        return item[0], findings, None, error

    # Workers die with the run (SIGKILL/SIGTERM of this process, Ctrl-C): see workers.py.
    return map_chunked(task, items, sizes, jobs, MAX_CHUNK, initializer=_init_worker, initargs=(settings_list,),
                       on_lost=on_lost)


def lost_file(path: str, settings: "Settings") -> Tuple[List[Diagnostic], Optional[str]]:
    """([TL003], None) for a file whose worker process died every time it analysed it (the
    out-of-memory killer, a crash in native code), or ([], an error) where TL003 is off for it:
    either way the run goes on with every other file's findings and does not pass."""
    reason = "the process analysing this file died each time (killed by a signal or out of memory); not analysed"
    if "TL003" in settings.codes_for_path(path):
        from torchlint.engine import _engine_diagnostic

        return [_engine_diagnostic("TL003", reason, path, 1, 1)], None
    return [], f"{path}: {reason}"


# -- the project around the named files -------------------------------------------------------

def project_root(path: str, resolver: "SettingsResolver") -> Optional[str]:
    """The folder of the project ``path`` belongs to, found as the configuration is: the folder
    of the config file that applies, else the nearest folder at or above it holding a dependency
    file or a ``.git`` (``dependencies.find_project_root``); None when there is neither."""
    from pathlib import Path

    from torchlint.dependencies import find_project_root

    settings = resolver.for_path(path)
    if settings.config_path:
        return os.path.dirname(os.path.abspath(settings.config_path))
    folder = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
    root = find_project_root(Path(folder))
    return str(root) if root is not None else None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def project_context(paths: Sequence[str], files: Sequence[str], resolver: "SettingsResolver") -> List[str]:
    """The files of the projects that the named ``paths`` belong to and that the run does not
    name (``files``: what it lints), found as ``torchlint <root>`` would find them (excludes,
    ``.gitignore``): ``lint_paths`` puts their summaries into the project index, so that a named
    file gets the cross-file findings ``torchlint .`` gives it (issue 32, item 8). Empty when the
    named folders hold their whole projects already (``torchlint .`` at the root)."""
    from torchlint.discovery import discover

    named = [os.path.abspath(p) for p in paths]
    roots: List[str] = []
    for path, absolute in zip(paths, named):
        root = project_root(path, resolver)
        if root is None or any(_within(root, n) for n in named if os.path.isdir(n)):
            continue  # no project around it, or a named folder holds its project
        if root not in roots:
            roots.append(root)
    if not roots:
        return []
    cwd = os.getcwd()
    given = [os.path.relpath(r) if _within(r, cwd) else r for r in roots]
    join, norm = os.path.join, os.path.normpath  # abspath asks the kernel for the cwd each time
    linted = {norm(join(cwd, f)) for f in files}
    return [f for f in discover(given, resolver) if norm(join(cwd, f)) not in linted]


def project_summaries(paths: Sequence[str], resolver: "SettingsResolver", cache: Optional["Cache"] = None,
                      jobs: Optional[int] = None) -> Dict[str, dict]:
    """path -> summary for ``paths`` (from the cache where it has them, else phase 1's summary
    only, in a pool when there is enough work)."""
    summaries: Dict[str, dict] = {}
    stats: Dict[str, Optional[os.stat_result]] = {}
    todo: List[str] = []
    for path in paths:
        _cached_summary(cache, path, summaries, stats, todo)
    settings_list = [resolver.default]
    for path, digest, summary in _run([(p, 0) for p in todo], stats, settings_list, jobs or default_jobs(),
                                      first=True, summary_only=True):
        if summary is not None:
            summaries[path] = summary
            if cache is not None:
                cache.store_summary(path, stats.get(path), digest, summary)
    if cache is not None and todo:
        cache.save()
    return summaries


def facts_with_text(path: str, text: str, context: Sequence[str], resolver: "SettingsResolver",
                    cache: Optional["Cache"] = None, jobs: Optional[int] = None):
    """The project facts of ``path`` holding ``text`` (stdin with ``--stdin-filename``, which
    need not match the file on disk) in the project of ``context``; None without a project."""
    from torchlint.project import FileFacts, ProjectIndex, summarize_text

    mine = os.path.abspath(path)
    others = [p for p in context if os.path.abspath(p) != mine]
    own = summarize_text(text, path)
    if cache is not None and own is not None and os.path.isfile(path):
        # the facts the last run over this project stored stand when no other file changed and
        # this text summarises as the file did then (an editor piping an unchanged buffer)
        snapshot = cache.lookup_project([*others, path])
        if snapshot is not None and all(os.path.abspath(p) == mine for p in snapshot.changed):
            cache.store_summary(path, None, None, own)  # only its digest, as phase 1 would hash it
            if cache.summary_digest(path) == snapshot.digests.get(mine):
                try:
                    return FileFacts.from_json(snapshot.facts.get(mine))
                except (ValueError, TypeError, IndexError, KeyError, AttributeError):
                    pass
    summaries = project_summaries(others, resolver, cache, jobs)
    if not summaries:
        return None
    if own is not None:
        summaries[path] = own
    return ProjectIndex(summaries).facts_for(path)
