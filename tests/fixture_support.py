"""Read fixtures and their expected findings (see fixtures/README.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Tuple

from torchlint.config import Settings, settings_from_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def fixture_files() -> List[Path]:
    return sorted(FIXTURES.glob("TL*.py"))


def fixture_code(path: Path) -> str:
    return path.stem.split("_", 1)[0]


def expected_for(path: Path) -> Tuple[Settings, List[str]]:
    """The settings a fixture runs with (only its rule selected) and its expected lines."""
    expected = path.with_suffix(".expected")
    lines = expected.read_text().splitlines()
    header = [l[1:].strip() for l in lines if l.startswith("#")]
    findings = [l.strip() for l in lines if l.strip() and not l.startswith("#")]
    table = tomllib.loads("\n".join(header)) if header else {}
    table.setdefault("select", [fixture_code(path)])
    return settings_from_table(table, str(expected), Settings(root=str(ROOT))), findings


def format_finding(d) -> str:
    return f"{d.location.row}:{d.location.column}-{d.end_location.row}:{d.end_location.column} {d.code}"
