"""Every fixture, asserted exactly (format: docs/fixtures.md).

- The marker comments (``# TL201`` on the reported line, or alone on the line above it) name
  the findings' rows and codes, so every line without a marker is asserted silent.
- The snapshot ``fixtures/snapshots/<fixture>.snap`` records each finding's exact range, its
  message, its fix (applicability, message and diff) and the whole file through the real fixer
  (``fixer.fix_text``, unsafe fixes on). Rewrite snapshots after a deliberate change with
  ``python -m pytest tests/test_fixtures.py --update-snapshots`` and review the diff.
"""

from __future__ import annotations

import difflib

import pytest

from fixture_support import (
    ROOT,
    SNAPSHOTS,
    finding_markers,
    fixture_code,
    fixture_files,
    markers,
    snapshot_for,
    snapshot_path,
)
from torchlint.rules import rules_by_code

FIXTURES = fixture_files()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_markers(path):
    """Each finding has its marker and each marker its finding."""
    text = path.read_text(encoding="utf-8")
    _, diagnostics = snapshot_for(path)
    assert finding_markers(diagnostics) == markers(text)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_snapshot(path, request):
    """Ranges, messages, fix diffs and the fixer's whole-file result match the snapshot."""
    snapshot, _ = snapshot_for(path)
    target = snapshot_path(path)
    if request.config.getoption("update_snapshots"):
        SNAPSHOTS.mkdir(exist_ok=True)
        if not target.is_file() or target.read_text(encoding="utf-8") != snapshot:
            target.write_text(snapshot, encoding="utf-8")
        return
    assert target.is_file(), f"{target.name} missing: run pytest tests/test_fixtures.py --update-snapshots"
    recorded = target.read_text(encoding="utf-8")
    if recorded != snapshot:
        diff = "\n".join(difflib.unified_diff(recorded.splitlines(), snapshot.splitlines(), "recorded", "now", lineterm=""))
        pytest.fail(f"{target.name} differs (--update-snapshots rewrites it):\n{diff}")


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_fixes_parse(path):
    """No fix, alone or all together through the fixer, breaks the file."""
    snapshot, _ = snapshot_for(path)
    assert "BROKEN:" not in snapshot and "ERROR:" not in snapshot


def test_every_snapshot_has_a_fixture():
    names = {p.stem for p in FIXTURES}
    stale = sorted(p.name for p in SNAPSHOTS.glob("*.snap") if p.stem not in names)
    assert stale == [], f"snapshots without a fixture: {stale}"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_flags_something_and_has_lookalikes(path):
    """A fixture must show the rule firing and carry commented must-not-flag cases."""
    text = path.read_text(encoding="utf-8")
    assert markers(text), f"{path.name} has no markers"
    assert "look-alike" in text.lower() or "silent" in text.lower()


def test_every_rule_has_a_fixture_and_a_docs_page():
    codes = {fixture_code(p) for p in FIXTURES}
    for code in rules_by_code():
        assert code in codes, f"{code} has no fixture"
        assert (ROOT / "docs" / "rules" / f"{code}.md").is_file(), f"{code} has no docs page"
