"""Does a file's own code put its program on an accelerator? (issue 29, class 5)

The question behind ``FileModel.uses_accelerator()`` (``model.py``), asked of one file's text and
CPython tree; the project summary records the same answer for every file (``project.py``), and
the project index joins the files of a program (a script and what it imports). Pure functions on
``ast``: this module imports neither libcst, the model nor the project (both import it).

A file *touches an accelerator* unless its code certainly never does: no word of one anywhere
(``cuda``, ``mps``, ``gpu``, ``xla``..., ``Accelerator``/``accelerate``, Lightning, DeepSpeed,
``DataParallel``/DDP, NCCL, a Hugging Face ``Trainer``: comments and strings count, which only
errs towards True), and every device a value is sent to (``.to(x)``, ``device=x``) is the host
(``"cpu"``, ``torch.device("cpu")``, a name bound only to those). A device that could be an
accelerator (``'cuda' if torch.cuda.is_available() else 'cpu'``, ``get_device()``,
``args.device``, ``.to(0)``) counts as one: when in doubt, True.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Dict, List, Optional, Set

# Any of these words anywhere in the text (any case): the program may run on an accelerator.
_WORDS = ("cuda", "gpu", "nccl", "accelerat", "lightning", "deepspeed", "dataparallel", "horovod", "device_map")
# ... and these as words of their own ("input" holds "npu", "timestamps" "mps").
_SHORT_WORDS = ("mps", "xla", "xpu")  # TPUs run through torch_xla
_SHORT = re.compile(r"(?:[^a-z]|^)(?:mps|xla|xpu)(?![a-z])")
# Where else a device can be named: `device=...`, `.to(...)`, `map_location=...`.
_NEWLINE = re.compile(r"\r\n?|\n")
_DEVICE_TEXT = re.compile(r"device|map_location|\.\s*to\s*\(")
# Receivers whose `.device` comes from a configuration (argparse, a config object): unknown.
_CONFIG_NAMES = frozenset({"args", "opt", "opts", "cfg", "config", "conf", "hparams", "flags", "FLAGS", "options",
                           "params", "hp", "settings"})
_HOST, _NEUTRAL, _UNKNOWN = "host", "neutral", "unknown"


def accelerator_word(text: str) -> Optional[str]:
    """The first accelerator word of ``text`` (lower case) outside comment lines, or None.
    Substring searches of the lower-cased text: a case-blind regex of the same words is four
    times slower. A line that is only a comment (``# model = model.cuda()``) does not count."""
    low = text.lower()
    for word in _WORDS:
        if word in low and _outside_comments(low, word, None):
            return word
    for word in _SHORT_WORDS:
        if word in low and _outside_comments(low, word, _SHORT):
            return word
    if "Trainer" in text and "transformers" in text:
        return "transformers"  # Hugging Face's Trainer places the model on the GPU itself
    return None


def _outside_comments(low: str, word: str, pattern: Optional["re.Pattern[str]"]) -> bool:
    """Is ``word`` somewhere in ``low`` on a line that is not only a comment (and a word of its
    own, when ``pattern`` says what one is)?"""
    at = low.find(word)
    while at >= 0:
        if pattern is None or pattern.match(low, max(at - 1, 0)) is not None:
            start = max(low.rfind("\n", 0, at), low.rfind("\r", 0, at)) + 1  # CPython's line ends
            if not low[start:at].lstrip().startswith("#"):
                return True
        at = low.find(word, at + 1)
    return False


def touches_accelerator(text: str, tree: Optional[ast.AST]) -> bool:
    """Does this file's own code name or send values to an accelerator (or possibly one)?"""
    if accelerator_word(text) is not None:
        return True
    return sends_to_device(text, tree)


def sends_to_device(text: str, tree: Optional[ast.AST]) -> bool:
    """In a text with no accelerator word: is some value sent to a device that could be one?
    Only the statements on lines that spell ``device`` or ``.to(`` are read."""
    lines: List[int] = []
    line, position = 1, 0
    for found in _DEVICE_TEXT.finditer(text):
        line += len(_NEWLINE.findall(text, position, found.start()))  # \n, \r\n or a lone \r
        position = found.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    if not lines:
        return False  # no device named at all: the host
    if tree is None:
        return True
    return _Devices(tree, lines).any_accelerator()


# Statements whose header binds names (parameters, loop targets): read on every line.
_NAMING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.AsyncFor)


