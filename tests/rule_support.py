"""Helpers the rule tests share: lint a snippet with one rule selected, apply its fix through the
real fixer (``fixer.fix_text``, as ``torchlint --fix --unsafe-fixes`` does), run the code before
and after a fix."""

from __future__ import annotations

import textwrap
import warnings
from typing import List, Optional

import libcst as cst

from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import Diagnostic
from torchlint.engine import lint_source
from torchlint.fixer import fix_text


def _settings(rule: str) -> Settings:
    return settings_from_table({"select": [rule]}, "t.toml", Settings())


def lint(source: str, path: str = "train.py", *, rule: str) -> List[Diagnostic]:
    return lint_source(textwrap.dedent(source), path, _settings(rule))


def findings(source: str, path: str = "train.py", *, rule: str):
    return [(d.code, d.location.row, d.location.column) for d in lint(source, path, rule=rule)]


def fixed(source: str, *, rule: str, applicability: str = "unsafe") -> str:
    """The text after applying the only finding's fix, which must have ``applicability``."""
    diagnostics = lint(source, rule=rule)
    assert len(diagnostics) == 1
    assert diagnostics[0].fix is not None and diagnostics[0].fix.applicability == applicability
    result = fix_text(textwrap.dedent(source), "train.py", _settings(rule), unsafe=True)
    assert result.error is None and not result.warnings, result.error or result.warnings
    assert result.applied == {rule: 1}, f"the fixer applied {dict(result.applied)}"
    cst.parse_module(result.text)
    return result.text


def fix_and_load(source: str, code: str, path: str = "train.py"):
    """(namespace of the original, namespace of the fixed program, fixed text)."""
    source = textwrap.dedent(source)
    diagnostics = lint(source, path, rule=code)
    assert diagnostics and all(d.fix is not None for d in diagnostics)
    result = fix_text(source, path, _settings(code), unsafe=True)
    assert result.error is None and not result.warnings, result.error or result.warnings
    assert sum(result.applied.values()) >= len(diagnostics), f"the fixer applied {dict(result.applied)}"
    fixed_text = result.text
    before, after = {}, {}
    exec(compile(source, "before.py", "exec"), before)
    exec(compile(fixed_text, "after.py", "exec"), after)
    return before, after, fixed_text


def fixer_text(source: str, path: str, settings: Settings) -> str:
    """``source`` after ``torchlint --fix --unsafe-fixes`` with ``settings``: the real fixer
    (``fixer.fix_text``: fixes chosen and spliced pass by pass, the result checked to parse)."""
    result = fix_text(source, path, settings, unsafe=True)
    assert result.error is None and not result.warnings, result.error or result.warnings
    assert result.changed, "the fixer changed nothing"
    return result.text


def behaviour_fix(source: str, code: str, applicability: Optional[str] = None, count: Optional[int] = None,
                  path: str = "train.py", table: Optional[dict] = None) -> str:
    """``source`` (dedented) with every ``code`` fix applied by the real fixer, for the behaviour
    tests. With ``applicability``, every finding must carry a fix of that safety; without it,
    findings without a fix are left out and at least one must have one. ``count``: how many
    (fixable) findings there must be. ``table``: more settings (``preview``, ``target-torch-version``)."""
    source = textwrap.dedent(source)
    settings = settings_from_table({"select": [code], **(table or {})}, "t.toml", Settings())
    diagnostics = lint_source(source, path, settings)
    if applicability is not None:
        assert diagnostics and all(d.fix is not None for d in diagnostics)
        assert {d.fix.applicability for d in diagnostics} == {applicability}
    else:
        diagnostics = [d for d in diagnostics if d.fix is not None]
        assert diagnostics
    if count is not None:
        assert len(diagnostics) == count
    return fixer_text(source, path, settings)


def run_program(source: str, quiet: bool = False, **names) -> dict:
    """Execute ``source`` (dedented) with ``names`` defined; its namespace afterwards. ``quiet``:
    warnings the program raises (deprecations of the code before its fix) are not shown."""
    namespace = dict(names)
    code = compile(textwrap.dedent(source), "program.py", "exec")
    if quiet:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, namespace)
    else:
        exec(code, namespace)
    return namespace
