"""Loaders and batches, read from CPython's tree of the whole file: the facts behind the whole-file
model's ``loader_classes()`` and ``batch_sources(scope)`` (``model.py`` asks these functions once
per file and records the answers; rules ask the model, never this module).

- **Loader classes**: the names a file calls to build a ``torch.utils.data.DataLoader``
  besides torch's own: a library's subclass that takes DataLoader's keywords
  (``from monai.data import DataLoader``) and the file's own subclasses
  (``class AudioDataLoader(DataLoader)``, through other subclasses of the file).
- **Batches**: in each function (and at module level: scripts, notebooks), the names bound to a
  batch as a loader yielded it, or to a part of one. A batch is drawn by ``for b in loader``
  (through ``enumerate``/``tqdm``/``zip``), ``next(iter(loader))``, ``next(it)`` where
  ``it = iter(loader)`` (``self.it`` too, bound in any method of the class), a generator of the
  file that yields what a ``for`` over its parameter gives (``def cycle(dl): while True: for b in
  dl: yield b``; ``for b in cycle(loader)``, ``next(self.dl)`` with ``self.dl = cycle(dl)``). A
  part: ``x, y = batch``, ``batch[0]``, ``batch["ids"]``, ``batch.x``, and the variable of a
  comprehension over the batch (``[t.to(dev) for t in batch]``, ``{k: v.to(dev) for k, v in
  batch.items()}``, ``tuple(t.to(dev) for t in batch)``). A name counts only when *every*
  binding of it in that scope is such a batch: ``batch = tuple(t.to(dev) for t in batch)`` makes
  ``batch`` a moved copy (not a batch as the loader yielded it) while ``t`` stays one.
  Comprehensions read a name as the statements before them left it (source order).
- **Loaders**: a name bound to a loader call of the file (``model.loader_names``), a name whose
  last part says loader (``train_loader``, ``self.val_dataloader``; not ``loaders``), a call of a
  loader class, or a call whose callee says loader (``self.train_dataloader()``,
  ``get_loader(ds)``).
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

# DataLoader subclasses of libraries that take torch DataLoader's keywords (by keyword: their
# positional order differs). monai's ThreadDataLoader is not here: its workers are threads too.
LIBRARY_LOADERS = frozenset({
    "monai.data.DataLoader", "monai.data.dataloader.DataLoader",
    "torch_geometric.loader.DataLoader", "torch_geometric.loader.dataloader.DataLoader",
    "torch_geometric.data.DataLoader",
})
_TORCH_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Calls that hand a loader's items through: `for i, b in enumerate(tqdm(loader))`.
_WRAPPERS = frozenset({"enumerate", "tqdm", "track", "iter", "zip"})
# Methods of a batch container whose results hand its values through.
_VIEWS = frozenset({"items", "values"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

Scope = Tuple[Tuple[str, str], ...]
#: kinds of a scope's name in ``batch_sources``: a batch as drawn (or a part), a loader
BATCH, LOADER = "batch", "loader"


def dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


_DEVICE_NAMES = frozenset({"dev", "rank", "local_rank", "gpu", "gpu_id"})


def moves_to_device(call: ast.Call) -> bool:
    """``x.cuda()``, ``x.to(device)``, ``x.to(..., non_blocking=True)`` (``heuristics.moves_to_accelerator``
    on the ``ast`` tree, coarser: it only decides which factories to look at again)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "cuda":
        return True
    if func.attr != "to":
        return False
    if any(k.arg == "non_blocking" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords):
        return True
    target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device"), None)
    if isinstance(target, ast.Constant):
        return isinstance(target.value, str) and target.value.split(":")[0] in ("cuda", "xpu", "mps", "npu", "hpu")
    name = dotted(target) if target is not None else None
    if not name:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return "cpu" not in last and (last.endswith("device") or last in _DEVICE_NAMES)



# -- loader classes ------------------------------------------------------------------------------
def loader_classes(nodes: Iterable[ast.AST], torch_loader) -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """(classes, choices). Classes: local names (``DataLoader``, ``MonaiLoader``,
    ``AudioDataLoader``) that build a DataLoader other than through torch's own name. Choices:
    names bound to ``A if x else B`` where ``A`` or ``B`` is one (``cls = DataLoader if plain
    else IterableDataLoader``: a rule decides with what it knows of the other). ``nodes``: the
    imports, classes and assignments that may spell one (those on lines that say "DataLoader");
    ``torch_loader(node)``: does a Name/Attribute resolve to torch's DataLoader."""
    found: Set[str] = set()
    classes: List[ast.ClassDef] = []
    choices: List[ast.Assign] = []
    imported: Dict[str, str] = {}
    for node in nodes:
        kind = type(node)
        if kind is ast.Assign and type(node.value) is ast.IfExp:  # type: ignore[attr-defined]
            choices.append(node)  # type: ignore[arg-type]
        if kind is ast.ImportFrom and node.module and node.level == 0:  # type: ignore[attr-defined]
            for alias in node.names:  # type: ignore[attr-defined]
                if f"{node.module}.{alias.name}" in LIBRARY_LOADERS:  # type: ignore[attr-defined]
                    found.add(alias.asname or alias.name)
        elif kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name.split(".", 1)[0] in ("monai", "torch_geometric"):
                    top = alias.name.split(".", 1)[0]
                    imported[alias.asname or top] = alias.name if alias.asname else top
        elif kind is ast.ClassDef and node.bases:  # type: ignore[attr-defined]
            classes.append(node)  # type: ignore[arg-type]

    def is_loader(base: ast.expr) -> bool:
        name = dotted(base)
        if name is None:
            return False
        if name in found:
            return True
        head, _, rest = name.partition(".")
        if head in imported and f"{imported[head]}.{rest}" in LIBRARY_LOADERS:
            return True
        return torch_loader(base)

    changed = True
    while changed:  # subclasses of subclasses
        changed = False
        for cls in classes:
            if cls.name not in found and any(is_loader(b) for b in cls.bases):
                found.add(cls.name)
                changed = True
    chosen: Set[str] = set()
    for assign in choices:
        value: ast.IfExp = assign.value  # type: ignore[assignment]
        if any(type(b) in (ast.Name, ast.Attribute) and is_loader(b) for b in (value.body, value.orelse)):
            chosen.update(t.id for t in assign.targets if type(t) is ast.Name)
    return frozenset(found), frozenset(chosen)


