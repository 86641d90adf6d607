"""Where a function runs (issue 29, class 3): a helper every call of which runs under its
callers' ``no_grad`` is evaluation code (``FileModel.grad_free_functions``), so TL201 leaves
its loop alone, as it does a loop under ``no_grad`` in the same function. The answer is a
whole-file model fact: the editor's kept findings follow an edit in the caller."""

from __future__ import annotations

import ast
import textwrap

import torchlint.engine as engine
from torchlint import editor_memo
from torchlint.config import Settings
from torchlint.model import FileModel

PROGRAM = textwrap.dedent("""\
    import torch


    def calc_loss_loader(data_loader, model):
        total = 0.0
        for x, y in data_loader:
            total += model(x.cuda(), y.cuda()).item()
        return total


    def evaluate_model(model, train_loader, val_loader):
        model.eval()
        with torch.no_grad():
            return calc_loss_loader(train_loader, model), calc_loss_loader(val_loader, model)


    def fit(model, optimizer, loader, val_loader):
        for step, (x, y) in enumerate(loader):
            model(x.cuda(), y.cuda()).backward()
            optimizer.step()
            if step % 100 == 0:
                evaluate_model(model, loader, val_loader)


    if __name__ == "__main__":
        fit(Net(), make_optimizer(), make_loader(), make_loader())
""")
NO_GRAD = "    with torch.no_grad():\n        return calc_loss_loader"
PLAIN = "    if True:\n        return calc_loss_loader"


def test_the_model_names_helpers_called_only_without_gradients():
    model = FileModel(ast.parse(PROGRAM), PROGRAM)
    assert model.grad_free_functions() == {"calc_loss_loader"}
    assert "grad_free_functions" in model.answers
    plain = PROGRAM.replace(NO_GRAD, PLAIN)
    assert plain != PROGRAM
    assert FileModel(ast.parse(plain), plain).grad_free_functions() == frozenset()
    decorated = plain.replace("def evaluate_model", "@torch.inference_mode()\ndef evaluate_model")
    assert FileModel(ast.parse(decorated), decorated).grad_free_functions() == {"calc_loss_loader"}
    callback = PROGRAM + "\nhooks = [calc_loss_loader]\n"  # named, not called: unknown use
    assert FileModel(ast.parse(callback), callback).grad_free_functions() == frozenset()
    module = PROGRAM.split("\n\nif __name__")[0]  # a module: other files may call it with gradients on
    assert FileModel(ast.parse(module), module).grad_free_functions() == frozenset()
    recursive = "import torch\ndef a():\n    return b()\ndef b():\n    return a()\na()\n"  # no caller with no_grad
    assert FileModel(ast.parse(recursive), recursive).grad_free_functions() == frozenset()


def test_tl201_reads_the_helper_as_evaluation_and_sees_the_caller_change():
    settings = Settings(select=("TL201",))
    assert [d.code for d in engine.lint_source(PROGRAM, "train.py", settings)] == []
    plain = PROGRAM.replace(NO_GRAD, PLAIN)
    assert [(d.code, d.location.row) for d in engine.lint_source(plain, "train.py", settings)] == [("TL201", 7)]
    editor_memo.clear()
    first = engine.lint_source(PROGRAM, "train.py", settings, incremental=True)
    after = engine.lint_source(plain, "train.py", settings, incremental=True)  # calc_loss_loader unchanged
    back = engine.lint_source(PROGRAM, "train.py", settings, incremental=True)
    editor_memo.clear()
    assert [d.code for d in first] == [d.code for d in back] == []
    assert [d.to_json() for d in after] == [d.to_json() for d in engine.lint_source(plain, "train.py", settings)]
