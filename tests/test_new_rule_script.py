"""scripts/new_rule.py scaffolds a rule that the registry, the fixture tests, the docs checks and
the README table accept at once; run on a copy of the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import sys
sys.path.insert(0, "tests")
from fixture_support import expected_for, fixture_files
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code
import test_readme_rules
for code in ("TL408", "TL801"):
    rule = rules_by_code()[code]
    assert rule.preview and rule.tags, code
    path = next(p for p in fixture_files() if p.stem == code)
    settings, marks = expected_for(path)
    found = [(d.location.row, d.code) for d in lint_source(path.read_text(), str(path), settings)]
    assert found == marks == [(7, code)], (found, marks)
    test_readme_rules.test_row_matches_the_rule(code)
test_readme_rules.test_every_rule_has_exactly_one_row()
print("ok")
"""


def test_scaffold_in_an_existing_and_a_new_family(tmp_path):
    for part in ("torchlint", "tests", "fixtures", "docs", "scripts"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    env_run = dict(cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    script = [sys.executable, "scripts/new_rule.py", "--no-snapshot"]
    made = subprocess.run(script + ["TL408", "lr-scheduler-misuse", "--family", "training"], **env_run)
    assert made.returncode == 0, made.stderr
    made = subprocess.run(script + ["TL801", "hook-leak", "--family", "hooks", "--call", "torch.utils.hooks.leak"], **env_run)
    assert made.returncode == 0, made.stderr
    assert '"torchlint.rules.hooks",' in (tmp_path / "torchlint" / "rules" / "__init__.py").read_text()
    check = subprocess.run([sys.executable, "-c", CHECK], **env_run)
    assert check.returncode == 0 and check.stdout.strip() == "ok", check.stderr
    again = subprocess.run(script + ["TL408", "other-name", "--family", "training"], **env_run)
    assert again.returncode == 2 and again.stderr.startswith("new_rule.py: error: fixtures/TL408.py exists")
    bad = subprocess.run(script + ["TL4x", "n", "--family", "training"], **env_run)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
