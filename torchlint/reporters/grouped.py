"""Findings grouped by file, for people: the file's name, then ``  row:col CODE message``."""

from __future__ import annotations

from itertools import groupby
from typing import List, Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import position as where, printable

BOLD, RED, RESET = "\x1b[1m", "\x1b[31m", "\x1b[0m"


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    color = bool(getattr(context, "color", False))
    blocks: List[str] = []
    ordered = sorted(diagnostics, key=Diagnostic.sort_key)
    for path, group in groupby(ordered, key=lambda d: d.path):
        items = list(group)
        positions = [where(d) for d in items]
        width = max(len(p) for p in positions)
        shown = printable(path)
        lines = [f"{BOLD}{shown}{RESET}:" if color else f"{shown}:"]
        for position, d in zip(positions, items):
            code = f"{RED}{d.code}{RESET}" if color else d.code
            prefix = f"  {position:<{width}} {code} "
            # a multi-line message keeps its lines under the first one
            message = printable(d.message, keep="\n").replace("\n", "\n" + " " * (4 + width + len(d.code)))
            lines.append(prefix + message)
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
