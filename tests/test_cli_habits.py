"""CLI habits a ruff user brings (issue 14): standalone torchlint.toml, stdin without '-',
mistyped commands and flags, TL004 unused-noqa and --add-noqa, --exit-non-zero-on-fix, --color,
--show-settings / --show-files, --watch, and --statistics counting only applicable fixes.
TL701 (data-parallel, no fix) and TL906 (autograd-variable, safe fix) are the probe rules."""

from __future__ import annotations

import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from torchlint.cli import main
from torchlint.commands.usage import use_color
from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source
from torchlint.fixer import fix_text
from torchlint.suppression import add_noqa

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"
GOOD = "import torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"
FIXABLE = "from torch.autograd import Variable\n\nx = Variable(t)\n"  # TL906, safe fix


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(capsys, *args):
    code = main(["--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


def concise(capsys, *args):
    code, out, err = run(capsys, "--output-format", "concise", *args)
    return code, out.splitlines(), err


def codes(lines):
    return [line.split(": ", 1)[1].split()[0] for line in lines]


# -- standalone config files -------------------------------------------------------------------

def test_torchlint_toml_has_top_level_keys(project, capsys):
    (project / "t.py").write_text(BAD)
    (project / "torchlint.toml").write_text("ignore = ['TL701']\n")
    assert concise(capsys, "t.py")[:2] == (0, [])


def test_dot_torchlint_toml_beats_torchlint_toml_beats_pyproject_in_one_folder(project, capsys):
    (project / "t.py").write_text(BAD)
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    (project / "torchlint.toml").write_text("select = ['TL701']\n")
    assert codes(concise(capsys, "t.py")[1]) == ["TL701"]  # torchlint.toml wins over pyproject
    (project / ".torchlint.toml").write_text("ignore = ['TL701']\n")
    assert concise(capsys, "t.py")[1] == []  # .torchlint.toml wins over both
    assert json.loads(run(capsys, "--show-settings", "--output-format", "json", "t.py")[1])["config-file"] == str(
        project / ".torchlint.toml"
    )


def test_nearest_config_wins_whatever_its_kind(project, capsys):
    (project / "torchlint.toml").write_text("ignore = ['TL701']\n")
    sub = project / "pkg"
    sub.mkdir()
    (sub / "t.py").write_text(BAD)
    (sub / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL7']\n")
    assert codes(concise(capsys, "pkg/t.py")[1]) == ["TL701"]
    (sub / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no table: passed over
    assert concise(capsys, "pkg/t.py")[1] == []


def test_an_empty_torchlint_toml_still_configures_its_folder(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL701']\n")
    sub = project / "pkg"
    sub.mkdir()
    (sub / "t.py").write_text(BAD)
    (sub / "torchlint.toml").write_text("")
    assert codes(concise(capsys, "pkg/t.py")[1]) == ["TL701"]


@pytest.mark.parametrize("name, text", [
    ("torchlint.toml", "ignore = ['TL701']\n"),
    ("ci.toml", "ignore = ['TL701']\n"),  # any other name: top-level keys ...
    ("other.toml", "[tool.torchlint]\nignore = ['TL701']\n"),  # ... unless it has the table
    ("pyproject.toml", "[tool.torchlint]\nignore = ['TL701']\n"),
])
def test_config_flag_accepts_either_kind(project, capsys, name, text):
    conf = project / "conf"
    conf.mkdir()
    (conf / name).write_text(text)
    (project / "t.py").write_text(BAD)
    assert len(concise(capsys, "t.py")[1]) == 1
    assert concise(capsys, "--config", f"conf/{name}", "t.py")[:2] == (0, [])


def test_standalone_config_errors_name_the_key_as_written(project, capsys):
    (project / "t.py").write_text(BAD)
    (project / "torchlint.toml").write_text("selct = ['TL701']\n")
    code, out, err = run(capsys, "t.py")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"torchlint: error: {project / 'torchlint.toml'}: unknown key 'selct'"]


# -- stdin, mistyped commands and flags ---------------------------------------------------------

def test_stdin_filename_without_dash_reads_stdin(project, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BAD.encode())))
    code, out, _ = concise(capsys, "--stdin-filename", "pkg/train.py")
    assert code == 1 and out[0].startswith("pkg/train.py:3:9: TL701 ")


def test_stdin_filename_with_paths_is_a_usage_error(project, capsys):
    (project / "t.py").write_text(GOOD)
    code, out, err = run(capsys, "--stdin-filename", "x.py", "t.py")
    assert code == 2 and out == ""
    assert "--stdin-filename names the file read from stdin" in err


@pytest.mark.parametrize("word, message", [
    ("chek", "no such file or command: 'chek' (did you mean `torchlint check`?)"),
    ("rulee", "no such file or command: 'rulee' (did you mean `torchlint rule`?)"),
    ("frobnicate", "no such file or command: 'frobnicate' (commands: check, rule, server, clean, version)"),
])
def test_mistyped_command_is_an_error_not_tl002(project, capsys, word, message):
    (project / "t.py").write_text(BAD)
    code, out, err = run(capsys, word, ".")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [f"torchlint: error: {message}"]


def test_a_missing_file_is_still_tl002_and_a_real_folder_named_like_a_command_is_linted(project, capsys):
    assert codes(concise(capsys, "nope.py")[1]) == ["TL002"]
    (project / "chek").mkdir()
    (project / "chek" / "t.py").write_text(BAD)
    assert codes(concise(capsys, "chek")[1]) == ["TL701"]


@pytest.mark.parametrize("args, message", [
    (["--sel", "TL7"], "unrecognized arguments: --sel (did you mean --select?)"),
    (["--selct=TL7"], "unrecognized arguments: --selct=TL7 (did you mean --select?)"),
    (["--unsafe-fix"], "unrecognized arguments: --unsafe-fix (did you mean --unsafe-fixes?)"),
    (["--statistic"], "unrecognized arguments: --statistic (did you mean --statistics?)"),
    (["--zzzzzz"], "unrecognized arguments: --zzzzzz"),
])
def test_no_prefix_matching_and_did_you_mean(project, capsys, args, message):
    (project / "t.py").write_text(BAD)
    code, out, err = run(capsys, *args, "t.py")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [f"torchlint: error: {message}"]


def test_subcommand_parsers_do_not_match_prefixes(capsys):
    assert main(["rule", "--al"]) == 2
    assert "unrecognized arguments: --al (did you mean --all?)" in capsys.readouterr().err


# -- TL004 unused-noqa --------------------------------------------------------------------------

def _lint(text, **table):
    settings = settings_from_table(table, "test", Settings())
    return lint_source(text, "train.py", settings)


def _tl004(text, **table):
    return [(d.location.row, d.location.column, d.end_location.column, d.message)
            for d in _lint(text, **table) if d.code == "TL004"]


NOQA_TOUR = """\
import torch.nn as nn

a = nn.DataParallel(m)  # noqa: TL701
b = nn.Linear(2, 2)  # noqa: TL701
c = nn.DataParallel(m)  # noqa: TL701, TL201, E501
d = 1  # noqa: TL999 kept words
# noqa: TL202
e = "# noqa: TL701"
f = 1  # noqa
g = 1  # noqa: E501, F401
h = 1  # type: ignore # noqa: TL201
i = 1  # noqa: TL201, TL004
"""


def test_unused_noqa_findings_exact():
    assert _tl004(NOQA_TOUR) == [
        (4, 22, 35, "Unused `noqa` directive (unused: `TL701`)"),
        (5, 25, 51, "Unused `noqa` directive (unused: `TL201`)"),
        (6, 8, 21, "Unused `noqa` directive (unknown: `TL999`)"),
        (7, 1, 14, "Unused `noqa` directive (unused: `TL202`)"),
        (11, 23, 36, "Unused `noqa` directive (unused: `TL201`)"),
        # i: `# noqa: TL004` on the line suppresses its own finding
    ]
    findings = _lint(NOQA_TOUR)
    assert all(d.fix is not None and d.fix.applicability == "safe" for d in findings if d.code == "TL004")


def test_unused_noqa_fix_removes_codes_or_directives():
    result = fix_text(NOQA_TOUR, "train.py", Settings())
    assert result.error is None
    assert result.text == """\
import torch.nn as nn

a = nn.DataParallel(m)  # noqa: TL701
b = nn.Linear(2, 2)
c = nn.DataParallel(m)  # noqa: TL701, E501
d = 1  # kept words
e = "# noqa: TL701"
f = 1  # noqa
g = 1  # noqa: E501, F401
h = 1  # type: ignore
i = 1  # noqa: TL201, TL004
"""
    assert _tl004(result.text) == []


def test_unused_noqa_judges_only_enabled_codes():
    text = "x = 1  # noqa: TL701\n"
    assert len(_tl004(text)) == 1
    assert _tl004(text, ignore=["TL701"]) == []  # TL701 could not have fired
    assert _tl004(text, select=["TL004"]) == []
    assert _tl004(text, ignore=["TL004"]) == []
    assert _tl004(text, **{"per-file-ignores": {"train.py": ["TL004"]}}) == []
    assert _tl004("# torchlint: noqa: TL004\n" + text) == []
    assert _tl004("# torchlint: noqa: TL701\n" + text) == []  # exempted file-wide: not judged
    assert _tl004("x = 1  # noqa: TL406\n") == []  # a preview rule, preview off
    assert len(_tl004("x = 1  # noqa: TL406\n", preview=True)) == 1


def test_unused_noqa_on_a_statement_end_line_counts_as_used():
    text = "import torch.nn as nn\nm = nn.DataParallel(\n    model,\n)  # noqa: TL701\n"
    assert [d.code for d in _lint(text)] == []


def test_unused_noqa_through_the_cli_and_fix(project, capsys):
    (project / "t.py").write_text("x = 1  # noqa: TL701\n")
    code, out, _ = concise(capsys, "t.py")
    assert code == 1 and out == ["t.py:1:8: TL004 Unused `noqa` directive (unused: `TL701`)"]
    assert run(capsys, "--fix", "t.py")[0] == 0
    assert (project / "t.py").read_text() == "x = 1\n"


# -- --add-noqa ---------------------------------------------------------------------------------

ADD_TOUR = '''\
import torch.nn as nn
a = nn.DataParallel(m)  # noqa: E501
b = nn.DataParallel(f("""x
y"""), nn.DataParallel(z))
c = nn.DataParallel(
    m,
)
d = nn.DataParallel(m) if flag else \\
    nn.DataParallel(n)
'''


def test_add_noqa_text():
    findings = _lint(ADD_TOUR)
    text, added = add_noqa(ADD_TOUR, findings)
    assert text == '''\
import torch.nn as nn
a = nn.DataParallel(m)  # noqa: E501, TL701
b = nn.DataParallel(f("""x
y"""), nn.DataParallel(z))  # noqa: TL701
c = nn.DataParallel(  # noqa: TL701
    m,
)
d = nn.DataParallel(m) if flag else \\
    nn.DataParallel(n)  # noqa: TL701
'''
    assert added == 4
    assert _lint(text) == []  # every finding suppressed, no TL004


def test_add_noqa_command_is_atomic_and_idempotent(project, capsys):
    (project / "t.py").write_text(ADD_TOUR)
    (project / "ok.py").write_text(GOOD)
    before = (project / "ok.py").stat().st_mtime_ns
    code, out, err = run(capsys, "--add-noqa", ".")
    assert (code, out) == (0, "")
    assert "Added 4 noqa directives in 1 file." in err
    assert concise(capsys, ".")[:2] == (0, [])
    assert run(capsys, "--add-noqa", ".")[2].strip() == "Added 0 noqa directives."
    assert (project / "ok.py").stat().st_mtime_ns == before
    assert not [p for p in project.iterdir() if p.name.startswith(".") and "tmp" in p.name]


def test_add_noqa_cannot_be_combined_with_fix(project, capsys):
    code, _, err = run(capsys, "--add-noqa", "--fix", ".")
    assert code == 2 and "--add-noqa cannot be combined" in err
    code, _, err = run(capsys, "--add-noqa", "-")
    assert code == 2 and "--add-noqa and --show-files work on files, not stdin" in err


# -- --exit-non-zero-on-fix -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["--fix", "--fix-only"])
def test_exit_non_zero_on_fix(project, capsys, mode):
    (project / "t.py").write_text(FIXABLE)
    assert run(capsys, mode, "t.py")[0] == 0  # fixed, nothing remains
    (project / "t.py").write_text(FIXABLE)
    assert run(capsys, mode, "--exit-non-zero-on-fix", "t.py")[0] == 1
    assert run(capsys, mode, "--exit-non-zero-on-fix", "t.py")[0] == 0  # nothing left to fix
    (project / "t.py").write_text(FIXABLE)
    assert run(capsys, mode, "--exit-non-zero-on-fix", "--exit-zero", "t.py")[0] == 0


# -- --color ------------------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("env, expected", [
    ({}, True),
    ({"NO_COLOR": "1"}, False),
    ({"TERM": "dumb"}, False),
    ({"CLICOLOR": "0"}, False),
    ({"CLICOLOR": "1"}, True),
    ({"TERM": "dumb", "CLICOLOR_FORCE": "1"}, True),
    ({"TERM": "dumb", "FORCE_COLOR": "1"}, True),
])
def test_color_auto_respects_the_environment(monkeypatch, env, expected):
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert use_color(_Tty()) is expected
    assert use_color(io.StringIO()) is (expected and bool(env.get("FORCE_COLOR") or env.get("CLICOLOR_FORCE")))
    assert use_color(io.StringIO(), "always") is True
    assert use_color(_Tty(), "never") is False