def library_loader_call(func: ast.expr, tree_imports: Dict[str, str]) -> bool:
    """``monai.data.DataLoader(...)`` spelt through ``import monai`` (``tree_imports``: local
    name -> module)."""
    name = dotted(func)
    if name is None or "." not in name:
        return False
    head, _, rest = name.partition(".")
    return f"{tree_imports.get(head, head)}.{rest}" in LIBRARY_LOADERS


# -- batches -------------------------------------------------------------------------------------
class _Scan:
    """One scope's statements in source order: which names hold a batch (and from which loader)."""

    def __init__(self, facts: "_BatchFacts", scope: Scope, node: ast.AST, cls: Optional[str],
                 child_cls: Optional[str] = None) -> None:
        self.facts, self.scope, self.node, self.cls = facts, scope, node, cls
        #: the class a nested definition's ``self`` is (the class whose body this scan reads)
        self.child_cls = child_cls
        #: name -> loaders for names a statement last bound to a batch (None: bound to anything else)
        self.state: Dict[str, Optional[FrozenSet[str]]] = {}
        #: name -> loaders for names bound to an iterator of a loader (``it = iter(loader)``)
        self.iterators: Dict[str, Optional[FrozenSet[str]]] = {}
        #: name -> loaders of its batch bindings; ``other``: names with some other binding
        self.batch: Dict[str, Set[str]] = {}
        self.other: Set[str] = set()
        #: name -> loader for names bound to a loader or a pass-through wrapper of one
        #: (``pbar = tqdm(loader)``, ``dl = accelerator.prepare(dl)``, a parameter every caller
        #: of the file gives a loader); ``not_loader``: names with some other binding
        self.aliases: Dict[str, str] = {}
        self.not_loader: Set[str] = set()

    # what an expression is -------------------------------------------------------------------
    def loader(self, node: ast.expr) -> Optional[str]:
        """The loader ``node`` is (a dotted name or the callee's text), or None."""
        facts = self.facts
        if type(node) is ast.Call:
            callee = dotted(node.func)
            if callee is None:
                return None
            last = callee.rsplit(".", 1)[-1]
            if callee in facts.classes or facts.is_torch_loader(node.func) or last in facts.classes:
                return f"{callee}()"
            low = last.lower()
            if "loader" in low and not low.endswith("loaders") and not low.startswith("load"):
                return f"{callee}()"
            return None
        name = dotted(node)
        if name is None:
            return None
        if name in facts.loader_names:
            return name
        if type(node) is ast.Name and self.aliases.get(name) and self.state.get(name, None) is None:
            return self.aliases[name]
        return name if _says_loader(name) else None

    def alias_of(self, value: ast.expr) -> Optional[str]:
        """The loader a name bound to ``value`` stands for: a loader, ``tqdm(loader)``,
        ``iter(loader)``, a generator of the file over one, ``accelerator.prepare(loader)``."""
        direct = self.loader(value)
        if direct:
            return direct
        if type(value) is not ast.Call:
            return None
        call: ast.Call = value
        func = call.func
        if (type(func) is ast.Attribute and func.attr == "prepare" and len(call.args) == 1 and not call.keywords
                and "accelerator" in (dotted(func.value) or "").lower()):
            return self.loader(call.args[0])
        drawn = self.iterated(value)
        if len(drawn) == 1 and drawn[0][0] == () and len(drawn[0][1]) == 1:
            return next(iter(drawn[0][1]))
        return None

    def iterator(self, node: ast.expr) -> Optional[FrozenSet[str]]:
        """Loaders whose batches ``next(node)`` draws: ``iter(loader)``, a name or ``self``
        attribute bound to one, a generator of the file called on a loader."""
        if type(node) is ast.Call:
            call: ast.Call = node
            callee = dotted(call.func)
            if callee == "iter" and len(call.args) == 1:
                loader = self.loader(call.args[0])
                return frozenset({loader}) if loader else None
            return self.generated(call)
        if type(node) is ast.Name:
            return self.iterators.get(node.id)
        name = dotted(node)
        if name is not None and name.startswith("self.") and name.count(".") == 1 and self.cls is not None:
            return self.facts.attribute_iterators.get((self.cls, name[5:]))
        return None

    def generated(self, call: ast.Call) -> Optional[FrozenSet[str]]:
        """A generator function of the file yielding its parameter's items, called on a loader."""
        callee = dotted(call.func)
        source = self.facts.generators.get(callee or "")
        if isinstance(source, str):
            return frozenset({source})
        if not isinstance(source, int) or source >= len(call.args) or any(
                type(a) is ast.Starred for a in call.args[:source + 1]):
            return None
        loader = self.loader(call.args[source])
        return frozenset({loader}) if loader else None

    def iterated(self, node: ast.expr) -> List[Tuple[Tuple[int, ...], FrozenSet[str]]]:
        """(path into the ``for`` target, loaders) for what a ``for`` over ``node`` draws batches
        from: ``enumerate(loader)`` -> ((1,), ...), ``zip(a, b)`` -> ((0,), a), ((1,), b)."""
        if type(node) is ast.Call:
            call: ast.Call = node
            callee = dotted(call.func) or ""
            last = callee.rsplit(".", 1)[-1]
            args = [a for a in call.args if type(a) is not ast.Starred]
            if last in _WRAPPERS and args and len(args) == len(call.args):
                if last == "enumerate":
                    return [((1,) + path, loaders) for path, loaders in self.iterated(args[0])]
                if last == "zip":
                    return [((i,) + path, loaders) for i, a in enumerate(args) for path, loaders in self.iterated(a)]
                return self.iterated(args[0])
            generated = self.generated(call)
            if generated:
                return [((), generated)]
        loader = self.loader(node)
        if loader:
            return [((), frozenset({loader}))]
        return []

    def batch_of(self, node: ast.expr) -> Optional[FrozenSet[str]]:
        """Loaders whose batch ``node`` is as the loader yielded it (or a part of it), or None."""
        while type(node) in (ast.Subscript, ast.Attribute):
            node = node.value  # type: ignore[attr-defined]
        if type(node) is ast.Name:
            return self.state.get(node.id)
        if type(node) is ast.Call:
            call: ast.Call = node
            if dotted(call.func) == "next" and call.args:
                return self.iterator(call.args[0])
        return None

    # bindings ---------------------------------------------------------------------------------
    def bind(self, target: ast.AST, loaders: Optional[FrozenSet[str]]) -> None:
        kind = type(target)
        if kind is ast.Name:
            name = target.id  # type: ignore[attr-defined]
            self.state[name] = loaders
            self.iterators.pop(name, None)
            self.aliases.pop(name, None)
            self.not_loader.add(name)
            if loaders:
                self.batch.setdefault(name, set()).update(loaders)
            else:
                self.other.add(name)
        elif kind in (ast.Tuple, ast.List):
            for element in target.elts:  # type: ignore[attr-defined]
                self.bind(element.value if type(element) is ast.Starred else element, loaders)
        elif kind is ast.Starred:
            self.bind(target.value, loaders)  # type: ignore[attr-defined]
        # attributes and subscripts bind no name of the scope

    def bind_path(self, target: ast.AST, path: Tuple[int, ...], loaders: FrozenSet[str]) -> None:
        """Bind the part of ``target`` at ``path`` to a batch, every other name to non-batches."""
        if not path:
            self.bind(target, loaders)
            return
        if type(target) in (ast.Tuple, ast.List) and path[0] < len(target.elts) and not any(  # type: ignore[attr-defined]
                type(e) is ast.Starred for e in target.elts):  # type: ignore[attr-defined]
            for i, element in enumerate(target.elts):  # type: ignore[attr-defined]
                if i == path[0]:
                    self.bind_path(element, path[1:], loaders)
                else:
                    self.bind(element, None)
            return
        self.bind(target, None)

    def bind_iterator(self, target: ast.AST, loaders: Optional[FrozenSet[str]]) -> None:
        self.bind(target, None)
        if type(target) is ast.Name:
            self.iterators[target.id] = loaders

    # statements -------------------------------------------------------------------------------
    def run(self, statements: Iterable[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        kind = type(node)
        if kind in _SCOPES:
            self.other.add(node.name)  # type: ignore[attr-defined]
            self.state[node.name] = None  # type: ignore[attr-defined]
            self.facts.pending.append((node, self.scope, self.child_cls))
            for decorator in node.decorator_list:  # type: ignore[attr-defined]
                self.expressions(decorator)
            return
        if kind is ast.Assign:
            value = node.value  # type: ignore[attr-defined]
            self.expressions(value)
            loaders = self.batch_of(value)
            iterator = self.iterator(value) if loaders is None else None
            targets: List[ast.expr] = node.targets  # type: ignore[attr-defined]
            alias = self.alias_of(value) if loaders is None and len(targets) == 1 and type(targets[0]) is ast.Name else None
            for target in targets:
                if alias:
                    name = target.id  # type: ignore[attr-defined]
                    self.state[name] = None
                    self.other.add(name)
                    self.aliases[name] = alias
                    if iterator:
                        self.iterators[name] = iterator
                elif iterator:
                    self.bind_iterator(target, iterator)
                else:
                    self.bind(target, loaders)
            return
        if kind is ast.AnnAssign or kind is ast.AugAssign:
            if node.value is not None:  # type: ignore[attr-defined]
                self.expressions(node.value)  # type: ignore[attr-defined]
            loaders = self.batch_of(node.value) if kind is ast.AnnAssign and node.value is not None else None  # type: ignore[attr-defined]
            self.bind(node.target, loaders)  # type: ignore[attr-defined]
            return
        if kind is ast.For or kind is ast.AsyncFor:
            self.expressions(node.iter)  # type: ignore[attr-defined]
            drawn = self.iterated(node.iter)  # type: ignore[attr-defined]
            if len(drawn) == 1:
                self.bind_path(node.target, *drawn[0])  # type: ignore[attr-defined]
            elif drawn:  # zip(a, b): each element its own loader's
                paths = {path: loaders for path, loaders in drawn}
                target = node.target  # type: ignore[attr-defined]
                if type(target) is ast.Tuple and all(len(p) >= 1 for p in paths):
                    for i, element in enumerate(target.elts):
                        found = [(p[1:], l) for p, l in drawn if p[0] == i]
                        if len(found) == 1:
                            self.bind_path(element, *found[0])
                        else:
                            self.bind(element, None)
                else:
                    self.bind(target, None)
            else:
                self.bind(node.target, self.comprehended(node.iter))  # type: ignore[attr-defined]
            self.run(node.body)  # type: ignore[attr-defined]
            self.run(node.orelse)  # type: ignore[attr-defined]
            return
        if kind is ast.With or kind is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]
                self.expressions(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None)
            self.run(node.body)  # type: ignore[attr-defined]
            return
        if kind in (ast.Import, ast.ImportFrom):
            for alias in node.names:  # type: ignore[attr-defined]
                name = alias.asname or alias.name.split(".", 1)[0]
                self.other.add(name)
                self.state[name] = None
            return
        if kind in (ast.Global, ast.Nonlocal):
            self.other.update(node.names)  # type: ignore[attr-defined]
            return
        if kind is ast.Delete:
            return
        for field in ("test", "value", "exc", "cause", "msg", "subject"):
            child = getattr(node, field, None)
            if isinstance(child, ast.expr):
                self.expressions(child)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                self.run(block)
        for handler in getattr(node, "handlers", ()):
            if handler.name:
                self.other.add(handler.name)
                self.state[handler.name] = None
            self.run(handler.body)
        for case in getattr(node, "cases", ()):
            self.run(case.body)

    def comprehended(self, iterable: ast.expr) -> Optional[FrozenSet[str]]:
        """Loaders whose batch a comprehension (or ``for``) over ``iterable`` takes elements of:
        ``batch``, ``batch.items()``/``batch.values()``, ``batch[0]``."""
        if type(iterable) is ast.Call:
            call: ast.Call = iterable
            func = call.func
            if type(func) is ast.Attribute and func.attr in _VIEWS and not call.args and not call.keywords:
                return self.batch_of(func.value)
            return None
        return self.batch_of(iterable)

    def expressions(self, node: ast.expr) -> None:
        """Comprehensions and walrus targets in ``node`` bind names too."""
        for inner in ast.walk(node):
            kind = type(inner)
            if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
                for generator in inner.generators:  # type: ignore[attr-defined]
                    loaders = self.comprehended(generator.iter)
                    target = generator.target
                    if loaders and _is_items(generator.iter):
                        # (key, value) pairs: the value is the batch's
                        if type(target) is ast.Tuple and len(target.elts) == 2:
                            self.bind(target.elts[0], None)
                            self.bind(target.elts[1], loaders)
                        else:
                            self.bind(target, None)
                        continue
                    self.bind(target, loaders)
            elif kind is ast.NamedExpr:
                self.bind(inner.target, None)  # type: ignore[attr-defined]
            elif kind is ast.Lambda:
                for arg in inner.args.args:  # type: ignore[attr-defined]
                    self.other.add(arg.arg)


class _BatchFacts:
    """The file-wide facts a scope's scan reads, and the scans' results."""

    def __init__(self, tree: ast.Module, text: str, starts: List[int], loader_names: FrozenSet[str],
                 classes: FrozenSet[str], is_torch_loader, calls_named=None) -> None:
        self.tree, self.text, self.starts = tree, text, starts
        self.loader_names, self.classes, self.is_torch_loader = loader_names, classes, is_torch_loader
        # a definition whose text spells no loader reads none: its statements are not scanned
        words = {n.rsplit(".", 1)[-1] for n in loader_names} | set(classes)
        self.spells_loader = re.compile("(?i:loader)" + "".join(f"|\\b{re.escape(w)}\\b" for w in sorted(words)))
        self.generators: Dict[str, object] = (_loader_generators(self.definitions(), loader_names, _yield_lines(text, starts))
                                              if "yield" in text else {})
        words |= {"next", "iter", "prepare"} | {g.rsplit(".", 1)[-1] for g in self.generators}
        self.draws = re.compile("(?i:loader)" + "".join(f"|\\b{re.escape(w)}\\b" for w in sorted(words)))
        #: function scope -> {parameter: loader} for parameters every call of the file gives a
        #: loader, asked per function (``calls_named(name)``: the file's calls of ``name`` and
        #: whether every use of the name is one of them; None: read them from the tree)
        self.calls_named = calls_named
        self.parameters: Dict[Scope, Dict[str, str]] = {}
        #: (class, attribute) -> loaders for ``self.<attribute> = iter(loader)`` / ``cycle(loader)``
        self.attribute_iterators: Dict[Tuple[str, str], Optional[FrozenSet[str]]] = {}
        self._attributes_read = False
        self.pending: List[Tuple[ast.AST, Scope, Optional[str]]] = []

    def spells(self, node: ast.AST, pattern: "re.Pattern[str]") -> bool:
        """Does the text of the statement ``node`` (its lines) match ``pattern``?"""
        starts = self.starts
        first = node.lineno - 1  # type: ignore[attr-defined]
        last = node.end_lineno  # type: ignore[attr-defined]
        end = starts[last] if last is not None and last < len(starts) else len(self.text)
        return pattern.search(self.text, starts[first], end) is not None

    def definitions(self, pattern: "Optional[re.Pattern[str]]" = None) -> List[ast.AST]:
        """The module's top-level statements and its classes' statements (those whose text
        matches ``pattern``, when given)."""
        found: List[ast.AST] = []
        for node in self.tree.body:
            if pattern is not None and not self.spells(node, pattern):
                continue
            found.append(node)
            if type(node) is ast.ClassDef:
                found.extend(node.body)
        return found

    def static_loader(self, node: ast.expr) -> Optional[str]:
        """A loader expression as any scope sees it (no local aliases): what a call passes."""
        return _Scan(self, (), self.tree, None).loader(node)

    def parameters_of(self, scope: Scope, function: ast.AST) -> Dict[str, str]:
        if scope not in self.parameters:
            self.parameters[scope] = _loader_parameters(self, scope, function)
        return self.parameters[scope]

    def attribute_iterator_bindings(self) -> None:
        """``self.it = iter(loader)`` in any method of a class: ``next(self.it)`` in another draws."""
        if self._attributes_read:
            return
        self._attributes_read = True
        # Only a method whose lines assign `iter(...)` or a call of a generator of the file can bind
        # an attribute to an iterator; the other methods are walked only when they spell such an
        # attribute (`self.it = None` elsewhere makes it unknown). transformers' Trainer (`epoch_iterator
        # = iter(epoch_dataloader)`, a local): 4.8 s under the profiler for walking its every method.
        called = "|".join(["iter"] + [re.escape(g.rsplit(".", 1)[-1]) for g in sorted(self.generators)])
        binds = re.compile(r"=\s*\(?\s*(?:[\w.]+\.)?(?:%s)\s*\(" % called)
        for cls in self.tree.body:
            if type(cls) is not ast.ClassDef or not self.spells(cls, self.draws) or not self.spells(cls, binds):
                continue
            methods = [m for m in cls.body if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef)]
            first = [m for m in methods if self.spells(m, binds)]
            for method in first:
                self._attribute_bindings(cls.name, method)
            bound = sorted(attr for (owner, attr), loaders in self.attribute_iterators.items()
                           if owner == cls.name and loaders)
            if not bound:
                continue
            spelled = re.compile(r"\bself\s*\.\s*(?:%s)\b" % "|".join(map(re.escape, bound)))
            for method in methods:
                if not any(method is m for m in first) and self.spells(method, spelled):
                    self._attribute_bindings(cls.name, method)

    def _attribute_bindings(self, cls: str, method: ast.AST) -> None:
        """``self.<attribute> = <value>`` in ``method``: an iterator of loaders when every such
        binding in the class is the same one (``attribute_iterators``)."""
        scan = _Scan(self, (), method, None)
        for node in ast.walk(method):
            if type(node) is ast.Assign:
                for target in node.targets:
                    name = dotted(target)
                    if name is None or not name.startswith("self.") or name.count(".") != 1:
                        continue
                    key = (cls, name[5:])
                    loaders = scan.iterator(node.value)
                    previous = self.attribute_iterators.get(key, loaders)
                    self.attribute_iterators[key] = loaders if loaders and previous == loaders else None

    def scopes(self, wanted: Optional[Scope] = None,
               module_scan: Optional["_Scan"] = None) -> Dict[Scope, FrozenSet[Tuple[str, str, str]]]:
        """Every scope's names, or only ``wanted``'s (definitions on the way to it are not read).
        ``module_scan``: a file read in chunks of top-level statements (``chunkfacts.py``): this
        chunk's module-level statements run on that scan, one for the whole file, whose names
        the caller reads after the last chunk (``scope_names``)."""
        found: Dict[Scope, FrozenSet[Tuple[str, str, str]]] = {}
        self.pending = [(self.tree, (), None)]
        while self.pending:
            node, outer, cls = self.pending.pop()
            kind = type(node)
            if node is self.tree:
                scope: Scope = ()
            else:
                scope = outer + (("c" if kind is ast.ClassDef else "d", node.name),)  # type: ignore[attr-defined]
            if wanted is not None and scope != wanted:
                if wanted[:len(scope)] == scope:  # on the way: only its definitions
                    self.pending.extend((d, scope, node.name if kind is ast.ClassDef else cls)  # type: ignore[attr-defined]
                                        for d in _definitions_in(node.body))  # type: ignore[attr-defined]
                continue
            given = self.parameters_of(scope, node) if kind is ast.FunctionDef and len(scope) <= 2 else {}
            if scope and not given and not self.spells(node, self.draws):
                continue  # spells no loader, iterator or generator of one: nothing drawn here
            if cls is not None:
                self.attribute_iterator_bindings()
            if module_scan is not None and node is self.tree:
                module_scan.facts, module_scan.node = self, node
                module_scan.run(node.body)
                continue
            # a method reads `self.x` of its class; a class body passes its name to its methods
            scan = _Scan(self, scope, node, cls, node.name if kind is ast.ClassDef else None)  # type: ignore[attr-defined]
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef):
                args = node.args  # type: ignore[attr-defined]
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    if arg is not None:
                        scan.other.add(arg.arg)
                        scan.state[arg.arg] = None
                        if arg.arg in given:
                            scan.aliases[arg.arg] = given[arg.arg]
                        else:
                            scan.not_loader.add(arg.arg)
            scan.run(node.body)  # type: ignore[attr-defined]
            names = scope_names(scan)
            if names:
                found[scope] = names
        return found


