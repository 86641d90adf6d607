"""The semantic model of one file: scopes, bindings and where each name's value comes from.

One walk over the libcst tree (on the first question a rule asks, so files no rule questions
never pay for it) records every scope (module, class, function, lambda, comprehension), every
binding in it (imports, including function-local ones; assignments with their values; loop
targets; parameters; ``def``/``class``), every read of a name, the order of all of them and the
branches (blocks) each sits in. From that the model answers, for every rule:

- what a name or dotted expression resolves to *here* (``resolve``): a function-local
  ``import torch.nn as nn`` is seen only in its function, a project ``def DataLoader`` shadows
  the import of torch's, ``DP = nn.DataParallel`` is followed;
- which bindings reach a read (``reaching``), order-aware: ``x = x.cuda()`` later in a loop
  body does not reach an earlier read in the same iteration, unless nothing rebinds ``x`` first
  (the loop's back edge);
- ``self.<attr>`` bindings across a class (``attribute_bindings``);
- whether a value is on the host (``on_host``: the loader's items before they are moved,
  ``.cpu()``/``.numpy()``/``.item()`` results and what is read from them) and whether it derives
  from a loop's variables (``derives_from``);
- which ``DataLoader`` calls a loop iterates (``loader_calls``), through names, ``self``
  attributes, iteration wrappers (``enumerate``/``tqdm``/``zip``) and factory functions of the
  same file.

The model is about names and values, never about heuristics on words; those stay in
``heuristics.py`` (word lists in ``words.py``). Tests: ``tests/test_semantic.py``.
"""

from __future__ import annotations

import functools
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from torchlint import _cst as cst

from torchlint.imports import ImportTable, dotted_name, import_bindings
from torchlint.torch_api import DATALOADER, ITERATION_WRAPPERS, canonical_name
from torchlint.tree import _children, statement_containers

# Binding kinds.
IMPORT, DEF, CLASS, PARAM, ASSIGN, AUGMENT, LOOP, WITH, EXCEPT, GLOBAL_DECL = (
    "import", "def", "class", "param", "assign", "augment", "loop", "with", "except", "global")

# Tables of libcst node types are functions, not module constants: naming libcst's classes at
# import would import libcst (torchlint/_cst.py).
@functools.cache
def function_scope_types() -> Tuple[type, ...]:
    return (cst.FunctionDef, cst.Lambda)


@functools.cache
def comprehension_types() -> Tuple[type, ...]:
    return (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@functools.cache
def scope_node_types() -> Tuple[type, ...]:
    return function_scope_types() + (cst.ClassDef,) + comprehension_types()


@functools.cache
def _branching_types() -> Tuple[type, ...]:
    """Compound statements whose blocks may run zero or several times, or not at all."""
    return (cst.If, cst.For, cst.While, cst.Try, cst.TryStar, cst.Else, cst.Match, cst.MatchCase)


@functools.cache
def _loop_types() -> Tuple[type, ...]:
    return (cst.For, cst.While)


# Methods whose result lives on the host whatever their receiver was.
HOST_RESULTS = frozenset({"cpu", "numpy", "tolist", "item"})
# Methods that may put their result on a device.
MOVES = frozenset({"cuda", "to"})
# Tensor metadata: known without waiting for the device.
_METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn",
                                  "layout", "names", "is_leaf"})
_METADATA_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "stride", "data_ptr",
                               "get_device", "is_contiguous", "is_floating_point", "storage_offset", "type"})
# Builtins whose result is a Python value, whatever they are given.
_HOST_BUILTINS = frozenset({"len", "isinstance", "hasattr", "getattr", "type", "id", "str", "repr", "range",
                            "enumerate", "zip", "print", "int", "float", "bool", "list", "tuple", "dict", "set"})


class Binding:
    """One place a name gets a value."""

    __slots__ = ("name", "kind", "node", "value", "statement", "scope", "order", "blocks", "qualified")

    def __init__(self, name, kind, node, value, statement, scope, blocks, qualified=None):
        self.name = name
        self.kind = kind
        #: The node that binds (a Name target, the import alias, the FunctionDef ...).
        self.node = node
        #: The value bound: an assignment's right-hand side, a loop's iterable, a with-item's
        #: context expression; None where unknown (``+=``, parameters, ``except ... as``).
        self.value = value
        #: The statement (or loop, with-item, handler) that binds.
        self.statement = statement
        self.scope = scope
        #: Source order; a read sees bindings with a lower order (set when the binding takes effect).
        self.order = -1
        #: The branch blocks around the binding, outermost first (the scope's own body excluded).
        self.blocks = blocks
        #: For imports, the qualified name the local name stands for.
        self.qualified = qualified

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Binding({self.name!r}, {self.kind}, order={self.order})"


