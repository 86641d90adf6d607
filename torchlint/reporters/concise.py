"""``path:line:col: CODE message``, one line per finding."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    lines = [
        f"{d.path}:{d.location.row}:{d.location.column}: {d.code} {d.message}" for d in diagnostics
    ]
    return "\n".join(lines) + ("\n" if lines else "")
