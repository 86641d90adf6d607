"""Hostile and unlucky text, input and output, round two (issue 32): lone-CR and mixed line
endings, file names that are not UTF-8 or hold control characters through every output format,
stdin without bound or closed, very long sums in flagged calls, notebooks' images and
automagics, ``SyntaxWarning``s during ``--fix``, ``noqa`` inside strings, early Ctrl-C, fixing
through symlinks, form feeds before indented lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from torchlint.config import Settings
from torchlint.engine import lint_source, single_file_facts
from torchlint.reporters import FORMATS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CLI = [sys.executable, "-m", "torchlint"]


def cli(*args, cwd, timeout=120, **kw):
    """The command in a fresh process (bytes out): a hang fails the test instead of blocking it."""
    return subprocess.run(CLI + list(args), cwd=cwd, capture_output=True, timeout=timeout, **kw)


def findings(out: bytes):
    return sorted((d["code"], d["location"]["row"], d["location"]["column"], d["end_location"]["row"],
                   d["end_location"]["column"]) for d in json.loads(out))


# -- item 7: lone-CR and mixed line endings ------------------------------------------------------

def _endings(text: str, style: str, seed: int = 0) -> str:
    """``text`` (LF) with each line ending replaced: ``cr``, ``crlf``, or ``mixed`` (each line's
    ending drawn from the three; a lone CR never directly before an LF, which would make one)."""
    if style == "cr":
        return text.replace("\n", "\r")
    if style == "crlf":
        return text.replace("\n", "\r\n")
    import random

    rnd = random.Random(seed)
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines[:-1]):
        choices = ["\n", "\r\n"] if lines[i + 1] == "" and i + 1 < len(lines) - 1 else ["\n", "\r", "\r\n"]
        out.append(line + rnd.choice(choices))
    return "".join(out) + lines[-1]


def _universal(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.mark.parametrize("style", ["cr", "crlf", "mixed"])
@pytest.mark.parametrize("fixture", ["TL201.py", "TL101.py", "TL202.py"])
def test_line_endings_lint_like_lf_through_the_command(tmp_path, style, fixture):
    """The TL201 fixture saved with lone CRs said "All checks passed!"; every finding must be
    where it is in the LF file (CPython counts a lone CR and a CRLF as one line end)."""
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    other = _endings(text, style)
    assert _universal(other) == text and ("\r" in other)
    (tmp_path / "lf.py").write_bytes(text.encode())
    (tmp_path / "other.py").write_bytes(other.encode())
    # a fixture of a preview rule (TL101 since issue 29) says so in its header
    preview = ("--preview",) if text.startswith("# fixture: preview = true") else ()
    want = cli("--isolated", "--no-cache", *preview, "--output-format", "json", "lf.py", cwd=tmp_path)
    got = cli("--isolated", "--no-cache", *preview, "--output-format", "json", "other.py", cwd=tmp_path)
    assert want.returncode == got.returncode == 1, got.stderr
    assert findings(got.stdout) == findings(want.stdout)
    assert len(findings(want.stdout)) >= 5


@pytest.mark.parametrize("prefilter", [True, False])
@pytest.mark.parametrize("style", ["cr", "mixed"])
def test_line_endings_in_the_engine_with_and_without_the_prefilter(style, prefilter):
    """Without the prefilter the summarizer indexed lines split at ``\\n`` only (IndexError);
    with it, the ast questions answered "nothing here"."""
    text = (FIXTURES / "TL201.py").read_text(encoding="utf-8")
    other = _endings(text, style, seed=3)

    def run(source):
        found = lint_source(source, "m.py", Settings(), prefilter=prefilter, project=single_file_facts(source, "m.py"))
        return sorted((d.code, d.location.row, d.location.column, d.end_location.row) for d in found)

    assert run(other) == run(text) and len(run(text)) >= 10


def test_ast_line_starts_count_lines_as_cpython():
    import ast

    from torchlint.astindex import line_starts

    text = "a = 1\rb = 2\r\nc = 3\nd = (\r4)\r"
    tree = ast.parse(text)
    starts = line_starts(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            assert text[starts[node.lineno - 1] + node.col_offset] == str(node.value)


@pytest.mark.parametrize("style", ["cr", "crlf"])
def test_fix_keeps_lone_cr_endings(tmp_path, style):
    text = (FIXTURES / "TL102.py").read_text(encoding="utf-8")  # safe fixes of default rules
    path = tmp_path / "t.py"
    path.write_bytes(_endings(text, style).encode())
    proc = cli("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = path.read_bytes()
    assert data != _endings(text, style).encode()
    ending = b"\r" if style == "cr" else b"\r\n"
    assert data.count(ending) == data.count(b"\r") == len(data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")) - 1
    compile(data, "t.py", "exec")


# -- item 9: file names that are not UTF-8 or hold control characters ----------------------------

NAMES = [b"bad\xff\xfe.py", b"esc\x1b[31mred\x1b[0m.py", b"nl\nline.py", b"tab\tcr\r.py", b"bell\x07\x08.py",
         "bidi\u2028x\u202e.py".encode(), b"quote\"<&>'%;],:.py"]
SNIPPET = b"import torch\nfor x in range(3):\n    y = torch.zeros(3).cuda()\n"  # one TL202 (a fix)


@pytest.fixture
def hostile_names(tmp_path):
    for name in NAMES:
        (tmp_path / os.fsdecode(name)).write_bytes(SNIPPET)
    return tmp_path


def _no_raw_controls(text: str) -> None:
    """Nothing a terminal would act on: only newlines and printable characters."""
    bad = re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\ud800-\udfff]", text)
    assert not bad, bad


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hostile_file_names_through_every_format(hostile_names, fmt):
    """SARIF ended in UnicodeEncodeError, the JUnit XML was not UTF-8, escape sequences went raw
    to the terminal formats, and a newline split a concise line."""
    proc = cli("--isolated", "--no-cache", "--output-format", fmt, ".", cwd=hostile_names)
    assert proc.returncode == 1, proc.stderr
    assert b"internal error" not in proc.stderr
    out = proc.stdout.decode("utf-8")  # strict: valid UTF-8 whatever the names' bytes
    _no_raw_controls(out)
    one_per_line = {"concise": "TL202", "pylint": "TL202", "github": "::warning", "azure": "##vso",
                    "json-lines": '"TL202"'}
    if fmt in one_per_line:
        lines = out.splitlines()
        assert len(lines) == len(NAMES) and all(one_per_line[fmt] in line for line in lines), out
    if fmt in ("json", "sarif", "gitlab", "rdjson", "json-lines"):
        docs = [json.loads(line) for line in out.splitlines()] if fmt == "json-lines" else [json.loads(out)]
        dumped = json.dumps(docs, ensure_ascii=False)
        dumped.encode("utf-8")  # no lone surrogate anywhere
        assert re.search(r"bad(\\\\xff\\\\xfe|%FF%FE)\.py", dumped), dumped  # the bytes escaped
    if fmt == "sarif":
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(out)["runs"][0]["results"]}
        from urllib.parse import unquote_to_bytes

        assert {unquote_to_bytes(u) for u in uris} == set(NAMES)
    if fmt == "junit":
        root = ET.fromstring(proc.stdout)
        assert len(root.findall(".//failure")) == len(NAMES)
    if fmt in ("full", "concise", "grouped", "pylint"):
        assert "bad\\xff\\xfe.py" in out and "esc\\x1b[31mred\\x1b[0m.py" in out and "nl\\x0aline.py" in out


@pytest.mark.parametrize("fmt", ["sarif", "junit", "concise", "json"])
def test_hostile_file_names_into_an_output_file(hostile_names, fmt):
    proc = cli("--isolated", "--no-cache", "--output-format", fmt, "-o", "report.out", ".", cwd=hostile_names)
    assert proc.returncode == 1 and b"internal error" not in proc.stderr, proc.stderr
    (hostile_names / "report.out").read_bytes().decode("utf-8")


def test_hostile_file_names_in_fix_diff_and_show_fixes(hostile_names):
    proc = cli("--isolated", "--no-cache", "--diff", ".", cwd=hostile_names)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode("utf-8")
    _no_raw_controls(out)
    assert out.count("\n--- a/") + out.startswith("--- a/") == len(NAMES)
    proc = cli("--isolated", "--no-cache", "--fix", "--show-fixes", "--output-format", "concise", ".", cwd=hostile_names)
    assert proc.returncode == 0, proc.stderr
    _no_raw_controls(proc.stdout.decode("utf-8"))
    assert all(b"device=" in (hostile_names / os.fsdecode(n)).read_bytes() for n in NAMES)


# -- item 10: stdin with a bound, closed, UTF-16 ------------------------------------------------

def test_endless_stdin_is_one_line_error_in_bounded_memory(tmp_path):
    """``cat /dev/zero | torchlint -`` grew until memory ran out: now it stops at max-file-size."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run(f"head -c 3000000000 /dev/zero | {sys.executable} -m torchlint --isolated -", shell=True,
                          cwd=tmp_path, capture_output=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.decode().splitlines() == [
        "torchlint: error: -: more than 10,485,760 bytes on stdin (max-file-size); not linted"]
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kb < 200 * 1024 or peak_kb == before, peak_kb  # ~32 MB measured; 3 GB unbounded


