#!/usr/bin/env python
"""Scaffold a new rule: its class, fixture, docs page, test and README row, from a template.

    python scripts/new_rule.py TL408 unused-scheduler --family training [--call torch.foo.bar]

- the class goes into ``torchlint/rules/<family>.py`` (created, and registered in
  ``RULE_MODULES``, when the family is new) and into that module's ``RULES``;
- ``fixtures/<CODE>.py`` with one flagged call (``# <CODE>`` marker) and one silent look-alike;
- ``docs/rules/<CODE>.md`` with the sections every page has;
- a test in ``tests/rules/test_<family>.py``; a README table row;
- then the fixture's snapshot (``pytest tests/test_fixtures.py --update-snapshots -k <CODE>``).

The rule starts as ``preview = True`` and flags calls resolving to ``--call`` (default
``torch.<name with underscores>``), declared as the call it subscribes to (``calls``: the engine
derives its text prefilter and its ast question from it), and libcst imported lazily (``from
torchlint import _cst as cst``): replace the logic, the calls, the fixture tour and the page's
prose.
Nothing is overwritten: an existing code, name, fixture or page is an error.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent

CLASS = '''

class {cls}(Rule):
    """Flags calls to ``{call}``. TODO: what it flags, what stays silent and why."""

    code = "{code}"
    name = "{name}"
    summary = "`{call}()` is called. TODO: one line, what the rule flags."
    message = "TODO: a short message (under 100 characters) saying what to do instead."
    hint = "TODO: why it matters, a sentence or two (the full format and `torchlint rule` show it)."
    # Where it can fire: the calls it subscribes to. The engine derives the text prefilter (the
    # names' last parts) and the ast question (a real call, not the word in a comment or a
    # docstring) from them (rules/base.py).
    calls = frozenset({{"{call}"}})
    preview = True
    tags = ("performance",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.resolve_call(node) == "{call}":
            self.report(node)
'''

MODULE = '''"""{code_family}xx: TODO: what this family of rules is about."""

from __future__ import annotations

from torchlint import _cst as cst

from torchlint.rules.base import Rule

RULES = []
'''

FIXTURE = '''# fixture: preview = true
"""{code} {name}: the forms it flags, then look-alikes it leaves alone (each says why)."""
import torch


def train_step(x):
    torch.{attr}(x)  # {code}: TODO say why this is flagged
    {last}(x)  # silent: a look-alike, not `{call}` (TODO: real look-alikes)
'''

DOCS = '''# {code} {name}

**Family:** TODO (`torchlint/rules/{family}.py`) · **Fix:** none · **Preview**

## What it does
Flags calls to `{call}`. TODO.

## Why is this bad?
TODO.

## Example
```python
import torch

torch.{attr}(x)
```

## Use instead
```python
import torch

x
```

## Known limits
TODO.

## Fix safety
No fix. TODO.

## References
- TODO
'''

TEST = '''

def test_{func}_flags_the_call_and_not_a_look_alike():
    code = """\\
    import torch
    torch.{attr}(x)
    {last}(x)
    """
    text = textwrap.dedent(code)
    plain = settings_from_table({{"select": ["{code}"]}}, "t.toml", Settings())
    assert lint_source(text, "train.py", plain) == []  # a preview rule runs only with --preview
    settings = settings_from_table({{"select": ["{code}"], "preview": True}}, "t.toml", Settings())
    assert [(d.code, d.location.row) for d in lint_source(text, "train.py", settings)] == [("{code}", 2)]
'''

TEST_HEAD = '''"""Tests for the {family} rules."""

from __future__ import annotations

import textwrap

from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source
'''


def fail(message: str) -> NoReturn:
    print(f"new_rule.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("code", help="the new code, e.g. TL408")
    parser.add_argument("name", help="the kebab-case name, e.g. unused-scheduler")
    parser.add_argument("--family", required=True, help="module under torchlint/rules/ (new or existing)")
    parser.add_argument("--call", help="qualified name the template flags (default torch.<name>)")
    parser.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    parser.add_argument("--no-snapshot", action="store_true", help="do not write the fixture's snapshot")
    args = parser.parse_args(argv)
    root = Path(args.root)
    code, name, family = args.code, args.name, args.family
    if not re.fullmatch(r"TL[1-9]\d\d", code):
        fail(f"{code!r} is not a rule code like TL408")
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        fail(f"{name!r} is not a kebab-case name like unused-scheduler")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", family):
        fail(f"{family!r} is not a module name like training")
    attr = name.replace("-", "_")
    call = args.call or f"torch.{attr}"
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", call):
        fail(f"{call!r} is not a qualified name like torch.foo.bar")
    if args.call:
        attr = call.split(".", 1)[1] if call.startswith("torch.") else call.rsplit(".", 1)[1]
    last = call.rsplit(".", 1)[1]
    cls = "".join(part.capitalize() for part in name.split("-"))
    fmt = dict(code=code, name=name, family=family, call=call, attr=attr, last=last, cls=cls,
               func=attr.replace(".", "_"), code_family=code[:3])

    module = root / "torchlint" / "rules" / f"{family}.py"
    fixture = root / "fixtures" / f"{code}.py"
    page = root / "docs" / "rules" / f"{code}.md"
    test = root / "tests" / "rules" / f"test_{family}.py"
    readme = root / "README.md"
    for path in (fixture, page):
        if path.exists():
            fail(f"{path.relative_to(root)} exists already")
    rules_dir = root / "torchlint" / "rules"
    for existing in rules_dir.glob("*.py"):
        text = existing.read_text(encoding="utf-8")
        if re.search(rf'code = "{code}"', text) or re.search(rf'name = "{re.escape(name)}"', text):
            fail(f"{code} or {name} is taken in {existing.relative_to(root)}")
        if re.search(rf"^class {cls}\b", text, re.M) and existing == module:
            fail(f"class {cls} exists in {existing.relative_to(root)}")

    # The class, appended to the family's RULES.
    if not module.exists():
        module.write_text(MODULE.format(**fmt), encoding="utf-8")
        init = rules_dir / "__init__.py"
        text = init.read_text(encoding="utf-8")
        match = re.search(r"RULE_MODULES = \((.*?)\n\)", text, re.S)
        if not match:
            fail("RULE_MODULES not found in torchlint/rules/__init__.py")
        text = text[: match.end(1)] + f'\n    "torchlint.rules.{family}",' + text[match.end(1):]
        init.write_text(text, encoding="utf-8")
    text = module.read_text(encoding="utf-8")
    match = re.search(r"^RULES = \[(.*?)\]", text, re.M | re.S)
    if not match:
        fail(f"no RULES = [...] in {module.relative_to(root)}")
    if not re.search(r"^from torchlint import _cst as cst$", text, re.M):  # moves RULES: search again
        # libcst is imported lazily through torchlint/_cst.py (tests/test_lazy_import.py): a plain
        # `import libcst` would load it with the module, in runs that never parse with libcst
        if not re.search(r"^from torchlint\.rules\.base import ", text, re.M):
            fail(f"no `from torchlint.rules.base import ...` in {module.relative_to(root)}")
        text = re.sub(r"^(from torchlint\.rules\.base import )", "from torchlint import _cst as cst\n\n\\1", text, count=1, flags=re.M)
        match = re.search(r"^RULES = \[(.*?)\]", text, re.M | re.S)
        assert match is not None  # found above, only moved
    listed = [n.strip() for n in match.group(1).split(",") if n.strip()]
    head = text[: match.start()].rstrip("\n") + "\n"
    text = head + CLASS.format(**fmt) + f"\n\nRULES = [{', '.join(listed + [cls])}]" + text[match.end():]
    module.write_text(text, encoding="utf-8")

    fixture.write_text(FIXTURE.format(**fmt), encoding="utf-8")
    page.write_text(DOCS.format(**fmt), encoding="utf-8")
    if not test.exists():
        test.write_text(TEST_HEAD.format(**fmt), encoding="utf-8")
    body = test.read_text(encoding="utf-8")
    for line in ("import textwrap",
                 "from torchlint.config import Settings, settings_from_table",
                 "from torchlint.engine import lint_source"):
        if line not in body:
            body = body.replace("from __future__ import annotations\n", f"from __future__ import annotations\n\n{line}\n", 1)
    test.write_text(body.rstrip("\n") + "\n" + TEST.format(**fmt), encoding="utf-8")

    # The README row, in code order among the rule rows (engine codes TL00x stay last).
    lines = readme.read_text(encoding="utf-8").split("\n")
    row = f"| [{code}](docs/rules/{code}.md) | {name} | (preview) TODO: what it flags | none |"
    rows = [i for i, l in enumerate(lines) if re.match(r"\| \[TL[1-9]\d\d\]", l)]
    if not rows:
        fail("README.md has no rule table")
    after = [i for i in rows if lines[i][3:8] < code]
    lines.insert((after[-1] if after else rows[0] - 1) + 1, row)
    readme.write_text("\n".join(lines), encoding="utf-8")

    made = [module, fixture, page, test, readme]
    print("\n".join(f"  wrote {p.relative_to(root)}" for p in made))
    if not args.no_snapshot:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/test_fixtures.py", "--update-snapshots",
                        "-k", code, "-p", "no:cacheprovider"], cwd=root, check=False, stdout=subprocess.DEVNULL)
        print(f"  wrote fixtures/snapshots/{code}.snap")
    print(f"next: write the rule's logic, the fixture's tour and the page's prose; then\n"
          f"  python -m pytest -q tests/test_fixtures.py --update-snapshots -k {code}  # review the snapshot\n"
          f"  python -m pytest -q tests/rules/test_{family}.py tests/test_fixtures.py tests/test_readme_rules.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
