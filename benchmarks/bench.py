"""torchlint's benchmark: cold, warm and one-file-touched runs against libcst's parse floor and
TorchFix, on pinned real-world corpora. See docs/performance.md.

    python benchmarks/bench.py                      # timm + transformers, median of 3
    python benchmarks/bench.py --with-torchfix      # also TorchFix 0.7.0 (slow: ~10 min per run)
    python benchmarks/bench.py --with-ruff --with-hotpath   # also ruff and hotpath-ai columns
    python benchmarks/bench.py --with-ruff --with-ast-floor # and CPython's parse of every file, all cores
    python benchmarks/bench.py --scaling-only --corpus transformers   # time and RSS against size
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
from typing import Dict, List, Optional, Tuple

CORPORA = {"timm": "timm==1.0.11", "transformers": "transformers==4.46.3"}
TORCHFIX = "torchfix==0.7.0"
# TorchFix's real dependencies (from its METADATA); never torch.
TORCHFIX_DEPS = ("libcst>=1.5.0,<1.6.0", "PyYAML", "flake8>=3.8.2")
# Comparison columns, each in its own virtual environment under the cache folder (never torch).
RUFF = "ruff==0.17.6"
HOTPATH = "hotpath-ai==0.1.0"  # a PyTorch linter on Python's ast; no dependencies, CLI `hotpath`
# The scaling mode: fractions of a corpus's files, and sizes of one file made of module bodies.
SCALING_FRACTIONS = (0.1, 0.25, 0.5, 1.0)
SCALING_LINES = (7_500, 15_000, 30_000, 60_000)
# The file the "one file touched" run edits: a typical model file someone would be working on.
TOUCH = {
    "timm": "timm/models/resnet.py",
    "transformers": "transformers/models/bert/modeling_bert.py",
}
SINGLE_FILE_LINES = 2000
# The single-file latency file ends with this training script, so that the editor path is timed
# on a file *with* findings (a file without any skips the positions and fix work).
TRAINING_TAIL = """

import torch
from torch.utils.data import DataLoader


def train_for_benchmark(model, dataset, optimizer, loss_fn, epochs=1):
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = torch.nn.DataParallel(model).cuda()
    for epoch in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.cuda(), targets.cuda()
            mask = torch.ones(inputs.shape[0]).cuda()
            optimizer.zero_grad(set_to_none=False)
            loss = loss_fn(model(inputs) * mask[:, None], targets)
            loss.backward()
            optimizer.step()
            print(loss.item())
            torch.cuda.empty_cache()
"""
REPO = Path(__file__).resolve().parent.parent

# Runs one command, reports its wall time and its process tree's peak RSS as JSON on stdout.
_WRAPPER = r"""
import json, resource, subprocess, sys, time
out = open(sys.argv[1], "wb")
start = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}))
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

