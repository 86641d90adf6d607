"""The project model: what one file needs to know about the others, in two phases.

**Phase 1** (``summarize``, in the workers, cached by content hash): a compact, JSON-able summary
of one file from the CPython ``ast`` tree the syntax check already builds (never from libcst):
its module name, its imports with relative imports resolved, its functions (qualified names)
with the calls each makes, the calls made inside its training loops (once per step), the
framework hooks it defines (Lightning's ``training_step``, the HF Trainer's ``compute_loss``),
closures handed to ``optimizer.step(closure)``, and the loader factories whose batches a loop
moves to a device (``loader = build_loader(...)`` ... ``for x, y in loader: x.cuda()``).

**Phase 2** (``ProjectIndex``, in the parent, every run): the symbol table and call graph of
all summaries; "runs every step" propagated from training loops and hooks to every function
they call, across files; and per file a small ``FileFacts`` the rules read through
``ctx.project``. The facts' digest is part of the file's results-cache key, so a finding that
depends on another file is recomputed when that file changes.

This module imports neither libcst nor the rules.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
import json
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import AbstractSet, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from torchlint.accelerator import touches_accelerator
from torchlint.loaderfacts import dotted as _dotted, loader_parameters, moves_to_device as _moves_to_device
from torchlint.source import line_starts
from torchlint.torch_api import canonical_name
from torchlint.words import EVAL_STEP_HOOKS, ONE_OFF_WORDS, PERIODIC_WORDS, STEP_WORDS, TRAIN_STEP_HOOKS

SUMMARY_VERSION = 11  # 11: loader_params, spells_loader (FileFacts.loader_helpers)
# Torch classes whose project subclasses rules treat as the class itself (TL701; the DataLoader:
# TL103 and every rule that asks whether a call builds a loader, issue 29 class 2).
TRACKED_BASES = frozenset({"torch.nn.DataParallel", "torch.utils.data.DataLoader"})
TRAIN, EVAL = "train", "eval"


# -- the facts a file receives -----------------------------------------------------------------

@dataclass(frozen=True)
class FileFacts:
    """What the rest of the project says about one file's functions (by qualified name,
    ``Class.method`` / ``outer.inner``)."""

    #: qualname -> (kind, why): functions that run once per step: "train" or "eval".
    per_step: Mapping[str, Tuple[str, str]] = field(default_factory=dict)
    #: qualname -> where: functions returning a DataLoader whose batches a caller moves to a device.
    moved_loaders: Mapping[str, str] = field(default_factory=dict)
    #: name as this file spells it (an imported or a local class) -> the torch class it derives
    #: from, for project classes that subclass one the rules care about (``GpuDataParallel``).
    subclasses: Mapping[str, str] = field(default_factory=dict)
    #: a reason of ``per_step`` ("called every step from train.py:16") -> the call it names:
    #: (path, line), for the findings' related locations (LSP ``relatedInformation``, JSON ``related``)
    sites: Mapping[str, Tuple[str, int]] = field(default_factory=dict)
    #: not "": every program this file is part of (a script or notebook, the scripts that import
    #: it) certainly never touches an accelerator; says which (``FileModel.uses_accelerator``)
    cpu_program: str = ""
    #: not "": every program this file is part of certainly never trains (a script whose own code
    #: and what it imports in the project spell no gradient step; ``FileModel.may_train``); says why
    inference_program: str = ""
    #: not "": a program this file is part of wraps a model in ``DistributedDataParallel`` (a model
    #: a training loop here is handed may be that one: TL403); says where
    ddp_program: str = ""
    #: name as this file spells it at a call (``calc_loss_loader``, ``gpt_train.calc_loss_loader``)
    #: -> (loader parameter, its position, model parameter, its position, where): functions of
    #: another project file that run the model parameter over the loader parameter with
    #: gradients left to the caller (W3, TL402: the caller's mode and no_grad decide)
    eval_helpers: Mapping[str, Tuple[str, int, str, int, str]] = field(default_factory=dict)
    #: classes of other project files this file imports that may be models, as it spells them
    #: (``Generator``, ``model.Generator``) -> (their file, class name, hash of the statements their
    #: mode depends on): whether they compute the same in training and eval mode is judged where a
    #: rule asks (W3, TL902; ``modefacts.judge_file``)
    mode_free: Mapping[str, Tuple[str, str, str]] = field(default_factory=dict)
    #: name as this file spells it at a call (``train_one_epoch``, ``engine.evaluate``,
    #: ``SimCLR.train`` for a method of an imported class) -> (its positional parameters, those a
    #: ``for`` iterates, those whose items it moves to a device, those it iterates inside a loop
    #: of its own, where): functions of other project files a loader may be handed to (issue 29
    #: class 2, TL102/TL103; ``loaderfacts.loader_parameters``)
    loader_helpers: Mapping[str, Tuple[Tuple[str, ...], Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], str]] = \
        field(default_factory=dict)

    @cached_property
    def digest(self) -> str:
        if (not self.per_step and not self.moved_loaders and not self.subclasses and not self.cpu_program
                and not self.inference_program and not self.ddp_program and not self.eval_helpers
                and not self.mode_free and not self.loader_helpers):
            return ""
        data = json.dumps([sorted(self.per_step.items()), sorted(self.moved_loaders.items()),
                           sorted(self.subclasses.items())] + ([sorted(self.sites.items())] if self.sites else [])
                          + ([self.cpu_program] if self.cpu_program else [])
                          + ([["inference", self.inference_program]] if self.inference_program else [])
                          + ([["ddp", self.ddp_program]] if self.ddp_program else [])
                          + ([["eval", sorted(self.eval_helpers.items())]] if self.eval_helpers else [])
                          + ([["mode_free", sorted(self.mode_free.items())]] if self.mode_free else [])
                          + ([["loader_helpers", sorted(self.loader_helpers.items())]] if self.loader_helpers else []))
        return hashlib.blake2b(data.encode(), digest_size=8).hexdigest()

    def for_rules(self, codes: AbstractSet[str]) -> "FileFacts":
        """These facts less the cross-file fields no rule in ``codes`` reads (``READERS``): such
        a field cannot change a finding, but its digest would send the file to phase 3, linted
        a second time for nothing (17 files of transformers, by TL902's classes alone, when
        TL902 is off). The findings are the same either way (tests/test_facts_readers.py)."""
        dropped = {name: {} for name, readers in READERS.items() if getattr(self, name) and not readers & codes}
        return replace(self, **dropped) if dropped else self

    def cross_file(self) -> "FileFacts":
        """Only the facts that come from other files' definitions (what a notebook, which is its
        own project otherwise, takes from the index: ``notebook.lint_notebook``)."""
        if not self.eval_helpers and not self.mode_free and not self.loader_helpers:
            return EMPTY_FACTS
        return FileFacts(eval_helpers=self.eval_helpers, mode_free=self.mode_free, loader_helpers=self.loader_helpers)

    def spelled_in(self, text: str) -> "FileFacts":
        """The cross-file half, less the helpers and classes whose last name ``text`` never
        spells (no call there can be theirs)."""
        helpers = {k: v for k, v in self.eval_helpers.items() if k.rsplit(".", 1)[-1] in text}
        classes = {k: v for k, v in self.mode_free.items() if k.rsplit(".", 1)[-1] in text}
        loader_helpers = ({k: v for k, v in self.loader_helpers.items() if k.rsplit(".", 1)[-1] in text}
                          if "oader" in text else {})
        if not (helpers or classes or loader_helpers):
            return EMPTY_FACTS
        return FileFacts(eval_helpers=helpers, mode_free=classes, loader_helpers=loader_helpers)

    def with_cross_file(self, other: "FileFacts") -> "FileFacts":
        """These facts with ``other``'s cross-file half (``cross_file``) in place of their own."""
        if not other.eval_helpers and not other.mode_free and not other.loader_helpers:
            return self
        return replace(self, eval_helpers=other.eval_helpers, mode_free=other.mode_free,
                       loader_helpers=other.loader_helpers)

    def to_json(self) -> list:
        """[] for no facts; else what ``from_json`` reads back (the results cache's project file)."""
        if not self.digest:
            return []
        row: list = [{q: list(v) for q, v in self.per_step.items()}, dict(self.moved_loaders), dict(self.subclasses)]
        extras: list = [{why: list(site) for why, site in self.sites.items()}, self.cpu_program, self.inference_program,
                        self.ddp_program, {k: list(v) for k, v in self.eval_helpers.items()},
                        {k: list(v) for k, v in self.mode_free.items()},
                        {k: [list(v[0]), list(v[1]), list(v[2]), list(v[3]), v[4]] for k, v in self.loader_helpers.items()}]
        while extras and not extras[-1]:  # trailing empty extras are left out
            extras.pop()
        return row + extras

    @staticmethod
    def from_json(row) -> "FileFacts":
        if not row:
            return EMPTY_FACTS
        per_step, moved, subclasses, *rest = row
        sites = rest[0] if rest else {}
        cpu = rest[1] if len(rest) >= 2 else ""
        inference = rest[2] if len(rest) >= 3 else ""
        ddp = rest[3] if len(rest) >= 4 else ""
        helpers = rest[4] if len(rest) >= 5 else {}
        mode_free = rest[5] if len(rest) >= 6 else {}
        loader_helpers = rest[6] if len(rest) >= 7 else {}
        if not (isinstance(per_step, dict) and isinstance(moved, dict) and isinstance(subclasses, dict)
                and isinstance(sites, dict) and isinstance(cpu, str) and isinstance(inference, str)
                and isinstance(ddp, str) and isinstance(helpers, dict) and isinstance(mode_free, dict)
                and isinstance(loader_helpers, dict) and len(rest) <= 7):
            raise ValueError("bad facts")
        return FileFacts({str(q): (str(v[0]), str(v[1])) for q, v in per_step.items()},
                         {str(q): str(v) for q, v in moved.items()}, {str(k): str(v) for k, v in subclasses.items()},
                         {str(w): (str(v[0]), int(v[1])) for w, v in sites.items()}, cpu, inference, ddp,
                         {str(k): (str(v[0]), int(v[1]), str(v[2]), int(v[3]), str(v[4])) for k, v in helpers.items()},
                         {str(k): (str(v[0]), str(v[1]), str(v[2])) for k, v in mode_free.items()},
                         {str(k): (tuple(str(p) for p in v[0]), tuple(int(i) for i in v[1]), tuple(int(i) for i in v[2]),
                                   tuple(int(i) for i in v[3]), str(v[4])) for k, v in loader_helpers.items()})

    def runs_every_step(self, qualname: Optional[str], kinds: Iterable[str] = (TRAIN,)) -> Optional[str]:
        """Why the function runs every step (a phrase for messages), or None."""
        found = self.per_step.get(qualname) if qualname else None
        return found[1] if found is not None and found[0] in kinds else None


