"""Stage 9: apply fixes. ``--fix`` applies safe fixes, ``--unsafe-fixes`` adds unsafe ones,
``--diff`` prints what ``--fix`` would change and writes nothing. See docs/fixes.md.

One file at a time: lint -> choose the applicable, non-overlapping fixes -> splice their edits
into the text -> check the new text still parses -> lint again, until no applicable fix is left
(at most ``MAX_PASSES``). A file is written only if every pass parsed, atomically, and only if
it has not changed on disk since it was read.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from torchlint.diagnostics import SAFE, UNSAFE, Diagnostic, Fix
from torchlint.locator import Locator
from torchlint.source import SourceFile, UnreadableFile, decode_source, is_notebook_path
from torchlint.workers import reraise_interrupt

#: Fix passes per file. Each pass applies every applicable fix that does not overlap one already
#: chosen; a later pass picks up the rest and fixes that other fixes made possible. Real chains
#: are two or three passes long; a rule whose fix keeps re-firing stops here with a warning.
MAX_PASSES = 10

# Fixing costs several lints per file; a pool pays for itself sooner than when only linting.
MIN_FILES_FOR_POOL = 8

_NEWLINE = re.compile(r"\r\n|\r|\n")


# -- applicability -------------------------------------------------------------------------------

def _specificity(selector: str, code: str) -> int:
    """How precisely ``selector`` names ``code`` (-1: not at all). ALL < TL < TL1 < TL101."""
    from torchlint.rules import code_for

    sel = selector.strip()
    if sel.upper() == "ALL":
        return 0
    if code_for(sel) == code:
        return 100
    if re.fullmatch(r"(?i)TL\d*", sel) and code.startswith(sel.upper()):
        return len(sel)
    return -1


def resolve_applicability(code: str, applicability: str, settings) -> str:
    """The applicability of a fix for ``code`` after ``extend-safe-fixes`` /
    ``extend-unsafe-fixes``. If a code is named by both, the more specific selector wins
    (``TL101`` beats ``TL1`` beats ``ALL``); on a tie the fix stays unsafe."""
    promoted = code in settings.promoted_safe
    demoted = code in settings.demoted_unsafe
    if promoted and demoted:
        safe_rank = max(_specificity(s, code) for s in settings.extend_safe_fixes)
        unsafe_rank = max(_specificity(s, code) for s in settings.extend_unsafe_fixes)
        return SAFE if safe_rank > unsafe_rank else UNSAFE
    if demoted:
        return UNSAFE
    if promoted:
        return SAFE
    return applicability


def effective_fixes(diagnostics: List[Diagnostic], settings) -> List[Diagnostic]:
    """Diagnostics with the configuration applied to their fixes: codes that are not
    ``fixable`` (or are ``unfixable``) lose their fix, as in ruff; promoted/demoted codes get
    their new applicability. Used on every path (report, json, fix), so what is shown is what
    ``--fix`` would do."""
    if not any(d.fix for d in diagnostics) or _default_fix_settings(settings):
        return diagnostics
    fixable = settings.fixable_codes
    out = []
    for d in diagnostics:
        if d.fix is not None:
            if d.code not in fixable:
                d = dataclasses.replace(d, fix=None)
            else:
                applicability = resolve_applicability(d.code, d.fix.applicability, settings)
                if applicability != d.fix.applicability:
                    d = dataclasses.replace(d, fix=dataclasses.replace(d.fix, applicability=applicability))
        out.append(d)
    return out


def _default_fix_settings(settings) -> bool:
    # Checked without expanding codes: a warm cached run must not load the rule registry.
    return (
        tuple(settings.fixable) == ("ALL",)
        and not settings.unfixable
        and not settings.extend_safe_fixes
        and not settings.extend_unsafe_fixes
    )


def apply_fix_settings(diagnostics: List[Diagnostic], resolver) -> List[Diagnostic]:
    """``effective_fixes`` for the diagnostics of many files, each with its own settings."""
    if not any(d.fix for d in diagnostics):
        return diagnostics
    by_path: Dict[str, List[Diagnostic]] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    adjusted = {path: iter(effective_fixes(ds, resolver.for_path(path))) for path, ds in by_path.items()}
    return [next(adjusted[d.path]) for d in diagnostics]  # same order as given


def is_applicable(fix: Optional[Fix], unsafe: bool) -> bool:
    return fix is not None and (fix.applicability == SAFE or (unsafe and fix.applicability == UNSAFE))


# -- one text --------------------------------------------------------------------------------

def line_ending(text: str) -> str:
    match = _NEWLINE.search(text)
    return match.group(0) if match else "\n"


def select_fixes(diagnostics: Sequence[Diagnostic], text: str, unsafe: bool):
    """The fixes of one pass: in file order, each applicable fix whose edits touch no edit already
    chosen (an identical edit, such as the same added import, is shared instead).

    Returns (spans to splice, the diagnostics whose fixes were chosen, codes whose fix is broken).
    """
    locator = Locator(text)
    chosen: List[Tuple[int, int, str]] = []
    taken: Set[Tuple[int, int, str]] = set()
    fixed: List[Diagnostic] = []
    broken: List[str] = []
    for d in diagnostics:
        if not is_applicable(d.fix, unsafe):
            continue
        spans = sorted(  # stable: two insertions at one offset keep the rule's order
            ((locator.offset(e.location), locator.offset(e.end_location), e.content) for e in d.fix.edits),
            key=lambda s: (s[0], s[1]),
        )
        if any(end < start for start, end, _ in spans) or any(
            b[0] < a[1] for a, b in zip(spans, spans[1:])
        ):
            broken.append(d.code)  # a rule bug: its own edits overlap or run backwards
            continue
        new = [s for s in spans if s not in taken]
        # Closed intervals: edits that merely touch also wait for the next pass, as in ruff.
        if any(s <= ce and cs <= e for s, e, _ in new for cs, ce, _ in chosen):
            continue
        chosen.extend(new)
        taken.update(new)
        fixed.append(d)
    return chosen, fixed, broken


def splice(text: str, spans: Sequence[Tuple[int, int, str]], newline: str = "\n") -> str:
    """``text`` with each (start, end, content) span replaced; spans must not overlap. Line
    endings in the content are written as the file's own (``newline``)."""
    out: List[str] = []
    cursor = 0
    # Stable on (start, end): an insertion and a replacement at the same offset keep their order.
    for start, end, content in sorted(spans, key=lambda s: (s[0], s[1])):
        out.append(text[cursor:start])
        out.append(_NEWLINE.sub(newline, content) if "\n" in content or "\r" in content else content)
        cursor = max(cursor, end)
    out.append(text[cursor:])
    return "".join(out)


