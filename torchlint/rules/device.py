"""TL2xx: device placement."""

from __future__ import annotations

import ast
import re
import unicodedata
import weakref
from bisect import bisect_right
from typing import Dict, FrozenSet, List, Optional, Tuple

from torchlint import _cst as cst

from torchlint.astindex import line_starts, statement_first_line
from torchlint.context import DELETE_LINES, FixSpec, NodeEdit
from torchlint.diagnostics import SAFE, UNSAFE
from torchlint.fixbuilders import with_keyword_args
from torchlint.heuristics import is_accelerator_device, is_per_step_function, moves_to_accelerator
from torchlint.loops import runs_every_step
from torchlint.model import scope_of
from torchlint.movers import (
    VARIABLES, class_part, is_device_attribute, is_variable, mover_position, movers_of, returns_a_move, strip,
)
from torchlint.rules.base import GAP, Rule
from torchlint.semantic import ASSIGN, AUGMENT
from torchlint.syntax import (
    enclosing_function,
    enclosing_loops,
    get_arg,
    literal_value,
    method_call,
    move_arguments,
    name_tokens,
    tensor_factory,
)
from torchlint.torch_api import (
    DEVICE_FACTORIES,
    DTYPE_EXACT_FACTORIES,
    HOST_CHAIN_METHODS,
    RANDOM_FACTORIES,
    TENSOR_CUDA_PARAMS,
    TENSOR_TO_PARAMS,
)
from torchlint.tree import walk

# The prefilter's `.to(` / `.cuda(`, however it is spelt (see GAP). Sound: the rule only fires on
# an Attribute `to`/`cuda` that is called.
MOVE_CALL = re.compile(rf"\.{GAP}(?:to|cuda){GAP}\(")
_FACTORY_NAMES = frozenset(DEVICE_FACTORIES)


_ASSIGNS = re.compile(r"(?<![=!<>:])=(?!=)|:=")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CONTINUES = tuple("([{,\\=")


def _constructor_targets(text: str) -> set:
    """Names that some statement calling a constructor (without ``device=`` and the like) may
    assign: every identifier before the statement's last ``=``/``:=`` ahead of the call. The
    statement starts at the call's line, or earlier while the line above ends in a bracket, a
    comma, ``=`` or a backslash."""
    names: set = set()
    starts: Optional[List[int]] = None
    statement_of: Dict[int, int] = {}  # a line's start -> its statement's start
    furthest: Dict[int, int] = {}  # a statement's start -> where its last such call starts
    for call_start, call_end in _factory_calls(text)[0]:
        if not _may_build_on_host(text, call_end):
            continue
        if starts is None:  # a table, not a `rfind` per call: linear on a long line of calls
            starts = line_starts(text)
        line = starts[bisect_right(starts, call_start) - 1]
        start = statement_of.get(line)
        if start is None:
            start = line
            for _ in range(20):
                above = text[text.rfind("\n", 0, max(start - 1, 0)) + 1:max(start - 1, 0)]
                if start == 0 or not above.split("#", 1)[0].rstrip().endswith(_CONTINUES):
                    break
                start = text.rfind("\n", 0, start - 1) + 1
            statement_of[line] = start
        furthest[start] = max(furthest.get(start, 0), call_start)
    # The identifiers before a statement's last `=` ahead of its furthest call hold those ahead
    # of any earlier call of the same statement (a prefix of it): one scan per statement.
    for start, end in furthest.items():
        head = text[start:end]
        last = None
        for last in _ASSIGNS.finditer(head):
            pass
        if last is not None:
            names.update(_IDENTIFIER.findall(head[:last.start()]))
    if _RANGE_FROM_TORCH.search(text):
        names.add("*")  # `range(` may be torch's: any name may hold it
    return names


_ON_PURPOSE_ARG = re.compile(rf"(?:device|out|pin_memory|generator){GAP}=|\*\*")  # _HOST_ON_PURPOSE


def _may_build_on_host(text: str, start: int) -> bool:
    """The arguments of the call whose ``(`` ends at ``start``: False when one at the call's own
    level is ``device=``/``out=``/``pin_memory=``/``generator=`` or ``**kwargs`` (the rule is
    silent on those); True otherwise, and whenever a string or comment hides the brackets."""
    depth, i, piece = 0, start, start
    while i < len(text):
        c = text[i]
        if c in "'\"#":
            return True
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return not _ON_PURPOSE_ARG.match(text[piece:i].strip())
            depth -= 1
        elif c == "," and depth == 0:
            if _ON_PURPOSE_ARG.match(text[piece:i].strip()):
                return False
            piece = i + 1
        i += 1
    return True