EMPTY_FACTS = FileFacts()

#: the cross-file fields of ``FileFacts`` that only some rules read -> those rules' codes
#: (``FileFacts.for_rules``). A rule that starts reading one of them must be named here:
#: tests/test_facts_readers.py finds every read of these fields in the package and checks it.
READERS: Mapping[str, FrozenSet[str]] = {
    "mode_free": frozenset({"TL902"}),  # FileModel.is_mode_free_class
    "eval_helpers": frozenset({"TL402"}),  # FileModel.evaluation_helper
    "loader_helpers": frozenset({"TL102", "TL103"}),  # rules/loading.helper_facts
}


# -- phase 1: one file's summary ---------------------------------------------------------------

def module_name(path: str) -> Tuple[str, bool]:
    """(dotted module name, is a package ``__init__``) from the folders that hold
    ``__init__.py``: ``src/pkg/sub/m.py`` -> ``pkg.sub.m``; a script folder gives ``m``."""
    path = os.path.abspath(path)
    folder, name = os.path.split(path)
    stem = name.rsplit(".", 1)[0]
    parts = [] if stem == "__init__" else [stem]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.append(package)
        if not package:
            break
    return ".".join(reversed(parts)) or stem, stem == "__init__"


def _words(name: Optional[str]) -> FrozenSet[str]:
    """The lower-case words of a dotted, snake or camel case name (remembered: the same names
    come back in every file)."""
    if not name:
        return frozenset()
    found = _WORDS.get(name)
    if found is None:
        if len(_WORDS) > 50_000:  # a long-lived process (the language server): stay small
            _WORDS.clear()
        spaced = _CAMEL_HUMP.sub(r"\1_\2", name)
        found = _WORDS[name] = frozenset(w.lower() for w in _WORD_SEPARATOR.split(spaced) if w)
    return found


_WORDS: Dict[str, FrozenSet[str]] = {}
_CAMEL_HUMP = re.compile(r"([a-z0-9])([A-Z])")
_WORD_SEPARATOR = re.compile(r"[._]")


def _is_periodic(test: ast.AST) -> bool:
    """``heuristics.is_periodic_guard`` on the ``ast`` tree: true on few iterations."""
    kind = type(test)
    if kind is ast.BoolOp:
        parts = [_is_periodic(v) for v in test.values]
        return any(parts) if type(test.op) is ast.And else all(parts)
    if kind is ast.UnaryOp and type(test.op) is ast.Not:
        return _has_modulo(test.operand)
    if kind is ast.Compare:
        if all(type(op) is ast.Eq for op in test.ops):
            sides = [test.left, *test.comparators]
            if any(_has_modulo(s) for s in sides):
                return True
            return any(_words(_dotted(s)) & STEP_WORDS for s in sides if type(s) is ast.Name or type(s) is ast.Attribute)
        if len(test.ops) == 1 and type(test.ops[0]) in (ast.Lt, ast.LtE) and type(test.left) is ast.Name:
            bound = test.comparators[0]  # the first few iterations: `if ni < 3:`
            return type(bound) is ast.Constant and type(bound.value) is int and bound.value <= 16
        return False
    if kind is ast.Call:
        return bool(_words(_dotted(test.func)) & PERIODIC_WORDS)
    if kind is ast.Name or kind is ast.Attribute:
        return bool(_words(_dotted(test)) & _PERIODIC_OR_ONE_OFF)
    return False


is_periodic_test = _is_periodic  # the whole-file model's periodic names read tests with it


def _skips_off_steps(stmt: ast.AST) -> bool:
    """``if (batch_idx + 1) % n != 0: return`` (or ``if step % n: return``): what follows in the
    function runs once every n calls (W2, issue 29: lightning-bolts' ConfusedLogitCallback)."""
    if type(stmt) is not ast.If or stmt.orelse or not stmt.body or not all(
            type(s) is ast.Return or type(s) is ast.Pass for s in stmt.body) or type(stmt.body[-1]) is not ast.Return:
        return False
    test = stmt.test
    if type(test) is ast.BinOp and type(test.op) is ast.Mod:
        return True
    return (type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.NotEq
            and _has_modulo(test.left) and type(test.comparators[0]) is ast.Constant and test.comparators[0].value == 0)


def _off_step_cut(statements: List[ast.stmt]) -> Optional[int]:
    """The index of a top-level ``if step % n != 0: return`` when no loop follows it (a loop over
    batches after an ``if epoch % k: return`` still runs every step while it runs)."""
    cut = next((i for i, s in enumerate(statements) if _skips_off_steps(s)), None)
    if cut is None or any(type(n) in (ast.For, ast.AsyncFor, ast.While)
                          for s in statements[cut + 1:] for n in ast.walk(s)):
        return None
    return cut


def _has_modulo(node: ast.AST) -> bool:
    """Is there a ``%`` operation in ``node`` (``ast.walk``'s nodes, less the leaves that hold none)?"""
    stack = [node]
    while stack:
        node = stack.pop()
        if type(node) is ast.BinOp and type(node.op) is ast.Mod:
            return True
        if type(node) is not ast.Name and type(node) is not ast.Constant:
            stack.extend(_child_nodes(node))
    return False


