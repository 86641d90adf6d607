"""``torchlint --fix`` / ``--diff`` / ``--fix-only``: fix files on disk (or stdin) with the fixer,
one file at a time, in a pool when there are enough files, and report what was fixed and what
remains. A file is written only if every fix pass parsed, atomically, and only if it has not
changed on disk since it was read. See docs/fixes.md."""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set

from torchlint.commands.report import report
from torchlint.commands.usage import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from torchlint.diagnostics import UNSAFE, Diagnostic
from torchlint.fixer import FixResult, effective_fixes, fix_text, lint_for_fix, unified_diff
from torchlint.reporters.base import printable
from torchlint.source import SourceFile, UnreadableFile, is_notebook_path
from torchlint.workers import reraise_interrupt

# Fixing costs several lints per file; a pool pays for itself sooner than when only linting.
MIN_FILES_FOR_POOL = 8


# -- one file: Python source or a notebook -------------------------------------------------------

def fix_source(text: str, path: str, settings: Any, *, unsafe: bool = False) -> FixResult:
    """``fixer.fix_text``; a notebook's JSON text is fixed cell by cell (``notebook.fix_notebook``;
    ``UnreadableFile`` if it is not one)."""
    if is_notebook_path(path):
        from torchlint.notebook import fix_notebook

        return fix_notebook(text, path, settings, unsafe=unsafe)
    return fix_text(text, path, settings, unsafe=unsafe)


def _lint(text: str, path: str, settings: Any) -> List[Diagnostic]:
    if is_notebook_path(path):
        from torchlint.notebook import lint_notebook

        return effective_fixes(lint_notebook(text, path, settings), settings)
    return lint_for_fix(text, path, settings)


def file_diff(before: str, after: str, path: str) -> str:
    """``unified_diff`` for a file; for a notebook, one diff per changed cell. A name with
    control characters or bytes that are not UTF-8 is escaped in the headers (``printable``)."""
    if is_notebook_path(path):
        from torchlint.notebook import diff

        return diff(before, after, printable(path))
    return unified_diff(before, after, printable(path))


# -- files on disk -----------------------------------------------------------------------------

@dataclass
class FileOutcome:
    path: str
    result: Optional[FixResult] = None
    #: findings for a file that could not be fixed at all (TL002)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    diff: str = ""
    written: bool = False


def fix_file(path: str, settings: Any, unsafe: bool, write: bool) -> FileOutcome:
    """Fix one file on disk (``write``) or only compute its diff (``write=False``)."""
    from torchlint.runner import read_file, unreadable_findings

    outcome = FileOutcome(path)
    read = read_file(path, settings)
    if read.source is None or read.data is None or read.stat is None:
        outcome.diagnostics.extend(read.findings)
        return outcome
    source = read.source
    try:
        result = fix_source(source.text, path, settings, unsafe=unsafe)
    except UnreadableFile as exc:  # a .ipynb that is not a notebook
        outcome.diagnostics.extend(unreadable_findings(path, exc, settings))
        return outcome
    except RecursionError:  # nested past what a recursive step took: TL003, left unchanged
        from torchlint.engine import too_complex

        outcome.diagnostics.extend(too_complex(path, settings))
        return outcome
    except Exception as exc:  # a rule bug must not take the whole run down
        reraise_interrupt(exc)
        outcome.errors.append(f"{path}: internal error: {exc.__class__.__name__}: {exc}")
        return outcome
    outcome.result = result
    outcome.warnings.extend(result.warnings)
    if result.error:
        outcome.errors.append(result.error)
        return outcome
    if not result.changed:
        return outcome
    if not write:
        outcome.diff = file_diff(result.original, result.text, path)
        return outcome
    error = write_if_unchanged(path, read.data, read.stat, source.encode(result.text))
    if error:
        outcome.errors.append(error)
        # Nothing was written: report what is in the file, not what would have been.
        result.text = result.original
        result.applied = Counter()
        result.remaining = _lint(result.original, path, settings)
        return outcome
    outcome.written = True
    return outcome


def lint_only(path: str, settings: Any, note: Optional[str] = None) -> FileOutcome:
    """One file linted, not fixed (``fix_plan``): its findings as it is on disk, ``note`` as a
    warning."""
    from torchlint.runner import read_file

    outcome = FileOutcome(path)
    if note:
        outcome.warnings.append(note)
    read = read_file(path, settings)
    if read.source is None:
        outcome.diagnostics.extend(read.findings)
        return outcome
    try:
        remaining = _lint(read.source.text, path, settings)
    except UnreadableFile as exc:
        from torchlint.runner import unreadable_findings

        outcome.diagnostics.extend(unreadable_findings(path, exc, settings))
        return outcome
    except RecursionError:
        from torchlint.engine import too_complex

        outcome.diagnostics.extend(too_complex(path, settings))
        return outcome
    except Exception as exc:
        reraise_interrupt(exc)
        outcome.errors.append(f"{path}: internal error: {exc.__class__.__name__}: {exc}")
        return outcome
    outcome.result = FixResult(path, read.source.text, read.source.text, remaining=remaining)
    return outcome


