"""Safe file writes: a temporary file in the same folder, then a rename over the target.

Three writers use it: the cache (``atomic_write_bytes``), ``--fix`` (``replace_if_unchanged``: the
file keeps its owner and mode, read-only files are refused, and a save by another program that
races the rename is detected and left intact) and ``-o`` (``write_report``: never replaces a
device, FIFO or symlink).

Temporary files are named ``.torchlint-<pid>-<random>.tmp``. A run killed with SIGKILL leaves
its temporary file behind; ``reap_stale`` (called by later runs on the folders they visit)
removes those whose process is gone.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from typing import Any, Iterable, Optional

TMP_PREFIX = ".torchlint-"
TMP_SUFFIX = ".tmp"
_TMP_NAME = re.compile(r"\.torchlint-(?:(\d+)-)?[\w-]+\.tmp\Z")
#: A temporary file whose process may still exist (pid reused, or another PID namespace) is
#: only reaped once it is this old; no torchlint write takes that long.
STALE_AFTER_S = 3600


class WriteRefused(OSError):
    """The write was refused (read-only file, owner that cannot be kept, racing writer); the
    message is one line and the target is untouched."""


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mkstemp(directory: str):
    return tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=TMP_SUFFIX, dir=directory)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def atomic_write_bytes(path: str, data: bytes, mode: "int | None" = None) -> None:
    """Replace ``path`` by a file holding ``data``. The mode is ``mode``, else the existing file's,
    else what the umask allows a new file (as ``open`` would)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _mkstemp(directory)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
            if mode is None:
                try:
                    mode = os.stat(path).st_mode & 0o7777
                except OSError:
                    mode = 0o666 & ~current_umask()
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def atomic_write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


# -- --fix: replace a file only if nobody else wrote it meanwhile --------------------------------

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2: Any = None  # renameat2 from libc, False where there is none