_PERIODIC_OR_ONE_OFF = frozenset(PERIODIC_WORDS | ONE_OFF_WORDS)
def _is_gradient_step(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "backward":
        return True
    if func.attr == "step":
        last = (_dotted(func.value) or "").rsplit(".", 1)[-1].lower()
        return last.startswith("opt") or "optim" in last or "scaler" in last
    return False


class _Summarizer:
    def __init__(self, module: str, is_package: bool) -> None:
        #: The source and its line offsets, when the file is summarised the cheap way (no
        #: gradient step in it).
        self.text = ""
        self.reversed = ""  # the text backwards (``call_names``)
        self.lines: Optional[List[int]] = None
        self.loaders_possible = True
        #: Does the file build a Lightning ``Trainer`` on a GPU (``accelerator="gpu"``, ``gpus=1``)?
        self.gpu_trainer = False
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: Dict[str, str] = {}
        #: every module (or module.name) any import of the file names, at any depth
        self.deps: Set[str] = set()
        #: modules the file star-imports at module level (``from utils import *``, W2, issue 29 class 3)
        self.stars: List[str] = []
        #: the module's own class names (``criterion = YoloLoss(...)``: ``YoloLoss.forward`` is named)
        self.classes: FrozenSet[str] = frozenset()
        self.functions: Dict[str, dict] = {}
        self.top = {"calls": [], "step_calls": [], "moved_factories": []}
        #: An editor's records of functions whose CPython nodes are the same objects as in its
        #: last summary (``IncrementalAst`` keeps unchanged statements): (id(node), outer class
        #: or function, id(its class's bases)) -> (node, the bases, context, the registrations
        #: the call made); None: no reuse.
        self.reuse: Optional[Dict[tuple, tuple]] = None
        self._context: tuple = ()
        self._log: List[Tuple[str, dict]] = []  # every registration in self.functions, in order
        self._used: Set[tuple] = set()  # the reuse keys this summary asked for

    def resolve_relative(self, node: ast.ImportFrom) -> Optional[str]:
        if not node.level:
            return node.module
        base = self.package.split(".") if self.package else []
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)] if node.level - 1 <= len(base) else []
        return ".".join(base + ([node.module] if node.module else [])) or None

    def add_import(self, node, table: Dict[str, str]) -> None:
        deps = self.deps
        if isinstance(node, ast.Import):
            for alias in node.names:
                deps.add(alias.name)
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    table[top] = top
            return
        base = self.resolve_relative(node)
        if base is None:
            if node.level == 1 and not node.module and not self.package:
                # `from . import utils` in a folder without __init__.py (a namespace package, as
                # torchvision's detection references vendored by pytorch-YOLOv4): a sibling module
                for alias in node.names:
                    if alias.name != "*":
                        deps.add(alias.name)
                        table[alias.asname or alias.name] = alias.name
            return
        for alias in node.names:
            deps.add(f"{base}.{alias.name}" if alias.name != "*" else base)  # a module, or a name of one
            if alias.name != "*":
                table[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif table is self.imports and base not in self.stars:
                self.stars.append(base)

    def cheap_body(self, node, qualname: str, cls: Optional[ast.ClassDef], record: dict) -> None:
        """Nested functions and classes from the statements; calls from the source text, less
        those in the body of a periodic ``if`` (``if step % 100 == 0:``), which do not run every
        time. One walk over the statements (never the expressions) and one regex scan."""
        local_imports: Dict[str, str] = {}
        guarded: List[Tuple[int, int]] = []  # line spans (1-based, inclusive) of periodic bodies
        cut = _off_step_cut(node.body)
        if cut is not None and cut + 1 < len(node.body):  # the rest runs every n calls (W2)
            guarded.append((node.body[cut + 1].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
        stack = list(node.body)
        while stack:
            stmt = stack.pop()
            kind = type(stmt)
            if kind in _SIMPLE:
                if kind is ast.Import or kind is ast.ImportFrom:
                    self.add_import(stmt, local_imports)
                continue
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                self.function(stmt, qualname, cls)
            elif kind is ast.ClassDef:
                inner = f"{qualname}.{stmt.name}"
                for item in stmt.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.function(item, inner, stmt)
            else:
                if kind is ast.If and stmt.body and _is_periodic(stmt.test):
                    guarded.append((stmt.body[0].lineno, stmt.body[-1].end_lineno or stmt.body[-1].lineno))
                for field_name in _BLOCKS.get(kind, _ALL_BLOCKS):
                    stack.extend(getattr(stmt, field_name, ()) or ())
        start = node.body[0].lineno - 1 if node.body else node.lineno
        offsets = self.lines
        end = min(node.end_lineno or node.lineno, len(offsets) - 1)
        spans = [(offsets[a - 1], offsets[min(b, len(offsets) - 1)]) for a, b in guarded]
        calls = record["calls"]
        imports = self.imports
        found = self.call_names(offsets[start], offsets[end], spans)
        for callee in sorted(found):  # set order varies by process: summaries must hash alike
            if callee in _NOT_CALLS or callee.endswith("."):
                continue
            head = callee.split(".", 1)[0]
            if "." in callee and head not in ("self", "cls") and head not in local_imports and head not in imports:
                continue
            calls.append(self.qualify(callee, local_imports))

    def call_names(self, lo: int, hi: int, spans: List[Tuple[int, int]]) -> Set[str]:
        """The names ``_CALL_TEXT`` finds in ``text[lo:hi]`` that start outside ``spans``. The
        scan runs over the reversed text, where each match starts with a literal ``(`` that the
        regex engine finds at C speed (about 9 times faster than ``_CALL_TEXT`` over the text);
        the same matches, since a name cannot hold a ``(``."""
        text = self.text
        if lo and _CALL_NAME_CHAR.match(text, lo - 1):  # a name running into the range: as before
            if spans:
                return {m.group(1) for m in _CALL_TEXT.finditer(text, lo, hi)
                        if not any(a <= m.start() < b for a, b in spans)}
            return set(_CALL_TEXT.findall(text, lo, hi))
        size = len(text)
        if spans:
            found = {m.group(1) for m in _CALL_TEXT_REVERSED.finditer(self.reversed, size - hi, size - lo)
                     if not any(a <= size - m.end(1) < b for a, b in spans)}
        else:
            found = set(_CALL_TEXT_REVERSED.findall(self.reversed, size - hi, size - lo))
        return {name[::-1] for name in found if name[-1] in _NAME_START}

    def run(self, tree: ast.Module) -> dict:
        module_level = [node for stmt in tree.body for node in _module_level(stmt)]
        for node in module_level:  # module-level imports first: functions see them whatever the order
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.add_import(node, self.imports)
        self.classes = frozenset(node.name for node in module_level if isinstance(node, ast.ClassDef))
        # what a function's record depends on besides its own nodes
        self._context = (self.module, self.package, tuple(sorted(self.imports.items())), self.lines is None,
                         self.loaders_possible, tuple(self.stars), self.classes)
        if self.lines is None:
            self.body(tree.body, None, None, self.top)
        else:  # only the definitions: module-level code of a file without a gradient step
            for node in module_level:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.function(node, None, None)
                elif isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self.function(item, node.name, node)
        classes = {}
        for node in module_level:  # module-level classes and what they derive from
            if isinstance(node, ast.ClassDef):
                bases = [_dotted(b) for b in node.bases]
                classes[node.name] = [self.qualify(b, {}) for b in bases if b]
        # A call of a bare name, or of self./cls., can only name a function of this file (phase 2
        # resolves it here): calls of names no function here bears (builtins, locals) are dropped.
        defined = {q.rpartition(".")[2] for q in self.functions}
        if self.stars:  # a bare name no function here bears may come from a star import (W2)
            for record in [self.top, *self.functions.values()]:
                record["calls"] = _through_stars(record["calls"], defined, self.stars)
                record["step_calls"] = [[c, line] for callee, line in record["step_calls"]
                                        for c in _through_stars([callee], defined, self.stars)]
        for record in [self.top, *self.functions.values()]:
            record["calls"] = [c for c in record["calls"] if c.startswith("@") or _local_name(c) in defined
                               or c in self.functions]
        return {"v": SUMMARY_VERSION, "module": self.module, "imports": self.imports,
                "functions": self.functions, "top": self.top, "classes": classes,
                "gpu_trainer": self.gpu_trainer}

    def body(self, statements, qualname: Optional[str], cls: Optional[ast.ClassDef], record: dict) -> None:
        """Walk one scope's statements; nested functions and classes get their own records."""
        local_imports: Dict[str, str] = {}
        loader_names: Dict[str, str] = {}  # local name -> factory callee it was bound from
        # (node, inside a training loop?, periodic?) ; an explicit stack, no recursion on depth
        # after `if step % n != 0: return` at the top of a function, the rest runs every n calls (W2)
        cut = (_off_step_cut(statements) if qualname is not None else None)
        cut = len(statements) if cut is None else cut
        stack: List[Tuple[ast.AST, bool, bool]] = [(s, False, i > cut) for i, s in reversed(list(enumerate(statements)))]
        while stack:
            node, in_loop, guarded = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(node, qualname, cls)
                continue
            if isinstance(node, ast.ClassDef):
                inner = f"{qualname}.{node.name}" if qualname else node.name
                for stmt in node.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.function(stmt, inner, node)
                continue
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)) and qualname is not None:
                self.add_import(node, local_imports)
                continue
            if isinstance(node, ast.Call):
                if not guarded:  # a call under `if should_log:` does not run every time
                    self.call(node, record, in_loop, local_imports, loader_names)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
                target, callee = node.targets[0], _dotted(node.value.func)
                if isinstance(target, ast.Name) and callee:
                    loader_names[target.id] = callee
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                # a training loop takes the step in its own body: an epoch loop around the batch
                # loop is not one (what it calls runs once an epoch)
                step = any(isinstance(n, ast.Call) and _is_gradient_step(n) for n in _own_nodes(node.body, loops=True))
                if isinstance(node, (ast.For, ast.AsyncFor)):
                    self.loader_loop(node, loader_names, record)
                for child in reversed(node.orelse):
                    stack.append((child, in_loop, guarded))
                for child in reversed(node.body):
                    stack.append((child, in_loop or step, guarded))
                header = [node.iter] if isinstance(node, (ast.For, ast.AsyncFor)) else [node.test]
                stack.extend((h, in_loop, guarded) for h in header)
                continue
            elif isinstance(node, ast.If):
                for child in reversed(node.orelse):
                    stack.append((child, in_loop, guarded))
                for child in reversed(node.body):
                    stack.append((child, in_loop, guarded or _is_periodic(node.test)))
                stack.append((node.test, in_loop, guarded))
                continue
            for child in reversed(_child_nodes(node)):
                stack.append((child, in_loop, guarded))

    def call(self, node: ast.Call, record: dict, per_step: bool, local_imports: Dict[str, str],
             instances: Optional[Dict[str, str]] = None) -> None:
        callee = _dotted(node.func)
        if callee is None:
            return
        head, _, method = callee.partition(".")
        bound = instances.get(head) if instances and method and "." not in method else None
        if bound is not None and bound.rsplit(".", 1)[-1][:1].isupper():
            # `ada = AdaptiveAugment(...)` then `ada.tune(pred)`: the class's method (issue 29 class 3)
            callee = f"{bound}.{method}"
        elif not method and instances and callee in instances and instances[callee].rsplit(".", 1)[-1][:1].isupper():
            # `criterion = YoloLoss(...)` then `criterion(out, y)`: calling an instance runs its
            # class's `__call__`, an nn.Module's its `forward` (pytorch-YOLOv4, issue 29 class 3)
            for runs in ("forward", "__call__"):
                self.call_named(f"{instances[callee]}.{runs}", node, record, per_step, local_imports)
            return
        if _is_gradient_step(node) and node.func.attr == "step":
            # optimizer.step(closure): the closure runs every time a step is taken
            for arg in node.args[:1]:
                name = _dotted(arg)
                if name:
                    record["step_calls"].append([self.qualify(name, local_imports), node.lineno])
        self.call_named(callee, node, record, per_step, local_imports)

    def call_named(self, callee: str, node: ast.Call, record: dict, per_step: bool,
                   local_imports: Dict[str, str]) -> None:
        head = callee.split(".", 1)[0]
        if "." in callee and head not in ("self", "cls") and head not in local_imports and head not in self.imports:
            if head not in self.classes:
                return  # a method of some object: not a project function we can name
        qualified = self.qualify(callee, local_imports)
        record["calls"].append(qualified)
        if per_step:
            record["step_calls"].append([qualified, node.lineno])

    def qualify(self, callee: str, local_imports: Dict[str, str]) -> str:
        head, _, rest = callee.partition(".")
        target = local_imports.get(head) or self.imports.get(head)
        if target is None:
            return callee  # a name of this module, or self./cls.: resolved in phase 2
        return f"@{target}.{rest}" if rest else f"@{target}"

    def loader_loop(self, node, loader_names: Dict[str, str], record: dict) -> None:
        """``for b in loader`` (through enumerate/tqdm/zip) where ``loader = factory(...)`` and
        the body moves a value derived from the loop's variables to a device."""
        iterable = node.iter
        while isinstance(iterable, ast.Call) and iterable.args and _dotted(iterable.func) in (
                "enumerate", "tqdm", "iter", "tqdm.tqdm"):
            iterable = iterable.args[0]
        if isinstance(iterable, ast.Call):
            callee = _dotted(iterable.func)
        elif isinstance(iterable, ast.Name):
            callee = loader_names.get(iterable.id)
        else:
            callee = None
        if not callee or callee.rsplit(".", 1)[-1] == "DataLoader":
            return
        tainted = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        moved = False
        for _ in range(2):  # names bound from the loop variables, then moves of them
            for n in _own_nodes(node.body):
                if isinstance(n, ast.Assign):
                    read = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
                    if read & tainted:
                        tainted |= {x.id for t in n.targets for x in ast.walk(t) if isinstance(x, ast.Name)}
                elif isinstance(n, ast.Call) and _moves_to_device(n):
                    receiver = {x.id for x in ast.walk(n.func.value) if isinstance(x, ast.Name)}
                    moved = moved or bool(receiver & tainted)
        if moved:
            record["moved_factories"].append([self.qualify(callee, {}), node.lineno])

    def function(self, node, outer: Optional[str], cls: Optional[ast.ClassDef]) -> None:
        reuse = self.reuse
        if reuse is None:
            self._function(node, outer, cls)
            return
        # Of its class a record reads whether it has bases (hooks), and ``IncrementalAst`` copies a
        # class whose body it parsed again in part, keeping the header's nodes: its bases list
        # stands for it (a method of a 4,000-line class keeps its record when another one is edited)
        bases = cls.bases if cls is not None else None
        key = (id(node), outer, id(bases))
        self._used.add(key)
        found = reuse.get(key)
        if found is not None and found[0] is node and found[1] is bases and found[2] == self._context:
            for qualname, record in found[3]:  # as the call registered them (a setter after its getter)
                self._register(qualname, _copied(record))
            return
        start = len(self._log)
        self._function(node, outer, cls)
        reuse[key] = (node, bases, self._context, [(q, _copied(r)) for q, r in self._log[start:]])

    def _register(self, qualname: str, record: dict) -> None:
        self.functions[qualname] = record
        if self.reuse is not None:  # what a call registered, for the editor's next summary
            self._log.append((qualname, record))

    def _function(self, node, outer: Optional[str], cls: Optional[ast.ClassDef]) -> None:
        qualname = f"{outer}.{node.name}" if outer else node.name
        hook = None
        if cls is not None and cls.bases:
            if node.name in TRAIN_STEP_HOOKS:
                hook = TRAIN
            elif node.name in EVAL_STEP_HOOKS:
                hook = EVAL
        record = {"line": node.lineno, "calls": [], "step_calls": [], "moved_factories": [], "hook": hook,
                  "class": qualname.rsplit(".", 1)[0] if cls is not None else None,
                  "returns_loader": False}
        self._register(qualname, record)
        if self.lines is None or hook:  # training loops or a hook: walk every node
            self.body(node.body, qualname, cls, record)
        else:
            self.cheap_body(node, qualname, cls, record)
        record["returns_loader"] = _returns_loader(node) if self.loaders_possible else False


def _copied(record: dict) -> dict:
    """A function record whose lists the caller may change (``run`` filters ``calls``)."""
    return {k: list(v) if type(v) is list else v for k, v in record.items()}


def _module_level(stmt: ast.stmt) -> Iterable[ast.stmt]:
    """A module-level statement and those in its if/try blocks (conditional imports)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If):
            stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                stack.extend(handler.body)


# The statement lists of each compound statement, in the order ``_ALL_BLOCKS`` lists them.
_ALL_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_BLOCKS = {kind: tuple(f for f in _ALL_BLOCKS if f in kind._fields)
           for kind in (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                        getattr(ast, "TryStar", ast.Try), ast.ExceptHandler, getattr(ast, "Match", ast.Try),
                        getattr(ast, "match_case", ast.Try))}  # ast.Match: Python 3.10+
# Statements without a body of their own.
_SIMPLE = frozenset({ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Pass, ast.Break,
                     ast.Continue, ast.Raise, ast.Assert, ast.Delete, ast.Global, ast.Nonlocal,
                     ast.Import, ast.ImportFrom})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SCOPES_AND_LOOPS = _SCOPES + (ast.For, ast.AsyncFor, ast.While)


def _own_nodes(statements, loops: bool = False) -> Iterable[ast.AST]:
    """Nodes of these statements, not inside nested functions, classes or lambdas (nor, with
    ``loops``, nested loops)."""
    skip = _SCOPES_AND_LOOPS if loops else _SCOPES
    stack = [s for s in statements if not isinstance(s, skip)]
    while stack:
        node = stack.pop()
        yield node
        for child in _child_nodes(node):
            if not isinstance(child, skip):
                stack.append(child)


def child_fields(kind: type) -> Tuple[str, ...]:
    """The fields of an ``ast`` node type that may hold child nodes, less the context and
    operator leaves (``Load``, ``Add``...): nothing is ever looked for in them, and skipping
    them spares a third of a walk (here and in ``astindex``'s line index)."""
    fields = _NODE_FIELDS.get(kind)
    if fields is None:
        fields = _NODE_FIELDS[kind] = tuple(f for f in kind._fields if f not in ("ctx", "op", "ops"))
    return fields


def _child_nodes(node: ast.AST) -> List[ast.AST]:
    """``ast.iter_child_nodes`` as a list, less the context and operator leaves (``child_fields``)."""
    children: List[ast.AST] = []
    for name in child_fields(type(node)):
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif type(value) is list:
            children.extend([item for item in value if isinstance(item, ast.AST)])
    return children


_NODE_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _through_stars(calls: List[str], defined: Set[str], stars: List[str]) -> List[str]:
    """A call of a bare name no function of the file bears, in a file with ``from m import *``:
    the function ``name`` of each star-imported module (phase 2 resolves those that exist; W2,
    issue 29 class 3: sgrvinod's ``accuracy()`` from ``utils``)."""
    out: List[str] = []
    for callee in calls:
        if callee.startswith("@") or "." in callee or callee in defined:
            out.append(callee)
        else:
            out.extend(f"@{star}.{callee}" for star in stars)
    return out


def _returns_loader(function) -> bool:
    """Does the function return a ``DataLoader(...)`` call, directly or through a local name?"""
    loaders: Set[str] = set()
    returns: List[ast.AST] = []
    classes: Set[str] = set()  # `cls = DataLoader if plain else IterableLoader` (W1, issue 29 class 2)
    for n in _own_nodes(function.body):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.IfExp) and any(
                _is_loader_class(b, frozenset()) for b in (n.value.body, n.value.orelse)):
            classes |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    for n in _own_nodes(function.body):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _is_loader_call(n.value, frozenset(classes)):
            loaders |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Return) and n.value is not None:
            returns.append(n.value)
    return any((isinstance(r, ast.Call) and _is_loader_call(r, frozenset(classes))) or (isinstance(r, ast.Name) and r.id in loaders)
               for r in returns)


