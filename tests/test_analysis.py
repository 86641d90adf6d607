"""Tests for the shared helpers in torchlint/analysis.py."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.config import Settings
from torchlint.context import FileContext
from torchlint.syntax import UNKNOWN, get_arg, has_star_args, literal_value, may_bind, method_call, tensor_factory


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
    assert tensor_factory(ctx, call("th.randn(3)")) == "randn"
    assert tensor_factory(ctx, call("z(3)")) == "zeros"
    assert tensor_factory(ctx, call("np.zeros(3)")) is None
    assert tensor_factory(ctx, call("th.nn.zeros(3)")) is None
    assert tensor_factory(ctx, call("th.from_numpy(a)")) is None


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
    from torchlint.heuristics import is_accelerator_device

    ctx = ctx_for("import torch as th\n")
    assert is_accelerator_device(ctx, cst.parse_expression(src)) is expected


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
    from torchlint.fixbuilders import with_keyword_args

    new = with_keyword_args(call(src), [("device", cst.Name("d")), ("dtype", cst.Name("t"))])
    assert cst.Module(body=[]).code_for_node(new) == expected


def test_code_in_place_keeps_block_indentation():
    from torchlint.fixbuilders import code_in_place, with_keyword_args

    code = "def f():\n    if x:\n        y = g(\n            a,\n        )\n"
    ctx = ctx_for(code)
    func = ctx.module.body[0]
    if_ = func.body.body[0]
    ctx.ancestors = [ctx.module, func, func.body, if_, if_.body]
    node = if_.body.body[0].body[0].value
    new = with_keyword_args(node, [("device", cst.Name("d"))])
    assert code_in_place(ctx, new) == "g(\n            a,\n            device=d,\n        )"


# -- loops, guards, handlers ------------------------------------------------------------------

import textwrap  # noqa: E402

from torchlint.engine import walk  # noqa: E402
from torchlint.heuristics import (  # noqa: E402
    in_debug_branch,
    in_oom_handler,
    is_per_step_function,
    is_periodic_guard,
    under_memory_switch,
)
from torchlint.loops import is_training_loop, under_periodic_guard  # noqa: E402
from torchlint.syntax import enclosing_loops  # noqa: E402
from torchlint.testcode import in_test_code, is_test_module, is_test_path  # noqa: E402


def at_marks(code: str, question, path: str = "t.py"):
    """``question(ctx, node)`` answered at every ``mark()`` call, in source order."""
    code = textwrap.dedent(code)
    module = cst.parse_module(code)
    ctx = FileContext(path, code, module, Settings())
    answers = []

    class Probe:
        def __init__(self, ctx):
            self.ctx = ctx

        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == "mark":
                answers.append(question(self.ctx, node))

    walk(module, ctx, [Probe(ctx)])
    return answers


def innermost_loop_is_training(ctx, node):
    loops = enclosing_loops(ctx)
    return bool(loops) and is_training_loop(ctx, loops[0])


@pytest.mark.parametrize(
    "header, expected",
    [
        ("for batch in train_loader:", True),
        ("for i, batch in enumerate(self.val_dataloader()):", True),
        ("for batch in tqdm(loader, desc='train'):", True),
        ("for x, y in zip(loader_a, loader_b):", True),
        ("for batch in DataLoader(ds):", True),
        ("for batch in dl:", True),  # bound from DataLoader(...) below
        ("for loader in loaders:", False),
        ("for x in items:", False),
        ("for epoch in range(3):", False),
        ("while True:", False),
    ],
)
def test_is_training_loop_by_iterable(header, expected):
    code = f"from torch.utils.data import DataLoader\ndl = DataLoader(ds)\n{header}\n    mark()\n"
    assert at_marks(code, innermost_loop_is_training) == [expected]


@pytest.mark.parametrize(
    "stmt, expected",
    [
        ("loss.backward()", True),
        ("accelerator.backward(loss)", True),
        ("optimizer.step()", True),
        ("self.opt_g.step()", True),
        ("scaler.step(optimizer)", True),
        ("scheduler.step()", False),
        ("env.step(action)", False),
        ("def inner(): loss.backward()", False),
    ],
)
def test_is_training_loop_by_gradient_step(stmt, expected):
    code = f"while running:\n    mark()\n    {stmt}\n"
    assert at_marks(code, innermost_loop_is_training) == [expected]


def test_epoch_loop_around_a_step_loop_is_not_a_training_loop():
    code = """\
    for epoch in range(3):
        for x in batches:
            loss.backward()
        mark()
    """
    assert at_marks(code, innermost_loop_is_training) == [False]


def test_is_training_loop_is_memoized_on_the_context():
    code = "for b in loader:\n    mark()\n    mark()\n"
    module = cst.parse_module(code)
    ctx = FileContext("t.py", code, module, Settings())
    loop = module.body[0]
    assert is_training_loop(ctx, loop) is True
    assert ("training_loop", id(loop)) in ctx.analysis_memo


@pytest.mark.parametrize(
    "test, expected",
    [
        ("step % 10 == 0", True),
        ("(i + 1) % log_every == 0", True),
        ("not step % n", True),
        ("is_main_process and step % 100 == 0", True),
        ("verbose", True),
        ("args.debug", True),
        ("self.control.should_log", True),
        ("logger.isEnabledFor(10)", True),
        ("step == 0", True),
        ("i == len(loader) - 1", True),
        ("verbose or step % 10 == 0", True),
        ("step % 10 == 0 or last_batch", True),
        ("self.is_first_step", True),
        ("step % 10 != 0", False),
        ("step % 10", False),
        ("rank == 0", False),
        ("is_main_process", False),
        ("logits is not None", False),
        ("verbose or flag", False),
        ("x > 0", False),
    ],
)
def test_is_periodic_guard(test, expected):
    assert is_periodic_guard(cst.parse_expression(test)) is expected


def test_under_periodic_guard_only_in_the_if_branch():
    code = """\
    for step, b in enumerate(loader):
        mark()
        if step % 10 == 0:
            mark()
        else:
            mark()
        y = mark() if step == 0 else None
    """
    assert at_marks(code, lambda ctx, n: under_periodic_guard(ctx, enclosing_loops(ctx)[0], n)) == [
        False, True, False, True,
    ]


def test_in_oom_handler():
    code = """\
    try:
        pass
    except torch.cuda.OutOfMemoryError:
        mark()
    except (ValueError, torch.OutOfMemoryError):
        mark()
    except RuntimeError as e:
        if "CUDA out of memory" in str(e):
            mark()
    except KeyError:
        mark()
    mark()
    """
    assert at_marks(code, lambda ctx, n: in_oom_handler(ctx)) == [True, True, True, False, False]


@pytest.mark.parametrize(
    "path, expected",
    [("tests/test_x.py", True), ("test_x.py", True), ("pkg/x_test.py", True), ("conftest.py", True),
     ("src/testing/util.py", True), ("src/train.py", False), ("latest.py", False), ("contest.py", False),
     ("src/accelerate/test_utils/training.py", True), ("repo/tests_fabric/x.py", True),
     ("src/unit_tests/a.py", True), ("src/latest_utils/a.py", False), ("src/contest/a.py", False),
     ("/tmp/pytest-of-me/pytest-3/test_open_and_save0/train.py", False)],
)
def test_is_test_path(path, expected):
    assert is_test_path(path) is expected


@pytest.mark.parametrize(
    "path, text, expected",
    [("test_partseg.py", "for x in loader:\n    pass\nif __name__ == '__main__':\n    main()\n", False),
     ("test_x.py", "def test_a():\n    pass\n", True),
     ("test_x.py", "import unittest\nclass A(unittest.TestCase):\n    pass\n", True),
     ("test_x.py", "import pytest\n", True),
     ("pkg/x_test.py", "class TestA:\n    pass\n", True),
     ("tests/helpers.py", "x = 1\n", True), ("conftest.py", "", True),
     ("train.py", "def test_a():\n    pass\n", False)],
)
def test_is_test_module(path, text, expected):
    assert is_test_module(path, text) is expected


def test_in_test_code_by_function_and_class():
    code = "def test_a():\n    mark()\nclass TestB:\n    def c(self):\n        mark()\ndef d():\n    mark()\n"
    assert at_marks(code, lambda ctx, n: in_test_code(ctx)) == [True, True, False]


def test_in_debug_branch():
    code = """\
    if debug:
        mark()
    if args.detect_anomaly:
        mark()
    if os.environ.get("TORCH_DEBUG"):
        mark()
    if debug:
        pass
    else:
        mark()
    if ready:
        mark()
    def enable_debug_mode():
        mark()
    """
    assert at_marks(code, lambda ctx, n: in_debug_branch(ctx, n)) == [True, True, True, False, False, True]


def test_in_debug_branch_by_class_and_file_name():
    code = """\
    class AutogradProfiler:
        def before_step(self):
            mark()
    class Trainer:
        def profile_step(self):
            mark()
        def step(self):
            mark()
    """
    assert at_marks(code, lambda ctx, n: in_debug_branch(ctx, n)) == [True, True, False]
    assert at_marks("mark()\n", lambda ctx, n: in_debug_branch(ctx, n), path="fx/profiling_tracer.py") == [True]
    assert at_marks("mark()\n", lambda ctx, n: in_debug_branch(ctx, n), path="train.py") == [False]


@pytest.mark.parametrize(
    "name, expected",
    [("forward", True), ("step", True), ("training_step", True), ("train_step", True),
     ("validation_step", True), ("custom_forward", True), ("train", False), ("__init__", False),
     ("train_one_epoch", False), ("stepper", False)],
)
def test_is_per_step_function(name, expected):
    func = cst.parse_statement(f"def {name}(self):\n    pass\n")
    assert is_per_step_function(func) is expected


def test_under_memory_switch():
    code = """\
    for batch in loader:
        if args.empty_unused_memory_level >= 1:
            mark()
        if torch.cuda.memory_allocated() > limit:
            mark()
        if step % 10 == 0:
            mark()
        if ready:
            pass
        else:
            mark()
    """
    answers = at_marks(code, lambda ctx, n: under_memory_switch(ctx, ctx.module, n))
    assert answers == [True, True, False, False]


def test_bound_names_and_body_simple_statements():
    from torchlint.syntax import body_simple_statements, bound_names

    for_target = cst.parse_statement("for i, (x, *y) in z:\n    pass\n").target
    assert bound_names(for_target) == {"i", "x", "y"}
    assert bound_names(cst.parse_expression("self.x")) == set()
    func = cst.parse_statement("def f():\n    a = 1; b = 2\n    if a:\n        c = 3\n    return b\n")
    assert [type(s).__name__ for s in body_simple_statements(func)] == ["Assign", "Assign", "Return"]
