"""The fixer (torchlint/fixer.py): --fix, --unsafe-fixes, --diff, --fix-only, --show-fixes and the
config keys, with small rules defined here so that nothing depends on the real rules' fixes."""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from torchlint import fixer
from torchlint.cli import main
from torchlint.commands import fix as fix_command
from torchlint.config import Settings, settings_from_table
from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.rules.base import Rule

TESTS = Path(__file__).resolve().parent


# -- rules for these tests ---------------------------------------------------------------------

def _rename(code, name, old, new, applicability):
    class Rename(Rule):
        summary = message = f"`{old}` should be `{new}`"
        fix_applicability = applicability

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == old:
                self.report(node, fix=FixSpec(applicability, f"Rename to `{new}`", (NodeEdit(node, new),)))

    Rename.code, Rename.name, Rename.__name__ = code, name, name.title().replace("-", "")
    return Rename


FooToBar = _rename("TL901", "foo-to-bar", "foo", "bar", SAFE)
BarToBaz = _rename("TL902", "bar-to-baz", "bar", "baz", SAFE)  # enabled by TL901's fix
QuxToQuux = _rename("TL903", "qux-to-quux", "qux", "quux", UNSAFE)
Breaker = _rename("TL905", "breaker", "breakme", "breakme(", SAFE)  # a fix that breaks the file


class Spin(Rule):
    """A fix that never converges: spin1 -> spin2 -> spin3 -> ..."""

    code, name = "TL904", "spin"
    summary = message = "spin"
    fix_applicability = SAFE

    def visit_Name(self, node: cst.Name) -> None:
        m = re.fullmatch(r"spin(\d+)", node.value)
        if m:
            self.report(node, fix=FixSpec(SAFE, "spin", (NodeEdit(node, f"spin{int(m.group(1)) + 1}"),)))


class Unwrap(Rule):
    """``unwrap(x)`` -> ``x``: its edit covers any finding inside the argument."""

    code, name = "TL906", "unwrap"
    summary = message = "unwrap"
    fix_applicability = SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "unwrap" and len(node.args) == 1:
            self.report(node, fix=FixSpec(SAFE, "Unwrap", (NodeEdit(node, node.args[0].value),)))


class NeedsOs(Rule):
    """``getcwd_()`` -> ``os.getcwd()``, adding ``import os``: two findings share that edit."""

    code, name = "TL907", "needs-os"
    summary = message = "needs os"
    fix_applicability = SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "getcwd_":
            edit, local = self.ctx.import_edit("os")
            edits = (NodeEdit(node, f"{local}.getcwd()"),) + ((edit,) if edit else ())
            self.report(node, fix=FixSpec(SAFE, "Use os.getcwd()", edits))


RULES = [FooToBar, BarToBaz, QuxToQuux, Spin, Breaker, Unwrap, NeedsOs]


@pytest.fixture(autouse=True)
def only_test_rules(monkeypatch):
    """The registry holds exactly the rules above (the real ones are other people's work)."""
    import torchlint.rules as registry

    monkeypatch.setattr(registry, "RULE_MODULES", (__name__,))
    registry.all_rules.cache_clear()
    registry.rules_by_code.cache_clear()
    yield
    registry.all_rules.cache_clear()
    registry.rules_by_code.cache_clear()


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return tmp_path


def settings(**table) -> Settings:
    return settings_from_table({k.replace("_", "-"): v for k, v in table.items()}, "test", Settings())


def fix(text: str, unsafe: bool = False, **table) -> fixer.FixResult:
    return fixer.fix_text(text, "t.py", settings(**table), unsafe=unsafe)


def run(capsys, *argv):
    code = main(["--isolated", "--no-cache", *argv]) if "--config" not in argv else main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the fix loop ------------------------------------------------------------------------------

def test_fix_that_enables_another_reaches_fixed_point():
    result = fix("x = foo  # keep me\n")
    assert result.text == "x = baz  # keep me\n"
    assert result.passes == 2
    assert result.applied == {"TL901": 1, "TL902": 1}
    assert result.remaining == []


def test_never_converging_fix_stops_after_max_passes():
    result = fix("spin1\n")
    assert result.passes == fixer.MAX_PASSES
    assert result.text == f"spin{1 + fixer.MAX_PASSES}\n"
    assert [d.code for d in result.remaining] == ["TL904"]
    assert len(result.warnings) == 1 and "did not converge after 10 passes" in result.warnings[0]


