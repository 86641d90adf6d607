"""Ctrl-C while the ``torchlint`` command is still starting (importing its modules): one line and
exit 130, never a traceback. The command's entry points (``torchlint.cli`` for the console script,
``torchlint.__main__`` for ``python -m torchlint``) call ``install_early`` before anything else
they import; ``cli.run`` calls ``restore`` as it starts the command, from where Ctrl-C is a
``KeyboardInterrupt`` again, handled by ``cli.main`` after the command has undone what it started
(pool workers, temporary files). Nothing needs undoing before that. Imports nothing of torchlint.

Python itself prints a traceback for a Ctrl-C during its own start-up (``site``, a ``.pth`` file
such as an editable install's), before any of torchlint's code runs; that window is not ours."""

from __future__ import annotations

import os
import signal

#: The exit status of a run ended by Ctrl-C (``commands.usage.EXIT_INTERRUPTED``).
EXIT_INTERRUPTED = 130
#: ``sys.argv[0]``'s name when the console script runs (pip's launchers on POSIX and Windows):
#: only then does importing ``torchlint.cli`` take Ctrl-C over (not in a test or an embedding).
ENTRY_SCRIPTS = ("torchlint", "torchlint.exe", "torchlint-script.py")


def _exit_interrupted(signum, frame) -> None:
    try:
        os.write(2, b"torchlint: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def install_early() -> None:
    """Ctrl-C ends the process at once with one line, unless SIGINT is ignored (``nohup``, a
    background job) or handled by someone else already (torchlint imported by another program)."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _exit_interrupted)
    except ValueError:  # not the main thread: nothing to install
        pass


def restore() -> None:
    """``KeyboardInterrupt`` on Ctrl-C again, where ``install_early`` took it."""
    try:
        if signal.getsignal(signal.SIGINT) is _exit_interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` stands for a Ctrl-C: a ``KeyboardInterrupt`` raised inside an import and
    wrapped by Python (``RuntimeError: Error calling __set_name__`` while libcst defines its
    classes, Python 3.11), or one a ``finally:`` replaced."""
    seen = exc
    for _ in range(100):
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
    return False
