"""The whole-file model: what a rule may know about the file beyond its own code.

A rule walks libcst's tree of the code it looks at, and in a batch run or an editor that tree may
hold only part of the file (``partial.py`` stubs definitions no rule has a site in; the editor
walks only the definitions an edit touched). Anything a rule reads *outside* its own definition
must therefore come from here: this model is built from CPython's ``ast`` tree of the **whole**
text, never of a partial one, so what it answers cannot depend on which parts libcst parsed.

Each answer is computed once per file on first use, and every answer given is recorded
(``answers``): the editor keeps a definition's findings only while the answers its rules were
given stay the same (``digest``), so a fact that changed elsewhere in the file (a ``global``
loader bound in another function, an import moved into compatibility code) is never served
stale.

Facts:

- ``loader_names()``: dotted names (``dl``, ``self.train_dl``) some statement of the file, in any
  function, assigns a ``torch.utils.data.DataLoader(...)`` call to.
- ``compat_names(scope)``: names bound, by an import in compatibility code (``try: import
  functorch as ft / except ImportError``, an ``if`` on a version), in ``scope`` or a scope that
  encloses it: a function-local import does not reach another function.
- ``global_names()``: names a function declares ``global``; ``default_device_settings()``: how
  the file sets a default device, if it does (TL207).
- ``accumulates_into_grads(scope)``: whether the innermost class around ``scope`` (else the
  module outside its classes) adds into ``.grad`` itself (``p.grad += g``, ``p.grad.add_(g)``,
  ``p.grad.copy_(g)``): a parameter server summing remote gradients needs them allocated.
"""

from __future__ import annotations

import ast
import hashlib
import re
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, cast

from torchlint.astindex import GAP
from torchlint.torch_api import DATALOADER, canonical_name

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex
    from torchlint.project import FileFacts

#: A scope: the names of the enclosing ``def``/``class`` statements, outermost first, each
#: tagged ``"d"`` (function) or ``"c"`` (class). The module is ``()``.
Scope = Tuple[Tuple[str, str], ...]

# Compatibility code (rules/compat.py reads these too): a `try` catching one of these errors, or
# an `if` whose test picks code by torch version: `torch.__version__ >= "2.0"`,
# `version.parse(...)`, `is_torch_greater_or_equal("2.2")`, `_TORCH_GREATER_EQUAL_2_0`,
# `TORCH_VERSION` ("version" as a word part: not "conversion"; `is_torch_xla_available()` is a
# backend check, not a version) ...
_COMPAT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError"})
_VERSION_TEST = re.compile(
    r"(?<![a-z])version|torch_(?:greater|less|ge|gt|le|lt|at_least|older|newer)|_TORCH_\w*\d", re.IGNORECASE
)
# ... or a torch feature: `hasattr(torch, "compile")`, `getattr(torch.backends, "mps", None)`.
_FEATURE_TESTS = frozenset({"hasattr", "getattr"})
_TORCH_PACKAGES = ("torch", "functorch", "torchvision")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_DEFAULT_DEVICE = re.compile(r"set_default_device|set_default_tensor_type|with\s+torch\s*\.\s*device\b")
# `<x>.grad[.data] +=`/`-=` or `.add_(`/`.sub_(`/`.copy_(` on it, as the text spells it: the
# cheap test before the walk (rules/zero_grad.py's TL401 reads the answer)
_ACCUMULATES = re.compile(rf"grad(?:{GAP}(?:\)|\.{GAP}data\b))*{GAP}(?:[-+]=|\.{GAP}(?:add_|sub_|copy_){GAP}\()")


