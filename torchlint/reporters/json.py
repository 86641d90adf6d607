"""A JSON list with the same shape as ruff's ``--output-format json`` (see docs/json-output.md)."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import dumps


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    return dumps([d.to_json() for d in diagnostics], indent=2, sort_keys=True) + "\n"
