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


# -- devices and argument insertion (TL102, TL202) ------------------------------------------

@pytest.mark.parametrize(
    "src, expected",
    [('"cuda"', True), ('"cuda:1"', True), ('"mps"', True), ("0", True), ("device", True),
     ("self.device", True), ("x.device", True), ("local_rank", True), ("th.device('cuda', 0)", True),
     ("th.device(name)", True), ('"cuda" if ok else "cpu"', True), ('f"cuda:{rank}"', True),
     ('"cpu"', False), ('"meta"', False), ("th.device('cpu')", False), ("cpu_device", False),
     ("torch.float16", False), ("dtype", False), ("other", False), ("True", False), ("-1", False),
     ("f()", False)],
)
def test_is_accelerator_device(src, expected):
    from torchlint.analysis import is_accelerator_device

    ctx = ctx_for("import torch as th\n")
    assert is_accelerator_device(cst.parse_expression(src), ctx) is expected


@pytest.mark.parametrize(
    "src, expected",
    [
        ("f()", "f(device=d, dtype=t)"),
        ("f(a)", "f(a, device=d, dtype=t)"),
        ("f(a, b)", "f(a, b, device=d, dtype=t)"),
        ("f(*shape)", "f(*shape, device=d, dtype=t)"),
        ("f(\n    a,\n    b,\n)", "f(\n    a,\n    b,\n    device=d,\n    dtype=t,\n)"),
        ("f(\n    a,\n    b\n)", "f(\n    a,\n    b,\n    device=d,\n    dtype=t\n)"),
        ("f(\n    a,\n)", "f(\n    a,\n    device=d,\n    dtype=t,\n)"),
        ("f(a,  # rows\n  b)", "f(a,  # rows\n  b,\n  device=d,\n  dtype=t)"),
    ],
)
def test_with_keyword_args_keeps_layout(src, expected):
    from torchlint.analysis import with_keyword_args

    new = with_keyword_args(call(src), [("device", cst.Name("d")), ("dtype", cst.Name("t"))])
    assert cst.Module(body=[]).code_for_node(new) == expected


def test_code_in_place_keeps_block_indentation():
    from torchlint.analysis import code_in_place, with_keyword_args

    code = "def f():\n    if x:\n        y = g(\n            a,\n        )\n"
    ctx = ctx_for(code)
    func = ctx.module.body[0]
    if_ = func.body.body[0]
    ctx.ancestors = [ctx.module, func, func.body, if_, if_.body]
    node = if_.body.body[0].body[0].value
    new = with_keyword_args(node, [("device", cst.Name("d"))])
    assert code_in_place(ctx, new) == "g(\n            a,\n            device=d,\n        )"