def test_overlapping_fix_waits_for_next_pass():
    # TL906 (whole call) and TL901 (`foo` inside it) overlap: the first in file order wins.
    result = fix("y = unwrap(foo)\n")
    assert result.text == "y = baz\n"
    assert result.passes == 3


def test_identical_edits_are_shared_in_one_pass():
    result = fix('"""Doc."""\na = getcwd_()\nb = getcwd_()\n')
    assert result.text == '"""Doc."""\nimport os\na = os.getcwd()\nb = os.getcwd()\n'
    assert result.passes == 1
    assert result.applied == {"TL907": 2}


def test_unparseable_result_keeps_original():
    result = fix("x = foo\nbreakme\n")
    assert result.text == "x = foo\nbreakme\n"
    assert not result.changed
    assert "TL905" in result.error and "does not parse" in result.error
    assert {d.code for d in result.remaining} == {"TL901", "TL905"}


def test_comments_and_formatting_kept():
    text = "def f(a,  b):  # odd spacing\n    return (foo +\n            b)  # trailing\n"
    assert fix(text).text == text.replace("foo", "baz")


def test_crlf_line_endings_kept_in_inserted_lines():
    result = fix("a = getcwd_()\r\nb = 1\r\n")
    assert result.text == "import os\r\na = os.getcwd()\r\nb = 1\r\n"


def test_splice_converts_content_newlines():
    assert fixer.splice("a\r\nb\r\n", [(0, 1, "x\ny")], "\r\n") == "x\r\ny\r\nb\r\n"


# -- applicability -----------------------------------------------------------------------------

def test_unsafe_fix_only_with_unsafe_flag():
    assert fix("qux\n").text == "qux\n"
    assert fix("qux\n", unsafe=True).text == "quux\n"


def test_unfixable_code_loses_its_fix():
    s = settings(unfixable=["TL901"])
    diagnostics = fixer.lint_for_fix("foo\n", "t.py", s)
    assert [(d.code, d.fix) for d in diagnostics] == [("TL901", None)]
    # TL902 is not fixable, so TL901's result stays; TL903 is not fixable even with --unsafe-fixes.
    assert fix("foo\nqux\n", unsafe=True, fixable=["TL901"]).text == "bar\nqux\n"
    assert fix("foo\nqux\n", unsafe=True, fixable=["TL903"]).text == "foo\nquux\n"


def test_promotion_and_demotion():
    assert fix("qux\n", extend_safe_fixes=["TL903"]).text == "quux\n"
    assert fix("foo\n", extend_unsafe_fixes=["TL901"]).text == "foo\n"
    assert fix("foo\n", unsafe=True, extend_unsafe_fixes=["TL901"]).text == "baz\n"


def test_more_specific_selector_wins():
    s = settings(extend_unsafe_fixes=["TL9"], extend_safe_fixes=["foo-to-bar"])
    assert fixer.resolve_applicability("TL901", UNSAFE, s) == SAFE
    assert fixer.resolve_applicability("TL902", SAFE, s) == UNSAFE
    tie = settings(extend_unsafe_fixes=["TL901"], extend_safe_fixes=["TL901"])
    assert fixer.resolve_applicability("TL901", SAFE, tie) == UNSAFE


# -- the command on files ----------------------------------------------------------------------

def test_fix_writes_file_and_reports_what_remains(project, capsys):
    (project / "a.py").write_text("x = foo\ny = qux\n")
    code, out, err = run(capsys, "--fix", "--output-format", "concise", "a.py")
    assert (project / "a.py").read_text() == "x = baz\ny = qux\n"
    assert code == 1  # the unsafe finding remains
    assert out == "a.py:2:5: TL903 `qux` should be `quux`\n"
    assert "Fixed 2 findings." in err
    assert "1 unsafe fix available with --unsafe-fixes." in err


def test_unsafe_fixes_flag_fixes_everything(project, capsys):
    (project / "a.py").write_text("x = foo\ny = qux\n")
    code, out, err = run(capsys, "--fix", "--unsafe-fixes", "a.py")
    assert (project / "a.py").read_text() == "x = baz\ny = quux\n"
    assert code == 0
    assert "Fixed 3 findings." in err and "All checks passed!" in err
    assert "unsafe fix" not in err


