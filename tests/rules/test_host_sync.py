"""TL201 host-sync-in-loop: exact findings on training loops, guards, chains and look-alikes."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.config import Settings, settings_from_table
from torchlint.engine import lint_source


def findings(code: str, path: str = "train.py"):
    settings = settings_from_table({"select": ["TL201"]}, "t.toml", Settings())
    return [(d.code, d.location.row, d.location.column) for d in lint_source(textwrap.dedent(code), path, settings)]


LOOP = """\
import torch
for step, batch in enumerate(train_loader):
    loss = model(batch.cuda()).mean()
    loss.backward()
    optimizer.step()
    {stmt}
"""


@pytest.mark.parametrize(
    "stmt, col",
    [
        ("print(loss.item())", 11),
        ("total += loss.item()", 14),
        ("v = loss.detach().cpu().numpy()", 9),  # one finding for the whole chain
        ("ids = loss.argmax(0).tolist()", 11),
        ("pbar.set_postfix(loss=loss.item())", 27),
        ("x = out.cpu(memory_format=torch.contiguous_format)", 9),
        ("a = loss.numpy(force=True)", 9),
        ("if loss.item() > 10: pass", 8),
        ("vals = [v.item() for v in losses]", 13),
        ("x = loss.cpu()[0].item()", 9),
    ],
)
def test_flagged_in_training_loop(stmt, col):
    assert findings(LOOP.format(stmt=stmt)) == [("TL201", 6, col)]


@pytest.mark.parametrize(
    "stmt",
    [
        "if step % 10 == 0: print(loss.item())",
        "if (step + 1) % log_every == 0 and rank == 0: print(loss.item())",
        "if not step % 10: print(loss.item())",
        "if verbose: print(loss.item())",
        "if args.debug: print(loss.item())",
        "if self.control.should_log: print(loss.item())",
        "if step == 0: print(loss.item())",
        "x = loss.item() if step == 0 else None",
        "for k, v in metrics.items(): pass",
        "n = os.cpu_count()",
        "model.cpu()",
        "self.model.cpu()",
        "x = np.asarray(batch).tolist()",
        "x = d.item(0)",
        "x = t.tolist(1)",
        "def report(): return loss.item()",
        "cb = lambda: loss.item()",
        "running += loss.detach()",
        "if step % 10 == 0 or last_batch: print(loss.item())",
        "sizes = batch.tolist()",  # a DataLoader yields host tensors
        "n = batch['lengths'].cpu()",
        "params = list(m.cpu().parameters())",
        "sd = ema.cpu().state_dict()",
    ],
)
def test_silent_in_training_loop(stmt):
    code = "import os\nimport numpy as np\n" + LOOP.format(stmt=stmt)
    assert findings(code) == []


@pytest.mark.parametrize(
    "stmt",
    [
        "if step % 10 != 0: print(loss.item())",  # runs on nine steps in ten
        "if rank == 0: print(loss.item())",  # rank 0 still syncs every step
        "if is_main_process: print(loss.item())",
        "if step % 10 == 0: pass\nelse: print(loss.item())".replace("\n", "\n    "),
        "if verbose or flag: print(loss.item())",
    ],
)
def test_not_a_periodic_guard(stmt):
    assert len(findings(LOOP.format(stmt=stmt))) == 1


@pytest.mark.parametrize(
    "stmt, col",
    [
        ("pbar.set_postfix(train_loss=loss)", 5),  # tqdm str()s what is not a number (W2)
        ("pbar.set_postfix({'loss': loss, 'step': step})", 5),
        ("if step % 50: print(f'{loss}')", 19),  # `% 50` truthy: 49 steps of 50
    ],
)
def test_progress_bar_postfix_and_modulo_truthy_are_flagged(stmt, col):
    assert findings(LOOP.format(stmt=stmt)) == [("TL201", 6, col)]


@pytest.mark.parametrize(
    "stmt",
    [
        "pbar.set_postfix(step=step, lr=lr)",  # host numbers
        "pbar.set_postfix(shape=loss.shape)",  # metadata
        "pbar.set_postfix(train_loss=batch)",  # the loader's host tensor
        "if step % 50 == 0: pbar.set_postfix(train_loss=loss)",  # logging guard
    ],
)
def test_progress_bar_postfix_look_alikes_are_silent(stmt):
    assert findings(LOOP.format(stmt=stmt)) == []


def test_a_tensor_a_factory_made_on_the_host_is_silent():
    # W2, issue 29 (Practical_DL): `noise.cpu()` of `torch.randn(...)` with no device is no sync
    host = "noise = torch.randn(4, 8)\n    y = noise.cpu()"
    assert findings(LOOP.format(stmt=host)) == []
    assert findings(LOOP.format(stmt="noise = torch.tensor([1.0, 2.0])\n    y = noise.cpu()")) == []
    on_device = "noise = torch.randn(4, 8, device='cuda')\n    y = noise.cpu()"
    assert findings(LOOP.format(stmt=on_device)) == [("TL201", 7, 9)]
    copied = "noise = torch.tensor(loss)\n    y = noise.cpu()"  # keeps loss's device
    assert findings(LOOP.format(stmt=copied)) == [("TL201", 7, 9)]
    default = "torch.set_default_device('cuda')\n" + LOOP.format(stmt=host)
    assert findings(default) == [("TL201", 8, 9)]


def test_epoch_loop_and_code_after_the_loop_are_silent():
    code = """\
    for epoch in range(10):
        for batch in loader:
            loss = model(batch)
            loss.backward()
        print(loss.item())
    print(loss.item())
    """
    assert findings(code) == []


def test_gradient_step_loop_without_a_loader():
    code = """\
    while step < max_steps:
        loss = model(next(it).cuda())
        scaler.scale(loss).backward()
        scaler.step(opt)
        log.append(loss.item())
    """
    assert findings(code) == [("TL201", 5, 16)]


def test_dataloader_bound_name_is_a_loader():
    code = """\
    from torch.utils.data import DataLoader as DL
    dl = DL(ds, num_workers=4)
    def fit():
        for x in dl:
            total.append(step_fn(x).item())
    """
    assert findings(code) == [("TL201", 5, 22)]


def test_plain_list_loop_is_silent():
    code = """\
    for t in tensors:
        out.append(t.cpu())
    for loader in loaders:
        out.append(loader.cpu())
    """
    assert findings(code) == []


@pytest.mark.parametrize(
    "code",
    [
        """\
        @torch.no_grad()
        def run(model, loader):
            for x in loader:
                preds.append(model(x).cpu())
        """,
        """\
        def run(model, loader):
            with torch.inference_mode():
                for x in loader:
                    preds.append(model(x).cpu())
        """,
        """\
        def evaluate(model, loader):
            for x in loader:
                total += model(x).sum().item()
        """,
        """\
        def run(model, val_loader):
            for x in enumerate(val_loader):
                total += model(x).sum().item()
        """,
    ],
)
def test_evaluation_loops_are_silent(code):
    assert findings("import torch\n" + textwrap.dedent(code)) == []


def test_gradient_step_makes_a_no_grad_named_function_a_training_loop():
    code = """\
    def evaluate_and_tune(model, loader, opt):
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            opt.step()
            print(loss.item())
    """
    assert findings(code) == [("TL201", 6, 15)]


def test_loader_output_moved_to_the_device_is_flagged():
    code = """\
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = model(x, y)
        loss.backward()
        labels = y.tolist()
    """
    assert findings(code) == [("TL201", 5, 14)]


def test_no_grad_inside_a_loop_without_a_step_is_evaluation():
    code = """\
    import torch
    def run(model, loader):
        for x in loader:
            with torch.no_grad():
                out = model(x.cuda())
            hits.append(out.sum().item())
    """
    assert findings(code) == []


@pytest.mark.parametrize("path", ["tests/test_train.py", "pkg/train_test.py", "conftest.py"])
def test_silent_in_test_code(path):
    code = LOOP.format(stmt="print(loss.item())") + "\n\ndef test_loop():\n    pass\n"
    assert findings(code, path) == []


def test_an_evaluation_script_named_test_is_linted():
    """`test_partseg.py`: a loop over a loader and a `__main__` block, no test in sight."""
    code = LOOP.format(stmt="print(loss.item())") + "\n\nif __name__ == '__main__':\n    train()\n"
    assert [f[0] for f in findings(code, "test_partseg.py")] == ["TL201"]


EVAL_SCRIPT = """\
import torch
def main(loader, session):
    for input, target in loader:
        output = session.run([], {"input": input.numpy()})
        prec1 = accuracy_np(output[0], target.numpy())
        top1.update(prec1.item(), input.size(0))
