"""Fault injection (issue 13): ``--fix --unsafe-fixes`` killed at random moments never leaves a file
that is neither its original nor its fully fixed text, and the next run leaves no temporary files;
concurrent runs sharing one tree and one cache directory always report the same findings.

Short profile by default (4 kills, 8 concurrent runs: about 15 s on an idle machine);
``TORCHLINT_FAULT_RUNS`` (kills), ``TORCHLINT_FAULT_CONCURRENT_ROUNDS`` (rounds of 8 runs) and
``TORCHLINT_FAULT_COPIES`` (copies of the fixtures) for a long local run. Figures go to stderr
(``pytest -s``)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLI = [sys.executable, "-m", "torchlint", "--isolated"]
RUNS = int(os.environ.get("TORCHLINT_FAULT_RUNS", "4"))
COPIES = int(os.environ.get("TORCHLINT_FAULT_COPIES", "2"))


def _corpus(root: Path) -> dict:
    root.mkdir()
    for i in range(COPIES):
        sub = root / f"pkg{i % 3}"  # a few folders: temp files land in each
        sub.mkdir(exist_ok=True)
        for f in sorted(FIXTURES.glob("*.py")):
            shutil.copy(f, sub / f"{f.stem}_{i}.py")
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*.py")}


def _temp_files(root: Path):
    return [p for p in root.rglob(".torchlint-*")]


def _wait_for_owners(root: Path, limit: float = 10.0) -> None:
    """Until the processes named in the temporary files under ``root`` have exited (or ``limit``
    seconds): only then are their files the next run's to reap."""
    from torchlint.atomic import _pid_alive

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        pids = {int(p.name.split("-")[1]) for p in _temp_files(root) if p.name.split("-")[1].isdigit()}
        if not any(_pid_alive(pid) for pid in pids):
            return
        time.sleep(0.05)


def test_killed_fix_runs_leave_every_file_whole(tmp_path):
    originals = _corpus(tmp_path / "orig")
    reference = tmp_path / "ref"
    shutil.copytree(tmp_path / "orig", reference)
    started = time.perf_counter()
    done = subprocess.run(CLI + ["--no-cache", "--fix", "--unsafe-fixes", "-q", "."], cwd=reference,
                          capture_output=True, text=True, timeout=300)
    full = time.perf_counter() - started
    assert done.returncode in (0, 1), done.stderr
    fixed = {rel: (reference / rel).read_bytes() for rel in originals}
    assert sum(fixed[rel] != originals[rel] for rel in originals) > len(originals) // 2

    rng = random.Random(int(os.environ.get("TORCHLINT_FAULT_SEED", "13")))
    killed = checked = damaged = fixed_when_killed = leftovers = 0
    for run in range(RUNS):
        work = tmp_path / f"run{run}"
        shutil.copytree(tmp_path / "orig", work)
        sig = signal.SIGKILL if run % 2 == 0 else signal.SIGINT
        jobs = "2" if run % 4 < 2 else "1"
        proc = subprocess.Popen(CLI + ["--no-cache", "--fix", "--unsafe-fixes", "-q", "-j", jobs, "."], cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.05, full))
        if proc.poll() is None:
            proc.send_signal(sig)
            killed += 1
        _, err = proc.communicate(timeout=120)
        if sig == signal.SIGINT and proc.returncode == 130:
            assert err.strip().splitlines()[-1] == "torchlint: interrupted", err
            assert "internal error" not in err and "Traceback" not in err
        time.sleep(0.2)  # a worker the kill orphaned would write now
        for rel, original in originals.items():
            checked += 1
            now = (work / rel).read_bytes()
            if now == fixed[rel] and now != original:
                fixed_when_killed += 1
            elif now != original:
                damaged += 1
        leftovers += bool(_temp_files(work))
        _wait_for_owners(work)  # a worker the kill orphaned may still be finishing (a loaded machine)
        # The next run (a plain lint) reaps what the killed one left behind.
        subprocess.run(CLI + ["--no-cache", "-q", "."], cwd=work, capture_output=True, timeout=300)
        assert _temp_files(work) == [], f"run {run}: temporary files left after the next run"
        shutil.rmtree(work)
    print(f"\nfault injection: runs killed {killed}/{RUNS}, files checked {checked}, "
          f"files fixed before the kill {fixed_when_killed}, files damaged {damaged}, "
          f"runs that left temp files (all reaped) {leftovers}", file=sys.stderr)
    assert damaged == 0
    assert killed >= RUNS // 2


