"""Stage 9: apply fixes to one text. See docs/fixes.md.

lint -> choose the applicable, non-overlapping fixes -> splice their edits into the text -> check
the new text still parses -> lint again, until no applicable fix is left (at most
``MAX_PASSES``). The configuration's ``fixable`` / ``extend-safe-fixes`` decide which fixes
apply. Nothing here touches the disk: ``commands/fix.py`` reads, fixes and writes files (and
notebooks, through ``notebook.fix_notebook``), the language server fixes its buffers.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from torchlint.diagnostics import SAFE, UNSAFE, Diagnostic, Fix
from torchlint.locator import Locator
from torchlint.source import is_notebook_path

#: Fix passes per file. Each pass applies every applicable fix that does not overlap one already
#: chosen; a later pass picks up the rest and fixes that other fixes made possible. Real chains
#: are two or three passes long; a rule whose fix keeps re-firing stops here with a warning.
MAX_PASSES = 10


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
        fix = d.fix
        if fix is not None:
            if d.code not in fixable:
                d = dataclasses.replace(d, fix=None)
            else:
                applicability = resolve_applicability(d.code, fix.applicability, settings)
                if applicability != fix.applicability:
                    d = dataclasses.replace(d, fix=dataclasses.replace(fix, applicability=applicability))
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
        if d.fix is None or not is_applicable(d.fix, unsafe):
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

    from torchlint.formfeed import without_form_feeds

    try:  # a form feed in indentation read as CPython reads it, as the lint did
        cst.parse_module(without_form_feeds(text)[0])
    except Exception as exc:  # ParserSyntaxError, RecursionError, ...
        return f"libcst: {str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__}"
    try:
        if strict:
            _compile(text, path)
        else:
            with _no_syntax_warnings():
                ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = getattr(exc, "msg", None) or str(exc)
        line = getattr(exc, "lineno", None)
        return f"{exc.__class__.__name__}: {msg}" + (f" (line {line})" if line else "")
    return None


@contextlib.contextmanager
def _no_syntax_warnings() -> Iterator[None]:
    """SyntaxWarnings of the linted code (``x is 1``, ``"\\d"``) are not ours to print: a lint
    shows none, so ``--fix`` and ``--diff`` show none either."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _compile(text: str, path: str):
    with _no_syntax_warnings():
        return compile(text, path, "exec", dont_inherit=True)


def _compiles(text: str, path: str) -> bool:
    try:
        _compile(text, path)
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


def lint_for_fix(text: str, path: str, settings) -> List[Diagnostic]:
    """The engine's findings with the configured fix applicability (``effective_fixes``)."""
    from torchlint.engine import lint_source

    return effective_fixes(lint_source(text, path, settings), settings)


def fix_text(text: str, path: str, settings, *, unsafe: bool = False, lint=None) -> FixResult:
    """Apply fixes to the Python source ``text`` until none applies (at most ``MAX_PASSES``
    passes).

    ``lint(text, path, settings) -> diagnostics`` defaults to the engine with the configured
    applicability; tests pass their own. Nothing here touches the disk. A notebook is fixed cell
    by cell with these same steps by ``notebook.fix_notebook``."""
    if is_notebook_path(path):
        raise ValueError(f"{path}: a notebook is fixed by notebook.fix_notebook, not fix_text")
    lint = lint or lint_for_fix
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
    from torchlint.source import split_lines

    a = split_lines(before, keepends=True)  # not at a form feed: a line ending in one is no end
    b = split_lines(after, keepends=True)
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


