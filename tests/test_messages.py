"""Finding messages are short: the concise, JSON and editor outputs show the message alone, so it
says what is wrong and what to do in under ``MAX_MESSAGE`` characters; the why goes in the rule's
``hint``, which the full format prints under the finding and ``torchlint rule`` shows with the
rule. Checked over every finding of every fixture and fixture project, not just the defaults:
many messages are built per finding (names, callees)."""

from __future__ import annotations

import json
import os

import pytest

from fixture_support import FIXTURES, fixture_files, snapshot_for
from test_fixture_projects import expected_for, projects
from torchlint.cli import main
from torchlint.diagnostics import Diagnostic, Location
from torchlint.reporters import get_renderer
from torchlint.reporters.base import ReportContext
from torchlint.rules import all_rules

MAX_MESSAGE = 100


def _too_long(messages):
    return [(len(m), m) for m in messages if len(m) > MAX_MESSAGE or "\n" in m]


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_finding_has_a_short_message(path):
    _, diagnostics = snapshot_for(path)
    assert diagnostics, f"{path.name} has no findings to check"
    assert _too_long(d.message for d in diagnostics) == []
    # every finding of a rule carries the why for the full format
    assert [d.code for d in diagnostics if not d.hint] == []


@pytest.mark.parametrize("project", projects(), ids=lambda p: p.name)
def test_every_fixture_project_finding_has_a_short_message(project, capsys):
    args, expected = expected_for(project)
    cwd = os.getcwd()
    os.chdir(project)
    try:
        capsys.readouterr()
        main(["--output-format", "json", "--no-cache", "--jobs", "1", *args, "."])
        found = json.loads(capsys.readouterr().out)
    finally:
        os.chdir(cwd)
    assert len(found) == len(expected)
    assert _too_long(d["message"] for d in found) == []


def test_every_fixture_notebook_finding_has_a_short_message(capsys):
    notebooks = sorted(str(p) for p in (FIXTURES / "notebooks").glob("*.ipynb"))
    capsys.readouterr()
    main(["--output-format", "json", "--no-cache", "--jobs", "1", *notebooks])
    found = json.loads(capsys.readouterr().out)
    assert found and _too_long(d["message"] for d in found) == []


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_default_message_is_short_and_has_a_hint(rule):
    assert len(rule.message) <= MAX_MESSAGE, rule.message
    assert rule.hint and rule.hint.strip() == rule.hint and "\n" not in rule.hint


def _finding(hint):
    return Diagnostic("TL701", "data-parallel", "Short message", "m.py", Location(1, 1), Location(1, 5), hint=hint)


def test_full_format_shows_the_hint_and_concise_and_json_do_not():
    d = _finding("The longer why.")
    context = ReportContext(sources={"m.py": "model = nn.DataParallel(m)\n"})
    full = get_renderer("full")([d], context)
    assert "Short message" in full and "= hint: The longer why." in full
    concise = get_renderer("concise")([d], context)
    assert "Short message" in concise and "longer why" not in concise
    assert "longer why" not in get_renderer("json")([d], context)


def test_the_hint_survives_the_results_cache():
    from torchlint.cache import _finding_to_json, findings_from_json

    stored = json.loads(json.dumps([_finding_to_json(_finding("Why."))]))
    assert [d.hint for d in findings_from_json(stored, "m.py")] == ["Why."]
    no_hint = json.loads(json.dumps([_finding_to_json(_finding(None))]))
    assert "hint" not in no_hint[0] and findings_from_json(no_hint, "m.py")[0].hint is None


def test_rule_command_shows_message_and_hint(capsys):
    from torchlint.commands.rule import main as rule_main

    assert rule_main(["TL701", "--output-format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["message"] == all_rules()[[r.code for r in all_rules()].index("TL701")].message
    assert data["hint"].startswith("It drives all GPUs from one process")
    assert rule_main(["TL701"]) == 0
    text = capsys.readouterr().out
    assert "Message" in text and "one process per GPU" in text
