"""TL407: loss functions given inputs in the wrong form."""

from __future__ import annotations

import re
from typing import Optional, Set

from torchlint import _cst as cst

from torchlint.rules.base import Rule
from torchlint.semantic import CLASS
from torchlint.syntax import get_arg, method_call

SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_MODULE = "torch.nn.Softmax"
SEQUENTIAL = "torch.nn.Sequential"
# loss -> what its input must be
LOG_SOFTMAX_LOSSES = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.CrossEntropyLoss": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll_loss",
    "torch.nn.NLLLoss": "nll_loss",
}
_MAX_DEPTH = 6
# Cheap gates before the semantic model is asked (its data-flow tier costs a walk of the file),
# read from the few lines that name a loss module or softmax: names bound to a loss module, names
# bound on a line that calls softmax, a softmax layer or a returned softmax.
_TARGET = re.compile(r"\s*(?:[\w.]+\.)?([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")
_SOFTMAX_WORD = re.compile(r"(?<![\w])softmax(?!\w)")


def _text_gates(text: str):
    losses, assigned, layers = set(), set(), "Softmax" in text
    for line in text.splitlines():
        if "CrossEntropyLoss" in line or "NLLLoss" in line:
            m = _TARGET.match(line)
            if m:
                losses.add(m.group(1))
        if "softmax" in line and _SOFTMAX_WORD.search(line):
            m = _TARGET.match(line)
            if m:
                assigned.add(m.group(1))
            elif line.lstrip().startswith("return"):
                layers = True
    return frozenset(losses), frozenset(assigned), layers


