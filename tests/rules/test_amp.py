"""TL404 legacy-amp-api: exact findings, exact fixed text, the version gate."""

from __future__ import annotations

import textwrap
from functools import partial

import rule_support
from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source

findings = partial(rule_support.findings, rule="TL404")
fixed = partial(rule_support.fixed, rule="TL404", applicability="safe")


def test_context_manager_fixed_with_device_first():
    code = """\
    import torch
    with torch.cuda.amp.autocast(enabled=False):
        pass
    """
    assert findings(code) == [("TL404", 2, 6)]
    assert fixed(code) == 'import torch\nwith torch.amp.autocast("cuda", enabled=False):\n    pass\n'


def test_positional_autocast_arguments_become_keywords():
    code = """\
    import torch
    from torch.cpu.amp import autocast
    ctx = autocast(True, torch.bfloat16, False)
    """
    assert fixed(code).splitlines()[-1] == (
        'ctx = torch.amp.autocast("cpu", enabled=True, dtype=torch.bfloat16, cache_enabled=False)'
    )


def test_gradscaler_imported_by_name_gets_an_import_of_torch():
    code = """\
    from torch.cuda.amp import GradScaler
    scaler = GradScaler(1024.0, growth_interval=10)
    """
    out = fixed(code)
    assert "import torch\n" in out
    assert out.splitlines()[-1] == 'scaler = torch.amp.GradScaler("cuda", 1024.0, growth_interval=10)'


def test_no_fix_for_star_args_or_changed_autocast_defaults():
    star = rule_support.lint("import torch\ntorch.cuda.amp.autocast(*a)\n", rule="TL404")
    assert len(star) == 1 and star[0].fix is None
    defaults = rule_support.lint(
        "import torch\ntorch.set_autocast_dtype('cuda', torch.bfloat16)\nwith torch.cuda.amp.autocast():\n    pass\n",
        rule="TL404",
    )
    assert len(defaults) == 1 and defaults[0].fix is None


def test_silent_before_torch_2_4_and_on_the_new_spelling():
    code = "import torch\nwith torch.cuda.amp.autocast():\n    pass\n"
    settings = settings_from_table({"select": ["TL404"], "target-torch-version": "2.3"}, "t.toml", Settings())
    assert lint_source(code, "train.py", settings) == []
    assert findings("import torch\nwith torch.amp.autocast('cuda'):\n    pass\n") == []
    assert findings("import torch\nwith torch.autocast('cuda'):\n    pass\n") == []


def test_silent_in_version_branches():
    code = """\
    import torch
    if TORCH_1_13:
        ctx = torch.amp.autocast("cuda")
    else:
        ctx = torch.cuda.amp.autocast()
    try:
        scaler = torch.amp.GradScaler("cuda")
    except AttributeError:
        scaler = torch.cuda.amp.GradScaler()
    """
    assert findings(code) == []