def scope_names(scan: _Scan) -> FrozenSet[Tuple[str, str, str]]:
    """A scanned scope's (kind, name, loader) entries (see ``batch_sources``)."""
    names = {(BATCH, name, loader) for name, loaders in scan.batch.items() if name not in scan.other
             for loader in loaders}
    names.update((LOADER, name, loader) for name, loader in scan.aliases.items()
                 if name not in scan.not_loader and not _says_loader(name))
    return frozenset(names)


def _definitions_in(statements: List[ast.stmt]) -> List[ast.AST]:
    """The functions and classes defined by ``statements`` (in their blocks too), not deeper."""
    found: List[ast.AST] = []
    stack: List[ast.AST] = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            found.append(node)
        elif isinstance(node, ast.stmt):
            stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.stmt, ast.excepthandler)))
        elif isinstance(node, ast.excepthandler):
            stack.extend(node.body)  # type: ignore[attr-defined]
    return found


def _loader_parameters(facts: "_BatchFacts", scope: Scope, function: ast.AST) -> Dict[str, str]:
    """Parameters of a function of the file (module level, called by name; a method, called as
    ``self.<name>`` in its class) that every call of the file gives a loader, with at least one
    call: ``def evaluate(model, data)`` called only as ``evaluate(model, val_loader)``."""
    if not isinstance(function, ast.FunctionDef) or not (len(scope) == 1 or scope[0][0] == "c"):
        return {}
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    callee = function.name
    if len(scope) == 2:
        if not params or params[0] not in ("self", "cls"):
            return {}
        params, callee = params[1:], f"self.{function.name}"
    if not params:
        return {}
    if facts.calls_named is not None:
        calls, complete = facts.calls_named(function.name)
        if not complete:
            return {}  # the name is used otherwise too (handed on as a value): callers unknown
    else:
        calls = [n for n in ast.walk(facts.tree) if isinstance(n, ast.Call)]
    seen: Dict[str, Optional[str]] = {}
    for call in calls:
        if dotted(call.func) != callee:
            continue
        bound: Dict[str, ast.expr] = {}
        for i, arg in enumerate(call.args):
            if type(arg) is ast.Starred:
                break
            if i < len(params):
                bound[params[i]] = arg
        for keyword in call.keywords:
            if keyword.arg is not None:
                bound[keyword.arg] = keyword.value
        for param in params:
            value = bound.get(param)
            loader = facts.static_loader(value) if value is not None else None
            if loader is None or seen.get(param, loader) != loader:
                seen[param] = None  # this call gives something else, the default, or another loader
            else:
                seen[param] = loader
    return {p: l for p, l in seen.items() if l}


