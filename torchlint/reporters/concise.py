"""``path:line:col: CODE message``, one line per finding (``path:cell N:line:col`` in a notebook)."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import position


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    lines = [
        f"{d.path}:{position(d)}: {d.code} {d.message}" for d in diagnostics
    ]
    return "\n".join(lines) + ("\n" if lines else "")
