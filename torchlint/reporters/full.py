"""The default human format: each finding with a code frame of the offending lines, the span
underlined, the rule name, the rule's hint (why it matters) and the fix. Colour only on a terminal (NO_COLOR/FORCE_COLOR).
In a notebook the frame shows the cell's own lines, numbered as in the cell."""

from __future__ import annotations

import io
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.diagnostics import Diagnostic
from torchlint.locator import Locator
from torchlint.reporters.base import position, printable

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


#: SGR parameters of the styles used here, as rich writes them with the "standard" colour system.
_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "blue": "34", "cyan": "36"}
#: The control characters rich removes from text it prints (bell, backspace, VT, FF, CR).
_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))


class _Text:
    """A line (or frame) of styled pieces, printed exactly as rich prints a ``Text`` on the
    console of ``_print_with_rich`` (no wrapping, no markup, control characters removed, each
    styled piece in its own escape sequence, line ends outside them). rich itself costs ~0.05 s
    to import and ~2 ms per finding to print, as much as a warm run: it is kept only for text
    holding a tab (its tab stops count terminal cells)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: List[Tuple[str, str]] = []

    def append(self, text: str, style: str = "") -> "_Text":
        if text:
            self.parts.append((text.translate(_CONTROL), style))
        return self

    def render(self, color: bool) -> Optional[str]:
        """The printed text; None when it holds a tab (rich prints it)."""
        out: List[str] = []
        for text, style in self.parts:
            if "\t" in text:
                return None
            if not color or not style:
                out.append(text)
                continue
            start = "\x1b[" + ";".join(_SGR[word] for word in style.split()) + "m"
            for i, piece in enumerate(text.split("\n")):
                if i:
                    out.append("\n")
                if piece:
                    out.append(start + piece + "\x1b[0m")
        return "".join(out)


def _print_with_rich(text: _Text, color: bool, end: str) -> str:
    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, color_system="standard" if color else None,
                      width=120, highlight=False, soft_wrap=True)
    rich_text = Text()
    for piece, style in text.parts:
        rich_text.append(piece, style=style)
    console.print(rich_text, end=end)
    return buffer.getvalue()


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    color = bool(context.color)
    out: List[str] = []

    def emit(text: _Text, end: str = "\n") -> None:
        printed = text.render(color)
        out.append(printed + end if printed is not None else _print_with_rich(text, color, end))

    locators: Dict[str, Locator] = {}
    for d in diagnostics:
        header = _Text()
        header.append(f"{printable(d.path)}:{position(d)}: ", style="bold")
        header.append(d.code, style="bold red")
        header.append(f" [{d.name}] ", style="cyan")
        header.append(d.message)
        emit(header)
        locator = _locator(d, context.sources, locators)
        if locator is not None:
            emit(_frame(d, locator, _Text), end="")
        if d.hint:
            emit(_Text().append(f"  = hint: {d.hint}", style="dim"))
        for r in d.related:  # where the reason is: the call that makes a helper run every step
            emit(_Text().append(f"  = note: {printable(r.path)}:{r.location.row}:{r.location.column}: {r.message}",
                                style="dim"))
        if d.fix is not None:
            hint = _Text()
            label = "Fix" if d.fix.applicability == "safe" else "Unsafe fix"
            hint.append(f"  = help: {d.fix.message}", style="green")
            needs_flag = d.fix.applicability != "safe" and not context.unsafe_fixes
            hint.append(f" ({label.lower()}{', use --unsafe-fixes' if needs_flag else ''})", style="dim")
            emit(hint)
        out.append("\n")
    return "".join(out)