def test_color_flag_in_the_full_format(project, capsys, monkeypatch):
    (project / "t.py").write_text(BAD)
    assert "\x1b[" in run(capsys, "--color", "always", "t.py")[1]
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" not in run(capsys, "--color", "never", "t.py")[1]
    assert run(capsys, "--color", "sometimes", "t.py")[0] == 2


# -- --show-settings, --show-files ------------------------------------------------------------

def test_show_settings(project, capsys):
    (project / "pkg").mkdir()
    (project / "pkg" / "t.py").write_text(BAD)
    (project / "pkg" / "torchlint.toml").write_text(
        "ignore = ['TL701']\ntarget-torch-version = '1.13'\n"
    )
    code, out, _ = run(capsys, "--show-settings", "--select", "TL7,TL1", "pkg/t.py")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "# Settings for pkg/t.py"
    assert f'config-file = "{project / "pkg" / "torchlint.toml"}"' in lines
    assert 'target-torch-version = "1.13"' in lines
    assert 'ignore = ["TL701"]' in lines
    assert 'select = ["TL7", "TL1"]' in lines
    # --preview: TL101 is a preview rule (issue 29)
    data = json.loads(run(capsys, "--show-settings", "--output-format", "json", "--preview", "--select", "TL7,TL1", "pkg/t.py")[1])
    assert "TL701" not in data["enabled"] and "TL702" in data["enabled"] and "TL101" in data["enabled"]
    assert json.loads(run(capsys, "--show-settings", "--output-format", "json")[1])["config-file"] is None


