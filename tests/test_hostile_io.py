"""Hostile file-system input (issue 13): FIFOs, devices, huge and unreadable files, ``-o`` targets,
``--fix`` on files it must not rewrite or that another program saves meanwhile, killed runs,
Ctrl-C, a damaged cache, a malformed language-server stream.

Permission tests run as an unprivileged user: as root (CI), a forked child drops to ``nobody``
and calls ``torchlint.cli.main`` itself (the interpreter under /root is not readable by nobody,
so nothing may be imported after the fork; everything is imported up front)."""

from __future__ import annotations

import codecs
import difflib  # noqa: F401  (imported before dropping privileges)
import glob
import io
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import torchlint.atomic as atomic
import torchlint.cache  # noqa: F401
import torchlint.engine  # noqa: F401
import torchlint.fixer  # noqa: F401
import torchlint.reporters  # noqa: F401
import torchlint.runner  # noqa: F401
from torchlint.cli import main
from torchlint.rules import all_rules
from torchlint.source import UnreadableFile, decode_source, read_bytes
from torchlint.workers import reraise_interrupt

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BAD = "import torch.nn as nn\nm = nn.DataParallel(m)\n"  # TL701, no fix
FIXABLE = (FIXTURES / "TL903.py").read_text()  # several safe and unsafe fixes
CLI = [sys.executable, "-m", "torchlint"]
IS_ROOT = os.geteuid() == 0


