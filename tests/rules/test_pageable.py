"""TL207 non-blocking-from-pageable: what it knows to be pageable, where the target is a CUDA
device, its ast question, the whole-file model's part (a ``global`` rebinding in a function a
partial parse cuts out) and its fix."""

from __future__ import annotations

import ast
import textwrap

import pytest

import torchlint.engine as engine
import torchlint.partial as partial
from torchlint.astindex import AstIndex
from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import UNSAFE
from torchlint.edits import apply_edits
from torchlint.engine import lint_source
from torchlint.rules import rules_by_code

HEADER = "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader\n"
RULE = rules_by_code()["TL207"]


def lint(body: str, path: str = "train.py", preview: bool = True, header: str = HEADER):
    text = header + textwrap.dedent(body)
    settings = settings_from_table({"select": ["TL207"], "preview": preview}, "t.toml", Settings())
    return text, lint_source(text, path, settings)


def rows(body: str, **kw):
    return [d.location.row - HEADER.count("\n") for d in lint(body, **kw)[1]]


def test_a_preview_rule_with_an_unsafe_fix():
    body = "x = torch.from_numpy(a).to('cuda', non_blocking=True)\n"
    assert rows(body) == [1]
    assert lint(body, preview=False)[1] == []
    assert RULE.preview and RULE.fix_applicability == UNSAFE


def test_the_fix_pins_the_source_created_in_the_statement_and_leaves_nothing_to_flag():
    body = "x = torch.from_numpy(a).float()[0].to('cuda', non_blocking=True)\n"
    text, (finding,) = lint(body)
    assert finding.fix is not None and finding.fix.applicability == UNSAFE
    fixed = apply_edits(text, finding.fix.edits)
    assert fixed[len(HEADER):] == "x = torch.from_numpy(a).float()[0].pin_memory().to('cuda', non_blocking=True)\n"
    ast.parse(fixed)
    settings = settings_from_table({"select": ["TL207"], "preview": True}, "t.toml", Settings())
    assert lint_source(fixed, "train.py", settings) == []
    copy = "dst = torch.empty(3, device='cuda')\ndst.copy_(torch.tensor([1.0, 2.0, 3.0]), non_blocking=True)\n"
    text, (finding,) = lint(copy)
    assert apply_edits(text, finding.fix.edits).endswith(
        "dst.copy_(torch.tensor([1.0, 2.0, 3.0]).pin_memory(), non_blocking=True)\n")


def test_a_source_bound_on_another_line_or_a_batch_gets_no_fix_and_says_what_to_do():
    body = """\
    def f(a, ds):
        host = torch.from_numpy(a)
        y = host.cuda(non_blocking=True)
        for x in DataLoader(ds):
            x.cuda(non_blocking=True)
    """
    _, found = lint(body)
    assert [(d.location.row - 3, d.fix) for d in found] == [(3, None), (5, None)]
    assert "pin the source" in found[0].message
    assert "`pin_memory=True`" in found[1].message and "drop `non_blocking`" in found[1].message
    assert all(len(d.message) <= 100 for d in found)


@pytest.mark.parametrize("device, flagged", [
    ('"cuda"', True), ('"cuda:1"', True), ("0", True), ('torch.device("cuda", 0)', True),
    ('"cuda" if torch.cuda.is_available() else "cpu"', True), ("args.device", True),
    ('"cpu"', False), ('torch.device("cpu")', False), ('"mps"', False), ("torch.float16", False),
])
def test_the_target_must_be_a_cuda_device(device, flagged):
    body = f"def f(a, args):\n    device = {device}\n    return torch.from_numpy(a).to(device, non_blocking=True)\n"
    assert rows(body) == ([3] if flagged else [])


@pytest.mark.parametrize("source", [
    "torch.from_numpy(a)",
    "torch.tensor([1, 2, 3])",
    "torch.tensor(np.zeros(3), dtype=torch.float32)",
    "torch.as_tensor(np.stack(boxes))",
    "torch.as_tensor([x * 2 for x in range(3)])",
    "torch.tensor(t.tolist())",
    "torch.tensor(3.0, device='cpu')",
    "torch.from_numpy(a).view(-1).contiguous()",
])
def test_pageable_sources(source):
    assert rows(f"def f(a, t, boxes):\n    return {source}.cuda(non_blocking=True)\n") == [2]


@pytest.mark.parametrize("source", [
    "t",  # a parameter: may be pinned
    "torch.tensor(t)",  # data may be a device tensor: the result is on its device
    "torch.as_tensor(t)",  # as_tensor of a tensor is that tensor
    "torch.from_numpy(t.numpy())",  # a view of t's memory
    "torch.tensor([1.0], pin_memory=True)",
    "torch.tensor([1.0], device='cuda')",
    "torch.tensor([1.0], **kw)",
    "torch.from_numpy(a).pin_memory()",
    "t.cpu()",  # `.cpu()` of a host tensor is itself
    "torch.zeros(3)",  # TL202's: build it on the device
    "self.buf",
])
def test_unknown_or_pinned_sources_are_silent(source):
    assert rows(f"def f(self, a, t, kw):\n    return {source}.cuda(non_blocking=True)\n") == []