class Scope:
    __slots__ = ("node", "parent", "bindings", "globals", "_attributes", "methods")

    def __init__(self, node: cst.CSTNode, parent: Optional["Scope"]) -> None:
        self.node = node
        self.parent = parent
        self.bindings: Dict[str, List[Binding]] = {}
        self.globals: Set[str] = set()  # `global x` / `nonlocal x`: binds elsewhere
        self._attributes: Optional[Dict[str, List[Binding]]] = None
        self.methods: List[cst.FunctionDef] = []  # for classes

    @property
    def attributes(self) -> Dict[str, List[Binding]]:
        """For classes: ``self.<attr>`` bindings made in the class's methods (read on first use)."""
        if self._attributes is None:
            self._attributes = {}
            for method in self.methods:
                _bind_self_attributes(method, self)
        return self._attributes

    @property
    def is_function(self) -> bool:
        return isinstance(self.node, function_scope_types())


class _Read:
    __slots__ = ("scope", "order", "blocks")

    def __init__(self, scope: Scope, order: int, blocks: tuple) -> None:
        self.scope, self.order, self.blocks = scope, order, blocks


def _is_prefix(inner: tuple, outer: tuple) -> bool:
    """Are the blocks ``inner`` (of a binding) all around the place whose blocks are ``outer``?"""
    return len(inner) <= len(outer) and all(a is b for a, b in zip(inner, outer))


