"""TL901-TL907 (torchlint/rules/compat.py): version awareness, compatibility code, fixes, and the
TorchFix migration (noqa and ignore codes)."""

from __future__ import annotations

import textwrap

import pytest

from rule_support import findings, fixed, lint
from torchlint.config import Settings, expand_codes, settings_from_table
from torchlint.deprecations import DEPRECATIONS, TORCHFIX_CODES, TORCHVISION_WEIGHTS, is_pure_rename
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code


def at(source: str, rule: str, version: str = "2.13", preview: bool = False, path: str = "train.py"):
    table = {"select": [rule], "target-torch-version": version, "preview": preview}
    settings = settings_from_table(table, "t.toml", Settings())
    return [(d.code, d.location.row, d.location.column) for d in lint_source(textwrap.dedent(source), path, settings)]


# -- TL901 -------------------------------------------------------------------------------------
LOAD = "import torch\nstate = torch.load(path)\n"


@pytest.mark.parametrize("version, expected", [("2.4", [("TL901", 2, 9)]), ("2.5", [("TL901", 2, 9)]), ("2.6", []), ("2.13", [])])
def test_tl901_omitted_weights_only_depends_on_the_target(version, expected):
    assert at(LOAD, "TL901", version) == expected


def test_tl901_explicit_false_at_any_version_and_no_fix():
    source = "import torch\nstate = torch.load(path, weights_only=False)\n"
    assert at(source, "TL901", "2.13") == at(source, "TL901", "2.4") == [("TL901", 2, 9)]
    assert lint(source, rule="TL901")[0].fix is None


def test_tl901_not_before_weights_only_existed():
    assert at(LOAD, "TL901", "1.12") == []


def test_tl901_fix_never_duplicates_a_keyword():
    source = "import torch\nstate = torch.load(path, map_location='cpu')\n"
    settings = settings_from_table({"select": ["TL901"], "target-torch-version": "2.4"}, "t.toml", Settings())
    (d,) = lint_source(source, "train.py", settings)
    assert d.fix.applicability == "unsafe" and [e.content for e in d.fix.edits] == ["torch.load(path, map_location='cpu', weights_only=True)"]
    for silent in ("torch.load(path, **kw)", "torch.load(path, weights_only=flag)", "torch.load(path, weights_only=True)"):
        assert at(f"import torch\nx = {silent}\n", "TL901", "2.4") == [], silent
    (d,) = lint_source("import torch\nx = torch.load(path, *args)\n", "train.py", settings)
    assert d.fix is None  # *args may pass pickle_module, which refuses weights_only=True


def test_tl901_silent_in_tests():
    assert at(LOAD, "TL901", "2.4", path="tests/test_io.py") == []


# -- compatibility code (all TL9 rules) -----------------------------------------------------------
@pytest.mark.parametrize("guard", [
    "if torch.__version__ >= '2.0':\n    pass\nelse:\n    {call}\n",
    "if version.parse(torch.__version__) < version.parse('2.0'):\n    {call}\n",
    "if is_torch_greater_or_equal_than_2_0:\n    pass\nelse:\n    {call}\n",
    "if not hasattr(torch, 'func'):\n    {call}\n",
    "try:\n    {call}\nexcept ImportError:\n    pass\n",
    "try:\n    pass\nexcept (ModuleNotFoundError, AttributeError):\n    {call}\n",
    "x = {call} if _TORCH_GE_2_0 else None\n",
])
def test_compatibility_code_is_silent(guard):
    call = "torch.qr(a)"
    source = "import torch\nfrom packaging import version\n" + guard.format(call=call)
    assert at(source, "TL904") == []
    assert at(f"import torch\n{call}\n", "TL904") == [("TL904", 2, 1)]


def test_other_handlers_and_conditions_are_not_compatibility_code():
    source = "import torch\ntry:\n    torch.qr(a)\nexcept ValueError:\n    torch.qr(b)\nif debug:\n    torch.qr(c)\n"
    assert at(source, "TL904") == [("TL904", 3, 5), ("TL904", 5, 5), ("TL904", 7, 5)]