def test_concurrent_runs_share_one_tree_and_cache(tmp_path):
    _corpus(tmp_path / "tree")
    tree = tmp_path / "tree"
    cmd = CLI + ["--output-format", "json", "--exit-zero", "-j", "1", "--cache-dir", str(tmp_path / "cache"), "."]
    reference = subprocess.run(CLI + ["--output-format", "json", "--exit-zero", "--no-cache", "."], cwd=tree,
                               capture_output=True, text=True, timeout=300, check=True).stdout
    expected = json.loads(reference)
    assert expected
    rounds = int(os.environ.get("TORCHLINT_FAULT_CONCURRENT_ROUNDS", "1"))
    wrong = 0
    for round_ in range(rounds):
        if round_ % 2 == 0:
            shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # cold, then warm
        procs = [subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(8)]
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            wrong += json.loads(out) != expected
    print(f"\nconcurrent runs: {8 * rounds} runs, wrong results {wrong}", file=sys.stderr)
    assert wrong == 0
    assert _temp_files(tmp_path) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are read from /proc (Linux)")
def test_a_zombie_owner_does_not_keep_its_temporary_file(tmp_path):
    """A pool worker orphaned by a killed run can stay a zombie (a container's first process may
    reap no one): it writes nothing any more, so its file is stale."""
    from torchlint.atomic import _pid_alive, reap_stale

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _pid_alive(child.pid):
        time.sleep(0.02)  # exited, not waited for yet: a zombie
    assert Path(f"/proc/{child.pid}/stat").exists() and not _pid_alive(child.pid)
    assert _pid_alive(os.getpid())
    stale = tmp_path / f".torchlint-{child.pid}-abc.tmp"
    stale.write_text("half")
    alive = tmp_path / f".torchlint-{os.getpid()}-def.tmp"
    alive.write_text("mine")
    reap_stale(str(tmp_path))
    child.wait()
    assert not stale.exists() and alive.exists()


# -- a pool worker killed mid-run (issue 32, item 6) -------------------------------------------

def _killed_worker_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    _corpus(tree)
    for i in range(20):  # notebooks are linted in phase 3: enough of them for a pool there
        shutil.copy(FIXTURES / "notebooks" / "train.ipynb", tree / "pkg0" / f"train_nb{i}.ipynb")
    return tree


def _findings(tree: Path, *args: str, env: dict = None, jobs: str = "2"):
    done = subprocess.run(CLI + ["--output-format", "json", "--no-cache", "-j", jobs, *args, "."], cwd=tree,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    rows = sorted((d["filename"], d["code"], d["location"]["row"], d["location"]["column"])
                  for d in json.loads(done.stdout or "[]"))
    return done.returncode, rows, done.stderr


@pytest.mark.parametrize("victim", ["TL201_0.py", "train_nb7.ipynb"], ids=["phase1", "phase3"])
def test_a_worker_killed_once_loses_nothing(tmp_path, victim):
    """The out-of-memory killer takes one worker: the files it had not finished run again and the
    findings are exactly those of an undisturbed run."""
    tree = _killed_worker_tree(tmp_path)
    code, expected, _ = _findings(tree)
    assert code == 1 and expected
    env = {"TORCHLINT_TEST_KILL_WORKER": victim, "TORCHLINT_TEST_KILL_WORKER_ONCE": str(tmp_path / "killed")}
    code, found, err = _findings(tree, env=env)
    assert (tmp_path / "killed").exists()  # a worker did die
    assert code == 1, err
    assert "internal error" not in err and "torchlint: warning: a worker process died" in err
    assert found == expected


def test_a_file_that_kills_every_worker_is_reported_and_the_rest_stand(tmp_path):
    tree = _killed_worker_tree(tmp_path)
    code, expected, _ = _findings(tree)
    victim = "TL201_0.py"
    env = {"TORCHLINT_TEST_KILL_WORKER": victim}
    code, found, err = _findings(tree, env=env)
    assert code == 1, err
    assert "internal error" not in err
    others = [row for row in expected if not row[0].endswith(victim)]
    mine = [row for row in found if row[0].endswith(victim)]
    assert [row for row in found if not row[0].endswith(victim)] == others
    assert [row[1:] for row in mine] == [("TL003", 1, 1)]
    # TL003 off for it: the run still does not pass (exit 2, one line naming the file)
    code, found, err = _findings(tree, "--ignore", "TL003", env=env)
    assert code == 2
    assert [row for row in found if not row[0].endswith(victim)] == others
    assert any(line.startswith("torchlint: error:") and victim in line and "died" in line for line in err.splitlines()), err
    # one worker: the same
    code, found, err = _findings(tree, env=env, jobs="1")
    assert code == 1  # no pool with -j 1: nothing is killed (the hook is for pool workers)