def test_a_default_device_in_the_file_silences_tensor_but_not_from_numpy():
    body = "torch.set_default_device('cuda')\nx = torch.tensor([1.0]).cuda(non_blocking=True)\ny = torch.from_numpy(a).cuda(non_blocking=True)\n"
    assert rows(body) == [3]


def test_loader_batches():
    body = """\
    def f(ds, model, n):
        plain = DataLoader(ds, batch_size=8)
        for step, (x, y) in enumerate(plain):
            model(x.cuda(non_blocking=True), y[0].float().cuda(non_blocking=True))
        for batch in plain:
            x, y = batch
            model(x.to("cuda", non_blocking=True))
        pinned = DataLoader(ds, batch_size=8, pin_memory=True)
        for x in pinned:
            model(x.cuda(non_blocking=True))
        either = DataLoader(ds, pin_memory=n > 1)
        for x in either:
            model(x.cuda(non_blocking=True))
        for x in zip(plain, pinned):
            model(x[0].cuda(non_blocking=True))
    """
    assert rows(body) == [4, 4, 7]


def test_a_module_loader_rebound_through_global_elsewhere_is_silent_whole_or_partial(monkeypatch):
    """The semantic model does not follow ``global dl`` in another function; the whole-file
    model does, even where a partial parse has cut that function out."""
    monkeypatch.setattr(partial, "MIN_CUT_LINES", 0)
    monkeypatch.setattr(partial, "MIN_CUT_SHARE", 0)
    body = """\
    dl = DataLoader(ds)


    def setup(ds):
        global dl
        dl = DataLoader(ds, pin_memory=True)


    def train(model):
        for x in dl:
            model(x.cuda(non_blocking=True))
    """
    settings = Settings(select=("TL207",), preview=True)
    for text in (HEADER + textwrap.dedent(body), HEADER + textwrap.dedent(body).replace("global dl", "pass")):
        plan = engine.statement_plan(text, "m.py", settings, [RULE])
        assert plan is not None and any(p.stub_header or p.dropped for p in plan.pieces)  # `setup` is cut
        with monkeypatch.context() as m:
            m.setattr(engine, "plan_statements", lambda *a, **k: None)
            whole = [d.to_json() for d in engine.lint_source(text, "m.py", settings)]
        assert [d.to_json() for d in engine.lint_source(text, "m.py", settings)] == whole
        assert len(whole) == (0 if "global dl" in text else 1)


def test_device_to_host_and_blocking_copies_are_silent():
    body = """\
    def f(model, x, a):
        out = model(x)
        host = out.cpu(non_blocking=True)
        back = out.to("cpu", non_blocking=True)
        y = back.to("cuda", non_blocking=True)
        z = torch.from_numpy(a).to("cuda")
        w = torch.from_numpy(a).to("cuda", non_blocking=False)
        dst = torch.empty(3)
        dst.copy_(torch.from_numpy(a), non_blocking=True)  # to the host
    """
    assert rows(body) == []


def test_silent_in_test_code():
    body = "def test_copy(a):\n    torch.from_numpy(a).cuda(non_blocking=True)\n"
    assert rows(body) == []
    assert rows(body.replace("test_copy", "copy"), path="tests/helpers.py") == []
    assert rows(body.replace("test_copy", "copy")) == [2]


@pytest.mark.parametrize("source, kept", [
    ("import torch\nx = torch.from_numpy(a).to(d, non_blocking=True)\n", True),
    ("import torch\nx = torch.from_numpy(a).cuda(0, True)\n", True),
    ("import torch\ndst.copy_(torch.tensor(a), True)\n", True),
    ("import torch\nx = torch.from_numpy(a).to(d, non_blocking=False)\n", False),
    ("import torch\nx = torch.from_numpy(a).to(d)\n", False),
    ('import torch\n"""torch.from_numpy(a).to(d, non_blocking=True)"""\n', False),
    ("import torch\n# torch.from_numpy(a).cuda(non_blocking=True)\nx = torch.tensor(1)\n", False),
])
def test_the_ast_question(source, kept):
    assert RULE.ast_candidate(AstIndex(ast.parse(source), source)) is kept
    assert RULE.may_fire(source) or not kept  # the tokens never drop what the question keeps


def test_what_it_reads_outside_its_definition_is_asked_of_the_whole_file_model_and_digested():
    from torchlint.model import FileModel

    text = "import torch\ndef setup():\n    global dl, n\n    torch.set_default_device('cuda')\n# global x\n"
    model = FileModel(ast.parse(text), text)
    assert model.global_names() == {"dl", "n"}  # statements, not the word in a comment
    assert model.default_device_settings() == {"set_default_device"}
    plain = FileModel(ast.parse("import torch\n"), "import torch\n")
    assert plain.global_names() == frozenset() and plain.default_device_settings() == frozenset()
    # the editor keys kept findings on the digest: each answer changes it
    other = text.replace("global dl, n", "global dl")
    assert FileModel(ast.parse(other), other).digest() != model.digest()
    other = text.replace("torch.set_default_device('cuda')", "pass")
    assert FileModel(ast.parse(other), other).digest() != model.digest()