# torch.FloatTensor(n, m) and friends: a legacy constructor; given sizes it builds on the CPU
# (``torch.Tensor(n, m)``, the default dtype, too: issue 29 class 4).
LEGACY_TENSOR_TYPES = frozenset({
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
    "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor", "Tensor",
})
# Constructors that copy host data: with device= the data is still built on the CPU and copied
# (torch.tensor(list, device=d) does exactly that internally), so moving afterwards costs nothing more.
HOST_DATA_FACTORIES = frozenset({"tensor"})
_SCAN_NAMES = _FACTORY_NAMES | LEGACY_TENSOR_TYPES
# `range(` is Python's unless spelt `torch.range(` or imported from torch.
_FACTORY_CALL = re.compile(
    rf"(?:(?<!\w)(?:{'|'.join(sorted(_SCAN_NAMES - HOST_DATA_FACTORIES - {'range'}))})|\.{GAP}range){GAP}\(")
_RANGE_FROM_TORCH = re.compile(r"from\s+torch\s+import\s*\(?[^)\n]*\brange\b")

# Arguments of .to()/.cuda() that the fix may drop: the fresh tensor is a copy already, and
# building it on the device needs no transfer to wait for.
_DROPPABLE = frozenset({"non_blocking", "copy"})
# Factory arguments that make the host tensor deliberate: a pinned staging buffer, an `out=`
# tensor, a host generator chosen for reproducibility, or an explicit device.
_HOST_ON_PURPOSE = ("device", "out", "pin_memory", "generator")


# What ``_created_on_host`` accepts, at ``ast`` level: a callee whose last name is one of these
# (``x.zeros(...)``), or a name bound to ``torch.<one of these>`` (``AstIndex.bindings``).
_HOST_BUILT = (DEVICE_FACTORIES - HOST_DATA_FACTORIES) | LEGACY_TENSOR_TYPES
_HOST_BUILT_NAMES = frozenset("torch." + name for name in _HOST_BUILT)
_CHAIN = frozenset(HOST_CHAIN_METHODS)


def _may_build_on_host_ast(index, call: ast.AST) -> bool:
    """Could ``call`` be a constructor call ``_created_on_host`` accepts (a torch constructor,
    not ``torch.tensor``, without ``**kwargs`` or a ``device=``-like keyword)?"""
    if type(call) is not ast.Call:
        return False
    func = call.func
    if type(func) is ast.Attribute:
        if func.attr not in _HOST_BUILT:
            return False
    elif type(func) is ast.Name:
        if func.id not in _HOST_BUILT and func.id not in _aliases(index):
            return False
    else:
        return False
    return not any(kw.arg is None or kw.arg in _HOST_ON_PURPOSE for kw in call.keywords)


def factory_then_move_ast(index) -> bool:
    """The ast question: a ``.to(``/``.cuda(`` whose receiver is such a constructor call, through
    host methods and ``Variable(x)`` (``torch.ones(1).fill_(v).to(d)``), or a name assigned one
    somewhere in these statements (``eye = torch.eye(3)`` ... ``eye.cuda()``, ``Variable(eye).cuda()``,
    ``eye.expand_as(x).to(d)``); the same given to a function of the file that moves its argument
    (``movers.py``: ``self.to_gpu(torch.randn(n))``). A constructor call in the statements comes
    first: where the text spells none (most definitions of a model file) nothing else is asked."""
    lines = _in_statements(index, _constructor_lines(index))
    if not lines:
        return False  # nothing built here: the rule's every site needs a constructor call
    named = set()
    for call, _ in index.method_calls("to", "cuda"):
        base = strip(index, call.func.value, _CHAIN)
        if type(base) is ast.Name:
            named.add(base.id)
        elif _may_build_on_host_ast(index, base):
            return True
    movers = movers_of(index.whole())
    if movers:
        for node, parents, _ in index.occurrences(sorted({name for _, name, _ in movers})):
            call = parents[-1] if parents else None
            if type(call) is not ast.Call or call.func is not node:
                continue
            for arg in call.args:
                base = strip(index, arg, _CHAIN)
                if type(base) is ast.Name:
                    named.add(base.id)
                elif _may_build_on_host_ast(index, base):
                    return True
    if not named:
        return False
    for line in lines:
        for node, parents in index.nodes_on(line):
            if _may_build_on_host_ast(index, node) and not named.isdisjoint(_assigned_names(index, node, parents)):
                return True
    return False


_FACTORY_WORDS = _SCAN_NAMES - HOST_DATA_FACTORIES - {"range"}  # what `_FACTORY_CALL` spells
# One literal-led regex per stem (a regex alternation of the words reads ~13 MB/s, these ~500):
# a constructor's name is a word the stem starts, or ends (`FloatTensor`).
_STEMS = tuple(re.compile(rf"{stem}\w*") for stem in (
    "Tensor", "arange", "empty", "eye", "full", "linspace", "logspace", "normal", "ones", "rand",
    "tril_indices", "triu_indices", "zeros"))
_CALLED_OR_ALIASED = re.compile(rf"{GAP}(?:(\()|as(?!\w)|)")
_TORCH_RANGE = re.compile(rf"\.{GAP}range{GAP}\(")
_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")
_DEF = re.compile(rf"def{GAP}([A-Za-z_]\w*){GAP}\(")  # led by its literal: one pass over the text
_CONSTRUCTOR_LINES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # a file's index -> (lines, aliases)


