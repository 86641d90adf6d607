"""One JSON object per line, each with the same shape as an item of ``--output-format json``."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import dumps


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    return "".join(dumps(d.to_json(), sort_keys=True) + "\n" for d in diagnostics)