def _is_items(node: ast.expr) -> bool:
    return type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "items"


def _yield_lines(text: str, starts: List[int]) -> List[int]:
    """The (1-based) lines of ``text`` that spell ``yield``, in order (``starts``: where each
    line starts, as CPython counts lines)."""
    found: List[int] = []
    for match in re.finditer("yield", text):
        line = bisect.bisect_right(starts, match.start())
        if not found or found[-1] != line:
            found.append(line)
    return found


def _loader_generators(definitions: List[ast.AST], loader_names: FrozenSet[str],
                       yield_lines: Optional[List[int]] = None) -> Dict[str, object]:
    """Generator functions of the file (module level, or methods as ``self.<name>``) that yield
    what a ``for`` over a loader gives (``for b in dl: yield b``, ``yield from dl``): name -> the
    position of the parameter holding the loader (``self`` not counted), or the loader's name
    when the function iterates a loader of its own (``loader = DataLoader(...); while True:
    yield from loader``)."""
    found: Dict[str, object] = {}
    classes = {id(m) for d in definitions if type(d) is ast.ClassDef for m in d.body}
    for function in definitions:
        if type(function) is ast.FunctionDef:
            params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            method = id(function) in classes and bool(params) and params[0] in ("self", "cls")
            if method:
                params = params[1:]
            if yield_lines is not None:  # a function whose lines spell no `yield` yields nothing:
                at = bisect.bisect_left(yield_lines, function.lineno)  # no walk of its tree (transformers: 5 s)
                if at == len(yield_lines) or yield_lines[at] > (function.end_lineno or function.lineno):
                    continue
            source = _yielded_source(function)
            if source is None:
                continue
            key = ("self." if method else "") + function.name
            if source in params:
                found[key] = params.index(source)
            elif source in loader_names or _says_loader(source):
                found[key] = source
    return found