def test_show_files(project, capsys):
    (project / "b.py").write_text(GOOD)
    (project / "a.py").write_text(GOOD)
    (project / "skip").mkdir()
    (project / "skip" / "c.py").write_text(GOOD)
    (project / "notes.txt").write_text("x")
    code, out, err = run(capsys, "--show-files", "--extend-exclude", "skip", ".")
    assert code == 0 and out.splitlines() == ["a.py", "b.py"] and err == ""


# -- --statistics --------------------------------------------------------------------------------

UNSAFE_FIX = "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n"  # TL601, unsafe fix


def test_statistics_fixable_counts_what_fix_would_apply(project, capsys):
    (project / "safe.py").write_text(FIXABLE)
    (project / "unsafe.py").write_text(UNSAFE_FIX)

    def fixable(*flags):
        rows = json.loads(run(capsys, "--statistics", "--output-format", "json", *flags, ".")[1])
        return {r["code"]: (r["count"], r["fixable"]) for r in rows}

    assert fixable() == {"TL906": (1, 1), "TL601": (1, 0)}
    assert fixable("--unsafe-fixes") == {"TL906": (1, 1), "TL601": (1, 1)}
    assert fixable("--unfixable", "TL906") == {"TL906": (1, 0), "TL601": (1, 0)}
    (project / "torchlint.toml").write_text("extend-safe-fixes = ['TL601']\n")
    assert fixable() == {"TL906": (1, 1), "TL601": (1, 1)}


