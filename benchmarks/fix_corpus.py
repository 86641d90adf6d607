"""Run ``torchlint --fix --unsafe-fixes`` over a copy of a large real corpus and check that the fixer
never breaks code.

    python benchmarks/fix_corpus.py [--corpora DIR] [--keep] [--jobs N] [--crlf]

The corpus is the source of transformers 4.46.3 and timm 1.0.11 (their wheels, unzipped) in
``~/.cache/torchlint-bench/corpora/``; missing wheels are fetched with
``pip download --no-deps`` into ``~/.cache/torchlint-bench/wheels/`` and unzipped. The corpus
itself is never modified: the script works on a temporary copy and checks that

1. every file that compiled before the fix still compiles after it (``compile()``);
2. a second ``--fix --unsafe-fixes`` run changes no byte (idempotence), and ``--diff`` then
   has nothing to show (exit 0);

and, with ``--crlf`` (the copy converted to CRLF line endings first), that no fixed file gains a
bare LF; and prints the files, the fixes applied per code, the files changed, the findings left and the
failures. Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TORCHLINT_BENCH_CACHE", Path.home() / ".cache" / "torchlint-bench"))
WHEELS = {
    "transformers-4.46.3-py3-none-any": "transformers==4.46.3",
    "timm-1.0.11-py3-none-any": "timm==1.0.11",
}


def ensure_corpora(corpora: Path) -> List[Path]:
    wheels = CACHE / "wheels"
    out = []
    for stem, requirement in WHEELS.items():
        target = corpora / stem
        if not target.is_dir():
            wheel = wheels / f"{stem}.whl"
            if not wheel.is_file():
                wheels.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(wheels), requirement],
                    check=True,
                )
            tmp = Path(tempfile.mkdtemp(dir=corpora.parent if corpora.parent.exists() else None))
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(tmp)
            corpora.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        out.append(target)
    return out


def python_files(root: Path) -> List[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def compiles(path: Path) -> bool:
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def torchlint(args: List[str], cwd: Path) -> Tuple[int, str, str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("FORCE_COLOR", None)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", "--isolated", "--no-cache", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start


_FIX_LINE = re.compile(r"^    (\d+) × (TL\d+) ")
_FINDING = re.compile(r"^\S.*?:\d+:\d+: (TL\d+) ")


def parse_fix_summary(stdout: str) -> Tuple[Counter, int]:
    """(fixes per code, files listed) from ``--show-fixes``."""
    per_code: Counter = Counter()
    files = 0
    for line in stdout.splitlines():
        if line.startswith("- ") and line.endswith(":"):
            files += 1
        m = _FIX_LINE.match(line)
        if m:
            per_code[m.group(2)] += int(m.group(1))
    return per_code, files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=CACHE / "corpora")
    parser.add_argument("--keep", action="store_true", help="keep the fixed copy and print where it is")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--crlf", action="store_true", help="convert the copy to CRLF line endings first")
    ns = parser.parse_args()

    sources = ensure_corpora(ns.corpora)
    work = Path(tempfile.mkdtemp(prefix="torchlint-fix-corpus-"))
    failures: List[str] = []
    try:
        for src in sources:
            shutil.copytree(src, work / src.name, symlinks=True)
        files = python_files(work)
        if ns.crlf:
            for p in files:
                data = p.read_bytes()
                p.write_bytes(data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
        before: Dict[Path, str] = {p: digest(p) for p in files}
        compiled_before = {p for p in files if compiles(p)}
        jobs = ["--jobs", str(ns.jobs)] if ns.jobs else []

        # 1. fix
        rc, out, err, seconds = torchlint(
            ["--fix", "--unsafe-fixes", "--show-fixes", "--output-format", "concise", *jobs, "."], work
        )
        per_code, listed = parse_fix_summary(out)
        remaining = Counter(m.group(1) for m in map(_FINDING.match, out.splitlines()) if m)
        errors = [l for l in err.splitlines() if l.startswith("torchlint: error:")]
        warnings = [l for l in err.splitlines() if l.startswith("torchlint: warning:")]
        if rc not in (0, 1):
            failures.append(f"first --fix run exited {rc}")
        failures.extend(errors)
        after = {p: digest(p) for p in files}
        changed = [p for p in files if after[p] != before[p]]
        if len(changed) != listed:
            failures.append(f"--show-fixes lists {listed} files but {len(changed)} changed")
        broken = [p for p in changed if p in compiled_before and not compiles(p)]
        failures.extend(f"{p.relative_to(work)}: no longer compiles after --fix" for p in broken)
        if ns.crlf:
            mixed = [p for p in changed if b"\n" in p.read_bytes().replace(b"\r\n", b"")]
            failures.extend(f"{p.relative_to(work)}: a bare LF in a CRLF file after --fix" for p in mixed)

        # 2. idempotence
        rc2, out2, err2, seconds2 = torchlint(["--fix", "--unsafe-fixes", "--show-fixes", "--output-format", "concise", *jobs, "."], work)
        again = [p for p in files if digest(p) != after[p]]
        failures.extend(f"{p.relative_to(work)}: changed again on a second --fix run" for p in again)
        if "Fixed" in err2:
            failures.append("second --fix run reported fixes")
        rc3, out3, err3, _ = torchlint(["--diff", "--unsafe-fixes", *jobs, "."], work)
        if rc3 != 0 or out3:
            failures.append(f"--diff after fixing exited {rc3} with {len(out3.splitlines())} diff lines")

        total = sum(per_code.values())
        print(f"corpus: {', '.join(s.name for s in sources)}" + (" (converted to CRLF)" if ns.crlf else ""))
        print(f"files: {len(files)} ({len(files) - len(compiled_before)} did not compile before the fix)")
        print(f"fixes applied: {total}" + "".join(f"\n  {code}: {n}" for code, n in sorted(per_code.items())))
        print(f"files changed: {len(changed)}")
        print(f"findings left: {sum(remaining.values())}"
              + "".join(f"\n  {code}: {n}" for code, n in sorted(remaining.items())))
        print(f"warnings: {len(warnings)}" + "".join(f"\n  {w}" for w in warnings[:10]))
        print(f"time: --fix {seconds:.1f}s, second --fix {seconds2:.1f}s")
        print(f"failures: {len(failures)}" + "".join(f"\n  {f}" for f in failures[:50]))
        if ns.keep:
            print(f"fixed copy kept in {work}")
    finally:
        if not ns.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
