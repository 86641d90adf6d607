"""Score a torchlint build against hand-judged findings on real training code (issue 29).

Labels are committed; the code they judge is not. ``benchmarks/realcode/repos.toml`` pins each
repository to a commit; ``benchmarks/realcode/labels/<owner>+<name>.toml`` holds one ``[[site]]``
per judged place:

    [[site]]
    rule = "TL201"
    path = "train.py"           # relative to the repository root
    cell = 4                    # notebooks only: the cell, as torchlint reports it
    line = 87                   # 1-based, in the file (or in the cell)
    text = "total += loss.item()"   # the stripped source line: a label that no longer matches fails
    verdict = "tp"              # tp: a right finding; fp: a wrong one; missed: a real mistake not reported
    class = 3                   # optional: which of issue 29's classes of real code it belongs to
    note = "why, in a few words"

Scoring a build (the checkout of this repository by default, or ``--package DIR`` holding a
``torchlint`` package) runs ``torchlint check --preview --no-cache`` over every
repository and matches its findings to the labels on (path, cell, rule, line):

* a finding labelled ``tp``, or a ``missed`` site now reported: a true positive;
* a finding labelled ``fp``: a false positive;
* a ``tp`` or ``missed`` site not reported: a false negative;
* a finding with no label: *unjudged*, listed with ``--show unjudged`` (precision is over judged
  findings; the count of unjudged ones is printed beside it, and ``--strict`` fails on any).

    python benchmarks/realcode.py checkout --mirror /work/.mirror --into ~/realcode
    python benchmarks/realcode.py score --checkouts ~/realcode            # per-rule table, dev set
    python benchmarks/realcode.py score --checkouts ~/realcode --set heldout
    python benchmarks/realcode.py score --checkouts ~/realcode --show unjudged,fn --repo owner/name
    python benchmarks/realcode.py draft --checkouts ~/realcode --repo owner/name   # label skeleton

``checkout`` writes the text files (Python, notebooks, dependency files) of each repository at its
pinned commit from a local git mirror (``<mirror>/<owner>+<name>/repo``, a bare repository) or a
clone; ``git clone`` + ``git checkout <commit>`` gives the same tree.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef,import-not-found]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = HERE / "realcode" / "repos.toml"
LABELS = HERE / "realcode" / "labels"
VERDICTS = ("tp", "fp", "missed")
# Diagnostics about the input, not rules: a syntax error (Python 2 code), an unreadable file.
NOT_SCORED = ("TL001", "TL002", "TL003")
# What ``checkout`` writes: what torchlint reads (sources, notebooks) and what decides the
# declared torch version (dependency files, Dockerfiles).
TEXT_SUFFIXES = (".py", ".pyi", ".ipynb", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".in")
TEXT_NAMES = ("Dockerfile", "setup.py", "Pipfile")


@dataclass(frozen=True)
class Repo:
    name: str
    commit: str
    kind: str
    paths: Tuple[str, ...] = ()
    #: "dev": read while the rules were changed; "heldout": judged by an engineer who changed no
    #: rule (the lead saw its findings before the build was final); "heldout2": judged only on
    #: the final build, seen by nobody who changed a rule.
    set: str = "dev"

    @property
    def slug(self) -> str:
        return self.name.replace("/", "+")


@dataclass
class Site:
    rule: str
    path: str
    line: int
    verdict: str
    text: str = ""
    cell: Optional[int] = None
    klass: Optional[int] = None
    note: str = ""

    @property
    def key(self) -> Tuple[str, Optional[int], str, int]:
        return (self.path, self.cell, self.rule, self.line)


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    unjudged: int = 0

    def add(self, other: "Counts") -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.unjudged += other.unjudged

    @property
    def precision(self) -> Optional[float]:
        judged = self.tp + self.fp
        return self.tp / judged if judged else None

    @property
    def recall(self) -> Optional[float]:
        real = self.tp + self.fn
        return self.tp / real if real else None


@dataclass
class RepoScore:
    repo: Repo
    by_rule: Dict[str, Counts] = field(default_factory=lambda: collections.defaultdict(Counts))
    listed: Dict[str, List[str]] = field(default_factory=lambda: collections.defaultdict(list))
    stale: List[str] = field(default_factory=list)


def die(message: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
    print(f"realcode: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_manifest(path: Path = MANIFEST) -> List[Repo]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    repos = []
    for entry in data.get("repo", []):
        repos.append(Repo(entry["name"], entry["commit"], entry.get("kind", "training"),
                          tuple(entry.get("paths", ())), entry.get("set", "dev")))
    return repos


def _label_data(repo: Repo, labels_dir: Path = LABELS) -> dict:
    path = labels_dir / f"{repo.slug}.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        die(f"{path}: {exc}")
    return {}  # unreachable: die exits


def scored_paths(repo: Repo, labels_dir: Path = LABELS) -> Tuple[str, ...]:
    """The files (or folders) scored: the manifest's, else the label file's top-level ``paths``
    (a notebook collection scores the notebooks its labeller read), else the whole repository."""
    return repo.paths or tuple(_label_data(repo, labels_dir).get("paths", ()))


def load_labels(repo: Repo, labels_dir: Path = LABELS) -> List[Site]:
    path = labels_dir / f"{repo.slug}.toml"
    data = _label_data(repo, labels_dir)
    sites = []
    seen = set()
    for number, entry in enumerate(data.get("site", []), 1):
        where = f"{path.name} site {number}"
        missing = [k for k in ("rule", "path", "line", "verdict") if k not in entry]
        if missing:
            die(f"{where}: missing {', '.join(missing)}")
        if entry["verdict"] not in VERDICTS:
            die(f"{where}: verdict {entry['verdict']!r} is not one of {', '.join(VERDICTS)}")
        site = Site(entry["rule"], entry["path"], int(entry["line"]), entry["verdict"],
                    entry.get("text", ""), entry.get("cell"), entry.get("class"), entry.get("note", ""))
        if site.key in seen:
            die(f"{where}: a second label for {site.key}")
        seen.add(site.key)
        sites.append(site)
    return sites


# -- checkouts -----------------------------------------------------------------------------------

def _wanted(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(TEXT_SUFFIXES) or name in TEXT_NAMES or name.startswith("requirements")


def checkout(repo: Repo, mirror: Path, into: Path) -> Path:
    """Write the repository's text files at its pinned commit under ``into/<owner>+<name>``.

    Blobs the mirror lacks (large files it left out) are skipped; what torchlint reads is small."""
    git_dir = mirror / repo.slug / "repo"
    if not git_dir.exists():
        git_dir = mirror / repo.slug
    if not git_dir.exists():
        die(f"no mirror of {repo.name} under {mirror}")
    target = into / repo.slug
    if target.exists():
        shutil.rmtree(target)
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", repo.commit],
                             capture_output=True, check=False)
    if listing.returncode != 0:
        die(f"{repo.name}: commit {repo.commit} not in {git_dir}: {listing.stderr.decode().strip()}")
    entries = []
    for record in listing.stdout.split(b"\0"):
        if not record:
            continue
        meta, raw_path = record.split(b"\t", 1)
        mode, kind, blob = meta.split()
        text_path = raw_path.decode("utf-8", "surrogateescape")
        if kind == b"blob" and mode != b"120000" and _wanted(text_path):
            entries.append((blob.decode(), text_path))
    batch = subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert batch.stdin is not None and batch.stdout is not None
    written = 0
    for sha, path in entries:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            continue
        body = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        out = target / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body)
        written += 1
    batch.stdin.close()
    batch.wait()
    print(f"{repo.name}: {written} files at {repo.commit[:12]}", file=sys.stderr)
    return target


# -- running a build -----------------------------------------------------------------------------

def run_torchlint(root: Path, repo: Repo, package: Optional[Path], jobs: Optional[int]) -> List[dict]:
    paths = scored_paths(repo)
    targets = [str(root / p) for p in paths] if paths else [str(root)]
    # Not --isolated: it also drops the torch version the repository declares (requirements,
    # setup.py, Dockerfile), which the version-dependent rules read as a user's run does.
    command = [sys.executable, "-m", "torchlint", "check", "--preview", "--no-cache",
               "--exit-zero", "--output-format", "json"]
    if jobs:
        command += ["--jobs", str(jobs)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str((package or ROOT / "torchlint").resolve().parent)
    done = subprocess.run(command + targets, capture_output=True, text=True, env=env, cwd=root)
    if done.returncode not in (0, 1):
        die(f"{repo.name}: torchlint exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout or "[]")


def preview_rules(package: Optional[Path]) -> set:
    env = dict(os.environ)
    env["PYTHONPATH"] = str((package or ROOT / "torchlint").resolve().parent)
    code = ("import json; from torchlint.rules import all_rules; "
            "print(json.dumps([r.code for r in all_rules() if r.preview]))")
    # not from this checkout's folder: `python -c` puts the working directory first on sys.path
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          cwd=tempfile.gettempdir())
    return set(json.loads(done.stdout))


def finding_key(root: Path, finding: dict) -> Tuple[str, Optional[int], str, int]:
    path = Path(finding["filename"])
    if path.is_absolute():
        path = path.relative_to(root)
    return (path.as_posix(), finding.get("cell"), finding["code"], finding["location"]["row"])


def source_line(root: Path, path: str, cell: Optional[int], line: int) -> Optional[str]:
    file = root / path
    try:
        if cell is None:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        else:
            notebook = json.loads(file.read_text(encoding="utf-8"))
            source = notebook["cells"][cell - 1]["source"]
            lines = ("".join(source) if isinstance(source, list) else source).splitlines()
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return lines[line - 1].strip() if 0 < line <= len(lines) else None


def score_repo(repo: Repo, root: Path, findings: List[dict], sites: List[Site]) -> RepoScore:
    result = RepoScore(repo)
    labels = {s.key: s for s in sites}
    for site in sites:
        actual = source_line(root, site.path, site.cell, site.line)
        if site.text and actual is not None and actual != site.text.strip():
            result.stale.append(f"{site.key}: label says {site.text!r}, the file has {actual!r}")
        elif actual is None:
            result.stale.append(f"{site.key}: no such line in the checkout")
    reported = set()
    for finding in findings:
        key = finding_key(root, finding)
        if key in reported or key[2] in NOT_SCORED:
            continue
        reported.add(key)
        rule = key[2]
        counts = result.by_rule[rule]
        where = _where(key)
        label = labels.get(key)
        if label is None:
            counts.unjudged += 1
            result.listed["unjudged"].append(f"{where} {finding['message']}")
        elif label.verdict == "fp":
            counts.fp += 1
            result.listed["fp"].append(f"{where} {label.note}")
        else:
            counts.tp += 1
            result.listed["tp"].append(f"{where} {label.note}")
    for site in sites:
        if site.verdict in ("tp", "missed") and site.key not in reported:
            result.by_rule[site.rule].fn += 1
            result.listed["fn"].append(f"{_where(site.key)} {site.note}"
                                       + (f" [class {site.klass}]" if site.klass else ""))
    return result


def _where(key: Tuple[str, Optional[int], str, int]) -> str:
    path, cell, rule, line = key
    return f"{rule} {path}:" + (f"cell {cell}:" if cell is not None else "") + str(line)


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(totals: Dict[str, Counts], preview: set) -> str:
    rows = ["rule    tp   fp   fn  unjudged  precision  recall"]
    default, previewed = Counts(), Counts()
    for rule in sorted(totals):
        c = totals[rule]
        (previewed if rule in preview else default).add(c)
        mark = " (preview)" if rule in preview else ""
        rows.append(f"{rule:6} {c.tp:4} {c.fp:4} {c.fn:4} {c.unjudged:9}  {_fmt(c.precision):>9}  "
                    f"{_fmt(c.recall):>6}{mark}")
    for name, c in (("default", default), ("preview", previewed)):
        rows.append(f"{name:6} {c.tp:4} {c.fp:4} {c.fn:4} {c.unjudged:9}  {_fmt(c.precision):>9}  "
                    f"{_fmt(c.recall):>6}")
    return "\n".join(rows)


def selected(repos: List[Repo], names: Iterable[str], which: str = "all") -> List[Repo]:
    names = list(names)
    if not names:
        return [r for r in repos if which in ("all", r.set)]
    known = {r.name: r for r in repos}
    unknown = [n for n in names if n not in known]
    if unknown:
        die(f"not in {MANIFEST.name}: {', '.join(unknown)}")
    return [known[n] for n in names]


def cmd_score(args: argparse.Namespace) -> int:
    repos = selected(load_manifest(), args.repo, args.set)
    preview = preview_rules(args.package)
    totals: Dict[str, Counts] = collections.defaultdict(Counts)
    show = {s for s in (args.show or "").split(",") if s}
    unjudged = stale = 0
    for repo in repos:
        root = args.checkouts / repo.slug
        if not root.is_dir():
            die(f"{root} is missing: run `realcode.py checkout` first")
        findings = run_torchlint(root, repo, args.package, args.jobs)
        result = score_repo(repo, root, findings, load_labels(repo))
        for rule, counts in result.by_rule.items():
            totals[rule].add(counts)
            unjudged += counts.unjudged
        for line in result.stale:
            print(f"{repo.name}: stale label {line}", file=sys.stderr)
        stale += len(result.stale)
        for kind in sorted(show):
            for line in result.listed.get(kind, []):
                print(f"{kind:8} {repo.name} {line}")
    print(table(totals, preview))
    print(f"{len(repos)} repositories; {unjudged} unjudged findings; {stale} stale labels")
    if args.strict and (unjudged or stale):
        return 1
    return 0


def cmd_draft(args: argparse.Namespace) -> int:
    """Print a label skeleton for the repository's findings that have no label yet."""
    (repo,) = selected(load_manifest(), [args.repo])
    root = args.checkouts / repo.slug
    labelled = {s.key for s in load_labels(repo)}
    for finding in run_torchlint(root, repo, args.package, args.jobs):
        key = finding_key(root, finding)
        if key in labelled or key[2] in NOT_SCORED:
            continue
        labelled.add(key)
        path, cell, rule, line = key
        text = source_line(root, path, cell, line) or ""
        print("[[site]]")
        print(f'rule = "{rule}"')
        print(f"path = {json.dumps(path)}")
        if cell is not None:
            print(f"cell = {cell}")
        print(f"line = {line}")
        print(f"text = {json.dumps(text)}")
        print('verdict = "?"')
        print(f"note = {json.dumps(finding['message'][:120])}")
        print()
    return 0


