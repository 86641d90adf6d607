"""GitLab Code Quality: a JSON list of issues (``artifacts: reports: codequality:``), shown in
merge requests. The shape is GitLab's subset of the Code Climate spec: ``description``,
``check_name``, ``fingerprint``, ``severity`` and ``location`` (``path`` relative to the
repository, ``lines.begin`` / ``lines.end``).

GitLab tells a new finding from an old one by its fingerprint, so it must be unique in a report
and survive unrelated edits: it hashes the code, path, message and the flagged line's text (not
its number), plus how many identical findings came before it in the file.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import dumps, file_ranges, is_error, one_line
from torchlint.reporters.paths import display_path
from torchlint.source import split_lines


def project_path(path: str, root: str) -> str:
    """``path`` relative to ``$CI_PROJECT_DIR`` (the checkout in GitLab CI), else to the git
    repository holding ``root``."""
    base = os.environ.get("CI_PROJECT_DIR")
    if base:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return display_path(path, root)


def _line_text(d: Diagnostic, sources) -> str:
    if d.cell is not None:
        return ""
    text = sources.get(d.path) if hasattr(sources, "get") else None
    if not text:
        return ""
    lines = split_lines(text)  # rows as CPython counts them (not at a form feed)
    return lines[d.location.row - 1].strip() if 0 < d.location.row <= len(lines) else ""


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ranges = file_ranges(diagnostics, context)
    seen: Counter = Counter()
    issues = []
    for d in diagnostics:
        path = project_path(d.path, context.root)
        start, end = ranges[id(d)]
        key = "\0".join((d.code, path, d.message, _line_text(d, context.sources)))
        occurrence = seen[key]
        seen[key] += 1
        issues.append({
            "check_name": d.code,
            "description": f"{d.code} [{d.name}] {one_line(d.message)}",
            "fingerprint": hashlib.sha256(f"{key}\0{occurrence}".encode("utf-8", "surrogatepass")).hexdigest()[:32],
            "severity": "critical" if is_error(d.code) else "major",
            "location": {"path": path, "lines": {"begin": start.row, "end": max(start.row, end.row)}},
        })
    return dumps(issues, indent=2) + "\n"
