"""torchlint's benchmark: cold, warm and one-file-touched runs against libcst's parse floor and
TorchFix, on pinned real-world corpora. See docs/performance.md.

    python benchmarks/bench.py                      # timm + transformers, median of 3
    python benchmarks/bench.py --with-torchfix      # also TorchFix 0.7.0 (slow: ~10 min per run)
    python benchmarks/bench.py --corpus-dir fixtures --repeat 1 --no-download   # quick check

Corpora are the pinned wheels (``pip download --no-deps transformers==4.46.3 timm==1.0.11``),
unzipped under the cache folder (``~/.cache/torchlint-bench``, or ``--cache-root`` /
``$TORCHLINT_BENCH_CACHE``); nothing is written in the repository. Every measured command runs
as its own subprocess under a small wrapper process, so that ``getrusage(RUSAGE_CHILDREN)``
gives the peak RSS of that command's process tree alone (the largest single process, which is
what the 250 MB-per-process target is about).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

CORPORA = {"timm": "timm==1.0.11", "transformers": "transformers==4.46.3"}
TORCHFIX = "torchfix==0.7.0"
# TorchFix's real dependencies (from its METADATA); never torch.
TORCHFIX_DEPS = ("libcst>=1.5.0,<1.6.0", "PyYAML", "flake8>=3.8.2")
# The file the "one file touched" run edits: a typical model file someone would be working on.
TOUCH = {
    "timm": "timm/models/resnet.py",
    "transformers": "transformers/models/bert/modeling_bert.py",
}
SINGLE_FILE_LINES = 2000
REPO = Path(__file__).resolve().parent.parent

# Runs one command, reports its wall time and its process tree's peak RSS as JSON on stdout.
_WRAPPER = r"""
import json, resource, subprocess, sys, time
out = open(sys.argv[1], "wb")
start = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
wall = time.perf_counter() - start
print(json.dumps({"rc": rc, "wall": wall,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

# The floor: libcst.parse_module of every file, one process.
_FLOOR = r"""
import sys, time
import libcst
files = [l for l in open(sys.argv[1], encoding="utf-8").read().splitlines() if l]
start = time.perf_counter()
failed = 0
for path in files:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        libcst.parse_module(data)
    except Exception:
        failed += 1
print(f"{time.perf_counter() - start:.4f} {failed}")
"""

# Single-file latency through the Python API.
_SINGLE = r"""
import statistics, sys, time
from torchlint.config import Settings
from torchlint.engine import lint_source
text = open(sys.argv[1], encoding="utf-8").read()
settings = Settings()
start = time.perf_counter()
first = lint_source(text, "bench.py", settings)
first_s = time.perf_counter() - start
def median_of(make_text, incremental):
    times = []
    for i in range(int(sys.argv[2])):
        current = make_text(i)
        start = time.perf_counter()
        lint_source(current, "bench.py", settings, incremental=incremental)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
# An editor's keystroke: one line in the middle of the buffer changes between calls.
lines = text.splitlines(keepends=True)
middle = len(lines) // 2
while not lines[middle].strip() or lines[middle].rstrip().endswith(("\\", ",", "(")):
    middle += 1
def edited(i):
    changed = list(lines)
    changed[middle] = changed[middle].rstrip("\n") + f"  # edit {i}\n"
    return "".join(changed)
full = median_of(lambda i: text, False)
lint_source(text, "bench.py", settings, incremental=True)  # the editor's first lint of the buffer
same = median_of(lambda i: text, True)
typing = median_of(edited, True)
import torchlint
assert torchlint.__file__.startswith(sys.argv[3]), torchlint.__file__
print(f"{first_s:.4f} {full:.4f} {same:.4f} {typing:.4f} {len(first)}")
"""


@dataclass
class Run:
    wall: float
    maxrss_mb: float
    findings: Optional[int] = None


@dataclass
class Corpus:
    name: str
    root: Path
    files: List[Path]
    lines: int
    touch: Path
    runs: Dict[str, List[Run]] = field(default_factory=dict)

    def add(self, kind: str, run: Run) -> None:
        self.runs.setdefault(kind, []).append(run)

    def median(self, kind: str) -> Optional[float]:
        runs = self.runs.get(kind)
        return statistics.median(r.wall for r in runs) if runs else None

    def peak(self, kind: str) -> Optional[float]:
        runs = self.runs.get(kind)
        return max(r.maxrss_mb for r in runs) if runs else None

    def findings(self, kind: str) -> Optional[int]:
        runs = self.runs.get(kind)
        return runs[-1].findings if runs else None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- corpora -----------------------------------------------------------------------------------

def fetch_corpus(name: str, cache_root: Path, download: bool) -> Path:
    """The unzipped wheel of the pinned requirement, downloading it once."""
    spec = CORPORA[name]
    wheels, corpora = cache_root / "wheels", cache_root / "corpora"
    version = spec.split("==")[1]
    stem = f"{name}-{version}-py3-none-any"
    target = corpora / stem
    if target.is_dir():
        return target
    wheel = wheels / f"{stem}.whl"
    if not wheel.is_file():
        if not download:
            raise SystemExit(f"bench: {wheel} is missing and --no-download was given")
        wheels.mkdir(parents=True, exist_ok=True)
        log(f"downloading {spec} ...")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", spec, "-d", str(wheels)],
                       check=True)
    tmp = Path(tempfile.mkdtemp(prefix=stem + ".", dir=_mkdir(corpora)))
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp)
    os.replace(tmp, target)
    return target


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_corpus(name: str, root: Path) -> Corpus:
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    if not files:
        raise SystemExit(f"bench: no Python files under {root}")
    lines = 0
    for path in files:
        with open(path, "rb") as fh:
            lines += fh.read().count(b"\n")
    touch = root / TOUCH[name] if name in TOUCH and (root / TOUCH[name]).is_file() else None
    if touch is None:  # a custom corpus: the median-sized file
        touch = sorted(files, key=lambda p: p.stat().st_size)[len(files) // 2]
    return Corpus(name, root, files, lines, touch)


# -- measuring ---------------------------------------------------------------------------------

def measure(cmd: List[str], output: Path, env: Optional[dict] = None, cwd: Optional[Path] = None) -> Run:
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(output), *cmd],
                          capture_output=True, text=True, env=env, cwd=cwd, check=True)
    data = json.loads(proc.stdout)
    if data["rc"] != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} exited {data['rc']}:\n{output.read_text(errors='replace')[-3000:]}")
    return Run(data["wall"], data["maxrss_kb"] / 1024)


