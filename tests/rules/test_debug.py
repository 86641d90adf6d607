"""TL601 anomaly-detection: exact findings and exact fixed text (comments kept, no empty blocks)."""

from __future__ import annotations

import textwrap
from functools import partial

import pytest

import rule_support


lint = partial(rule_support.lint, rule="TL601")
findings = partial(rule_support.findings, rule="TL601")
fixed = partial(rule_support.fixed, rule="TL601")


def test_set_detect_anomaly_true_removed():
    code = """\
    import torch
    torch.autograd.set_detect_anomaly(True)  # find the NaN
    model.train()
    """
    assert findings(code) == [("TL601", 2, 1)]
    assert fixed(code) == "import torch\n# find the NaN\nmodel.train()\n"


def test_set_detect_anomaly_only_statement_becomes_pass():
    code = """\
    from torch.autograd import set_detect_anomaly
    def setup():
        set_detect_anomaly(mode=True)
    """
    assert fixed(code) == "from torch.autograd import set_detect_anomaly\ndef setup():\n    pass\n"


def test_with_detect_anomaly_unwrapped_keeping_comments_and_strings():
    code = '''\
    import torch
    def train(model, loader):
        for batch in loader:
            with torch.autograd.detect_anomaly():  # hunting a NaN
                # forward
                loss = model(batch)
                note = """
    keep this text
    """
                if loss > 0:
                    loss.backward()
            step()
    '''
    assert findings(code) == [("TL601", 4, 14)]
    assert fixed(code) == textwrap.dedent('''\
    import torch
    def train(model, loader):
        for batch in loader:
            # hunting a NaN
            # forward
            loss = model(batch)
            note = """
    keep this text
    """
            if loss > 0:
                loss.backward()
            step()
    ''')


def test_with_one_line_body_unwrapped():
    code = """\
    import torch
    def f():
        with torch.autograd.detect_anomaly(): loss.backward()
        return 1
    """
    assert fixed(code) == "import torch\ndef f():\n    loss.backward()\n    return 1\n"


@pytest.mark.parametrize(
    "header, result",
    [
        ("with torch.no_grad(), torch.autograd.detect_anomaly():", "with torch.no_grad():"),
        ("with torch.autograd.detect_anomaly(), torch.no_grad():", "with torch.no_grad():"),
        ("with a(), torch.autograd.detect_anomaly(), b():", "with a(), b():"),
    ],
)
def test_one_item_of_several_removed(header, result):
    code = f"import torch\ndef f():\n    {header}\n        y = 1\n    return y\n"
    assert fixed(code) == f"import torch\ndef f():\n    {result}\n        y = 1\n    return y\n"


def test_profiler_bound_with_as_has_no_fix():
    code = """\
    import torch
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        model(x)
    print(prof.table())
    """
    (d,) = lint(code)
    assert (d.location.row, d.location.column, d.fix) == (2, 6, None)


def test_emit_nvtx_unwrapped():
    code = "import torch\nwith torch.autograd.profiler.emit_nvtx():\n    model(x)\n"
    assert fixed(code) == "import torch\nmodel(x)\n"


def test_detect_anomaly_outside_a_with_is_reported_without_fix():
    code = "import torch\nstack.enter_context(torch.autograd.detect_anomaly())\n"
    (d,) = lint(code)
    assert (d.location.row, d.location.column, d.fix) == (2, 21, None)


@pytest.mark.parametrize(
    "code",
    [
        "import torch\ntorch.autograd.set_detect_anomaly(False)\n",
        "import torch\ntorch.autograd.set_detect_anomaly(args.anomaly)\n",
        "import torch\ntorch.autograd.set_detect_anomaly(**kw)\n",
        "import torch\nif args.debug:\n    torch.autograd.set_detect_anomaly(True)\n",
        "import torch\nif args.detect_anomaly:\n    torch.autograd.set_detect_anomaly(True)\n",
        "import os, torch\nif os.environ.get('DEBUG'):\n    torch.autograd.set_detect_anomaly(True)\n",
        "import torch\ndef enable_debug_mode():\n    torch.autograd.set_detect_anomaly(True)\n",
        "import torch\ndef test_grad():\n    with torch.autograd.detect_anomaly():\n        f()\n",
        "import torch\nclass TestGrad:\n    def check(self):\n        torch.autograd.set_detect_anomaly(True)\n",
        "import torch\nwith torch.profiler.profile() as p:\n    f()\n",
        "import torch\nwith torch.autograd.profiler.profile(enabled=False):\n    f()\n",
        "import torch\nwith torch.autograd.profiler.profile(args.profile):\n    f()\n",
        "import torch\nwith torch.autograd.profiler.record_function('fwd'):\n    f()\n",
        "def set_detect_anomaly(x): pass\nset_detect_anomaly(True)\n",
        "import torch\nwith torch.autograd.detect_anomaly(check_nan=False):\n    f()\n",
        "import torch\ntorch.autograd.set_detect_anomaly(True, check_nan=False)\n",
        "import torch\nwith torch.autograd.profiler.profile():\n    pass\n",
    ],
)
def test_silent(code):
    assert findings(code) == []


def test_else_branch_of_a_debug_flag_is_not_a_debug_branch():
    code = "import torch\nif args.debug:\n    pass\nelse:\n    torch.autograd.set_detect_anomaly(True)\n"
    assert findings(code) == [("TL601", 5, 5)]


@pytest.mark.parametrize("path", ["tests/test_train.py", "test_x.py", "pkg/x_test.py", "conftest.py"])
def test_silent_in_test_files(path):
    code = "import torch\ntorch.autograd.set_detect_anomaly(True)\n\ndef test_grad():\n    pass\n"
    assert findings(code, path) == []


@pytest.mark.parametrize("path", ["test_x.py", "pkg/x_test.py"])
def test_a_script_named_test_is_not_test_code(path):
    """`test_partseg.py` with no test in it is an evaluation script: linted as one."""
    code = "import torch\ntorch.autograd.set_detect_anomaly(True)\nif __name__ == '__main__':\n    main()\n"
    assert findings(code, path) == [("TL601", 2, 1)]
