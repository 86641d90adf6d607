"""Rule metadata the engine applies: test code, target torch version, preview."""

from __future__ import annotations

import libcst as cst

from torchlint import rules as registry
from torchlint.config import Settings
from torchlint.engine import lint_source
from torchlint.rules.base import Rule


class _Flag(Rule):
    code = "TL201"  # borrowed code: selection needs a registered one
    name = "flag-calls"
    summary = message = "a call"
    requires = (("flag(",),)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "flag":
            self.report(node)


def _codes(text: str, path: str = "train.py", rule=_Flag, **settings):
    return [d.code for d in lint_source(text, path, Settings(**settings), rules=[rule])]


def test_skip_in_tests_applies_to_test_modules_and_test_scopes():
    assert _codes("flag()\n") == ["TL201"]
    assert _codes("flag()\ndef test_a():\n    pass\n", "test_a.py") == []
    assert _codes("flag()\n", "tests/helpers.py") == []
    assert _codes("def test_a():\n    flag()\nclass TestB:\n    def m(self):\n        flag()\n") == []


def test_a_rule_may_run_in_tests():
    class Anywhere(_Flag):
        skip_in_tests = False

    assert _codes("def test_a():\n    flag()\n", "test_a.py", rule=Anywhere) == ["TL201"]


def test_torch_version_bounds():
    class Old(_Flag):
        max_torch_version = (2, 0)

    class New(_Flag):
        min_torch_version = (2, 4)

    assert _codes("flag()\n", rule=Old, target_torch_version=(1, 13)) == ["TL201"]
    assert _codes("flag()\n", rule=Old, target_torch_version=(2, 0)) == []
    assert _codes("flag()\n", rule=New, target_torch_version=(2, 3)) == []
    assert _codes("flag()\n", rule=New, target_torch_version=(2, 4)) == ["TL201"]


def test_preview_rules_need_preview_mode(monkeypatch):
    monkeypatch.setattr(registry, "preview_codes", lambda: frozenset({"TL701"}))
    assert "TL701" not in Settings().enabled_codes
    assert "TL701" not in Settings(select=("TL701",)).enabled_codes
    assert "TL701" in Settings(preview=True).enabled_codes
    assert "TL201" in Settings().enabled_codes
    assert Settings().fingerprint != Settings(preview=True).fingerprint


def test_preview_flag_and_key(tmp_path):
    from torchlint.config import CliOverrides, settings_from_table

    assert CliOverrides(preview=True).apply(Settings()).preview is True
    assert settings_from_table({"preview": True}, "x", Settings()).preview is True
