"""Helpers the rule tests share: lint a snippet with one rule selected, apply its fix, run the
code before and after a fix."""

from __future__ import annotations

import textwrap
from typing import List

import libcst as cst

from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import Diagnostic
from torchlint.edits import apply_edits
from torchlint.engine import lint_source


def lint(source: str, path: str = "train.py", *, rule: str) -> List[Diagnostic]:
    settings = settings_from_table({"select": [rule]}, "t.toml", Settings())
    return lint_source(textwrap.dedent(source), path, settings)


def findings(source: str, path: str = "train.py", *, rule: str):
    return [(d.code, d.location.row, d.location.column) for d in lint(source, path, rule=rule)]


def fixed(source: str, *, rule: str, applicability: str = "unsafe") -> str:
    """The text after applying the only finding's fix, which must have ``applicability``."""
    diagnostics = lint(source, rule=rule)
    assert len(diagnostics) == 1
    assert diagnostics[0].fix is not None and diagnostics[0].fix.applicability == applicability
    out = apply_edits(textwrap.dedent(source), diagnostics[0].fix.edits)
    cst.parse_module(out)
    return out


def fix_and_load(source: str, code: str, path: str = "train.py"):
    """(namespace of the original, namespace of the fixed program, fixed text)."""
    source = textwrap.dedent(source)
    diagnostics = lint(source, path, rule=code)
    assert diagnostics and all(d.fix is not None for d in diagnostics)
    fixed_text = apply_edits(source, [e for d in diagnostics for e in d.fix.edits])
    before, after = {}, {}
    exec(compile(source, "before.py", "exec"), before)
    exec(compile(fixed_text, "after.py", "exec"), after)
    return before, after, fixed_text
