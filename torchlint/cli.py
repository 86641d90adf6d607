"""The ``torchlint`` command: dispatch to a command's ``main`` in ``torchlint.commands`` (``check``
when no command word is given) and turn what escapes a command into a one-line error and an exit code.
Each command imports what it needs when it runs, so ``torchlint --version`` and pre-commit start
fast."""

from __future__ import annotations

import os
import sys

from torchlint import _sigint

if os.path.basename(sys.argv[0] if sys.argv else "").lower() in _sigint.ENTRY_SCRIPTS:
    _sigint.install_early()  # first: a Ctrl-C while the modules below are imported is one line
from typing import Callable, Dict, Optional, Sequence

from torchlint.commands import check, clean, rule, server, version
from torchlint.commands.usage import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, UsageError

#: ``usage.COMMANDS`` -> the command's entry point.
MAINS: Dict[str, Callable[[Sequence[str]], int]] = {
    "check": check.main, "rule": rule.main, "server": server.main, "clean": clean.main,
    "version": version.main,
}


def run() -> None:
    """The ``torchlint`` command and ``python -m torchlint``: ``main``, then exit with its code.

    The process ends with ``os._exit`` once the standard streams are flushed, without CPython's
    teardown: freeing every module and object a run has built costs 0.05-0.08 s after a cold
    run on timm, about what a whole warm run costs (mypy ends the same way, its ``--fast-exit``).
    Nothing is left to do by then: reports and fixed files are written atomically and closed,
    the cache is saved, pool workers have exited, and torchlint registers no ``atexit`` handler.
    After Ctrl-C, once "torchlint: interrupted" is printed, SIGINT is ignored from there on:
    CPython's own exit path could turn it into death by SIGINT (exit status -2), as a test saw
    about once in 50 runs under load. Everything the run started is already undone by then
    (pool workers killed, temporary files removed)."""
    _sigint.restore()  # from here Ctrl-C is a KeyboardInterrupt, handled once the command undid its work
    try:
        code = main()
    except KeyboardInterrupt:  # a second Ctrl-C while the first was being handled
        print("torchlint: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``torchlint | head``): nothing more to say
            pass
    os._exit(code)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        command, rest = (argv[0], argv[1:]) if argv and argv[0] in MAINS else ("check", argv)
        return MAINS[command](rest)
    except UsageError as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("torchlint: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except RecursionError as exc:  # before Exception: the generic path could recurse again
        print(f"torchlint: internal error: RecursionError: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print("torchlint: internal error: out of memory", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: exit 2 (1 means findings), one line, the details on request
        if _sigint.caused_by_interrupt(exc):  # Ctrl-C inside an import, wrapped by Python
            print("torchlint: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        if os.environ.get("TORCHLINT_TRACEBACK"):
            import traceback

            traceback.print_exc()
        message = str(exc).splitlines()[0] if str(exc) else ""
        print(f"torchlint: internal error: {exc.__class__.__name__}: {message} "
              "(set TORCHLINT_TRACEBACK=1 for the traceback)", file=sys.stderr)
        return EXIT_ERROR
