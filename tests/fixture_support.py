"""Read fixtures, their inline markers and their snapshots (the format: docs/fixtures.md).

A fixture ``fixtures/TL201.py`` says where findings are with marker comments (``# TL201`` at
the end of the reported line, or alone on the line above it); its settings are ``# fixture:``
TOML lines at the top. ``fixtures/snapshots/TL201.snap`` records each finding's exact range,
message and fix diff, and the whole-file result of the real fixer (``fixer.fix_text``).
"""

from __future__ import annotations

import difflib
import io
import re
import sys
import tokenize
from collections import Counter
from pathlib import Path
from typing import List, Sequence, Tuple

from torchlint.config import Settings, settings_from_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"

#: A settings line: ``# fixture: preview = true`` (TOML, applied as ``[tool.torchlint]``).
SETTINGS_PREFIX = "# fixture:"
#: The marker: a ``#`` segment of a comment that begins with codes (``# TL201``, ``# TL201: why``,
#: ``# TL201, TL201`` for two findings starting on one line, ``# note  # TL201``).
MARKER = re.compile(r"#\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)\b")
CODE = re.compile(r"TL\d{3}")


def fixture_files() -> List[Path]:
    return sorted(FIXTURES.glob("TL*.py"))


def fixture_code(path: Path) -> str:
    return path.stem.split("_", 1)[0]


def snapshot_path(path: Path) -> Path:
    return SNAPSHOTS / f"{path.stem}.snap"


def fixture_settings(path: Path, text: str = None) -> Settings:
    """The settings a fixture runs with: only its rule selected, plus its ``# fixture:`` lines."""
    text = path.read_text(encoding="utf-8") if text is None else text
    header = [line[len(SETTINGS_PREFIX):].strip() for line in text.splitlines() if line.startswith(SETTINGS_PREFIX)]
    table = tomllib.loads("\n".join(header)) if header else {}
    table.setdefault("select", [fixture_code(path)])
    return settings_from_table(table, str(path), Settings(root=str(ROOT)))


def markers(text: str) -> List[Tuple[int, str]]:
    """(row, code) for each marker, sorted; a marker alone on its line names the next line that
    holds code (comment-only and blank lines are skipped)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    code_rows = set()
    for tok in tokens:
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            code_rows.update(range(tok.start[0], tok.end[0] + 1))
    out: List[Tuple[int, str]] = []
    pending: List[str] = []
    comments = {tok.start[0]: tok for tok in tokens if tok.type == tokenize.COMMENT}
    for row in range(1, len(text.splitlines()) + 1):
        tok = comments.get(row)
        if row in code_rows:
            out += [(row, code) for code in pending]
            pending = []
        if tok is None:
            continue
        codes = [c for match in MARKER.finditer(tok.string) for c in CODE.findall(match.group(1))]
        if not codes:
            continue
        if row in code_rows:
            out += [(row, code) for code in codes]
        else:
            pending += codes
    if pending:
        raise ValueError(f"marker {pending} names no line below it")
    return sorted(out)


def finding_markers(diagnostics) -> List[Tuple[int, str]]:
    return sorted((d.location.row, d.code) for d in diagnostics)


def format_finding(d) -> str:
    return f"{d.location.row}:{d.location.column}-{d.end_location.row}:{d.end_location.column} {d.code}"


def _diff(before: str, after: str) -> List[str]:
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        lines.append(line)
    return lines


def render_snapshot(path: Path, text: str, diagnostics: Sequence, fixed) -> str:
    """The snapshot text: every finding (range, code, message, fix and its diff through the
    fixer's own selection and splice), then the whole file through ``fixer.fix_text``."""
    from torchlint import fixer

    rel = path.relative_to(ROOT).as_posix()
    out = [
        f"# {rel}: {len(diagnostics)} findings. Generated: python -m pytest tests/test_fixtures.py --update-snapshots",
        "",
    ]
    for d in diagnostics:
        out.append(f"{format_finding(d)} {d.name}")
        out.append(f"  message: {d.message}")
        if d.fix is None:
            out.append("  fix: none")
        else:
            out.append(f"  fix ({d.fix.applicability}): {d.fix.message}")
            spans, chosen, broken = fixer.select_fixes([d], text, unsafe=True)
            after = fixer.splice(text, spans, fixer.line_ending(text))
            why = fixer.parse_error(after, str(path), strict=False)
            if broken or why:
                out.append(f"    BROKEN: {'overlapping edits' if broken else why}")
            out += ["    " + line for line in _diff(text, after)]
        out.append("")
    counts = ", ".join(f"{code} x{n}" for code, n in sorted(fixed.applied.items())) or "nothing"
    out.append(f"== fixer.fix_text, unsafe fixes on: applied {counts} in {fixed.passes} passes")
    if fixed.error:
        out.append(f"  ERROR: {fixed.error}")
    out += ["  " + line for line in _diff(text, fixed.text)]
    left = Counter(d.code for d in fixed.remaining)
    out.append(f"== left after fixing: {', '.join(f'{c} x{n}' for c, n in sorted(left.items())) or 'nothing'}")
    return "\n".join(line.rstrip() for line in out) + "\n"


_SNAPSHOTS: dict = {}


def snapshot_for(path: Path) -> Tuple[str, list]:
    """(the snapshot text of the fixture as it lints now, its diagnostics); computed once per
    fixture text in a test session."""
    text = path.read_text(encoding="utf-8")
    key = (str(path), text)
    if key not in _SNAPSHOTS:
        _SNAPSHOTS[key] = _snapshot(path, text)
    return _SNAPSHOTS[key]


def _snapshot(path: Path, text: str) -> Tuple[str, list]:
    from torchlint.engine import lint_source
    from torchlint.fixer import fix_text

    settings = fixture_settings(path, text)
    diagnostics = lint_source(text, str(path), settings)
    fixed = fix_text(text, str(path), settings, unsafe=True)
    return render_snapshot(path, text, diagnostics, fixed), diagnostics


def expected_for(path: Path) -> Tuple[Settings, List[Tuple[int, str]]]:
    """The settings a fixture runs with and its markers, (row, code)."""
    text = path.read_text(encoding="utf-8")
    return fixture_settings(path, text), markers(text)
