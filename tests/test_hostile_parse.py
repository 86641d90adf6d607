"""Hostile input to the parse stage (issue 13): nesting and sizes that crash or exhaust libcst are
refused per file (TL001 where CPython rejects them too, else TL003), deep but acceptable trees
keep their findings, and nothing is printed from compiling the linted code. Inputs are generated
here, small; none is committed."""

from __future__ import annotations

import gc
import subprocess
import sys
import time

import pytest

from torchlint import guards
from torchlint.cli import main
from torchlint.config import CliOverrides, SettingsResolver
from torchlint.engine import lint_source
from torchlint.diagnostics import Location
from torchlint.locator import Locator
from torchlint.source import UnreadableFile, decode_source

FINDING = "torch.zeros(3).cuda()"  # TL202


@pytest.fixture(scope="module")
def settings():
    return SettingsResolver(CliOverrides(), isolated=True).default


def codes(text, settings, **kwargs):
    return [(d.code, d.location.row) for d in lint_source(text, "m.py", settings, **kwargs)]


def with_finding(line: str) -> str:
    """A file whose TL202 finding makes libcst parse it (the prefilter passes)."""
    return f"import torch\nx = {FINDING}\n{line}\n"


# -- what libcst would crash on, CPython rejects: TL001 without libcst ------------------------------

@pytest.mark.parametrize("line", [
    "y = " + "(" * 5000 + "1" + ")" * 5000,
    "y = " + "[" * 5000 + "1" + "]" * 5000,
    "y = " + "f(" * 1000 + "1" + ")" * 1000,
    "y = " + "(" * 201 + "1" + ")" * 201,
    "y = a" + ".b" * 10_000,
    "y = " + "lambda: " * 5000 + "1",
    "y = " + "-" * 20_000 + "1",
    "y = " + " + ".join(["0"] * 50_000),
], ids=["parens-5000", "brackets-5000", "calls-1000", "parens-201", "attributes-10000", "lambdas-5000",
        "unary-20000", "sum-50000"])
def test_cpython_rejects_deep_nesting_tl001(line, settings):
    text = with_finding(line)
    found = codes(text, settings)
    assert [c for c, _ in found] == ["TL001"], found


def test_nested_parentheses_message_and_position(settings):
    text = with_finding("y = " + "(" * 1000 + "1" + ")" * 1000)
    (d,) = lint_source(text, "m.py", settings)
    assert (d.code, d.message, d.location.row) == ("TL001", "SyntaxError: too many nested parentheses", 3)


def test_unclosed_deep_brackets_are_tl001(settings):
    (d,) = lint_source(with_finding("y = " + "(" * 3000), "m.py", settings)
    assert d.code == "TL001"


# -- valid Python too deep or too big for libcst: TL003 --------------------------------------------

@pytest.mark.parametrize("line", [
    "y = " + " + ".join(["0"] * 1500),
    "y = " + " and ".join(["a"] * 10_000),  # flat for CPython, a SIGSEGV in libcst
    "y = " + "1 if a else " * 1500 + "1",
    "y = f" + "()" * 1500,
    "y = a" + "[0]" * 1500,
], ids=["sum-1500", "and-10000", "ternary-1500", "calls-1500", "subscripts-1500"])
def test_valid_but_too_deep_is_tl003(line, settings):
    (d,) = lint_source(with_finding(line), "m.py", settings)
    assert d.code == "TL003" and d.message.startswith("too complex to analyse: code nested"), d.message
    assert d.location.row == 3


def test_long_elif_chain_is_refused(settings):
    text = "import torch\nif a:\n    pass\n" + f"elif a:\n    {FINDING}\n" * 1500
    assert [c for c, _ in codes(text, settings)] == ["TL003"]
    text = "import torch\nif a:\n    pass\n" + f"elif a:\n    {FINDING}\n" * 20_000  # CPython gives up
    assert [c for c, _ in codes(text, settings)] == ["TL001"]


def test_huge_statement_is_tl003_without_parsing(settings):
    text = with_finding("y = [" + ", ".join(["0"] * 100_000) + "]")
    start = time.process_time()
    (d,) = lint_source(text, "m.py", settings)
    assert d.code == "TL003" and "a statement of 300,004 characters of code" in d.message
    assert d.location.row == 3
    assert time.process_time() - start < 5  # libcst: ~6 s and 400 MB; CPython's ast is not run


def test_huge_file_without_candidates_skips_ast(settings):
    text = "y = [" + ", ".join(["0"] * 700_000) + "]\n"  # no rule can fire: only CPython's check
    start = time.process_time()
    (d,) = lint_source(text, "m.py", settings)
    assert d.code == "TL003" and d.message.startswith("too large to analyse: 2,100,005 characters")
    assert time.process_time() - start < 5  # CPython's ast would take ~700 MB


def test_strings_and_comments_do_not_count(settings):
    # brackets, operators and length inside strings and comments are not code
    text = with_finding(
        "y = '" + "(" * 5000 + "'  # " + "[" * 5000 + "\nz = '''" + "-" * 300_000 + "'''"
    )
    assert codes(text, settings) == [("TL202", 2)]