def parse_error(text: str, path: str, strict: bool = True) -> Optional[str]:
    """Why ``text`` is not valid Python for both libcst and CPython, or None.

    ``strict`` also runs ``compile()`` (which catches e.g. ``return`` outside a function);
    it is off for files that did not compile before any fix, so that only what a fix broke
    is blamed on it."""
    import libcst as cst

    try:
        cst.parse_module(text)
    except Exception as exc:  # ParserSyntaxError, RecursionError, ...
        return f"libcst: {str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__}"
    try:
        if strict:
            compile(text, path, "exec", dont_inherit=True)
        else:
            ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = getattr(exc, "msg", None) or str(exc)
        line = getattr(exc, "lineno", None)
        return f"{exc.__class__.__name__}: {msg}" + (f" (line {line})" if line else "")
    return None


def _compiles(text: str, path: str) -> bool:
    try:
        compile(text, path, "exec", dont_inherit=True)
    except Exception:
        return False
    return True


@dataclass
class FixResult:
    """What fixing one file's text came to."""

    path: str
    original: str
    text: str  # the fixed text; the original when a fix broke the file
    #: code -> number of fixes applied (counted over all passes)
    applied: Counter = field(default_factory=Counter)
    #: findings left in ``text``
    remaining: List[Diagnostic] = field(default_factory=list)
    #: one-line errors naming the file; the file must not be written
    error: Optional[str] = None
    #: one-line warnings (did not converge, a rule's broken fix); the file is still written
    warnings: List[str] = field(default_factory=list)
    passes: int = 0

    @property
    def changed(self) -> bool:
        return self.error is None and self.text != self.original

    @property
    def fixed_count(self) -> int:
        return sum(self.applied.values()) if self.changed else 0


def _lint(text: str, path: str, settings) -> List[Diagnostic]:
    from torchlint.engine import lint_source

    if is_notebook_path(path):
        from torchlint.notebook import lint_notebook

        return effective_fixes(lint_notebook(text, path, settings), settings)
    return effective_fixes(lint_source(text, path, settings), settings)


