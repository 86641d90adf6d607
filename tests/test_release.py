"""The release in one command (``scripts/release.py``, issue 30) and the installs the docs show.

``test_release_script_builds_checks_and_runs_the_wheel`` runs the script's whole check path
(build, ``twine check``, the wheel in a clean venv on the fixtures): 30-60 s on this project's
2-core machine, most of it pip installing the wheel's dependencies into the new venv.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "release.py"


def _release_module():
    spec = importlib.util.spec_from_file_location("release_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_version_has_one_place():
    """pyproject.toml reads the version from torchlint/__init__.py; nothing else spells it."""
    import torchlint

    release = _release_module()
    assert release.read_version() == torchlint.__version__
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "torchlint.__version__" }' in pyproject
    assert not re.search(r"(?m)^version\s*=\s*\"", pyproject)


def test_release_extra_has_build_and_twine():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    release = re.search(r"(?ms)^release = \[(.*?)\]", pyproject)
    assert release and '"build' in release.group(1) and '"twine' in release.group(1)


def test_outdir_that_is_a_file_is_a_one_line_error(tmp_path):
    target = tmp_path / "dist"
    target.write_text("not a folder")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--outdir", str(target)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"release: error: --outdir {target} is not a folder"]
    assert target.read_text() == "not a folder"


def test_upload_is_never_built_without_isolation(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--outdir", str(tmp_path / "d"), "--upload",
                           "--no-isolation"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "leave out --no-isolation" in proc.stderr
    assert not (tmp_path / "d").exists()


def test_release_script_builds_checks_and_runs_the_wheel(tmp_path):
    outdir = tmp_path / "dist"
    outdir.mkdir()
    (outdir / "torchlint-0.0.1-py3-none-any.whl").write_text("an old build: emptied first")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--outdir", str(outdir), "--no-isolation"],
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    version = _release_module().read_version()
    assert sorted(p.name for p in outdir.iterdir()) == [f"torchlint-{version}-py3-none-any.whl",
                                                        f"torchlint-{version}.tar.gz"]
    match = re.search(r"the installed wheel found (\d+) findings in fixtures/ \(exit 1", proc.stdout)
    assert match and int(match.group(1)) > 0
    assert "twine check: exit 0" in proc.stdout and "to publish: python -m twine upload" in proc.stdout


# -- the installs the docs show ---------------------------------------------------------------

#: Installs that need a published release (PyPI, a tag on GitHub); none is published yet, so the
#: docs show what works from a checkout instead (a wheel built here, a ``repo: local`` hook, the
#: action from a path or a commit). Remove a pattern when its release exists.
UNPUBLISHED = [
    # ``pip install "torchlint[watch]"`` is left alone: with torchlint installed (from the wheel)
    # pip takes the installed one and adds the extra's packages.
    (re.compile(r"pip install\s+(?:-U\s+|--upgrade\s+)?[\"']?torchlint(?:[=<>~!]=?[\d.]+)?[\"']?(?=\s|$|`)(?!\s*@)"),
     "pip install torchlint (not on PyPI yet)"),
    (re.compile(r"pipx install\s+torchlint\b"), "pipx install torchlint (not on PyPI yet)"),
    (re.compile(r"torchlint/torchlint@v\d"), "uses: torchlint/torchlint@vX (no release tag yet)"),
    (re.compile(r"rev:\s*v0\.1\.0"), "rev: v0.1.0 (no release tag yet)"),
    (re.compile(r"repo:\s*https://github\.com/torchlint/torchlint"), "pre-commit from the unpublished repository"),
    (re.compile(r"additional_dependencies:\s*\[\s*[\"']?torchlint\b(?![^\]]*@)"), "additional_dependencies: [torchlint] (not on PyPI yet)"),
]


def _doc_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_docs_show_no_install_that_does_not_exist():
    offenders = []
    for path in _doc_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for pattern, why in UNPUBLISHED:
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {why}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_patterns_catch_what_the_docs_used_to_say():
    old = [
        "pip install torchlint",
        '      - run: pip install torchlint',
        "pip install -U torchlint==0.1.0",
        "pip uninstall torchfix && pip install torchlint",
        "      - uses: torchlint/torchlint@v0.1.0",
        "    rev: v0.1.0",
        "  - repo: https://github.com/torchlint/torchlint",
        "`additional_dependencies: [torchlint]` and change",
    ]
    for line in old:
        assert any(pattern.search(line) for pattern, _ in UNPUBLISHED), line
    works = ["pip install dist/torchlint-0.1.0-py3-none-any.whl", 'pip install -e ".[lsp]"',
             'pip install "dist/torchlint-0.1.0-py3-none-any.whl[lsp]"', "pip install --no-deps torchfix==0.7.0",
             'pip install "torchlint @ git+https://github.com/OWNER/torchlint@COMMIT"',
             '(`pip install "torchlint[watch]"`) once torchlint is installed',
             '(`additional_dependencies: ["torchlint @ file:///A/torchlint-0.1.0-py3-none-any.whl"]`']
    for line in works:
        assert not any(pattern.search(line) for pattern, _ in UNPUBLISHED), line
