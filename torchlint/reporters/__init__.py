"""Stage 8: turn diagnostics into text. Reporters know nothing of libcst: they take a list of
``Diagnostic`` and a ``ReportContext`` and return a string.

Each format is one module exposing ``render(diagnostics, context) -> str``; register it here.
What the formats share (``ReportContext``, positions, notebook ranges) is in ``base.py``.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import ReportContext  # noqa: F401  (part of this package's API)

# format name -> module implementing ``render``
FORMATS: Dict[str, str] = {
    "full": "torchlint.reporters.full",
    "concise": "torchlint.reporters.concise",
    "json": "torchlint.reporters.json",
    "json-lines": "torchlint.reporters.json_lines",
    "sarif": "torchlint.reporters.sarif",
    "github": "torchlint.reporters.github",
    "grouped": "torchlint.reporters.grouped",
    "junit": "torchlint.reporters.junit",
    "gitlab": "torchlint.reporters.gitlab",
    "rdjson": "torchlint.reporters.rdjson",
    "pylint": "torchlint.reporters.pylint",
    "azure": "torchlint.reporters.azure",
}

# Formats for people: a summary line goes to stderr after them.
HUMAN_FORMATS = frozenset({"full", "concise", "grouped"})


def get_renderer(fmt: str) -> Callable[[Sequence[Diagnostic], ReportContext], str]:
    return importlib.import_module(FORMATS[fmt]).render


def summary(diagnostics: Sequence[Diagnostic], files_checked: int) -> str:
    files = f"{files_checked} file{'s' if files_checked != 1 else ''} checked"
    if not diagnostics:
        return f"All checks passed! ({files})"
    counts: Dict[str, int] = {}
    for d in diagnostics:
        counts[d.code] = counts.get(d.code, 0) + 1
    per_code = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items()))
    n = len(diagnostics)
    return f"Found {n} finding{'s' if n != 1 else ''} ({per_code}) in {files}."