def fix_text(text: str, path: str, settings, *, unsafe: bool = False, lint=None) -> FixResult:
    """Apply fixes to ``text`` until none applies (at most ``MAX_PASSES`` passes).

    ``lint(text, path, settings) -> diagnostics`` defaults to the engine with the configured
    applicability; tests pass their own. Nothing here touches the disk. A notebook's JSON text
    is fixed cell by cell (``notebook.fix_notebook``; ``UnreadableFile`` if it is not one)."""
    if lint is None and is_notebook_path(path):
        from torchlint.notebook import fix_notebook

        return fix_notebook(text, path, settings, unsafe=unsafe)
    lint = lint or _lint
    result = FixResult(path=path, original=text, text=text)
    newline = line_ending(text)
    strict: Optional[bool] = None  # decided lazily: only files with a fix pay for compile()
    broken_seen: Set[str] = set()
    diagnostics = lint(text, path, settings)
    first = diagnostics
    for _ in range(MAX_PASSES):
        spans, fixed, broken = select_fixes(diagnostics, text, unsafe)
        for code in broken:
            if code not in broken_seen:
                broken_seen.add(code)
                result.warnings.append(f"{path}: {code} offered a fix with overlapping edits; fix skipped")
        if not spans:
            break
        new_text = splice(text, spans, newline)
        if new_text == text:
            break  # fixes that change nothing would only loop
        if strict is None:
            strict = _compiles(result.original, path)
        why = parse_error(new_text, path, strict)
        if why is not None:
            codes = ", ".join(sorted({d.code for d in fixed}))
            result.error = (
                f"{path}: fix for {codes} produced code that does not parse ({why}); file left unchanged"
            )
            result.text = result.original
            result.applied = Counter()
            result.remaining = first
            return result
        text = new_text
        result.passes += 1
        result.applied.update(d.code for d in fixed)
        diagnostics = lint(text, path, settings)
    else:
        if select_fixes(diagnostics, text, unsafe)[0]:
            result.warnings.append(
                f"{path}: fixes did not converge after {MAX_PASSES} passes; "
                "the file was fixed as far as it went (please report this rule bug)"
            )
    result.text = text
    result.remaining = diagnostics
    return result


def unified_diff(before: str, after: str, path: str) -> str:
    """A unified diff in git's style (``--- a/path`` / ``+++ b/path``), keeping line endings."""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    lines = []
    import difflib  # only for --diff

    for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}"):
        if line.startswith(("---", "+++", "@@")):
            lines.append(line.rstrip("\r\n") + "\n")
        elif not line.endswith(("\n", "\r")):
            lines.append(line + "\n\\ No newline at end of file\n")
        else:
            lines.append(line)
    return "".join(lines)


def file_diff(before: str, after: str, path: str) -> str:
    """``unified_diff`` for a file; for a notebook, one diff per changed cell."""
    if is_notebook_path(path):
        from torchlint.notebook import diff

        return diff(before, after, path)
    return unified_diff(before, after, path)


# -- files -----------------------------------------------------------------------------------

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


def fix_file(path: str, settings, unsafe: bool, write: bool) -> FileOutcome:
    """Fix one file on disk (``write``) or only compute its diff (``write=False``)."""
    from torchlint.engine import unreadable
    from torchlint.source import max_file_size, read_bytes

    outcome = FileOutcome(path)
    try:
        data, before = read_bytes(path, max_file_size(settings))
        source = decode_source(data, path)
    except UnreadableFile as exc:
        if "TL002" in settings.codes_for_path(path):
            outcome.diagnostics.append(unreadable(path, str(exc)))
        return outcome
    try:
        result = fix_text(source.text, path, settings, unsafe=unsafe)
    except UnreadableFile as exc:  # a .ipynb that is not a notebook
        if "TL002" in settings.codes_for_path(path):
            outcome.diagnostics.append(unreadable(path, str(exc)))
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
    error = write_if_unchanged(path, data, before, source.encode(result.text))
    if error:
        outcome.errors.append(error)
        # Nothing was written: report what is in the file, not what would have been.
        result.text = result.original
        result.applied = Counter()
        result.remaining = _lint(result.original, path, settings)
        return outcome
    outcome.written = True
    return outcome


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


def _fix_chunk(items):
    return [fix_file(path, settings, unsafe, write) for path, settings, unsafe, write in items]


