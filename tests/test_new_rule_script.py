"""scripts/new_rule.py scaffolds a rule that the suite's rule-level checks accept at once: the
registry, the fixture and its snapshot, the docs page and its examples, the README table, lazy
libcst imports, and a sound ast question (set, so files that only mention the call's name in a
comment never reach libcst). Run on a copy of the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODES = ("TL408", "TL801", "TL909")

CHECK = """
import ast, sys
sys.path.insert(0, "tests")
from fixture_support import expected_for, fixture_files
from torchlint.astindex import AstIndex
from torchlint.config import Settings
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code
import test_readme_rules
for code, call in (("TL408", "torch.lr_scheduler_misuse"), ("TL801", "torch.utils.hooks.leak"),
                   ("TL909", "torch.old_api")):
    rule = rules_by_code()[code]
    assert rule.preview and rule.tags, code
    path = next(p for p in fixture_files() if p.stem == code)
    text = path.read_text()
    settings, marks = expected_for(path)
    found = [(d.location.row, d.code) for d in lint_source(text, str(path), settings)]
    assert found == marks == [(7, code)], (found, marks)
    unfiltered = [(d.location.row, d.code) for d in lint_source(text, str(path), settings, prefilter=False)]
    assert unfiltered == found, (code, unfiltered)  # the prefilter (tokens, ast question) is sound here
    # the ast question is set and asks for a real call, not the word
    assert rule.ast_candidate is not None, code
    assert rule.ast_candidate(AstIndex(ast.parse(text), text))
    head, last = call.rsplit(".", 1)
    words = "import torch\\n'Never call " + call + "(x) here.'\\n# " + last + "(x)\\n"
    assert not rule.ast_candidate(AstIndex(ast.parse(words), words)), code
    test_readme_rules.test_row_matches_the_rule(code)
test_readme_rules.test_every_rule_has_exactly_one_row()
print("ok")
"""

# Importing the rule modules the scaffold wrote (a new family, an existing one, one that had no
# cst import) never loads libcst (tests/test_lazy_import.py checks every module the same way).
LAZY = """
import importlib, sys
for name in ("torchlint.rules.training", "torchlint.rules.hooks", "torchlint.rules.bare"):
    importlib.import_module(name)
sys.stdout.write("LIBCST=" + str("libcst" in sys.modules))
"""

BARE = '''"""TL9xx: a family module written by hand, without the lazy cst import."""

from __future__ import annotations

from torchlint.rules.base import Rule

RULES = []
'''


def test_scaffold_in_an_existing_and_a_new_family(tmp_path):
    for part in ("torchlint", "tests", "fixtures", "docs", "scripts"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "torchlint" / "rules" / "bare.py").write_text(BARE)
    init = tmp_path / "torchlint" / "rules" / "__init__.py"
    init.write_text(init.read_text().replace('RULE_MODULES = (\n', 'RULE_MODULES = (\n    "torchlint.rules.bare",\n', 1))
    env_run = dict(cwd=tmp_path, capture_output=True, text=True,
                   env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    script = [sys.executable, "scripts/new_rule.py", "--no-snapshot"]
    made = subprocess.run(script + ["TL408", "lr-scheduler-misuse", "--family", "training"], **env_run)
    assert made.returncode == 0, made.stderr
    made = subprocess.run(script + ["TL801", "hook-leak", "--family", "hooks", "--call", "torch.utils.hooks.leak"], **env_run)
    assert made.returncode == 0, made.stderr
    made = subprocess.run(script + ["TL909", "old-api", "--family", "bare"], **env_run)
    assert made.returncode == 0, made.stderr
    assert '"torchlint.rules.hooks",' in init.read_text()
    for family in ("hooks", "bare", "training"):
        module = (tmp_path / "torchlint" / "rules" / f"{family}.py").read_text()
        assert "import libcst" not in module and "\nfrom torchlint import _cst as cst\n" in module, family
        # where it can fire is declared (the calls it subscribes to), not hand-written
        assert "    calls = frozenset({" in module, family
        if family != "training":  # the new rule is the module's only one
            assert "ast_candidate" not in module and "requires" not in module, family
    check = subprocess.run([sys.executable, "-c", CHECK], **env_run)
    assert check.returncode == 0 and check.stdout.strip() == "ok", check.stderr
    lazy = subprocess.run([sys.executable, "-c", LAZY], **env_run)
    assert lazy.returncode == 0 and lazy.stdout == "LIBCST=False", (lazy.stdout, lazy.stderr)
    # the suite's own rule-level checks, on the copy: snapshots written as the script's last step
    # would, then the fixture, docs, README, metadata and partial-parse tests of the new rules
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    keys = " or ".join(CODES)
    snap = subprocess.run(pytest + ["tests/test_fixtures.py", "--update-snapshots", "-k", keys], **env_run)
    assert snap.returncode == 0, snap.stdout[-2000:]
    suite = subprocess.run(pytest + [
        "tests/test_fixtures.py", "tests/test_docs_examples.py", "tests/test_rule_pages.py",
        "tests/test_partial.py", "tests/test_messages.py", "-k", keys], **env_run)
    assert suite.returncode == 0, suite.stdout[-3000:]
    assert " passed" in suite.stdout and " failed" not in suite.stdout
    whole = subprocess.run(pytest + ["tests/test_readme_rules.py", "tests/test_rule_metadata.py"], **env_run)
    assert whole.returncode == 0, whole.stdout[-3000:]
    again = subprocess.run(script + ["TL408", "other-name", "--family", "training"], **env_run)
    assert again.returncode == 2 and again.stderr.startswith("new_rule.py: error: fixtures/TL408.py exists")
    bad = subprocess.run(script + ["TL4x", "n", "--family", "training"], **env_run)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