def _is_loader_call(call: ast.Call, classes: FrozenSet[str] = frozenset()) -> bool:
    return _is_loader_class(call.func, classes)


def _is_loader_class(func: ast.AST, classes: FrozenSet[str]) -> bool:
    """``DataLoader``, a subclass named for it (``AudioDataLoader``), or a local bound to one."""
    name = _dotted(func)
    return bool(name) and (name.rsplit(".", 1)[-1].endswith("DataLoader") or name in classes)


# `Trainer(accelerator="gpu"|"cuda", ...)` / `Trainer(gpus=1)`: Lightning moves every batch to the GPU.
# `accelerator="auto"` and `devices=[0]`/`devices=1` too (issue 29 class 2): on a GPU machine they
# are the GPU; a `Trainer(accelerator="cpu", ...)` in the file says otherwise.
_GPU_TRAINER = re.compile(r"""Trainer\s*\((?:[^()]|\([^()]*\))*?(?:accelerator\s*=\s*["'](?:gpu|cuda|auto)["']|gpus\s*=\s*(?:[1-9]|-1|\[)|devices\s*=\s*(?:[1-9]|-1|\[))""")
_CPU_TRAINER = re.compile(r"""Trainer\s*\((?:[^()]|\([^()]*\))*?accelerator\s*=\s*["']cpu["']""")
_LIGHTNING_LOADER_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
# A file that may hold a training loop (a gradient step) or an optimizer closure: its loops are
# walked node by node. Others only need their functions and the names they call.
_ROOT_TEXT = re.compile(r"\.\s*(?:backward|step)\s*\(")
# `name(`, `self.name(`, `mod.sub.name(` in a function's source: the calls it may make.
# Atomic (Python 3.11+) where the interpreter has it: no backtracking. Before 3.11 a plain group
# finds the same names: a shorter name is followed by a name character, never by blanks and ``(``.
_CALL_TEXT = re.compile(r"(?<![\w.])(%s)[ \t]*\(" % (r"(?>[A-Za-z_][\w.]*)" if sys.version_info >= (3, 11) else r"[A-Za-z_][\w.]*"))
# The same scan over the reversed text: ``(``, blanks, then the name backwards (kept when it starts
# with a letter or ``_``). Greedy, so the name is whole, as the look-behind above makes it.
_CALL_TEXT_REVERSED = re.compile(r"\([ \t]*([\w.]+)")
_CALL_NAME_CHAR = re.compile(r"[\w.]")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NOT_CALLS = frozenset({"if", "elif", "while", "for", "return", "and", "or", "not", "in", "is", "print",
                        "def", "class", "lambda", "assert", "yield", "await", "with", "except", "del"})