def _nodes_on(tree: ast.AST, lines: List[int]):
    """The nodes of the statements (or compound statements' headers) that span one of ``lines``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        body_fields = [f for f in ("body", "orelse", "finalbody", "handlers", "cases") if isinstance(getattr(node, f, None), list)]
        first = node.lineno if isinstance(node, ast.stmt) else 0
        header_end = min((s.lineno for f in body_fields for s in getattr(node, f) if isinstance(s, ast.AST)
                          and hasattr(s, "lineno")), default=(getattr(node, "end_lineno", None) or first) + 1) - 1
        at = bisect.bisect_left(lines, first)
        if type(node) in _NAMING:  # what names its header binds, wherever it is
            yield node
        if isinstance(node, ast.stmt) and at < len(lines) and lines[at] <= header_end:
            for name, value in ast.iter_fields(node):
                if name in body_fields:
                    continue
                for child in (value if isinstance(value, list) else [value]):
                    if isinstance(child, ast.AST):
                        yield from ast.walk(child)
            if type(node) not in _NAMING:
                yield node
        for name in body_fields:
            stack.extend(s for s in getattr(node, name) if isinstance(s, ast.AST))


def _last(node: ast.AST) -> Optional[str]:
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        return node.attr
    return None


class _Devices:
    """The devices values are sent to in one tree, and the bindings of the names they read."""

    def __init__(self, tree: ast.AST, lines: List[int]) -> None:
        #: name (or attribute name: `self.device`) -> the values bound to it; None: unknown
        self.bindings: Dict[str, List[Optional[ast.expr]]] = {}
        #: parameter name -> its defaults (None: no default)
        self.params: Dict[str, List[Optional[ast.expr]]] = {}
        self.sent: List[ast.expr] = []  # device expressions values go to
        for node in _nodes_on(tree, lines):
            kind = type(node)
            if kind is ast.Call:
                call: ast.Call = node
                if type(call.func) is ast.Attribute and call.func.attr == "to" and call.args:
                    self.sent.append(call.args[0])
                for keyword in call.keywords:
                    if keyword.arg == "device" or keyword.arg == "map_location":
                        self.sent.append(keyword.value)
            elif kind is ast.Assign:
                assign: ast.Assign = node
                for target in assign.targets:
                    self._bind(target, assign.value)
            elif kind is ast.AnnAssign:
                ann: ast.AnnAssign = node
                self._bind(ann.target, ann.value)
            elif kind in (ast.For, ast.AsyncFor, ast.comprehension):
                self._bind(node.target, None)
            elif kind is ast.withitem:
                item: ast.withitem = node
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, None)
            elif kind is ast.NamedExpr:
                self._bind(node.target, node.value)
            elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                args: ast.arguments = node.args
                positional = [*args.posonlyargs, *args.args]
                defaults: List[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
                for arg, default in zip(positional, defaults):
                    self.params.setdefault(arg.arg, []).append(default)
                for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                    self.params.setdefault(arg.arg, []).append(default)

    def _bind(self, target: ast.AST, value: Optional[ast.expr]) -> None:
        if type(target) in (ast.Tuple, ast.List):
            values = value.elts if type(value) in (ast.Tuple, ast.List) else None  # type: ignore[union-attr]
            for i, element in enumerate(target.elts):  # type: ignore[attr-defined]
                self._bind(element, values[i] if values is not None and i < len(values) else None)
            return
        if type(target) is ast.Starred:
            self._bind(target.value, None)
            return
        name = _last(target)
        if name is not None:
            self.bindings.setdefault(name, []).append(value)

    def any_accelerator(self) -> bool:
        return any(self._kind(expr, set()) == _UNKNOWN for expr in self.sent)

    def _a_tensor(self, name: str) -> bool:
        """Is ``name`` a parameter or a loop variable (a tensor handed in: ``x.device``), not an
        object built here or elsewhere (``trainer.device``, ``self.device``, ``args.device``)?"""
        if name in ("self", "cls") or name in _CONFIG_NAMES:
            return False
        values = self.bindings.get(name)
        return (name in self.params and not values) or (values is not None and all(v is None for v in values))

    def _kind(self, expr: Optional[ast.expr], seen: Set[str]) -> str:
        """host, neutral (not a device: a dtype, ``None``, a tensor's own ``.device``) or
        unknown (possibly an accelerator)."""
        if expr is None:
            return _UNKNOWN
        kind = type(expr)
        if kind is ast.Constant:
            value = expr.value  # type: ignore[attr-defined]
            if value is None or type(value) is bool:
                return _NEUTRAL
            if isinstance(value, str):
                return _HOST  # no accelerator word in the file: "cpu", "meta"
            return _UNKNOWN  # `.to(0)`: cuda:0
        if kind is ast.Lambda:
            return _HOST  # map_location=lambda storage, loc: storage
        if kind is ast.IfExp:
            sides = [self._kind(expr.body, seen), self._kind(expr.orelse, seen)]  # type: ignore[attr-defined]
            return _UNKNOWN if _UNKNOWN in sides else _HOST
        if kind is ast.Call:
            call: ast.Call = expr  # type: ignore[assignment]
            if _last(call.func) == "device" and call.args:  # torch.device("cpu")
                return self._kind(call.args[0], seen)
            return _UNKNOWN
        if kind is ast.Name or kind is ast.Attribute:
            name = _last(expr)
            assert name is not None
            if "dtype" in name.lower():
                return _NEUTRAL
            if kind is ast.Attribute:
                base = expr.value  # type: ignore[attr-defined]
                if type(base) is ast.Name and base.id == "torch" and name != "device":
                    return _NEUTRAL  # torch.float16, torch.long
            if name in seen:
                return _HOST  # a cycle adds no new value
            values = list(self.bindings.get(name, ()))
            defaults = self.params.get(name, [])
            values += [d for d in defaults if d is not None]
            if not values:
                if kind is ast.Attribute and name == "device":
                    base = expr.value  # type: ignore[attr-defined]
                    if type(base) is ast.Name and self._a_tensor(base.id):
                        return _NEUTRAL  # `x.device`: wherever the tensor already is
                return _UNKNOWN
            inner = seen | {name}
            kinds = [self._kind(v, inner) for v in values]
            if _UNKNOWN in kinds:
                return _UNKNOWN
            return _HOST if _HOST in kinds else _NEUTRAL
        return _UNKNOWN
