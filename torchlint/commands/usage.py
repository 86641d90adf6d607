"""What every command shares: exit codes, the one-line usage error, the argument parser and the
colour policy of the terminal. A leaf: it imports nothing of torchlint."""

from __future__ import annotations

import argparse
import difflib
import os
from typing import Any, NoReturn, Sequence

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130
#: The commands ``torchlint`` dispatches to (``torchlint.commands.<name>.main``); no command
#: word means ``check``.
COMMANDS = ("check", "rule", "server", "clean", "version")


class UsageError(Exception):
    """Bad input on the command line: ``torchlint: error: <message>``, exit 2."""


class Parser(argparse.ArgumentParser):
    """One-line errors; no prefix matching (``--sel`` is not ``--select``, as in ruff)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        if message.startswith("unrecognized arguments: "):
            message += did_you_mean(message.split(": ", 1)[1].split(), list(self._option_string_actions))
        raise UsageError(message)


def did_you_mean(given: Sequence[str], options: Sequence[str]) -> str:
    """`` (did you mean --select?)`` for the first unknown flag close to a known one."""
    for arg in given:
        if not arg.startswith("-"):
            continue
        flag = arg.split("=", 1)[0]
        close = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1, cutoff=0.6)
        if not close and flag.startswith("--"):  # a prefix such as --sel: name what it abbreviates
            close = sorted(o for o in options if o.startswith(flag))[:1]
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def use_color(stream: Any, mode: str = "auto") -> bool:
    """``--color``: always / never, or auto: a terminal, unless NO_COLOR (no-color.org),
    CLICOLOR=0 or TERM=dumb says otherwise; FORCE_COLOR / CLICOLOR_FORCE force it."""
    if mode != "auto":
        return mode == "always"
    env = os.environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR") or env.get("CLICOLOR_FORCE", "0") != "0":
        return True
    if env.get("TERM") == "dumb" or env.get("CLICOLOR") == "0":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())