class SoftmaxBeforeCrossEntropy(Rule):
    """Flags ``F.cross_entropy``/``nn.CrossEntropyLoss`` given probabilities from ``softmax``
    (``F.softmax(x)``, ``x.softmax(dim)``, ``nn.Softmax(dim)(x)``, a name bound to one of
    those, a model whose last layer is ``nn.Softmax``, a function or ``forward`` that returns a
    softmax), and ``F.nll_loss``/``nn.NLLLoss`` given ``softmax`` rather than ``log_softmax``.
    The loss object and the model are followed through names and ``self`` attributes with the
    semantic model. Silent whenever some value cannot be seen (a parameter, another file's
    model), and for ``log_softmax``/``torch.log(softmax(x))`` inputs.
    """

    code = "TL407"
    statement_local = False  # reads models and functions of the same file
    preview = True  # no finding on real code yet to show its precision
    name = "softmax-before-cross-entropy"
    summary = "`CrossEntropyLoss`/`cross_entropy` (or `NLLLoss`) applied to the output of `softmax`."
    message = "`{loss}` is given the output of `softmax`; pass the raw logits"
    hint = (
        "Cross-entropy applies `log_softmax` itself, so the probabilities are squashed twice and the "
        "gradients vanish."
    )
    _nll_message = "`{loss}` is given the output of `softmax`; use `log_softmax` (or logits with `cross_entropy`)"
    _nll_hint = "`NLLLoss` expects log-probabilities."
    requires = (("softmax", "Softmax"), ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss"))
    ast_candidate = staticmethod(lambda index: index.mentions("softmax", "Softmax", substring=True) and index.mentions(
        "cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", substring=True))
    tags = ("correctness",)

    def visit_Call(self, node: cst.Call) -> None:
        arg = get_arg(node, "input", 0)
        if arg is None or arg.star or not node.args or not self._could_be_softmax(arg.value):
            return
        loss = self._loss(node)
        if loss is None or not self._is_softmax(arg.value, set(), 0):
            return
        short = "nll_loss" if loss.endswith(("nll_loss", "NLLLoss")) else "cross_entropy"
        template = self._nll_message if short == "nll_loss" else self.message
        self.report(arg.value, template.format(loss=loss.rsplit(".", 1)[-1]),
                    hint=self._nll_hint if short == "nll_loss" else None)

    def _loss(self, call: cst.Call) -> Optional[str]:
        """The loss a call computes: ``F.cross_entropy(...)``, ``nn.CrossEntropyLoss()(...)``,
        ``criterion(...)`` where every value of ``criterion`` is such a module."""
        name = self.ctx.resolve_call(call)
        if name in ("torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"):
            return name
        func = call.func
        if isinstance(func, cst.Call):
            name = self.ctx.resolve_call(func)
            return name if name in ("torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss") else None
        if not isinstance(func, (cst.Name, cst.Attribute)) or name is not None:
            return None
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value
        if last not in self._text_facts()[0]:
            return None  # not a name the file binds to a loss module
        values = self.ctx.semantic.values_of(func)
        if not values or values == [func]:
            return None
        found = {self._module_class(v) for v in values}
        if len(found) == 1:
            only = found.pop()
            if only in ("torch.nn.CrossEntropyLoss", "torch.nn.NLLLoss"):
                return only
        return None

    def _text_facts(self):
        """(names bound to a loss module, names bound on a softmax line, a softmax layer or a
        returned softmax in the file), from the text once per file."""
        facts = self.ctx.analysis_memo.get(("tl407_text", 0))
        if facts is None:
            facts = self.ctx.analysis_memo[("tl407_text", 0)] = _text_gates(self.ctx.text)
        return facts

    def _could_be_softmax(self, node: cst.BaseExpression) -> bool:
        """A cheap test before the semantic model: could this expression be a softmax output?"""
        _, assigned, layers = self._text_facts()
        if isinstance(node, cst.Name):
            return node.value in assigned or layers
        if isinstance(node, cst.Attribute):
            return layers or node.attr.value in assigned
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "softmax":
                return True
            if isinstance(func, cst.Call):
                return True
            if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                                              and func.value.value in ("self", "F", "torch", "nn", "functional")):
                return True
        return False

    def _module_class(self, value: cst.BaseExpression) -> Optional[str]:
        return self.ctx.semantic.resolve_call(value) if isinstance(value, cst.Call) else None

    # -- is this value a softmax? ----------------------------------------------------------------
    def _is_softmax(self, node: cst.BaseExpression, seen: Set[int], depth: int) -> bool:
        if depth > _MAX_DEPTH or id(node) in seen:
            return False
        seen.add(id(node))
        semantic = self.ctx.semantic
        if isinstance(node, cst.Call):
            name = semantic.resolve_call(node)
            if name in SOFTMAX_FUNCTIONS:
                return True
            method = method_call(node)
            if method is not None and method[1] == "softmax" and name is None:
                return True  # x.softmax(dim)
            func = node.func
            if isinstance(func, cst.Call):  # nn.Softmax(dim=1)(x)
                return self._ends_in_softmax(func, seen, depth + 1)
            if isinstance(func, (cst.Name, cst.Attribute)) and name is None:
                return self._callee_returns_softmax(func, seen, depth + 1)
            return False
        if isinstance(node, (cst.Name, cst.Attribute)):
            values = semantic.values_of(node)
            if not values or values == [node]:
                return False
            return all(self._is_softmax(v, seen, depth + 1) for v in values)
        return False

    def _ends_in_softmax(self, module: cst.BaseExpression, seen: Set[int], depth: int) -> bool:
        """Is ``module`` an ``nn.Softmax(...)``, or an ``nn.Sequential`` whose last layer is one?"""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(module, (cst.Name, cst.Attribute)):
            values = self.ctx.semantic.values_of(module)
            if not values or values == [module]:
                return False
            return all(self._ends_in_softmax(v, seen, depth + 1) for v in values)
        if not isinstance(module, cst.Call):
            return False
        name = self.ctx.semantic.resolve_call(module)
        if name == SOFTMAX_MODULE:
            return True
        if name == SEQUENTIAL:
            layers = [a for a in module.args if a.keyword is None]
            if not layers or any(a.star for a in layers):
                return False
            return self._ends_in_softmax(layers[-1].value, seen, depth + 1)
        return False

    def _callee_returns_softmax(self, func: cst.BaseExpression, seen: Set[int], depth: int) -> bool:
        """``model(x)``: a module ending in softmax, an instance of a class of this file whose
        ``forward`` returns a softmax, or a function of this file that returns one."""
        semantic = self.ctx.semantic
        if self._ends_in_softmax(func, seen, depth):
            return True
        function = semantic.module_function(func)
        if function is None:
            function = self._forward_of_instance(func)
        if function is None:
            return False
        returned = semantic.returned_values(function)
        return bool(returned) and all(self._is_softmax(v, seen, depth + 1) for v in returned)

    def _forward_of_instance(self, func: cst.BaseExpression) -> Optional[cst.FunctionDef]:
        """``net`` bound only to ``Net(...)``, ``Net`` a class of this file: its ``forward``."""
        values = self.ctx.semantic.values_of(func)
        if not values or values == [func] or len(values) != 1 or not isinstance(values[0], cst.Call):
            return None
        cls_name = values[0].func
        if not isinstance(cls_name, cst.Name):
            return None
        bindings = self.ctx.semantic.lookup(cls_name)
        if not bindings or len(bindings) != 1 or bindings[0].kind != CLASS:
            return None
        cls = bindings[0].node
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "forward":
                return statement
        return None


RULES = [SoftmaxBeforeCrossEntropy]
