"""A rule's metadata lives on its class; each docs page's title and header line say the same
(code, name, fix safety, preview status, the module the class is in). The README table is checked
the same way in tests/test_readme_rules.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchlint.rules import rules_by_code

ROOT = Path(__file__).resolve().parent.parent
RULES = rules_by_code()


def header(code: str):
    lines = (ROOT / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8").split("\n\n", 2)
    return lines[0].strip(), " ".join(lines[1].split())


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_header_matches_the_rule(code):
    rule = RULES[code]
    title, line = header(code)
    assert title == f"# {code} {rule.name}"
    fix = re.search(r"\*\*Fix:\*\* (\w+)", line)
    assert fix and fix.group(1) == (rule.fix_applicability or "none"), f"{code}: page says {line!r}"
    assert ("**Preview" in line) == rule.preview, f"{code}: preview status differs from the page"
    module = re.search(r"`(torchlint/rules/\w+\.py)`", line)
    assert module, f"{code}: the header names no module"
    assert f'code = "{code}"' in (ROOT / module.group(1)).read_text(encoding="utf-8")


@pytest.mark.parametrize("code", sorted(RULES))
def test_summary_and_tags(code):
    rule = RULES[code]
    assert rule.summary and "\n" not in rule.summary and len(rule.summary) <= 120
    assert isinstance(rule.tags, tuple) and all(re.fullmatch(r"[a-z][a-z-]*", t) for t in rule.tags)