class FileModel:
    """Facts about one file's whole text, from CPython's tree (see the module docstring)."""

    def __init__(self, tree: Optional[ast.Module], text: str, index: Optional["AstIndex"] = None) -> None:
        #: CPython's tree of ``text``; None until a question needs it (``of_text``: many answers
        #: come from a look at the text alone, and phase 3 of a run has no tree at hand)
        self._tree = tree
        self.text = text
        self._index = index
        #: question -> its answer, for every question asked so far, in order
        self.answers: Dict[str, object] = {}
        #: True: a large text read in chunks of top-level statements (``parsing.ast_chunks``), parsed
        #: again for each question and never held together; False: ``tree`` is the whole file's
        self._chunked = False
        self._bindings: Optional[Tuple[Dict[str, Set[str]], List[str]]] = None
        #: the file's project facts (``project.FileFacts``), set by the rules' context; None: unknown
        self.project: Optional["FileFacts"] = None

    @classmethod
    def of_text(cls, text: str) -> "FileModel":
        """The model of ``text`` with no tree at hand (phase 3 of a run): a large text is read in
        chunks of top-level statements, as the parser does there (``parsing.ast_chunks``), so
        the file's whole CPython tree is never held next to libcst's."""
        from torchlint.parsing import ast_chunks

        if ast_chunks(text) is None:
            return cls(None, text)  # parsed when a question first needs the tree
        model = cls(_EMPTY, text)
        model._chunked = True
        return model

    @property
    def tree(self) -> ast.Module:
        tree = self._tree
        if tree is None:
            tree = self._tree = _whole_tree(self.text)
        return tree

    @tree.setter
    def tree(self, tree: ast.Module) -> None:
        self._tree = tree

    @property
    def index(self) -> "AstIndex":
        if self._index is None:
            from torchlint.astindex import AstIndex

            self._index = AstIndex(self.tree, self.text)
        return self._index.whole()

    def _ask(self, question: str, compute: Callable[[], object],
             chunked: Optional[Callable[[], object]] = None):
        """The recorded answer to ``question``, computed once: by ``compute()`` of the whole tree;
        of a text read in chunks, by ``chunked()`` (which reads ``chunks()`` itself) where the
        answer is not the merge of the chunks' answers, else by ``compute()`` of each chunk."""
        try:
            return self.answers[question]
        except KeyError:
            pass
        if self._chunked:
            from torchlint.parsing import _Unsplittable

            try:
                value = chunked() if chunked is not None else _merged([compute() for _ in self.chunks()])
            except _Unsplittable:
                self._chunked = False
                self.tree, self._index = _whole_tree(self.text), None
                value = compute()
        else:
            value = compute()
        self.answers[question] = value
        return value

    def chunks(self) -> Iterator[ast.Module]:
        """A text read in chunks: each chunk's tree in turn, one alive at a time, as ``tree`` and
        ``index`` (names resolve through the whole file's imports). Raises
        ``parsing._Unsplittable`` where the text does not split (``_ask`` then reads it whole)."""
        from torchlint.astindex import AstIndex
        from torchlint.parsing import ast_chunks

        try:
            if self._bindings is None:  # the whole file's imports, read chunk by chunk
                bindings: Dict[str, Set[str]] = {}
                star: List[str] = []
                for tree in ast_chunks(self.text) or ():
                    index = AstIndex(tree, self.text)
                    for name, qualified in index.bindings().items():
                        bindings.setdefault(name, set()).update(qualified)
                    star.extend(index._star)
                self._bindings = (bindings, star)
            for tree in ast_chunks(self.text) or ():
                index = AstIndex(tree, self.text)
                index._bindings, index._star = self._bindings
                self.tree, self._index = tree, index
                yield tree
        finally:
            self.tree, self._index = _EMPTY, None

    def digest(self, questions: Sequence[str] = ("loader_names", "compat_bindings", "grad_accumulators",
                                                 "global_names", "default_device_settings",
                                                 "numpy_functions", "layer_iterating_classes", "pinned_loaders",
                                                 "layer_list_functions", "literal_flags", "pinned_parameters",
                                                 "loader_classes", "loader_choices", "batches", "accelerator_modules",
                                                 "accelerator_evidence", "grad_free_functions", "training_evidence",
                                                 "periodic_names", "gpu_trainer", "movers", "device_attributes",
                                                 "host_phase_functions")) -> str:
        """A digest of the answers to ``questions`` (asked now if they were not): what an editor
        keys kept findings on, with the texts they were found in."""
        parts = []
        for question in questions:
            value = getattr(self, question)()
            parts.append(f"{question}={sorted(map(repr, value.items() if isinstance(value, dict) else value))}")
        return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    # -- loaders ---------------------------------------------------------------------------------
    def loader_names(self) -> FrozenSet[str]:
        """Dotted names assigned from a ``DataLoader(...)`` call anywhere in the file (a call of one
        of ``loader_classes()`` too)."""
        if "loader_names" not in self.answers:
            self.loader_classes()  # a whole-file answer, asked before the chunks are read
        return cast(FrozenSet[str], self._ask("loader_names", self._loader_names))

    def _loader_names(self) -> FrozenSet[str]:
        if "DataLoader" not in self.text:
            return frozenset()
        index = self.index
        # local names of DataLoader from the file's imports (a chunk's own calls_of sees only
        # the aliases its own statements make)
        aliases = sorted(local for local, qualified in index.bindings().items()
                         if local != "DataLoader" and any(canonical_name(q) == DATALOADER for q in qualified))
        classes = self.loader_classes()  # subclasses, a library's loaders (asked first: whole-file)
        calls = index.calls_of("DataLoader", *aliases, *sorted(classes))
        if calls is None:  # spellings the word search cannot follow: walk the tree
            calls = [(node, ()) for node in ast.walk(self.tree) if isinstance(node, ast.Call)]
        names: Set[str] = set()
        for call, _ in calls:
            parent = _assignment_of(call, index)
            if parent is None:
                continue
            callee = _dotted(call.func)
            if callee is None or ("." in callee and not callee.endswith(".DataLoader")):
                continue
            if callee not in classes and not index.resolves(call.func, lambda name: canonical_name(name) == DATALOADER):
                continue
            targets = parent.targets if type(parent) is ast.Assign else [parent.target]
            for target in targets:
                name = _dotted(target)
                if name:
                    names.add(name)
        return frozenset(names)

    # -- loader classes and batches (issue 29, classes 1 and 2; torchlint/loaderfacts.py) ------------
    # Facts: ``loader_classes()``: local names, besides torch's, whose calls build a DataLoader (a
    # library's subclass such as ``monai.data.DataLoader``, the file's own ``class
    # AudioDataLoader(DataLoader)``); ``batch_names(scope)``: the names of a function (or of the
    # module) bound only to a batch drawn from a loader, as the loader yielded it, or a part of one
    # (``for b in loader``, ``b = next(iter(loader))``, ``next(it)``, a generator of the file
    # that yields a loader's batches, ``x, y = b``, ``b[0]``, the variable of ``[t.to(d) for t in
    # b]``); ``batch_loaders(scope)``: each of those names -> the loaders it is drawn from;
    # ``loader_locals(scope)``: names of a scope bound only to a loader under a name that does not
    # say so (``pbar = tqdm(train_loader)``, ``dl = accelerator.prepare(dl)``, a parameter every
    # call of the file gives a loader: ``evaluate(model, val_loader)`` for ``def evaluate(model,
    # data)``).
    def loader_classes(self) -> FrozenSet[str]:
        """Local names besides torch's own whose calls build a DataLoader (see above)."""
        from torchlint import chunkfacts

        return cast(FrozenSet[str], self._ask("loader_classes", lambda: self._loader_classes()[0],
                                              chunked=lambda: chunkfacts.loader_classes(self)[0]))

    def loader_choices(self) -> FrozenSet[str]:
        """Names bound to ``A if x else B`` where ``A`` or ``B`` builds a DataLoader (``cls =
        DataLoader if plain else IterableDataLoader``): a rule decides with what it knows of the
        other."""
        from torchlint import chunkfacts

        return cast(FrozenSet[str], self._ask("loader_choices", lambda: self._loader_classes()[1],
                                              chunked=lambda: chunkfacts.loader_classes(self)[1]))

    def _loader_classes(self) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        if "DataLoader" not in self.text:  # every subclass and library loader spells it
            return frozenset(), frozenset()
        from torchlint.loaderfacts import loader_classes

        index = self.index
        nodes: Dict[int, ast.AST] = {}  # imports, classes and assignments on lines that say it
        for line in index.lines_matching(re.compile("DataLoader")):
            for node, _ in index.nodes_on(line):
                if type(node) in (ast.ImportFrom, ast.Import, ast.ClassDef, ast.Assign):
                    nodes[id(node)] = node
        return loader_classes(nodes.values(), lambda node: index.resolves(node, lambda q: canonical_name(q) == DATALOADER))

    def batches(self) -> Dict[Scope, FrozenSet[Tuple[str, str, str]]]:
        """scope -> (kind, name, loader) for the names of each scope bound only to a batch
        (``"batch"``) or only to a loader under a name that does not say so (``"loader"``)."""
        if "oader" not in self.text:  # no loader is spelt: no batch can be drawn
            return cast(Dict[Scope, FrozenSet[Tuple[str, str, str]]], self._ask("batches", dict))
        from torchlint import chunkfacts

        names, classes = self.loader_names(), self.loader_classes()  # whole-file answers first
        return cast(Dict[Scope, FrozenSet[Tuple[str, str, str]]],
                    self._ask("batches", lambda: self._batches(names, classes),
                              chunked=lambda: chunkfacts.batches(self, names, classes)))

    def batch_names(self, scope: Scope) -> FrozenSet[str]:
        """Names of ``scope`` (a function's, ``()`` the module's) bound only to a batch drawn from
        a loader, as it was drawn, or to a part of one."""
        return frozenset(name for kind, name, _ in self._scope_batches(scope) if kind == "batch")

    def batch_loaders(self, scope: Scope) -> Dict[str, FrozenSet[str]]:
        """name -> the loaders (dotted names, or ``callee()``) its batch is drawn from."""
        found: Dict[str, Set[str]] = {}
        for kind, name, loader in self._scope_batches(scope):
            if kind == "batch":
                found.setdefault(name, set()).add(loader)
        return {name: frozenset(loaders) for name, loaders in found.items()}

    def loader_locals(self, scope: Scope) -> FrozenSet[str]:
        """Names of ``scope`` bound only to a loader (or a pass-through wrapper of one) whose
        name does not say loader."""
        return frozenset(name for kind, name, _ in self._scope_batches(scope) if kind == "loader")

    def _scope_batches(self, scope: Scope) -> FrozenSet[Tuple[str, str, str]]:
        """One scope's part of ``batches()``, computed for that scope alone (a recorded answer of
        its own; the editor's digest holds the whole-file answer, so a change anywhere counts)."""
        whole = self.answers.get("batches")
        if whole is not None:
            return cast(Dict[Scope, FrozenSet[Tuple[str, str, str]]], whole).get(scope, frozenset())
        if "oader" not in self.text:
            return frozenset()
        if self._chunked:  # read in passes over the chunks (chunkfacts.py): every scope at once
            return self.batches().get(scope, frozenset())
        names, classes = self.loader_names(), self.loader_classes()  # whole-file answers first
        found = self._ask(f"batches {scope!r}", lambda: self._batches(names, classes, scope))
        return cast(Dict[Scope, FrozenSet[Tuple[str, str, str]]], found).get(scope, frozenset())

    def _batches(self, names: FrozenSet[str], classes: FrozenSet[str],
                 scope: Optional[Scope] = None) -> Dict[Scope, FrozenSet[Tuple[str, str, str]]]:
        from torchlint.loaderfacts import batch_sources

        index = self.index

        def calls_named(name: str) -> Tuple[List[ast.Call], bool]:
            """The calls of ``name`` (on lines where it is called) and whether every line that
            spells it calls it (a name handed on as a value has callers out of sight)."""
            lines = index.word_lines(name, call=True)
            calls = {id(n): n for line in lines for n, _ in index.nodes_on(line) if type(n) is ast.Call}
            return list(calls.values()), len(lines) == len(index.word_lines(name))

        found = batch_sources(self.tree, self.text, index._lines(), names, classes,
                              lambda node: index.resolves(node, lambda q: canonical_name(q) == DATALOADER),
                              calls_named, scope)
        return found

    # -- accelerator modules chosen at run time (issue 29; TL501, F2) --------------------------------
    def accelerator_modules(self) -> FrozenSet[str]:
        """Dotted names (``device_module``, ``self.device_module``) bound, anywhere in the file, only
        to ``getattr(torch, <device type>, torch.cuda)``: the accelerator's module (``torch.cuda``,
        ``torch.xpu``...), so ``device_module.empty_cache()`` is ``torch.cuda.empty_cache()`` there."""
        return cast(FrozenSet[str], self._ask("accelerator_modules", self._accelerator_modules))

    def _accelerator_modules(self) -> FrozenSet[str]:
        if re.search(r"getattr\(\s*torch\s*,", self.text) is None:
            return frozenset()
        found: Set[str] = set()
        others: Set[str] = set()
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Assign):
                continue
            value = node.value
            module = (isinstance(value, ast.Call) and _dotted(value.func) == "getattr" and len(value.args) == 3
                      and _dotted(value.args[0]) == "torch"
                      and _dotted(value.args[2]) in ("torch.cuda", "torch.xpu", "torch.mps"))
            for target in node.targets:
                name = _dotted(target)
                if name is not None:
                    (found if module else others).add(name)
        return frozenset(found - others)

    # -- compatibility imports -------------------------------------------------------------------
    def compat_bindings(self) -> Dict[Scope, FrozenSet[Tuple[str, str]]]:
        """scope -> (local name, qualified target) for each name an import in compatibility code
        binds there."""
        return cast(Dict[Scope, FrozenSet[Tuple[str, str]]], self._ask("compat_bindings", self._compat_bindings))

    def compat_names(self, scope: Scope, wanted: Callable[[str], bool]) -> FrozenSet[str]:
        """Local names visible in ``scope`` that an import in compatibility code binds to a
        target ``wanted`` accepts (a scope sees its own bindings, the module's and those of the
        functions around it; a class body's are seen only in that class body)."""
        found: Set[str] = set()
        for where, bindings in self.compat_bindings().items():
            if where == scope or (scope[:len(where)] == where and (not where or where[-1][0] == "d")):
                found.update(local for local, target in bindings if wanted(target))
        return frozenset(found)

    def _compat_bindings(self) -> Dict[Scope, FrozenSet[Tuple[str, str]]]:
        if "import" not in self.text:
            return {}
        found: Dict[Scope, Set[Tuple[str, str]]] = {}
        stack: List[Tuple[ast.AST, Scope]] = [(self.tree, ())]
        while stack:
            node, scope = stack.pop()
            for child in ast.iter_child_nodes(node):
                kind = type(child)
                if isinstance(child, _SCOPES):
                    stack.append((child, scope + (("c" if kind is ast.ClassDef else "d", child.name),)))
                    continue
                if kind is ast.Try or kind.__name__ == "TryStar":
                    handlers = cast(ast.Try, child).handlers
                    if any(_catches_compat_error(h) for h in handlers):
                        blocks = [cast(ast.Try, child).body, *(h.body for h in handlers)]
                        for stmt in _imports_in(blocks):
                            found.setdefault(scope, set()).update(_bound_targets(stmt))
                elif isinstance(child, ast.If):
                    # the test's text is read only when an import is under it (most `if`s hold none)
                    imports = _imports_in([child.body, child.orelse])
                    if imports and self._is_version_test(child.test):
                        for stmt in imports:
                            found.setdefault(scope, set()).update(_bound_targets(stmt))
                if isinstance(child, (ast.stmt, ast.excepthandler)):
                    stack.append((child, scope))
        return {scope: frozenset(names) for scope, names in found.items()}

    # -- module names rebound in functions, a default device (TL207) -----------------------------
    def global_names(self) -> FrozenSet[str]:
        """Names some function of the file declares ``global``: a module-level binding another
        function may replace (the semantic model does not follow ``global``)."""
        return cast(FrozenSet[str], self._ask("global_names", self._global_names))

    def _global_names(self) -> FrozenSet[str]:
        if "global" not in self.text:
            return frozenset()
        index, names = self.index, set()
        for line in index.word_lines("global"):
            for node, _ in index.nodes_on(line):
                if type(node) is ast.Global:
                    names.update(node.names)
        return frozenset(names)

    def default_device_settings(self) -> FrozenSet[str]:
        """How the file sets a default device, as spelt (``set_default_device``, ``with
        torch.device``, the older ``set_default_tensor_type``); empty when it does not. Factories
        may then build on the device."""
        return cast(FrozenSet[str], self._ask("default_device_settings", lambda: frozenset(
            " ".join(m.group(0).split()) for m in _DEFAULT_DEVICE.finditer(self.text))))

    # -- gradients added into -------------------------------------------------------------------
    def grad_accumulators(self) -> FrozenSet[Scope]:
        """The class scopes (``()``: the module outside its classes) whose own code adds into a
        ``.grad``."""
        return cast(FrozenSet[Scope], self._ask("grad_accumulators", self._grad_accumulators))

    def accumulates_into_grads(self, scope: Scope) -> bool:
        """Does the innermost class around ``scope`` (else the module outside its classes) add
        into ``.grad`` itself?"""
        return _class_part(scope) in self.grad_accumulators()

    def _grad_accumulators(self) -> FrozenSet[Scope]:
        if _ACCUMULATES.search(self.text) is None:
            return frozenset()  # no `.grad +=`, `.grad.add_(` ... anywhere: nothing to walk for
        found: Set[Scope] = set()
        stack: List[Tuple[ast.AST, Scope]] = [(self.tree, ())]
        while stack:
            node, scope = stack.pop()
            for child in ast.iter_child_nodes(node):
                kind = type(child)
                inner = scope
                if isinstance(child, _SCOPES):
                    inner = scope + (("c" if kind is ast.ClassDef else "d", child.name),)
                elif kind is ast.AugAssign:
                    aug = cast(ast.AugAssign, child)
                    if type(aug.op) in (ast.Add, ast.Sub) and _is_grad_attribute(aug.target):
                        found.add(_class_part(scope))
                elif kind is ast.Call:
                    func = cast(ast.Call, child).func
                    if type(func) is ast.Attribute and func.attr in ("add_", "sub_", "copy_") and _is_grad_attribute(func.value):
                        found.add(_class_part(scope))
                stack.append((child, inner))
        return frozenset(found)

    # -- classes the same in training and eval mode (issue 29, class 8; F3, TL902) ---------------
    # A class of the file whose every layer is known and none reads the mode (no dropout, batch
    # norm, `self.training`...): `model.eval()` changes nothing for it. Computed in
    # torchlint/modefacts.py; unknown (a layer from another package, one handed in) is never in.
    # TL902 reads it; TL902 is walked at every lint (not statement-local, not read by name), so
    # the answer is recorded but need not be in ``digest()``'s default questions.
    def mode_free_classes(self) -> FrozenSet[str]:
        """Names of the file's module-level classes that compute the same in training and
        evaluation mode."""
        found = self.answers.get("mode_free_classes")
        if found is None:  # not through _ask: a class's layers may be classes of another chunk
            found = self.answers["mode_free_classes"] = self._mode_free_classes()
        return cast(FrozenSet[str], found)

    def _mode_free_classes(self) -> FrozenSet[str]:
        from torchlint.astindex import AstIndex
        from torchlint.modefacts import mode_free_classes

        if "class" not in self.text:
            return frozenset()
        if self._chunked:  # a large text: its whole tree once, only when TL902 asks (as the whole model does)
            tree = _whole_tree(self.text)
            return mode_free_classes(tree, AstIndex(tree, self.text).bindings())
        return mode_free_classes(self.tree, self.index.bindings())

    # -- cross-file halves of mode and evaluation facts (issue 29 classes 3 and 8; W3) ------------
    # From the project index (``FileFacts.mode_free``/``eval_helpers``): their digest is in the
    # file's facts digest, which keys its cached and kept findings (the rules asking set
    # ``uses_project``), so they need no recorded answer here.
    def is_mode_free_class(self, spelled: str) -> bool:
        """Does the class spelt ``spelled`` at a call (``Generator``, ``model.Generator``)
        compute the same in training and eval mode: a class of this file, or of another project
        file it imports?"""
        if "." not in spelled and spelled in self.mode_free_classes():
            return True
        found = self.project.mode_free.get(spelled) if self.project is not None else None
        if found is None:
            return False
        from torchlint.modefacts import judge_file

        path, name, class_text = found
        return name in judge_file(path, class_text)

    def evaluation_helper(self, spelled: str) -> Optional[Tuple[str, int, str, int, str]]:
        """(loader parameter, position, model parameter, position, where) when ``spelled``, a
        function this file imports from another project file, runs its model parameter over
        its loader parameter with gradients and the mode left to the caller; else None."""
        return self.project.eval_helpers.get(spelled) if self.project is not None else None

    # -- periodic tests held in a name (issue 29, TL201/TL204/TL206/TL501: "does this run every step") --
    def periodic_names(self) -> FrozenSet[Tuple[Scope, str]]:
        """(scope, name) for each name that holds a test true on few iterations, so that ``if
        name:`` / ``if name(i, n):`` is as periodic as the test itself: a variable every
        assignment of which in its scope is one (``is_metric_step = i % every == 0``,
        open_clip; ``g_regularize = i % g_reg_every == 0``, stylegan2), and a function of the
        file whose every ``return`` is one (``def divisible_by(num, den): return (num % den) ==
        0``, x-transformers), named in the scope that defines it."""
        return cast(FrozenSet[Tuple[Scope, str]], self._ask("periodic_names", self._periodic_names))

    def periodic_names_at(self, scope: Scope) -> FrozenSet[str]:
        """The names of ``periodic_names`` visible in ``scope`` (its own and its enclosing scopes')."""
        return frozenset(name for where, name in self.periodic_names() if scope[:len(where)] == where)

    def _periodic_names(self) -> FrozenSet[Tuple[Scope, str]]:
        if "%" not in self.text:
            return frozenset()
        from torchlint.project import is_periodic_test

        found: Set[Tuple[Scope, str]] = set()

        def periodic(test: Optional[ast.expr], known: Set[str]) -> bool:
            if test is None:
                return False
            inner = test.func if type(test) is ast.Call else test
            if type(inner) is ast.Name and inner.id in known:
                return True
            if type(test) is ast.BoolOp:
                parts = [periodic(v, known) for v in test.values]
                return any(parts) if type(test.op) is ast.And else all(parts)
            return is_periodic_test(test)

        def visit(body: Sequence[ast.stmt], scope: Scope, outer: Set[str]) -> None:
            values: Dict[str, List[Optional[ast.expr]]] = {}  # None: a binding that is no test
            functions: List[ast.FunctionDef] = []
            stack = list(body)
            while stack:
                stmt = stack.pop()
                if type(stmt) is ast.FunctionDef or type(stmt) is ast.AsyncFunctionDef:
                    values.setdefault(stmt.name, []).append(None)
                    functions.append(cast(ast.FunctionDef, stmt))
                    continue
                if type(stmt) is ast.ClassDef:
                    visit(stmt.body, scope + (("c", stmt.name),), set(outer))
                    continue
                if type(stmt) is ast.Assign:
                    for target in stmt.targets:
                        if type(target) is ast.Name:
                            values.setdefault(target.id, []).append(stmt.value)
                        else:
                            for part in ast.walk(target):
                                if type(part) is ast.Name:
                                    values.setdefault(part.id, []).append(None)
                elif type(stmt) in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor):
                    for node in ast.walk(getattr(stmt, "target")):
                        if type(node) is ast.Name:
                            values.setdefault(node.id, []).append(None)
                for field in ("body", "orelse", "finalbody", "handlers"):
                    stack.extend(getattr(stmt, field, ()) or ())
            known = set(outer)
            for fn in functions:  # predicates first: a variable may hold a call of one
                returns = [n.value for n in _returns(fn.body)]
                if returns and all(periodic(v, known) for v in returns):
                    known.add(fn.name)
                    found.add((scope, fn.name))
            changed = True
            while changed:  # `is_metric_step = (i % n == 0) or is_console_step`: in any order
                changed = False
                for name, bound in values.items():
                    if name not in known and all(periodic(v, known) for v in bound):
                        known.add(name)
                        found.add((scope, name))
                        changed = True
            for fn in functions:
                visit(fn.body, scope + (("d", fn.name),), known)

        visit(self.tree.body, (), set())
        return frozenset(found)

    # -- kinds of values: functions returning NumPy arrays (issue 29 class 4; F4, TL205) ---------
    def numpy_functions(self) -> FrozenSet[Tuple[Scope, str]]:
        """(function, dtype or "") for each function of the file whose every ``return`` gives a
        NumPy array (``np.load(...)``, ``a.astype(np.float32)``, a local every assignment of which
        is one; ``kinds.py``), the function named by its scope with its own name last:
        ``(("c", "Frames"), ("d", "load"))``. The dtype is NumPy's name, "" when not spelt."""
        return cast(FrozenSet[Tuple[Scope, str]], self._ask("numpy_functions", self._numpy_functions))

    def numpy_function_dtype(self, function: Scope) -> Optional[str]:
        """The dtype ("" when not known) of the NumPy array ``function`` always returns; None when
        it is not known to return one."""
        dtypes = {dtype for where, dtype in self.numpy_functions() if where == function}
        if not dtypes:
            return None
        return dtypes.pop() if len(dtypes) == 1 else ""

    def _numpy_functions(self) -> FrozenSet[Tuple[Scope, str]]:
        if "numpy" not in self.text or "return" not in self.text:
            return frozenset()
        from torchlint.kinds import Names, numpy_functions

        return numpy_functions(Names(self.text, self.index))

    def layer_iterating_classes(self) -> FrozenSet[str]:
        """Classes of the file that iterate a module given to their ``__init__`` (``for m in
        self.seq_module:``; ``kinds.py``): a container handed to one does not chain its layers
        straight (TL301)."""
        return cast(FrozenSet[str], self._ask("layer_iterating_classes", self._layer_iterating_classes))

    def _layer_iterating_classes(self) -> FrozenSet[str]:
        if "for" not in self.text or "__init__" not in self.text:
            return frozenset()
        from torchlint.kinds import layer_iterating_classes

        return layer_iterating_classes(self.index)

    def pinned_loaders(self) -> FrozenSet[Tuple[Scope, str, str]]:
        """(scope, loader name, setting) for every binding of a name the file assigns a
        ``DataLoader(...)``: ``"default"`` where the call pins (``pin_memory=True`` or
        ``=torch.cuda.is_available()``) with the default collate (or one like it,
        ``transformers.default_data_collator``), ``"elements"`` with another collate, ``""``
        where it does not pin or the binding is something else (``kinds.py``; TL203). Ask
        ``pinned_loader(scope, name)``."""
        from torchlint import chunkfacts

        self.loader_classes()  # a whole-file answer, asked before the chunks are read
        return cast(FrozenSet[Tuple[Scope, str, str]],
                    self._ask("pinned_loaders", self._pinned_loaders, chunked=lambda: chunkfacts.pinned_loaders(self)))

    def pinned_loader(self, scope: Scope, name: str) -> Optional[str]:
        """``"default"``/``"elements"`` when every binding of the loader ``name`` a read in
        ``scope`` may see pins; None otherwise."""
        from torchlint.kinds import pinned_setting

        return pinned_setting(self.pinned_loaders(), scope, name)

    def _pinned_loaders(self, words: Optional[FrozenSet[str]] = None) -> FrozenSet[Tuple[Scope, str, str]]:
        if "pin_memory" not in self.text:
            return frozenset()
        from torchlint.kinds import Names, pinned_loaders

        index, classes = self.index, self.loader_classes()
        aliases = sorted(local for local, qualified in index.bindings().items()
                         if local != "DataLoader" and any(canonical_name(q) == DATALOADER for q in qualified))
        return pinned_loaders(Names(self.text, index),
                              lambda node: index.resolves(node, lambda q: canonical_name(q) == DATALOADER),
                              classes, aliases, words)

    def layer_list_functions(self) -> FrozenSet[str]:
        """Names of the functions whose result the file uses as layers (``*f(...)`` in
        ``nn.Sequential``, ``layers.extend(f(...))``, ``layers += f(...)``; ``kinds.py``; TL301)."""
        return cast(FrozenSet[str], self._ask("layer_list_functions", self._layer_list_functions))

    def _layer_list_functions(self) -> FrozenSet[str]:
        if "Sequential" not in self.text and "extend" not in self.text and "+=" not in self.text:
            return frozenset()
        from torchlint.kinds import Names, layer_list_functions

        return layer_list_functions(Names(self.text, self.index))

    def literal_flags(self) -> FrozenSet[Tuple[str, str, bool]]:
        """(callee name, keyword, value) for every ``f(..., keyword=True/False)`` of the file
        (``kinds.py``): whether a flag is true in some call (TL301's ``if batch_norm:``)."""
        return cast(FrozenSet[Tuple[str, str, bool]], self._ask("literal_flags", self._literal_flags))

    def _literal_flags(self) -> FrozenSet[Tuple[str, str, bool]]:
        if "True" not in self.text and "False" not in self.text:
            return frozenset()
        from torchlint.kinds import literal_flags

        return literal_flags(self.text)

    def pinned_parameters(self) -> FrozenSet[Tuple[str, str]]:
        """(function name, parameter name) for the parameters every call of the file hands a
        pinned loader with the default collate (``kinds.py``; TL203: ``train(model,
        train_loader)``, a loop over ``train_loader`` in ``train``). Built from two recorded
        answers a file read in chunks merges: the functions handed a pinned loader somewhere, then
        their definitions and every call of them."""
        from torchlint.kinds import pinned_parameters

        pinned = self.pinned_loaders()  # the whole file's answers first
        if not any(setting == "default" for _, _, setting in pinned):
            return frozenset()
        callees = cast(FrozenSet[str], self._ask("pinned_callees", lambda: self._pinned_callees(pinned)))
        if not callees:
            return frozenset()
        records = self._ask("pinned_handoffs", lambda: self._handoffs(pinned, callees))
        return pinned_parameters(cast(FrozenSet[Tuple[str, str, str, str]], records))

    def _pinned_callees(self, pinned: FrozenSet[Tuple[Scope, str, str]]) -> FrozenSet[str]:
        from torchlint.kinds import pinned_callees

        return pinned_callees(self.index, pinned)

    def _handoffs(self, pinned: FrozenSet[Tuple[Scope, str, str]],
                  callees: FrozenSet[str]) -> FrozenSet[Tuple[str, str, str, str]]:
        from torchlint.kinds import handoffs

        return handoffs(self.index, pinned, callees)
    # -- end of kinds of values (F4)

    # -- helpers that move their argument, attributes that name a device (movers.py; TL202) ----
    def movers(self) -> FrozenSet[Tuple[Scope, str, int]]:
        """(class scope or ``()``, function, parameter position) for each method or module
        function of the file that returns its argument moved to the device (``movers.py``)."""
        from torchlint.movers import file_movers

        return cast(FrozenSet[Tuple[Scope, str, int]], self._ask("movers", lambda: file_movers(self)))

    def device_attributes(self) -> FrozenSet[Tuple[Scope, str, bool]]:
        """``self.<attr>`` only ever bound to a device index or string, per class (``movers.py``)."""
        from torchlint.movers import file_device_attributes

        return cast(FrozenSet[Tuple[Scope, str, bool]], self._ask("device_attributes", lambda: file_device_attributes(self)))

    def _is_version_test(self, test: ast.expr) -> bool:
        segment = self._segment(test)
        if segment is not None and _VERSION_TEST.search(segment):
            return True
        for node in ast.walk(test):
            if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in _FEATURE_TESTS and node.args:
                if self.index.resolves(node.args[0], lambda name: name.split(".", 1)[0] in _TORCH_PACKAGES):
                    return True
        return False


    # -- what a module returns: probability modules (issue 29, class 3; G1, TL407) --------------
    # ``probability_modules()``: scope -> the names a read there sees holding a model whose call
    # returns a softmax (``nn.Softmax``, a Sequential ending in one, an instance of a class of the
    # file whose ``forward`` returns a softmax, through ``.to(device)``/``.train()``..., in every
    # binding of the name's scope; ``self.x`` of the scope's class), computed in
    # torchlint/outputs.py. TL407 reads it; TL407 is walked at every lint (not statement-local,
    # not read by name), so the answer is recorded but need not be in ``digest()``'s questions.
    def probability_modules(self) -> Dict[Scope, FrozenSet[str]]:
        """scope -> the dotted names (``model``, ``self.net``) that hold a probability module
        where the scope reads them."""
        found = self.answers.get("probability_modules")
        if found is None:  # not through _ask: a class and its instance may be in different chunks
            found = self.answers["probability_modules"] = self._probability_modules()
        return cast(Dict[Scope, FrozenSet[str]], found)

    def holds_probability_module(self, scope: Scope, dotted: str) -> bool:
        """Does ``dotted``, read in ``scope``, hold a module whose call returns a softmax?"""
        return dotted in self.probability_modules().get(scope, ())

    def _probability_modules(self) -> Dict[Scope, FrozenSet[str]]:
        from torchlint.outputs import SOFTMAX_NAMES, Collected, may_hold, probability_modules

        text = self.text
        if "oftmax" not in text:  # every spelling of a softmax says it (outputs.may_hold)
            return {}

        def resolves(node: ast.AST, name: str) -> bool:  # through the whole file's imports
            return self.index.resolves(node, lambda q: canonical_name(q) == name)

        if self._chunked:  # each chunk's bindings in turn, the whole tree never (outputs.Collected)
            from torchlint.parsing import _Unsplittable

            try:
                for _ in self.chunks():
                    break  # the whole file's imports are read before the first chunk
                bindings = (self._bindings or ({}, []))[0]
                aliases = sorted(n for n, qs in bindings.items() if any(canonical_name(q) in SOFTMAX_NAMES for q in qs))
                if not may_hold(self.chunks(), text, resolves, aliases):
                    return {}
                collected = Collected(text, aliases)
                for tree in self.chunks():
                    collected.add(tree, resolves)
                return collected.answer()
            except _Unsplittable:
                self._chunked = False
                self.tree, self._index = _whole_tree(text), None
        aliases = sorted(n for n, qs in self.index.bindings().items()
                         if any(canonical_name(q) in SOFTMAX_NAMES for q in qs))
        return probability_modules(self.tree, resolves, text, aliases)
    # -- end of probability modules (G1)

    # -- does this program train? (issue 29; G1, TL701) -----------------------------------------
    # ``may_train()`` is False only when the program certainly never trains: this file's text
    # spells no gradient step, optimizer or training call (``training_evidence()``, from
    # training.py) and the project index proves the same of the program (``FileFacts.
    # inference_program``: a script whose imports in the project train nothing, and that no
    # training script imports). When in doubt it is True. A rule that asks it sets
    # ``uses_project = True``; the file's half is in ``digest()``.
    def training_evidence(self) -> FrozenSet[str]:
        """Why this file's own code may train (its first training word); empty when it certainly
        does not."""
        found = self.answers.get("training_evidence")
        if found is None:  # read from the whole text, never per chunk
            from torchlint.training import training_word

            word = training_word(self.text)
            found = self.answers["training_evidence"] = frozenset({word}) if word is not None else frozenset()
        return cast(FrozenSet[str], found)

    def may_train(self) -> bool:
        """Does this program (possibly) compute gradients? False only when neither this file nor,
        per the project index, the rest of its program trains."""
        if self.training_evidence():
            return True
        facts = self.project
        return facts is None or not facts.inference_program
    # -- end of training (G1)

    def _segment(self, node: ast.expr) -> Optional[str]:
        """``ast.get_source_segment(text, node)`` from the index's line table (the standard
        function splits the whole text at every call: 37 ms per call on a 3,800-line file)."""
        end_line, end_col = node.end_lineno, node.end_col_offset
        if end_line is None or end_col is None:
            return None
        starts = self.index._lines()
        first = self.text[starts[node.lineno - 1]:starts[node.lineno]]
        last = first if end_line == node.lineno else self.text[starts[end_line - 1]:starts[end_line]]
        begin = _char_offset(first, node.col_offset)
        stop = _char_offset(last, end_col)
        if end_line == node.lineno:
            return first[begin:stop]
        middle = self.text[starts[node.lineno]:starts[end_line - 1]]
        return first[begin:] + middle + last[:stop]

    # -- is this program on an accelerator at all? (issue 29, class 5; F1) ----------------------
    # ``uses_accelerator()`` is False only when the program certainly never touches an
    # accelerator: this file names none and sends values to no device that could be one
    # (``accelerator_evidence()``, from ``accelerator.py``), and the project index proves the
    # same of every program the file is part of (``FileFacts.cpu_program``: each script that
    # imports it, directly or not, and all they import; a notebook is its own program). When in
    # doubt it is True. Rules whose findings are about feeding or waiting for an accelerator
    # (host syncs, pinned memory, loader workers: TL101, TL102, TL201) return early when it is
    # False; a rule that asks it sets ``uses_project = True`` (the cross-file half is a project
    # fact, in the cache and editor keys through the facts' digest; the file's half is in
    # ``digest()``).
    def accelerator_evidence(self) -> FrozenSet[str]:
        """Why this file's own code may run on an accelerator: the first accelerator word of its
        text (``cuda``, ``Accelerator``...), or ``"device"`` for a device that could be one;
        empty when it certainly does not."""
        return cast(FrozenSet[str], self._ask("accelerator_evidence", self._accelerator_evidence))

    def _accelerator_evidence(self) -> FrozenSet[str]:
        from torchlint.accelerator import accelerator_word, sends_to_device

        word = accelerator_word(self.text)
        if word is not None:
            return frozenset({word})
        return frozenset({"device"}) if sends_to_device(self.text, self.tree) else frozenset()

    def uses_accelerator(self) -> bool:
        """Is this program (possibly) on an accelerator? False only when neither this file nor,
        per the project index, any file of a program it is part of touches one."""
        if self.accelerator_evidence():
            return True
        facts = self.project
        return facts is None or not facts.cpu_program

    # -- HB: functions a program runs only before it first touches an accelerator (issue 29 class 5)
    def host_phase_functions(self) -> FrozenSet[Tuple[str, int]]:
        """(name, n) of the module-level ``def``s (the n-th of that name, from 0) every call of
        which runs before the program's first statement that may touch an accelerator: on the
        host (``hostphase.py``: dlwpt-code's first ``training_loop``, called with a CPU model
        before the notebook picks a device). Only in a program; empty for a text read in chunks."""
        return cast(FrozenSet[Tuple[str, int]], self._ask(
            "host_phase_functions", self._host_phase_functions, chunked=frozenset))

    def _host_phase_functions(self) -> FrozenSet[Tuple[str, int]]:
        from torchlint.hostphase import host_phase_functions
        from torchlint.project import _is_program_root

        if not _is_program_root(self.tree):
            return frozenset()  # a module's function: another file may call it at any time
        return host_phase_functions(self.text, self.tree)

    # -- W1: a Lightning Trainer on the GPU spelt in this file (issue 29 class 2, TL102) ----------
    # Fact: ``gpu_trainer()``: ``{"gpu"}`` when the file's text spells a Lightning ``Trainer`` on
    # the GPU (``accelerator="gpu"|"cuda"|"auto"``, ``gpus=1``, ``devices=1``: the project index's
    # ``_GPU_TRAINER`` test, docstrings included) and no ``Trainer(accelerator="cpu")``; empty
    # otherwise. TL102 asks it for the loaders handed to ``trainer.fit``: Lightning moves their
    # batches to the device.
    def gpu_trainer(self) -> FrozenSet[str]:
        """``{"gpu"}`` when this file spells a Lightning Trainer on the GPU (see above)."""
        return cast(FrozenSet[str], self._ask("gpu_trainer", self._gpu_trainer))

    def _gpu_trainer(self) -> FrozenSet[str]:
        if "Trainer" not in self.text:
            return frozenset()
        from torchlint.project import _CPU_TRAINER, _GPU_TRAINER

        if _GPU_TRAINER.search(self.text) is None or _CPU_TRAINER.search(self.text) is not None:
            return frozenset()
        return frozenset({"gpu"})

    # -- helpers run only where gradients are off (issue 29, class 3; F1) ------------------------
    def grad_free_functions(self) -> FrozenSet[str]:
        """Names of the file's module-level functions called at least once, every call with
        gradients off: under ``with torch.no_grad()``/``inference_mode()``/
        ``set_grad_enabled(False)``, in a function decorated with one, or from another such
        function (rasbt's ``calc_loss_loader``, called only by ``evaluate_model`` under
        ``no_grad`` every N steps). A function also named without being called (a callback) is
        not one. Only in a program (a script, a notebook: module-level code that runs): a
        module's functions may be called from other files. TL201 reads the loops of these
        functions as evaluation. Not answered for a text read in chunks (a call in another chunk
        is unseen): empty."""
        return cast(FrozenSet[str], self._ask("grad_free_functions", self._grad_free_functions))

    def _grad_free_functions(self) -> FrozenSet[str]:
        if self._chunked or ("no_grad" not in self.text and "inference_mode" not in self.text
                             and "set_grad_enabled" not in self.text):
            return frozenset()
        from torchlint.project import _is_program_root

        if not _is_program_root(self.tree):
            return frozenset()  # a module's function: another file may call it with gradients on
        defs = {s.name for s in self.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        calls: Dict[str, List[Tuple[bool, Optional[str]]]] = {}
        named: Set[str] = set()  # read other than as a call's callee
        stack: List[Tuple[ast.AST, bool, Optional[str]]] = [(self.tree, False, None)]
        while stack:
            node, off, owner = stack.pop()
            kind = type(node)
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
                function = cast(ast.FunctionDef, node)
                inner_owner = function.name if owner is None and function.name in defs and node in self.tree.body else owner
                inner_off = off or any(_grad_off(d) for d in function.decorator_list)
                stack.extend((child, inner_off, inner_owner) for child in function.body)
                stack.extend((d, off, owner) for d in function.decorator_list)
                continue
            if kind in (ast.With, ast.AsyncWith):
                with_node = cast(ast.With, node)
                inner = off or any(_grad_off(item.context_expr) for item in with_node.items)
                stack.extend((item.context_expr, off, owner) for item in with_node.items)
                stack.extend((child, inner, owner) for child in with_node.body)
                continue
            if kind is ast.Call:
                func = cast(ast.Call, node).func
                if type(func) is ast.Name and func.id in defs:
                    calls.setdefault(func.id, []).append((off, owner))
                    stack.extend((child, off, owner) for child in ast.iter_child_nodes(node) if child is not func)
                    continue
            elif kind is ast.Name and cast(ast.Name, node).id in defs:
                named.add(cast(ast.Name, node).id)
            stack.extend((child, off, owner) for child in ast.iter_child_nodes(node))
        found: Set[str] = set()
        changed = True
        while changed:  # least fixpoint: a caller counts once it is known to be one
            changed = False
            for name, sites in calls.items():
                if name not in found and name not in named and all(off or owner in found for off, owner in sites):
                    found.add(name)
                    changed = True
        return frozenset(found)


def _returns(body: Sequence[ast.stmt]) -> List[ast.Return]:
    """The ``return`` statements of a function's body, not of the functions and classes in it."""
    found, stack = [], list(body)
    while stack:
        stmt = stack.pop()
        if type(stmt) is ast.Return:
            found.append(stmt)
        elif type(stmt) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(stmt, field, ()) or ())
    return found


