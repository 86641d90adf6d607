"""Run the per-file pipeline over many files: read -> lint (engine) -> collect, in parallel when
there are enough files to pay for worker start-up."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.config import Settings, SettingsResolver
from torchlint.diagnostics import Diagnostic
from torchlint.engine import lint_source, unreadable
from torchlint.source import SourceFile, UnreadableFile, read_source

# Below this many files a process pool costs more than it saves.
MIN_FILES_FOR_POOL = 24


@dataclass
class RunResult:
    diagnostics: List[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    #: Text of each file that has findings, for code frames.
    sources: Dict[str, str] = field(default_factory=dict)
    #: One-line internal errors (a rule crashed on a file); they make the exit code 2.
    errors: List[str] = field(default_factory=list)


def lint_file(path: str, settings: Settings) -> Tuple[List[Diagnostic], Optional[str], Optional[str]]:
    """(findings, text if there are findings, internal error) for one file on disk."""
    try:
        source = read_source(path)
    except UnreadableFile as exc:
        if "TL002" in settings.codes_for_path(path):
            return [unreadable(path, str(exc))], None, None
        return [], None, None
    return lint_text(source, settings)


def lint_text(source: SourceFile, settings: Settings):
    try:
        diagnostics = lint_source(source.text, source.path, settings)
    except Exception as exc:  # a rule bug must not take the whole run down
        return [], None, f"{source.path}: internal error: {exc.__class__.__name__}: {exc}"
    return diagnostics, (source.text if diagnostics else None), None


def _lint_chunk(items: Sequence[Tuple[str, Settings]]):
    return [(path,) + lint_file(path, settings) for path, settings in items]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def lint_paths(files: Sequence[str], resolver: SettingsResolver, jobs: Optional[int] = None) -> RunResult:
    result = RunResult(files_checked=len(files))
    items = [(path, resolver.for_path(path)) for path in files]
    jobs = jobs or default_jobs()
    if jobs > 1 and len(items) >= MIN_FILES_FOR_POOL:
        chunk = max(1, min(64, len(items) // (jobs * 8) or 1))
        chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            outputs = [row for rows in pool.map(_lint_chunk, chunks) for row in rows]
    else:
        outputs = _lint_chunk(items)
    for path, diagnostics, text, error in outputs:
        result.diagnostics.extend(diagnostics)
        if text is not None:
            result.sources[path] = text
        if error:
            result.errors.append(error)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result