def test_flat_data_is_not_refused(settings):
    rows = ", ".join(f"'k{i}': [1, 2, (3, -4)]" for i in range(5000))
    assert codes(with_finding("table = {" + rows + "}"), settings) == [("TL202", 2)]


def test_tl003_can_be_ignored(settings):
    quiet = SettingsResolver(CliOverrides(ignore=["TL003"]), isolated=True).default
    assert codes(with_finding("y = a" + "[0]" * 1500), quiet) == []


# -- deep trees within the limits keep their findings ----------------------------------------------

@pytest.mark.parametrize("line", [
    "y = " + " + ".join([FINDING] * 500),
    "y = " + " ** ".join(["2"] * 900) + f" + {FINDING}",
    "y = " + "-" * 900 + FINDING,
    "y = " + "lambda: " * 900 + FINDING,
    "y = " + FINDING + ".b" * 900,
    "y = " + "(" * 190 + FINDING + ")" * 190,
], ids=["sum-500", "power-900", "unary-900", "lambdas-900", "attributes-900", "parens-190"])
def test_deep_but_allowed_keeps_findings(line, settings):
    found = codes("import torch\n" + line + "\n", settings)
    assert found and {c for c, _ in found} == {"TL202"} and all(row == 2 for _, row in found)


def test_500_term_sum_keeps_the_finding(settings):
    """Was: RecursionError in the positions code, the finding dropped, 'All checks passed!'."""
    text = "import torch\ny = " + " + ".join(["0"] * 500) + f"\nz = {FINDING}\n"
    assert codes(text, settings) == [("TL202", 3)]
    assert sys.getrecursionlimit() == 1000 or sys.getrecursionlimit() < guards.DEEP_RECURSION_LIMIT


def test_deep_call_returns_and_raises():
    def deep(n):
        return 0 if n == 0 else 1 + deep(n - 1)

    before = sys.getrecursionlimit()
    assert guards.deep_call(deep, 20_000) == 20_000
    with pytest.raises(ZeroDivisionError):
        guards.deep_call(lambda: 1 / 0)
    assert sys.getrecursionlimit() == before


# -- the scan ---------------------------------------------------------------------------------------

def test_scan_bounds():
    shape = guards.scan("x = (\n  1 +\n  2)\ny = '((('  # [[[\n")
    assert shape.bracket_depth == 1 and shape.longest_line <= 20
    # one logical line through groups and backslashes
    assert guards.scan("x = f(\n)+f(\n)+f(\n)\n").longest_line == 18
    assert guards.scan("x = 1 + \\\n 2\n").longest_line == 11
    # a form feed or a lone \r is not hiding a long line
    assert guards.scan("x = " + "-\f" * 600 + "1\n").longest_line > 1000
    assert guards.scan("a = 1\rb = 2\r").longest_line == 5


def test_nesting_bound_is_an_upper_bound():
    import ast

    for text in [
        "x = [" + ", ".join(["-1"] * 3000) + "]",
        "x = {" + ", ".join(f"{i}: ({i}, [{i}])" for i in range(2000)) + "}",
        "f = lambda a, b: lambda a, b: lambda a, b: 1",
        "x = (" + " + ".join(["a"] * 1200) + ")",
        "x = a, " + "-" * 1500 + "1",
    ]:
        depth, _ = guards.tree_depth(ast.parse(text))
        assert guards.scan(text).nesting >= depth - 3, text


# -- files CPython rejects are never rewritten -------------------------------------------------------

def test_fix_leaves_rejected_file_alone(tmp_path):
    path = tmp_path / "deep.py"
    original = with_finding("y = " + "(" * 1000 + "1" + ")" * 1000)
    path.write_text(original)
    code = main(["--isolated", "--no-cache", "--fix", "--unsafe-fixes", str(path)])
    assert code == 1 and path.read_text() == original


def test_bom_with_latin1_cookie_is_reported_not_fixed(tmp_path):
    path = tmp_path / "bom.py"
    data = b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nimport torch\nx = " + FINDING.encode() + b"\n"
    path.write_bytes(data)
    code = main(["--isolated", "--no-cache", "--fix", "--unsafe-fixes", str(path)])
    assert code != 0 and path.read_bytes() == data
    with pytest.raises(UnreadableFile, match="byte order mark"):
        decode_source(data)


@pytest.mark.parametrize("where", [0, 10, 9000])
def test_nul_byte_same_code_anywhere(where):
    text = ("x = 1\n" * 2000).encode()
    data = text[:where] + b"\0" + text[where:]
    with pytest.raises(UnreadableFile, match="NUL"):
        decode_source(data)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_is_named(codec):
    with pytest.raises(UnreadableFile, match="UTF-16"):
        decode_source("import torch\nx = 1\n".encode(codec))


# -- CLI: one bad file does not take the run down, and the exit code says so -------------------------