def _factory_calls(text: str) -> Tuple[List[Tuple[int, int]], bool]:
    """(where each constructor call ``_FACTORY_CALL`` would find starts and its ``(`` ends, in
    order; whether the text may bind a constructor to another name: ``import zeros as z``,
    ``make = torch.ones``, ``from torch import range``)."""
    calls: List[Tuple[int, int]] = []
    aliased = _RANGE_FROM_TORCH.search(text) is not None
    for pattern in _STEMS:
        for match in pattern.finditer(text):
            i, end = match.start(), match.end()
            while i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i -= 1
            if text[i:end] not in _FACTORY_WORDS:
                continue
            after = _CALLED_OR_ALIASED.match(text, end)
            if after is not None and after.group(1):
                calls.append((i, after.end()))
            elif after is not None and after.end() > end and text[after.end() - 2:after.end()] == "as":
                aliased = True  # `import zeros as z`
            elif not aliased:
                k = i  # back over the dotted name before it (`torch.`), to what precedes that
                while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_. \t"):
                    k -= 1
                aliased = text[k - 1:k] == "=" and text[k - 2:k - 1] not in ("=", "!", "<", ">")  # `z = torch.zeros`
    calls.extend((m.start(), m.end()) for m in _TORCH_RANGE.finditer(text))
    calls.sort()
    return calls, aliased


def _constructor_lines(index) -> List[int]:
    """Lines of the file where a constructor ``_may_build_on_host_ast`` accepts may be called:
    ``zeros(``, ``torch.FloatTensor (``, ``torch.range(`` as the text spells them, the calls of
    names bound to one (``from torch import zeros as z``, ``make = torch.ones``, ``from torch
    import range``: the index's bindings, asked only when the text spells such a thing), and
    called names with other than ASCII letters that read as one (``ｚｅｒｏｓ(``: CPython's tree
    holds identifiers in NFKC)."""
    return _constructors(index)[0]


def _in_statements(index, lines: List[int]) -> List[int]:
    """Those of ``lines`` within the statements ``index`` sees (a restricted index: one
    definition and the module's other statements)."""
    body = index.tree.body
    if not lines or not body:
        return []
    firsts = [statement_first_line(s) for s in body]
    kept = []
    for line in lines:
        i = bisect_right(firsts, line) - 1
        if i >= 0 and line <= (body[i].end_lineno or body[i].lineno):
            kept.append(line)
    return kept


def _aliases(index) -> FrozenSet[str]:
    """Names other than a constructor's own bound to a torch constructor (``AstIndex.bindings``)."""
    return _constructors(index)[1]


def _constructors(index) -> Tuple[List[int], FrozenSet[str]]:
    whole = index.whole()
    found = _CONSTRUCTOR_LINES.get(whole)
    if found is not None:
        return found
    text = whole.text
    calls, aliased = _factory_calls(text)
    starts = [start for start, _ in calls]
    aliases: FrozenSet[str] = frozenset()
    if aliased:
        aliases = frozenset(name for name, qualified in whole.bindings().items()
                            if name not in _FACTORY_WORDS and qualified & _HOST_BUILT_NAMES)
    table = whole._lines()
    lines = {bisect_right(table, i) for i in starts}
    for name in aliases:
        lines.update(whole.word_lines(name, call=True))
    if not text.isascii():
        for run in _NOT_ASCII.finditer(text):
            i, end = run.start(), run.end()
            while i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i -= 1
            while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                end += 1
            word = unicodedata.normalize("NFKC", text[i:end])
            if word.isidentifier() and (word in _FACTORY_WORDS or word in aliases or word == "range"):
                lines.add(bisect_right(table, i))
    found = _CONSTRUCTOR_LINES[whole] = (sorted(lines), aliases)
    return found


def _assigned_names(index, call: ast.AST, parents) -> set:
    """The names an assignment binds when its value is ``call``, through host methods,
    ``Variable(...)`` and tuples (``a, y = torch.zeros(1), 2`` binds both, as far as this asks)."""
    node = call
    for parent in reversed(parents):
        kind = type(parent)
        if kind is ast.Attribute and parent.value is node and parent.attr in _CHAIN:
            node = parent
        elif kind is ast.Call and (parent.func is node and type(node) is ast.Attribute or (
                len(parent.args) == 1 and parent.args[0] is node and is_variable(index, parent.func))):
            node = parent
        elif kind in (ast.Tuple, ast.List, ast.Starred):
            node = parent
        elif kind in (ast.Assign, ast.AnnAssign, ast.NamedExpr) and parent.value is node:
            targets = parent.targets if kind is ast.Assign else [parent.target]
            return {n.id for t in targets for n in ast.walk(t) if type(n) is ast.Name}
        else:
            break
    return set()


