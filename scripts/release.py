#!/usr/bin/env python3
"""Build and check a torchlint release in one command.

    pip install -e ".[release]"        # build and twine
    python scripts/release.py          # build dist/, check it; prints the upload command
    python scripts/release.py --upload # the same, then ``twine upload`` (needs PyPI credentials)

Steps, each stopping the release with a one-line reason when it fails:

1. the version, read from its one place: ``__version__`` in ``torchlint/__init__.py``
   (``pyproject.toml`` takes it from there: ``[tool.setuptools.dynamic]``);
2. ``python -m build``: the sdist, then the wheel built from that sdist (so the sdist is
   known to be complete), into an empty ``--outdir`` (default ``dist/``);
3. exactly ``torchlint-VERSION.tar.gz`` and ``torchlint-VERSION-py3-none-any.whl`` are there;
   ``twine check --strict`` on both (metadata, the README renders on PyPI);
4. the wheel installed into a new virtual environment (nothing of this checkout on its path):
   ``torchlint --version`` prints VERSION, ``torchlint rule TL701`` finds its page inside the
   wheel, and ``torchlint fixtures/`` exits 1 with findings, as the checkout's own run does.

Exit status: 0 when the release is ready (or uploaded), 1 when a step failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = ROOT / "torchlint" / "__init__.py"
_VERSION = re.compile(r'^__version__\s*=\s*["\']([^"\']+)["\']\s*$', re.MULTILINE)
_FOUND = re.compile(r"^Found (\d+) findings?\b", re.MULTILINE)


class ReleaseError(Exception):
    """A step failed: the message says which and why (one line)."""


def read_version(path: Path = VERSION_FILE) -> str:
    match = _VERSION.search(path.read_text(encoding="utf-8"))
    if match is None:
        raise ReleaseError(f"no __version__ = \"...\" line in {path}")
    return match.group(1)


def _run(command: Sequence[str], step: str, cwd: Optional[Path] = None, env: Optional[dict] = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    print(f"release: {step}: {' '.join(str(part) for part in command)}", flush=True)
    started = time.perf_counter()
    try:
        proc = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise ReleaseError(f"{step}: cannot run {command[0]}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"{step}: no answer after {timeout:.0f} s") from None
    print(f"release: {step}: exit {proc.returncode} in {time.perf_counter() - started:.1f} s", flush=True)
    return proc


def _tail(proc: subprocess.CompletedProcess, lines: int = 15) -> str:
    text = (proc.stdout or "") + (proc.stderr or "")
    return "\n".join(text.strip().splitlines()[-lines:])


def _require(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ReleaseError(f"{module} is not installed: pip install -e \".[release]\"")


def build(outdir: Path, version: str, isolation: bool = True) -> List[Path]:
    _require("build")
    if outdir.exists():
        if not outdir.is_dir():
            raise ReleaseError(f"--outdir {outdir} is not a folder")
        if any(outdir.iterdir()):
            shutil.rmtree(outdir)  # only this release's files may be checked and uploaded
    outdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "build", "--outdir", outdir, ROOT]
    if not isolation:  # the build backend from this environment, not a fresh one per build
        command.insert(3, "--no-isolation")
    proc = _run(command, "build sdist and wheel", cwd=ROOT)
    if proc.returncode != 0:
        raise ReleaseError("python -m build failed:\n" + _tail(proc))
    expected = {f"torchlint-{version}.tar.gz", f"torchlint-{version}-py3-none-any.whl"}
    found = {path.name for path in outdir.iterdir()}
    if found != expected:
        raise ReleaseError(f"expected {sorted(expected)} in {outdir}, found {sorted(found)}")
    return [outdir / name for name in sorted(expected)]


def twine_check(files: Sequence[Path]) -> None:
    _require("twine")
    proc = _run([sys.executable, "-m", "twine", "check", "--strict", *files], "twine check")
    if proc.returncode != 0:
        raise ReleaseError("twine check failed:\n" + _tail(proc))


def _venv_bin(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def check_installed_wheel(wheel: Path, version: str, fixtures: Path = ROOT / "fixtures") -> int:
    """Install ``wheel`` into a new venv and run its CLI; the number of findings on the fixtures."""
    with tempfile.TemporaryDirectory(prefix="torchlint-release-") as scratch:
        venv = Path(scratch) / "venv"
        # Without its own pip (ensurepip is the slow part of a venv): this interpreter's pip
        # installs into it (``pip --python``, pip 22.3+), and pip is not among what it holds.
        proc = _run([sys.executable, "-m", "venv", "--without-pip", venv], "clean venv")
        if proc.returncode != 0:
            raise ReleaseError("python -m venv failed:\n" + _tail(proc))
        bin_dir = _venv_bin(venv)
        python = bin_dir / ("python.exe" if os.name == "nt" else "python")
        proc = _run([sys.executable, "-m", "pip", "--python", python, "install", "--disable-pip-version-check",
                     "-q", wheel], "install the wheel")
        if proc.returncode != 0:
            raise ReleaseError("pip install of the wheel failed:\n" + _tail(proc))
        # Run from the scratch folder with a clean environment: nothing of the checkout is importable.
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
        env["NO_COLOR"] = "1"
        torchlint = bin_dir / "torchlint"
        proc = _run([python, "-c", "import torchlint, sys; print(torchlint.__file__)"], "where it imports from",
                    cwd=Path(scratch), env=env)
        if proc.returncode != 0 or Path(proc.stdout.strip()).resolve().is_relative_to(ROOT):
            raise ReleaseError(f"the installed torchlint is not the wheel's: {_tail(proc, 3)}")
        proc = _run([torchlint, "--version"], "torchlint --version", cwd=Path(scratch), env=env)
        if proc.returncode != 0 or version not in proc.stdout:
            raise ReleaseError(f"torchlint --version printed {proc.stdout.strip()!r}, not {version}: {_tail(proc, 3)}")
        proc = _run([torchlint, "rule", "TL701"], "torchlint rule TL701", cwd=Path(scratch), env=env)
        if proc.returncode != 0 or "TL701" not in proc.stdout:
            raise ReleaseError("the wheel has no rule pages (torchlint rule TL701):\n" + _tail(proc))
        proc = _run([torchlint, "--no-cache", "--isolated", fixtures], "torchlint on the fixtures",
                    cwd=Path(scratch), env=env)
        match = _FOUND.search(proc.stdout + proc.stderr)  # the summary line may go to either
        if proc.returncode != 1 or match is None or int(match.group(1)) == 0:
            raise ReleaseError(f"torchlint fixtures/ exited {proc.returncode} (expected 1 with findings):\n"
                               + _tail(proc))
        return int(match.group(1))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/release.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist", help="where the sdist and wheel go (emptied first)")
    parser.add_argument("--no-isolation", action="store_true",
                        help="build with this environment's setuptools (faster; the release itself builds isolated)")
    parser.add_argument("--upload", action="store_true", help="after every check passed, twine upload the two files")
    parser.add_argument("--repository", default="pypi", help="twine's repository name for --upload (e.g. testpypi)")
    args = parser.parse_args(argv)
    try:
        version = read_version()
        print(f"release: torchlint {version}", flush=True)
        if args.upload and args.no_isolation:
            raise ReleaseError("--upload builds in isolation: leave out --no-isolation")
        files = build(args.outdir.resolve(), version, isolation=not args.no_isolation)
        twine_check(files)
        findings = check_installed_wheel(files[1] if files[1].suffix == ".whl" else files[0], version)
        print(f"release: the installed wheel found {findings} findings in fixtures/ (exit 1, as expected)")
        if args.upload:
            proc = subprocess.run([sys.executable, "-m", "twine", "upload", "--repository", args.repository, *map(str, files)])
            if proc.returncode != 0:
                raise ReleaseError(f"twine upload exited {proc.returncode}")
            print(f"release: uploaded torchlint {version}; tag it: git tag v{version} && git push origin v{version}")
        else:
            print(f"release: ready: {' '.join(str(f) for f in files)}")
            print(f"release: to publish: python -m twine upload {' '.join(str(f) for f in files)}"
                  f" && git tag v{version} && git push origin v{version}")
    except ReleaseError as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("release: interrupted", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
