"""Progress on stderr for long runs: after ``DELAY`` seconds without an end, one line rewritten
in place (``torchlint: 812/1813 files analysed, 4 s``), cleared when the run ends. Only when
stderr is a terminal (not ``TERM=dumb``), only for the human formats and never with ``-q``/``-s``:
a pipe, a CI log and a machine format see nothing of it."""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

#: Seconds of silence before the first progress line (a short run shows none).
DELAY = float(os.environ.get("TORCHLINT_PROGRESS_DELAY") or 1.0)
INTERVAL = 0.25


def wanted(args: Any, stream: Any = None) -> bool:
    """Is progress to be shown for this run?"""
    from torchlint.reporters import HUMAN_FORMATS

    stream = sys.stderr if stream is None else stream
    if getattr(args, "quiet", False) or getattr(args, "silent", False):
        return False
    if (args.output_format or "full") not in HUMAN_FORMATS or args.statistics:
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """Counts what the pools report (``workers.PROGRESS``) and draws it from a thread."""

    def __init__(self, stream: Any, files: int) -> None:
        self.stream = stream
        self.files = files
        self.round = 0
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self.shown = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._draw_loop, name="torchlint-progress", daemon=True)

    def update(self, done: int, total: int) -> None:
        with self._lock:
            if total:
                self.round += 1
                self.done, self.total = 0, total
            self.done += done

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        with self._lock:
            if not self.total:
                return f"torchlint: checking {self.files} files, {elapsed:.0f} s"
            step = "analysed" if self.round == 1 else "linted"
            return f"torchlint: {self.done}/{self.total} files {step}, {elapsed:.0f} s"

    def _draw_loop(self) -> None:
        if self._stop.wait(DELAY):
            return
        while not self._stop.is_set():
            self._write("\r\x1b[K" + self.line())
            self.shown = True
            self._stop.wait(INTERVAL)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._stop.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.shown:
            self._write("\r\x1b[K")


@contextmanager
def progress(args: Any, files: int, stream: Any = None) -> Iterator[Optional[Progress]]:
    """Progress for the run inside the ``with`` when ``wanted``; nothing otherwise."""
    from torchlint import workers

    if not wanted(args, stream):
        yield None
        return
    shown = Progress(sys.stderr if stream is None else stream, files)
    workers.PROGRESS = shown.update
    shown.start()
    try:
        yield shown
    finally:
        workers.PROGRESS = None
        shown.stop()