def test_cli_deep_file_does_not_crash_the_run(tmp_path, capsys):
    (tmp_path / "deep.py").write_text("y = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "ok.py").write_text(with_finding(""))
    code = main(["--isolated", "--no-cache", "--jobs", "1", "--output-format", "concise", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "deep.py:1:" in out and "TL001" in out and "ok.py:2:5: TL202" in out
    assert "All checks passed" not in err


def test_cli_segfault_inputs_in_a_subprocess(tmp_path):
    """The inputs that killed the process (SIGSEGV) now give findings and exit 1."""
    for name, line in [("parens", "(" * 5000 + "1" + ")" * 5000), ("lambda", "lambda: " * 5000 + "1"),
                       ("attr", "a" + ".b" * 10_000), ("and", " and ".join(["a"] * 10_000))]:
        (tmp_path / f"{name}.py").write_text(f"import torch\nx = {FINDING}\ny = {line}\n")
    run = subprocess.run([sys.executable, "-m", "torchlint", "--isolated", "--no-cache", "--output-format",
                          "concise", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    found = sorted(line.split(": ")[1].split()[0] for line in run.stdout.splitlines() if ": TL" in line)
    assert found == ["TL001", "TL001", "TL001", "TL003"], run.stdout


def test_internal_error_exits_2_without_all_checks_passed(tmp_path, capsys, monkeypatch):
    import torchlint.engine

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(torchlint.engine, "check_module", broken)
    (tmp_path / "a.py").write_text(with_finding(""))
    code = main(["--isolated", "--no-cache", "--jobs", "1", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "internal error: RuntimeError: boom" in err and "All checks passed" not in err


# -- noise -------------------------------------------------------------------------------------------

def test_no_syntax_warnings_printed(tmp_path):
    path = tmp_path / "warn.py"
    path.write_text(f'import torch\nx = {FINDING}\nif x is not 1:\n    y = "\\d"\n' + "y = " + "+".join("0" * 1200) + "\n")
    run = subprocess.run([sys.executable, "-W", "default", "-m", "torchlint", "--isolated", "--no-cache", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert "Warning" not in run.stderr, run.stderr


# -- locator and gc -----------------------------------------------------------------------------------

def test_locator_on_a_large_file_without_carriage_returns():
    """The 61k-line file that took 3.7 s (quadratic rescans for a missing `\r`); its speed is
    measured by benchmarks/bench.py, not here (no timed unit tests). Here: the same answers."""
    text = "x = 1\n" * 64_000 + "y"
    loc = Locator(text)
    assert loc.line_starts == [6 * i for i in range(64_001)]
    assert loc.line(64_001) == "y" and loc.location(len(text) - 1) == Location(64_001, 1)


def test_locator_line_endings():
    loc = Locator("a\r\nb\rc\nd")
    assert loc.line_starts == [0, 3, 5, 7] and loc.line(2) == "b" and loc.line(4) == "d"


def test_single_process_run_uses_the_worker_gc_policy():
    from torchlint.runner import QUIET_GC_THRESHOLD, quiet_collector

    before = gc.get_threshold()
    with quiet_collector():
        assert gc.get_threshold() == QUIET_GC_THRESHOLD and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before


@pytest.mark.parametrize("unit", [". ########", ".#", "= # ", "to # ", "grad # ", ".to # "],
                         ids=["dot-hashes", "dot-hash", "equals", "to", "grad", "dot-to"])
def test_a_long_line_of_gaps_into_comments_is_linear(unit, settings):
    """Every regex that skips what Python allows between two tokens (``rules.base.GAP``) reads a
    comment to its end wherever a search tries it: a 200 KB comment line of ``. #`` made each
    search quadratic (47 s for TL202's prefilter alone). Comments are read for at most
    ``MAX_GAP_COMMENT`` characters; the finding above the line stays."""
    text = with_finding("# " + unit * (200_000 // len(unit)))
    start = time.process_time()
    assert codes(text, settings) == [("TL202", 2)]
    assert time.process_time() - start < 15  # ~1 s; 47 s and more before the bound


def test_a_comment_between_a_dot_and_its_name_is_seen_through(settings):
    """The bound leaves ordinary comments where Python allows them: a move spelt across a
    comment, inside brackets, is still found."""
    text = "import torch\nx = (torch.zeros(3).  # " + "why " * 200 + "\n     cuda())\n"
    assert codes(text, settings) == [("TL202", 2)]


def test_a_long_line_of_constructor_calls_is_linear(settings):
    """TL202's text scan (``device._constructor_targets``) found each constructor call's
    statement with an ``rfind`` back to its line's start and read the statement's head once per
    call: quadratic on a long line of calls (100 KB: 4 s). Now a line table and one head per
    statement."""
    text = "import torch\n# " + "(torch.zeros(1)).to(d) # " * 12_000 + "\n"
    start = time.process_time()
    assert codes(text, settings) == []
    assert time.process_time() - start < 15  # ~0.5 s; ~40 s before
