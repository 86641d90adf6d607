"""Every fixture's findings, asserted exactly (code, row, column, end), look-alikes included."""

from __future__ import annotations

import pytest

from fixture_support import expected_for, fixture_code, fixture_files, format_finding
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_fixture_findings(path):
    settings, expected = expected_for(path)
    text = path.read_text(encoding="utf-8")
    found = [format_finding(d) for d in lint_source(text, str(path), settings)]
    assert found == expected


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_fixture_flags_something_and_has_lookalikes(path):
    """A fixture must show the rule firing and carry commented must-not-flag cases."""
    settings, expected = expected_for(path)
    assert expected, f"{path.name} has no expected findings"
    assert "look-alike" in path.read_text().lower() or "silent" in path.read_text().lower()


def test_every_rule_has_a_fixture_and_a_docs_page():
    from fixture_support import ROOT

    codes = {fixture_code(p) for p in fixture_files()}
    for code in rules_by_code():
        assert code in codes, f"{code} has no fixture"
        assert (ROOT / "docs" / "rules" / f"{code}.md").is_file(), f"{code} has no docs page"