class SemanticModel:
    """Two tiers, each built on first use: ``resolve_at`` (what a name stands for where a rule
    is looking) needs only the bindings each scope's *statements* make, a walk of a tenth of the
    tree; data-flow questions (``lookup``, ``on_host``, ``loader_calls`` ...) build the full model
    of every read and binding once per file."""

    def __init__(self, module: cst.Module, imports: Optional[ImportTable] = None, ancestors=None) -> None:
        self.module = module
        self.imports = imports or ImportTable.from_module(module)
        self._scopes: Optional[Dict[int, Scope]] = None
        self.reads: Dict[int, _Read] = {}  # id(Name read) -> where it is
        self.scope_of_node: Dict[int, Scope] = {}  # id(statement or scope node) -> enclosing scope
        self.block_owner: Dict[int, cst.CSTNode] = {}
        self._resolving: Set[int] = set()
        self._statement_bindings: Dict[int, "_ScopeNames"] = {}
        self._chains: Dict[int, Tuple[cst.CSTNode, ...]] = {}
        #: Function bodies not walked yet: id(def) -> the walk's first stack entry.
        self._deferred: Dict[int, tuple] = {}
        self._counter = 0
        #: Where the rule asking is (``ctx.ancestors``): which waiting body to walk first.
        self._ancestors = ancestors
        self._top_indexes: Optional[Dict[int, int]] = None
        self._heads: Optional[Set[str]] = None

    def release(self) -> None:
        """Drop the model: scopes and their bindings refer to each other (and to the tree), so
        without this the whole file would wait for the cyclic collector."""
        for scope in (self._scopes or {}).values():
            scope.bindings = {}
            scope._attributes = None
        for table in (self._scopes or {}, self.reads, self.scope_of_node, self.block_owner,
                      self._statement_bindings, self._chains, self._deferred):
            table.clear()

    @property
    def scopes(self) -> Dict[int, Scope]:
        if self._scopes is None:
            self._scopes = {}
            self._build()
        return self._scopes

    # -- tier 1: what a name stands for --------------------------------------------------------
    def resolve_at(self, node: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> Optional[str]:
        """Canonical qualified name of a Name/Attribute chain read below ``ancestors``, through
        the imports visible there: a function-local import counts in its function only, a
        local variable, parameter or project ``def``/``class`` of that name hides the import
        (``def DataLoader`` anywhere at module level hides it from every function), and
        ``DP = nn.DataParallel`` is followed."""
        name = dotted_name(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head not in self.resolvable_heads:
            return None  # no import, alias or star import anywhere binds it: most reads
        found = self._head_at(head, ancestors)
        if found is None:
            return None
        return canonical_name(f"{found}.{rest}" if rest else found)

    @property
    def resolvable_heads(self) -> Set[str]:
        """Every name that may resolve to a qualified name somewhere in the file: the names any
        import binds (in any scope), the targets of ``X = <name or attribute>`` (aliases such as
        ``DP = nn.DataParallel``) and what star imports export. A superset of what
        ``_head_at`` can resolve, from one walk over the statements (never the expressions)."""
        heads = self._heads
        if heads is None:
            from torchlint.tree import small_statements

            heads = self._heads = set()
            for small in small_statements(self.module):  # exact types: no ABC isinstance per node
                kind = type(small)
                if kind is cst.Import or kind is cst.ImportFrom:
                    heads.update(local for local, _, _ in import_bindings(small))
                elif (kind is cst.Assign or kind is cst.AnnAssign) and type(small.value) in (cst.Name, cst.Attribute):
                    targets = [t.target for t in small.targets] if kind is cst.Assign else [small.target]
                    for target in targets:
                        heads.update(name for name, _ in _targets(target))
            if self.imports.star_modules:
                from torchlint.torch_api import STAR_EXPORTS

                for module in self.imports.star_modules:
                    heads.update(STAR_EXPORTS.get(module, ()))
        return heads

    def _scope_chain(self, ancestors: Sequence[cst.CSTNode]) -> Tuple[cst.CSTNode, ...]:
        """The scope nodes among ``ancestors``, outermost first; amortised O(1) per question
        during the walk (each node's chain extends its parent's), not O(depth)."""
        chains = self._chains
        i = len(ancestors) - 1
        while i >= 0 and id(ancestors[i]) not in chains:
            i -= 1
        chain = chains[id(ancestors[i])] if i >= 0 else ()
        for node in ancestors[i + 1:]:
            if isinstance(node, scope_node_types()):
                chain = chain + (node,)
            chains[id(node)] = chain
        return chain

    def _head_at(self, head: str, ancestors: Sequence[cst.CSTNode]) -> Optional[str]:
        innermost = True
        chain = self._scope_chain(ancestors)
        for scope in reversed(chain):
            if isinstance(scope, cst.ClassDef) and not innermost:
                continue
            innermost = False
            names = self._names(scope)
            if head in names.globals:
                break
            bindings = names.bindings.get(head)
            if bindings:
                return self._qualified(bindings, ancestors)
        bindings = self._names(self.module).bindings.get(head)
        if bindings:
            if not chain and len(ancestors) > 1:
                top = self._top_index(ancestors[1])  # module code runs in order
                if top is not None:
                    before = [b for b in bindings if b[3] <= top]
                    bindings = before[-1:] if before and before[-1][3] < top else before
                    if not bindings:
                        return None
            return self._qualified(bindings, ancestors)
        for module in self.imports.star_modules:
            from torchlint.torch_api import STAR_EXPORTS

            if head in STAR_EXPORTS.get(module, ()):
                return f"{module}.{head}"
        return None

    def _qualified(self, bindings: List[tuple], ancestors) -> Optional[str]:
        main = [b for b in bindings if not b[4]] or bindings  # leave out `except ImportError:` fallbacks
        found: Set[str] = set()
        for kind, qualified, value, _, _ in main:
            if kind == IMPORT:
                if qualified.startswith("."):
                    return None  # the project's own module
                found.add(qualified)
            elif kind == ASSIGN and isinstance(value, (cst.Name, cst.Attribute)) and id(value) not in self._resolving:
                self._resolving.add(id(value))
                try:
                    target = self.resolve_at(value, [self.module])
                finally:
                    self._resolving.discard(id(value))
                if target is None:
                    return None
                found.add(target)
            else:
                return None
        return found.pop() if len(found) == 1 else None

    def _top_index(self, statement: cst.CSTNode) -> Optional[int]:
        if self._top_indexes is None:
            self._top_indexes = {id(top): index for index, top in enumerate(self.module.body)}
        return self._top_indexes.get(id(statement))

    def _names(self, scope: cst.CSTNode) -> "_ScopeNames":
        names = self._statement_bindings.get(id(scope))
        if names is None:
            names = self._statement_bindings[id(scope)] = _ScopeNames(scope)
        return names

    # -- tier 2: building the full model -------------------------------------------------------
    def _build(self) -> None:
        """The module's own code; the bodies of its functions and methods wait until a question
        is asked about something inside them (``_ensure``)."""
        module_scope = Scope(self.module, None)
        self._scopes[id(self.module)] = module_scope
        self._walk([(child, module_scope, ()) for child in reversed(_children(self.module))])

    def _ensure(self, node: cst.CSTNode) -> None:
        """Build the function body ``node`` sits in, if it is still waiting: the one among the
        rule's current ancestors (the usual case), else every waiting body."""
        self.scopes  # noqa: B018 - the module level first
        if not self._deferred or id(node) in self.scope_of_node:
            return
        for ancestor in self._ancestors() if self._ancestors is not None else ():
            pending = self._deferred.pop(id(ancestor), None)
            if pending is not None:
                self._walk([pending])
                if id(node) in self.scope_of_node:
                    return
        # a node elsewhere in the file: first the methods of the classes around the rule (a
        # `self.<attr>` bound in `__init__`), then the other bodies, until one holds it (a body's
        # model does not depend on the others': each binds in its own scope)
        for ancestor in self._ancestors() if self._ancestors is not None else ():
            if type(ancestor) is cst.ClassDef:
                for method in self.scopes[id(ancestor)].methods if id(ancestor) in self.scopes else ():
                    pending = self._deferred.pop(id(method), None)
                    if pending is not None:
                        self._walk([pending])
                        if id(node) in self.scope_of_node:
                            return
        while self._deferred:
            self._walk([self._deferred.popitem()[1]])
            if id(node) in self.scope_of_node:
                return

    def _walk(self, stack: List[tuple]) -> None:
        # (node, scope, blocks) or a marker (None, bindings, None) that sets their order when popped.
        owners = self.block_owner
        counter = self._counter
        comprehensions, branching = comprehension_types(), _branching_types()  # locals: asked per node
        while stack:
            node, scope, blocks = stack.pop()
            counter += 1
            if node is None:  # a marker: these bindings take effect now
                for binding in scope:
                    binding.order = counter
                continue
            kind = type(node)
            self.scope_of_node[id(node)] = scope
            if kind is cst.Name:
                self.reads[id(node)] = _Read(scope, counter, blocks)
                continue
            pending: List[Binding] = []
            if kind is cst.Attribute or kind is cst.Arg:
                # `x.attr` reads x, not a name `attr`; `f(k=v)` reads v, not a name `k`
                stack.append((node.value, scope, blocks))
                continue
            children = _children(node)
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                binding = self._bind(scope, node.name.value, DEF if kind is cst.FunctionDef else CLASS,
                                     node, None, node, blocks)
                binding.order = counter
                inner = Scope(node, scope)
                self.scopes[id(node)] = inner
                if kind is cst.FunctionDef:
                    self._bind_params(inner, node.params)
                    if isinstance(scope.node, cst.ClassDef):
                        scope.methods.append(node)
                # Decorators and defaults are evaluated in the enclosing scope.
                outer = [*node.decorators]
                if kind is cst.FunctionDef:
                    outer += [p.default for p in _params(node.params) if p.default is not None]
                else:
                    outer += [a.value for a in node.bases] + [a.value for a in node.keywords]
                if kind is cst.FunctionDef and isinstance(scope.node, (cst.Module, cst.ClassDef)):
                    self._deferred[id(node)] = (node.body, inner, ())  # walked when asked about
                else:
                    stack.append((node.body, inner, ()))
                for child in reversed(outer):
                    stack.append((child, scope, blocks))
                continue
            if kind is cst.Lambda:
                inner = Scope(node, scope)
                self.scopes[id(node)] = inner
                self._bind_params(inner, node.params)
                stack.append((node.body, inner, ()))
                for p in reversed(list(_params(node.params))):
                    if p.default is not None:
                        stack.append((p.default, scope, blocks))
                continue
            if kind in comprehensions:
                inner = Scope(node, scope)
                self.scopes[id(node)] = inner
                # The first iterable is evaluated outside; the rest inside.
                first = node.for_in
                for_nodes = []
                f = first
                while f is not None:
                    for_nodes.append(f)
                    f = f.inner_for_in
                elements = [node.key, node.value] if kind is cst.DictComp else [node.elt]
                for f in for_nodes:
                    for name, target in _targets(f.target):
                        b = self._bind(inner, name, LOOP, target, f.iter, f, ())
                        b.order = counter
                work: List[tuple] = [(e, inner, ()) for e in elements]
                for f in for_nodes:
                    work += [(c.test, inner, ()) for c in f.ifs]
                    if f is not first:
                        work.append((f.iter, inner, ()))
                    work.append((f.target, inner, ()))
                work.append((first.iter, scope, blocks))
                stack.extend(work)
                continue
            if kind is cst.Import or kind is cst.ImportFrom:
                for local, qualified, alias in import_bindings(node):
                    b = self._bind(scope, local, IMPORT, alias, None, node, blocks, qualified)
                    b.order = counter
                continue
            if kind is cst.Global or kind is cst.Nonlocal:
                scope.globals.update(n.name.value for n in node.names)
                continue
            if kind is cst.Assign:
                for target in node.targets:
                    pending += [self._bind(scope, n, ASSIGN, t, value, node, blocks)
                                for n, t, value in _unpacked(target.target, node.value)]
            elif kind is cst.AnnAssign:
                pending += [self._bind(scope, n, ASSIGN if node.value is not None else AUGMENT, t, node.value,
                                       node, blocks) for n, t in _targets(node.target)]
            elif kind is cst.AugAssign:
                pending += [self._bind(scope, n, AUGMENT, t, None, node, blocks) for n, t in _targets(node.target)]
            elif kind is cst.NamedExpr:
                pending += [self._bind(scope, n, ASSIGN, t, node.value, node, blocks) for n, t in _targets(node.target)]
            elif kind is cst.For:
                # target after the iterable, before the body; the body and else are branches
                body_blocks = blocks + (node.body,)
                owners[id(node.body)] = node
                loop_bindings = [self._bind(scope, n, LOOP, t, node.iter, node, body_blocks)
                                 for n, t in _targets(node.target)]
                if node.orelse is not None:
                    owners[id(node.orelse)] = node
                    stack.append((node.orelse, scope, blocks + (node.orelse,)))
                stack.append((node.body, scope, body_blocks))
                stack.append((None, loop_bindings, None))
                stack.append((node.target, scope, body_blocks))
                stack.append((node.iter, scope, blocks))
                continue
            elif kind is cst.WithItem:
                if node.asname is not None:
                    pending += [self._bind(scope, n, WITH, t, node.item, node, blocks)
                                for n, t in _targets(node.asname.name)]
            elif kind is cst.ExceptHandler or kind is cst.ExceptStarHandler:
                owners[id(node.body)] = node
                inner_blocks = blocks + (node.body,)
                if node.name is not None:
                    b = self._bind(scope, node.name.name.value, EXCEPT, node.name.name, None, node, inner_blocks)
                    b.order = counter
                if node.type is not None:
                    stack.append((node.body, scope, inner_blocks))
                    stack.append((node.type, scope, blocks))
                else:
                    stack.append((node.body, scope, inner_blocks))
                continue
            elif kind in branching:
                # each block of the statement is a branch: it may run once, many times or never
                for child in reversed(children):
                    if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                        owners[id(child)] = node
                        stack.append((child, scope, blocks + (child,)))
                    else:
                        stack.append((child, scope, blocks))
                continue
            if pending:
                stack.append((None, pending, None))
            for child in reversed(children):
                stack.append((child, scope, blocks))
        self._counter = counter

    def _bind(self, scope, name, kind, node, value, statement, blocks, qualified=None) -> Binding:
        binding = Binding(name, kind, node, value, statement, scope, blocks, qualified)
        scope.bindings.setdefault(name, []).append(binding)
        return binding

    def _bind_params(self, scope: Scope, params: cst.Parameters) -> None:
        for p in _params(params):
            b = self._bind(scope, p.name.value, PARAM, p.name, None, p, ())
            b.order = 0

    # -- scopes -----------------------------------------------------------------------------
    def scope_for(self, node: cst.CSTNode) -> Optional[Scope]:
        """The scope a node sits in (for a scope node: the one it creates)."""
        self._ensure(node)
        found = self.scopes.get(id(node))
        return found if found is not None else self.scope_of_node.get(id(node))

    def enclosing_class(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        self._ensure(node)
        scope = self.scope_of_node.get(id(node))
        while scope is not None:
            if isinstance(scope.node, cst.ClassDef):
                return scope.node
            scope = scope.parent
        return None

    # -- names ------------------------------------------------------------------------------
    def lookup(self, name: cst.Name) -> Optional[List[Binding]]:
        """The bindings whose value a read of ``name`` may see; None when no scope binds it
        (a builtin, a star import, or a name this model never saw)."""
        self._ensure(name)
        read = self.reads.get(id(name))
        if read is None:
            return None
        return self._lookup_from(name.value, read.scope, read)

    def _lookup_from(self, name: str, scope: Scope, read: Optional[_Read]) -> Optional[List[Binding]]:
        first = True
        while scope is not None:
            if isinstance(scope.node, cst.ClassDef) and not first:
                scope = scope.parent  # methods do not see the class body's names
                continue
            if name in scope.globals:
                scope = self.scopes[id(self.module)]
                read = None
                first = False
                continue
            bindings = scope.bindings.get(name)
            if bindings:
                if read is not None and first:
                    return self._reaching(bindings, read)
                return self._final(bindings)
            scope = scope.parent
            first = False
        return None

    def _reaching(self, bindings: List[Binding], read: _Read) -> List[Binding]:
        """Bindings of one scope that reach ``read``: the latest one on every path before it,
        plus those later in a loop around it when nothing in that loop rebinds first."""
        before = [b for b in bindings if b.order < read.order]
        result: List[Binding] = []
        dominating = None
        for b in reversed(before):
            result.append(b)
            if _is_prefix(b.blocks, read.blocks):
                dominating = b
                break
        for block in read.blocks:
            if not isinstance(self.block_owner.get(id(block)), _loop_types()):
                continue
            if dominating is not None and any(x is block for x in dominating.blocks):
                continue  # rebound inside the loop before the read: the back edge is cut
            result += [b for b in bindings if b.order > read.order and any(x is block for x in b.blocks)]
        return result

    def _final(self, bindings: List[Binding]) -> List[Binding]:
        """What a read from an inner scope may see of an outer scope's name: any of its bindings
        (the function runs later), leaving out fallbacks bound in ``except`` handlers when there
        is anything else (``try: from torch... import X`` / ``except ImportError: X = None``)."""
        owners = self.block_owner
        main = [b for b in bindings
                if not any(isinstance(owners.get(id(x)), (cst.ExceptHandler, cst.ExceptStarHandler)) for x in b.blocks)]
        return main or bindings

    def reaching(self, name: cst.Name) -> Optional[List[Binding]]:
        """Alias of ``lookup`` for rules that ask about data flow."""
        return self.lookup(name)

    def attribute_bindings(self, node: cst.CSTNode, attr: str) -> List[Binding]:
        """``self.<attr>`` bindings in the class around ``node``."""
        cls = self.enclosing_class(node)
        if cls is None:
            return []
        return self.scopes[id(cls)].attributes.get(attr, [])

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """Canonical qualified name of a Name/Attribute chain, through the imports that are
        visible where it is read; None for local variables, project definitions and unknowns."""
        name = dotted_name(node)
        if name is None:
            return None
        head = node
        while isinstance(head, cst.Attribute):
            head = head.value
        rest = name[len(head.value):]
        bindings = self.lookup(head)
        if bindings is None:
            if id(head) in self.reads:  # not bound anywhere: builtins, star imports
                return self.imports.resolve_dotted(name) if self.imports.star_modules else None
            return self.imports.resolve_dotted(name)  # a node the model never saw (synthetic)
        found: Set[str] = set()
        for b in bindings:
            if b.kind == IMPORT:
                found.add(b.qualified)
            elif b.kind == ASSIGN and isinstance(b.value, (cst.Name, cst.Attribute)) and id(b.value) not in self._resolving:
                self._resolving.add(id(b.value))  # `DP = nn.DataParallel`
                try:
                    target = self.resolve(b.value)
                finally:
                    self._resolving.discard(id(b.value))
                if target is None:
                    return None
                found.add(target)
            else:
                return None
        if len(found) != 1:
            return None
        return canonical_name(found.pop() + rest)

    def resolve_call(self, node: cst.CSTNode) -> Optional[str]:
        return self.resolve(node.func) if isinstance(node, cst.Call) else None

    # -- values -----------------------------------------------------------------------------
    def values_of(self, node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
        """The expressions a Name or ``self.attr`` may hold here; None if any is unknown."""
        if isinstance(node, cst.Name):
            bindings = self.lookup(node)
        elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in ("self", "cls"):
            bindings = self.attribute_bindings(node, node.attr.value) or None
        else:
            return [node]
        if not bindings or any(b.kind != ASSIGN or b.value is None for b in bindings):
            return None
        return [b.value for b in bindings]

    def on_host(self, node: cst.BaseExpression, is_loader, _seen: Optional[Set[int]] = None) -> bool:
        """Is the value certainly on the host? ``.cpu()``/``.numpy()``/``.item()``/``.tolist()``
        results and reads from them; items a data loader yields (``is_loader(iterable)``) and
        reads from those, until moved (``.cuda()``/``.to()``). Unknown answers False."""
        seen = _seen if _seen is not None else set()
        while True:
            if isinstance(node, cst.Call):
                func = node.func
                if not isinstance(func, cst.Attribute):
                    return False
                if func.attr.value in HOST_RESULTS:
                    return True
                if func.attr.value in MOVES:
                    return False
                node = func.value
            elif isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            elif isinstance(node, cst.Name):
                break
            else:
                return False
        if id(node) in seen:
            return False
        seen.add(id(node))
        bindings = self.lookup(node)
        if not bindings:
            return False
        for b in bindings:
            if b.kind == LOOP:
                if not (is_loader(b.value) or self.on_host(b.value, is_loader, seen)):
                    return False
            elif b.kind == ASSIGN and b.value is not None:
                if not self.on_host(b.value, is_loader, seen):
                    return False
            elif b.kind == ASSIGN and isinstance(b.statement, cst.Assign):
                # `state, action = batch`: an item of a value on the host is on the host (as
                # `batch[0]` is; W2, issue 29: pytorch-a2c-ppo-acktr-gail's GAIL update)
                if not self.on_host(b.statement.value, is_loader, seen):
                    return False
            else:
                return False
        return True

    def on_device(self, node: cst.BaseExpression, moves, _seen: Optional[dict] = None) -> bool:
        """Is the value known to be a tensor on an accelerator? Moved there (``moves(call)``:
        ``x.cuda()``, ``x.to(device)``), or computed from such a value: a tensor method of it
        (``x.sum()``, ``out.argmax(1)``), an attribute other than metadata (``outputs.loss``), a
        function or module applied to it (``model(x)``, ``criterion(out, y)``,
        ``torch.isnan(loss)``), arithmetic and comparisons with it, and names every reaching
        binding of which is such a value. Host results (``.item()``, ``.cpu()``), metadata
        (``.shape``, ``.size()``), builtins (``len``) and anything unknown answer False."""
        memo = _seen if _seen is not None else {}
        key = id(node)
        if key in memo:
            return bool(memo[key])  # None while being answered: a cycle counts as unknown
        memo[key] = None
        answer = self._on_device(node, moves, memo)
        memo[key] = answer
        return answer

    def _on_device(self, node: cst.BaseExpression, moves, seen: dict) -> bool:
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method in HOST_RESULTS or method in _METADATA_METHODS:
                    return False
                if moves(node):
                    return True
                if self.on_device(func.value, moves, seen):
                    return True  # a tensor method of a device tensor
            elif isinstance(func, cst.Name) and func.value in _HOST_BUILTINS:
                return False
            return any(self.on_device(a.value, moves, seen) for a in node.args if not a.star)
        if isinstance(node, cst.Attribute):
            return node.attr.value not in _METADATA_ATTRIBUTES and self.on_device(node.value, moves, seen)
        if isinstance(node, cst.Subscript):
            return self.on_device(node.value, moves, seen)
        if isinstance(node, cst.BinaryOperation):
            return self.on_device(node.left, moves, seen) or self.on_device(node.right, moves, seen)
        if isinstance(node, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons):
                return False  # `x is None`, `k in d`: Python answers these without the device
            return self.on_device(node.left, moves, seen) or any(
                self.on_device(c.comparator, moves, seen) for c in node.comparisons)
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return self.on_device(node.expression, moves, seen)
        if isinstance(node, cst.Name):
            bindings = self.lookup(node)
            if not bindings:
                return False
            return all(b.kind == ASSIGN and b.value is not None and self.on_device(b.value, moves, seen)
                       for b in bindings)
        return False

    def derives_from(self, node: cst.CSTNode, loop: cst.For, _seen: Optional[Set[int]] = None) -> bool:
        """Does some name read in ``node`` carry a value derived from ``loop``'s variables?"""
        seen = _seen if _seen is not None else set()
        from torchlint.tree import walk

        for n in walk(node, scope_node_types()):
            kind = type(n)
            # `x.attr` and `f(key=v)` read no name `attr` or `key`: asking about them found no
            # binding, after walking every function body of the file for them
            if kind is cst.Attribute:
                seen.add(id(n.attr))
            elif kind is cst.Arg and n.keyword is not None:
                seen.add(id(n.keyword))
            if kind is not cst.Name or id(n) in seen:
                continue
            seen.add(id(n))
            for b in self.lookup(n) or ():
                if b.kind == LOOP and b.statement is loop:
                    return True
                if b.value is not None and b.kind in (ASSIGN, LOOP, WITH) and self.derives_from(b.value, loop, seen):
                    return True
        return False

    # -- data loaders -----------------------------------------------------------------------
    def iterated_values(self, iterable: cst.BaseExpression) -> List[cst.BaseExpression]:
        """What a ``for`` over ``iterable`` iterates, through ``enumerate``/``tqdm``/``zip``."""
        out: List[cst.BaseExpression] = []
        stack = [iterable]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call) and node.args:
                name = self.resolve(node.func) or dotted_name(node.func)
                if name in ITERATION_WRAPPERS:
                    args = node.args if name == "zip" else node.args[:1]
                    stack.extend(a.value for a in args if a.keyword is None and not a.star)
                    continue
            out.append(node)
        return out

    def loader_calls(self, iterable: cst.BaseExpression, factory_loaders=None) -> List[cst.Call]:
        """The ``DataLoader(...)`` calls a ``for`` over ``iterable`` may iterate: the call itself,
        the value of the names and ``self`` attributes it reads (only when every binding that
        reaches is a loader: a loader bound again, ``loader = accelerator.prepare(loader)``, is a
        wrapper we cannot see into), and the loaders a function of the file returns
        (``factory_loaders(function) -> calls``)."""
        found: List[cst.Call] = []
        for value in self.iterated_values(iterable):
            found += self._loaders_in(value, factory_loaders, set())
        return found

    def _loaders_in(self, node, factory_loaders, seen: Set[int]) -> List[cst.Call]:
        if id(node) in seen:
            return []
        seen.add(id(node))
        if isinstance(node, cst.Call):
            if self.resolve_call(node) == DATALOADER:
                return [node]
            if factory_loaders is not None and isinstance(node.func, (cst.Name, cst.Attribute)):
                return list(factory_loaders(node) or ())
            return []
        values = self.values_of(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if not values:
            return []
        calls: List[cst.Call] = []
        for value in values:
            inner = self._loaders_in(value, factory_loaders, seen)
            if not inner:
                return []  # some binding is not a loader we can see
            calls += inner
        return calls

    def module_function(self, name: cst.BaseExpression) -> Optional[cst.FunctionDef]:
        """The function of this file a call's callee names (``build_loader``, ``self.make``)."""
        if isinstance(name, cst.Name):
            bindings = self.lookup(name)
            if bindings and len(bindings) == 1 and bindings[0].kind == DEF:
                return bindings[0].node
            return None
        if isinstance(name, cst.Attribute) and isinstance(name.value, cst.Name) and name.value.value in ("self", "cls"):
            cls = self.enclosing_class(name)
            if cls is None:
                return None
            defs = self.scopes[id(cls)].bindings.get(name.attr.value, [])
            if len(defs) == 1 and defs[0].kind == DEF:
                return defs[0].node
        return None

    def returned_values(self, function: cst.FunctionDef) -> List[cst.BaseExpression]:
        """The expressions ``function`` returns (not those of nested functions)."""
        from torchlint.tree import walk

        return [n.value for n in walk(function.body, scope_node_types())
                if isinstance(n, cst.Return) and n.value is not None]


def _bind_self_attributes(method: cst.FunctionDef, class_scope: Scope) -> None:
    """``self.x = ...`` in a method: an attribute binding of the class."""
    if not isinstance(class_scope.node, cst.ClassDef):
        return
    params = list(method.params.posonly_params) + list(method.params.params)
    if not params or any(dotted_name(d.decorator) == "staticmethod" for d in method.decorators):
        return
    owner = params[0].name.value
    from torchlint.tree import walk

    for node in walk(method.body, scope_node_types()):
        if isinstance(node, cst.Assign):
            targets = [(t.target, node.value) for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [(node.target, getattr(node, "value", None) if isinstance(node, cst.AnnAssign) else None)]
        else:
            continue
        for target, value in targets:
            for inner in _flatten(target):
                if (isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name)
                        and inner.value.value == owner):
                    single = value if inner is target else None
                    kind = AUGMENT if isinstance(node, cst.AugAssign) else ASSIGN
                    class_scope._attributes.setdefault(inner.attr.value, []).append(
                        Binding(inner.attr.value, kind, inner, single, node, class_scope, (method,)))


def _params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg
    yield from params.kwonly_params
    if params.star_kwarg is not None:
        yield params.star_kwarg


def _flatten(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flatten(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _flatten(target.value)
    else:
        yield target


def _unpacked(target: cst.BaseExpression, value: cst.BaseExpression) -> List[Tuple[str, cst.Name, Optional[cst.BaseExpression]]]:
    """(name, node, value) for an assignment: ``x, y = x.cuda(), y.cuda()`` gives each name its own
    element; a name inside an unpacking of anything else gets None (unknown), a plain target
    the whole value."""
    if isinstance(target, cst.Name):
        return [(target.value, target, value)]
    if (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))
            and len(target.elements) == len(value.elements)
            and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))):
        out = []
        for t, v in zip(target.elements, value.elements):
            out += _unpacked(t.value, v.value)
        return out
    return [(n, t, None) for n, t in _targets(target)]


def _targets(target: cst.BaseExpression) -> List[Tuple[str, cst.Name]]:
    """(name, node) for each plain name a target binds: ``i, (x, *y)`` -> i, x, y."""
    return [(t.value, t) for t in _flatten(target) if isinstance(t, cst.Name)]


class _ScopeNames:
    """Tier 1: the names one scope binds, from its statements alone (not its expressions:
    walrus targets are not seen). Each binding: (kind, qualified, value, top-level statement
    index (module scope), in an ``except`` handler)."""

    __slots__ = ("bindings", "globals")

    def __init__(self, scope: cst.CSTNode) -> None:
        self.bindings: Dict[str, List[tuple]] = {}
        self.globals: Set[str] = set()
        if isinstance(scope, function_scope_types()):
            for p in _params(scope.params):
                self._add(p.name.value, PARAM, None, None, 0, False)
        if isinstance(scope, comprehension_types()):
            f = scope.for_in
            while f is not None:
                for name, _ in _targets(f.target):
                    self._add(name, LOOP, None, None, 0, False)
                f = f.inner_for_in
            return
        if isinstance(scope, cst.Lambda):
            return
        body = scope.body if isinstance(scope, cst.Module) else scope.body.body
        if not isinstance(body, (list, tuple)):  # `def f(): return x` on one line
            body = [scope.body]
        for index, statement in enumerate(body):
            self._statement(statement, index, False)

    def _add(self, name, kind, qualified, value, index, in_except) -> None:
        self.bindings.setdefault(name, []).append((kind, qualified, value, index, in_except))

    def _statement(self, root: cst.CSTNode, index: int, in_except: bool) -> None:
        stack = [(root, in_except)]
        while stack:
            node, handler = stack.pop()
            kind = type(node)
            if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
                for small in node.body:
                    self._small(small, index, handler)
                continue
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                self._add(node.name.value, DEF if kind is cst.FunctionDef else CLASS, None, None, index, handler)
                continue
            if kind is cst.For:
                for name, _ in _targets(node.target):
                    self._add(name, LOOP, None, node.iter, index, handler)
            elif isinstance(node, cst.With):
                for item in node.items:
                    if item.asname is not None:
                        for name, _ in _targets(item.asname.name):
                            self._add(name, WITH, None, item.item, index, handler)
            elif isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)):
                if node.name is not None:
                    self._add(node.name.name.value, EXCEPT, None, None, index, True)
                stack.append((node.body, True))
                continue
            containers = statement_containers()  # exact types: no ABC isinstance per expression
            for child in _children(node):
                if type(child) in containers:
                    stack.append((child, handler))

    def _small(self, small: cst.BaseSmallStatement, index: int, handler: bool) -> None:
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            for local, qualified, _ in import_bindings(small):
                self._add(local, IMPORT, qualified, None, index, handler)
        elif isinstance(small, cst.Assign):
            for target in small.targets:
                for name, t in _targets(target.target):
                    self._add(name, ASSIGN, None, small.value if t is target.target else None, index, handler)
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            for name, _ in _targets(small.target):
                self._add(name, ASSIGN if isinstance(small, cst.AnnAssign) and small.value is not None else AUGMENT,
                          None, getattr(small, "value", None) if isinstance(small, cst.AnnAssign) else None,
                          index, handler)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self.globals.update(n.name.value for n in small.names)
        elif isinstance(small, cst.Del):
            for name, _ in _targets(small.target):
                self._add(name, AUGMENT, None, None, index, handler)