def test_names_imported_in_compatibility_code_stay_silent():
    source = """\
        import torch
        try:
            from torch.func import vmap
        except ImportError:
            from functorch import vmap
        from functorch import jacrev
        vmap(f)(x)
        jacrev(f)(x)
    """
    assert at(source, "TL904") == [("TL904", 8, 1)]


# -- TL903 -------------------------------------------------------------------------------------
def test_tl903_fix_and_version():
    source = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"
    assert fixed(source, rule="TL903") == "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, use_reentrant=False)\n"
    assert at(source, "TL903", "1.13") == []


# -- TL904 -------------------------------------------------------------------------------------
def test_tl904_is_version_aware():
    source = "import torch\nf = torch.cuda.amp.custom_fwd(g)\n"
    assert at(source, "TL904", "2.3") == []
    assert at(source, "TL904", "2.4") == [("TL904", 2, 5)]


def test_tl904_message_says_removed_and_how():
    (d,) = lint("import torch\nx = torch.solve(b, a)\n", rule="TL904")
    assert "removed in torch 1.13" in d.message and "torch.linalg.solve" in d.message and d.fix is None


@pytest.mark.parametrize("before, after", [
    ("import torch\ny = torch.ger(a, b)\n", "import torch\ny = torch.outer(a, b)\n"),
    ("import torch.nn.functional as F\ny = F.upsample(x, scale_factor=2)\n", "import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)\n"),
    ("import torch.nn.functional as F\ny = F.sigmoid(x)\n", "import torch\nimport torch.nn.functional as F\ny = torch.sigmoid(x)\n"),
    ("from functorch import vmap\ny = vmap(f)(x)\n", "import torch\nfrom functorch import vmap\ny = torch.func.vmap(f)(x)\n"),
    ("import torch as th\nq = th.qr(a)\n", "import torch as th\nq = th.linalg.qr(a)\n"),
])
def test_tl904_pure_renames_are_fixed(before, after):
    assert fixed(before, rule="TL904", applicability="safe") == after


@pytest.mark.parametrize("call", ["torch.qr(a, False)", "torch.qr(a, some=False)", "torch.cholesky(a, upper=True)", "torch.ger(*xs)", "torch.range(0, 3)"])
def test_tl904_no_fix_unless_pure(call):
    (d,) = lint(f"import torch\ny = {call}\n", rule="TL904")
    assert d.fix is None


def test_tl904_table_rename_purity():
    qr = DEPRECATIONS["torch.qr"]
    assert is_pure_rename(qr, 1, frozenset(), (2, 0)) and not is_pure_rename(qr, 2, frozenset(), (2, 0))
    assert not is_pure_rename(DEPRECATIONS["functorch.vmap"], 1, frozenset(), (1, 13))  # torch.func from 2.0
    assert all(e.replacement_since <= (2, 13) for e in DEPRECATIONS.values())


# -- TL905 -------------------------------------------------------------------------------------
def test_tl905_inserts_the_call_when_missing():
    source = 'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        """Doc."""\n        self.fc = nn.Linear(2, 2)\n'
    assert fixed(source, rule="TL905", applicability="safe") == (
        'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        """Doc."""\n'
        "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
    )


def test_tl905_no_fix_when_the_call_takes_arguments_or_bases_are_mixed():
    late = "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, c):\n        self.fc = nn.Linear(2, 2)\n        super().__init__(c)\n"
    mixed = "import torch.nn as nn\nclass M(Mixin, nn.Module):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n"
    assert [d.fix for d in lint(late, rule="TL905")] == [None]
    assert [d.fix for d in lint(mixed, rule="TL905")] == [None]


def test_tl905_nested_function_assignments_do_not_count():
    source = "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        def make():\n            self.fc = nn.Linear(2, 2)\n        super().__init__()\n        make()\n"
    assert findings(source, rule="TL905") == []


# -- TL906 / TL907 -----------------------------------------------------------------------------
def test_tl906_fix_detaches_as_variable_did():
    assert fixed("from torch.autograd import Variable\ny = Variable(a + b)\n", rule="TL906", applicability="safe") == (
        "from torch.autograd import Variable\ny = (a + b).detach()\n"
    )
    assert [d.fix for d in lint("from torch.autograd import Variable\ny = Variable(x, requires_grad=flag)\n", rule="TL906")] == [None]