# -- --watch ------------------------------------------------------------------------------------

def _reader(stream, lines: "queue.Queue[str]") -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)


def _wait_for(lines: "queue.Queue[str]", predicate, timeout: float = 60) -> list:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(line)
        if predicate(line):
            return seen
    raise AssertionError(f"timed out; saw {seen!r}")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
@pytest.mark.parametrize("backend", ["poll", "watchfiles"])
def test_watch_reruns_on_change_and_stops_on_ctrl_c(tmp_path, backend):
    """Both ways of waiting: polling (no watchfiles, or TORCHLINT_WATCH_POLL=1) and watchfiles'
    file events (the test extra installs it, as ``torchlint[watch]`` does)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "t.py").write_text(GOOD)
    env = {**os.environ, "TORCHLINT_WATCH_INTERVAL": "0.1", "PYTHONUNBUFFERED": "1"}
    env.pop("TORCHLINT_WATCH_POLL", None)
    if backend == "poll":
        env["TORCHLINT_WATCH_POLL"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "--watch", "--no-cache", "--output-format", "concise", "t.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    try:
        first = _wait_for(lines, lambda line: "Watching for file changes" in line)
        assert not any("TL701" in line for line in first)
        time.sleep(0.05)  # a different mtime even on coarse clocks
        (tmp_path / "t.py").write_text(BAD)
        second = _wait_for(lines, lambda line: "Watching for file changes" in line)
        assert any(line.startswith("t.py:3:9: TL701 ") for line in second)
        assert any("File change detected" in line for line in second)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_watch_refuses_stdin(project, capsys):
    code, _, err = run(capsys, "--watch", "-")
    assert code == 2 and "--watch cannot be combined" in err


def test_unused_noqa_fix_of_a_directive_line_inside_brackets_keeps_the_code_valid():
    text = "x = f(\n    # noqa: TL701\n    1,\n)\ny = 2  # noqa: TL701 why\n"
    result = fix_text(text, "train.py", Settings())
    assert result.error is None and result.text == "x = f(\n    1,\n)\ny = 2  # why\n"
    compile(result.text, "train.py", "exec")


def test_unused_noqa_in_a_notebook_cell_is_fixed_in_that_cell(project, capsys):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch"), nbformat.v4.new_code_cell("%time x = 1\ny = 2  # noqa: TL501")]
    nbformat.write(nb, str(project / "nb.ipynb"))
    code, out, _ = concise(capsys, "nb.ipynb")
    assert code == 1 and out == ["nb.ipynb:cell 2:2:8: TL004 Unused `noqa` directive (unused: `TL501`)"]
    assert run(capsys, "--fix", "nb.ipynb")[0] == 0
    cells = nbformat.read(str(project / "nb.ipynb"), as_version=4).cells
    assert [c.source for c in cells] == ["import torch", "%time x = 1\ny = 2"]


# -- the full format and long spans -------------------------------------------------------------

def test_full_format_shows_the_first_lines_of_a_long_span_then_how_many_more():
    from torchlint.diagnostics import Diagnostic, Location
    from torchlint.reporters import ReportContext, get_renderer

    text = "x = 1\nfor batch in loader:\n" + "".join(f"    step({i})\n" for i in range(20)) + "y = 2\n"
    long = Diagnostic("TL201", "host-sync-in-loop", "m", "t.py", Location(2, 1), Location(22, 13), None, 2, (2,))
    out = get_renderer("full")([long], ReportContext(sources={"t.py": text}))
    frame = out.splitlines()[1:]
    assert frame[:7] == [
        " 1 | x = 1",
        " 2 | for batch in loader:",
        "   | ^^^^^^^^^^^^^^^^^^^^",
        " 3 |     step(0)",
        "   |     ^^^^^^^",
        " 4 |     step(1)",
        "   |     ^^^^^^^ TL201",
    ]
    assert frame[7] == "   | ... 18 more lines"
    assert "step(2)" not in out and "y = 2" not in out
    short = Diagnostic("TL201", "host-sync-in-loop", "m", "t.py", Location(3, 5), Location(3, 12), None, 3, (3,))
    out = get_renderer("full")([short], ReportContext(sources={"t.py": text}))
    assert out.splitlines()[1:5] == [" 2 | for batch in loader:", " 3 |     step(0)", "   |     ^^^^^^^ TL201", " 4 |     step(1)"]


# -- issue 30, item 5: CLI habits (ruff's) ----------------------------------------------------

PREVIEW_FILE = "import torch\n"


def test_selecting_a_preview_rule_without_preview_warns(project, capsys):
    from torchlint.rules import preview_codes

    code = sorted(preview_codes())[0]
    (project / "a.py").write_text(GOOD)
    _, _, err = run(capsys, "--select", code, ".")
    assert f"torchlint: warning: Selection `{code}` has no effect because preview is not enabled" in err
    for quiet in (["--preview"], ["-q"], ["--select", "TL7"]):
        _, _, err = run(capsys, "--select", code, *quiet, ".") if quiet[0] != "--select" else run(capsys, *quiet, ".")
        assert "has no effect" not in err
    (project / "pyproject.toml").write_text(f"[tool.torchlint]\nextend-select = ['{code}']\n")
    assert "has no effect" in run(capsys, ".")[2]


def test_no_file_found_warns(project, capsys):
    (project / "empty").mkdir()
    code, _, err = run(capsys, "empty")
    assert code == 0
    assert "torchlint: warning: No Python files found under the given path(s)" in err
    (project / "empty" / "a.py").write_text(GOOD)
    assert "No Python files found" not in run(capsys, "empty")[2]


def _args(**kw):
    import argparse

    base = dict(quiet=False, silent=False, output_format=None, statistics=False)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("kw, tty, env, expected", [
    ({}, True, {}, True),
    ({"output_format": "concise"}, True, {}, True),
    ({"output_format": "json"}, True, {}, False),  # machine formats never
    ({"output_format": "sarif"}, True, {}, False),
    ({"statistics": True}, True, {}, False),
    ({"quiet": True}, True, {}, False),
    ({"silent": True}, True, {}, False),
    ({}, False, {}, False),  # a pipe, a CI log
    ({}, True, {"TERM": "dumb"}, False),
])
def test_progress_only_on_a_terminal_for_human_formats(monkeypatch, kw, tty, env, expected):
    from torchlint.commands.progress import wanted

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stream = _Tty() if tty else io.StringIO()
    assert wanted(_args(**kw), stream) is expected


def test_progress_line_counts_what_the_pools_report_and_is_cleared(monkeypatch):
    from torchlint import workers
    from torchlint.commands import progress as progress_module

    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.01)
    stream = _Tty()
    with progress_module.progress(_args(), 10, stream) as shown:
        assert workers.PROGRESS is not None
        workers.PROGRESS(0, 10)
        workers.PROGRESS(3, 0)
        deadline = time.monotonic() + 10
        while "3/10 files analysed" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert workers.PROGRESS is None and shown is not None
    text = stream.getvalue()
    assert "torchlint: 3/10 files analysed" in text
    assert text.endswith("\r\x1b[K")  # the line is wiped: the report starts on a clean line


def test_progress_through_a_real_pool_and_never_on_a_pipe(project, capsys, monkeypatch):
    """A run big enough for a pool, stderr a terminal: progress lines name the files done; the
    same run with stderr a pipe (a subprocess) has none."""
    from torchlint.commands import progress as progress_module

    fixtures = sorted((ROOT / "fixtures").glob("TL*.py"))
    for f in fixtures:
        (project / f.name).write_text(f.read_text())
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.001)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    code = main(["--no-cache", "--isolated", "-j", "2", "--output-format", "concise", "."])
    monkeypatch.undo()
    assert code == 1
    assert f"/{len(fixtures)} files analysed" in tty.getvalue()
    done = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--isolated", "-j", "2", "."],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHLINT_PROGRESS_DELAY": "0"})
    assert done.returncode == 1 and "\r" not in done.stderr and "files analysed" not in done.stderr


def test_config_key_value_overrides_every_configuration(project, capsys):
    (project / "a.py").write_text(BAD + FIXABLE)
    (project / "pyproject.toml").write_text("[tool.torchlint]\nselect = ['TL701']\n")
    assert codes(concise(capsys, ".")[1]) == ["TL701"]
    assert codes(concise(capsys, "--config", "select = ['TL906']", ".")[1]) == ["TL906"]
    assert codes(concise(capsys, "--config", "tool.torchlint.select = ['TL906']", ".")[1]) == ["TL906"]
    # with a configuration file named too, and flags still win over the pairs
    other = project / "other.toml"
    other.write_text("select = ['TL701']\n")
    assert codes(concise(capsys, "--config", str(other), "--config", "extend-select=['TL906']", ".")[1]) == ["TL701", "TL906"]
    assert codes(concise(capsys, "--config", "select=['TL906']", "--select", "TL701", ".")[1]) == ["TL701"]
    (project / "sub").mkdir()
    (project / "sub" / "torchlint.toml").write_text("select = ['TL701']\n")
    (project / "sub" / "b.py").write_text(FIXABLE)
    assert codes(concise(capsys, "--config", "select=['TL906']", ".")[1]) == ["TL906", "TL906"]


@pytest.mark.parametrize("value, message", [
    ("selec = ['TL1']", "--config: unknown key 'selec'"),
    ("select = [", "not a file and not a TOML KEY = VALUE pair"),
    ("select = 3", "--config: select"),
    ("a = 1\nb = 2", "expected one KEY = VALUE pair"),
])
def test_config_key_value_errors_are_one_line(project, capsys, value, message):
    (project / "a.py").write_text(GOOD)
    code, out, err = run(capsys, "--config", value, ".")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_two_config_files_are_a_usage_error(project, capsys):
    for name in ("a.toml", "b.toml"):
        (project / name).write_text("")
    code, _, err = run(capsys, "--config", "a.toml", "--config", "b.toml", ".")
    assert code == 2 and "--config names one configuration file" in err


def test_ignore_noqa_reports_suppressed_findings_and_leaves_the_cache_alone(project, capsys, monkeypatch):
    monkeypatch.delenv("TORCHLINT_IGNORE_NOQA", raising=False)
    (project / "a.py").write_text("import torch.nn as nn\n\nmodel = nn.DataParallel(model)  # noqa: TL701\n")
    (project / "b.py").write_text("# torchlint: noqa\n" + BAD)
    cached = ["--cache-dir", str(project / "cache"), "--output-format", "concise", "."]
    assert main(cached) == 0
    capsys.readouterr()
    assert main(["--ignore-noqa", *cached]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(line.split(":")[0] for line in out) == ["a.py", "b.py"]
    assert "TORCHLINT_IGNORE_NOQA" not in os.environ  # set for the run (and its workers) only
    assert main(cached) == 0  # the cache holds the suppressed run's findings, not these
    assert "TL004" not in capsys.readouterr().out


def test_quiet_and_silent(project, capsys):
    (project / "a.py").write_text(BAD)
    (project / "empty").mkdir()
    code, out, err = run(capsys, "-q", "--output-format", "concise", "a.py", "empty")
    assert code == 1 and out.startswith("a.py:3:9: TL701") and err == ""
    code, out, err = run(capsys, "-s", "a.py")
    assert code == 1 and out == "" and err == ""
    code, out, err = run(capsys, "--silent", "--output-format", "json", "a.py")
    assert code == 1 and out == "" and err == ""
    (project / "b.py").write_bytes(b"\x00\x01")
    code, out, err = run(capsys, "-s", "--select", "TL701", "a.py")
    assert code == 1 and out == ""


def test_version_subcommand(capsys):
    from torchlint import __version__

    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"torchlint {__version__}\n"
    assert main(["version", "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == __version__
    assert main(["versoin"]) == 2
    assert "did you mean `torchlint version`?" in capsys.readouterr().err


def _lint_with_cache(folder: Path, cache: Path) -> None:
    (folder / "a.py").write_text(GOOD)
    assert main(["-q", "--cache-dir", str(cache), str(folder / "a.py")]) == 0


def test_clean_removes_every_torchlint_cache_under_the_tree_and_nothing_else(project, capsys):
    from torchlint.cache import is_torchlint_cache

    for sub in ("one", "two/deeper"):
        (project / sub).mkdir(parents=True)
        _lint_with_cache(project / sub, project / sub / ".torchlint_cache")
        assert is_torchlint_cache(str(project / sub / ".torchlint_cache"))
    _lint_with_cache(project, project / ".torchlint_cache")
    # look-alikes: another tool's tagged cache, an untagged folder of that name, a link to a cache
    other = project / "other" / ".cache"
    other.mkdir(parents=True)
    (other / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# created by sometool\n")
    plain = project / "plain" / ".torchlint_cache"
    plain.mkdir(parents=True)
    (plain / "keep.txt").write_text("mine")
    outside = project.parent / (project.name + "-outside")
    outside.mkdir()
    _lint_with_cache(outside, outside / ".torchlint_cache")
    (project / "link").symlink_to(outside, target_is_directory=True)
    capsys.readouterr()
    assert main(["clean"]) == 0
    err = capsys.readouterr().err
    assert not (project / ".torchlint_cache").exists()
    assert not (project / "one" / ".torchlint_cache").exists()
    assert not (project / "two" / "deeper" / ".torchlint_cache").exists()
    assert err.count("Removed ") == 3
    assert (other / "CACHEDIR.TAG").exists() and (plain / "keep.txt").exists()
    assert (outside / ".torchlint_cache").exists()  # not through the link
    assert (project / "one" / "a.py").exists()
    # a folder given: only under it
    _lint_with_cache(project / "one", project / "one" / ".torchlint_cache")
    _lint_with_cache(project / "two", project / "two" / ".torchlint_cache")
    assert main(["clean", "-q", "--isolated", "one"]) == 0
    assert not (project / "one" / ".torchlint_cache").exists() and (project / "two" / ".torchlint_cache").exists()
    assert main(["clean", "nothere"]) == 2


def test_watch_backend_choice(monkeypatch):
    from torchlint.commands.check import _watch_backend

    import watchfiles  # noqa: F401 - the test extra installs it

    monkeypatch.delenv("TORCHLINT_WATCH_POLL", raising=False)
    assert _watch_backend() == "watchfiles"
    monkeypatch.setenv("TORCHLINT_WATCH_POLL", "1")
    assert _watch_backend() == "poll"
    monkeypatch.delenv("TORCHLINT_WATCH_POLL")
    monkeypatch.setitem(sys.modules, "watchfiles", None)  # not installed
    assert _watch_backend() == "poll"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_watch_with_events_sees_a_new_file_and_ignores_the_cache(tmp_path):
    """watchfiles: a new .py file starts a run; the run's own cache writes do not (no loop)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "t.py").write_text(GOOD)
    env = {**os.environ, "TORCHLINT_WATCH_INTERVAL": "0.1", "PYTHONUNBUFFERED": "1"}
    env.pop("TORCHLINT_WATCH_POLL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "--watch", "--output-format", "concise", "."],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    try:
        _wait_for(lines, lambda line: "Watching for file changes" in line)
        time.sleep(1.0)  # the cache was written by the first run: no second run follows
        extra = []
        while not lines.empty():
            extra.append(lines.get())
        assert not any("File change detected" in line for line in extra), extra
        (tmp_path / "new.py").write_text(BAD)
        second = _wait_for(lines, lambda line: "Watching for file changes" in line)
        assert any(line.startswith("new.py:3:9: TL701 ") for line in second)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
