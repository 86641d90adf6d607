"""torchlint runs on Python 3.9 to 3.13 (issue 30): no construct newer than 3.9 where it would run.

The whole suite runs on 3.11; ``.ci/fast-profile`` runs the rule fixtures, CLI, notebook and server
tests (this file too) on 3.9, 3.10, 3.12 and 3.13. The checks here run on any of them and catch
what broke 3.9 and 3.10 before the fast profile existed:

- regexes with atomic groups or possessive quantifiers (3.11+): ``re.error: unknown extension ?>``
  on 3.10 at import (they are kept on 3.11+, where they are faster, behind a version check);
- ``ast.Match`` and the other node classes of newer Pythons read directly (``AttributeError`` on
  3.9 wherever that line runs);
- the older Pythons themselves, where this machine has them: every torchlint module imports.
"""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torchlint"
SUPPORTED = ((3, 9), (3, 10), (3, 11), (3, 12), (3, 13))

#: ``ast`` classes newer than 3.9, with the version that brought them.
NEWER_AST = {
    **{name: (3, 10) for name in ("Match", "match_case", "MatchValue", "MatchSingleton", "MatchSequence",
                                  "MatchMapping", "MatchClass", "MatchStar", "MatchAs", "MatchOr")},
    "TryStar": (3, 11),
    **{name: (3, 12) for name in ("TypeAlias", "TypeVar", "ParamSpec", "TypeVarTuple")},
}


def _sources():
    return sorted(PACKAGE.rglob("*.py"))


def test_supported_versions_are_declared():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'requires-python = ">=3.9"' in text
    for major, minor in SUPPORTED:
        assert f"Programming Language :: Python :: {major}.{minor}\"" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Python 3.9 to 3.13" in readme


def test_ci_runs_the_fast_profile_on_the_other_versions():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q" in run and "python -m mypy" in run
    assert ".ci/fast-profile 3.9 3.10 3.12 3.13" in run
    profile = (ROOT / ".ci" / "fast-profile").read_text(encoding="utf-8")
    for name in ("test_fixtures.py", "test_cli.py", "test_notebook.py", "test_server.py", "test_server_notebook.py"):
        assert f"tests/{name}" in profile
    assert ".ci/venvs/" in (ROOT / ".gitignore").read_text(encoding="utf-8")


def test_no_newer_ast_class_read_directly():
    """``ast.Match`` raises AttributeError on 3.9: such classes are read with ``getattr(ast, ...)``."""
    offenders = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ast"
                    and NEWER_AST.get(node.attr, (0, 0)) > (3, 9)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: ast.{node.attr}")
    assert not offenders, "\n".join(offenders)


def test_sources_parse_with_python_3_9_grammar():
    """No syntax newer than 3.9 (``match``, ``except*``, ``type`` statements, PEP 695 generics)."""
    errors = []
    for path in _sources():
        try:
            ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 9))
        except SyntaxError as exc:
            errors.append(f"{path.relative_to(ROOT)}:{exc.lineno}: {exc.msg}")
    assert not errors, "\n".join(errors)


def _older_pythons():
    """Interpreters of 3.9 and 3.10 on this machine (pyenv's, or python3.X on PATH)."""
    found = {}
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for minor in (9, 10):
        candidates = sorted(glob.glob(os.path.join(root, "versions", f"3.{minor}.*", "bin", f"python3.{minor}")))
        for directory in os.environ.get("PATH", "").split(os.pathsep):
            candidates.append(os.path.join(directory, f"python3.{minor}"))
        for candidate in candidates:
            if os.access(candidate, os.X_OK):
                found[f"3.{minor}"] = candidate
                break
    return found


OLDER = _older_pythons()


@pytest.mark.skipif(not OLDER, reason="no Python 3.9 or 3.10 on this machine (.ci/fast-profile needs them)")
@pytest.mark.parametrize("version", sorted(OLDER))
def test_every_module_imports_on_older_python(version):
    """Each module of the checkout imported by a bare 3.9/3.10 interpreter: third-party packages
    it lacks (libcst, rich) are passed over; any other error (a 3.11+ regex compiled at import, a
    3.10+ ``ast`` class read at module level) fails."""
    code = (
        "import importlib, pkgutil, sys, traceback\n"
        "import torchlint\n"
        "bad = []\n"
        "names = ['torchlint'] + [i.name for i in pkgutil.walk_packages(torchlint.__path__, 'torchlint.')]\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if (exc.name or '').split('.')[0] == 'torchlint':\n"
        "            bad.append(name + ': ' + repr(exc))\n"
        "    except Exception as exc:\n"
        "        bad.append(name + ': ' + type(exc).__name__ + ': ' + str(exc))\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([OLDER[version], "-S", "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