def torchlint_cmd(corpus: Corpus, cache_dir: Path, jobs: Optional[int]) -> List[str]:
    cmd = [sys.executable, "-m", "torchlint", "--select", "ALL", "--output-format", "json", "--exit-zero",
           "--cache-dir", str(cache_dir)]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    return cmd + [str(corpus.root)]


def run_torchlint(corpus: Corpus, cache_dir: Path, out: Path, jobs: Optional[int]) -> Run:
    run = measure(torchlint_cmd(corpus, cache_dir, jobs), out, env=_env(), cwd=_SOURCE)
    run.findings = len(json.loads(out.read_text()))
    return run


_SOURCE = REPO  # replaced by a snapshot of the package for the run (see snapshot_source)


def snapshot_source(work: Path) -> str:
    """Copy the torchlint package into the work folder and run that copy: edits made in the
    checkout while the benchmark runs can neither mix versions nor invalidate the cache between
    the cold and warm runs. Byte-compiled first, so no run pays for that. Returns the git
    revision measured."""
    global _SOURCE
    _SOURCE = work / "src"
    shutil.copytree(REPO / "torchlint", _SOURCE / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(_SOURCE)], check=True)
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    return rev


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_SOURCE), env.get("PYTHONPATH")]))
    env.pop("TORCHLINT_CACHE_DIR", None)
    return env