def _yielded_source(function: ast.FunctionDef) -> Optional[str]:
    """The name whose items ``function`` yields unchanged: ``for b in <name>: yield b`` or
    ``yield from <name>``, or None."""
    for inner in ast.walk(function):
        kind = type(inner)
        if kind is ast.YieldFrom and type(inner.value) is ast.Name:  # type: ignore[attr-defined]
            return inner.value.id  # type: ignore[attr-defined]
        if kind is not ast.For or type(inner.iter) is not ast.Name or type(inner.target) is not ast.Name:  # type: ignore[attr-defined]
            continue
        item = inner.target.id  # type: ignore[attr-defined]
        for statement in inner.body:  # type: ignore[attr-defined]
            value = statement.value if type(statement) is ast.Expr else None
            if type(value) is ast.Yield and type(value.value) is ast.Name and value.value.id == item:
                return inner.iter.id  # type: ignore[attr-defined]
    return None


def _says_loader(name: str) -> bool:
    low = name.rsplit(".", 1)[-1].lower()
    return "loader" in low and not low.endswith("loaders")


def batch_sources(tree: ast.Module, text: str, starts: List[int], loader_names: FrozenSet[str],
                  classes: FrozenSet[str], is_torch_loader, calls_named=None,
                  wanted: Optional[Scope] = None) -> Dict[Scope, FrozenSet[Tuple[str, str, str]]]:
    """scope -> (kind, name, loader) for each name of the scope bound only to batches (``BATCH``,
    see the module docstring) or only to loaders under a name that does not say so (``LOADER``:
    ``pbar = tqdm(train_loader)``, a parameter every caller gives a loader); ``loader`` is the
    loader's dotted name or ``callee()``."""
    return _BatchFacts(tree, text, starts, loader_names, classes, is_torch_loader, calls_named).scopes(wanted)


