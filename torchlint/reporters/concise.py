"""``path:line:col: CODE message``, one line per finding (``path:cell N:line:col`` in a notebook).
Control characters (a newline too) and undecodable bytes of a name or message are escaped."""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import position, printable


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    lines = [
        f"{printable(d.path)}:{position(d)}: {d.code} {printable(d.message)}" for d in diagnostics
    ]
    return "\n".join(lines) + ("\n" if lines else "")