def one_round(corpus: Corpus, work: Path, args, torchfix: Optional[Path], with_torchfix_now: bool) -> None:
    out = work / f"{corpus.name}.out"
    cache_dir = work / f"cache-{corpus.name}"
    shutil.rmtree(cache_dir, ignore_errors=True)
    corpus.add("cold", run_torchlint(corpus, cache_dir, out, args.jobs))
    corpus.add("warm", run_torchlint(corpus, cache_dir, out, args.jobs))
    original = corpus.touch.read_bytes()
    stat = corpus.touch.stat()
    try:
        corpus.touch.write_bytes(original + b"\n# touched by torchlint's benchmark\n")
        corpus.add("touched", run_torchlint(corpus, cache_dir, out, args.jobs))
    finally:
        corpus.touch.write_bytes(original)
        os.utime(corpus.touch, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    if not args.skip_floor:
        listing = work / f"{corpus.name}.files"
        listing.write_text("\n".join(str(p) for p in corpus.files))
        run = measure([sys.executable, "-c", _FLOOR, str(listing)], out)
        run.wall = float(out.read_text().split()[0])  # the parse loop alone, no start-up
        corpus.add("floor", run)
    if with_torchfix_now and torchfix is not None:
        run = measure([str(torchfix), str(corpus.root)], out, cwd=work)
        run.findings = len(re.findall(r":\d+:\d+: TOR\d+", out.read_text(errors="replace")))
        corpus.add("torchfix", run)


def torchfix_env(cache_root: Path) -> Path:
    """TorchFix 0.7.0 in its own virtual environment (no torch: it does not need it)."""
    venv = cache_root / "torchfix-venv"
    exe = venv / ("Scripts" if os.name == "nt" else "bin") / "torchfix"
    if exe.exists():
        return exe
    log("installing TorchFix 0.7.0 into " + str(venv))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + ["--no-deps", TORCHFIX], check=True)
    subprocess.run(pip + list(TORCHFIX_DEPS), check=True)
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True)
    if check.stdout.strip() != "None":
        raise SystemExit("bench: torch ended up in the TorchFix environment; refusing to go on")
    return exe


def single_file(corpus: Corpus, work: Path, repeat: int) -> Optional[dict]:
    """A ~2,000-line file made of whole top-level statements of the corpus's files."""
    import ast

    chunks, total = [], 0
    for path in corpus.files:
        text = path.read_text(encoding="utf-8", errors="replace")
        text = "\n".join(l for l in text.splitlines() if not l.startswith("from __future__"))
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        chunks.append(text + "\n")
        total += text.count("\n") + 1
        if total >= SINGLE_FILE_LINES:
            break
    text = "".join(chunks)
    lines = text.splitlines(keepends=True)
    for node in ast.parse(text).body:
        if node.lineno <= SINGLE_FILE_LINES <= node.end_lineno:
            lines = lines[: node.end_lineno]
            break
    else:
        lines = lines[:SINGLE_FILE_LINES]
    path = work / "single.py"
    path.write_text("".join(lines))
    proc = subprocess.run([sys.executable, "-c", _SINGLE, str(path), str(repeat), str(_SOURCE)],
                          capture_output=True, text=True, env=_env(), cwd=_SOURCE, check=True)
    first, full, same, typing, found = proc.stdout.split()
    return {"lines": len(lines), "first_s": float(first), "median_s": float(full), "incremental_s": float(same),
            "typing_s": float(typing), "findings": int(found)}


# -- report ------------------------------------------------------------------------------------

def fmt_s(value: Optional[float]) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def fmt_mb(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.0f}"


