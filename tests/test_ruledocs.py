"""``torchlint rule``: pages rendered from docs/rules, codes or names, errors, JSON; and the pages
shipping inside a built wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchlint import ruledocs
from torchlint.cli import main
from torchlint.rules import known_codes

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "rules").glob("TL*.md"))


def run(capsys, *args):
    code = main(["rule", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_rule_by_code_renders_the_page(capsys):
    code, out, err = run(capsys, "TL701")
    assert code == 0 and err == ""
    assert "TL701 data-parallel" in out.splitlines()[0]
    assert "Why is this bad?" in out and "DistributedDataParallel" in out
    assert "## " not in out  # rendered, not raw markdown
    assert "\x1b[" not in out and not any(line != line.rstrip() for line in out.splitlines())


@pytest.mark.parametrize("spelling", ["data-parallel", "tl701", " TL701 "])
def test_rule_by_name_or_lowercase_code(capsys, spelling):
    assert run(capsys, spelling)[:2] == run(capsys, "TL701")[:2]


@pytest.mark.parametrize("args", [["TL999"], ["no-such-rule"]])
def test_unknown_rule_is_one_line_and_exit_2(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"unknown rule '{args[0]}'" in err


@pytest.mark.parametrize("args", [[], ["TL701", "--all"], ["--output-format", "yaml", "TL701"]])
def test_usage_errors_exit_2(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.startswith("torchlint: error:")


def test_rule_json(capsys):
    code, out, _ = run(capsys, "TL701", "--output-format", "json")
    data = json.loads(out)
    assert code == 0
    assert data["code"] == "TL701" and data["name"] == "data-parallel" and data["fix"] is None
    assert data["explanation"] == (ROOT / "docs" / "rules" / "TL701.md").read_text(encoding="utf-8")
    assert data["url"].endswith("/docs/rules/TL701.md")


def test_rule_all(capsys):
    code, out, _ = run(capsys, "--all", "--output-format", "json")
    assert code == 0
    assert [item["code"] for item in json.loads(out)] == list(known_codes())
    code, out, _ = run(capsys, "--all")
    assert code == 0 and "TL001 syntax-error" in out and "TL701 data-parallel" in out


def test_engine_code_page(capsys):
    code, out, _ = run(capsys, "syntax-error")
    assert code == 0 and "TL001 syntax-error" in out


def test_checkout_reads_docs_rules_in_place():
    assert ruledocs.load_doc("TL701") == (ROOT / "docs" / "rules" / "TL701.md").read_text(encoding="utf-8")
    assert ruledocs.load_doc("../README") is None


def test_rule_without_a_page_gets_one_from_its_class(monkeypatch):
    monkeypatch.setattr(ruledocs, "load_doc", lambda code: None)
    info = ruledocs.RuleInfo("TL701")
    assert info.explanation.startswith("# TL701 data-parallel\n\n## What it does\n")
    assert info.description == ruledocs.plain_text(info.summary)


def test_sections_ignore_headings_inside_code_fences():
    text = "# T\n\n## Example\n```python\n## not a heading\nx = 1\n```\n\n## Use instead\ny\n"
    assert ruledocs.sections(text) == {"Example": "```python\n## not a heading\nx = 1\n```", "Use instead": "y"}
    assert ruledocs.code_blocks(ruledocs.sections(text)["Example"]) == ["## not a heading\nx = 1\n"]


# -- packaging -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory):
    """A wheel built from a copy of the checkout (so no build/ folder lands in it)."""
    if shutil.which("git") is None:  # pragma: no cover
        pytest.skip("git is needed to list the checkout's files")
    src = tmp_path_factory.mktemp("src")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = out.glob("torchlint-*.whl")
    return wheel


def test_wheel_ships_every_rule_page(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    assert PAGES
    for page in PAGES:
        assert f"torchlint/_docs/{page.name}" in names
    assert "torchlint/ruledocs.py" in names


def test_installed_wheel_renders_rule_pages(built_wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), str(built_wheel)],
        check=True, capture_output=True, timeout=300,
    )
    script = (
        "import sys, torchlint, torchlint.ruledocs as r; from torchlint.cli import main\n"
        "print(torchlint.__file__); print(r.docs_dir()); sys.exit(main(['rule', 'TL701']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    module_file, docs, *page = done.stdout.splitlines()
    assert module_file.startswith(str(target))
    assert docs == str(target / "torchlint" / "_docs")
    assert "TL701 data-parallel" in page[0]