# The CPython floor: ast.parse of every file in as many processes as torchlint uses, the whole
# command timed (start-up, fork, reading). No linter that parses each file with Python's own
# parser, as every Python linter must to report syntax errors, can be faster than this.
_AST_FLOOR = r"""
import ast, os, sys
from concurrent.futures import ProcessPoolExecutor

def parse(paths):
    failed = 0
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            ast.parse(data)
        except (SyntaxError, ValueError):
            failed += 1
    return failed

if __name__ == "__main__":
    files = [l for l in open(sys.argv[1], encoding="utf-8").read().splitlines() if l]
    files.sort(key=lambda p: -os.path.getsize(p))  # largest first, as torchlint's pool does
    jobs = max(1, int(sys.argv[2]))
    chunks = [files[i::jobs * 8] for i in range(jobs * 8)]
    if jobs == 1:
        failed = sum(map(parse, chunks))
    else:
        with ProcessPoolExecutor(jobs) as pool:
            failed = sum(pool.map(parse, chunks))
    print(failed)
    sys.stdout.flush()
    os._exit(0)  # as torchlint ends: no teardown of the interpreter
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


def lsp_latency(path: Path, repeat: int) -> float:
    """Median seconds from a full-text ``didChange`` (one line edited) to the ``publishDiagnostics``
    of that version, through ``torchlint server --debounce-ms 0`` over stdio, as an editor sees it."""
    import threading

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    while not lines[middle].strip() or lines[middle].rstrip().endswith(("\\", ",", "(")):
        middle += 1
    proc = subprocess.Popen([sys.executable, "-m", "torchlint", "server", "--debounce-ms", "0"], cwd=path.parent,
                            env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    published: Dict[int, float] = {}
    arrived = threading.Condition()

    def read() -> None:
        while True:
            length = None
            while True:
                line = proc.stdout.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(proc.stdout.read(length))
            if "method" in message and "id" in message:  # a request from the server
                send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            if message.get("method") == "textDocument/publishDiagnostics":
                with arrived:
                    published[message["params"].get("version")] = time.perf_counter()
                    arrived.notify_all()

    def send(message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()

    def wait(version: int) -> float:
        with arrived:
            if not arrived.wait_for(lambda: version in published, timeout=120):
                raise SystemExit(f"bench: the language server published nothing for version {version}")
            return published[version]

    threading.Thread(target=read, daemon=True).start()
    uri = path.resolve().as_uri()
    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": os.getpid(), "rootUri": path.parent.resolve().as_uri(), "capabilities": {
                  "textDocument": {"publishDiagnostics": {"versionSupport": True}}}}})
        send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}}})
        wait(1)
        times = []
        for version in range(2, repeat + 3):
            changed = list(lines)
            changed[middle] = changed[middle].rstrip("\n") + f"  # edit {version}\n"
            start = time.perf_counter()
            send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": "".join(changed)}]}})
            times.append(wait(version) - start)
        return statistics.median(times[1:])  # the first edit fills the incremental parser's cache
    finally:
        proc.kill()
        proc.wait()


@dataclass
class Run:
    wall: float
    maxrss_mb: float
    findings: Optional[int] = None
    #: CPU seconds of the command's process tree (user + system): steadier than wall time on a
    #: shared machine, though it counts both cores of a parallel run.
    cpu: Optional[float] = None


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

    def cpu(self, kind: str) -> Optional[float]:
        runs = [r for r in self.runs.get(kind, []) if r.cpu is not None]
        return statistics.median(r.cpu for r in runs) if runs else None

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
    return Run(data["wall"], data["maxrss_kb"] / 1024, cpu=data.get("cpu"))


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


def snapshot_source(work: Path, package: Optional[Path] = None) -> str:
    """Copy the torchlint package into the work folder and run that copy: edits made in the
    checkout while the benchmark runs can neither mix versions nor invalidate the cache between
    the cold and warm runs. Byte-compiled first, so no run pays for that. Returns the git
    revision measured."""
    global _SOURCE
    _SOURCE = work / "src"
    shutil.copytree(package or REPO / "torchlint", _SOURCE / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(_SOURCE)], check=True)
    if package is not None:
        return f"package at {package}"
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
    listing = work / f"{corpus.name}.files"
    listing.write_text("\n".join(str(p) for p in corpus.files))
    if args.with_ast_floor:
        run = measure([sys.executable, "-c", _AST_FLOOR, str(listing), str(args.jobs or os.cpu_count() or 1)], out)
        run.findings = int(out.read_text().split()[0])  # files CPython rejects (torchlint's TL001)
        corpus.add("ast_floor", run)
    if not args.skip_floor:
        run = measure([sys.executable, "-c", _FLOOR, str(listing)], out)
        run.wall = float(out.read_text().split()[0])  # the parse loop alone, no start-up
        corpus.add("floor", run)
    if with_torchfix_now and torchfix is not None:
        run = measure([str(torchfix), str(corpus.root)], out, cwd=work)
        run.findings = len(re.findall(r":\d+:\d+: TOR\d+", out.read_text(errors="replace")))
        corpus.add("torchfix", run)
    tools = getattr(args, "tools", {})
    if "ruff" in tools:  # every rule, no cache, no output: the cost of the check alone
        corpus.add("ruff", measure([str(tools["ruff"]), "check", "--select", "ALL", "--no-cache", "--isolated",
                                    "--exit-zero", "--silent", str(corpus.root)], out, cwd=work))
    if "hotpath" in tools:
        run = measure([str(tools["hotpath"]), "analyze", str(corpus.root), "--format", "json",
                       "--include-heuristics"], out, cwd=work)
        try:
            run.findings = sum(len(f["findings"]) for f in json.loads(out.read_text())["files"])
        except (ValueError, KeyError, TypeError):
            run.findings = None
        corpus.add("hotpath", run)


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


def tool_env(cache_root: Path, name: str, spec: str, exe_name: str) -> Path:
    """``spec`` installed without dependencies into ``<cache_root>/<name>-venv`` (neither tool
    has any), refusing an environment that ended up with torch."""
    venv = cache_root / f"{name}-venv"
    exe = venv / ("Scripts" if os.name == "nt" else "bin") / exe_name
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    if not exe.exists():
        log(f"installing {spec} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", spec], check=True)
    check = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True)
    if check.stdout.strip() != "None":
        raise SystemExit(f"bench: torch ended up in {venv}; refusing to go on")
    return exe


def concatenated_file(corpus: Corpus, lines: int, path: Path) -> int:
    """One file of about ``lines`` lines made of whole module bodies of the corpus (its
    ``from __future__`` imports dropped, so the concatenation stays valid Python)."""
    chunks, total = _module_bodies(corpus, lines)
    path.write_text("".join(chunks), encoding="utf-8")
    return total


def _module_bodies(corpus: Corpus, lines: int) -> Tuple[List[str], int]:
    """Whole module bodies of the corpus's files that parse, ``from __future__`` imports dropped
    (so that their concatenation stays valid Python), until about ``lines`` lines: (the bodies,
    their line count)."""
    import ast

    chunks, total = [], 0
    for source in corpus.files:
        text = source.read_text(encoding="utf-8", errors="replace")
        text = "\n".join(l for l in text.splitlines() if not l.startswith("from __future__"))
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        chunks.append(text + "\n")
        total += text.count("\n") + 1
        if total >= lines:
            break
    return chunks, total


def scaling(corpus: Corpus, work: Path, args) -> List[dict]:
    """Cold runs (empty cache) on growing fractions of the corpus's files (every k-th file, so
    each fraction has the same mix), then on single files of growing size made of module bodies
    (``--jobs 1``: one process takes the whole file)."""
    cases = []
    for fraction in SCALING_FRACTIONS:
        step = round(1 / fraction)
        files = corpus.files[::step] if fraction < 1 else corpus.files
        lines = sum(p.read_bytes().count(b"\n") for p in files)
        cases.append({"case": f"{fraction:.0%} of the files", "files": [str(p) for p in files], "lines": lines,
                      "jobs": args.jobs})
    for size in SCALING_LINES:
        path = work / f"concat_{size}.py"
        lines = concatenated_file(corpus, size, path)
        cases.append({"case": f"one file of {lines:,} lines", "files": [str(path)], "lines": lines, "jobs": 1})
    out = work / "scaling.out"
    for case in cases:
        case["runs"] = []
    for round_no in range(args.repeat):
        for case in cases:
            log(f"scaling round {round_no + 1}/{args.repeat}: {case['case']}")
            cache_dir = work / "cache-scaling"
            shutil.rmtree(cache_dir, ignore_errors=True)
            cmd = torchlint_cmd(corpus, cache_dir, case["jobs"])[:-1] + case["files"]
            run = measure(cmd, out, env=_env(), cwd=_SOURCE)
            run.findings = len(json.loads(out.read_text()))
            case["runs"].append(run)
    return cases


def scaling_table(corpus: Corpus, cases: List[dict]) -> str:
    rows = [f"Scaling on {corpus.name} (cold, no cache):", "",
            "| case | files | lines | wall s (median) | CPU s (median) | CPU µs per line | peak RSS MB | findings |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        runs = case["runs"]
        wall = statistics.median(r.wall for r in runs)
        cpu = statistics.median(r.cpu for r in runs)
        rows.append(f"| {case['case']} (n={len(runs)}) | {len(case['files']):,} | {case['lines']:,} | {fmt_s(wall)} "
                    f"| {fmt_s(cpu)} | {cpu / case['lines'] * 1e6:.1f} | {fmt_mb(max(r.maxrss_mb for r in runs))} "
                    f"| {runs[-1].findings} |")
    return "\n".join(rows)


def single_file(corpus: Corpus, work: Path, repeat: int) -> Optional[dict]:
    """A ~2,000-line file made of whole top-level statements of the corpus's files."""
    import ast

    budget = SINGLE_FILE_LINES - TRAINING_TAIL.count("\n")
    text = "".join(_module_bodies(corpus, budget)[0])
    lines = text.splitlines(keepends=True)
    for node in ast.parse(text).body:
        if node.lineno <= budget <= node.end_lineno:
            lines = lines[: node.end_lineno]
            break
    else:
        lines = lines[:budget]
    lines += TRAINING_TAIL.splitlines(keepends=True)
    # its own folder: the language server indexes its workspace in the background when it
    # starts, and the run's folder holds the package snapshot (80 files) that would be indexed
    # during the edits timed below
    path = work / "single" / "single.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(lines))
    proc = subprocess.run([sys.executable, "-c", _SINGLE, str(path), str(repeat), str(_SOURCE)],
                          capture_output=True, text=True, env=_env(), cwd=_SOURCE, check=True)
    first, full, same, typing, found = proc.stdout.split()
    return {"lines": len(lines), "first_s": float(first), "median_s": float(full), "incremental_s": float(same),
            "typing_s": float(typing), "findings": int(found), "lsp_s": lsp_latency(path, repeat)}


