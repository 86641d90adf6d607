"""TL407: loss functions given inputs in the wrong form."""

from __future__ import annotations

import re
from typing import List, Optional, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import DELETE_LINES, REPLACE, FixSpec, NodeEdit
from torchlint.diagnostics import UNSAFE
from torchlint.model import Scope
from torchlint.rules.base import Rule
from torchlint.semantic import ASSIGN, CLASS
from torchlint.syntax import bound_names, enclosing_function, get_arg, literal_value, method_call
from torchlint.tree import walk

SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_MODULE = "torch.nn.Softmax"
# The class dimension of cross-entropy's input: a softmax over another dimension is dropped by hand.
_CLASS_DIMS = (1, -1)
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


_LOSS_WORDS = ("cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# `a = b` / `a = m.b`: an alias of what `b` names (the semantic model resolves through these)
_SIMPLE_ALIAS = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*(?:[A-Za-z_]\w*[ \t]*\.[ \t]*)*([A-Za-z_]\w*)[ \t]*(?:#.*)?$",
                           re.MULTILINE)


def _text_gates(text: str):
    losses, assigned, layers = set(), set(), "Softmax" in text
    callees = set(_LOSS_WORDS)
    for line in text.splitlines():
        if "CrossEntropyLoss" in line or "NLLLoss" in line:
            m = _TARGET.match(line)
            if m:
                losses.add(m.group(1))
        if any(word in line for word in _LOSS_WORDS):
            callees.update(_IDENTIFIER.findall(line))
        if "softmax" in line and _SOFTMAX_WORD.search(line):
            m = _TARGET.match(line)
            if m:
                assigned.add(m.group(1))
            elif line.lstrip().startswith("return"):
                layers = True
    # an alias of an alias (`ce = F.cross_entropy` elsewhere, then `loss_fn = ce`)
    pairs = [(m.group(1), m.group(2)) for m in _SIMPLE_ALIAS.finditer(text.replace("\r\n", "\n").replace("\r", "\n"))]
    changed = True
    while changed:
        changed = False
        for target, source in pairs:
            if source in callees and target not in callees:
                callees.add(target)
                changed = True
    return frozenset(losses), frozenset(assigned), layers, frozenset(callees)


def _dotted_name(node: cst.BaseExpression) -> Optional[str]:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


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
    # Precise on issue 29's real code (5 findings, all right), but its ast question says yes to
    # every file that spells softmax and a cross-entropy (279 files libcst parses on transformers
    # 4.46.3 instead of 159): a cold run went from 17.6 to 38 s CPU. In preview until it asks less.
    preview = True
    statement_local = False  # reads models and functions of the same file
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
    _model_message = (
        "`{loss}` is given a model output ending in `softmax`; make the model return logits"
    )
    tags = ("correctness",)
    fix_applicability = UNSAFE

    def visit_Call(self, node: cst.Call) -> None:
        arg = get_arg(node, "input", 0)
        if arg is None or arg.star or not node.args:
            return
        # the loss first (a resolved name, or a name the text binds to a loss module): the
        # model's probability modules are asked only of a loss's input
        loss = self._loss(node)
        if loss is None or not self._could_be_softmax(arg.value) or not self._is_softmax(arg.value, set(), 0):
            return
        short = "nll_loss" if loss.endswith(("nll_loss", "NLLLoss")) else "cross_entropy"
        template = self._nll_message if short == "nll_loss" else self.message
        fix = self._fix(node, arg.value, short == "nll_loss")
        if fix is None and self._softmax_call(arg.value) is None and self._bound_softmax(arg.value) is None:
            template = self._model_message  # the softmax is inside the model: no rewrite here is right
        self.report(arg.value, template.format(loss=loss.rsplit(".", 1)[-1]), fix,
                    hint=self._nll_hint if short == "nll_loss" else None)

    # -- the fix -----------------------------------------------------------------------------------
    def _softmax_call(self, node: cst.BaseExpression):
        """(its input, the call's text with ``log_softmax``/``LogSoftmax``, the softmax dimension or
        None when not given) for a softmax call written here: ``F.softmax(x, dim)``,
        ``torch.softmax(x, d)``, ``x.softmax(d)``, ``nn.Softmax(dim)(x)``; None for any other."""
        if not isinstance(node, cst.Call) or any(a.star for a in node.args):
            return None
        name = self.ctx.semantic.resolve_call(node)
        func = node.func
        if name in SOFTMAX_FUNCTIONS and isinstance(func, cst.Attribute):
            source = get_arg(node, "input", 0)
            dim = get_arg(node, "dim", 1)
            log = node.with_changes(func=func.with_changes(attr=cst.Name("log_softmax")))
        elif name is None and isinstance(func, cst.Attribute) and func.attr.value == "softmax" and isinstance(
                func.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            source = cst.Arg(value=func.value)
            dim = get_arg(node, "dim", 0)
            log = node.with_changes(func=func.with_changes(attr=cst.Name("log_softmax")))
        elif isinstance(func, cst.Call) and isinstance(func.func, cst.Attribute) and (
                self.ctx.semantic.resolve_call(func) == SOFTMAX_MODULE) and len(node.args) == 1:
            source = get_arg(node, "input", 0)
            dim = get_arg(func, "dim", 0)
            log = node.with_changes(func=func.with_changes(func=func.func.with_changes(attr=cst.Name("LogSoftmax"))))
        else:
            return None
        if source is None or source.star:
            return None
        return source.value, log, (literal_value(dim.value) if dim is not None else None)

    def _bound_softmax(self, node: cst.BaseExpression):
        """(the assignment line, the name's binding) for a name bound once, by a plain
        ``name = <softmax call>`` line, to the value read here."""
        if not isinstance(node, cst.Name):
            return None
        bindings = self.ctx.semantic.lookup(node)
        if not bindings or len(bindings) != 1 or bindings[0].kind != ASSIGN:
            return None
        binding = bindings[0]
        if self._softmax_call(binding.value) is None:
            return None
        return binding

    def _fix(self, call: cst.Call, value: cst.BaseExpression, nll: bool) -> Optional[FixSpec]:
        """Cross-entropy: the softmax's input in its place; NLL: ``log_softmax`` for ``softmax``.
        A name bound to the softmax is followed when its assignment sits earlier in the same
        block and the softmax's input is not rebound in between; the assignment goes when
        nothing else reads the probabilities."""
        direct = self._softmax_call(value)
        if direct is not None:
            source, log, dim = direct
            if nll:
                return FixSpec(UNSAFE, "Use `log_softmax`", (NodeEdit(value, log, REPLACE),))
            if dim is not None and dim not in _CLASS_DIMS:
                return None
            return FixSpec(UNSAFE, "Pass the logits, without `softmax`", (NodeEdit(value, source, REPLACE),))
        binding = self._bound_softmax(value)
        if binding is None:
            return None
        source, log, dim = self._softmax_call(binding.value)
        if not nll and dim is not None and dim not in _CLASS_DIMS:
            return None
        line = self._line_before_in_block(binding)
        if line is None or not self._unchanged_between(source, line):
            return None
        new = log if nll else source
        edits = [NodeEdit(value, new, REPLACE)]
        if self._only_read_here(binding, value) and self._removable(line, binding):
            edits.insert(0, NodeEdit(line, "", DELETE_LINES))
        what = "`log_softmax`" if nll else "the logits"
        return FixSpec(UNSAFE, f"Pass {what} in place of `{value.value}`", tuple(edits))

    def _line_before_in_block(self, binding) -> Optional[cst.SimpleStatementLine]:
        """The line that binds, when it is an earlier statement of the block holding the loss's
        statement; remembers the statements in between."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            block = ancestors[index - 1]
            if not isinstance(block, (cst.IndentedBlock, cst.Module)):
                continue
            statement = ancestors[index]
            body = list(block.body)
            position = next((i for i, s in enumerate(body) if s is statement), None)
            if position is None:
                return None
            for i in range(position - 1, -1, -1):
                line = body[i]
                if isinstance(line, cst.SimpleStatementLine) and any(s is binding.statement or any(
                        n is binding.node for n in walk(s)) for s in line.body):
                    self._between = body[i + 1:position + 1]
                    return line
            return None
        return None

    def _unchanged_between(self, source: cst.BaseExpression, line: cst.SimpleStatementLine) -> bool:
        """Is ``source`` a name (or a dotted name) that nothing between the softmax's line and
        the loss rebinds or assigns into?"""
        head = source
        while isinstance(head, cst.Attribute):
            head = head.value
        if not isinstance(head, cst.Name):
            return False
        name = head.value
        for statement in [line, *self._between]:
            for node in walk(statement):
                targets = []
                if isinstance(node, cst.Assign):
                    targets = [t.target for t in node.targets]
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                    targets = [node.target]
                elif isinstance(node, (cst.For, cst.NamedExpr)):
                    targets = [node.target]
                elif isinstance(node, cst.WithItem) and node.asname is not None:
                    targets = [node.asname.name]
                for target in targets:
                    if statement is line and not isinstance(source, cst.Attribute) and name not in bound_names(target):
                        continue
                    if any(isinstance(n, cst.Name) and n.value == name for n in walk(target)):
                        return False
        return True

    def _only_read_here(self, binding, read: cst.Name) -> bool:
        scope = enclosing_function(self.ctx) or self.ctx.module
        semantic = self.ctx.semantic
        for node in walk(scope):
            if isinstance(node, cst.Name) and node.value == read.value and node is not read and node is not binding.node:
                found = semantic.lookup(node)
                if found is None or any(b is binding for b in found):
                    return False
        return True

    @staticmethod
    def _removable(line: cst.SimpleStatementLine, binding) -> bool:
        """A line that is this one assignment to one name, with no comment to lose."""
        return (len(line.body) == 1 and isinstance(line.body[0], cst.Assign) and len(line.body[0].targets) == 1
                and isinstance(line.body[0].targets[0].target, cst.Name)
                and line.trailing_whitespace.comment is None)

    def _loss(self, call: cst.Call) -> Optional[str]:
        """The loss a call computes: ``F.cross_entropy(...)``, ``nn.CrossEntropyLoss()(...)``,
        ``criterion(...)`` where every value of ``criterion`` is such a module."""
        func = call.func
        # The last name of the callee (of the inner callee for `nn.CrossEntropyLoss()(...)`) must be
        # one a loss can be reached by: a loss's own name, or any name on a line that spells one (an
        # import alias, `criterion = nn.CrossEntropyLoss()`, `ce = F.cross_entropy`), through `a = b`
        # aliases: every other call is no loss, and is not resolved (57,521 calls, 18 s of the
        # profile on transformers 4.46.3, resolved for nothing).
        callee = func.func if isinstance(func, cst.Call) else func
        last = (callee.attr.value if isinstance(callee, cst.Attribute)
                else callee.value if isinstance(callee, cst.Name) else None)
        if last is None or last not in self._text_facts()[3]:
            return None
        name = self.ctx.resolve_call(call)
        if name in ("torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss"):
            return name
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
        _, assigned, layers, _ = self._text_facts()
        if isinstance(node, cst.Name):
            return node.value in assigned or layers or bool(self.ctx.model.probability_modules())
        if isinstance(node, cst.Attribute):
            return layers or node.attr.value in assigned or bool(self.ctx.model.probability_modules())
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
        if self._holds_probability_module(func):
            return True
        function = semantic.module_function(func)
        if function is None:
            function = self._forward_of_instance(func)
        if function is None:
            return False
        returned = semantic.returned_values(function)
        return bool(returned) and all(self._is_softmax(v, seen, depth + 1) for v in returned)

    def _holds_probability_module(self, func: cst.BaseExpression) -> bool:
        """``model(x)`` where the whole-file model says ``model`` (or ``self.net``), read where
        ``func`` is, holds a module returning a softmax in every binding: an instance of a class of
        the file (a notebook's other cell too) through ``.to(device)``/``.train()``, a Sequential
        ending in ``nn.Softmax`` moved with ``.to(device)``."""
        dotted = _dotted_name(func)
        if dotted is None or ("." in dotted and not dotted.startswith("self.")) or dotted.count(".") > 1:
            return False
        scope = self._model_scope(func)
        return scope is not None and self.ctx.model.holds_probability_module(scope, dotted)

    def _model_scope(self, node: cst.BaseExpression) -> Optional[Scope]:
        """The whole-file model's scope (``def``/``class`` names, outermost first) of ``node``;
        None inside a lambda or comprehension that binds the name read."""
        scope = self.ctx.semantic.scope_for(node)
        head = node
        while isinstance(head, cst.Attribute):
            head = head.value
        names: List[Tuple[str, str]] = []
        while scope is not None:
            owner = scope.node
            if isinstance(owner, cst.FunctionDef):
                names.append(("d", owner.name.value))
            elif isinstance(owner, cst.ClassDef):
                names.append(("c", owner.name.value))
            elif not isinstance(owner, cst.Module) and isinstance(head, cst.Name) and head.value in scope.bindings:
                return None
            scope = scope.parent
        return tuple(reversed(names))

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
