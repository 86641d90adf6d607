"""TL402, TL403, TL405, TL406: exact findings on training and evaluation loops, and TL405's fix."""

from __future__ import annotations

import textwrap

import rule_support
from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source


def findings(code: str, rule: str):
    settings = settings_from_table({"select": [rule], "preview": True}, "t.toml", Settings())
    return [(d.code, d.location.row, d.location.column) for d in lint_source(textwrap.dedent(code), "train.py", settings)]


# -- TL405 -------------------------------------------------------------------------------------
HEADS = """\
def train(model, heads, loader, optimizer, criterion):
    for x, y in loader:
        feats = model(x)
        total_loss = 0
        for head in heads:
            total_loss += criterion(head(feats), y)
        total_loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_tl405_loss_summed_over_heads_and_backpropagated_is_silent():
    assert findings(HEADS, "TL405") == []
    # the same sum kept across steps is flagged
    across = HEADS.replace("        total_loss = 0\n", "").replace("    for x, y in loader:", "    total_loss = 0\n    for x, y in loader:")
    across = across.replace("        total_loss.backward()", "        criterion(feats, y).backward()")
    assert findings(across, "TL405") == []  # head outputs do not feed the backpropagated loss
    kept = """\
    def train(model, loader, optimizer, criterion):
        epoch_loss = 0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            epoch_loss += loss
    """
    assert findings(kept, "TL405") == [("TL405", 8, 23)]


def test_tl405_fix_detaches_and_wraps_expressions():
    code = """\
    def train(model, loader, optimizer, criterion):
        losses, total = [], 0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss / len(loader)
    """
    out = rule_support.fixed(code, rule="TL405")
    assert "total += (loss / len(loader)).detach()" in out


def test_tl405_silent_under_no_grad_and_without_backward():
    code = """\
    import torch
    def train(model, loader, optimizer, criterion, log):
        history = []
        for x, y in loader:
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                history.append(out)
    def evaluate(model, loader):
        outs = []
        for x in loader:
            outs.append(model(x))
    """
    assert findings(code, "TL405") == []


# -- TL406 -------------------------------------------------------------------------------------
def test_tl406_flags_only_without_any_reset_on_the_path():
    flagged = """\
    def train(model, loader, opt, criterion):
        for x, y in loader:
            criterion(model(x), y).backward()
            opt.step()
    """
    assert findings(flagged, "TL406") == [("TL406", 4, 9)]
    helper_method = """\
    class Trainer:
        def clear(self):
            for p in self.model.parameters():
                p.grad = None

        def fit(self, loader):
            for x in loader:
                self.model(x).sum().backward()
                self.optimizer.step()
                self.clear()
    """
    assert findings(helper_method, "TL406") == []
    assert findings(flagged, "TL406") and rule_support.findings(flagged, rule="TL406") == []  # preview only


# -- TL403 -------------------------------------------------------------------------------------
def test_tl403_flags_accumulation_without_no_sync_and_not_with_it():
    code = """\
    from torch.nn.parallel import DistributedDataParallel
    def train(model, loader, opt, accum_steps):
        model = DistributedDataParallel(model)
        for i, x in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % accum_steps == 0:
                opt.step()
                opt.zero_grad()
    """
    assert findings(code, "TL403") == [("TL403", 5, 9)]
    with_sync = code.replace("            model(x).sum().backward()",
                             "            with model.no_sync():\n                model(x).sum().backward()")
    assert findings(with_sync, "TL403") == []
    plain = code.replace("    model = DistributedDataParallel(model)\n", "")
    assert findings(plain, "TL403") == []  # `model` is a parameter and the function builds no DDP
    # out of preview (issue 10: four findings on real code, all right): on without --preview
    assert rule_support.findings(code, rule="TL403") == [("TL403", 5, 9)]


# -- TL402 -------------------------------------------------------------------------------------
def test_tl402_follows_callers_two_levels_up():
    code = """\
    import torch
    def evaluate(model, val_loader):
        model.eval()
        for x in val_loader:
            model(x)
    def run(model, loader):
        evaluate(model, loader)
    def main(model, loader):
        with torch.no_grad():
            run(model, loader)
    main(None, None)
    """
    assert findings(code, "TL402") == []
    assert findings(code.replace("        with torch.no_grad():\n            run", "        run"), "TL402") == [("TL402", 5, 9)]


def test_tl402_silent_for_uncalled_functions_and_callbacks():
    code = """\
    def evaluate(model, val_loader):
        model.eval()
        for x in val_loader:
            model(x)
    trainer.register(evaluate)
    """
    assert findings(code, "TL402") == []
    assert findings(code.replace("def evaluate", "def _eval").replace("trainer.register(evaluate)", ""), "TL402") == []


def test_tl402_model_back_in_train_mode_is_not_evaluation():
    code = """\
    model.eval()
    for x in val_loader:
        model.train()
        model(x)
    """
    assert findings(code, "TL402") == []
    assert findings("model.eval()\nfor x in val_loader:\n    model(x)\n", "TL402") == [("TL402", 3, 5)]


def test_tl406_silent_with_distributed_autograd():
    # pytorch/examples distributed/rpc: gradients live in the distributed autograd context of
    # each iteration, and DistributedOptimizer.step(context_id) reads them there
    rpc = """\
    import torch.distributed.autograd as dist_autograd

    def train(model, loader, opt, criterion):
        for x, y in loader:
            with dist_autograd.context() as context_id:
                loss = criterion(model(x), y)
                dist_autograd.backward(context_id, [loss])
                opt.step(context_id)
    """
    assert findings(rpc, "TL406") == []
    local = rpc.replace("dist_autograd.backward(context_id, [loss])", "loss.backward()")
    assert findings(local, "TL406") == [("TL406", 8, 13)]


def test_tl405_silent_for_a_container_made_fresh_each_optimizer_step():
    # AllenNLP's trainer: micro-batches of a group backpropagate one by one, their outputs are
    # kept for the callbacks and the list is made anew for the next optimizer step
    groups = """\
    def train(model, batch_groups, optimizer, callbacks):
        for group in batch_groups:
            optimizer.zero_grad()
            outputs = []
            for batch in group:
                out = model(batch)
                outputs.append(out)
                loss = out["loss"] / len(group)
                loss.backward()
            optimizer.step()
            callbacks(outputs)
    """
    assert findings(groups, "TL405") == []
    # a list made fresh each epoch keeps every step of the epoch: flagged
    epochs = groups.replace("for group in batch_groups:", "for epoch in range(10):").replace(
        "for batch in group:", "for batch in loader:").replace(
        "            optimizer.step()\n", "").replace(
        "                loss.backward()\n", "                loss.backward()\n                optimizer.step()\n")
    assert findings(epochs, "TL405") == [("TL405", 7, 28)]
