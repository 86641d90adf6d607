"""Each rule's docs page is checked against the rule: the first ```python block under
"## Example" must be flagged by it (only that rule selected) and the first one under
"## Use instead" must not. Every page has ruff's sections."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source
from torchlint.ruledocs import code_blocks, sections
from torchlint.rules import ENGINE_CODES, rules_by_code

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "rules").glob("TL*.md"))
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")


def _rule_pages():
    return [p for p in PAGES if p.stem in rules_by_code()]


def _findings(code: str, text: str, page: Path):
    # preview on: a preview rule's page is checked too
    settings = settings_from_table({"select": [code], "preview": True}, str(page), Settings(root=str(ROOT)))
    return [d for d in lint_source(text, f"{code}_example.py", settings) if d.code == code]


def _first_python_block(page: Path, section: str) -> str:
    body = sections(page.read_text(encoding="utf-8")).get(section, "")
    blocks = code_blocks(body, "python")
    assert blocks, f"{page.name}: no ```python block under '## {section}'"
    return blocks[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_has_the_sections(page):
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {page.stem} "), f"{page.name}: first line must be '# {page.stem} <name>'"
    found = sections(text)
    missing = [s for s in REQUIRED_SECTIONS if s not in found]
    assert not missing, f"{page.name} lacks sections {missing}"
    name = text.splitlines()[0].split()[2] if len(text.splitlines()[0].split()) > 2 else ""
    rule = rules_by_code().get(page.stem)
    expected = rule.name if rule else ENGINE_CODES.get(page.stem, (name,))[0]
    assert name == expected, f"{page.name}: title names '{name}', the rule is '{expected}'"


@pytest.mark.parametrize("page", _rule_pages(), ids=lambda p: p.stem)
def test_example_is_flagged(page):
    example = _first_python_block(page, "Example")
    assert _findings(page.stem, example, page), f"{page.name}: the Example is not flagged by {page.stem}"


@pytest.mark.parametrize("page", _rule_pages(), ids=lambda p: p.stem)
def test_use_instead_is_clean(page):
    better = _first_python_block(page, "Use instead")
    found = _findings(page.stem, better, page)
    assert not found, f"{page.name}: 'Use instead' is flagged: {[(d.location.row, d.message) for d in found]}"


def test_engine_pages_exist():
    for code in ENGINE_CODES:
        assert (ROOT / "docs" / "rules" / f"{code}.md").is_file()