def _exchange(a: str, b: str) -> bool:
    """Atomically swap the files at ``a`` and ``b`` (Linux ``renameat2(RENAME_EXCHANGE)``).
    False where the OS or filesystem cannot; raises OSError for other failures."""
    import ctypes  # here: only --fix gets this far, and ctypes costs a run's start-up 2 ms

    global _renameat2
    if _renameat2 is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (AttributeError, OSError):  # not glibc >= 2.28 / not Linux
            _renameat2 = False
    if _renameat2 is False:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def _same_file(path: str, expected: os.stat_result, data: bytes) -> bool:
    """``path`` is still the very file ``data`` was read from: same inode, size, mtime, bytes."""
    from torchlint.source import UnreadableFile, read_bytes

    try:
        current, st = read_bytes(path, len(data) + 1)
    except (UnreadableFile, OSError):
        return False
    return (
        (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        == (expected.st_dev, expected.st_ino, expected.st_size, expected.st_mtime_ns)
        and current == data
    )


def writable_problem(st: os.stat_result, path: str) -> Optional[str]:
    """Why ``--fix`` must not rewrite the file with stat ``st``, or None."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not st.st_mode & 0o222:  # read-only for everyone: a choice, even when root could write
        return f"file is read-only (mode {st.st_mode & 0o7777:04o})"
    if not os.access(path, os.W_OK):
        return "file is not writable (permission denied)"
    return None


def replace_if_unchanged(path: str, new: bytes, data: bytes, expected: os.stat_result, still_allowed=None) -> None:
    """Replace the file at ``path`` (a symlink's target, never the link) with ``new``, unless it
    is no longer the file ``data`` was read from (stat ``expected``). Keeps the owner, group
    and mode. Raises ``WriteRefused`` or ``OSError``; the file is then untouched.

    The order closes the race with other writers as far as the OS allows: the temporary file is
    written and synced first; the original is re-checked (inode, size, mtime, bytes) just
    before the rename; on Linux the rename is an atomic *exchange*, after which the file swapped
    out is checked once more, and if another program saved in between, its file is swapped back.
    ``still_allowed()`` (a pool worker: is the parent alive?) is asked right before renaming."""
    target = os.path.realpath(path)
    problem = writable_problem(expected, target)
    if problem:
        raise WriteRefused(problem)
    fd, tmp = _mkstemp(os.path.dirname(target))
    try:
        try:
            _write_all(fd, new)
            tmp_st = os.fstat(fd)
            if (tmp_st.st_uid, tmp_st.st_gid) != (expected.st_uid, expected.st_gid):
                try:
                    os.fchown(fd, expected.st_uid, expected.st_gid)
                except PermissionError:
                    raise WriteRefused(
                        f"cannot keep the file's owner (uid {expected.st_uid}, gid {expected.st_gid})"
                    ) from None
            os.fchmod(fd, expected.st_mode & 0o7777)  # after chown, which clears set-id bits
            os.fsync(fd)
            ours = os.fstat(fd)
        finally:
            os.close(fd)
        if still_allowed is not None and not still_allowed():
            raise WriteRefused("interrupted")
        if not _same_file(target, expected, data):
            raise WriteRefused("file changed on disk while it was being fixed")
        if not _exchange(tmp, target):
            os.replace(tmp, target)  # no exchange on this OS: the re-check above is the guard
            return
        # ``tmp`` now names whatever was at ``target`` at the instant of the swap.
        if _same_file(tmp, expected, data):
            _unlink_quietly(tmp)
            return
        _give_back(tmp, target, ours)
        raise WriteRefused("file changed on disk while it was being fixed")
    except BaseException:
        try:
            if os.stat(tmp).st_ino == os.stat(target).st_ino:
                raise OSError  # never delete the only name of a file
        except OSError:
            pass
        else:
            _unlink_quietly(tmp)
        raise


def _give_back(tmp: str, target: str, ours: os.stat_result) -> None:
    """Another program saved ``target`` between the re-check and the swap: put its file back."""
    try:
        at_target = os.stat(target)
    except OSError:
        return
    if (at_target.st_dev, at_target.st_ino) != (ours.st_dev, ours.st_ino):
        return  # someone replaced our file already; theirs stays
    _exchange(tmp, target)
    try:
        back = os.stat(tmp)
    except OSError:
        return
    if (back.st_dev, back.st_ino) == (ours.st_dev, ours.st_ino):
        _unlink_quietly(tmp)
    else:  # a third save landed during the swap back: keep it, never delete a user's file
        os.rename(tmp, target + ".torchlint-conflict")


# -- -o PATH ---------------------------------------------------------------------------------

def write_report(path: str, data: bytes) -> None:
    """Write a report to ``path`` without ever replacing something that is not a regular file.

    A symlink is written through (its target gets the report; a dangling one is created). A
    regular file is replaced atomically, keeping its mode (and owner, where allowed; else it is
    written in place). A character device (``/dev/null``, a terminal) or a FIFO is written
    into, as a shell's ``>`` would; a FIFO with no reader is an error, not a hang. A folder,
    socket or block device is refused. A new file gets the mode the umask allows.
    Raises ``OSError`` (``WriteRefused``) with a one-line reason."""
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is None:
        directory = os.path.dirname(target)
        if not os.path.isdir(directory):
            raise WriteRefused(f"folder {os.path.dirname(os.path.abspath(path)) or '.'} does not exist")
        _write_new(target, data)
    elif stat.S_ISREG(st.st_mode):
        if not os.access(target, os.W_OK) or not st.st_mode & 0o222:
            raise PermissionError(errno.EACCES, "permission denied (file is not writable)", path)
        try:
            _replace_keeping_owner(target, data, st)
        except PermissionError:  # an unwritable folder or an owner we cannot keep: in place
            _write_into(target, data, os.O_TRUNC)
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        _write_into(target, data, 0)
    elif stat.S_ISDIR(st.st_mode):
        raise WriteRefused(errno.EISDIR, "is a folder", path)
    else:
        raise WriteRefused(errno.EINVAL, "not a regular file, terminal or FIFO; refusing to write", path)


def _write_new(target: str, data: bytes) -> None:
    fd, tmp = _mkstemp(os.path.dirname(target))
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, 0o666 & ~current_umask())
        finally:
            os.close(fd)
        try:
            os.link(tmp, target)  # fails if something appeared at the path meanwhile
        except FileExistsError:
            raise WriteRefused(errno.EEXIST, "appeared while the report was written; not replaced", target)
        except OSError:  # a filesystem without hard links
            os.rename(tmp, target)
    finally:
        _unlink_quietly(tmp)


def _replace_keeping_owner(target: str, data: bytes, st: os.stat_result) -> None:
    fd, tmp = _mkstemp(os.path.dirname(target))
    try:
        try:
            _write_all(fd, data)
            own = os.fstat(fd)
            if (own.st_uid, own.st_gid) != (st.st_uid, st.st_gid):
                os.fchown(fd, st.st_uid, st.st_gid)
            os.fchmod(fd, st.st_mode & 0o7777)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _write_into(target: str, data: bytes, extra: int) -> None:
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | extra
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise WriteRefused(errno.ENXIO, "FIFO has no reader", target) from None
        raise
    try:
        os.set_blocking(fd, True)  # O_NONBLOCK was only for opening a FIFO without a reader
        _write_all(fd, data)
    finally:
        os.close(fd)


# -- temporary files left by killed runs ------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process that has exited and waits to be reaped (a pool worker orphaned by a killed run,
    in a container whose first process reaps no one): it writes nothing any more. Linux only."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] == b"Z"  # the state follows the command's closing bracket


def reap_stale(directory: str, names: Optional[Iterable[str]] = None) -> int:
    """Remove torchlint temporary files in ``directory`` whose process is gone (or, if it may
    still exist, older than ``STALE_AFTER_S``). ``names``: the folder's listing, if known.
    Returns how many were removed; never raises."""
    removed = 0
    try:
        if names is None:
            names = os.listdir(directory)
        now = time.time()
        for name in names:
            match = _TMP_NAME.match(name) if name.startswith(TMP_PREFIX) else None
            if not match:
                continue
            path = os.path.join(directory, name)
            pid = int(match.group(1)) if match.group(1) else None
            if pid == os.getpid():
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if pid is not None and not _pid_alive(pid) or now - st.st_mtime > STALE_AFTER_S:
                try:
                    os.unlink(path)
                    removed += 1
                except OSError:
                    pass
    except OSError:
        pass
    return removed