def summarize(tree: ast.Module, path: str, text: Optional[str] = None,
              reuse: Optional[Dict[tuple, tuple]] = None) -> dict:
    """Phase 1: the summary of one parsed file. Given the text, a file without a gradient step
    is summarised from its statements and the call names in each function's source (a regex,
    an order of magnitude cheaper than visiting every expression node); its loops cannot make
    anything run every step. ``reuse``: an editor's table of function records from its last
    summaries of the same buffer (``_Summarizer.reuse``), read and filled here."""
    module, is_package = module_name(path)
    summarizer = _Summarizer(module, is_package)
    summarizer.reuse = reuse
    if text is not None:
        summarizer.loaders_possible = "DataLoader" in text
        summarizer.gpu_trainer = ("Trainer" in text and _GPU_TRAINER.search(text) is not None
                                  and _CPU_TRAINER.search(text) is None)
        if not _ROOT_TEXT.search(text):
            summarizer.text = text
            summarizer.reversed = text[::-1]
            lines = line_starts(text)  # lines end at \n, \r\n or a lone \r, as CPython counts them
            lines[-1] = len(text)  # the end of the last line, newline or not
            summarizer.lines = lines
    summary = summarizer.run(tree)
    _program_facts(summary, tree, text, summarizer.deps)
    _training_facts(summary, text)
    _evaluation_helpers(summary, tree)
    _class_facts(summary, tree, text)
    loader_params = loader_parameters(tree, text)  # functions a loader may be handed to (TL102/TL103)
    if loader_params:
        summary["loader_params"] = loader_params
    if text is None or "oader" in text:  # may build or name a loader: may hand one to loader_params
        summary["spells_loader"] = True
    if reuse is not None:  # the functions edited away: their records (and nodes) are dropped
        for key in [k for k in reuse if k not in summarizer._used]:
            del reuse[key]
    return summary


def _program_facts(summary: dict, tree: ast.Module, text: Optional[str], deps: Set[str]) -> None:
    """What the index needs to say whether a file's programs are on an accelerator
    (``ProjectIndex.cpu_programs``): ``root`` (a script: module-level code that runs), ``cpu``
    (its own code certainly touches no accelerator: ``accelerator.touches_accelerator``, read
    only for a script or a module outside any package; a packaged module counts as unknown, which
    keeps every program importing it off the CPU-only list) and ``deps`` (what it imports)."""
    root = _is_program_root(tree)
    if root:
        summary["root"] = True
    module = summary["module"]
    top = module.split(".", 1)[0]
    # a packaged file importing its own package reaches a module never read (unknown): not read
    packaged = "." in module and any(d == top or d.startswith(top + ".") for d in deps)
    if text is not None and (root or "." not in module) and not packaged and not touches_accelerator(text, tree):
        summary["cpu"] = True
    if deps:
        summary["deps"] = sorted(deps)


# -- does the program train? (issue 29; G1, TL701) ----------------------------------------------
#: Words of the rules that ask whether the program trains (TL701: a DataParallel only for
#: inference). Only files spelling one get the fact: facts on other files would only send them
#: to phase 3 again.
TRAINING_QUESTIONS = ("DataParallel", "data_parallel")


def _training_facts(summary: dict, text: Optional[str]) -> None:
    """``untrained``: the file's own text certainly trains nothing (``training.training_word``;
    a summary without it counts as training); ``asks_training``: it spells a word of
    ``TRAINING_QUESTIONS``."""
    if text is None:
        return
    from torchlint.training import training_word

    if training_word(text) is None:
        summary["untrained"] = True
    if any(word in text for word in TRAINING_QUESTIONS):
        summary["asks_training"] = True