# -- report ------------------------------------------------------------------------------------

def fmt_s(value: Optional[float]) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def fmt_mb(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.0f}"


def table(corpora: List[Corpus], single: Optional[dict], args) -> str:
    rows = ["| corpus | files | lines | run | wall s (median) | CPU s (median) | peak RSS MB | findings |",
            "|---|---:|---:|---|---:|---:|---:|---:|"]
    labels = [("cold", "torchlint cold (no cache)"), ("warm", "torchlint warm, nothing changed"),
              ("touched", "torchlint warm, one file touched"), ("floor", "libcst.parse_module floor (1 process)"),
              ("torchfix", "TorchFix 0.7.0"), ("ruff", "ruff check --select ALL --no-cache (silent)"),
              ("hotpath", "hotpath-ai 0.1.0"),
              ("ast_floor", "CPython ast.parse of every file, all cores, whole command (findings: files it rejects)")]
    for c in corpora:
        for kind, label in labels:
            if kind not in c.runs:
                continue
            n = len(c.runs[kind])
            found = c.findings(kind)
            cpu = None if kind == "floor" else c.cpu(kind)  # the floor's wall is its parse loop alone
            rows.append(f"| {c.name} | {len(c.files):,} | {c.lines:,} | {label} (n={n}) | {fmt_s(c.median(kind))} "
                        f"| {fmt_s(cpu)} | {fmt_mb(c.peak(kind))} | {'' if found is None else f'{found:,}'} |")
    rows.append("")
    rows.append("| corpus | TorchFix / torchlint cold | torchlint cold / floor | torchlint cold / ruff "
                "| torchlint cold / hotpath-ai | CPython parse floor / ruff |")
    rows.append("|---|---:|---:|---:|---:|---:|")
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"  # noqa: E731
    for c in corpora:
        cold, floor, tfx = c.median("cold"), c.median("floor"), c.median("torchfix")
        rows.append(f"| {c.name} | {f'{tfx / cold:.0f}x' if tfx and cold else '–'} "
                    f"| {ratio(cold, floor)} | {ratio(cold, c.median('ruff'))} | {ratio(cold, c.median('hotpath'))} "
                    f"| {ratio(c.median('ast_floor'), c.median('ruff'))} |")
    if single:
        rows.append("")
        rows.append(f"Single file through `lint_source` ({single['lines']:,} lines, {single['findings']} findings), "
                    f"median of {args.single_repeat}: as an editor lints it (`incremental=True`, one line "
                    f"edited between calls) {single['typing_s'] * 1000:.0f} ms; unchanged buffer "
                    f"{single['incremental_s'] * 1000:.0f} ms; whole parse every call (`incremental=False`) "
                    f"{single['median_s'] * 1000:.0f} ms; first call, importing the rules: "
                    f"{single['first_s'] * 1000:.0f} ms. The language server (`--debounce-ms 0`), from a "
                    f"change to its published diagnostics: {single['lsp_s'] * 1000:.0f} ms.")
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
    p.add_argument("--with-ruff", action="store_true", help=f"also run {RUFF} (check --select ALL --no-cache)")
    p.add_argument("--with-hotpath", action="store_true", help=f"also run {HOTPATH} (hotpath analyze)")
    p.add_argument("--scaling", action="store_true",
                   help="also time cold runs on 10/25/50/100%% of the first corpus and on single files of 7.5k-60k lines")
    p.add_argument("--scaling-only", action="store_true", help="only the scaling runs")
    p.add_argument("--package", type=Path, help="measure this copy of the torchlint package instead of the checkout's")
    p.add_argument("--jobs", type=int, help="torchlint --jobs (default: all cores)")
    p.add_argument("--skip-floor", action="store_true", help="do not measure the libcst parse floor")
    p.add_argument("--with-ast-floor", action="store_true",
                   help="also time CPython's ast.parse of every file on all cores, the whole command: the "
                        "floor under any linter that parses with Python's own parser (compare with ruff)")
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
    args.tools = {}
    if args.with_ruff:
        args.tools["ruff"] = tool_env(args.cache_root, "ruff", RUFF, "ruff")
    if args.with_hotpath:
        args.tools["hotpath"] = tool_env(args.cache_root, "hotpath", HOTPATH, "hotpath")
    torchfix_rounds = args.repeat if args.torchfix_repeat is None else args.torchfix_repeat
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-") as tmp:
        work = Path(tmp)
        revision = snapshot_source(work, args.package)
        log(f"measuring torchlint {revision} on {os.cpu_count()} CPUs")
        for round_no in range(0 if args.scaling_only else args.repeat):
            for corpus in corpora:  # interleaved: a slow spell of the machine hits every measure
                log(f"round {round_no + 1}/{args.repeat}: {corpus.name}")
                one_round(corpus, work, args, torchfix, round_no < torchfix_rounds)
        single = None
        if args.single_repeat and not args.scaling_only:
            single = single_file(corpora[0], work, args.single_repeat)
        cases = scaling(corpora[0], work, args) if args.scaling or args.scaling_only else None
    print(f"torchlint {revision}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    if not args.scaling_only:
        print(table(corpora, single, args))
    if cases:
        print("\n" + scaling_table(corpora[0], cases))
    if args.json:
        args.json.write_text(json.dumps({
            "corpora": [{"name": c.name, "files": len(c.files), "lines": c.lines, "touch": str(c.touch),
                         "runs": {k: [r.__dict__ for r in v] for k, v in c.runs.items()}} for c in corpora],
            "single_file": single, "revision": revision,
            "scaling": [{**{k: v for k, v in c.items() if k != "files"}, "files": len(c["files"]),
                         "runs": [r.__dict__ for r in c["runs"]]} for c in cases or []], "cpus": os.cpu_count(), "python": sys.version.split()[0],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