class TensorMovedAfterCreation(Rule):
    """Flags a tensor built on the host and moved at once: ``torch.zeros(n).cuda()``,
    ``torch.randn(n).to(device)``, ``torch.arange(n).to("cuda", torch.half)``.

    The tensor is filled on the CPU, then copied over PCIe; ``device=`` builds it on the device
    directly. Only a `.to()`/`.cuda()` applied straight to a torch factory call is flagged, and
    only when its target is recognisably a device (``"cuda:1"``, ``0``, ``torch.device(...)``,
    names like ``device``/``self.device``/``local_rank``). Silent: ``.to(dtype)``,
    ``.to(other_tensor)``, ``.to("cpu")``, ``.to(memory_format=...)``, ``.to(*args)``,
    ``torch.from_numpy``/``*_like`` calls, and factories given ``device=``, ``out=``,
    ``pin_memory=``, ``generator=`` or ``**kwargs``.
    """

    code = "TL202"
    name = "tensor-moved-after-creation"
    summary = "A tensor is created on the CPU and immediately moved to a device; pass `device=` instead."
    message = "Tensor created on the CPU then moved; pass `device=` to the factory"
    hint = "Creating it on the host and copying it costs an allocation and a copy; `device=` builds it in place."
    requires = ((MOVE_CALL,), tuple(sorted(DEVICE_FACTORIES | LEGACY_TENSOR_TYPES)))
    ast_candidate = staticmethod(factory_then_move_ast)
    fix_applicability = SAFE  # unsafe for random factories, requires_grad and inexact dtype casts
    method_local = True  # the move, and a name bound to a factory in the same function
    uses_project = True  # FileModel.uses_accelerator's project half

    def report(self, node, message=None, fix=None, hint=None) -> None:
        """A move to a device that never exists costs nothing: none in a program that never
        touches an accelerator (``FileModel.uses_accelerator``, issue 29 class 5)."""
        if self.ctx.model.uses_accelerator():
            super().report(node, message, fix, hint)

    def visit_Call(self, node: cst.Call) -> None:
        method = method_call(node)
        if method is None or method[1] not in ("cuda", "to"):
            if node.args and self._returns_a_move() and self._may_hand_over_a_constructor(node) and self._mover_names():
                self._moved_by_helper(node)
            return
        origin = self._host_origin(method[0])
        if origin is None:
            return
        receiver, bound, (factory, short, chained) = origin
        moved = _move_target(node, method[1], self.ctx, self._device_attribute)
        if moved is None:
            other = self._device_tensor_target(node) if method[1] == "to" else None
            if other is not None:  # `.to(actions)`: its device and its dtype, no fix
                what = f"`{receiver.value}` created" if bound is not None else "Tensor created"
                spelt = cst.Module(body=[]).code_for_node(other)
                self.report(node, f"{what} on the CPU then moved; pass `device={spelt}.device` to the factory",
                            hint=self.hint + f" `.to({spelt})` moves it to `{spelt}`'s device and dtype: pass both." + self._every_step())
            return
        device, dtype = moved
        fix = None
        if not chained and short in DEVICE_FACTORIES:
            if bound is None:
                fix = self._fix(node, factory, short, device, dtype)
            elif dtype is None:
                fix = self._bound_fix(node, receiver, bound[0], factory, short, device)
        what = f"`{receiver.value}` created" if bound is not None else "Tensor created"
        # a legacy constructor takes no device= (`torch.FloatTensor(n, device="cuda")` raises)
        advice = ("build it with `torch.empty(..., dtype=..., device=...)`" if short in LEGACY_TENSOR_TYPES
                  else "pass `device=` to the factory")
        self.report(node, f"{what} on the CPU then moved; {advice}",
                    fix=fix, hint=self.hint + self._every_step())

    def _names_bound_to_constructors(self) -> frozenset:
        """Names the text may assign a constructor's result to (the prefilter's test), once per file."""
        found = getattr(self, "_bound_names", None)
        if found is None:
            found = self._bound_names = frozenset(_constructor_targets(self.ctx.text))
        return found

    def _bound_name(self, name: cst.Name):
        """``_bound_on_host`` of a name moved, after the cheap text check (the data-flow model
        costs a walk of the file)."""
        targets = self._names_bound_to_constructors()
        if name.value not in targets and "*" not in targets:
            return None
        return self._bound_on_host(name)

    def _strip(self, expr: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
        """(what ``expr`` is made of, whether anything was gone through): through host methods
        (``.float()``, ``.expand_as(x)``) and ``torch.autograd.Variable(x)``, which is ``x``."""
        through = False
        while True:
            method = method_call(expr)
            if method is not None and method[1] in HOST_CHAIN_METHODS:
                expr, through = method[0], True
            elif (isinstance(expr, cst.Call) and len(expr.args) == 1 and expr.args[0].keyword is None
                  and not expr.args[0].star and self.ctx.resolve_call(expr) in VARIABLES):
                expr, through = expr.args[0].value, True
            else:
                return expr, through

    def _device_tensor_target(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        """``x`` in ``.to(x)`` (alone, or with ``non_blocking=``/``copy=``) when the semantic model
        knows ``x`` is a tensor on the device: moved there, built there (``torch.tensor(...,
        device=device)``), or computed from such a tensor. Unknown stays silent."""
        positional = [a for a in node.args if a.keyword is None]
        if len(positional) != 1 or positional[0].star or any(
                a.keyword is not None and a.keyword.value not in _DROPPABLE for a in node.args):
            return None
        other = positional[0].value
        if not isinstance(other, (cst.Name, cst.Attribute, cst.Subscript)):
            return None
        return other if self.ctx.semantic.on_device(other, self._puts_on_device) else None

    def _puts_on_device(self, call: cst.Call) -> bool:
        """A move to an accelerator, or a torch constructor given an accelerator ``device=``."""
        if moves_to_accelerator(self.ctx, call):
            return True
        device = get_arg(call, "device")
        return (device is not None and is_accelerator_device(self.ctx, device.value)
                and tensor_factory(self.ctx, call) is not None)

    def _device_attribute(self, expr: cst.BaseExpression) -> bool:
        """``self.<attr>`` where every binding of the attribute in the file is a device index or
        string, assigned in this class (``FileModel.device_attributes``)."""
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"):
            return False
        cls = class_part(scope_of(self.ctx.ancestors))
        return is_device_attribute(self.ctx.model.device_attributes(), cls, expr.attr.value)

    def _returns_a_move(self) -> bool:
        """Does the text spell a ``return ... .to(``/``.cuda(`` (``movers.returns_a_move``)? Once per file."""
        found = getattr(self, "_spells_a_mover", None)
        if found is None:
            found = self._spells_a_mover = returns_a_move(self.ctx.text)
        return found

    def _may_hand_over_a_constructor(self, node: cst.Call) -> bool:
        """The cheap test before the whole-file model is asked for movers: ``f(...)`` or
        ``self.f(...)`` given a call or a name the text may bind to a constructor's result."""
        func = node.func
        if isinstance(func, cst.Name):
            name = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            name = func.attr.value
        else:
            return False
        defined = getattr(self, "_defined", None)
        if defined is None:  # `def name(` in the text: the functions of the file (not builtins, not imported)
            text = self.ctx.text
            defined = self._defined = frozenset(
                m.group(1) for m in _DEF.finditer(text) if m.start() == 0 or not (text[m.start() - 1].isalnum()
                                                                                  or text[m.start() - 1] == "_"))
        if name not in defined:
            return False
        for arg in node.args:
            value = arg.value
            while (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                   and value.func.attr.value in HOST_CHAIN_METHODS):
                value = value.func.value  # through host methods, to the constructor or the name
            if isinstance(value, cst.Call):
                return True
            if isinstance(value, cst.Name):
                targets = self._names_bound_to_constructors()
                if value.value in targets or "*" in targets:
                    return True
        return False

    def _mover_names(self) -> frozenset:
        """Names of the file's functions that move their argument (``FileModel.movers``), once."""
        found = getattr(self, "_movers", None)
        if found is None:
            found = self._movers = frozenset(name for _, name, _ in self.ctx.model.movers())
        return found

    def _moved_by_helper(self, node: cst.Call) -> None:
        """``self.to_gpu(torch.randn(n))``, ``to_device(z)`` with ``z = torch.zeros(n)``: a
        constructor's result handed to a function of the file that moves its argument to the
        device (``movers.py``). No fix: the device is chosen inside the helper."""
        func = node.func
        if isinstance(func, cst.Name):
            name, container = func.value, ()
            if name not in self._mover_names():
                return
            found = self.ctx.semantic.lookup(func)
            if not found or len(found) != 1 or not isinstance(found[0].scope.node, cst.Module):
                return  # another binding of the name may be what is called
            callee = name
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            name = func.attr.value
            if name not in self._mover_names():
                return
            container = class_part(scope_of(self.ctx.ancestors))
            callee = f"self.{name}"
        else:
            return
        if self.ctx.semantic.module_function(func) is None:
            return
        position = mover_position(self.ctx.model.movers(), container, name)
        if position is None:
            return
        positional = [a for a in node.args if a.keyword is None]
        if len(positional) <= position or any(a.star for a in positional[:position + 1]):
            return
        origin = self._host_origin(positional[position].value)
        if origin is None:
            return
        base, bound, (_, short, _) = origin
        what = f"`{base.value}` created" if bound is not None else "Tensor created"
        advice = ("build it with `torch.empty(..., dtype=..., device=...)`" if short in LEGACY_TENSOR_TYPES
                  else "pass `device=` to the factory")
        self.report(node, f"{what} on the CPU then moved by `{callee}`; {advice}",
                    hint=self.hint + " No fix: the helper picks the device." + self._every_step())

    def _host_origin(self, expr: cst.BaseExpression):
        """(the expression, the binding it is read through or None, (constructor call, its short
        name, whether host steps follow it)) when ``expr`` is a tensor built on the host: a
        constructor call, or a name bound to one, behind host steps (``Variable(z)``,
        ``z.expand_as(x)``: then no fix, the author picks the host steps); else None."""
        base, through = self._strip(expr)
        if not isinstance(base, cst.Name):
            created = self._created_on_host(expr)
            return (expr, None, created) if created is not None else None
        bound = self._bound_name(base)
        if bound is None:
            return None
        created = bound[1]
        return base, bound, ((created[0], created[1], True) if through else created)

    def _created_on_host(self, expr: cst.BaseExpression) -> Optional[Tuple[cst.Call, str, bool]]:
        """(constructor call, its short name, whether host methods follow it) when ``expr`` is a
        torch constructor call building a new host tensor (``torch.zeros(n)``,
        ``torch.FloatTensor(n, m)``), maybe followed by fills, casts and reshapes
        (``.fill_(v).type_as(x)``) or wrapped in ``Variable(...)``; None otherwise."""
        expr, chained = self._strip(expr)
        if not isinstance(expr, cst.Call):
            return None
        short = tensor_factory(self.ctx, expr)
        if short is None:
            name = self.ctx.resolve_call(expr)
            if name is None or not name.startswith("torch.") or name[6:] not in LEGACY_TENSOR_TYPES:
                return None
            if not _legacy_sizes(expr):
                return None  # torch.FloatTensor(data): host data, copied either way
            return expr, name[6:], True
        if short not in DEVICE_FACTORIES or short in HOST_DATA_FACTORIES or not _takes_device(expr, short):
            return None
        if any(arg.star == "**" for arg in expr.args):
            return None  # **kwargs may already carry device=
        if any(get_arg(expr, name) is not None for name in _HOST_ON_PURPOSE):
            return None
        return expr, short, chained

    def _bound_on_host(self, name: cst.Name, inner: bool = False):
        """(binding, created) for ``eye.cuda()`` where the only binding of ``eye`` that reaches is
        ``eye = <constructor>(...)`` in the same function (not ``__init__``: built once), and this
        move is the only read of it (a tensor also used on the host, or moved to several devices,
        needs its host copy). The binding may build on an earlier one of the same name, read
        there alone (``eta = torch.rand(n)``, ``eta = eta.expand(n, m)``: ``inner``, the
        constructor's ``created`` counts as chained). Other reads are allowed only where the
        host tensor is what a program without a device reads (``_host_branch_of``,
        ``_guarded_rebinding``, ``_read_only_without_device``)."""
        model = self.ctx.semantic
        bindings = model.lookup(name)
        if not bindings or len(bindings) != 1:
            return None
        binding = bindings[0]
        scope = model.scope_for(name)
        if binding.kind != ASSIGN or binding.value is None or binding.scope is not scope or not scope.is_function:
            return None
        if not isinstance(scope.node, cst.FunctionDef) or scope.node.name.value == "__init__":
            return None
        created = self._created_on_host(binding.value)
        if created is None:
            base, _ = self._strip(binding.value)
            if inner or not isinstance(base, cst.Name) or base.value != name.value or base is name:
                return None
            earlier = self._bound_on_host(base, inner=True)  # `eta = eta.expand(...)`
            if earlier is None:
                return None
            created = (earlier[1][0], earlier[1][1], True)
        store_ids = {id(b.node) for b in scope.bindings.get(name.value, ()) if b.kind != AUGMENT}
        reads = [n for n in walk(scope.node.body) if isinstance(n, cst.Name) and n.value == name.value
                 and id(n) not in store_ids and n is not binding.node]
        uses = [n for n in reads if any(b is binding for b in model.lookup(n) or ())]
        if name not in uses:
            return None
        if len(uses) > 1 and inner:
            return None
        if len(uses) > 1 and not (len(uses) == 2 and self._host_branch_of(name, uses)) and not self._read_only_without_device(name, uses):
            # `m = m.cuda()` under `if x.is_cuda:`: a later read sees the host tensor only where
            # the test said there is no device (issue 29 class 4); any other read keeps it silent
            moved = self._guarded_rebinding(name, scope)
            if moved is None or not all(n is name or any(b is moved for b in model.lookup(n) or ()) for n in uses):
                return None
        return binding, created

    def _read_only_without_device(self, name: cst.Name, uses: List[cst.Name]) -> bool:
        """The move is in the body of an ``if`` that asks for the device, and every other read of
        the binding is in that ``if``'s ``else`` (``if self.cuda: z = Variable(z).cuda(0)`` /
        ``else: z = Variable(z)``): the host tensor is read only where there is no device."""
        up = self.ctx.ancestors
        for i in range(len(up) - 2, -1, -1):
            guard = up[i]
            if not isinstance(guard, cst.If) or up[i + 1] is not guard.body or guard.orelse is None:
                continue
            if not _asks_for_device(self.ctx, guard.test):
                return False
            other = {id(n) for n in walk(guard.orelse) if isinstance(n, cst.Name)}
            branches = (guard.body, guard.orelse.body if isinstance(guard.orelse, cst.Else) else None)
            return all(n is name or id(n) in other or self._rebound_in_both(n, branches) for n in uses)
        return False

    def _rebound_in_both(self, read: cst.Name, branches) -> bool:
        """Does ``read`` (after the ``if``) see a binding made at the top of each of its two
        blocks? Then the binding before the ``if`` cannot reach it, though the semantic model,
        which follows no branch to its end, lists that one too (``if c: x = a`` / ``else: x = b``)."""
        body, orelse = branches
        found = self.ctx.semantic.lookup(read) or ()
        return orelse is not None and any(b.blocks and b.blocks[-1] is body for b in found) and any(
            b.blocks and b.blocks[-1] is orelse for b in found)

    def _host_branch_of(self, name: cst.Name, uses: List[cst.Name]) -> bool:
        """``m.cuda() if use_cuda else m`` (or ``m.cpu()``): the move is the body of a conditional
        expression that asks for the device, and the other read is its ``else`` part."""
        up = self.ctx.ancestors
        if len(up) < 1 or not isinstance(up[-1], cst.IfExp):
            return False
        choice = up[-1]
        move = choice.body
        if not (isinstance(move, cst.Call) and isinstance(move.func, cst.Attribute) and move.func.value is name):
            return False
        other = next(n for n in uses if n is not name)
        orelse = choice.orelse
        if isinstance(orelse, cst.Call):
            method = method_call(orelse)
            if method is None or method[1] != "cpu" or orelse.args:
                return False
            orelse = method[0]
        return orelse is other and _asks_for_device(self.ctx, choice.test)

    def _guarded_rebinding(self, name: cst.Name, scope):
        """The binding ``m = m.cuda()`` makes when this move is that statement, alone in the body
        of an ``if`` that asks whether a device is in use (``x.is_cuda``, ``use_cuda``,
        ``torch.cuda.is_available()``, ``x.device.type == "cuda"``); else None."""
        up = self.ctx.ancestors
        if len(up) < 5:
            return None
        statement, line, block, guard = up[-1], up[-2], up[-3], up[-4]
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)
                and statement.targets[0].target.value == name.value
                and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
                and isinstance(guard, cst.If) and guard.body is block and isinstance(block, cst.IndentedBlock)
                and len(block.body) == 1 and _asks_for_device(self.ctx, guard.test)):
            return None
        target = statement.targets[0].target
        return next((b for b in scope.bindings.get(name.value, ()) if b.node is target), None)

    def _every_step(self) -> str:
        """Where the move repeats: a loop around it, or a function that runs every step."""
        if enclosing_loops(self.ctx):
            return " This runs on every iteration of the loop around it."
        func = enclosing_function(self.ctx)
        if func is None:
            return ""
        why = runs_every_step(self.ctx, kinds=("train", "eval"))
        if why is not None:
            return f" `{func.name.value}` runs every step ({why})."
        if is_per_step_function(func):
            return f" `{func.name.value}` runs every step."
        return ""

    def _bound_fix(self, node, receiver, binding, factory, short, device) -> Optional[FixSpec]:
        """``eye = torch.eye(3)`` ... ``eye.cuda()``: ``device=`` goes to the constructor and the
        move goes away, when the move runs whenever the constructor does (same branch) and the
        device expression means the same at both places (its names are bound before)."""
        model = self.ctx.semantic
        if self.ctx.ancestors and isinstance(self.ctx.ancestors[-1], cst.IfExp):
            return None  # `m.cuda() if use_cuda else m`: the device exists on one branch only
        read = model.reads.get(id(receiver))
        if read is None or len(read.blocks) != len(binding.blocks) or any(
                a is not b for a, b in zip(read.blocks, binding.blocks)):
            return None
        if _has_comment(node) or not isinstance(binding.statement, cst.Assign):
            return None
        for n in walk(device):
            if isinstance(n, cst.Name):
                found = model.lookup(n)
                if found is None and id(n) in model.reads:
                    continue  # a builtin or a star import
                if not found or any(b.order >= binding.order for b in found):
                    return None
        statement = self.ctx.ancestors[-1] if self.ctx.ancestors else None
        line = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        if (isinstance(statement, cst.Assign) and statement.value is node and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Name)
                and statement.targets[0].target.value == receiver.value
                and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
            # `eye = eye.cuda()`: the line goes; a comment on it stays on a line of its own
            comment = line.trailing_whitespace.comment
            kept = f"{''.join(self.ctx.indentation())}{comment.value}\n" if comment is not None else ""
            removal = NodeEdit(line, kept, DELETE_LINES)
        else:
            removal = NodeEdit(node, receiver.value)
        replacement = with_keyword_args(factory, [("device", device)])
        unsafe = short in RANDOM_FACTORIES
        requires_grad = get_arg(factory, "requires_grad")
        if requires_grad is not None and literal_value(requires_grad.value) is not False:
            unsafe = True
        return FixSpec(UNSAFE if unsafe else SAFE, "Pass `device=` to the constructor",
                       (NodeEdit(factory, replacement), removal))

    def _fix(self, node, factory, short, device, dtype) -> Optional[FixSpec]:
        if _has_comment(node):
            return None  # a comment in the dropped `.to(...)` would be lost
        new: List[Tuple[str, cst.BaseExpression]] = [("device", device)]
        unsafe = short in RANDOM_FACTORIES
        if dtype is not None:
            if get_arg(factory, "dtype") is not None:
                return None  # two dtypes: which one wins is for the author to say
            new.append(("dtype", dtype))
            unsafe = unsafe or short not in DTYPE_EXACT_FACTORIES
        requires_grad = get_arg(factory, "requires_grad")
        if requires_grad is not None and literal_value(requires_grad.value) is not False:
            unsafe = True  # the result becomes a leaf: .grad lands on it, not on a CPU tensor
        replacement = with_keyword_args(factory, new).with_changes(lpar=[], rpar=[])
        return FixSpec(
            UNSAFE if unsafe else SAFE,
            "Pass `device=` to the constructor",
            (NodeEdit(node, replacement),),
        )


