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
from typing import Any, Callable, List, Optional, Sequence

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


#: ``progress(done, total)``, called by the pools when set (``commands.progress``): total > 0
#: starts a round of ``total`` items, done > 0 says that many more are finished (from the
#: pool's result thread).
PROGRESS: Optional[Callable[[int, int], None]] = None

#: How many items may each kill a worker before the run gives up (``map_chunked``).
MAX_LOST_ITEMS = 8


class _Lost:
    """The result of a task whose worker died (``BrokenProcessPool``) before it finished."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "LOST"


LOST = _Lost()


def _pool_round(fn: Callable, chunks: Sequence, jobs: int, initializer: Optional[Callable],
                initargs: tuple) -> List:
    """``[fn(chunk) for chunk in chunks]`` in ``jobs`` worker processes, with ``LOST`` for each
    chunk whose worker died (killed by the out-of-memory killer, a signal, a crash in native code)
    or that was still waiting when the pool broke. On any other exception, in a task or in the
    parent (KeyboardInterrupt included), the workers are killed before it propagates."""
    from concurrent.futures import ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    # PR_SET_PDEATHSIG fires when the *thread* that forked the worker ends: only ask for it when
    # that thread is the main one (a pool started from a short-lived thread would lose its workers).
    death_signal = threading.current_thread() is threading.main_thread()
    pool = ProcessPoolExecutor(
        max_workers=max(1, min(jobs, len(chunks))),
        initializer=_init,
        initargs=(os.getpid(), death_signal, initializer, initargs),
    )
    broken = False
    futures: List = []
    try:
        progress = PROGRESS
        if progress is not None:
            progress(0, sum(len(chunk) for chunk in chunks))  # a new round of work
        for chunk in chunks:
            try:
                future = pool.submit(fn, chunk)
                if progress is not None:
                    future.add_done_callback(lambda _, n=len(chunk): progress(n, 0))  # type: ignore[misc]
                futures.append(future)
            except BrokenProcessPool:  # broken while still submitting: nothing more runs in it
                broken = True
                break
        wait(futures)
        results: List = []
        for future in futures:
            try:
                results.append(future.result())
            except BrokenProcessPool:
                broken = True
                results.append(LOST)
        results += [LOST] * (len(chunks) - len(futures))
    except BaseException:
        kill_pool(pool)
        raise
    if broken:
        kill_pool(pool)
    else:
        pool.shutdown(wait=True)
    return results


def map_in_pool(fn: Callable, chunks: Sequence, jobs: int, initializer: Optional[Callable] = None,
                initargs: tuple = ()) -> List:
    """``[fn(chunk) for chunk in chunks]`` in ``jobs`` worker processes. On any exception in the
    parent (KeyboardInterrupt included) the workers are killed before it propagates; a worker
    that dies is ``BrokenProcessPool`` (``map_chunked`` with ``on_lost`` runs the work again)."""
    from concurrent.futures.process import BrokenProcessPool

    results = _pool_round(fn, chunks, jobs, initializer, initargs)
    if any(r is LOST for r in results):
        raise BrokenProcessPool("a worker process died (killed by a signal or out of memory)")
    return results


#: Test hook (the fault tests): a pool worker about to handle a path that contains this text
#: kills itself with SIGKILL, as the out-of-memory killer would. With
#: ``TORCHLINT_TEST_KILL_WORKER_ONCE`` naming a file that does not exist yet, only the first
#: worker dies (it creates that file first): an innocent file whose worker was killed.
_KILL_ON = os.environ.get("TORCHLINT_TEST_KILL_WORKER") or None


def fault_hook(path: str) -> None:
    """The ``TORCHLINT_TEST_KILL_WORKER`` hook; nothing (one comparison) without it."""
    if _KILL_ON is None or _PARENT_PID is None or _KILL_ON not in path:
        return
    once = os.environ.get("TORCHLINT_TEST_KILL_WORKER_ONCE")
    if once:
        try:
            os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except OSError:
            return  # a worker died for it already
    os.kill(os.getpid(), signal.SIGKILL)


def map_chunked(task: Callable, items: Sequence, sizes: Sequence[int], jobs: int, max_chunk: int = 16,
                initializer: Optional[Callable] = None, initargs: tuple = (),
                on_lost: Optional[Callable[[Any], Any]] = None) -> List:
    """One row per item, in the order of ``items``, where ``task(chunk) -> rows`` runs in ``jobs``
    worker processes over chunks of at most ``max_chunk`` items. Largest items (``sizes``) go
    first, so that no huge file starts last while the other cores idle; chunks are small enough
    to balance the cores when a few files dominate, large enough that the per-task round trip
    (~0.2 ms) stays negligible. The runner and the fixer both run their pools through here.

    A worker that dies (the out-of-memory killer's usual pick) loses only the chunks it had not
    finished, with ``on_lost`` given: they run again, one item a task, in a fresh pool; what is
    lost there too runs in a pool of one worker, in order, so that the item it dies on is known.
    That item, lost three times, becomes ``on_lost(item)``; every other item's row stands.
    Without ``on_lost`` a dead worker is ``BrokenProcessPool`` (the fixer: a dead worker may
    have written a file already, running it again is not safe)."""
    order = sorted(range(len(items)), key=lambda i: -sizes[i])
    ordered = [items[i] for i in order]
    chunk = max(1, min(max_chunk, len(items) // (jobs * 8)))
    starts = list(range(0, len(ordered), chunk))
    chunks = [ordered[i:i + chunk] for i in starts]
    if on_lost is None:
        chunk_rows = map_in_pool(task, chunks, jobs, initializer, initargs)
        rows: List = [row for rows_of in chunk_rows for row in rows_of]
    else:
        rows = [LOST] * len(ordered)
        for start, chunk_rows in zip(starts, _pool_round(task, chunks, jobs, initializer, initargs)):
            if chunk_rows is not LOST:
                rows[start:start + len(chunk_rows)] = chunk_rows
        lost = [i for i, row in enumerate(rows) if row is LOST]
        if lost:
            _warn_lost(len(lost))
            for i, again in zip(lost, _pool_round(task, [[ordered[i]] for i in lost], jobs, initializer, initargs)):
                if again is not LOST:
                    rows[i] = again[0]
            lost = [i for i in lost if rows[i] is LOST]
        failed = 0
        while lost:  # one worker, in order: the first item lost is the one it died on
            results = _pool_round(task, [[ordered[i]] for i in lost], 1, initializer, initargs)
            first = next((k for k, r in enumerate(results) if r is LOST), None)
            failed += first is not None
            if failed > MAX_LOST_ITEMS:  # workers die whatever they run: not a file's doing
                from concurrent.futures.process import BrokenProcessPool

                raise BrokenProcessPool("worker processes keep dying (killed by a signal or out of memory)")
            for i, again in zip(lost, results):
                if again is not LOST:
                    rows[i] = again[0]
            if first is not None:
                rows[lost[first]] = on_lost(ordered[lost[first]])
            lost = [i for i in lost if rows[i] is LOST]
    out: List = [None] * len(items)
    for i, row in zip(order, rows):
        out[i] = row
    return out


def _warn_lost(count: int) -> None:
    try:
        print(f"torchlint: warning: a worker process died (killed by a signal or out of memory); "
              f"running the {count} file{'s' if count != 1 else ''} it left unfinished again", file=sys.stderr)
    except (OSError, ValueError):
        pass


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