def _within(real: str, roots: Sequence[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def fix_plan(files: Sequence[str], roots: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """The files ``--fix`` lints without fixing, each with why: a second name of a file fixed
    under its first (a symlink to it: by real path; fixing it twice reported 'file changed on
    disk'), and a symlink whose target lies outside every linted root (the paths given; ``--fix
    .`` must not rewrite a file elsewhere through a link in the tree). A hard link is a file of
    its own here: the atomic replacement gives the name fixed a new file."""
    skipped: Dict[str, str] = {}
    real_roots = [os.path.realpath(root) for root in roots] if roots else None
    seen: Set[str] = set()
    for path in files:
        real = os.path.realpath(path)
        if real in seen:
            skipped[path] = ""  # the same file as an earlier name, fixed once under that one
            continue
        seen.add(real)
        if real_roots is not None and real != os.path.abspath(path) and not _within(real, real_roots):
            skipped[path] = (f"{path}: a symlink to {real}, outside the linted paths: linted, not fixed "
                             "(name the file itself to fix it)")
    return skipped


def write_if_unchanged(path: str, data: bytes, before: os.stat_result, new: bytes) -> Optional[str]:
    """Atomically replace ``path`` (a symlink's target) with ``new`` unless it changed since
    ``data`` was read from it (stat ``before``), keeping its owner and mode; read-only files are
    refused. Returns a one-line error or None (see ``atomic.replace_if_unchanged``)."""
    from torchlint.atomic import WriteRefused, replace_if_unchanged
    from torchlint.workers import parent_alive

    try:
        replace_if_unchanged(path, new, data, before, still_allowed=parent_alive)
    except WriteRefused as exc:
        return f"{path}: {exc}; file left unchanged"
    except OSError as exc:
        return f"{path}: cannot write: {exc.strerror or exc}; file left unchanged"
    return None


def _fix_chunk(items: Sequence[tuple]) -> List[FileOutcome]:
    return [fix_file(path, settings, unsafe, write) for path, settings, unsafe, write in items]


def _reap_temp_files(files: Sequence[str]) -> None:
    """Remove temporary files that killed runs left next to the files about to be fixed."""
    from torchlint.atomic import reap_stale

    for directory in {os.path.dirname(os.path.realpath(path)) for path in files}:
        reap_stale(directory)


def fix_paths(files: Sequence[str], resolver: Any, *, unsafe: bool, write: bool,
              jobs: Optional[int] = None, roots: Optional[Sequence[str]] = None) -> List[FileOutcome]:
    """``fix_file`` for every file, in the order given (diffs and errors come out in file order);
    those ``fix_plan`` sets aside (with ``roots``, the linted paths) are linted once the others
    are fixed."""
    from torchlint.runner import default_jobs

    skipped = fix_plan(files, roots)
    fixable = [path for path in files if path not in skipped]
    if write:
        _reap_temp_files(fixable)
    items = [(path, resolver.for_path(path), unsafe, write) for path in fixable]
    jobs = jobs or default_jobs()
    if jobs > 1 and len(items) >= MIN_FILES_FOR_POOL:
        from torchlint.engine import lint_source  # noqa: F401  (forked workers inherit it)
        from torchlint.rules import all_rules
        from torchlint.workers import map_chunked

        all_rules()
        fixed = map_chunked(_fix_chunk, items, [_size(path) for path in fixable], jobs)
    else:
        fixed = _fix_chunk(items)
    if not skipped:
        return fixed
    by_path = {o.path: o for o in fixed}
    return [by_path[path] if path in by_path else lint_only(path, resolver.for_path(path), skipped[path] or None)
            for path in files]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# -- the report --------------------------------------------------------------------------------

def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def fix_summary(applied: Dict[str, Counter], would: bool) -> str:
    """``--show-fixes``: per file, per code, how many fixes (ruff's layout)."""
    from torchlint.rules import name_for

    total = sum(sum(c.values()) for c in applied.values())
    if not total:
        return ""
    lines = [f"{'Would fix' if would else 'Fixed'} {_plural(total, 'finding')}:"]
    for path in sorted(applied):
        if not applied[path]:
            continue
        lines.append(f"- {printable(path)}:")
        for code, n in sorted(applied[path].items()):
            try:
                name = name_for(code)
            except KeyError:
                name = code
            lines.append(f"    {n} × {code} ({name})")
    return "\n".join(lines) + "\n"


def _hidden_unsafe(diagnostics: Sequence[Diagnostic]) -> int:
    return sum(1 for d in diagnostics if d.fix is not None and d.fix.applicability == UNSAFE)


def _finish(outcomes: List[FileOutcome], checked_paths: Sequence[str], args, resolver, *, stdin: bool = False) -> int:
    """Report after fixing: the diff (--diff), what remains (unless --fix-only), the fix list."""
    from torchlint.reporters import HUMAN_FORMATS
    from torchlint.runner import RunResult

    result = RunResult(files_checked=len(checked_paths))
    applied: Dict[str, Counter] = {}
    for o in outcomes:
        result.errors.extend(o.errors)
        result.diagnostics.extend(o.diagnostics)
        if o.result is not None:
            if o.result.fixed_count:
                applied[o.path] = o.result.applied
            result.diagnostics.extend(o.result.remaining)
            if o.result.remaining:
                result.sources[o.path] = o.result.text
    result.diagnostics.sort(key=Diagnostic.sort_key)
    for o in outcomes:
        for warning in o.warnings:
            print(f"torchlint: warning: {printable(warning)}", file=sys.stderr)
    total = sum(sum(c.values()) for c in applied.values())
    fmt = args.output_format or "full"
    human = fmt in HUMAN_FORMATS
    quiet = args.quiet
    hidden = 0 if args.unsafe_fixes else _hidden_unsafe(result.diagnostics)

    if args.diff:
        diff = "".join(o.diff for o in outcomes)
        if diff:
            sys.stdout.write(diff)
            sys.stdout.flush()
        if args.show_fixes and total:  # stderr: stdout stays a clean patch
            sys.stderr.write(fix_summary(applied, would=True))
        for error in result.errors:
            print(f"torchlint: error: {printable(error)}", file=sys.stderr)
        if not quiet:
            note = f"Would fix {_plural(total, 'finding')}." if total else "No fixes available."
            if hidden:
                note = note[:-1] + f" ({hidden} more with --unsafe-fixes)."
            print(note, file=sys.stderr)
        if result.errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if diff else EXIT_OK

    if args.fix_only:
        if args.show_fixes and total and human:
            (sys.stderr if stdin else sys.stdout).write(fix_summary(applied, would=False))
        for error in result.errors:
            print(f"torchlint: error: {printable(error)}", file=sys.stderr)
        if not quiet and total:
            note = f"Fixed {_plural(total, 'finding')}."
            if hidden:
                note = note[:-1] + f" ({_plural(hidden, 'unsafe fix')} available with --unsafe-fixes)."
            print(note, file=sys.stderr)
        if not result.errors and total and getattr(args, "exit_non_zero_on_fix", False) and not args.exit_zero:
            return EXIT_FINDINGS  # --exit-non-zero-on-fix: a file was changed
        return EXIT_ERROR if result.errors else EXIT_OK

    fixed_note = f"Fixed {_plural(total, 'finding')}." if total else None
    code = report(result, args, resolver, fixed_note=fixed_note, checked_paths=checked_paths)
    if args.show_fixes and total and human:
        (sys.stderr if stdin else sys.stdout).write(fix_summary(applied, would=False))
    return code


def run_fix(files: Sequence[str], resolver, args) -> int:
    """``torchlint --fix`` / ``--diff`` / ``--fix-only`` over files on disk."""
    outcomes = fix_paths(files, resolver, unsafe=args.unsafe_fixes, write=not args.diff, jobs=args.jobs,
                         roots=args.paths or ["."])
    return _finish(outcomes, list(files), args, resolver)


def run_fix_stdin(source: SourceFile, settings, args) -> int:
    """Fix a buffer read from stdin, as ruff does: with ``--fix``/``--fix-only`` the fixed source
    goes to stdout (the original if a fix would break it) and the report to stderr; with
    ``--diff`` the diff goes to stdout."""
    import contextlib

    outcome = FileOutcome(source.path)
    try:
        result = fix_source(source.text, source.path, settings, unsafe=args.unsafe_fixes)
    except Exception as exc:
        reraise_interrupt(exc)
        outcome.errors.append(f"{source.path}: internal error: {exc.__class__.__name__}: {exc}")
        result = FixResult(source.path, source.text, source.text)
    outcome.result = result
    outcome.warnings.extend(result.warnings)
    if result.error:
        outcome.errors.append(result.error)
    if args.diff:
        if result.changed:
            outcome.diff = file_diff(result.original, result.text, source.path)
    else:
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        if out is not None:
            out.write(source.encode(result.text))
            out.flush()
        else:  # a text-only stream (e.g. redirected in-process)
            sys.stdout.write(result.text)
            sys.stdout.flush()
    resolver = _SingleResolver(settings)
    with contextlib.redirect_stdout(sys.stderr) if not args.diff else contextlib.nullcontext():
        return _finish([outcome], [source.path], args, resolver, stdin=True)


class _SingleResolver:
    """What ``report`` needs of a resolver when there is only one file's settings."""

    def __init__(self, settings) -> None:
        self.default = settings

    def for_path(self, path: str):
        return self.default