def cli(*args, cwd, timeout=60, **kw):
    """Run the command in a fresh process: a hang fails the test instead of blocking it."""
    return subprocess.run(CLI + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture
def shared_dir():
    """A folder an unprivileged user can enter (pytest's tmp_path lives under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="torchlint-hostile-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    for p in path.rglob("*"):  # let rmtree into folders a test locked
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


def as_unprivileged(argv, cwd):
    """(exit code, stdout, stderr) of ``torchlint argv`` run by an unprivileged user: as root,
    a forked child that switches to ``nobody``; otherwise the current (unprivileged) user."""
    from torchlint.reporters import get_renderer

    all_rules()
    for fmt in ("concise", "full"):  # the full format imports rich lazily
        get_renderer(fmt)
    _fixed(FIXABLE)  # the parser's native module, the fixer's imports
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 99
        try:
            os.close(out_r)
            os.close(err_r)
            if IS_ROOT:
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            os.chdir(cwd)
            sys.stdout = io.TextIOWrapper(os.fdopen(out_w, "wb"), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(err_w, "wb"), write_through=True)
            code = main(list(argv))
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException as exc:
            os.write(err_w, f"child failed: {exc!r}".encode())
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    with os.fdopen(out_r) as out, os.fdopen(err_r) as err:
        stdout, stderr = out.read(), err.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), stdout, stderr


# -- only regular files are read ----------------------------------------------------------------

@pytest.mark.parametrize("fix", [False, True], ids=["lint", "fix"])
def test_fifo_and_device_symlink_are_skipped_with_a_message_never_read(tmp_path, fix):
    (tmp_path / "a.py").write_text(BAD)
    os.mkfifo(tmp_path / "x.py")
    (tmp_path / "z.py").symlink_to("/dev/zero")
    args = ["--isolated", "--no-cache", "--output-format", "concise", "."] + (["--fix"] if fix else [])
    done = cli(*args, cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "x.py:1:1: TL002 Cannot read file: not a regular file (a FIFO); skipped" in lines
    assert "z.py:1:1: TL002 Cannot read file: not a regular file (a character device); skipped" in lines
    assert any(line.startswith("a.py:2:5: TL701") for line in lines)
    assert "All checks passed" not in done.stdout + done.stderr


def test_fifo_named_on_the_command_line_is_reported_not_dropped(tmp_path):
    os.mkfifo(tmp_path / "x.py")
    done = cli("--isolated", "--no-cache", "--output-format", "concise", "x.py", cwd=tmp_path, timeout=30)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["x.py:1:1: TL002 Cannot read file: not a regular file (a FIFO); skipped"]


def test_read_bytes_refuses_special_files_and_bounds_reads(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, kind in ((tmp_path / "fifo", "a FIFO"), ("/dev/zero", "a character device"), (tmp_path, "a folder")):
        with pytest.raises(UnreadableFile, match=f"not a regular file \\({kind}\\)"):
            read_bytes(str(path))
    big = tmp_path / "big.py"
    big.write_bytes(b"x = 1\n" * 100)
    assert read_bytes(str(big), 600)[0] == b"x = 1\n" * 100
    with pytest.raises(UnreadableFile, match=r"file too large \(600 bytes; max-file-size is 599\)"):
        read_bytes(str(big), 599)


def test_max_file_size_default_and_config_key(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open(tmp_path / "huge.py", "wb") as fh:  # sparse: 11 MB without writing them
        fh.truncate(11 * 1024 * 1024)
    (tmp_path / "small.py").write_text(BAD)
    assert main(["--no-cache", "--output-format", "concise", "."]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "huge.py:1:1: TL002 Cannot read file: file too large (11,534,336 bytes; max-file-size is 10,485,760); skipped" in out
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nmax-file-size = 20\n")
    assert main(["--no-cache", "--output-format", "concise", "small.py"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "small.py:1:1: TL002 Cannot read file: file too large (45 bytes; max-file-size is 20); skipped"
    ]
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nmax-file-size = 0\n")  # no limit
    os.unlink(tmp_path / "huge.py")
    assert main(["--no-cache", "--output-format", "concise", "small.py"]) == 1
    assert "TL701" in capsys.readouterr().out
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nmax-file-size = "big"\n')
    assert main(["--no-cache", "small.py"]) == 2
    assert "max-file-size: expected a number of bytes" in capsys.readouterr().err


def test_unreadable_subfolder_is_reported_as_unprivileged_user(shared_dir):
    (shared_dir / "ok.py").write_text("x = 1\n")
    locked = shared_dir / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(BAD)
    locked.chmod(0o700 if IS_ROOT else 0o000)  # root owns it: nobody cannot list it
    code, out, err = as_unprivileged(["--isolated", "--no-cache", "--output-format", "concise", "-j", "1", "."], shared_dir)
    assert code == 1, err
    assert out.splitlines() == ["locked:1:1: TL002 Cannot read file: cannot list folder: Permission denied"]
    assert "All checks passed" not in err


def test_unreadable_file_as_unprivileged_user(shared_dir):
    secret = shared_dir / "secret.py"
    secret.write_text(BAD)
    secret.chmod(0o600 if IS_ROOT else 0o000)
    code, out, err = as_unprivileged(["--isolated", "--no-cache", "--output-format", "concise", "secret.py"], shared_dir)
    assert code == 1, err
    assert out.splitlines() == ["secret.py:1:1: TL002 Cannot read file: Permission denied"]


@pytest.mark.parametrize("data, reason", [
    ("x = 1\n".encode("utf-16"), "UTF-16/UTF-32 encoded file"),
    (b"x = 1\n" * 5000 + b"\0\n", "binary file (contains NUL bytes)"),  # late NUL: same as early
    (b"x=1\0\n", "binary file (contains NUL bytes)"),
    (codecs.BOM_UTF8 + b"# -*- coding: latin-1 -*-\nx = 1\n", "byte order mark contradicts its coding declaration"),
])
def test_files_python_rejects_are_unreadable(data, reason):
    with pytest.raises(UnreadableFile, match=reason.replace("(", r"\(").replace(")", r"\)")):
        decode_source(data)


def test_bom_with_utf8_cookie_is_fine():
    assert decode_source(codecs.BOM_UTF8 + b"# coding: utf-8\nx = 1\n").text == "# coding: utf-8\nx = 1\n"


# -- -o PATH ------------------------------------------------------------------------------------

def _report(tmp_path, target, *extra):
    (tmp_path / "a.py").write_text(BAD)
    return cli("--isolated", "--no-cache", "--output-format", "json", "-o", str(target), "a.py", *extra, cwd=tmp_path)


def test_output_to_dev_null_keeps_the_device(tmp_path):
    done = _report(tmp_path, "/dev/null")
    assert done.returncode == 1, done.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_into_a_fifo_with_and_without_reader(tmp_path):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    done = _report(tmp_path, fifo)  # nobody reads: an error, not a hang, and still a FIFO
    assert done.returncode == 2 and "FIFO has no reader" in done.stderr
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    time.sleep(0.2)
    done = _report(tmp_path, fifo)
    assert done.returncode == 1, done.stderr
    assert json.loads(reader.communicate(timeout=30)[0])[0]["code"] == "TL701"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_through_a_symlink_writes_its_target(tmp_path):
    (tmp_path / "real.json").write_text("old")
    os.chmod(tmp_path / "real.json", 0o640)
    (tmp_path / "link.json").symlink_to("real.json")
    assert _report(tmp_path, "link.json").returncode == 1
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text())[0]["code"] == "TL701"
    assert stat.S_IMODE(os.stat(tmp_path / "real.json").st_mode) == 0o640
    (tmp_path / "dangling.json").symlink_to("made.json")
    assert _report(tmp_path, "dangling.json").returncode == 1
    assert (tmp_path / "dangling.json").is_symlink() and (tmp_path / "made.json").is_file()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_report_file_honours_umask(tmp_path, umask, mode):
    (tmp_path / "a.py").write_text(BAD)
    done = subprocess.run(
        CLI + ["--isolated", "--no-cache", "-o", "new.json", "a.py"], cwd=tmp_path, capture_output=True,
        text=True, timeout=60, preexec_fn=lambda: os.umask(umask),
    )
    assert done.returncode == 1, done.stderr
    assert stat.S_IMODE(os.stat(tmp_path / "new.json").st_mode) == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".torchlint-")] == []


@pytest.mark.parametrize("target, message", [
    (".", "is a folder"),
    ("missing/report.json", "folder missing does not exist"),
])
def test_output_to_a_folder_or_missing_folder_is_one_line_exit_2(tmp_path, target, message):
    done = _report(tmp_path, target)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"torchlint: error: cannot write report to {target}: {message}"]


def test_output_to_read_only_file_is_refused(tmp_path):
    (tmp_path / "ro.json").write_text("keep")
    os.chmod(tmp_path / "ro.json", 0o444)
    done = _report(tmp_path, "ro.json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cannot write report to ro.json: permission denied" in done.stderr
    assert (tmp_path / "ro.json").read_text() == "keep"


def test_output_to_unwritable_file_as_unprivileged_user(shared_dir):
    (shared_dir / "a.py").write_text(BAD)
    (shared_dir / "root.json").write_text("keep")
    (shared_dir / "root.json").chmod(0o644 if IS_ROOT else 0o444)
    code, out, err = as_unprivileged(["--isolated", "--no-cache", "-o", "root.json", "a.py"], shared_dir)
    assert code == 2, err
    assert err.strip().splitlines() == [
        "torchlint: error: cannot write report to root.json: permission denied (file is not writable)"
    ]
    assert (shared_dir / "root.json").read_text() == "keep"


# -- --fix: owner, mode, read-only, racing writers ------------------------------------------------

def _fixed(text: str) -> str:
    from torchlint.config import SettingsResolver
    from torchlint.fixer import fix_text

    return fix_text(text, "x.py", SettingsResolver(isolated=True).default, unsafe=True).text


def test_fix_keeps_owner_and_mode(shared_dir):
    path = shared_dir / "m.py"
    path.write_text(FIXABLE)
    path.chmod(0o640)
    uid = pwd.getpwnam("nobody").pw_uid if IS_ROOT else os.getuid()
    gid = pwd.getpwnam("nobody").pw_gid if IS_ROOT else os.getgid()
    if IS_ROOT:
        os.chown(path, uid, gid)
    done = cli("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "m.py", cwd=shared_dir)
    assert done.returncode in (0, 1), done.stderr
    st = os.stat(path)
    assert path.read_text() == _fixed(FIXABLE) != FIXABLE
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o640)


def test_fix_refuses_read_only_file(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(FIXABLE)
    path.chmod(0o444)
    done = cli("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "m.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "torchlint: error: m.py: file is read-only (mode 0444); file left unchanged" in done.stderr
    assert path.read_text() == FIXABLE and stat.S_IMODE(os.stat(path).st_mode) == 0o444


@pytest.mark.skipif(not IS_ROOT, reason="needs another user's file: only root can create one")
def test_fix_as_unprivileged_user_refuses_a_file_whose_owner_it_cannot_keep(shared_dir):
    path = shared_dir / "m.py"
    path.write_text(FIXABLE)
    path.chmod(0o666)  # writable by nobody, owned by root, in a folder nobody may write
    code, out, err = as_unprivileged(
        ["--isolated", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", "-j", "1", "m.py"], shared_dir
    )
    assert code == 2, err
    assert "m.py: cannot keep the file's owner (uid 0, gid 0); file left unchanged" in err
    assert path.read_text() == FIXABLE and os.stat(path).st_uid == 0
    assert [p.name for p in shared_dir.iterdir() if p.name.startswith(".torchlint-")] == []


def _prepare(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(FIXABLE)
    data, st = read_bytes(str(path))
    return path, data, st, _fixed(FIXABLE).encode()


def test_save_before_the_recheck_is_detected(tmp_path):
    path, data, st, new = _prepare(tmp_path)
    path.write_text(FIXABLE.replace("\n", "\n\n", 1))
    with pytest.raises(atomic.WriteRefused, match="changed on disk"):
        atomic.replace_if_unchanged(str(path), new, data, st)
    assert path.read_text() == FIXABLE.replace("\n", "\n\n", 1)


@pytest.mark.parametrize("style", ["rename", "in-place"])
def test_save_between_recheck_and_rename_is_given_back(tmp_path, monkeypatch, style):
    """Another program saves after torchlint's last check, before its rename: the exchange puts
    that save back (rename-style editors, and in-place writes that land before the swap)."""
    path, data, st, new = _prepare(tmp_path)
    edit = FIXABLE + "# the user's edit\n"
    real_exchange = atomic._exchange
    calls = []

    def racing_exchange(a, b):
        if not calls:
            if style == "rename":
                (tmp_path / "editor.tmp").write_text(edit)
                os.replace(tmp_path / "editor.tmp", path)
            else:
                path.write_text(edit)
        calls.append((a, b))
        return real_exchange(a, b)

    monkeypatch.setattr(atomic, "_exchange", racing_exchange)
    with pytest.raises(atomic.WriteRefused, match="changed on disk"):
        atomic.replace_if_unchanged(str(path), new, data, st)
    assert calls, "no renameat2(RENAME_EXCHANGE) here"
    assert path.read_text() == edit
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]


def test_exchange_is_available_on_this_linux(tmp_path):
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    assert atomic._exchange(str(tmp_path / "a"), str(tmp_path / "b")) is True
    assert (tmp_path / "a").read_text() == "b" and (tmp_path / "b").read_text() == "a"


def test_background_writer_never_loses_an_edit(tmp_path):
    """fix_file against a writer saving at random moments around the end of the fix: every
    user save survives (the issue measured 4 losses in 80 runs before)."""
    import random

    from torchlint.config import SettingsResolver
    from torchlint.commands.fix import fix_file

    settings = SettingsResolver(isolated=True).default
    path = tmp_path / "f.py"
    path.write_text(FIXABLE)
    started = time.perf_counter()
    fix_file(str(path), settings, True, True)
    duration = time.perf_counter() - started
    rng = random.Random(13)
    trials = int(os.environ.get("TORCHLINT_RACE_TRIALS", "30"))
    lost = []
    for i in range(trials):
        path.write_text(FIXABLE)
        edit = FIXABLE + f"# user edit {i}\n"
        delay = rng.uniform(0.6 * duration, 1.1 * duration)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the writer
            try:
                time.sleep(delay)
                if i % 2:
                    with open(f"{path}.editor", "w") as fh:
                        fh.write(edit)
                    os.replace(f"{path}.editor", path)
                else:
                    with open(path, "w") as fh:
                        fh.write(edit)
            finally:
                os._exit(0)
        fix_file(str(path), settings, True, True)
        os.waitpid(pid, 0)
        if "# user edit" not in path.read_text():
            lost.append(i)
    assert lost == []


# -- temporary files, killed runs, Ctrl-C ---------------------------------------------------------

def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_stale_temp_files_are_reaped_only_when_their_process_is_gone(tmp_path):
    (tmp_path / "a.py").write_text(BAD)
    dead = tmp_path / f".torchlint-{_dead_pid()}-abc123.tmp"
    alive = tmp_path / f".torchlint-{os.getpid()}-def456.tmp"
    old_style = tmp_path / ".torchlint-k2j3h4.tmp"
    fresh_old_style = tmp_path / ".torchlint-zz9x8y.tmp"
    user_file = tmp_path / ".torchlint-notes.txt"
    for p in (dead, alive, old_style, fresh_old_style, user_file):
        p.write_text("partial")
    os.utime(old_style, (time.time() - 2 * atomic.STALE_AFTER_S,) * 2)
    done = cli("--isolated", "--no-cache", ".", cwd=tmp_path)
    assert done.returncode == 1
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["a.py", alive.name, fresh_old_style.name, user_file.name])


def test_fix_reaps_temp_files_next_to_files_named_explicitly(tmp_path):
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "m.py").write_text(FIXABLE)
    dead = sub / f".torchlint-{_dead_pid()}-abc123.tmp"
    dead.write_text("partial")
    cli("--isolated", "--no-cache", "--fix", "pkg/m.py", cwd=tmp_path)
    assert not dead.exists()


def _children(pid: int):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _corpus(root: Path, copies: int) -> None:
    for i in range(copies):
        for f in sorted(FIXTURES.glob("*.py")):
            shutil.copy(f, root / f"{f.stem}_{i}.py")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find the workers")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_pool_workers_die_with_the_parent(tmp_path, sig):
    _corpus(tmp_path, 15)
    proc = subprocess.Popen(CLI + ["--isolated", "--no-cache", "--fix", "--unsafe-fixes", "-j", "2", "."],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    deadline = time.time() + 30
    while len(workers) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        workers = _children(proc.pid)
    assert workers, "the run ended before its pool started"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f"/proc/{w}") and _state(w) != "Z" for w in workers):
        time.sleep(0.05)
    assert [w for w in workers if os.path.exists(f"/proc/{w}") and _state(w) != "Z"] == []
    snapshot = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.py")}
    time.sleep(1.0)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.py")} == snapshot  # nobody writes on


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_exits_130_with_one_line(tmp_path, jobs):
    _corpus(tmp_path, 15)
    proc = subprocess.Popen(CLI + ["--isolated", "--no-cache", "--fix", "--unsafe-fixes", "-j", jobs, "."],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # past start-up: inside the rules, the positions code or the pool
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "torchlint: interrupted"
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("body, code, err", [
    ("return 130", 130, ""),  # main saw Ctrl-C: the process ends with 130, SIGINT ignored
    ("raise KeyboardInterrupt", 130, "torchlint: interrupted"),  # a second Ctrl-C escaping main
    ("return 1", 1, ""),
])
def test_the_command_exits_with_mains_code(body, code, err):
    """``torchlint.cli.run`` (the console script and ``python -m torchlint``) exits with
    ``main``'s code through ``os._exit``, and with 130 after Ctrl-C even if another SIGINT
    arrives once it is handled."""
    script = ("import os, signal, sys\nimport torchlint.cli as cli\n"
              f"def main():\n    print('report')\n    {body}\n"
              "cli.main = main\n"
              "real_exit = os._exit\n"
              "def exit_once_ignored(code):\n"
              "    if code == 130:\n"
              "        os.kill(os.getpid(), signal.SIGINT)  # ignored by now\n"
              "    real_exit(code)\n"
              "os._exit = exit_once_ignored\n"
              "cli.run()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.strip() == err
    assert proc.stdout == "report\n"  # flushed before the process ends


def test_keyboard_interrupt_replaced_by_an_exception_is_reraised():
    try:
        try:
            raise KeyboardInterrupt
        finally:
            {}["missing"]  # what positions' finally used to do
    except KeyError as exc:
        with pytest.raises(KeyboardInterrupt):
            reraise_interrupt(exc)
    reraise_interrupt(ValueError("an ordinary bug"))  # no interrupt in its context: returns


def test_internal_error_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    import torchlint.discovery

    def broken(*a, **k):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(torchlint.discovery, "discover", broken)
    monkeypatch.chdir(tmp_path)
    assert main(["--isolated", "."]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["torchlint: internal error: RuntimeError: boom (set TORCHLINT_TRACEBACK=1 for the traceback)"]


# -- the cache -------------------------------------------------------------------------------------

def _cached_run(tmp_path, capsys):
    assert main(["--isolated", "--output-format", "concise", "--cache-dir", str(tmp_path / "cache"), "a.py"]) == 1
    return capsys.readouterr().out.splitlines()


def test_forged_or_mistyped_cache_entries_are_recomputed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(BAD)
    expected = _cached_run(tmp_path, capsys)
    assert expected and "TL701" in expected[0]
    [index] = (tmp_path / "cache" / "v1").glob("*.json")
    data = json.loads(index.read_text())
    for forged in (
        lambda row: row[:4] + [[]],  # the old 5-field layout, findings emptied
        lambda row: row[:4] + [[], row[5]],  # findings emptied, old checksum kept
        lambda row: row[:4] + [[dict(row[4][0], location={"row": "2", "column": 5})], row[5]],
    ):
        bad = dict(data, files={k: forged(v) for k, v in data["files"].items()})
        index.write_text(json.dumps(bad))
        assert _cached_run(tmp_path, capsys) == expected


def test_checksum_also_covers_a_well_typed_wrong_location(tmp_path, capsys, monkeypatch):
    from torchlint.cache import entry_checksum

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(BAD)
    expected = _cached_run(tmp_path, capsys)
    [index] = (tmp_path / "cache" / "v1").glob("*.json")
    data = json.loads(index.read_text())
    (key, row), = data["files"].items()
    row[4][0]["location"] = {"row": 99, "column": 1}
    index.write_text(json.dumps(data))
    assert _cached_run(tmp_path, capsys) == expected
    assert entry_checksum(key, *row[:5]) != row[5]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_cache_index_that_is_a_fifo_or_device_is_ignored(tmp_path, capsys, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(BAD)
    expected = _cached_run(tmp_path, capsys)
    [index] = (tmp_path / "cache" / "v1").glob("*.json")
    index.unlink()
    if kind == "fifo":
        os.mkfifo(index)
    else:
        index.symlink_to("/dev/zero")
    done = cli("--isolated", "--output-format", "concise", "--cache-dir", "cache", "a.py", cwd=tmp_path, timeout=60)
    assert done.stdout.splitlines() == expected and done.returncode == 1
    assert stat.S_ISCHR(os.stat("/dev/zero").st_mode)


# -- the language server's input stream -----------------------------------------------------------

def _message(obj, length=None) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


def _messages(stream: bytes):
    from torchlint.server import FramedReader

    reader = FramedReader(io.BytesIO(stream))
    got = []
    while True:
        header = reader.readline()
        if not header:
            return got, reader.malformed
        assert reader.readline() == b"\r\n"
        length = int(header.split(b":")[1])
        got.append(json.loads(reader.read(length)))


@pytest.mark.parametrize("bad", [
    b"Content-Length: abc\r\n\r\n{\"id\": 0}",
    b"Content-Length: -5\r\n\r\n{\"id\": 0}",
    b"Content-Length: 99999999999\r\n\r\n{\"id\": 0}",
    b"Content-Type: x\r\n\r\n{\"id\": 0}",  # no Content-Length at all
    b"Content-Length: 30\r\n\r\n{\"id\": 0}",  # too long: swallows the next header
])
def test_server_resyncs_after_a_malformed_header(bad):
    got, malformed = _messages(bad + _message({"id": 1}) + _message({"id": 2}))
    assert malformed >= 1
    assert got[-1] == {"id": 2} and {"id": 0} not in got


def test_server_reader_ends_cleanly_on_a_truncated_body():
    got, _ = _messages(_message({"id": 1}) + b"Content-Length: 100\r\n\r\n{\"id\":")
    assert got == [{"id": 1}]


def test_server_keeps_answering_after_a_malformed_header(tmp_path):
    pytest.importorskip("pygls")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    shutdown = {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}
    stream = b"Content-Length: abc\r\n\r\n" + json.dumps(init).encode() + _message(init) + _message(shutdown)
    stream += _message({"jsonrpc": "2.0", "method": "exit", "params": None})
    done = subprocess.run(CLI + ["server"], input=stream, capture_output=True, timeout=60)
    assert b'"id":2' in done.stdout.replace(b" ", b"") and b'"id":1' in done.stdout.replace(b" ", b"")
    assert b"malformed message from the client" in done.stderr


def test_cached_file_replaced_by_a_fifo_is_not_read(tmp_path, monkeypatch):
    from torchlint.cache import Cache, content_hash
    from torchlint.config import SettingsResolver

    monkeypatch.chdir(tmp_path)
    settings = SettingsResolver(isolated=True).default
    (tmp_path / "a.py").write_text("")
    cache = Cache(str(tmp_path / "cache"))
    cache.store("a.py", settings, os.stat("a.py"), content_hash(b""), [])
    os.unlink("a.py")
    os.mkfifo("a.py")  # same size (0), another mtime: the cache would compare contents
    signal.alarm(20)  # a hang fails the test instead of blocking the suite
    try:
        assert cache.lookup("a.py", settings)[0] is None
    finally:
        signal.alarm(0)
