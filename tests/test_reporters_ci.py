"""The formats ruff users pipe into other tools: gitlab (Code Quality), rdjson (reviewdog),
pylint (parseable) and azure (logging commands), each checked against the shape its tool
documents: GitLab's code-quality report format, reviewdog.proto's DiagnosticResult, pylint's
``parseable`` template, and the Azure agent's command parser (which reverses the escaping)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from torchlint.cli import main
from torchlint.commands.check import OUTPUT_FORMATS
from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.reporters import FORMATS, ReportContext, get_renderer

NEW_FORMATS = ("gitlab", "rdjson", "pylint", "azure")

PLAIN = Diagnostic(
    code="TL701", name="data-parallel", message="use DDP",
    path="pkg/model.py", location=Location(3, 9), end_location=Location(3, 31),
)
SAFE_FIX = Diagnostic(
    code="TL906", name="autograd-variable", message="drop Variable; 100% done: a;b]\nnext line",
    path="pkg/model.py", location=Location(5, 7), end_location=Location(5, 18),
    fix=Fix("safe", "unwrap", (Edit(Location(5, 7), Location(5, 16), "t"),)),
)
UNSAFE_FIX = Diagnostic(
    code="TL601", name="anomaly-detection", message="remove it",
    path="pkg/model.py", location=Location(6, 1), end_location=Location(6, 10),
    fix=Fix("unsafe", "remove", (Edit(Location(6, 1), Location(7, 1), ""),)),
)
SYNTAX = Diagnostic(
    code="TL001", name="syntax-error", message="SyntaxError: invalid syntax",
    path="pkg/broken.py", location=Location(1, 5), end_location=Location(1, 5),
)
SOURCE = "import torch\n\nmodel = nn.DataParallel(model)\n\n# é€ x = Variable(t)\ntorch.x()\n"
FINDINGS = [PLAIN, SAFE_FIX, UNSAFE_FIX, SYNTAX]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return tmp_path


def render(fmt, diagnostics=FINDINGS, unsafe=False, **context):
    sources = {"pkg/model.py": SOURCE}
    ctx = ReportContext(sources=sources, unsafe_fixes=unsafe, output_format=fmt, **context)
    return get_renderer(fmt)(diagnostics, ctx)


def test_new_formats_are_registered_and_offered():
    for fmt in NEW_FORMATS:
        assert fmt in FORMATS and fmt in OUTPUT_FORMATS


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_no_findings(fmt, repo):
    out = render(fmt, [])
    assert out in ("", "[]\n") or json.loads(out)["diagnostics"] == []


# -- GitLab Code Quality --------------------------------------------------------------------------

# The fields GitLab documents as required for each issue, and their types.
GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "pattern": "^[^/]"},
                    "lines": {
                        "type": "object", "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}, "end": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


def test_gitlab_shape_and_values(repo):
    issues = json.loads(render("gitlab", root=str(repo)))
    jsonschema.validate(issues, GITLAB_SCHEMA)
    assert issues[0] == {
        "check_name": "TL701",
        "description": "TL701 [data-parallel] use DDP",
        "fingerprint": issues[0]["fingerprint"],
        "severity": "major",
        "location": {"path": "pkg/model.py", "lines": {"begin": 3, "end": 3}},
    }
    assert issues[1]["description"] == "TL906 [autograd-variable] drop Variable; 100% done: a;b] next line"
    assert issues[2]["location"]["lines"] == {"begin": 6, "end": 6}
    assert issues[3]["severity"] == "critical"
    assert len({i["fingerprint"] for i in issues}) == len(issues)


def test_gitlab_fingerprints_are_unique_and_survive_line_shifts(repo):
    twice = [PLAIN, Diagnostic(**{**PLAIN.__dict__, "location": Location(4, 9), "end_location": Location(4, 31)})]
    source = "import torch\n\nmodel = nn.DataParallel(model)\nmodel = nn.DataParallel(model)\n"
    ctx = ReportContext(sources={"pkg/model.py": source}, root=str(repo))
    first = [i["fingerprint"] for i in json.loads(get_renderer("gitlab")(twice, ctx))]
    assert len(set(first)) == 2
    shifted = [Diagnostic(**{**d.__dict__, "location": Location(d.location.row + 2, 9)}) for d in twice]
    ctx = ReportContext(sources={"pkg/model.py": "# a\n# b\n" + source}, root=str(repo))
    assert [i["fingerprint"] for i in json.loads(get_renderer("gitlab")(shifted, ctx))] == first


def test_gitlab_paths_are_relative_to_ci_project_dir(repo, monkeypatch):
    (repo / "sub").mkdir()
    monkeypatch.setenv("CI_PROJECT_DIR", str(repo / "sub"))
    d = Diagnostic(**{**PLAIN.__dict__, "path": str(repo / "sub" / "x.py")})
    assert json.loads(render("gitlab", [d], root=str(repo)))[0]["location"]["path"] == "x.py"


# -- reviewdog rdjson -----------------------------------------------------------------------------

_POSITION = {"type": "object", "properties": {"line": {"type": "integer", "minimum": 1},
                                              "column": {"type": "integer", "minimum": 1}},
             "additionalProperties": False}
_RANGE = {"type": "object", "required": ["start"], "additionalProperties": False,
          "properties": {"start": _POSITION, "end": _POSITION}}
_SEVERITY = {"enum": ["UNKNOWN_SEVERITY", "ERROR", "WARNING", "INFO"]}
# reviewdog.proto's DiagnosticResult / Diagnostic messages in their JSON mapping.
RDJSON_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "source": {"type": "object", "required": ["name"], "additionalProperties": False,
                   "properties": {"name": {"type": "string"}, "url": {"type": "string"}}},
        "severity": _SEVERITY,
        "diagnostics": {"type": "array", "items": {
            "type": "object",
            "required": ["message", "location"],
            "additionalProperties": False,
            "properties": {
                "message": {"type": "string"},
                "location": {"type": "object", "required": ["path"], "additionalProperties": False,
                             "properties": {"path": {"type": "string"}, "range": _RANGE}},
                "severity": _SEVERITY,
                "source": {"type": "object"},
                "code": {"type": "object", "required": ["value"], "additionalProperties": False,
                         "properties": {"value": {"type": "string"}, "url": {"type": "string"}}},
                "suggestions": {"type": "array", "items": {
                    "type": "object", "required": ["range", "text"], "additionalProperties": False,
                    "properties": {"range": _RANGE, "text": {"type": "string"}}}},
                "original_output": {"type": "string"},
            },
        }},
    },
}


def test_rdjson_shape_and_values(repo):
    result = json.loads(render("rdjson"))
    jsonschema.validate(result, RDJSON_SCHEMA)
    assert result["source"]["name"] == "torchlint"
    first = result["diagnostics"][0]
    assert first == {
        "message": "use DDP",
        "location": {"path": "pkg/model.py", "range": {"start": {"line": 3, "column": 9}, "end": {"line": 3, "column": 31}}},
        "severity": "WARNING",
        "code": {"value": "TL701", "url": PLAIN.url},
    }
    assert result["diagnostics"][3]["severity"] == "ERROR"


def test_rdjson_columns_are_utf8_bytes_and_fixes_are_suggestions(repo):
    # line 5 is "# é€ x = Variable(t)": é is 2 bytes, € 3, so character 7 is byte 10
    safe = json.loads(render("rdjson"))["diagnostics"][1]
    assert safe["location"]["range"] == {"start": {"line": 5, "column": 10}, "end": {"line": 5, "column": 21}}
    assert safe["suggestions"] == [{"range": {"start": {"line": 5, "column": 10}, "end": {"line": 5, "column": 19}}, "text": "t"}]
    # an unsafe fix is a suggestion only with --unsafe-fixes, as --fix would apply it
    assert "suggestions" not in json.loads(render("rdjson"))["diagnostics"][2]
    unsafe = json.loads(render("rdjson", unsafe=True))["diagnostics"][2]
    assert unsafe["suggestions"] == [{"range": {"start": {"line": 6, "column": 1}, "end": {"line": 7, "column": 1}}, "text": ""}]


# -- pylint parseable -----------------------------------------------------------------------------

# pylint's documented template for --output-format=parseable
PARSEABLE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): \[(?P<msg_id>[A-Z]+\d+)\((?P<symbol>[a-z0-9-]+)\), (?P<obj>[^\]]*)\] (?P<msg>.+)$")


def test_pylint_exact_and_parseable(repo):
    out = render("pylint")
    assert out.splitlines() == [
        "pkg/model.py:3: [TL701(data-parallel), ] use DDP",
        "pkg/model.py:5: [TL906(autograd-variable), ] drop Variable; 100% done: a;b] next line",
        "pkg/model.py:6: [TL601(anomaly-detection), ] remove it",
        "pkg/broken.py:1: [TL001(syntax-error), ] SyntaxError: invalid syntax",
    ]
    for line in out.splitlines():
        assert PARSEABLE.match(line), line


# -- Azure Pipelines ------------------------------------------------------------------------------

def agent_parse(line: str):
    """The Azure agent's logging-command parser (Command.TryParse and
    CommandStringConvertor.Unescape): area.event, properties and data, unescaped."""
    assert line.startswith("##vso[")
    head, data = line[len("##vso["):].split("]", 1)
    command, _, props = head.partition(" ")
    mapping = [(";", "%3B"), ("\r", "%0D"), ("\n", "%0A"), ("]", "%5D")]

    def unescape(text):
        for token, replacement in mapping:
            text = text.replace(replacement, token)
        return text.replace("%AZP25", "%")

    properties = {}
    for pair in props.split(";"):
        if pair:
            key, value = pair.split("=", 1)
            properties[key] = unescape(value)
    return command, properties, unescape(data)


def test_azure_commands_parse_back(repo):
    lines = render("azure", root=str(repo)).splitlines()
    assert lines[0] == (
        "##vso[task.logissue type=warning;sourcepath=pkg/model.py;linenumber=3;columnnumber=9;code=TL701;]"
        "TL701 [data-parallel] use DDP"
    )
    command, properties, data = agent_parse(lines[1])
    assert command == "task.logissue"
    assert properties == {"type": "warning", "sourcepath": "pkg/model.py", "linenumber": "5", "columnnumber": "7", "code": "TL906"}
    assert data == "TL906 [autograd-variable] " + SAFE_FIX.message
    assert agent_parse(lines[3])[1]["type"] == "error"
    assert all("\n" not in line for line in lines) and len(lines) == 4


def test_azure_escapes_properties(repo):
    d = Diagnostic(**{**PLAIN.__dict__, "path": "we;ird]%.py"})
    line = render("azure", [d], root=str(repo)).strip()
    assert "sourcepath=we%3Bird%5D%AZP25.py;" in line
    assert agent_parse(line)[1]["sourcepath"] == "we;ird]%.py"


# -- through the command --------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_cli_formats_on_a_real_file(repo, capsys, fmt):
    (repo / "t.py").write_text("import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n")
    assert main(["--no-cache", "--output-format", fmt, "t.py"]) == 1
    out, err = capsys.readouterr()
    assert "TL701" in out and "Found" not in err  # machine formats: no summary line
    if fmt in ("gitlab", "rdjson"):
        jsonschema.validate(json.loads(out), GITLAB_SCHEMA if fmt == "gitlab" else RDJSON_SCHEMA)


def test_notebook_findings_point_into_the_json(repo, capsys):
    from pathlib import Path

    nb = Path(__file__).resolve().parent.parent / "fixtures" / "notebooks" / "train.ipynb"
    (repo / "train.ipynb").write_text(nb.read_text(encoding="utf-8"), encoding="utf-8")
    main(["--no-cache", "--isolated", "--output-format", "pylint", "train.ipynb"])
    lines = capsys.readouterr().out.splitlines()
    raw = (repo / "train.ipynb").read_text(encoding="utf-8").splitlines()
    row = int(lines[0].split(":")[1])
    assert "DataLoader" in raw[row - 1]  # cell 3's flagged DataLoader(...) line in the JSON
