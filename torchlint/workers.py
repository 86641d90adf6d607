"""Process pools whose workers never outlive the run.

A worker must not go on rewriting files after its parent is gone: on Linux each worker asks
the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), and a fixing worker also
checks ``parent_alive()`` right before each write (the signal can only be asked for after the
fork; the parent may already be gone by then). Workers ignore SIGINT: on Ctrl-C the parent
kills them and exits 130, so no worker reports a half-run file or prints a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, List, Optional, Sequence

_PR_SET_PDEATHSIG = 1
#: The pid of the process that started this worker; None outside a pool worker.
_PARENT_PID: Optional[int] = None


def die_with_parent(parent_pid: int) -> None:
    """Ask for SIGKILL when the parent dies; exit at once if it already has."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: parent_alive() still guards
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


def parent_alive() -> bool:
    """False in a pool worker whose parent has died: it must write nothing more."""
    return _PARENT_PID is None or os.getppid() == _PARENT_PID


def _init(parent_pid: int, death_signal: bool, initializer: Optional[Callable], initargs: tuple) -> None:
    global _PARENT_PID
    _PARENT_PID = parent_pid
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if death_signal:
        die_with_parent(parent_pid)
    elif os.getppid() != parent_pid:
        os._exit(1)
    if initializer is not None:
        initializer(*initargs)


def map_in_pool(fn: Callable, chunks: Sequence, jobs: int, initializer: Optional[Callable] = None,
                initargs: tuple = ()) -> List:
    """``[fn(chunk) for chunk in chunks]`` in ``jobs`` worker processes. On any exception in the
    parent (KeyboardInterrupt included) the workers are killed before it propagates."""
    from concurrent.futures import ProcessPoolExecutor

    # PR_SET_PDEATHSIG fires when the *thread* that forked the worker ends: only ask for it when
    # that thread is the main one (a pool started from a short-lived thread would lose its workers).
    death_signal = threading.current_thread() is threading.main_thread()
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(jobs, len(chunks))),
        initializer=_init,
        initargs=(os.getpid(), death_signal, initializer, initargs),
    )
    try:
        results = list(pool.map(fn, chunks))
    except BaseException:
        kill_pool(pool)
        raise
    pool.shutdown(wait=True)
    return results


def map_chunked(task: Callable, items: Sequence, sizes: Sequence[int], jobs: int, max_chunk: int = 16,
                initializer: Optional[Callable] = None, initargs: tuple = ()) -> List:
    """One row per item, in the order of ``items``, where ``task(chunk) -> rows`` runs in ``jobs``
    worker processes over chunks of at most ``max_chunk`` items. Largest items (``sizes``) go
    first, so that no huge file starts last while the other cores idle; chunks are small enough
    to balance the cores when a few files dominate, large enough that the per-task round trip
    (~0.2 ms) stays negligible. The runner and the fixer both run their pools through here."""
    order = sorted(range(len(items)), key=lambda i: -sizes[i])
    ordered = [items[i] for i in order]
    chunk = max(1, min(max_chunk, len(items) // (jobs * 8)))
    chunks = [ordered[i:i + chunk] for i in range(0, len(ordered), chunk)]
    rows = [row for chunk_rows in map_in_pool(task, chunks, jobs, initializer, initargs) for row in chunk_rows]
    out: List = [None] * len(items)
    for i, row in zip(order, rows):
        out[i] = row
    return out


def kill_pool(pool) -> None:
    """Stop a pool now: cancel queued work and SIGKILL its workers (no file half-written: each
    write is a rename of a finished temporary file)."""
    procs = dict(getattr(pool, "_processes", None) or {})  # private, but stable since 3.2
    for proc in procs.values():
        try:
            proc.kill()
        except (OSError, AttributeError, ValueError):
            pass
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:
        pass
    for proc in procs.values():
        try:
            proc.join(timeout=5)
        except (OSError, AssertionError, ValueError):
            pass


def reraise_interrupt(exc: BaseException) -> None:
    """Re-raise a KeyboardInterrupt that a ``finally:`` or ``except`` turned into ``exc``: Ctrl-C
    must end the run, never become a per-file "internal error"."""
    seen = exc.__context__
    for _ in range(100):
        if seen is None:
            return
        if isinstance(seen, KeyboardInterrupt):
            raise KeyboardInterrupt from exc
        seen = seen.__context__


def collector_paused(function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)`` with the cyclic collector off. One file's trees (CPython's,
    libcst's) are acyclic and freed by reference counting when it is done, yet the collector
    would scan them again and again while they are built; it runs again between files, so any
    cycle a file leaves is still collected. The runner's phases and the editor path use it."""
    import gc

    if not gc.isenabled():
        return function(*args, **kwargs)
    gc.disable()
    try:
        return function(*args, **kwargs)
    finally:
        gc.enable()
