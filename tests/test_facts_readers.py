"""``FileFacts.for_rules`` drops the cross-file fields no enabled rule reads (``project.READERS``),
so that a file whose only facts are, say, TL902's classes is not linted twice when TL902 is off.
That is sound only if ``READERS`` names every rule that reads each field: checked here twice,
from the code (every read of a field, followed through the functions that wrap it, lies in a rule
named for it) and from behaviour (every fixture project, linted by the rules not named for a field, gives the same
findings with the narrowing as without it, for the rules not named)."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Dict, List, Set

import pytest

from torchlint import project as project_module
from torchlint.cli import main
from torchlint.project import READERS, FileFacts
from torchlint.rules import all_rules

PACKAGE = Path(project_module.__file__).resolve().parent
PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"


def _rule_code(cls: ast.ClassDef) -> str:
    for stmt in cls.body:
        if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in stmt.targets)
                and isinstance(stmt.value, ast.Constant)):
            return str(stmt.value.value)
    return ""


def _readers_in_code(field: str) -> Dict[str, Set[str]]:
    """Where the package reads ``field`` of the facts, directly or through a function that does:
    {"rule TLxxx" or "module.py:function (not in a rule)": the names that lead there}."""
    trees = {p: ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py") if p.name != "project.py"}
    wrappers: Set[str] = set()  # functions (by name) that read the field, directly or not
    found: Dict[str, Set[str]] = {}
    while True:
        before = len(wrappers)
        for path, tree in trees.items():
            for owner in ast.walk(tree):
                if not isinstance(owner, (ast.ClassDef, ast.FunctionDef)):
                    continue
                for node in ast.walk(owner):
                    name = (node.attr if isinstance(node, ast.Attribute) else
                            node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else
                            node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None)
                    if name is None or not (name == field or name in wrappers):
                        continue
                    if isinstance(owner, ast.ClassDef) and _rule_code(owner):
                        found.setdefault(f"rule {_rule_code(owner)}", set()).add(name)
                    elif isinstance(owner, ast.FunctionDef):
                        wrappers.add(owner.name)
        if len(wrappers) == before:
            return found


@pytest.mark.parametrize("field", sorted(READERS))
def test_every_read_of_a_narrowed_field_is_in_a_rule_named_for_it(field):
    found = _readers_in_code(field)
    assert found, f"nothing reads FileFacts.{field}: drop it from READERS"
    codes = {key.split()[1] for key in found}
    assert codes <= READERS[field], f"FileFacts.{field} is read by {sorted(codes - READERS[field])} too: add them to READERS"


def test_for_rules_drops_only_fields_no_enabled_rule_reads():
    facts = FileFacts(mode_free={"Net": ("net.py", "Net", "0")}, eval_helpers={"ev": ("l", 0, "m", 1, "x.py:1")},
                      cpu_program="x.py touches no accelerator")
    assert facts.for_rules(frozenset({"TL902", "TL402"})) is facts
    narrowed = facts.for_rules(frozenset({"TL201"}))
    assert not narrowed.mode_free and not narrowed.eval_helpers
    assert narrowed.cpu_program == facts.cpu_program  # read through the model by every accelerator rule
    assert narrowed.digest and narrowed.digest != facts.digest
    assert FileFacts(mode_free={"Net": ("net.py", "Net", "0")}).for_rules(frozenset({"TL201"})).digest == ""


def _lint(project: Path, code: str, capsys) -> List[str]:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        capsys.readouterr()
        main(["--output-format", "json", "--no-cache", "--jobs", "1", "--preview", "--select", code, "--exit-zero", "."])
        out = capsys.readouterr().out
    finally:
        os.chdir(cwd)
    return sorted(json.dumps(d, sort_keys=True) for d in json.loads(out))


def _projects_with_narrowed_facts(monkeypatch, capsys) -> List[Path]:
    """The fixture projects where some file's facts have a field ``for_rules`` may drop."""
    seen: List[bool] = []
    real = FileFacts.for_rules

    def spy(self, codes):
        seen.append(any(getattr(self, name) for name in READERS))
        return real(self, codes)

    monkeypatch.setattr(FileFacts, "for_rules", spy)
    chosen = []
    for project in sorted(p for p in PROJECTS.iterdir() if p.is_dir()):
        seen.clear()
        _lint(project, "ALL", capsys)
        if any(seen):
            chosen.append(project)
    monkeypatch.setattr(FileFacts, "for_rules", real)
    return chosen


def test_the_other_rules_find_the_same_with_and_without_the_narrowing(monkeypatch, capsys):
    """For each field, every rule READERS does not name for it, selected together: the narrowing
    drops the field, and their findings must not change."""
    projects = _projects_with_narrowed_facts(monkeypatch, capsys)
    # the projects that exercise each field across files (a check that cannot pass vacuously)
    assert {p.name for p in projects} >= {"mode_free_across_files", "eval_helper_across_files",
                                          "loader_helper_across_files"}
    differ = []
    for field, readers in sorted(READERS.items()):
        others = ",".join(sorted(r.code for r in all_rules() if r.code not in readers))
        for project in projects:
            narrowed = _lint(project, others, capsys)
            monkeypatch.setattr(FileFacts, "for_rules", lambda self, codes: self)
            whole = _lint(project, others, capsys)
            monkeypatch.undo()
            if narrowed != whole:
                differ.append(f"{project.name}: {field}")
    assert not differ