def test_max_file_size_applies_to_stdin(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nmax-file-size = 100\n")
    code = b"import torch\nm = torch.nn.DataParallel(m)\n"
    small = cli("-", cwd=tmp_path, input=code)
    assert small.returncode == 1 and b"TL701" in small.stdout
    big = cli("-", cwd=tmp_path, input=code + b"#" * 200 + b"\n")
    assert big.returncode == 2 and big.stderr.decode().strip() == (
        "torchlint: error: -: more than 100 bytes on stdin (max-file-size); not linted")


@pytest.mark.parametrize("extra", [[], ["--fix"], ["--diff"], ["--stdin-filename", "x.py"]])
def test_closed_stdin_is_one_line_error(tmp_path, extra):
    """``torchlint - <&-`` was ``internal error: AttributeError``."""
    proc = subprocess.run(CLI + ["--isolated"] + extra + ["-"], cwd=tmp_path, capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.decode().splitlines() == [f"torchlint: error: {extra[1] if len(extra) == 2 else '-'}: "
                                                 "stdin is closed; nothing to lint"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_utf16_on_stdin_is_tl002_as_for_a_file(tmp_path, encoding):
    code = "import torch\nm = torch.nn.DataParallel(m)\n".encode(encoding)
    (tmp_path / "f.py").write_bytes(code)
    as_file = cli("--isolated", "--output-format", "concise", "f.py", cwd=tmp_path)
    as_stdin = cli("--isolated", "--output-format", "concise", "--stdin-filename", "f.py", cwd=tmp_path, input=code)
    assert as_file.returncode == as_stdin.returncode == 1, as_stdin.stderr
    assert as_stdin.stdout == as_file.stdout and b"TL002" in as_stdin.stdout
    fixed = cli("--isolated", "--fix", "-", cwd=tmp_path, input=code)  # the buffer comes back unchanged
    assert fixed.returncode == 1 and fixed.stdout == code and b"TL002" in fixed.stderr


def test_force_excluded_stdin_is_copied_through_unchanged(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["gen_*.py"]\n')
    data = b"import torch\r\nm = torch.nn.DataParallel(m)\n\xff\xfe"
    proc = cli("--fix", "--force-exclude", "--stdin-filename", "gen_x.py", cwd=tmp_path, input=data)
    assert proc.returncode == 0 and proc.stdout == data


def test_form_feed_is_no_line_end_for_diffs_and_ci_formats():
    """``str.splitlines`` cuts at a form feed (``\\x0c``), CPython does not: a diff showed
    "No newline at end of file" mid-file and GitLab's fingerprint hashed the wrong line."""
    from torchlint.diagnostics import Diagnostic, Location
    from torchlint.fixer import unified_diff
    from torchlint.reporters import ReportContext
    from torchlint.reporters.gitlab import _line_text
    from torchlint.reporters.rdjson import render as rdjson

    before = "a = 1  # \x0c\nb = 2\nc = 3\n"
    diff = unified_diff(before, before.replace("c = 3", "c = 4"), "f.py")
    assert "No newline" not in diff and " a = 1  # \x0c\n" in diff
    text = "x = 1  # \x0c \x1c \x85 \u2028\ny = 'é' + 2\n"
    d = Diagnostic("TL999", "made-up", "m", "f.py", Location(2, 11), Location(2, 12))
    assert _line_text(d, {"f.py": text}) == "y = 'é' + 2"
    start = json.loads(rdjson([d], ReportContext(sources={"f.py": text})))["diagnostics"][0]["location"]["range"]["start"]
    assert start == {"line": 2, "column": 12}  # 'é' is two bytes


# -- item 12: a 500-term sum inside a flagged call -----------------------------------------------

def _sum(n: int) -> str:
    return " + ".join(["0"] * n)


def _notebook(source: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": source.splitlines(keepends=True)}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.parametrize("n", [500, 990])
def test_long_sum_in_a_flagged_call_keeps_the_finding(tmp_path, n):
    """``internal error: RecursionError`` from generating one statement's code (positions) and
    a fix's node (render_node): the finding was lost and the file not reported."""
    s = _sum(n)
    (tmp_path / "factory.py").write_text(f"import torch\nfor i in range(3):\n    x = torch.zeros({s}).cuda()\n")
    (tmp_path / "item.py").write_text(f"import torch\nfor b in loader:\n    loss = model(b.cuda())\n    print(loss.item() + {s})\n")
    (tmp_path / "method.py").write_text(f"import torch\nclass A:\n    def f(self):\n        for b in loader:\n"
                                        f"            x = torch.zeros(3).cuda() * ({s})\n            y = x.item()\n")
    (tmp_path / "cell.ipynb").write_text(_notebook(f"import torch\nfor i in range(3):\n    x = torch.zeros({s}).cuda()\n"))
    proc = cli("--isolated", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 1 and b"error" not in proc.stderr, proc.stderr
    got = sorted((d["filename"], d["code"], d["location"]["row"]) for d in json.loads(proc.stdout))
    assert got == [("cell.ipynb", "TL202", 3), ("factory.py", "TL202", 3), ("item.py", "TL201", 4),
                   ("method.py", "TL201", 6), ("method.py", "TL202", 5)]
    fixed = cli("--isolated", "--no-cache", "--fix", ".", cwd=tmp_path)
    assert fixed.returncode == 1 and b"error" not in fixed.stderr, fixed.stderr
    assert f'torch.zeros({s}, device="cuda")' in (tmp_path / "factory.py").read_text()
    assert "device=\\\"cuda\\\"" in (tmp_path / "cell.ipynb").read_text()


def test_recursion_anywhere_in_a_lint_is_tl003_not_an_internal_error(monkeypatch):
    from torchlint import engine
    from torchlint.runner import lint_text
    from torchlint.source import SourceFile

    def deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine, "lint_source", deep)
    found, _, error = lint_text(SourceFile("t.py", "import torch\n"), Settings())
    assert error is None and [(d.code, d.message) for d in found] == [
        ("TL003", "too complex to analyse: nested past Python's recursion limit")]


# -- item 17: the linted code's SyntaxWarnings are not printed ----------------------------------

WARNS = 'import torch\nx = "\\d"\nif x is 1:\n    pass\nfor i in range(3):\n    y = torch.zeros(3).cuda()\n'


@pytest.mark.parametrize("mode", [[], ["--fix"], ["--diff"], ["--fix-only"]])
def test_syntax_warnings_of_the_linted_code_are_not_printed(tmp_path, mode):
    """``--fix`` and ``--diff`` printed ``SyntaxWarning: "is" with a literal`` (compile() without a
    filter); with every warning shown (``PYTHONWARNINGS=always``), a notebook's lint did too."""
    (tmp_path / "w.py").write_text(WARNS)
    (tmp_path / "w.ipynb").write_text(_notebook(WARNS))
    env = dict(os.environ, PYTHONWARNINGS="always")
    proc = cli("--isolated", "--no-cache", *mode, "w.py", "w.ipynb", cwd=tmp_path, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    assert b"Warning" not in proc.stderr, proc.stderr
    piped = cli("--isolated", "--no-cache", *mode, "-", cwd=tmp_path, env=env, input=WARNS.encode())
    assert b"Warning" not in piped.stderr, piped.stderr


# -- item 18: file-level directives come from comments only --------------------------------------

FLAGGED = "import torch\nfor i in range(3):\n    y = torch.zeros(3).cuda()\n"


@pytest.mark.parametrize("template", [
    'TEMPLATE = """\n# torchlint: noqa\n"""\n',
    "TEMPLATE = '''\n  # torchlint: noqa: TL202\n'''\n",
    'TEMPLATE = "\\\n# torchlint: noqa"\n',
    'def f():\n    """Example:\n\n    # torchlint: noqa\n    """\n',
])
def test_directive_inside_a_string_exempts_nothing(template):
    from torchlint.suppression import file_exemptions

    for text in (template + FLAGGED, FLAGGED + template):
        assert file_exemptions(text) is None
        found = lint_source(text, "t.py", Settings())
        assert [d.code for d in found] == ["TL202"]
        cr = text.replace("\n", "\r")
        assert [d.code for d in lint_source(cr, "t.py", Settings())] == ["TL202"]


@pytest.mark.parametrize("directive, codes", [
    ("# torchlint: noqa\n", []),
    ("# torchlint: noqa: TL202\n", []),
    ("  # torchlint: noqa: TL101\n", ["TL202"]),
    ("\x0c# torchlint: noqa\n", []),
])
@pytest.mark.parametrize("ending", ["\n", "\r", "\r\n"])
def test_directive_in_a_comment_still_exempts(directive, codes, ending):
    text = ('"""Docstring."""\n' + FLAGGED + 's = """x"""\n' + directive).replace("\n", ending)
    assert [d.code for d in lint_source(text, "t.py", Settings())] == codes
    assert [d.code for d in lint_source(directive.replace("\n", ending) + FLAGGED, "t.py", Settings())] == codes


def test_directive_inside_a_notebook_string_exempts_nothing(tmp_path):
    (tmp_path / "n.ipynb").write_text(_notebook('TEMPLATE = """\n# torchlint: noqa\n"""\n' + FLAGGED))
    proc = cli("--isolated", "--no-cache", "--output-format", "concise", "n.ipynb", cwd=tmp_path)
    assert proc.returncode == 1 and b"TL202" in proc.stdout, proc.stdout + proc.stderr


# -- item 19: Ctrl-C while the command starts ----------------------------------------------------

@pytest.mark.parametrize("entry", ["script", "module"])
def test_ctrl_c_while_the_command_imports_is_one_line(tmp_path, entry):
    """A SIGINT between the entry point's first line and the command's start (importing the
    commands, libcst) printed a Python traceback: now one line and exit 130."""
    start = ("import sys; sys.argv[0] = 'torchlint'; import torchlint.cli" if entry == "script" else
             "import sys, runpy; sys.modules.pop('torchlint.__main__', None); import torchlint.__main__")
    code = (f"{start}\nimport os, signal\nos.kill(os.getpid(), signal.SIGINT)\nimport libcst, torchlint.engine\n"
            "import time\ntime.sleep(5)\nprint('not interrupted')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr == b"torchlint: interrupted\n" and proc.stdout == b"", proc.stderr


def test_importing_the_cli_elsewhere_leaves_ctrl_c_alone(tmp_path):
    # torchlint.__main__ is only imported as the program (python -m torchlint); the cli alone keeps it
    code = "import signal, torchlint.cli\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=60)
    assert proc.stdout == b"True\n", proc.stderr


def test_interrupt_wrapped_by_an_import_is_interrupted_not_internal_error(monkeypatch, capsys):
    """Ctrl-C while libcst defines its classes became ``RuntimeError: Error calling
    __set_name__`` (Python 3.11 wraps what ``__set_name__`` raises): that is an interrupt."""
    from torchlint import cli

    def interrupted_import(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on '_Field' instance 'x' in 'Node'") from exc

    monkeypatch.setitem(cli.MAINS, "check", interrupted_import)
    assert cli.main(["x.py"]) == 130
    assert capsys.readouterr().err == "torchlint: interrupted\n"


def test_ctrl_c_at_random_moments_of_the_start_never_prints_torchlints_traceback(tmp_path):
    """SIGINT 0-0.3 s into ``python -m torchlint``: one line and 130, or (very early) Python's
    own start-up, never a traceback through torchlint's code nor an internal error."""
    for fixture in ("TL201.py", "TL101.py", "TL903.py"):
        (tmp_path / fixture).write_text((FIXTURES / fixture).read_text())
    import signal
    import time

    outcomes = []
    for i in range(16):
        proc = subprocess.Popen(CLI + ["--isolated", "--no-cache", "."], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(i * 0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        outcomes.append((proc.returncode, err.decode()))
    for code, err in outcomes:
        assert "internal error" not in err, err
        frames = re.findall(r'File "([^"]+)", line (\d+)', err)
        ours = [(f, n) for f, n in frames if "torchlint" in f and "editable" not in f]
        # until the entry point's first line has imported _sigint, the window is Python's
        assert all(f.endswith(("_sigint.py", "torchlint/__init__.py")) or (f.endswith("__main__.py") and n == "1")
                   for f, n in ours), err
        assert code in (130, 0, 1, -2) or "Traceback" in err, (code, err)


# -- item 20: --fix through symlinks --------------------------------------------------------------

@pytest.mark.parametrize("jobs", ["1", "2"])
def test_fix_a_file_and_its_symlink_once(tmp_path, jobs):
    """Both names were fixed: 'file changed on disk while it was being fixed', exit 2."""
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(FLAGGED)
        (tmp_path / f"link{i}.py").symlink_to(f"m{i}.py")
    diff = cli("--isolated", "--no-cache", "--diff", "--jobs", jobs, ".", cwd=tmp_path)
    assert diff.stdout.count(b"\n+++ b/") == 6, diff.stdout  # each file once, not once per name
    proc = cli("--isolated", "--no-cache", "--fix", "--jobs", jobs, ".", cwd=tmp_path)
    assert proc.returncode == 0 and b"changed on disk" not in proc.stderr, proc.stderr
    assert proc.stderr.decode().splitlines()[0] == "Fixed 6 findings."
    for i in range(6):
        assert (tmp_path / f"m{i}.py").read_text() == FLAGGED.replace("zeros(3).cuda()", 'zeros(3, device="cuda")')
        assert (tmp_path / f"link{i}.py").is_symlink()


def test_fix_does_not_rewrite_a_file_outside_the_tree_through_a_symlink(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "o.py").write_text(FLAGGED)
    (tree / "a.py").write_text(FLAGGED)
    (tree / "out.py").symlink_to(outside / "o.py")
    proc = cli("--isolated", "--no-cache", "--fix", "--output-format", "concise", ".", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    assert (outside / "o.py").read_text() == FLAGGED  # linted, not fixed
    assert 'device="cuda"' in (tree / "a.py").read_text()
    assert proc.stdout.decode().splitlines() == ["out.py:3:9: TL202 Tensor created on the CPU then moved; pass `device=` to the factory"]
    notes = [line for line in proc.stderr.decode().splitlines() if "warning" in line]
    assert notes == [f"torchlint: warning: out.py: a symlink to {outside / 'o.py'}, outside the linted paths: "
                     "linted, not fixed (name the file itself to fix it)"]
    diff = cli("--isolated", "--no-cache", "--diff", ".", cwd=tree)
    assert b"o.py" not in diff.stdout
    named = cli("--isolated", "--no-cache", "--fix", "out.py", cwd=tree)  # named: the user asked for it
    assert named.returncode == 0 and 'device="cuda"' in (outside / "o.py").read_text(), named.stderr


# -- item 25: form feeds in indentation; MemoryError's reason ------------------------------------

FORM_FEED_CLASS = ("import torch\n\n\nclass Trainer:\n    def __init__(self):\n\x0c        self.loader = None\n\n"
                   "    def fit(self, loader):\n        for batch in loader:\n            x = torch.zeros(3).cuda()\n"
                   "            print(x.item())\n")


def test_form_feed_before_an_indented_line_lints_as_cpython_reads_it(tmp_path):
    """libcst refused the form feed (CPython resets the indentation count there): 'TL003 libcst
    cannot parse this file: Syntax Error @ 1:1', and the file's other findings were lost."""
    import ast

    ast.parse(FORM_FEED_CLASS)
    plain = FORM_FEED_CLASS.replace("\x0c", "")
    want = [(d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column)
            for d in lint_source(plain, "t.py", Settings())]
    got = [(d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column)
           for d in lint_source(FORM_FEED_CLASS, "t.py", Settings())]
    assert got == want and {c for c, *_ in got} == {"TL201", "TL202"}
    # on the form feed's own row, columns count it
    flagged = "import torch\nfor i in range(3):\n\x0c    y = torch.zeros(3).cuda()\n"
    (d,) = lint_source(flagged, "t.py", Settings())
    assert (d.location.row, d.location.column, d.end_location.column) == (3, 10, 31)
    assert flagged.split("\n")[2][d.location.column - 1:d.end_location.column - 1] == "torch.zeros(3).cuda()"
    (tmp_path / "t.py").write_text(flagged)
    proc = cli("--isolated", "--no-cache", "--fix", "t.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "t.py").read_text() == flagged.replace("zeros(3).cuda()", 'zeros(3, device="cuda")')


def test_form_feeds_in_every_fixture_lint_as_without_them(tmp_path):
    """A form feed at the start of an indented line (or alone on a line before it) of each
    fixture: the same findings, where CPython accepts the file."""
    import ast

    checked = 0
    for path in sorted(FIXTURES.glob("*.py")):
        lines = path.read_text(encoding="utf-8").split("\n")
        indented = [i for i, line in enumerate(lines) if line.startswith("    ") and line.strip()]
        for i in indented[::7][:3]:
            for variant in ("\x0c" + lines[i], "\x0c\n" + lines[i]):
                text = "\n".join(lines[:i] + [variant] + lines[i + 1:])
                try:
                    ast.parse(text)
                except SyntaxError:
                    continue
                base = "\n".join(lines)
                shift = variant.count("\n")

                def key(d, changed):
                    row, col = d.location.row, d.location.column
                    if changed and shift and row > i + 1:
                        row -= 1
                    elif changed and not shift and row == i + 1:
                        col -= 1
                    return (d.code, row, col)

                want = sorted(key(d, False) for d in lint_source(base, path.name, Settings()))
                got = sorted(key(d, True) for d in lint_source(text, path.name, Settings()))
                assert got == want, (path.name, i, variant[:20])
                checked += 1
    assert checked > 40


@pytest.mark.parametrize("where", ["file", "stdin", "notebook"])
def test_memory_error_from_cpythons_parser_has_a_reason(tmp_path, where):
    """``- - - ... 1`` makes CPython's parser raise a MemoryError without a message: the TL001
    said 'cannot parse: ' and nothing more."""
    code = "x = " + "-" * 100_000 + "1\n"
    if where == "notebook":
        (tmp_path / "n.ipynb").write_text(_notebook(code))
        proc = cli("--isolated", "--no-cache", "--output-format", "concise", "n.ipynb", cwd=tmp_path)
    elif where == "file":
        (tmp_path / "m.py").write_text(code)
        proc = cli("--isolated", "--no-cache", "--output-format", "concise", "m.py", cwd=tmp_path)
    else:
        proc = cli("--isolated", "--no-cache", "--output-format", "concise", "-", cwd=tmp_path, input=code.encode())
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.decode().strip().endswith("TL001 SyntaxError: too deeply nested for Python's parser"), proc.stdout


# -- item 13: notebooks: the size limit on code, automagics ----------------------------------------

def _notebook_cells(cells, outputs=None) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": c,
                                  "outputs": outputs or []} for c in cells],
                       "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5})


def test_notebook_size_limit_applies_to_its_code_not_its_images(tmp_path):
    """A notebook over 10 MB because of an image output was skipped as TL002."""
    import base64

    image = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": base64.b64encode(os.urandom(9_000_000)).decode()}}]
    (tmp_path / "plots.ipynb").write_text(_notebook_cells([FLAGGED], image))
    assert (tmp_path / "plots.ipynb").stat().st_size > 10 * 1024 * 1024
    proc = cli("--isolated", "--no-cache", "--output-format", "concise", "plots.ipynb", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout.decode().splitlines() == [
        "plots.ipynb:cell 1:3:9: TL202 Tensor created on the CPU then moved; pass `device=` to the factory"], proc.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nmax-file-size = 1000\n")
    (tmp_path / "code.ipynb").write_text(_notebook_cells([FLAGGED, "x = '" + "a" * 2000 + "'\n"]))
    proc = cli("--no-cache", "--output-format", "concise", "code.ipynb", "plots.ipynb", cwd=tmp_path)
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == ("code.ipynb:1:1: TL002 Cannot read file: notebook code too large (2,069 bytes in its code "
                        "cells; max-file-size is 1,000); skipped")
    assert lines[1].startswith("plots.ipynb:1:1: TL002 Cannot read file: file too large (") and \
        "a notebook may be 20 x max-file-size: 20,000" in lines[1]


@pytest.mark.parametrize("line", ["pip install torch", "conda install -y numpy", "load_ext autoreload",
                                  "autoreload 2", "time x = 1", "cd ..", "env CUDA_VISIBLE_DEVICES=0", "timeit -n 3 f(x)"])
def test_automagic_cell_is_a_magic_not_a_syntax_error(tmp_path, line):
    """Jupyter runs a one-line cell ``pip install x`` as ``%pip install x`` (automagic)."""
    (tmp_path / "n.ipynb").write_text(_notebook_cells([line, FLAGGED]))
    proc = cli("--isolated", "--no-cache", "--output-format", "concise", "n.ipynb", cwd=tmp_path)
    assert proc.stdout.decode().splitlines() == [
        "n.ipynb:cell 2:3:9: TL202 Tensor created on the CPU then moved; pass `device=` to the factory"], proc.stdout
    fixed = cli("--isolated", "--no-cache", "--fix", "n.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    cells = json.loads((tmp_path / "n.ipynb").read_text())["cells"]
    assert cells[0]["source"] == line and 'device=\\"cuda\\"' not in cells[0]["source"]


@pytest.mark.parametrize("cells", [
    ["import time", "time x = 1"],  # `time` is the module here: IPython does not call the magic either
    ["pip install x\nprint(1)"],  # automagic is for one-line cells only
    ["time = = 1"],  # an assignment (IPython's AssignmentChecker), and a broken one
])
def test_what_is_not_automagic_stays_a_syntax_error(tmp_path, cells):
    (tmp_path / "n.ipynb").write_text(_notebook_cells(cells))
    proc = cli("--isolated", "--no-cache", "--output-format", "concise", "n.ipynb", cwd=tmp_path)
    assert b"TL001" in proc.stdout, proc.stdout