_DEVICE_WORDS = frozenset({"cuda", "gpu"})


def _asks_for_device(ctx, test: cst.BaseExpression) -> bool:
    """``x.is_cuda``, ``use_cuda``/``args.cuda``/``self.use_gpu``, ``torch.cuda.is_available()``,
    ``x.device.type == "cuda"`` (no ``not``, ``and``, ``or``)."""
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return True
    if isinstance(test, (cst.Name, cst.Attribute)):
        return bool(set(name_tokens(test)) & _DEVICE_WORDS)
    if isinstance(test, cst.Call):
        return not test.args and ctx.resolve_call(test) == "torch.cuda.is_available"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return isinstance(target.operator, cst.Equal) and literal_value(target.comparator) == "cuda"
    return False


def _legacy_sizes(call: cst.Call) -> bool:
    """``torch.FloatTensor(n, m)`` builds an uninitialised tensor of that size; one argument may
    be data (``torch.FloatTensor(values)``), so only a size counts there: an integer literal,
    ``x.size()``/``x.size(0)``, ``x.shape`` (or a part of it, ``x.shape[0]``, ``x.shape[1:]``),
    ``len(...)``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) != len(call.args) or not positional:
        return False
    if len(positional) == 1:
        return _is_size(positional[0].value)
    return not any(isinstance(a.value, (cst.List, cst.Tuple, cst.ListComp)) for a in positional)


def _is_size(node: cst.BaseExpression) -> bool:
    """A size as one argument: an int literal, ``x.size(...)``, ``x.shape[...]``, ``len(...)``."""
    value = literal_value(node)
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(node, cst.Subscript):
        node = node.value
        return isinstance(node, cst.Attribute) and node.attr.value == "shape"
    if isinstance(node, cst.Attribute):
        return node.attr.value == "shape"
    if isinstance(node, cst.Call):
        method = method_call(node)
        if method is not None:
            return method[1] == "size"
        return isinstance(node.func, cst.Name) and node.func.value == "len" and len(node.args) == 1
    return False


def _takes_device(factory: cst.Call, short: str) -> bool:
    """torch.normal accepts device= only in its (mean, std, size) form."""
    if short != "normal":
        return True
    positional = [a for a in factory.args if a.keyword is None and not a.star]
    return len(positional) >= 3 or get_arg(factory, "size") is not None


def _move_target(
    node: cst.Call, method: str, ctx, device_attribute=lambda expr: False
) -> Optional[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
    """(device expression for the factory, dtype expression or None) if this `.to()`/`.cuda()`
    certainly moves to a device and nothing else is asked of it; else None. ``device_attribute``:
    is an expression ``self.<attr>`` only ever bound to a device index or string
    (``.cuda(self.cuda_index)`` with ``self.cuda_index = 0``)?"""
    bound = move_arguments(node, TENSOR_CUDA_PARAMS if method == "cuda" else TENSOR_TO_PARAMS)
    if bound is None or set(bound) - {"device", "dtype"} - _DROPPABLE:
        return None
    device = bound.get("device")
    if method == "cuda":
        if device is None:
            return cst.SimpleString('"cuda"'), None
        index = literal_value(device)
        if isinstance(index, int) and not isinstance(index, bool):
            return cst.SimpleString(f'"cuda:{index}"'), None
        if isinstance(index, str) and is_accelerator_device(ctx, device):
            return device, None
        if device_attribute(device):
            return device, None  # an index (a legacy device= ordinal is a CUDA device) or a string
        return None  # .cuda(x): x may be None (the current device), which device=None is not
    if device is None or not (is_accelerator_device(ctx, device) or device_attribute(device)):
        return None
    return device, bound.get("dtype")


def _has_comment(node: cst.Call) -> bool:
    """Is there a comment outside the factory call, in the `.to(...)` part the fix drops?"""
    hollow = node.with_changes(func=node.func.with_changes(value=cst.Name("_")))
    return "#" in cst.Module(body=[]).code_for_node(hollow)


RULES = [TensorMovedAfterCreation]