def _grad_off(node: ast.AST) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (as a
    context manager or a decorator, under any spelling of the module)."""
    if isinstance(node, ast.Call):
        name = _dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last == "set_grad_enabled":
            first = node.args[0] if node.args else None
            return isinstance(first, ast.Constant) and first.value is False
        return last in ("no_grad", "inference_mode")
    name = _dotted(node) or ""
    return name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode")  # @torch.no_grad


def _char_offset(line: str, byte_offset: int) -> int:
    """The character offset of a UTF-8 ``byte_offset`` in ``line`` (CPython's col_offset)."""
    if line.isascii():
        return byte_offset
    return len(line.encode("utf-8", "surrogatepass")[:byte_offset].decode("utf-8", "replace"))


_EMPTY = ast.Module(body=[], type_ignores=[])


def _whole_tree(text: str) -> ast.Module:
    """CPython's tree of ``text`` (an empty module where CPython rejects what libcst read)."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _EMPTY


def _merged(answers: List[object]) -> object:
    """One answer from the answers of a file's chunks."""
    if not answers:
        return frozenset()
    if all(isinstance(a, bool) for a in answers):
        return any(answers)
    if all(isinstance(a, dict) for a in answers):
        joined: Dict[object, Set[object]] = {}
        for answer in answers:
            for key, value in cast(dict, answer).items():
                joined.setdefault(key, set()).update(value)
        return {key: frozenset(value) for key, value in joined.items()}
    return frozenset().union(*cast(List[FrozenSet[object]], answers))


def scope_of(ancestors: Sequence[object]) -> Scope:
    """The ``Scope`` of a libcst node from its ancestors (``ctx.ancestors``)."""
    from torchlint import _cst as cst

    scope = []
    for node in ancestors:
        if isinstance(node, cst.FunctionDef):
            scope.append(("d", node.name.value))
        elif isinstance(node, cst.ClassDef):
            scope.append(("c", node.name.value))
    return tuple(scope)


def _class_part(scope: Scope) -> Scope:
    """``scope`` up to its innermost class (``()`` outside classes)."""
    for i in range(len(scope) - 1, -1, -1):
        if scope[i][0] == "c":
            return scope[:i + 1]
    return ()


def _is_grad_attribute(node: ast.AST) -> bool:
    """``<x>.grad`` or ``<x>.grad.data``."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "grad"


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _assignment_of(call: ast.Call, index: "AstIndex"):
    """The ``Assign``/``AnnAssign`` whose value is ``call``, or None."""
    for node, _ in index.nodes_on(call.lineno):
        kind = type(node)
        if (kind is ast.Assign or kind is ast.AnnAssign) and cast(ast.Assign, node).value is call:
            return node
    return None


def _catches_compat_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return False
    types = handler.type.elts if type(handler.type) is ast.Tuple else [handler.type]
    for node in types:
        name = _dotted(node)
        if name is not None and name.rsplit(".", 1)[-1] in _COMPAT_ERRORS:
            return True
    return False


def _imports_in(blocks: Sequence[Sequence[ast.stmt]]) -> List[ast.stmt]:
    """The imports under the statements of ``blocks``, nested blocks included (``try: if x:
    import y``), not those of a function or class defined there (they bind in its scope)."""
    found: List[ast.stmt] = []
    stack: List[ast.AST] = [s for block in blocks for s in block]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Import or kind is ast.ImportFrom:
            found.append(node)  # type: ignore[arg-type]
        elif kind not in _SCOPES and isinstance(node, (ast.stmt, ast.excepthandler)):
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, (ast.stmt, ast.excepthandler)))
    return found


def _bound_targets(stmt: ast.stmt) -> Set[Tuple[str, str]]:
    """(local name, the qualified name it is bound to) for each name an import binds."""
    bound = set()
    if type(stmt) is ast.Import:
        for alias in stmt.names:
            if alias.asname:
                bound.add((alias.asname, alias.name))
            else:
                top = alias.name.split(".", 1)[0]
                bound.add((top, top))
    elif type(stmt) is ast.ImportFrom and stmt.level == 0 and stmt.module:
        for alias in stmt.names:
            if alias.name != "*":
                bound.add((alias.asname or alias.name, f"{stmt.module}.{alias.name}"))
    return bound
