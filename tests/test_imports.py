"""The import-alias table resolves every spelling of a torch name to one canonical name."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.imports import ImportTable


def resolve(code: str, expr: str):
    table = ImportTable.from_module(cst.parse_module(code))
    return table.resolve(cst.parse_expression(expr))


@pytest.mark.parametrize(
    "code, expr, expected",
    [
        ("import torch", "torch.utils.data.DataLoader", "torch.utils.data.DataLoader"),
        ("from torch.utils.data import DataLoader as DL", "DL", "torch.utils.data.DataLoader"),
        ("from torch.utils.data import DataLoader", "DataLoader", "torch.utils.data.DataLoader"),
        ("import torch.utils.data as tud", "tud.DataLoader", "torch.utils.data.DataLoader"),
        ("from torch.utils import data", "data.DataLoader", "torch.utils.data.DataLoader"),
        ("from torch.utils.data.dataloader import DataLoader", "DataLoader", "torch.utils.data.DataLoader"),
        ("import torch.nn as nn", "nn.DataParallel", "torch.nn.DataParallel"),
        ("import torch.nn as nn", "nn.parallel.DataParallel", "torch.nn.DataParallel"),
        ("from torch import nn", "nn.Conv2d", "torch.nn.Conv2d"),
        ("import torch.nn", "torch.nn.Conv2d", "torch.nn.Conv2d"),
        ("from torch.nn.modules.conv import Conv2d", "Conv2d", "torch.nn.Conv2d"),
        ("from torch.nn import *", "DataParallel", "torch.nn.DataParallel"),
        ("import torch as th", "th.zeros", "torch.zeros"),
        ("try:\n    import torch\nexcept ImportError:\n    torch = None", "torch.zeros", "torch.zeros"),
        ("if True:\n    from torch import nn", "nn.Conv2d", "torch.nn.Conv2d"),
    ],
)
def test_resolves(code, expr, expected):
    assert resolve(code, expr) == expected


@pytest.mark.parametrize(
    "code, expr",
    [
        ("", "torch.zeros"),  # not imported: unknown, rules stay silent
        ("from . import nn", "nn.DataParallel"),  # relative import: the project's own module
        ("from torch.nn import *", "MyThing"),  # star import of a name torch does not export
        ("import torch", "f().zeros"),
    ],
)
def test_unknown_names_do_not_resolve(code, expr):
    assert resolve(code, expr) is None


def test_non_torch_names_resolve_to_their_own_module():
    assert resolve("import numpy as np", "np.zeros") == "numpy.zeros"


def test_local_name_for():
    table = ImportTable.from_module(cst.parse_module("import os as _os\nimport torch.nn as nn\n"))
    assert table.local_name_for("os") == "_os"
    assert table.local_name_for("torch.nn.Conv2d") == "nn.Conv2d"
    assert table.local_name_for("sys") is None