def test_second_run_changes_nothing(project, capsys):
    text = '"""Doc."""\nx = unwrap(foo)  # c\r\ny = getcwd_()\nz = qux\nspin1\n'
    (project / "a.py").write_bytes(text.encode())
    run(capsys, "--fix", "--unsafe-fixes", "a.py")
    once = (project / "a.py").read_bytes()
    assert once != text.encode()
    mtime = os.stat(project / "a.py").st_mtime_ns
    code, out, err = run(capsys, "--fix", "--unsafe-fixes", "--select", "TL901,TL902,TL903,TL906,TL907", "a.py")
    assert (project / "a.py").read_bytes() == once
    assert os.stat(project / "a.py").st_mtime_ns == mtime  # not even rewritten
    assert code == 0 and "Fixed" not in err


def test_unparseable_fix_leaves_file_untouched_and_fixes_the_others(project, capsys):
    (project / "a.py").write_text("x = foo\nbreakme\n")
    (project / "b.py").write_text("x = foo\n")
    code, out, err = run(capsys, "--fix", "--output-format", "concise", "a.py", "b.py")
    assert code == 2
    assert (project / "a.py").read_text() == "x = foo\nbreakme\n"
    assert (project / "b.py").read_text() == "x = baz\n"
    errors = [line for line in err.splitlines() if line.startswith("torchlint: error:")]
    assert len(errors) == 1
    assert errors[0].startswith("torchlint: error: a.py: fix for TL901, TL905 produced code that does not parse")
    assert errors[0].endswith("file left unchanged")
    assert "a.py:1:5: TL901" in out  # a.py's findings are reported against its unchanged text


def test_file_changed_since_read_is_left_alone(project, capsys, monkeypatch):
    path = project / "a.py"
    path.write_text("x = foo\n")
    real = fix_command.fix_source

    def fix_then_edit(*a, **k):
        result = real(*a, **k)
        st = os.stat(path)
        path.write_text("x = Foo\n")  # same size; put the mtime back: only the bytes tell
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return result

    monkeypatch.setattr(fix_command, "fix_source", fix_then_edit)
    code, out, err = run(capsys, "--fix", "a.py")
    assert code == 2
    assert path.read_text() == "x = Foo\n"
    assert "torchlint: error: a.py: file changed on disk while it was being fixed; file left unchanged" in err


def test_write_is_atomic_keeps_mode_and_follows_symlinks(project, capsys, monkeypatch):
    real = project / "real.py"
    real.write_text("x = foo\n")
    os.chmod(real, 0o751)
    (project / "link.py").symlink_to(real)
    calls = []
    import torchlint.atomic

    original = torchlint.atomic.replace_if_unchanged
    monkeypatch.setattr(torchlint.atomic, "replace_if_unchanged", lambda *a, **k: calls.append(a) or original(*a, **k))
    code, out, err = run(capsys, "--fix", "link.py")
    assert code == 0
    assert real.read_text() == "x = baz\n"
    assert (project / "link.py").is_symlink()
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o751
    assert len(calls) == 1 and os.path.realpath(calls[0][0]) == str(real.resolve())
    assert [p.name for p in project.iterdir() if p.name.startswith(".torchlint-")] == []


def test_crlf_file_stays_crlf(project, capsys):
    (project / "a.py").write_bytes(b"x = foo\r\ny = getcwd_()\r\n")
    run(capsys, "--fix", "a.py")
    assert (project / "a.py").read_bytes() == b"import os\r\nx = baz\r\ny = os.getcwd()\r\n"


def test_bom_and_latin1_coding_kept(project, capsys):
    (project / "bom.py").write_bytes(codecs.BOM_UTF8 + "# café\nx = foo\n".encode())
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\nx = foo  # \xe9\n"
    (project / "latin.py").write_bytes(latin)
    code, out, err = run(capsys, "--fix", "bom.py", "latin.py")
    assert code == 0
    assert (project / "bom.py").read_bytes() == codecs.BOM_UTF8 + "# café\nx = baz\n".encode()
    assert (project / "latin.py").read_bytes() == latin.replace(b"foo", b"baz")