def test_tl907_uses_the_weights_pretrained_loaded_and_imports_torchvision():
    source = "from torchvision.models import resnet50\nm = resnet50(pretrained=True)\n"
    assert fixed(source, rule="TL907", applicability="safe") == (
        "import torchvision\nfrom torchvision.models import resnet50\nm = resnet50(weights=torchvision.models.ResNet50_Weights.IMAGENET1K_V1)\n"
    )
    assert at(source, "TL907", "1.11") == []


def test_tl907_table_names_follow_torchvision():
    for builder, (enum, member, backbone) in TORCHVISION_WEIGHTS.items():
        assert enum.endswith("_Weights") and member == member.upper() and member.replace("_", "").isalnum(), builder
        assert backbone is None or backbone.endswith("_Weights")


# -- TL902 -------------------------------------------------------------------------------------
def test_tl902_is_preview_only():
    source = "import torch\nfrom models import Net\ndef f(p, x):\n    m = Net()\n    m.load_state_dict(torch.load(p))\n    return m(x)\n"
    assert at(source, "TL902") == []
    assert at(source, "TL902", preview=True) == [("TL902", 5, 5)]
    assert rules_by_code()["TL902"].preview


# -- migration ---------------------------------------------------------------------------------
def test_torchfix_noqa_suppresses_the_counterpart():
    source = "import torch\na = torch.load(p)  # noqa: TOR102\nb = torch.load(p)  # noqa: TOR101\nc = torch.load(p)\n"
    assert at(source, "TL901", "2.4") == [("TL901", 3, 5), ("TL901", 4, 5)]


def test_torchfix_codes_in_ignore_map_with_a_note(capsys):
    assert expand_codes(["TOR003"], "ignore") == {"TL903"}
    assert expand_codes(["tor201"], "ignore") == {"TL907"}
    assert "TOR003 is deprecated; use TL903" in capsys.readouterr().err
    assert "TL903" not in settings_from_table({"ignore": ["TOR003"]}, "t.toml", Settings()).enabled_codes


def test_every_torchfix_counterpart_is_a_rule():
    assert set(TORCHFIX_CODES.values()) <= set(rules_by_code())


def test_findings_are_deterministic():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "fixtures" / "TL904.py").read_text()
    runs = {tuple((d.code, d.location, d.message) for d in lint(text, rule="TL904")) for _ in range(3)}
    assert len(runs) == 1


def test_compat_imports_are_found_in_the_scopes_that_see_them():
    """``compat_imported_names`` comes from the whole-file model (``model.py``): imports under
    ``try``/``except ImportError``, version tests and ``elif`` branches, in functions and classes,
    each visible in its own scope and the scopes it encloses (a function-local import does not
    reach another function: TL907's ``models`` in the issue "One model, sound by construction")."""
    import ast

    from torchlint.model import FileModel
    from torchlint.rules import compat

    source = textwrap.dedent('''\
        import torch
        try:
            from functorch import vmap
        except ImportError:
            from torch.func import vmap as fvmap
        if torch.__version__ >= "2.0":
            x = 1
        elif hasattr(torch, "func"):
            from functorch import grad
        class Model:
            def f(self):
                if sys.version_info >= (3, 8):
                    from functorch import jacrev
                if flag:
                    from functorch import hessian
                return [vmap(g) for g in range(3)]
        def other():
            return jacrev
    ''')
    model = FileModel(ast.parse(source), source)
    method = (("c", "Model"), ("d", "f"))
    assert model.compat_names(method, compat._is_old_api) == {"vmap", "grad", "jacrev"}
    assert model.compat_names((), compat._is_old_api) == {"vmap", "grad"}
    assert model.compat_names((("d", "other"),), compat._is_old_api) == {"vmap", "grad"}
    assert model.compat_names((("c", "Model"),), compat._is_old_api) == {"vmap", "grad"}
    assert model.compat_names(method, lambda target: target.startswith("torch.func")) == {"fvmap"}