# -- evaluation helpers and mode-free classes for other files (W3, issue 29 classes 3 and 8) --------
#: Names in a function that decide about gradients or the mode, or train: the caller cannot decide
_GRAD_WORDS = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "enable_grad", "backward", "step",
                         "zero_grad", "eval", "train", "requires_grad", "requires_grad_", "grad", "autograd",
                         "manual_backward", "eval_mode"})
_ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})


def _evaluation_helpers(summary: dict, tree: ast.Module) -> None:
    """``evaluates``: name -> [loader parameter, its position, model parameter, its position,
    line] for the module-level functions that loop over a parameter (``for b in data_loader``,
    through ``enumerate``/``tqdm``) and, in the loop, call another parameter (``model(x)``,
    ``model.forward(x)``) or hand it to a module-level function of the file that calls it
    (``calc_loss_batch(x, y, model, device)``), with no decorator and nothing about gradients or
    the mode in either (no ``no_grad``, ``backward``, ``.step()``, ``.eval()``...): the caller's
    mode and gradients decide (TL402 at the caller, ``ProjectIndex.eval_helpers``)."""
    functions = {n.name: n for stmt in tree.body for n in _module_level(stmt)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: Dict[str, list] = {}
    runs: Dict[Tuple[str, int], bool] = {}

    def clean(function) -> bool:
        for node in ast.walk(function):
            kind = type(node)
            if (kind is ast.Name and node.id in _GRAD_WORDS) or (kind is ast.Attribute and node.attr in _GRAD_WORDS):
                return False
        return not function.decorator_list

    def runs_param(name: str, position: int) -> bool:  # a helper that calls its parameter at ``position``
        key = (name, position)
        if key not in runs:
            helper = functions.get(name)
            params = _positional(helper) if helper is not None else []
            runs[key] = (helper is not None and position < len(params) and clean(helper) and any(
                type(n) is ast.Call and type(n.func) is ast.Name and n.func.id == params[position]
                for n in ast.walk(helper)))
        return runs[key]

    for name, function in functions.items():
        params = _positional(function)
        if len(params) < 2 or type(function) is ast.AsyncFunctionDef:
            continue
        for loop in _for_statements(function.body):
            iterable = loop.iter
            while type(iterable) is ast.Call and iterable.args and _dotted(iterable.func) in _ITERATION_WRAPPERS:
                iterable = iterable.args[0]
            if type(iterable) is not ast.Name or iterable.id not in params:
                continue
            model = _model_run(loop, params, iterable.id, runs_param)
            if model is not None and clean(function):
                found[name] = [iterable.id, params.index(iterable.id), model, params.index(model), function.lineno]
                break
    if found:
        summary["evaluates"] = found


def _for_statements(statements) -> Iterable[ast.For]:
    """The ``for`` statements among these and their blocks (statements only, no nested scope)."""
    stack = list(statements)
    while stack:
        stmt = stack.pop()
        kind = type(stmt)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) or kind in _SIMPLE:
            continue
        if kind is ast.For:
            yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(stmt, name, ()) or ())


