"""Tests for the shared helpers in torchlint/analysis.py."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.analysis import UNKNOWN, get_arg, has_star_args, literal_value, may_bind, method_call, tensor_factory
from torchlint.config import Settings
from torchlint.context import FileContext


def ctx_for(code: str) -> FileContext:
    module = cst.parse_module(code)
    return FileContext("t.py", code, module, Settings())


def call(code: str) -> cst.Call:
    node = cst.parse_expression(code)
    assert isinstance(node, cst.Call)
    return node


@pytest.mark.parametrize(
    "src, value",
    [("0", 0), ("4", 4), ("0x10", 16), ("1_000", 1000), ("-2", -2), ("2.5", 2.5), ("True", True),
     ("None", None), ("'cuda'", "cuda"), ("x", UNKNOWN), ("f()", UNKNOWN), ("-x", UNKNOWN)],
)
def test_literal_value(src, value):
    assert literal_value(cst.parse_expression(src)) == value if value is not UNKNOWN else literal_value(cst.parse_expression(src)) is UNKNOWN


def test_get_arg_by_keyword_and_position():
    c = call("DataLoader(ds, 32, True, None, None, 4, pin_memory=True)")
    assert literal_value(get_arg(c, "num_workers", 5).value) == 4
    assert literal_value(get_arg(c, "pin_memory", 7).value) is True
    assert get_arg(c, "drop_last", 8) is None


def test_star_args_make_parameters_unknown():
    c = call("DataLoader(ds, **loader_kwargs)")
    assert get_arg(c, "num_workers", 5) is None
    assert has_star_args(c)
    assert may_bind(c, "num_workers", 5)
    assert not may_bind(call("DataLoader(ds)"), "num_workers", 5)


def test_tensor_factory_resolves_through_imports():
    ctx = ctx_for("import torch as th\nfrom torch import zeros as z\n")
    assert tensor_factory(call("th.randn(3)"), ctx) == "randn"
    assert tensor_factory(call("z(3)"), ctx) == "zeros"
    assert tensor_factory(call("np.zeros(3)"), ctx) is None
    assert tensor_factory(call("th.nn.zeros(3)"), ctx) is None
    assert tensor_factory(call("th.from_numpy(a)"), ctx) is None


def test_method_call():
    obj, name = method_call(call("loss.item()"))
    assert name == "item" and isinstance(obj, cst.Name)
    assert method_call(call("item()")) is None
