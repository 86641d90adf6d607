"""The default human format: each finding with a code frame of the offending lines, the span
underlined, the rule name, the rule's hint (why it matters) and the fix. Colour only on a terminal (NO_COLOR/FORCE_COLOR).
In a notebook the frame shows the cell's own lines, numbered as in the cell."""

from __future__ import annotations

import io
from typing import Dict, Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.locator import Locator
from torchlint.reporters.base import position

CONTEXT_LINES = 1
#: A long span (a whole loop or function) shows its first lines, then how many more it covers.
MAX_SPAN_LINES = 3


def _frame(d: Diagnostic, locator: Locator, text_cls):
    first = max(1, d.location.row - CONTEXT_LINES)
    last_span = d.end_location.row if d.end_location.column > 1 or d.end_location.row == d.location.row else d.end_location.row - 1
    shown_span = min(last_span, d.location.row + MAX_SPAN_LINES - 1)
    hidden = last_span - shown_span
    last = min(locator.line_count, shown_span if hidden else last_span + CONTEXT_LINES)
    width = len(str(last))
    out = text_cls()
    for row in range(first, last + 1):
        line = locator.line(row).expandtabs(1)
        out.append(f" {row:>{width}} | ", style="blue")
        in_span = d.location.row <= row <= shown_span
        out.append(line + "\n", style="" if in_span else "dim")
        if in_span:
            start = d.location.column if row == d.location.row else len(line) - len(line.lstrip()) + 1
            end = d.end_location.column if row == d.end_location.row else len(line) + 1
            caret = max(1, end - start)
            out.append(f" {'':>{width}} | ", style="blue")
            out.append(" " * (start - 1) + "^" * caret, style="bold red")
            if row == shown_span:
                out.append(f" {d.code}", style="bold red")
            out.append("\n")
    if hidden:
        out.append(f" {'':>{width}} | ", style="blue")
        out.append(f"... {hidden} more line{'s' if hidden != 1 else ''}\n", style="dim")
    return out


def _locator(d: Diagnostic, sources, locators):
    """The locator of the text the finding's rows count in: the file, or the notebook's cell."""
    key = (d.path, d.cell)
    if key not in locators:
        text = sources.get(d.path)
        if text is not None and d.cell is not None:
            from torchlint.notebook import cell_sources

            cells = locators.get((d.path, "cells"))
            if cells is None:
                cells = locators[(d.path, "cells")] = cell_sources(text)
            text = cells.get(d.cell)
        locators[key] = Locator(text) if text is not None else None
    return locators[key]


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=context.color,
        no_color=not context.color,
        color_system="standard" if context.color else None,
        width=120,
        highlight=False,
        soft_wrap=True,
    )
    locators: Dict[str, Locator] = {}
    for d in diagnostics:
        header = Text()
        header.append(f"{d.path}:{position(d)}: ", style="bold")
        header.append(d.code, style="bold red")
        header.append(f" [{d.name}] ", style="cyan")
        header.append(d.message)
        console.print(header)
        locator = _locator(d, context.sources, locators)
        if locator is not None:
            console.print(_frame(d, locator, Text), end="")
        if d.hint:
            why = Text()
            why.append(f"  = hint: {d.hint}", style="dim")
            console.print(why)
        if d.fix is not None:
            hint = Text()
            label = "Fix" if d.fix.applicability == "safe" else "Unsafe fix"
            hint.append(f"  = help: {d.fix.message}", style="green")
            needs_flag = d.fix.applicability != "safe" and not context.unsafe_fixes
            hint.append(f" ({label.lower()}{', use --unsafe-fixes' if needs_flag else ''})", style="dim")
            console.print(hint)
        console.print()
    return buffer.getvalue()