"""


@pytest.mark.parametrize("path", ["onnx_validate.py", "tools/eval.py", "scripts/inference.py", "predict.py"])
def test_loop_without_a_step_in_an_evaluation_script_is_silent(path):
    # timm's onnx_validate.py: the loop feeds an ONNX session and reads numpy results.
    assert findings(EVAL_SCRIPT, path) == []


@pytest.mark.parametrize("path", ["train.py", "train_eval.py", "tools/finetune.py"])
def test_loop_without_a_step_elsewhere_is_still_a_loader_loop(path):
    assert findings(EVAL_SCRIPT, path) == [("TL201", 6, 21)]


def test_a_gradient_step_in_an_evaluation_script_is_flagged():
    code = LOOP.format(stmt="print(loss.item())")
    assert findings(code, "evaluate.py") == [("TL201", 6, 11)]


def test_items_of_the_loaders_batch_stay_on_the_host():
    code = """\
    for batch in train_data_loader:
        for per_image in batch:
            img = per_image["image"].permute(1, 2, 0).cpu().detach().numpy()
        x = batch[0]
        x = x.cuda()
        loss = model(x)
        loss.backward()
        print(x.sum().item())
    """
    assert findings(code) == [("TL201", 8, 11)]


def test_prefilter_needs_a_loader_or_a_gradient_step():
    from torchlint.rules.host_sync import HostSyncInLoop

    assert HostSyncInLoop.may_fire("for b in val_DataLOADER:\n    b.item()\n")
    assert HostSyncInLoop.may_fire("while True:\n    loss . backward ()\n    loss.item()\n")
    assert HostSyncInLoop.may_fire("opt.step(\n)\nx.cpu()")
    assert not HostSyncInLoop.may_fire("for k, v in d.items():\n    print(v.item())\n")
