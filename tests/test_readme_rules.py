"""The README's rule table says what the rules say about themselves: one row per registered rule
and engine code, with the rule's code, name, fix safety and preview status (the metadata on the
rule classes, torchlint/rules/base.py) and a link to its docs page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchlint.rules import ENGINE_CODES, rules_by_code
from torchlint.suppression import UNUSED_NOQA, UNUSED_NOQA_FIX

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| \[(?P<code>TL\d+)\]\((?P<link>[^)]+)\) \| (?P<name>[^|]+) \| (?P<flags>.+) \| (?P<fix>[^|]+) \|$")


def table_rows():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| [TL"):
            continue
        match = ROW.match(line)
        assert match, f"README rule row does not have the table's shape: {line}"
        assert match["code"] not in rows, f"{match['code']} has two rows"
        rows[match["code"]] = match
    return rows


def expected():
    """code -> (name, fix safety, preview) from the rules themselves."""
    out = {code: (rule.name, rule.fix_applicability or "none", rule.preview) for code, rule in rules_by_code().items()}
    for code, (name, _) in ENGINE_CODES.items():
        out[code] = (name, UNUSED_NOQA_FIX if code == UNUSED_NOQA else "none", False)  # TL001-3: no fix
    return out


def test_every_rule_has_exactly_one_row():
    rows, rules = set(table_rows()), set(expected())
    assert rows - rules == set(), "rows for codes no rule has"
    assert rules - rows == set(), "registered rules missing from the README table"


@pytest.mark.parametrize("code", sorted(expected()))
def test_row_matches_the_rule(code):
    row = table_rows().get(code)
    if row is None:
        pytest.fail(f"{code} has no README row")
    name, fix, preview = expected()[code]
    assert row["name"].strip() == name
    assert row["link"] == f"docs/rules/{code}.md" and (ROOT / row["link"]).is_file()
    assert row["fix"].strip().split()[0] == fix, f"{code}: README says fix '{row['fix'].strip()}', the rule '{fix}'"
    assert row["flags"].strip().startswith("(preview)") == preview, f"{code}: preview status differs"
