"""Does a file's own code train? (issue 29; TL701)

The question behind ``FileModel.may_train()`` (``model.py``), asked of one file's text; the project
summary records the same answer for every file (``project.py``), and the project index joins the
files of a program (a script and what it imports, ``ProjectIndex.inference_programs``). A plain
function of the text: this module imports neither libcst, the model nor the project.

A file *trains* unless its text certainly never does: it spells no gradient step and nothing that
drives one. Comments and strings count, which only errs towards "trains":

- a backward call (``loss.backward()``, ``accelerator.backward(loss)``, ``torch.autograd.backward``,
  ``autograd.grad(...)``; a custom ``autograd.Function``'s ``def backward(ctx, g)`` is not one);
- an optimizer step or any ``.step(`` call, an optimizer (any ``optim`` word: ``torch.optim``,
  ``optimizer``), ``zero_grad``;
- a framework that trains: a ``Trainer``, Lightning's ``training_step``, a call named for training
  or fitting (``train(...)``, ``model.train()``, ``train_one_epoch(...)``, ``trainer.fit(...)``,
  ``learn.fine_tune(...)``, ``fit_one_cycle``), which also stands for a training loop in a
  package outside the project.

Words that only look alike are not evidence: ``from_pretrained(...)``, ``pretrained=True``,
``is_train=False``, ``model.train(False)`` (evaluation mode).
"""

from __future__ import annotations

import re
from typing import Optional

# Any of these anywhere: the file may train (`training_step`, `Trainer(` are calls named for
# training, found below).
_WORDS = ("optim", "zero_grad")
_STEP = re.compile(r"\.\s*step\s*\(")
# The words of a name called for training or fitting, as a name spells them (snake, camel or upper
# case), found with ``str.find`` (a regex alternation, or lower-casing the text, costs several
# times more) and read around by hand.
_CORES = ("train", "Train", "TRAIN", "fit", "Fit", "FIT", "finetune", "fine_tune", "Finetune", "FineTune",
          "Fine_tune")
# `model.train(False)`: evaluation mode, not training.
_EVAL_MODE = re.compile(r"\s*(?:mode\s*=\s*)?False\s*\)")
_NAME_REST = re.compile(r"\w*")
_BLANKS = re.compile(r"[ \t]*")


def training_word(text: str) -> Optional[str]:
    """Why ``text`` may train (the evidence found first), or None when it certainly does not."""
    for word in _WORDS:
        if word in text:
            return word
    if "step" in text and _STEP.search(text):
        return ".step("
    if "autograd." in text and ("autograd.grad" in text or "autograd.backward" in text):
        return "autograd"
    at = text.find("backward")
    while at >= 0:
        if not (at and (text[at - 1].isalnum() or text[at - 1] == "_")):  # not `save_for_backward(`
            after = _end(_BLANKS, text, at + 8)
            if after < len(text) and text[after] == "(":
                line = text[text.rfind("\n", 0, at) + 1:at]
                if not line.rstrip().endswith("def"):  # `def backward(ctx, grad)`: an autograd Function
                    return "backward("
        at = text.find("backward", at + 1)
    for core in _CORES:
        at = text.find(core)
        while at >= 0:
            if text.startswith("ed", at + len(core)) or text.startswith("ED", at + len(core)):
                pass  # `pretrained`, `trained`, `fitted`: a participle, never the word called
            else:
                name = _call_named_for_training(text, at, at + len(core))
                if name is not None:
                    return name
            at = text.find(core, at + 1)
    return None


def _call_named_for_training(text: str, start: int, end: int) -> Optional[str]:
    """The callee's name when the word at ``text[start:end]`` is a word of a name that is called
    (``name(``, not ``name(False)``), else None."""
    last = _end(_NAME_REST, text, end)
    after = _end(_BLANKS, text, last)
    if after >= len(text) or text[after] != "(" or _EVAL_MODE.match(text, after + 1):
        return None
    first = start
    while first > 0 and (text[first - 1].isalnum() or text[first - 1] == "_"):
        first -= 1
    if not _is_word_part(text[first:start], text[start:end], text[end:last]):
        return None
    return text[first:last]


def _end(pattern: "re.Pattern[str]", text: str, at: int) -> int:
    """Where ``pattern`` (which matches the empty string too) stops matching from ``at``."""
    found = pattern.match(text, at)
    return found.end() if found is not None else at


def _is_word_part(before: str, word: str, after: str) -> bool:
    """Is ``word`` a word of the name ``before + word + after`` (snake or camel case), and not
    ``pretrained``/``trained``/``fitted``-like (a participle: a model already trained)?
    ``pretrain``/``retrain``/``refit`` are training."""
    if before and not (before.endswith("_") or (word[0].isupper() and not before[-1].isupper())
                       or before.lower().endswith(("pre", "re"))):
        return False
    if word.lower() == "fit" and before.lower().endswith("pre"):
        return False
    if not after:
        return True
    if after[0] == "_" or (after[0].isupper() and not word[-1].isupper()):
        return True
    return after.lower().startswith(("ing", "er"))