# -- functions other files hand loaders to (the project index, issue 29 class 2) ------------------
# Calls a ``for`` may iterate a parameter through that do not iterate it (``range(n)``, ``len``).
_NOT_ITERATING = frozenset({"range", "len", "min", "max", "sum", "int", "float", "str", "repr", "print", "isinstance"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FOR_WORD = re.compile(r"for\b")  # where a line that starts a `for` statement may be
_LONE_CR = re.compile(r"\r(?!\n)")
# `in p`, `in enumerate(tqdm(p), 1)`, `in logger.log_every(p, 10)`: the callees, then the name
_DRAWN = re.compile(r"\bin\s+((?:[\w.]+\s*\(\s*)*)([A-Za-z_]\w*)")


def _names_loader(name: str) -> bool:
    """A parameter named for a loader (``data_loader``, ``train_dataloader``, ``dl``,
    ``val_dl``; not ``loaders``): only those are recorded, so that a file calling a helper over
    texts or tokens gets no fact (facts make a file linted whole again: transformers'
    tokenizers)."""
    low = name.lower()
    return ("loader" in low and not low.endswith("loaders")) or low == "dl" or low.endswith("_dl")


def _drawn_name(header: str) -> Optional[str]:
    """The name a ``for`` header's iterable draws from as ``_iterated_parameter`` reads it (the
    first argument through calls), from the text of its line; None for ``range(n)``."""
    match = _DRAWN.search(header)
    if match is None:
        return None
    callees = [c.strip() for c in match.group(1).split("(") if c.strip()]
    return None if any(c in _NOT_ITERATING for c in callees) else match.group(2)
_MOVE_TEXT = re.compile(r"\.\s*(?:cuda|to)\s*\(")  # `x.cuda(`, `x.to(`: a loop that may move


def loader_parameters(tree: ast.Module, text: Optional[str] = None) -> Dict[str, list]:
    """For the project index (``summary["loader_params"]``, ``ProjectIndex.loader_helpers``): the
    module-level functions and the methods of module-level classes that iterate a positional
    parameter named for a loader (``_names_loader``) with ``for`` (directly, or through a call handed it: ``enumerate(p)``,
    ``tqdm(p)``, ``logger.log_every(p, 10)``) and never bind it again: qualname -> [positional
    parameters (``self`` left out), positions iterated, positions whose items a loop moves to
    a device (``x.cuda()``, ``x.to(device)``, on a value derived from the loop's variables),
    positions iterated inside another loop of the function (once per epoch of its own:
    ``for epoch in range(n): for b in p``), the function's line]. A caller in another file that
    hands such a function a loader makes it iterated (per call) or its batches moved (TL102,
    TL103). Only functions whose lines spell ``for`` are read (statements first, expressions
    only of the loops over a parameter)."""
    if text is not None and "for" not in text:
        return {}
    candidates: List[Tuple[str, ast.AST, bool]] = []
    for stmt in tree.body:
        kind = type(stmt)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            candidates.append((stmt.name, stmt, False))  # type: ignore[attr-defined]
        elif kind is ast.ClassDef:
            for item in stmt.body:  # type: ignore[attr-defined]
                if type(item) in (ast.FunctionDef, ast.AsyncFunctionDef):
                    candidates.append((f"{stmt.name}.{item.name}", item, True))  # type: ignore[attr-defined]
    starts: List[int] = []
    if text is not None and not ("\r" in text and _LONE_CR.search(text)):  # lines end at \n (or \r\n)
        # The `for` statements' lines and the names they may iterate, from the text: a function is
        # read only when one of them, in its span, draws from a name (transformers: most loops
        # are over `self.layers` or `range(n)`, most functions have none)
        drawn: List[Tuple[int, str]] = []
        line, counted = 1, 0
        for match in _FOR_WORD.finditer(text):  # a literal first: C speed (a `(?m)^` pattern is 10x slower)
            pos = match.start()
            begin = text.rfind("\n", 0, pos) + 1
            if text[begin:pos].strip() not in ("", "async"):
                continue  # `for` in a comprehension, a docstring, a comment: not a `for` statement
            end = text.find("\n", pos)
            name = _drawn_name(text[match.end():end if end >= 0 else len(text)])
            if name is not None and _names_loader(name):
                line += text.count("\n", counted, pos)
                counted = pos
                drawn.append((line, name))
        if not drawn:
            return {}
        firsts = [function.lineno for _, function, _ in candidates]  # type: ignore[attr-defined]
        names: Dict[int, Set[str]] = {}  # candidate -> the names its `for` lines draw from
        for line, name in drawn:
            at = bisect.bisect_right(firsts, line) - 1
            if at >= 0 and line <= (candidates[at][1].end_lineno or 0):  # type: ignore[attr-defined]
                names.setdefault(at, set()).add(name)
        candidates = [c for i, c in enumerate(candidates) if i in names]
        spelled = {id(candidates[j][1]): names[i] for j, i in enumerate(sorted(names))}
    else:
        spelled = {}
    found: Dict[str, list] = {}
    for qualname, function, method in candidates:
        args = function.args  # type: ignore[attr-defined]
        params = [a.arg for a in (*args.posonlyargs, *args.args)]
        if method:
            static = any(dotted(d) == "staticmethod" for d in function.decorator_list)  # type: ignore[attr-defined]
            if not static:
                if not params or params[0] not in ("self", "cls"):
                    continue
                params = params[1:]
        if not params or (spelled and not spelled[id(function)] & set(params)):
            continue  # (no `for` line of it draws from a parameter)
        loops = [(loop, depth) for loop, depth in _loops_of(function.body)  # type: ignore[attr-defined]
                 if type(loop) in (ast.For, ast.AsyncFor)]
        found_loops: List[Tuple[int, ast.AST, int]] = []
        for loop, depth in loops:
            param = _iterated_parameter(loop.iter, params)  # type: ignore[attr-defined]
            if param is not None and _names_loader(param):
                found_loops.append((params.index(param), loop, depth))
        if not found_loops:
            continue
        rebound = _rebound_names(function)
        moved: Set[int] = set()
        repeated: Set[int] = set()
        seen: Set[int] = set()
        for position, loop, depth in found_loops:
            if params[position] in rebound:
                continue
            seen.add(position)
            if depth:
                repeated.add(position)
            if position in moved:
                continue
            if text is not None:  # a loop whose lines spell no `.to(`/`.cuda(` moves nothing (no walk)
                if not starts:
                    from torchlint.source import line_starts

                    starts = line_starts(text)
                first, last = loop.lineno, loop.end_lineno or loop.lineno  # type: ignore[attr-defined]
                if not _MOVE_TEXT.search(text, starts[first - 1], starts[min(last, len(starts) - 1)]):
                    continue
            if _moves_loop_items(loop):
                moved.add(position)
        if seen:
            found[qualname] = [params, sorted(seen), sorted(moved), sorted(repeated), function.lineno]  # type: ignore[attr-defined]
    return found


def _loops_of(statements: List[ast.stmt]) -> List[Tuple[ast.AST, int]]:
    """The loops among ``statements`` and their blocks (no nested scope), with how many loops
    enclose each."""
    found: List[Tuple[ast.AST, int]] = []
    stack: List[Tuple[ast.AST, int]] = [(s, 0) for s in statements]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            continue
        if kind in _LOOPS:
            found.append((node, depth))
            stack.extend((child, depth + 1) for child in node.body)  # type: ignore[attr-defined]
            stack.extend((child, depth) for child in node.orelse)  # type: ignore[attr-defined]
            continue
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if type(block) is list:
                stack.extend((child, depth) for child in block if isinstance(child, ast.AST))
    return found


def _iterated_parameter(iterable: ast.expr, params: List[str]) -> Optional[str]:
    """The parameter a ``for`` over ``iterable`` draws from: ``p``, ``enumerate(p)``,
    ``tqdm(enumerate(p))``, ``logger.log_every(p, 10)`` (a call's first argument), or None."""
    node = iterable
    while True:
        if type(node) is ast.Name:
            return node.id if node.id in params else None
        if type(node) is not ast.Call:
            return None
        callee = dotted(node.func)
        if callee is None or callee in _NOT_ITERATING:
            return None
        args = node.args
        if not args or type(args[0]) not in (ast.Name, ast.Call):
            return None
        node = args[0]  # a wrapper's iterable comes first: `enumerate(p, 1)`, `tqdm(p, total=n)`


def _rebound_names(function: ast.AST) -> Set[str]:
    """Names the function's statements bind (assignments, ``for``, ``with``, ``del``, imports,
    definitions; not inside nested scopes): a parameter bound again holds something else after.
    Statements only, and the targets' names (a walrus in an expression is not seen)."""
    found: Set[str] = set()
    stack: List[ast.AST] = list(function.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        kind = type(node)
        targets: List[ast.AST] = []
        if kind is ast.Assign:
            targets = node.targets  # type: ignore[attr-defined]
        elif kind in (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor):
            targets = [node.target]  # type: ignore[attr-defined]
        elif kind in (ast.With, ast.AsyncWith):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]  # type: ignore[attr-defined]
        elif kind is ast.Delete:
            targets = node.targets  # type: ignore[attr-defined]
        elif kind in (ast.Import, ast.ImportFrom):
            found.update((a.asname or a.name).split(".", 1)[0] for a in node.names)  # type: ignore[attr-defined]
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            found.add(node.name)  # type: ignore[attr-defined]
            continue
        elif kind is ast.ExceptHandler and node.name:  # type: ignore[attr-defined]
            found.add(node.name)  # type: ignore[attr-defined]
        for target in targets:
            found.update(n.id for n in ast.walk(target) if type(n) is ast.Name)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if type(block) is list:
                stack.extend(block)
    return found


def _moves_loop_items(loop: ast.AST) -> bool:
    """Does the loop's body move a value derived from its variables to a device
    (``moves_to_device``: ``x.cuda()``, ``x.to(device)``)? Names bound from the loop's
    variables (assignments, comprehensions, inner loops) count."""
    tainted = {n.id for n in ast.walk(loop.target) if type(n) is ast.Name}  # type: ignore[attr-defined]
    nodes = [n for statement in loop.body for n in ast.walk(statement)]  # type: ignore[attr-defined]
    moves = [n for n in nodes if type(n) is ast.Call and moves_to_device(n)]
    if not moves:
        return False
    binders = [n for n in nodes if type(n) in (ast.Assign, ast.comprehension, ast.For, ast.AsyncFor, ast.AnnAssign)]

    def reads(node: Optional[ast.AST]) -> bool:
        return node is not None and any(type(x) is ast.Name and x.id in tainted for x in ast.walk(node))

    for _ in range(3):  # names bound from the loop's variables, from those, ...
        before = len(tainted)
        for node in binders:
            kind = type(node)
            source = node.value if kind in (ast.Assign, ast.AnnAssign) else node.iter  # type: ignore[attr-defined]
            if reads(source):
                targets = node.targets if kind is ast.Assign else [node.target]  # type: ignore[attr-defined]
                tainted.update(x.id for t in targets for x in ast.walk(t) if type(x) is ast.Name)
        if len(tainted) == before:
            break
    return any(reads(call.func.value) for call in moves)  # type: ignore[attr-defined]