def table(corpora: List[Corpus], single: Optional[dict], args) -> str:
    rows = ["| corpus | files | lines | run | wall s (median) | peak RSS MB | findings |", "|---|---:|---:|---|---:|---:|---:|"]
    labels = [("cold", "torchlint cold (no cache)"), ("warm", "torchlint warm, nothing changed"),
              ("touched", "torchlint warm, one file touched"), ("floor", "libcst.parse_module floor (1 process)"),
              ("torchfix", "TorchFix 0.7.0")]
    for c in corpora:
        for kind, label in labels:
            if kind not in c.runs:
                continue
            n = len(c.runs[kind])
            found = c.findings(kind)
            rows.append(f"| {c.name} | {len(c.files):,} | {c.lines:,} | {label} (n={n}) | {fmt_s(c.median(kind))} "
                        f"| {fmt_mb(c.peak(kind))} | {'' if found is None else f'{found:,}'} |")
    rows.append("")
    rows.append("| corpus | TorchFix / torchlint cold | torchlint cold / floor |")
    rows.append("|---|---:|---:|")
    for c in corpora:
        cold, floor, tfx = c.median("cold"), c.median("floor"), c.median("torchfix")
        rows.append(f"| {c.name} | {f'{tfx / cold:.0f}x' if tfx and cold else '–'} "
                    f"| {f'{cold / floor:.2f}' if cold and floor else '–'} |")
    if single:
        rows.append("")
        rows.append(f"Single file through `lint_source` ({single['lines']:,} lines, {single['findings']} findings), "
                    f"median of {args.single_repeat}: as an editor lints it (`incremental=True`, one line "
                    f"edited between calls) {single['typing_s'] * 1000:.0f} ms; unchanged buffer "
                    f"{single['incremental_s'] * 1000:.0f} ms; whole parse every call (`incremental=False`) "
                    f"{single['median_s'] * 1000:.0f} ms; first call, importing the rules: "
                    f"{single['first_s'] * 1000:.0f} ms.")
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache-root", type=Path,
                   default=Path(os.environ.get("TORCHLINT_BENCH_CACHE", "~/.cache/torchlint-bench")).expanduser(),
                   help="where wheels, corpora and the TorchFix environment live (default ~/.cache/torchlint-bench)")
    p.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="pinned corpus to run (default: all)")
    p.add_argument("--corpus-dir", type=Path, action="append", help="a local folder to use as a corpus instead")
    p.add_argument("--repeat", type=int, default=3, help="rounds; medians are reported (default 3)")
    p.add_argument("--with-torchfix", action="store_true", help="also run TorchFix 0.7.0")
    p.add_argument("--torchfix-repeat", type=int, help="rounds that include TorchFix (default: --repeat)")
    p.add_argument("--jobs", type=int, help="torchlint --jobs (default: all cores)")
    p.add_argument("--skip-floor", action="store_true", help="do not measure the libcst parse floor")
    p.add_argument("--single-repeat", type=int, default=20, help="single-file latency samples (default 20)")
    p.add_argument("--no-download", action="store_true", help="fail instead of downloading a missing corpus")
    p.add_argument("--json", type=Path, help="also write the raw measurements here")
    args = p.parse_args(argv)

    corpora: List[Corpus] = []
    for folder in args.corpus_dir or []:
        corpora.append(load_corpus(folder.name, folder.resolve()))
    if not args.corpus_dir:
        for name in args.corpus or sorted(CORPORA):
            corpora.append(load_corpus(name, fetch_corpus(name, args.cache_root, not args.no_download)))
    torchfix = torchfix_env(args.cache_root) if args.with_torchfix else None
    torchfix_rounds = args.repeat if args.torchfix_repeat is None else args.torchfix_repeat
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-") as tmp:
        work = Path(tmp)
        revision = snapshot_source(work)
        log(f"measuring torchlint {revision} on {os.cpu_count()} CPUs")
        for round_no in range(args.repeat):
            for corpus in corpora:  # interleaved: a slow spell of the machine hits every measure
                log(f"round {round_no + 1}/{args.repeat}: {corpus.name}")
                one_round(corpus, work, args, torchfix, round_no < torchfix_rounds)
        single = single_file(corpora[0], work, args.single_repeat) if args.single_repeat else None
    report = table(corpora, single, args)
    print(f"torchlint {revision}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print(report)
    if args.json:
        args.json.write_text(json.dumps({
            "corpora": [{"name": c.name, "files": len(c.files), "lines": c.lines, "touch": str(c.touch),
                         "runs": {k: [r.__dict__ for r in v] for k, v in c.runs.items()}} for c in corpora],
            "single_file": single, "revision": revision, "cpus": os.cpu_count(), "python": sys.version.split()[0],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