def cmd_checkout(args: argparse.Namespace) -> int:
    args.into.mkdir(parents=True, exist_ok=True)
    for repo in selected(load_manifest(), args.repo, args.set):
        checkout(repo, args.mirror, args.into)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--checkouts", type=Path, default=Path(os.environ.get("TORCHLINT_REALCODE", "~/realcode")).expanduser())
    common.add_argument("--package", type=Path, help="a torchlint package folder to score instead of this checkout's")
    common.add_argument("--jobs", type=int)
    score = sub.add_parser("score", parents=[common])
    score.add_argument("--repo", action="append", default=[])
    score.add_argument("--set", default="dev",
                       help="which repositories: those read while changing the rules (dev), a held-out set "
                            "(heldout, heldout2), or all")
    score.add_argument("--show", help="comma-separated: tp, fp, fn, unjudged")
    score.add_argument("--strict", action="store_true", help="exit 1 on unjudged findings or stale labels")
    draft = sub.add_parser("draft", parents=[common])
    draft.add_argument("--repo", required=True)
    check = sub.add_parser("checkout")
    check.add_argument("--mirror", type=Path, required=True)
    check.add_argument("--into", type=Path, default=Path("~/realcode").expanduser())
    check.add_argument("--repo", action="append", default=[])
    check.add_argument("--set", default="all")
    args = parser.parse_args(argv)
    return {"score": cmd_score, "draft": cmd_draft, "checkout": cmd_checkout}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
