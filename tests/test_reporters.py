"""Exact output of each report format on a fixed list of findings: escaping, multi-line messages,
paths with spaces and commas, SARIF against the OASIS schema, JUnit as XML, --statistics, -o."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from torchlint import DOCS_URL, __version__
from torchlint.cli import main
from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.reporters import FORMATS, ReportContext, get_renderer
from torchlint.reporters import github as github_format
from torchlint.reporters import statistics
from torchlint.rules import known_codes

SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"

PLAIN = Diagnostic(
    code="TL701", name="data-parallel", message="use DDP",
    path="pkg/model.py", location=Location(3, 9), end_location=Location(3, 31),
)
TRICKY = Diagnostic(
    code="TL999", name="made-up", message="100% wasted: a, b\nsecond line\r",
    path="dir with space/a,b.py", location=Location(2, 1), end_location=Location(4, 5),
    fix=Fix("safe", "do it", (Edit(Location(2, 1), Location(2, 4), "new"),)),
)
SYNTAX = Diagnostic(
    code="TL001", name="syntax-error", message="invalid syntax: '<' & \"x\" </failure>",
    path="pkg/model.py", location=Location(1, 1), end_location=Location(1, 2),
)
FINDINGS = [PLAIN, TRICKY, SYNTAX]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def render(fmt, diagnostics=FINDINGS, **context):
    return get_renderer(fmt)(diagnostics, ReportContext(**context))


def test_every_cli_format_is_registered():
    from torchlint.commands.check import OUTPUT_FORMATS

    assert set(OUTPUT_FORMATS) == set(FORMATS)


# -- json-lines ------------------------------------------------------------------------------

def test_json_lines_one_object_per_line_same_shape_as_json():
    lines = render("json-lines").splitlines()
    assert [json.loads(line) for line in lines] == json.loads(render("json"))
    assert lines[0] == json.dumps(PLAIN.to_json(), sort_keys=True)
    assert render("json-lines", []) == ""


# -- github ----------------------------------------------------------------------------------

def test_github_escaping_matches_actions_toolkit():
    assert github_format.escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert github_format.escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"


def test_github_annotations_exact(repo):
    assert render("github", root=str(repo)) == (
        "::warning file=pkg/model.py,line=3,col=9,endLine=3,endColumn=31,title=torchlint (TL701)::use DDP\n"
        "::warning file=dir with space/a%2Cb.py,line=2,col=1,endLine=4,endColumn=5,title=torchlint (TL999)"
        "::100%25 wasted: a, b%0Asecond line%0D\n"
        "::error file=pkg/model.py,line=1,col=1,endLine=1,endColumn=2,title=torchlint (TL001)"
        "::invalid syntax: '<' & \"x\" </failure>\n"
    )


def test_github_paths_are_relative_to_the_repository_root(repo, monkeypatch):
    monkeypatch.chdir(repo / "sub")
    out = render("github", [PLAIN], root=".")
    assert out.startswith("::warning file=sub/pkg/model.py,")


# -- grouped ---------------------------------------------------------------------------------

def test_grouped_exact():
    assert render("grouped") == (
        "dir with space/a,b.py:\n"
        "  2:1 TL999 100% wasted: a, b\n"
        "            second line\\x0d\n"  # a carriage return escaped: it would hide what precedes it
        "\n"
        "pkg/model.py:\n"
        "  1:1 TL001 invalid syntax: '<' & \"x\" </failure>\n"
        "  3:9 TL701 use DDP\n"
    )
    assert render("grouped", []) == ""


def test_grouped_aligns_positions_within_a_file():
    late = Diagnostic("TL701", "data-parallel", "m", "f.py", Location(12, 10), Location(12, 11))
    early = Diagnostic("TL701", "data-parallel", "m", "f.py", Location(2, 1), Location(2, 2))
    assert render("grouped", [late, early]) == "f.py:\n  2:1   TL701 m\n  12:10 TL701 m\n"


# -- junit -----------------------------------------------------------------------------------

def test_junit_exact_and_parses():
    out = render("junit", checked_paths=["pkg/model.py", "dir with space/a,b.py", "clean.py"])
    assert out == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="torchlint" tests="4" failures="3" errors="0">\n'
        '  <testsuite name="dir with space/a,b.py" tests="1" failures="1" errors="0" skipped="0">\n'
        '    <testcase name="TL999 made-up at 2:1" classname="dir with space/a,b.py" file="dir with space/a,b.py" line="2">\n'
        '      <failure message="100% wasted: a, b&#10;second line&#13;" type="TL999">'
        "dir with space/a,b.py:2:1: TL999 100% wasted: a, b\nsecond line\r</failure>\n"
        "    </testcase>\n"
        "  </testsuite>\n"
        '  <testsuite name="pkg/model.py" tests="2" failures="2" errors="0" skipped="0">\n'
        '    <testcase name="TL001 syntax-error at 1:1" classname="pkg/model.py" file="pkg/model.py" line="1">\n'
        '      <failure message="invalid syntax: \'&lt;\' &amp; &quot;x&quot; &lt;/failure&gt;" type="TL001">'
        "pkg/model.py:1:1: TL001 invalid syntax: '&lt;' &amp; \"x\" &lt;/failure&gt;</failure>\n"
        "    </testcase>\n"
        '    <testcase name="TL701 data-parallel at 3:9" classname="pkg/model.py" file="pkg/model.py" line="3">\n'
        '      <failure message="use DDP" type="TL701">pkg/model.py:3:9: TL701 use DDP</failure>\n'
        "    </testcase>\n"
        "  </testsuite>\n"
        '  <testsuite name="clean.py" tests="1" failures="0" errors="0" skipped="0">\n'
        '    <testcase name="torchlint" classname="clean.py" file="clean.py" />\n'
        "  </testsuite>\n"
        "</testsuites>\n"
    )
    root = ET.fromstring(out.encode("utf-8"))
    failures = root.findall("./testsuite/testcase/failure")
    assert [f.get("type") for f in failures] == ["TL999", "TL001", "TL701"]
    assert failures[0].get("message") == TRICKY.message  # attribute newlines survive
    assert failures[1].get("message") == SYNTAX.message


def test_junit_control_characters_stay_valid_xml():
    odd = Diagnostic("TL701", "data-parallel", "bell\x07 here", "f.py", Location(1, 1), Location(1, 2))
    root = ET.fromstring(render("junit", [odd]))
    assert root.find("./testsuite/testcase/failure").get("message") == "bell\ufffd here"


def test_junit_without_findings_has_a_passing_case():
    root = ET.fromstring(render("junit", []))
    assert root.get("tests") == "1" and root.get("failures") == "0"
    assert root.find("./testsuite/testcase").get("name") == "no findings"


# -- sarif -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_sarif_validates_against_the_oasis_schema(repo, sarif_validator):
    log = json.loads(render("sarif", root=str(repo)))
    sarif_validator.validate(log)
    sarif_validator.validate(json.loads(render("sarif", [], root=str(repo))))


def test_sarif_schema_rejects_a_broken_log(repo, sarif_validator):
    log = json.loads(render("sarif", root=str(repo)))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator.validate(log)


def test_sarif_driver_lists_every_rule_with_help(repo):
    log = json.loads(render("sarif", root=str(repo)))
    assert log["version"] == "2.1.0"
    driver = log["runs"][0]["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("torchlint", __version__)
    assert driver["informationUri"].startswith("https://")
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids[: len(known_codes())] == list(known_codes())
    assert {"TL001", "TL002", "TL701"} <= set(ids)
    assert ids[-1] == "TL999"  # unknown to the registry, still described
    for rule in driver["rules"][: len(known_codes())]:
        assert set(rule) >= {"id", "name", "shortDescription", "fullDescription", "help", "helpUri"}
        assert rule["helpUri"] == DOCS_URL.format(code=rule["id"])
        assert rule["help"]["markdown"] and rule["help"]["text"]
    tl701 = driver["rules"][ids.index("TL701")]
    assert tl701["name"] == "data-parallel"
    assert tl701["help"]["markdown"].startswith("# TL701 data-parallel")
    assert tl701["fullDescription"]["text"].startswith("Flags constructing torch.nn.DataParallel")


def test_sarif_results_exact(repo, monkeypatch):
    monkeypatch.chdir(repo / "sub")
    log = json.loads(render("sarif", root="."))
    run = log["runs"][0]
    ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    results = run["results"]
    assert [r["ruleIndex"] for r in results] == [ids.index(r["ruleId"]) for r in results]
    assert results[0] == {
        "ruleId": "TL701",
        "ruleIndex": ids.index("TL701"),
        "level": "warning",
        "message": {"text": "use DDP"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "sub/pkg/model.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 3, "startColumn": 9, "endLine": 3, "endColumn": 31},
        }}],
    }
    tricky = results[1]
    assert tricky["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "sub/dir%20with%20space/a%2Cb.py"
    assert tricky["message"]["text"] == TRICKY.message
    assert tricky["fixes"][0]["artifactChanges"][0]["replacements"] == [{
        "deletedRegion": {"startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 4},
        "insertedContent": {"text": "new"},
    }]
    assert results[2]["level"] == "error"


def test_sarif_path_outside_the_repository_is_an_absolute_uri(repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "x.py"
    d = Diagnostic("TL701", "data-parallel", "m", str(outside), Location(1, 1), Location(1, 2))
    log = json.loads(render("sarif", [d], root=str(repo)))
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": outside.resolve().as_uri()}


# -- statistics ------------------------------------------------------------------------------

STATS = [PLAIN, PLAIN, TRICKY, SYNTAX, TRICKY, PLAIN]


def test_statistics_table_sorted_by_count():
    assert statistics.render(STATS, ReportContext()) == (
        "count  code   name           fixable\n"
        "    3  TL701  data-parallel        0\n"
        "    2  TL999  made-up              2\n"
        "    1  TL001  syntax-error         0\n"
    )
    assert statistics.render([], ReportContext()) == ""


def test_statistics_json():
    rows = json.loads(statistics.render(STATS, ReportContext(output_format="json")))
    assert rows == [
        {"code": "TL701", "name": "data-parallel", "count": 3, "fixable": 0},
        {"code": "TL999", "name": "made-up", "count": 2, "fixable": 2},
        {"code": "TL001", "name": "syntax-error", "count": 1, "fixable": 0},
    ]
    lines = statistics.render(STATS, ReportContext(output_format="json-lines")).splitlines()
    assert [json.loads(line) for line in lines] == rows


# -- through the command ---------------------------------------------------------------------

def test_cli_statistics_json(repo, capsys):
    (repo / "bad.py").write_text(BAD + BAD)
    code = main(["--statistics", "--output-format", "json", "--select", "TL701", "bad.py"])
    out, _ = capsys.readouterr()
    assert code == 1
    assert json.loads(out) == [{"code": "TL701", "name": "data-parallel", "count": 2, "fixable": 0}]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_output_file_is_written(repo, capsys, fmt):
    (repo / "bad.py").write_text(BAD)
    target = repo / "report.out"
    code = main(["--output-format", fmt, "--select", "TL701", "-o", str(target), "bad.py"])
    out, _ = capsys.readouterr()
    assert code == 1 and out == ""
    assert "TL701" in target.read_text(encoding="utf-8")


def test_cli_junit_lists_clean_files(repo, capsys):
    (repo / "bad.py").write_text(BAD)
    (repo / "good.py").write_text("x = 1\n")
    main(["--output-format", "junit", "--select", "TL701", "."])
    root = ET.fromstring(capsys.readouterr().out)
    assert [s.get("name") for s in root.findall("testsuite")] == ["bad.py", "good.py"]
    assert root.get("tests") == "2" and root.get("failures") == "1"


def test_cli_sarif_validates(repo, capsys, sarif_validator):
    (repo / "sub" / "bad file.py").write_text(BAD)
    main(["--output-format", "sarif", "--select", "TL701", "sub"])
    log = json.loads(capsys.readouterr().out)
    sarif_validator.validate(log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "sub/bad%20file.py", "uriBaseId": "%SRCROOT%"}


def test_sarif_of_every_fixture_validates(sarif_validator):
    """Real findings of every rule, fixes included, through the schema."""
    from fixture_support import expected_for, fixture_files
    from torchlint.engine import lint_source

    diagnostics = []
    for path in fixture_files():
        settings, _ = expected_for(path)
        diagnostics += lint_source(path.read_text(encoding="utf-8"), str(path), settings)
    assert diagnostics
    log = json.loads(render("sarif", diagnostics, root=str(Path(__file__).resolve().parent.parent)))
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    assert all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("fixtures/") for r in results)
    if any(d.fix for d in diagnostics):
        assert any("fixes" in r for r in results)


def _full_with_rich(diagnostics, context):
    """The full format as rich printed it before (the reference the plain renderer must match)."""
    import io

    from rich.console import Console
    from rich.text import Text

    from torchlint.reporters import full

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=context.color, no_color=not context.color,
                      color_system="standard" if context.color else None, width=120, highlight=False, soft_wrap=True)
    locators: dict = {}
    for d in diagnostics:
        header = Text()
        header.append(f"{full.printable(d.path)}:{full.position(d)}: ", style="bold")  # names escaped (issue 32)
        header.append(d.code, style="bold red")
        header.append(f" [{d.name}] ", style="cyan")
        header.append(d.message)
        console.print(header)
        locator = full._locator(d, context.sources, locators)
        if locator is not None:
            console.print(full._frame(d, locator, Text), end="")
        if d.hint:
            console.print(Text().append(f"  = hint: {d.hint}", style="dim"))
        for r in d.related:  # where the reason is (issue 30)
            console.print(Text().append(
                f"  = note: {full.printable(r.path)}:{r.location.row}:{r.location.column}: {r.message}", style="dim"))
        if d.fix is not None:
            hint = Text()
            label = "Fix" if d.fix.applicability == "safe" else "Unsafe fix"
            hint.append(f"  = help: {d.fix.message}", style="green")
            needs_flag = d.fix.applicability != "safe" and not context.unsafe_fixes
            hint.append(f" ({label.lower()}{', use --unsafe-fixes' if needs_flag else ''})", style="dim")
            console.print(hint)
        console.print()
    return buffer.getvalue()


@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("unsafe", [False, True])
def test_full_format_prints_what_rich_printed(color, unsafe):
    """The full format writes its escape sequences itself (rich cost ~0.05 s to import and ~2 ms
    per finding): byte for byte what rich printed, on every fixture's findings, on control
    characters (removed), wide characters, and a tab (rich's own tab stops: printed by rich)."""
    from torchlint.config import Settings
    from torchlint.engine import lint_source

    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    diagnostics, sources = list(FINDINGS), {"pkg/model.py": BAD, "dir with space/a,b.py": "a\nb\nc\nd\ne\n"}
    for path in sorted(fixtures.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        diagnostics += lint_source(text, str(path), Settings(preview=True))
        sources[str(path)] = text
    hostile = ("import torch\nx = 1  # \x07bell\x08 \x0b \x0c 全角 \x1b[31m\r\nfor i in range(3):\n"
               "    t = torch.zeros(3).cuda()  # 全角\tTab\n")
    for path in ("h\x07.py", "tab\t全.py"):
        found = lint_source(hostile, path, Settings())
        assert found
        diagnostics += found
        sources[path] = hostile
    context = ReportContext(color=color, sources=sources, unsafe_fixes=unsafe)
    assert len(diagnostics) > 150
    assert render("full", diagnostics, color=color, sources=sources, unsafe_fixes=unsafe) == _full_with_rich(diagnostics, context)


def test_full_format_does_not_import_rich(repo):
    import subprocess
    import sys

    (repo / "t.py").write_text(BAD)
    script = ("import sys\nfrom torchlint.cli import main\nmain(['--isolated', '--no-cache', 't.py'])\n"
              "print('rich' in sys.modules, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=repo, timeout=60)
    assert "TL701" in proc.stdout and proc.stderr.strip().splitlines()[-1] == "False", proc.stderr
