"""Run the per-file pipeline over many files: (cache) -> read -> lint (engine) -> collect, in a
process pool when there is enough work to pay for it.

The engine (libcst, the rules) is imported only when some file actually has to be linted, so a
fully cached run never loads it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from torchlint.diagnostics import Diagnostic
from torchlint.source import SourceFile, UnreadableFile, decode_source, is_notebook_path, read_source

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.cache import Cache
    from torchlint.config import Settings, SettingsResolver

# A pool costs ~30 ms to fork and more to feed; below this much work one process is faster.
MIN_FILES_FOR_POOL = 4
MIN_BYTES_FOR_POOL = 64 * 1024
# Files per task: small enough to balance two cores when a few huge files dominate, large
# enough that the per-task round trip (~0.2 ms) stays negligible.
MAX_CHUNK = 16


class SourceTexts(dict):
    """path -> text of files with findings, read on first use: code frames need it, JSON does not,
    and cached findings come without text."""

    def __missing__(self, path: str) -> str:
        text = read_source(path).text
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


def lint_file(path: str, settings: "Settings") -> Tuple[List[Diagnostic], Optional[str], Optional[str]]:
    """(findings, text if there are findings, internal error) for one file on disk."""
    from torchlint.engine import unreadable

    try:
        source = read_source(path)
    except UnreadableFile as exc:
        if "TL002" in settings.codes_for_path(path):
            return [unreadable(path, str(exc))], None, None
        return [], None, None
    return lint_text(source, settings)


def lint_text(source: SourceFile, settings: "Settings"):
    from torchlint.engine import lint_source

    try:
        if is_notebook_path(source.path):  # JSON: its code cells are the program
            from torchlint.notebook import lint_notebook

            diagnostics = lint_notebook(source.text, source.path, settings)
        else:
            diagnostics = lint_source(source.text, source.path, settings)
    except UnreadableFile as exc:  # not a notebook: TL002 with the reason, never read as Python
        from torchlint.engine import unreadable

        return ([unreadable(source.path, str(exc))] if "TL002" in settings.codes_for_path(source.path) else []), None, None
    except Exception as exc:  # a rule bug must not take the whole run down
        return [], None, f"{source.path}: internal error: {exc.__class__.__name__}: {exc}"
    return diagnostics, (source.text if diagnostics else None), None


def _lint_for_cache(path: str, settings: "Settings") -> Tuple[List[Diagnostic], Optional[str], Optional[str]]:
    """(findings, hash of the exact bytes linted or None if not cacheable, internal error)."""
    from torchlint.cache import content_hash
    from torchlint.engine import unreadable

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        codes = settings.codes_for_path(path)
        return ([unreadable(path, exc.strerror or str(exc))] if "TL002" in codes else []), None, None
    digest = content_hash(data)
    try:
        source = decode_source(data, path)
    except UnreadableFile as exc:
        codes = settings.codes_for_path(path)
        return ([unreadable(path, str(exc))] if "TL002" in codes else []), digest, None
    diagnostics, _, error = lint_text(source, settings)
    return diagnostics, (None if error else digest), error


# -- the worker side of the pool ---------------------------------------------------------------

_WORKER_SETTINGS: Sequence["Settings"] = ()


def _load_engine() -> None:
    """Import the engine and every rule once per process (before forking, the parent's copy is
    inherited; with spawn, the initializer pays it once per worker, never per task)."""
    from torchlint.engine import lint_source  # noqa: F401
    from torchlint.rules import all_rules

    all_rules()


def _init_worker(settings: Sequence["Settings"]) -> None:
    global _WORKER_SETTINGS
    _WORKER_SETTINGS = settings
    _load_engine()
    # libcst builds ~10^5 acyclic objects per file: the cyclic collector re-scans them again and
    # again for nothing (refcounting frees trees). Freeze what is loaded, collect rarely: ~8%.
    import gc

    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _lint_items(items: Sequence[Tuple[str, int]], settings: Sequence["Settings"]):
    return [(path,) + _lint_for_cache(path, settings[index]) for path, index in items]


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
) -> RunResult:
    result = RunResult(files_checked=len(files))
    settings_ids: Dict[int, int] = {}
    settings_list: List["Settings"] = []
    todo: List[Tuple[str, int, object]] = []  # (path, settings index, stat before reading)
    for path in files:
        settings = resolver.for_path(path)
        index = settings_ids.get(id(settings))
        if index is None:
            index = settings_ids[id(settings)] = len(settings_list)
            settings_list.append(settings)
        st = None
        if cache is not None:
            found, st = cache.lookup(path, settings)
            if found is not None:
                result.diagnostics.extend(found)
                result.cached += 1
                continue
        todo.append((path, index, st))

    jobs = jobs or default_jobs()
    sizes = [_size(path, st) for path, _, st in todo]
    if jobs > 1 and len(todo) >= MIN_FILES_FOR_POOL and sum(sizes) >= MIN_BYTES_FOR_POOL:
        outputs = _run_pool(todo, sizes, settings_list, jobs)
    else:
        outputs = _lint_items([(path, index) for path, index, _ in todo], settings_list)

    stats = {path: (index, st) for path, index, st in todo}
    for path, diagnostics, digest, error in outputs:
        result.diagnostics.extend(diagnostics)
        if error:
            result.errors.append(error)
        index, st = stats[path]
        if cache is not None and st is not None and digest is not None:
            cache.store(path, settings_list[index], st, digest, diagnostics)
    if cache is not None:
        cache.save()
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def _run_pool(todo, sizes, settings_list, jobs: int):
    from concurrent.futures import ProcessPoolExecutor

    _load_engine()  # forked workers inherit it
    # Largest files first, so that no huge file starts last and leaves the other cores idle.
    order = sorted(range(len(todo)), key=lambda i: -sizes[i])
    items = [(todo[i][0], todo[i][1]) for i in order]
    chunk = max(1, min(MAX_CHUNK, len(items) // (jobs * 8)))
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    with ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), initializer=_init_worker,
                             initargs=(settings_list,)) as pool:
        return [row for rows in pool.map(_lint_chunk, chunks) for row in rows]