def _positional(function) -> List[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


def _model_run(loop: ast.For, params: List[str], loader: str, runs_param) -> Optional[str]:
    """The parameter (not ``loader``) that the loop's body calls, directly or through a helper."""
    for node in _own_nodes(loop.body):
        if type(node) is not ast.Call:
            continue
        func = node.func
        if type(func) is ast.Attribute and func.attr == "forward":
            func = func.value
        if type(func) is ast.Name and func.id in params and func.id != loader:
            return func.id
        if type(node.func) is ast.Name and not any(type(a) is ast.Starred for a in node.args):
            for i, arg in enumerate(node.args):
                if type(arg) is ast.Name and arg.id in params and arg.id != loader and runs_param(node.func.id, i):
                    return arg.id
    return None


#: a file that may give a model weights (TL902 asks whether its classes read the mode)
_LOADS_WEIGHTS = "load_state_dict"


def _class_facts(summary: dict, tree: ast.Module, text: Optional[str]) -> None:
    """``loads_weights``: the file spells ``load_state_dict`` (its imported project classes are
    judged in phase 2, ``ProjectIndex.mode_free``); ``class_text``: a hash of the module-level
    statements a class's mode depends on (classes, functions, imports, assignments), so that an
    edit there builds the index again (the judgement of an importer's class is in its facts)."""
    if text is None:
        return
    if _LOADS_WEIGHTS in text:
        summary["loads_weights"] = True
    if "class" not in text or not any(type(n) is ast.ClassDef for n in tree.body):
        return
    starts = line_starts(text)
    digest = hashlib.blake2b(digest_size=8)
    for stmt in tree.body:
        if type(stmt) in (ast.Expr, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith):
            continue  # a script's own code: no class reads it
        first = stmt.decorator_list[0].lineno if getattr(stmt, "decorator_list", None) else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        digest.update(text[starts[first - 1]:starts[min(last, len(starts) - 1)]].encode("utf-8", "surrogatepass"))
    summary["class_text"] = digest.hexdigest()


def _is_program_root(tree: ast.Module) -> bool:
    """Does the module's own code run something (a script, a notebook's cells): ``if __name__ ==
    "__main__":``, a loop, a ``with`` or a call statement at module level?"""
    for stmt in tree.body:
        kind = type(stmt)
        if kind in (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith):
            return True
        if kind is ast.Expr and type(stmt.value) in (ast.Call, ast.Await):
            return True
        if kind is ast.If and "__name__" in {n.id for n in ast.walk(stmt.test) if type(n) is ast.Name}:
            return True
    return False


# -- phase 2: the project index ----------------------------------------------------------------

class ProjectIndex:
    """The call graph of every summarised file, and the facts each file gets from it."""

    def __init__(self, summaries: Mapping[str, dict]) -> None:
        self.summaries = {p: s for p, s in summaries.items() if s and s.get("v") == SUMMARY_VERSION}
        self.by_module: Dict[str, str] = {}
        for path, summary in sorted(self.summaries.items()):
            self.by_module.setdefault(summary["module"], path)
        self.per_step: Dict[Tuple[str, str], Tuple[str, str]] = {}
        self.moved: Dict[Tuple[str, str], str] = {}
        self.sites: Dict[str, Tuple[str, int]] = {}  # a "called every step from" reason -> (path, line)
        self._torch_bases: Dict[Tuple[str, str], Optional[str]] = {}
        self._by_path: Optional[Dict[str, Tuple[dict, dict]]] = None
        self._tracked: Optional[bool] = None
        self._cpu: Optional[Dict[str, str]] = None
        self._propagate()

    def _function(self, path: str, qualname: str) -> Optional[dict]:
        return self.summaries[path]["functions"].get(qualname)

    def resolve(self, path: str, caller: Optional[str], callee: str) -> Optional[Tuple[str, str]]:
        """(path, qualname) of the project function a call names, or None."""
        summary = self.summaries[path]
        functions = summary["functions"]
        if callee.startswith("@"):  # through an import: find the longest module prefix
            dotted = callee[1:]
            parts = dotted.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                target = self.by_module.get(".".join(parts[:cut]))
                if target is not None:
                    rest = ".".join(parts[cut:])
                    if rest in self.summaries[target]["functions"]:
                        return target, rest
                    init = self.summaries[target]["imports"].get(parts[cut])
                    if init is not None and cut == len(parts) - 1:  # re-exported by a package __init__
                        return self.resolve(target, None, "@" + init)
                    return None
            return None
        head, _, rest = callee.partition(".")
        if head in ("self", "cls") and caller:
            owner = functions.get(caller, {}).get("class")
            if owner and rest and f"{owner}.{rest}" in functions:
                return path, f"{owner}.{rest}"
            return None
        if caller:  # a nested function of the caller, or of its outer functions
            scope = caller
            while scope:
                if f"{scope}.{callee}" in functions:
                    return path, f"{scope}.{callee}"
                scope = scope.rpartition(".")[0]
        if callee in functions:
            return path, callee
        return None

    def _propagate(self) -> None:
        queue: List[Tuple[str, str]] = []

        def mark(key: Tuple[str, str], kind: str, why: str) -> None:
            old = self.per_step.get(key)
            if old is None or (old[0] == EVAL and kind == TRAIN):
                self.per_step[key] = (kind, why)
                queue.append(key)

        for path, summary in sorted(self.summaries.items()):
            records = [(None, summary["top"])] + sorted(summary["functions"].items())
            for caller, record in records:
                if caller is not None and record.get("hook"):
                    mark((path, caller), record["hook"], f"a hook that runs every step (`{caller.rsplit('.', 1)[-1]}`)")
                for callee, line in record.get("step_calls", ()):
                    key = self.resolve(path, caller, callee)
                    if key is not None:
                        why = f"called every step from {_short(path)}:{line}"
                        self.sites.setdefault(why, (path, line))
                        mark(key, TRAIN, why)
                for callee, line in record.get("moved_factories", ()):
                    key = self.resolve(path, caller, callee)
                    if key is not None and self._function(*key).get("returns_loader"):
                        self.moved.setdefault(key, f"{_short(path)}:{line}")
        trainers = sorted(p for p, summary in self.summaries.items() if summary.get("gpu_trainer"))
        if trainers:  # Lightning moves the batches of a DataModule's/LightningModule's loaders
            for path, summary in sorted(self.summaries.items()):
                for qualname, record in summary["functions"].items():
                    if (record.get("class") and qualname.rsplit(".", 1)[-1] in _LIGHTNING_LOADER_HOOKS
                            and record.get("returns_loader")):
                        self.moved.setdefault((path, qualname), f"Lightning's Trainer on GPU, {_short(trainers[0])}")
        while queue:
            key = queue.pop()
            kind, why = self.per_step[key]
            path, caller = key
            record = self._function(path, caller)
            for callee in record.get("calls", ()):
                target = self.resolve(path, caller, callee)
                if target is not None and target != key:
                    mark(target, kind, why)

    def facts_for(self, path: str) -> FileFacts:
        if self._by_path is None:  # the facts grouped by file once, not scanned per file
            self._by_path = {}
            for (p, q), v in self.per_step.items():
                self._by_path.setdefault(p, ({}, {}))[0][q] = v
            for (p, q), v in self.moved.items():
                self._by_path.setdefault(p, ({}, {}))[1][q] = v
        per_step, moved = self._by_path.get(path, ({}, {}))
        subclasses = self._subclasses_seen_from(path)
        sites = {why: self.sites[why] for _, why in per_step.values() if why in self.sites}
        cpu = self.cpu_programs().get(path, "")
        inference = self.inference_programs.get(path, "")
        ddp = self.ddp_programs.get(path, "")
        helpers = self.eval_helpers(path)
        mode_free = self.mode_free(path)
        loader_helpers = self.loader_helpers(path)
        if not (per_step or moved or subclasses or cpu or inference or ddp or helpers or mode_free or loader_helpers):
            return EMPTY_FACTS
        return FileFacts(per_step, moved, subclasses, sites, cpu, inference, ddp, helpers, mode_free, loader_helpers)

    # -- what a file imports from the project (W3: evaluation helpers, mode-free classes) ----------
    @cached_property
    def _by_root(self) -> Dict[str, Dict[str, str]]:
        """folder a module's name starts from (a script's folder: the first entry of its
        ``sys.path``) -> module name -> path, for every summarised file."""
        found: Dict[str, Dict[str, str]] = {}
        for path, summary in sorted(self.summaries.items()):
            found.setdefault(_import_root(path, summary["module"]), {}).setdefault(summary["module"], path)
        return found

    def _imported(self, importer: str, dotted: str, root: str) -> Optional[Tuple[str, str]]:
        """(path, the rest of the name) of the project module the import ``dotted`` names,
        looked up from ``importer``'s folder as Python does for a script or notebook there (a
        folder of scripts often has its own ``model.py``); a dotted package name anywhere in
        the project. ``root``: the folder ``importer``'s own name starts from."""
        near = self._by_root.get(root, {})
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            target = near.get(module) or (self.by_module.get(module) if "." in module else None)
            if target is not None:
                return (target, ".".join(parts[cut:])) if target != importer else None
        return None

    def _imports_of(self, path: str) -> List[Tuple[str, str, str]]:
        """(name as ``path`` spells it, project file, name there or "" for the module itself) for
        each import of a summarised file; for a notebook (no summary), every module its folder
        holds, spelt by module name."""
        cache = self.__dict__.setdefault("_imports_cache", {})
        found = cache.get(path)
        if found is None:
            found = cache[path] = self._find_imports(path)
        return found

    def _find_imports(self, path: str) -> List[Tuple[str, str, str]]:
        summary = self.summaries.get(path)
        if summary is None:
            if not path.endswith(".ipynb"):
                return []
            root = os.path.dirname(os.path.abspath(path))
            return [(module, target, "") for module, target in sorted(self._by_root.get(root, {}).items())]
        found = []
        root = _import_root(path, summary["module"])
        for local, qualified in sorted(summary["imports"].items()):
            target = self._imported(path, qualified, root)
            if target is not None:
                found.append((local, *target))
        return found

    def eval_helpers(self, path: str) -> Dict[str, Tuple[str, int, str, int, str]]:
        """name as ``path`` spells it -> (loader parameter, position, model parameter, position,
        where): the functions of other project files it imports that run a model parameter over
        a loader parameter and leave gradients and the mode to the caller (``evaluates``)."""
        found: Dict[str, Tuple[str, int, str, int, str]] = {}
        if not self._evaluates:
            return found
        for local, target, name in self._imports_of(path):
            helpers = self.summaries[target].get("evaluates")
            if not helpers:
                continue
            for function, (loader, li, model, mi, line) in sorted(helpers.items()):
                if not name or name == function:
                    key = f"{local}.{function}" if not name else local
                    found[key] = (loader, li, model, mi, f"{_short(target)}:{line}")
        return found

    @cached_property
    def _evaluates(self) -> bool:
        return any(s.get("evaluates") for s in self.summaries.values())

    def loader_helpers(self, path: str) -> Dict[str, Tuple[Tuple[str, ...], Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], str]]:
        """name as ``path`` spells it -> (positional parameters, positions iterated, moved,
        iterated in a loop of its own, where) for the functions and methods of other project
        files it imports that iterate a parameter (``loader_params``): ``train_one_epoch``,
        ``engine.evaluate``, ``SimCLR.train`` (a method of an imported class). Only for a file
        that spells a loader (``spells_loader``): facts make a file walked whole again."""
        found: Dict[str, Tuple[Tuple[str, ...], Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], str]] = {}
        if not self._loader_params:
            return found
        summary = self.summaries.get(path)
        if summary is not None and not summary.get("spells_loader"):
            return found
        for local, target, name in self._imports_of(path):
            functions = self.summaries[target].get("loader_params")
            if not functions:
                continue
            for qualname, (params, iterated, moved, repeated, line) in sorted(functions.items()):
                if not name:
                    key = f"{local}.{qualname}"
                elif qualname == name:
                    key = local
                elif qualname.startswith(name + "."):
                    key = local + qualname[len(name):]
                else:
                    continue
                found[key] = (tuple(params), tuple(iterated), tuple(moved), tuple(repeated), f"{_short(target)}:{line}")
        return found

    @cached_property
    def _loader_params(self) -> bool:
        return any(s.get("loader_params") for s in self.summaries.values())

    def mode_free(self, path: str) -> Dict[str, Tuple[str, str, str]]:
        """Names ``path`` spells for the classes (with bases: possible models) of other project
        files it imports -> (file, class, ``class_text``), for a file that gives a model weights
        (``loads_weights``). Whether they read the mode is judged in the worker, only where
        TL902 asks (``FileModel.is_mode_free_class``): reading and judging every such file here
        would cost the parent, which runs alone, about as much as parsing them."""
        summary = self.summaries.get(path)
        if summary is None or not summary.get("loads_weights"):
            return {}
        found: Dict[str, Tuple[str, str, str]] = {}
        for local, target, name in self._imports_of(path):
            theirs = self.summaries[target]
            classes = theirs.get("classes", {})
            for cls in ([name] if name else sorted(classes)):
                if classes.get(cls) and theirs.get("class_text"):
                    found[local if name else f"{local}.{cls}"] = (target, cls, theirs["class_text"])
        return found

    # -- programs on the host ---------------------------------------------------------------------
    def cpu_programs(self) -> Dict[str, str]:
        """path -> why, for the files whose every program certainly never touches an accelerator:
        a script (``root``) whose own code and everything it imports (in the project) are on the
        host, or a module outside any package that only such scripts import. Any script on an
        accelerator that imports a file, directly or not, takes it off; a module no script
        imports is used from outside: unknown."""
        if self._cpu is not None:
            return self._cpu
        summaries = self.summaries
        roots = sorted(p for p, s in summaries.items() if s.get("root"))
        self._cpu = {}
        if not any(summaries[p].get("cpu") for p in roots):
            return self._cpu
        edges: Dict[str, Set[str]] = {}
        importers: Dict[str, Set[str]] = {}
        for path, summary in summaries.items():
            for dep in summary.get("deps", ()):
                target = self._module_path(dep)
                if target is not None and target != path:
                    edges.setdefault(path, set()).add(target)
                    importers.setdefault(target, set()).add(path)
        # files whose imports reach a file that may touch an accelerator (itself included)
        reaches = {p for p, s in summaries.items() if not s.get("cpu")}
        _spread(reaches, importers)
        on_device = {p for p in roots if p in reaches}
        _spread(on_device, edges)  # in a program on an accelerator
        on_host = {p for p in roots if p not in reaches}
        why = {p: f"`{_short(p)}` and what it imports touch no accelerator" for p in on_host}
        for root in sorted(on_host):
            for path in _reached(root, edges):
                why.setdefault(path, f"only imported by programs that touch no accelerator ({_short(root)})")
        for path, reason in why.items():
            summary = summaries[path]
            if path not in on_device and summary.get("cpu") and (summary.get("root") or "." not in summary["module"]):
                self._cpu[path] = reason
        return self._cpu

    # -- programs that never train (G1, TL701) ------------------------------------------------------
    @cached_property
    def inference_programs(self) -> Dict[str, str]:
        """path -> why, for the scripts (``root``) that ask (``asks_training``) and whose every
        program certainly never trains: neither the script nor anything it imports in the
        project, directly or not, trains (``untrained``), and no script that trains imports it.
        Only scripts: a module may also be imported by a notebook or a program outside the
        project (unknown: it may train)."""
        summaries = self.summaries
        asking = [p for p, s in summaries.items() if s.get("root") and s.get("asks_training") and s.get("untrained")]
        if not asking:
            return {}
        edges: Dict[str, Set[str]] = {}
        importers: Dict[str, Set[str]] = {}
        for path, summary in summaries.items():
            for dep in summary.get("deps", ()):
                target = self._module_path(dep)
                if target is not None and target != path:
                    edges.setdefault(path, set()).add(target)
                    importers.setdefault(target, set()).add(path)
        trains = {p for p, s in summaries.items() if not s.get("untrained")}
        _spread(trains, importers)  # files whose imports reach a file that may train
        in_training = {p for p, s in summaries.items() if s.get("root") and p in trains}
        _spread(in_training, edges)  # files of a program that may train
        return {p: f"`{_short(p)}` and what it imports never compute gradients"
                for p in sorted(asking) if p not in trains and p not in in_training}

    # -- programs that wrap a model in DistributedDataParallel (F3, TL403) -------------------------
    @cached_property
    def ddp_programs(self) -> Dict[str, str]:
        """path -> where, for the files with a training loop (a record with ``step_calls``) that
        are part of a program wrapping a model in ``DistributedDataParallel``: a script
        (``root``) whose own code, or a project file it imports (directly or not), calls it. The
        model such a loop is handed as a parameter may be that one (``main.py`` wraps it,
        ``engine.py``'s ``train_one_epoch(model, ...)`` accumulates). Only files with a training
        loop get the fact: it is one more reason to lint a file again in phase 3."""
        summaries = self.summaries
        builders = sorted(p for p, s in summaries.items() if _calls_ddp(s))
        if not builders:
            return {}
        edges: Dict[str, Set[str]] = {}
        importers: Dict[str, Set[str]] = {}
        for path, summary in summaries.items():
            for dep in summary.get("deps", ()):
                target = self._module_path(dep)
                if target is not None and target != path:
                    edges.setdefault(path, set()).add(target)
                    importers.setdefault(target, set()).add(path)
        reaching = set(builders)
        _spread(reaching, importers)  # files whose imports reach a builder (builders included)
        in_program = {p for p in reaching if summaries[p].get("root")}
        _spread(in_program, edges)  # every file of a program that builds DDP
        where = f"{_short(builders[0])} wraps a model in DistributedDataParallel"
        return {p: where for p in sorted(in_program) if _has_training_loop(summaries[p])}

    def _module_path(self, dotted: str) -> Optional[str]:
        """The project file of the longest module prefix of ``dotted`` (``pkg.mod.func`` -> pkg/mod.py)."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            found = self.by_module.get(".".join(parts[:cut]))
            if found is not None:
                return found
        return None

    # -- classes ----------------------------------------------------------------------------------
    def torch_base(self, path: str, name: str, seen: Optional[Set[Tuple[str, str]]] = None) -> Optional[str]:
        """The torch class of ``TRACKED_BASES`` the project class ``name`` of ``path`` derives
        from, through project classes in any file, or None."""
        if seen is None:  # a question from outside: answered once per class
            memo = self._torch_bases
            if (path, name) not in memo:
                memo[(path, name)] = self.torch_base(path, name, set())
            return memo[(path, name)]
        if (path, name) in seen:
            return None
        seen.add((path, name))
        summary = self.summaries[path]
        for base in summary.get("classes", {}).get(name, ()):
            if base.startswith("@"):
                qualified = canonical_name(base[1:])
                if qualified in TRACKED_BASES:
                    return qualified
                found = self._class_target(base[1:])
                if found is not None:
                    result = self.torch_base(found[0], found[1], seen)
                    if result:
                        return result
            elif base in summary.get("classes", {}):
                result = self.torch_base(path, base, seen)
                if result:
                    return result
        return None

    def _has_tracked_classes(self) -> bool:
        """Does any project class derive from one of ``TRACKED_BASES``? (Most projects: no.)"""
        if self._tracked is None:
            self._tracked = any(self.torch_base(path, name) for path, summary in self.summaries.items()
                                for name in summary.get("classes", {}))
        return self._tracked

    def _class_target(self, dotted: str) -> Optional[Tuple[str, str]]:
        module, _, name = dotted.rpartition(".")
        path = self.by_module.get(module)
        if path is not None and name in self.summaries[path].get("classes", {}):
            return path, name
        return None

    def _subclasses_seen_from(self, path: str) -> Dict[str, str]:
        summary = self.summaries.get(path)
        if summary is None or not self._has_tracked_classes():
            return {}
        found: Dict[str, str] = {}
        for name in summary.get("classes", {}):
            base = self.torch_base(path, name)
            if base:
                found[name] = base
        for local, qualified in summary["imports"].items():
            target = self._class_target(qualified)
            if target is not None:
                base = self.torch_base(*target)
                if base:
                    found[local] = base
        return found


_DDP = "torch.nn.parallel.DistributedDataParallel"


def _import_root(path: str, module: str) -> str:
    """The folder ``module`` (the dotted name of ``path``) is imported from."""
    folder = os.path.dirname(os.path.abspath(path))
    levels = module.count(".") + (1 if os.path.basename(path).startswith("__init__.") else 0)
    for _ in range(levels):
        folder = os.path.dirname(folder)
    return folder


def _calls_ddp(summary: dict) -> bool:
    """Does the file's own code call ``DistributedDataParallel(...)`` (by an imported name)?"""
    for record in [summary.get("top", {}), *summary.get("functions", {}).values()]:
        for callee in record.get("calls", ()):
            if callee.startswith("@") and callee.endswith("DistributedDataParallel") and canonical_name(callee[1:]) == _DDP:
                return True
    return False