def test_diff_prints_and_writes_nothing(project, capsys):
    (project / "a.py").write_text("x = foo\ny = 1\nz = qux\n")
    code, out, err = run(capsys, "--diff", "a.py")
    assert code == 1
    assert (project / "a.py").read_text() == "x = foo\ny = 1\nz = qux\n"
    assert out == "--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@\n-x = foo\n+x = baz\n y = 1\n z = qux\n"
    assert "Would fix 2 findings (1 more with --unsafe-fixes)." in err
    code, out, _ = run(capsys, "--diff", "--unsafe-fixes", "a.py")
    assert code == 1 and "+z = quux\n" in out


def test_diff_exit_zero_when_nothing_to_fix(project, capsys):
    (project / "a.py").write_text("x = qux")  # only an unsafe fix, and no final newline
    code, out, err = run(capsys, "--diff", "a.py")
    assert (code, out) == (0, "")
    code, out, err = run(capsys, "--diff", "--unsafe-fixes", "a.py")
    assert code == 1
    assert out.endswith("-x = qux\n\\ No newline at end of file\n+x = quux\n\\ No newline at end of file\n")


def test_fix_only_does_not_report_remaining(project, capsys):
    (project / "a.py").write_text("x = foo\ny = qux\n")
    code, out, err = run(capsys, "--fix-only", "a.py")
    assert code == 0 and out == ""
    assert (project / "a.py").read_text() == "x = baz\ny = qux\n"
    assert err.strip() == "Fixed 2 findings (1 unsafe fix available with --unsafe-fixes)."


def test_diff_show_fixes_goes_to_stderr(project, capsys):
    (project / "a.py").write_text("x = foo\n")
    code, out, err = run(capsys, "--diff", "--show-fixes", "a.py")
    assert code == 1 and out.startswith("--- a/a.py\n") and "×" not in out
    assert "Would fix 2 findings:\n- a.py:\n    1 × TL901 (foo-to-bar)\n" in err


def test_suppressed_findings_are_not_fixed(project, capsys):
    (project / "a.py").write_text("x = foo  # noqa: TL901\ny = foo\n")
    code, out, err = run(capsys, "--fix", "a.py")
    assert code == 0
    assert (project / "a.py").read_text() == "x = foo  # noqa: TL901\ny = baz\n"


def test_fix_only_exits_2_on_error(project, capsys):
    (project / "a.py").write_text("breakme\n")
    code, out, err = run(capsys, "--fix-only", "a.py")
    assert code == 2 and "does not parse" in err


def test_show_fixes_lists_per_file_and_code(project, capsys):
    (project / "a.py").write_text("x = foo\ny = foo\n")
    (project / "b.py").write_text("z = getcwd_()\n")
    code, out, err = run(capsys, "--fix", "--show-fixes", "a.py", "b.py")
    assert code == 0
    assert out.endswith(
        "Fixed 5 findings:\n"
        "- a.py:\n    2 × TL901 (foo-to-bar)\n    2 × TL902 (bar-to-baz)\n"
        "- b.py:\n    1 × TL907 (needs-os)\n"
    )


def test_config_keys_and_json_applicability(project, capsys):
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend-safe-fixes = ["TL903"]\nextend-unsafe-fixes = ["TL901"]\nunfixable = ["TL907"]\n'
    )
    (project / "a.py").write_text("x = foo\ny = qux\nz = getcwd_()\n")
    code = main(["--no-cache", "--output-format", "json", "a.py"])
    found = {d["code"]: d["fix"] for d in json.loads(capsys.readouterr().out)}
    assert found["TL901"]["applicability"] == "unsafe"
    assert found["TL903"]["applicability"] == "safe"
    assert found["TL907"] is None
    code = main(["--no-cache", "--fix", "a.py"])
    out, err = capsys.readouterr()
    assert (project / "a.py").read_text() == "x = foo\ny = quux\nz = getcwd_()\n"
    assert code == 1 and "1 unsafe fix available with --unsafe-fixes." in err


def test_fixable_flags(project, capsys):
    (project / "a.py").write_text("x = foo\ny = qux\n")
    run(capsys, "--fix", "--unsafe-fixes", "--fixable", "TL903", "a.py")
    assert (project / "a.py").read_text() == "x = foo\ny = quux\n"
    run(capsys, "--fix", "--unfixable", "TL901", "a.py")
    assert (project / "a.py").read_text() == "x = foo\ny = quux\n"


# -- stdin ---------------------------------------------------------------------------------------

