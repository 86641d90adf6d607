"""End-to-end behaviour of the `torchlint` command: exit codes, stdin, errors, formats, noqa,
configuration. TL701 (data-parallel) is the probe rule: it is simple and stable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from torchlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"
GOOD = "import torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a repository root: config and .gitignore discovery stop here
    return tmp_path


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def concise(capsys, *args):
    code, out, err = run(capsys, "--output-format", "concise", *args)
    return code, out.splitlines(), err


# -- exit codes ------------------------------------------------------------------------------

def test_exit_0_without_findings(project, capsys):
    (project / "ok.py").write_text(GOOD)
    code, out, err = concise(capsys, ".")
    assert code == 0 and out == []
    assert "All checks passed! (1 file checked)" in err


def test_exit_1_with_findings_and_summary(project, capsys):
    (project / "bad.py").write_text(BAD)
    code, out, err = concise(capsys, "bad.py")
    assert code == 1
    assert out == ["bad.py:3:9: TL701 " + out[0].split(" TL701 ", 1)[1]]
    assert "Found 1 finding (TL701: 1) in 1 file checked." in err


def test_exit_zero_flag(project, capsys):
    (project / "bad.py").write_text(BAD)
    code, out, _ = concise(capsys, "--exit-zero", "bad.py")
    assert code == 0 and len(out) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--select", "TL999"], "--select: unknown rule code or prefix 'TL999'"),
        (["--ignore", "XYZ"], "--ignore: unknown rule code or prefix 'XYZ'"),
        (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
        (["--output-format", "xml"], "invalid choice: 'xml'"),
        (["--target-torch-version", "two"], "--target-torch-version: expected a version"),
        (["--config", "missing.toml"], "--config: no such file: missing.toml"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["-", "x.py"], "'-' (stdin) cannot be combined with other paths"),
    ],
)
def test_usage_errors_exit_2_with_one_line(project, capsys, args, message):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchlint: error: ") and message in lines[0]


def test_findings_sorted_and_deterministic(project, capsys):
    (project / "b.py").write_text(BAD)
    (project / "a.py").write_text(BAD + "other = nn.DataParallel(other)\n")
    first = concise(capsys, ".")[1]
    second = concise(capsys, ".")[1]
    assert first == second
    assert [l.split(":")[0:2] for l in first] == [["a.py", "3"], ["a.py", "4"], ["b.py", "3"]]


# -- stdin -----------------------------------------------------------------------------------

def test_stdin_with_filename(project, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    code, out, _ = concise(capsys, "-", "--stdin-filename", "pkg/train.py")
    assert code == 1 and out[0].startswith("pkg/train.py:3:9: TL701")


def test_stdin_filename_matches_per_file_ignores(project, capsys, monkeypatch):
    import io

    (project / "pyproject.toml").write_text('[tool.torchlint]\nper-file-ignores = {"scripts/*" = ["TL701"]}\n')
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    code, out, _ = concise(capsys, "-", "--stdin-filename", "scripts/run.py")
    assert code == 0 and out == []


def test_stdin_via_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", "-", "--output-format", "concise", "--isolated"],
        input=BAD.encode(), capture_output=True, cwd=ROOT, timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stdout.decode().startswith("-:3:9: TL701")


# -- syntax errors and unreadable files --------------------------------------------------------

def test_syntax_error_is_tl001_and_run_goes_on(project, capsys):
    (project / "broken.py").write_text("import torch.nn as nn\ndef f(:\n    pass\n")
    (project / "bad.py").write_text(BAD)
    code, out, _ = concise(capsys, ".")
    assert code == 1
    assert out[0].startswith("bad.py:3:9: TL701")
    assert out[1] == "broken.py:2:7: TL001 SyntaxError: invalid syntax"


def test_syntax_error_reported_even_when_no_rule_could_fire(project, capsys):
    (project / "broken.py").write_text("x = (\n")
    code, out, _ = concise(capsys, "broken.py")
    # CPython's own message and place: 3.9's parser reports the end of the input instead
    cpython = "1:5: TL001 SyntaxError: '(' was never closed" if sys.version_info >= (3, 10) else "1:6: TL001 SyntaxError: unexpected EOF"
    assert code == 1 and out[0].startswith("broken.py:" + cpython)


def test_binary_file_is_tl002(project, capsys):
    (project / "blob.py").write_bytes(b"\x00\x01\x02binary")
    code, out, _ = concise(capsys, "blob.py")
    assert code == 1 and out == ["blob.py:1:1: TL002 Cannot read file: binary file (contains NUL bytes)"]


def test_undecodable_file_is_tl002(project, capsys):
    (project / "latin.py").write_bytes(b'x = "caf\xe9"\n')
    code, out, _ = concise(capsys, "latin.py")
    assert code == 1 and out == [
        "latin.py:1:1: TL002 Cannot read file: cannot decode as utf-8 (line 1: invalid continuation byte); "
        "save it as UTF-8 or declare its encoding (PEP 263)"
    ]


def test_bad_coding_declaration_is_tl002(project, capsys):
    (project / "odd.py").write_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n")
    code, out, _ = concise(capsys, "odd.py")
    assert code == 1 and out[0].startswith("odd.py:1:1: TL002 Cannot read file: bad encoding declaration: unknown encoding")


def test_missing_file_is_tl002(project, capsys):
    code, out, _ = concise(capsys, "nope.py")
    assert code == 1 and out[0].startswith("nope.py:1:1: TL002 Cannot read file: No such file or directory")


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root reads anything")
def test_unreadable_permissions_is_tl002(project, capsys):
    path = project / "secret.py"
    path.write_text(BAD)
    path.chmod(0)
    code, out, _ = concise(capsys, "secret.py")
    assert code == 1 and "TL002 Cannot read file: Permission denied" in out[0]


def test_pep263_and_bom_are_honoured(project, capsys):
    (project / "latin.py").write_bytes(b'# -*- coding: latin-1 -*-\nimport torch.nn as nn\nx = "caf\xe9"; m = nn.DataParallel(m)\n')
    (project / "bom.py").write_bytes(b"\xef\xbb\xbf" + BAD.encode())
    code, out, _ = concise(capsys, ".")
    assert code == 1
    assert [l.split(": ")[0] + ": " + l.split(": ")[1][:5] for l in out] == ["bom.py:3:9: TL701", "latin.py:3:17: TL701"]


# -- noqa ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "line, suppressed",
    [
        ("m = nn.DataParallel(m)  # noqa: TL701", True),
        ("m = nn.DataParallel(m)  # noqa:TL701", True),
        ("m = nn.DataParallel(m)  # noqa: E501, TL701", True),
        ("m = nn.DataParallel(m)  # noqa: E501,TL701", True),
        ("m = nn.DataParallel(m)  # noqa", True),
        ("m = nn.DataParallel(m)  # NOQA", True),
        ("m = nn.DataParallel(m)  # noqa: TL101", False),
        ("m = nn.DataParallel(m)  # some comment", False),
    ],
)
def test_line_noqa(project, capsys, line, suppressed):
    (project / "t.py").write_text("import torch.nn as nn\n" + line + "\n")
    code, out, _ = concise(capsys, "t.py")
    assert (out == []) is suppressed


def test_noqa_on_last_line_of_multiline_statement(project, capsys):
    src = "import torch.nn as nn\nm = nn.DataParallel(\n    m,\n    device_ids=[0, 1],\n)  # noqa: TL701\n"
    (project / "t.py").write_text(src)
    assert concise(capsys, "t.py")[1] == []
    (project / "t.py").write_text(src.replace("  # noqa: TL701", ""))
    assert concise(capsys, "t.py")[1] != []


def test_noqa_inside_string_on_another_line_does_not_suppress(project, capsys):
    (project / "t.py").write_text('import torch.nn as nn\ns = "# noqa"\nm = nn.DataParallel(m)\n')
    assert len(concise(capsys, "t.py")[1]) == 1


@pytest.mark.parametrize(
    "directive, suppressed",
    [("# torchlint: noqa", True), ("# torchlint: noqa: TL701", True), ("# torchlint: noqa: TL101", False),
     ("x = 1  # torchlint: noqa", False)],
)
def test_file_level_noqa(project, capsys, directive, suppressed):
    (project / "t.py").write_text(directive + "\n" + BAD)
    assert (concise(capsys, "t.py")[1] == []) is suppressed


# -- configuration ---------------------------------------------------------------------------

def test_nearest_pyproject_applies_per_folder(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['ALL']\n")
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    (project / "top.py").write_text(BAD)
    (sub / "inner.py").write_text(BAD)
    code, out, _ = concise(capsys, ".")
    assert [l.split(":")[0] for l in out] == ["top.py"]


def test_pyproject_without_torchlint_table_is_skipped(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (sub / "inner.py").write_text(BAD)
    assert concise(capsys, ".")[1] == []


def test_isolated_ignores_config(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    (project / "t.py").write_text(BAD)
    assert concise(capsys, "t.py")[1] == []
    assert len(concise(capsys, "--isolated", "t.py")[1]) == 1


def test_explicit_config_file(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    (project / "other.toml").write_text("[tool.torchlint]\nselect = ['TL7']\n")
    (project / "t.py").write_text(BAD)
    assert len(concise(capsys, "--config", "other.toml", "t.py")[1]) == 1


def test_cli_select_overrides_config_and_ignore_adds(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL001']\n")
    (project / "t.py").write_text(BAD)
    assert concise(capsys, "t.py")[:2] == (0, [])
    assert len(concise(capsys, "--select", "TL701", "t.py")[1]) == 1
    assert concise(capsys, "--select", "ALL", "--ignore", "TL7", "t.py")[1] == []
    assert len(concise(capsys, "--extend-select", "data-parallel", "t.py")[1]) == 1


@pytest.mark.parametrize(
    "toml, message",
    [
        ("[tool.torchlint]\nselct = ['TL1']\n", "unknown key 'tool.torchlint.selct'"),
        ("[tool.torchlint]\nselect = ['TL8']\n", "tool.torchlint.select: unknown rule code or prefix 'TL8'"),
        ("[tool.torchlint]\nselect = 'TL1'\n", "tool.torchlint.select: expected a list of strings"),
        ("[tool.torchlint]\ntarget-torch-version = 'x'\n", "target-torch-version: expected a version"),
        ("[tool.torchlint]\nper-file-ignores = {'t.py' = ['NOPE1']}\n", "unknown rule code or prefix 'NOPE1'"),
        ("[tool.torchlint.rules.TL701]\nfoo = 1\n", "unknown key 'tool.torchlint.rules'"),  # no rule has options
        ("[tool.torchlint\nselect = 1\n", "invalid TOML"),
    ],
)
def test_config_errors_exit_2_naming_the_key(project, capsys, toml, message):
    (project / "pyproject.toml").write_text(toml)
    (project / "t.py").write_text(BAD)
    code, out, err = run(capsys, "t.py")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_per_file_ignores(project, capsys):
    (project / "pyproject.toml").write_text(
        "[tool.torchlint]\nper-file-ignores = { 'tests/**' = ['TL7'], 'legacy_*.py' = ['data-parallel'] }\n"
    )
    for rel in ("tests/unit/test_a.py", "legacy_x.py", "src/train.py"):
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BAD)
    code, out, _ = concise(capsys, ".")
    assert [l.split(":")[0] for l in out] == ["src/train.py"]
    code, out, _ = concise(capsys, "--per-file-ignores", "src/*:TL701", ".")
    assert out == []


def test_exclude_and_gitignore(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nextend-exclude = ['generated/**', 'skip_me.py']\n")
    (project / ".gitignore").write_text("ignored_dir/\n*.tmp.py\n!keep.tmp.py\n")
    for rel in ("generated/a.py", "skip_me.py", "ignored_dir/b.py", "x.tmp.py", "keep.tmp.py", "src/ok.py",
                ".venv/lib/c.py", "build/d.py", "__pycache__/e.py", "env/pyvenv.cfg", "env/f.py"):
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BAD)
    code, out, _ = concise(capsys, ".")
    assert sorted(l.split(":")[0] for l in out) == ["keep.tmp.py", "src/ok.py"]
    # A path named explicitly is always linted ...
    assert len(concise(capsys, "skip_me.py")[1]) == 1
    # ... unless --force-exclude asks that excludes apply to it too (pre-commit).
    assert concise(capsys, "--force-exclude", "skip_me.py")[1] == []


def test_target_torch_version_inferred_from_dependencies(project):
    from torchlint.config import SettingsResolver

    (project / "pyproject.toml").write_text("[project]\nname='x'\ndependencies = ['torch>=1.13,<3', 'numpy']\n")
    assert SettingsResolver(cwd=str(project)).for_path("t.py").target_torch_version == (1, 13)
    (project / "pyproject.toml").write_text(
        "[project]\nname='x'\ndependencies=[]\n[project.optional-dependencies]\ngpu = ['torch==2.1.*']\n"
        "[tool.torchlint]\nselect=['ALL']\n"
    )
    assert SettingsResolver(cwd=str(project)).for_path("t.py").target_torch_version == (2, 1)
    (project / "pyproject.toml").write_text("[tool.torchlint]\ntarget-torch-version = '1.12'\n[project]\nname='x'\ndependencies=['torch>=2.0']\n")
    assert SettingsResolver(cwd=str(project)).for_path("t.py").target_torch_version == (1, 12)
    # torchvision 0.5 was built for torch 1.4: with no torch declared, it declares torch (issue 29)
    (project / "pyproject.toml").write_text("[project]\nname='x'\ndependencies=['torchvision>=0.5']\n")
    assert SettingsResolver(cwd=str(project)).for_path("t.py").target_torch_version == (1, 4)
    (project / "pyproject.toml").write_text("[project]\nname='x'\ndependencies=['torchmetrics>=0.5']\n")
    from torchlint.torch_api import DEFAULT_TORCH_VERSION

    assert SettingsResolver(cwd=str(project)).for_path("t.py").target_torch_version == DEFAULT_TORCH_VERSION


# -- output formats --------------------------------------------------------------------------

def test_json_output_matches_documented_schema(project, capsys):
    (project / "t.py").write_text(BAD + "def f(:\n")
    (project / "u.py").write_text(BAD)
    code, out, err = run(capsys, "--output-format", "json", ".")
    data = json.loads(out)
    schema = json.loads((ROOT / "docs" / "json-output.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert [(d["filename"], d["code"], d["location"]["row"]) for d in data] == [
        ("t.py", "TL001", 4), ("u.py", "TL701", 3)
    ]
    first = data[1]
    assert first["name"] == "data-parallel" and first["location"] == {"row": 3, "column": 9}
    assert first["end_location"] == {"row": 3, "column": 31}
    assert first["noqa_row"] == 3 and first["url"].endswith("/docs/rules/TL701.md")
    assert err == ""  # machine formats print no summary


def test_full_output_has_code_frame_and_no_colour_when_piped(project, capsys, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    (project / "t.py").write_text(BAD)
    code, out, err = run(capsys, "t.py")
    assert code == 1
    assert "t.py:3:9: TL701 [data-parallel]" in out
    assert " 3 | model = nn.DataParallel(model)" in out
    assert "   |         ^^^^^^^^^^^^^^^^^^^^^^ TL701" in out
    assert "\x1b[" not in out


def test_force_color_and_no_color(project, capsys, monkeypatch):
    (project / "t.py").write_text(BAD)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run(capsys, "t.py")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run(capsys, "t.py")[1]


def test_quiet_suppresses_summary(project, capsys):
    (project / "t.py").write_text(BAD)
    assert run(capsys, "-q", "--output-format", "concise", "t.py")[2] == ""


def test_summary_counts_fixable_and_unsafe(project, capsys):
    (project / "t.py").write_text(
        "import torch\nimport torch.nn as nn\n\nx = torch.zeros(3).cuda()\n"
        "net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n"
    )
    code, out, err = concise(capsys, "t.py")
    assert code == 1 and len(out) == 2
    assert "1 fixable with `torchlint --fix`." in err
    assert "1 unsafe fix available with --unsafe-fixes." in err
    code, out, err = concise(capsys, "--unsafe-fixes", "t.py")
    assert "2 fixable with `torchlint --fix --unsafe-fixes`." in err and "unsafe fix available" not in err


def test_full_format_hint_drops_flag_advice_when_unsafe_fixes_given(project, capsys):
    (project / "t.py").write_text("import torch.nn as nn\nnet = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n")
    assert "(unsafe fix, use --unsafe-fixes)" in run(capsys, "t.py")[1]
    out = run(capsys, "--unsafe-fixes", "t.py")[1]
    assert "(unsafe fix)" in out and "use --unsafe-fixes" not in out