def _has_training_loop(summary: dict) -> bool:
    """Does a loop of the file take a gradient step (a record with calls made every step)?"""
    return any(record.get("step_calls") for record in [summary.get("top", {}), *summary.get("functions", {}).values()])


def _spread(found: Set[str], edges: Mapping[str, Set[str]]) -> None:
    """Add to ``found`` every file reached from it along ``edges``."""
    stack = list(found)
    while stack:
        for target in edges.get(stack.pop(), ()):
            if target not in found:
                found.add(target)
                stack.append(target)


def _reached(start: str, edges: Mapping[str, Set[str]]) -> Set[str]:
    found = {start}
    _spread(found, edges)
    return found


def compact_summary(summary: dict) -> dict:
    """The summary without the empty fields of its function records (the results cache stores
    tens of thousands of them); phase 2 reads a missing field as empty."""
    functions = {q: {k: v for k, v in record.items() if v or k == "line"} for q, record in summary["functions"].items()}
    return dict(summary, functions=functions)


def _local_name(callee: str) -> str:
    """The name a non-import call looks up among this file's functions: ``f`` -> f,
    ``self.f`` / ``cls.f`` -> f."""
    head, _, rest = callee.partition(".")
    return rest.partition(".")[0] if head in ("self", "cls") else callee


def _short(path: str) -> str:
    return os.path.basename(path)


def summarize_text(text: str, path: str) -> Optional[dict]:
    """Phase 1 for a buffer (the editor, ``lint_source``): None if Python cannot parse it."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return summarize(tree, path, text)