def _stdin(monkeypatch, data: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_stdin_fix_prints_source_to_stdout_and_findings_to_stderr(project, capsys, monkeypatch):
    _stdin(monkeypatch, b"x = foo\ny = qux\n")
    code, out, err = run(capsys, "--fix", "--output-format", "concise", "-")
    assert code == 1
    assert out == "x = baz\ny = qux\n"
    assert "-:2:5: TL903" in err and "Fixed 2 findings." in err


def test_stdin_broken_fix_prints_original(project, capsys, monkeypatch):
    _stdin(monkeypatch, b"breakme\n")
    code, out, err = run(capsys, "--fix", "-")
    assert (code, out) == (2, "breakme\n")
    assert "does not parse" in err


def test_stdin_fix_only_prints_only_the_source(project, capsys, monkeypatch):
    _stdin(monkeypatch, b"x = foo\ny = qux\n")
    code, out, err = run(capsys, "--fix-only", "-")
    assert (code, out) == (0, "x = baz\ny = qux\n")
    assert "TL903" not in err


def test_stdin_diff(project, capsys, monkeypatch):
    _stdin(monkeypatch, b"x = foo\n")
    code, out, err = run(capsys, "--diff", "--stdin-filename", "t.py", "-")
    assert code == 1 and out == "--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x = foo\n+x = baz\n"


def test_subprocess_python_m_torchlint(project):
    """The real entry point, real stdout bytes: CRLF and BOM come back as they went in."""
    (project / "a.py").write_text("x = foo\n")
    boot = (
        f"import runpy, sys; sys.path.insert(0, {str(TESTS)!r}); import torchlint.rules as r; "
        f"r.RULE_MODULES = ({__name__!r},); runpy.run_module('torchlint', run_name='__main__')"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS.parent), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", boot, "--isolated", "--no-cache", "--fix", "a.py"],
        capture_output=True, env=env, cwd=project,
    )
    assert proc.returncode == 0, proc.stderr
    assert (project / "a.py").read_text() == "x = baz\n"
    source = codecs.BOM_UTF8 + b"x = foo\r\ny = qux\r\n"
    proc = subprocess.run(
        [sys.executable, "-c", boot, "--isolated", "--no-cache", "--fix", "-"],
        input=source, capture_output=True, env=env, cwd=project,
    )
    assert proc.returncode == 1
    assert proc.stdout == codecs.BOM_UTF8 + b"x = baz\r\ny = qux\r\n"
    assert b"TL903" in proc.stderr and b"1 unsafe fix available" in proc.stderr


@pytest.mark.skipif(
    __import__("multiprocessing").get_start_method() != "fork",
    reason="the test rules reach the workers only by fork",
)
def test_many_files_through_the_pool_keep_their_order(project, capsys):
    names = [f"m{i:02d}.py" for i in range(fix_command.MIN_FILES_FOR_POOL + 4)]
    for i, name in enumerate(names):
        (project / name).write_text("x = foo\n" + "# pad\n" * (i * 7 % 5))
    code, out, err = run(capsys, "--diff", "--jobs", "2", *names)
    assert code == 1
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == names
    code, out, err = run(capsys, "--fix", "--jobs", "2", *names)
    assert code == 0 and f"Fixed {2 * len(names)} findings." in err
    assert all((project / n).read_text().startswith("x = baz\n") for n in names)


def test_insertions_at_one_offset_keep_the_rules_order():
    from torchlint.diagnostics import Diagnostic, Edit, Fix, Location

    at = Location(1, 1)
    d = Diagnostic("TL901", "foo-to-bar", "m", "t.py", at, at,
                   Fix(SAFE, "m", (Edit(at, at, "z = 1\n"), Edit(at, at, "a = 2\n"))))
    spans, fixed, broken = fixer.select_fixes([d], "x\n", unsafe=False)
    assert fixer.splice("x\n", spans) == "z = 1\na = 2\nx\n"


def test_fix_whose_own_edits_overlap_is_skipped():
    from torchlint.diagnostics import Diagnostic, Edit, Fix, Location

    a, b, c = Location(1, 1), Location(1, 2), Location(1, 4)
    d = Diagnostic("TL901", "foo-to-bar", "m", "t.py", a, a, Fix(SAFE, "m", (Edit(a, c, "x"), Edit(b, b, "y"))))
    spans, fixed, broken = fixer.select_fixes([d], "abcdef\n", unsafe=False)
    assert (spans, fixed, broken) == ([], [], ["TL901"])