def _reap_temp_files(files: Sequence[str]) -> None:
    """Remove temporary files that killed runs left next to the files about to be fixed."""
    from torchlint.atomic import reap_stale

    for directory in {os.path.dirname(os.path.realpath(path)) for path in files}:
        reap_stale(directory)


def fix_paths(files: Sequence[str], resolver, *, unsafe: bool, write: bool, jobs: Optional[int] = None) -> List[FileOutcome]:
    from torchlint.runner import default_jobs

    if write:
        _reap_temp_files(files)
    items = [(path, resolver.for_path(path), unsafe, write) for path in files]
    jobs = jobs or default_jobs()
    if jobs > 1 and len(items) >= MIN_FILES_FOR_POOL:
        from torchlint.engine import lint_source  # noqa: F401  (forked workers inherit it)
        from torchlint.rules import all_rules
        from torchlint.workers import map_in_pool

        all_rules()
        # Largest files first, so that no huge file starts last while the other cores idle.
        order = sorted(range(len(items)), key=lambda i: -_size(items[i][0]))
        ordered = [items[i] for i in order]
        chunk = max(1, min(16, len(items) // (jobs * 8) or 1))
        chunks = [ordered[i:i + chunk] for i in range(0, len(ordered), chunk)]
        done = [o for rows in map_in_pool(_fix_chunk, chunks, jobs) for o in rows]
        outcomes: List[Optional[FileOutcome]] = [None] * len(items)
        for i, o in zip(order, done):
            outcomes[i] = o
        return outcomes  # in the order given: diffs and errors come out in file order
    return _fix_chunk(items)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# -- the command -----------------------------------------------------------------------------

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
        lines.append(f"- {path}:")
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
    from torchlint import cli
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
            print(f"torchlint: warning: {warning}", file=sys.stderr)
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
            print(f"torchlint: error: {error}", file=sys.stderr)
        if not quiet:
            note = f"Would fix {_plural(total, 'finding')}." if total else "No fixes available."
            if hidden:
                note = note[:-1] + f" ({hidden} more with --unsafe-fixes)."
            print(note, file=sys.stderr)
        if result.errors:
            return cli.EXIT_ERROR
        return cli.EXIT_FINDINGS if diff else cli.EXIT_OK

    if args.fix_only:
        if args.show_fixes and total and human:
            (sys.stderr if stdin else sys.stdout).write(fix_summary(applied, would=False))
        for error in result.errors:
            print(f"torchlint: error: {error}", file=sys.stderr)
        if not quiet and total:
            note = f"Fixed {_plural(total, 'finding')}."
            if hidden:
                note = note[:-1] + f" ({_plural(hidden, 'unsafe fix')} available with --unsafe-fixes)."
            print(note, file=sys.stderr)
        if not result.errors and total and getattr(args, "exit_non_zero_on_fix", False) and not args.exit_zero:
            return cli.EXIT_FINDINGS  # --exit-non-zero-on-fix: a file was changed
        return cli.EXIT_ERROR if result.errors else cli.EXIT_OK

    note = f"Fixed {_plural(total, 'finding')}." if total else None
    code = cli.report(result, args, resolver, fixed_note=note, checked_paths=checked_paths)
    if args.show_fixes and total and human:
        (sys.stderr if stdin else sys.stdout).write(fix_summary(applied, would=False))
    return code


def run_fix(files: Sequence[str], resolver, args) -> int:
    """``torchlint --fix`` / ``--diff`` / ``--fix-only`` over files on disk."""
    outcomes = fix_paths(files, resolver, unsafe=args.unsafe_fixes, write=not args.diff, jobs=args.jobs)
    return _finish(outcomes, list(files), args, resolver)


def run_fix_stdin(source: SourceFile, settings, args) -> int:
    """Fix a buffer read from stdin, as ruff does: with ``--fix``/``--fix-only`` the fixed source
    goes to stdout (the original if a fix would break it) and the report to stderr; with
    ``--diff`` the diff goes to stdout."""
    import contextlib

    outcome = FileOutcome(source.path)
    try:
        result = fix_text(source.text, source.path, settings, unsafe=args.unsafe_fixes)
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
    """What ``cli.report`` needs of a resolver when there is only one file's settings."""

    def __init__(self, settings) -> None:
        self.default = settings

    def for_path(self, path: str):
        return self.default
