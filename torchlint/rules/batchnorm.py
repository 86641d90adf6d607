"""TL3xx: layers whose parameters do nothing."""

from __future__ import annotations

import ast
import functools
from typing import Dict, List, Optional, Sequence, Set, Tuple

from torchlint import _cst as cst

from torchlint.context import INSERT_AFTER, FixSpec, NodeEdit, block_indents
from torchlint.diagnostics import UNSAFE
from torchlint.imports import dotted_name
from torchlint.rules.base import Rule
from torchlint.semantic import ASSIGN, AUGMENT, LOOP, PARAM
from torchlint.syntax import UNKNOWN, body_simple_statements, get_arg, literal_value
from torchlint.torch_api import CONV_BIAS_POSITIONS, CONV_CLASSES, MEAN_SUBTRACTING_NORMS
from torchlint.tree import iter_children

_SEQUENTIAL = "torch.nn.Sequential"
_CONTAINERS = frozenset({"torch.nn.ModuleList", _SEQUENTIAL})
_ORDERED_DICTS = frozenset({"collections.OrderedDict", "typing.OrderedDict"})
# Reading these from a conv module reads a parameter or a setting: nothing is computed.
_APPLY_METHODS = frozenset({"forward", "__call__", "_conv_forward"})
# In order; None: something unseen that breaks a pair. A string: naming a libcst class at import loads libcst.
Layers = List[Optional["cst.BaseExpression"]]


# -- prefilter: the ast question ----------------------------------------------------------------
_CONV_SHORT_NAMES = tuple(f"{lazy}Conv{kind}{n}d" for lazy in ("", "Lazy") for kind in ("", "Transpose") for n in "123")
_BIAS_POSITIONS = sorted(set(CONV_BIAS_POSITIONS.values()))


def ast_conv_may_have_bias(index) -> bool:
    """ast prefilter: a conv constructor call whose bias ``_is_conv_with_bias`` could take for on
    (no ``bias=`` or ``bias=True``, no ``*args``/``**kwargs``, no positional bias other than
    ``True``). Every finding is on such a call; calls followed through aliases the index cannot
    follow answer yes."""
    calls = index.calls_of(*_CONV_SHORT_NAMES)
    if calls is None:
        return True
    for call, _path in calls:
        keyword = next((k for k in call.keywords if k.arg == "bias"), None)
        if keyword is not None:
            if type(keyword.value) is ast.Constant and keyword.value.value is True:
                return True
            continue
        if any(k.arg is None for k in call.keywords) or any(type(a) is ast.Starred for a in call.args):
            continue
        for position in _BIAS_POSITIONS:  # whichever class an alias may stand for
            if len(call.args) <= position:
                return True  # the bias left at its default
            value = call.args[position]
            if type(value) is ast.Constant and value.value is True:
                return True
    return False


# -- the rule -------------------------------------------------------------------------------------
class ConvBiasBeforeBatchNorm(Rule):
    """Flags a convolution (``Conv``, ``ConvTranspose``, ``LazyConv``; 1d/2d/3d) with its bias on
    whose output goes straight into a BatchNorm (also ``SyncBatchNorm``/``LazyBatchNorm``).

    BatchNorm subtracts the per-channel mean of its input, so a per-channel constant added just
    before it (the conv's bias) cancels out: the bias costs an add, memory and an optimizer slot
    for nothing. Recognised: consecutive layers of ``nn.Sequential(...)`` (also ``OrderedDict``,
    dict, ``*layers`` lists built with ``append``/``extend``/``+=``, and ``nn.Sequential``
    subclasses filled by ``super().__init__``/``add_module``); ``self.conv``/``self.bn``
    attributes (assigned or ``add_module``-ed once in ``__init__``) whose every call is
    ``self.bn(self.conv(x))`` or ``y = self.conv(x)`` with ``y`` read only by ``self.bn(y)``;
    paired ``ModuleList``s applied through ``zip(self.convs, self.bns)`` or
    ``self.bns[i](self.convs[i](x))``; a ``norm_layer`` parameter defaulting to BatchNorm. The
    finding is on the conv's constructor call. Unknown bias (``bias=flag``, ``**kwargs``), other
    norms, an activation in between, conditional or repeated assignments, convs used elsewhere
    and test code stay silent.
    """

    code = "TL301"
    name = "conv-bias-before-batchnorm"
    summary = "A convolution with a bias feeds straight into BatchNorm, which cancels the bias."
    message = "Conv bias is cancelled by the BatchNorm that follows; pass `bias=False`"
    hint = "BatchNorm subtracts the per-channel mean, so the bias only adds parameters and work."
    default_norm_message = "Conv bias is cancelled by the BatchNorm `{param}` defaults to; pass `bias=False` for it"
    conditional_message = "Conv bias is cancelled by a BatchNorm that follows when `{test}`; pass `bias={bias}`"
    requires = (("Conv",), ("BatchNorm",))
    # every finding needs a norm its code (or a module-level alias) names: a call, a default
    ast_candidate = staticmethod(lambda index: index.mentions("BatchNorm", substring=True)
                                 and index.references(MEAN_SUBTRACTING_NORMS) and ast_conv_may_have_bias(index))
    fix_applicability = UNSAFE

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: Set[int] = set()
        #: id(conv constructor call) -> its ancestors when visited, to report it from elsewhere.
        self._conv_ancestors: Dict[int, Tuple[cst.CSTNode, ...]] = {}
        self._indexes: Dict[int, "_Index"] = {}
        self._classes_with_convs: Set[int] = set()
        #: id(a conv's Name read in an ``if`` branch) -> the test, when the conv's other read is
        #: in the ``else`` (``if batch_norm: layers += [conv2d, bn] else: layers += [conv2d]``)
        self._branch_tests: Dict[int, cst.BaseExpression] = {}
        #: id(a layer added alone under an ``if`` right after the previous one) -> the test
        self._conditions: Dict[int, cst.BaseExpression] = {}

    # -- nn.Sequential(conv, bn, ...) ---------------------------------------------------------
    def leave_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name in CONV_CLASSES:
            if self._is_conv_with_bias(node):
                self._conv_ancestors[id(node)] = tuple(self.ctx.ancestors)
                self._classes_with_convs.update(id(a) for a in self.ctx.ancestors if isinstance(a, cst.ClassDef))
        elif name == _SEQUENTIAL:
            if self._handed_to_layer_iterator(node):
                return  # `MaskConv(nn.Sequential(conv, bn))`: code may run between the layers
            self._check_layers(self._sequential_layers(node))

    def leave_Return(self, node: cst.Return) -> None:
        """``return layers`` from a function whose result the file uses as layers (``*f(...)`` in
        a ``Sequential``, ``layers.extend(f(...))``: the whole-file model's
        ``layer_list_functions``, issue 29 class 7)."""
        value = node.value
        if not isinstance(value, cst.Name):
            return
        function = next((a for a in reversed(self.ctx.ancestors) if isinstance(a, cst.FunctionDef)), None)
        if function is None or function.name.value not in self.ctx.model.layer_list_functions():
            return
        built = self._built_list(value)
        if built is not None:
            self._check_layers(built.layers(self._conditions))

    def _handed_to_layer_iterator(self, node: cst.Call) -> bool:
        """Is the container an argument of a class of this file that iterates the module given to
        it (the whole-file model's ``layer_iterating_classes``, issue 29 class 7)?"""
        up = [a for a in self.ctx.ancestors if a is not node]
        if len(up) < 2 or not isinstance(up[-1], cst.Arg) or not isinstance(up[-2], cst.Call):
            return False
        func = up[-2].func
        return isinstance(func, cst.Name) and func.value in self.ctx.model.layer_iterating_classes()

    def _sequential_layers(self, node: cst.Call) -> Layers:
        args = node.args
        if len(args) == 1 and not args[0].star and args[0].keyword is None:
            only = args[0].value
            if isinstance(only, cst.Dict):
                return [e.value if isinstance(e, cst.DictElement) else None for e in only.elements]
            if (
                isinstance(only, cst.Call)
                and self.ctx.resolve_call(only) in _ORDERED_DICTS
                and len(only.args) == 1
                and isinstance(only.args[0].value, (cst.List, cst.Tuple))
            ):
                layers: Layers = []
                for element in only.args[0].value.elements:
                    pair = element.value
                    if isinstance(element, cst.Element) and isinstance(pair, cst.Tuple) and len(pair.elements) == 2:
                        layers.append(pair.elements[1].value)
                    else:
                        layers.append(None)
                return layers
        return self._layers_of_args(args)

    def _layers_of_args(self, args: Sequence[cst.Arg]) -> Layers:
        layers: Layers = []
        for arg in args:
            if arg.keyword is not None:
                continue
            if arg.star == "*":
                built = self._built_list(arg.value)
                layers += built.layers(self._conditions) if built is not None else [None]
            elif arg.star:
                layers.append(None)
            else:
                layers.append(arg.value)
        return layers

    def _check_layers(self, layers: Layers) -> None:
        """Report each conv with its bias on that the layers put straight before a norm. A pair
        that exists only under an ``if`` (``self._conditions``: id(layer) -> the test it was
        added under; a conv read in one branch of an ``if``/``else``; issue 29 class 7) counts
        where the test is true in some call of the function around it."""
        for first, second in zip(layers, layers[1:]):
            if first is None or second is None:
                continue
            conv = self._constructed_conv(first)
            if conv is not None:
                norm = self._norm_kind(second)
                if norm is not None:
                    test = self._conditions.get(id(second), self._conditions.get(id(first)))
                    if test is None:
                        test = self._branch_tests.get(id(first))
                    if test is None:
                        self._report_conv(conv, norm)
                    elif self._true_in_some_call(test):
                        self._report_conv(conv, norm, fixable=False, condition=test)

    def _true_in_some_call(self, test: cst.BaseExpression) -> bool:
        """Is ``test`` (``flag`` or ``not flag``, a parameter of ``function``) true where
        ``function`` is called with the parameter's default, or where some call of the file
        (the whole-file model's ``literal_flags``) passes it as a literal?"""
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        name = test.expression if negated else test
        if not isinstance(name, cst.Name):
            return False
        scope = self.ctx.semantic.scope_for(name)
        function = scope.node if scope is not None else None
        if not isinstance(function, cst.FunctionDef):
            return False
        params = function.params
        param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                      if p.name.value == name.value), None)
        if param is None:
            return False
        wanted = not negated
        if param.default is not None and literal_value(param.default) is wanted:
            return True
        return (function.name.value, name.value, wanted) in self.ctx.model.literal_flags()

    # -- layers collected in a list: layers.append(conv); ...; nn.Sequential(*layers) -----------
    def _built_list(self, expr: cst.BaseExpression) -> Optional["_BuiltList"]:
        """The list a Name holds, when this function builds it from a literal with ``append``,
        ``extend`` and ``+=`` only, before ``expr`` reads it; None for anything else."""
        if not isinstance(expr, cst.Name):
            return None
        model = self.ctx.semantic
        scope = model.scope_for(expr)
        if scope is None or not scope.is_function:
            return None
        bindings = scope.bindings.get(expr.value, [])
        assigns = [b for b in bindings if b.kind == ASSIGN]
        augments = [b for b in bindings if b.kind == AUGMENT]
        if len(assigns) != 1 or len(assigns) + len(augments) != len(bindings):
            return None
        start = assigns[0]
        if not isinstance(start.value, cst.List) or not isinstance(start.statement, cst.Assign):
            return None
        if len(start.statement.targets) != 1 or start.statement.targets[0].target is not start.node:
            return None
        index = self._index(scope.node)
        read_at = model.reads.get(id(expr))
        if read_at is None:
            return None
        mutations: List[Tuple[int, cst.CSTNode, Layers]] = []
        for read in index.names.get(expr.value, ()):
            if read is start.node or read is expr:
                continue
            if model.scope_for(read) is not scope:
                if any(b is start for b in model.lookup(read) or ()):
                    return None  # read by a nested function or comprehension: unknown
                continue
            parent = index.parent(read)
            found = self._list_mutation(read, parent, index)
            if found is not None:
                mutations.append((model.reads[id(read)].order, found[0], found[1]))
            elif _is_len_argument(parent, index) or _is_star_of_sequence(parent, index, self):
                continue
            else:
                return None  # passed elsewhere, indexed, popped, returned: unknown
        if any(order > read_at.order for order, _, _ in mutations):
            return None  # grown after this read (or in a loop around it)
        for block in read_at.blocks:
            if isinstance(model.block_owner.get(id(block)), (cst.For, cst.While)) and any(
                _inside(statement, block, index) for _, statement, _ in mutations
            ):
                return None
        mutations.sort(key=lambda m: m[0])
        return _BuiltList(start, mutations, index)

    def _list_mutation(self, read: cst.Name, parent, index: "_Index") -> Optional[Tuple[cst.CSTNode, Layers]]:
        """(statement, layers added) for ``read.append(x)``, ``read.extend([...])`` and
        ``read += [...]`` statements; None for any other use of the list."""
        if isinstance(parent, cst.AugAssign) and parent.target is read:
            if isinstance(parent.operator, cst.AddAssign) and isinstance(parent.value, (cst.List, cst.Tuple)):
                return parent, _elements(parent.value)
            return None
        if not (isinstance(parent, cst.Attribute) and parent.value is read):
            return None
        call = index.parent(parent)
        statement = index.parent(call)
        if not (isinstance(call, cst.Call) and call.func is parent and isinstance(statement, cst.Expr)):
            return None
        args = call.args
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            return None
        if parent.attr.value == "append":
            return statement, [args[0].value]
        if parent.attr.value == "extend":
            value = args[0].value
            return statement, _elements(value) if isinstance(value, (cst.List, cst.Tuple)) else [None]
        return None

    # -- classes ------------------------------------------------------------------------------
    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        if id(node) not in self._classes_with_convs:
            return  # the cheap check first: no conv with a bias is built in this class
        methods = [s for s in node.body.body if isinstance(s, cst.FunctionDef)]
        init = next((m for m in methods if m.name.value == "__init__"), None)
        owner = _self_name(init) if init is not None else None
        if owner is None:
            return
        is_sequential = any(self._resolve(base.value) == _SEQUENTIAL for base in node.bases)
        if is_sequential and not any(m.name.value == "forward" for m in methods):
            self._check_layers(self._registered_layers(init, owner))
            return
        _ClassCheck(self, node, methods, init).run()

    def _registered_layers(self, init: cst.FunctionDef, owner: str) -> Layers:
        """The modules an ``nn.Sequential`` subclass registers in ``__init__``, in order:
        ``super().__init__(*layers)``, ``self.add_module(name, m)``, ``self.name = m``."""
        layers: Layers = []
        for statement in init.body.body:
            smalls = statement.body if isinstance(statement, cst.SimpleStatementLine) else None
            if smalls is None:
                if _registers(statement, owner):
                    layers.append(None)  # under a condition or in a loop
                continue
            for small in smalls:
                value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
                if isinstance(small, cst.Expr) and isinstance(value, cst.Call):
                    if _is_super_init(value):
                        layers += self._layers_of_args(value.args)
                        continue
                    if _is_self_method(value, owner, "add_module"):
                        module = get_arg(value, "module", 1)
                        layers.append(module.value if module is not None and not module.star else None)
                        continue
                if isinstance(small, cst.Assign) and any(
                    _self_attribute(t.target, owner) is not None for t in small.targets
                ):
                    if isinstance(value, cst.Call):
                        layers.append(value)
                    elif literal_value(value) is UNKNOWN:
                        layers.append(None)  # may be a module
                    continue
                if _registers(small, owner):
                    layers.append(None)
        return layers

    # -- shared -------------------------------------------------------------------------------
    def _resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """What a class or function name stands for (the imports seen from where the walk is)."""
        return self.ctx.semantic.resolve_at(node, self.ctx.ancestors)

    def _index(self, root: cst.CSTNode) -> "_Index":
        index = self._indexes.get(id(root))
        if index is None:
            index = self._indexes[id(root)] = _Index(root)
        return index

    def _uses(self, target: cst.Name) -> Optional[List[cst.Name]]:
        """The reads of the value a Name target binds (the bindings that reach each read)."""
        model = self.ctx.semantic
        scope = model.scope_for(target)
        if scope is None:
            return None
        binding = next((b for b in scope.bindings.get(target.value, ()) if b.node is target), None)
        if binding is None:
            return None
        stores = {id(b.node) for b in scope.bindings.get(target.value, ()) if b.kind != AUGMENT}
        index = self._index(scope.node)
        return [
            n for n in index.names.get(target.value, ())
            if id(n) not in stores and any(b is binding for b in (model.lookup(n) or ()))
        ]

    def _constructed(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        """The constructor call of the module ``expr`` stands for: the call itself, or a Name
        bound once to a call and read nowhere else (a module object shared with other code may
        be applied without the norm)."""
        if isinstance(expr, cst.Call):
            return expr
        if not isinstance(expr, cst.Name):
            return None
        bindings = self.ctx.semantic.lookup(expr)
        if not bindings or len(bindings) != 1 or bindings[0].kind != ASSIGN:
            return None
        value = bindings[0].value
        target = bindings[0].node
        if not isinstance(value, cst.Call) or not isinstance(target, cst.Name):
            return None
        uses = self._uses(target)
        if uses is not None and len(uses) == 2 and expr in uses:
            test = self._exclusive_branches(uses[0], uses[1], expr)
            if test is not None:
                self._branch_tests[id(expr)] = test
                return value
        return value if uses is not None and len(uses) == 1 and uses[0] is expr else None

    def _exclusive_branches(self, a: cst.Name, b: cst.Name, expr: cst.Name) -> Optional[cst.BaseExpression]:
        """The test of the ``if`` whose body holds ``expr`` and whose ``else`` holds the other of
        the reads ``a``/``b``; None otherwise."""
        model = self.ctx.semantic
        scope = model.scope_for(expr)
        if scope is None:
            return None
        index = self._index(scope.node)
        other = b if a is expr else a
        node: Optional[cst.CSTNode] = expr
        while node is not None and node is not scope.node:
            parent = index.parent(node)
            if isinstance(parent, cst.If) and node is parent.body:
                orelse = parent.orelse
                if isinstance(orelse, cst.Else) and _inside(other, orelse, index):
                    return parent.test
                return None
            node = parent
        return None

    def _constructed_conv(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        call = self._constructed(expr)
        return call if call is not None and self._is_conv_with_bias(call) else None

    def _is_conv_with_bias(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call):
            return False
        name = self._resolve(node.func)
        if name not in CONV_CLASSES:
            return False
        keyword = next((a for a in node.args if a.keyword is not None and a.keyword.value == "bias"), None)
        if keyword is not None:
            return literal_value(keyword.value) is True
        if any(a.star for a in node.args):
            return False  # **kwargs / *args may set the bias: unknown
        positional = get_arg(node, "bias", CONV_BIAS_POSITIONS[name])
        return positional is None or literal_value(positional.value) is True

    def _norm_kind(self, expr: cst.BaseExpression) -> Optional[str]:
        """"" for a mean-subtracting norm built directly, the parameter's name for one built by a
        parameter that defaults to such a class (``norm_layer=nn.BatchNorm2d``, or ``None`` then
        ``if norm_layer is None: norm_layer = nn.BatchNorm2d``); None otherwise."""
        if isinstance(expr, cst.Name):
            values = self.ctx.semantic.values_of(expr)
            if not values or len(values) != 1:
                return None
            expr = values[0]
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if self._resolve(func) in MEAN_SUBTRACTING_NORMS:
            return ""
        if not isinstance(func, cst.Name):
            return None
        model = self.ctx.semantic
        bindings = model.lookup(func)
        if not bindings:
            return None
        defaults_to_norm = False
        for b in bindings:
            if b.kind == PARAM and isinstance(b.statement, cst.Param) and b.statement.default is not None:
                default = b.statement.default
                if model.resolve(default) in MEAN_SUBTRACTING_NORMS:
                    defaults_to_norm = True
                    continue
                if literal_value(default) is None and _none_replaced_by_norm(func.value, bindings, model):
                    continue
            elif b.kind == ASSIGN and b.value is not None and model.resolve(b.value) in MEAN_SUBTRACTING_NORMS:
                continue
            return None
        return func.value if defaults_to_norm or any(b.kind == PARAM for b in bindings) else ""

    def _report_conv(self, conv: cst.Call, norm_param: str = "", fixable: bool = True,
                     condition: Optional[cst.BaseExpression] = None) -> None:
        ancestors = self._conv_ancestors.get(id(conv))
        if ancestors is None or id(conv) in self._reported:
            return
        self._reported.add(id(conv))
        fix = None
        if fixable and not norm_param:
            position = CONV_BIAS_POSITIONS[self._resolve(conv.func)]
            edits = _bias_false_edits(conv, "".join(block_indents(self.ctx.module, ancestors)), position)
            fix = FixSpec(UNSAFE, "Pass `bias=False` to the convolution", edits)
        message = self.default_norm_message.format(param=norm_param) if norm_param else None
        if condition is not None:
            test = cst.Module(body=[]).code_for_node(condition)
            negated = isinstance(condition, cst.UnaryOperation) and isinstance(condition.operator, cst.Not)
            flag = cst.Module(body=[]).code_for_node(condition.expression) if negated else test
            message = self.conditional_message.format(test=test, bias=flag if negated else f"not {flag}")
        current = self.ctx.ancestors
        saved = current[:]
        current[:] = ancestors  # report from where the conv is, for test scopes and indentation
        try:
            self.report(conv, message, fix=fix)
        finally:
            current[:] = saved


class _BuiltList:
    """A list literal grown by ``append``/``extend``/``+=`` statements (sorted by order)."""

    def __init__(self, start, mutations, index: "_Index") -> None:
        self.start = start
        self.mutations = mutations
        self.index = index

    def layers(self, conditions: Optional[Dict[int, "cst.BaseExpression"]] = None) -> Layers:
        """The elements with None wherever two may not be next to each other: between runs of
        mutations that are not consecutive statements of one block (a loop's back edge, a
        branch, a ``continue`` in between), and at the end. With ``conditions``, a mutation alone
        in an ``if`` without ``else`` right after the previous one (``if bn:
        layers.append(nn.BatchNorm2d(c))``) follows it; its elements map to the ``if``'s test."""
        layers: Layers = _elements(self.start.value)
        previous: cst.CSTNode = self.start.statement
        for _, statement, added in self.mutations:
            guard = _lone_guard(statement, self.index) if conditions is not None else None
            if guard is not None and conditions is not None and _follows(previous, guard, self.index):
                for element in added:
                    if element is not None:
                        conditions[id(element)] = guard.test
                layers += added
                previous = guard
                continue
            if not _follows(previous, statement, self.index):
                layers.append(None)
            layers += added
            previous = statement
        layers.append(None)
        return layers

    def elements(self) -> Optional[List[cst.BaseExpression]]:
        """Every element, in no particular order; None when one is unknown (``*more``)."""
        everything = _elements(self.start.value) + [e for _, _, added in self.mutations for e in added]
        return None if any(e is None for e in everything) else everything


class _ClassCheck:
    """``self.conv``/``self.bn`` attributes and paired ModuleLists of one class."""

    def __init__(self, rule: ConvBiasBeforeBatchNorm, node: cst.ClassDef, methods, init) -> None:
        self.rule = rule
        self.node = node
        self.methods = methods
        self.init = init
        self.model = rule.ctx.semantic

    def run(self) -> None:
        modules = self._modules()
        if modules is None:
            return
        self.reads = self._self_reads()
        convs = {a: c for a, c in modules.items() if c is not None and self.rule._is_conv_with_bias(c)}
        norms = {a: k for a, c in modules.items() if c is not None and (k := self.rule._norm_kind(c)) is not None}
        lists = {a: e for a in modules if (e := self._container_elements(a, modules[a])) is not None}
        conv_lists = {a: [c for e in elems if (c := self.rule._constructed_conv(e)) is not None]
                      for a, elems in lists.items()}
        conv_lists = {a: cs for a, cs in conv_lists.items() if cs}
        norm_lists = {a for a, elems in lists.items()
                      if elems and all(self.rule._norm_kind(e) is not None for e in elems)}
        if not ((convs and norms) or (conv_lists and norm_lists)):
            return
        self.norms, self.norm_lists = norms, norm_lists
        reads = self.reads
        for attr, conv in convs.items():
            verdict = self._attribute_feeds_norm(reads.get(attr, ()))
            if verdict is not None:
                self.rule._report_conv(conv, verdict[0], fixable=not verdict[1])
        for attr, elements in conv_lists.items():
            verdict = self._list_feeds_norm(attr, reads.get(attr, ()))
            if verdict is not None:
                for conv in elements:
                    self.rule._report_conv(conv, verdict[0], fixable=not verdict[1])

    # -- what each attribute holds --------------------------------------------------------------
    def _modules(self) -> Optional[Dict[str, Optional[cst.Call]]]:
        """attr -> the module constructor call assigned once, unconditionally, at the top of
        ``__init__`` (``self.conv = nn.Conv2d(...)`` or ``self.add_module("conv", ...)``), None
        for attributes bound otherwise; None overall when names are registered dynamically."""
        scope = self.model.scope_for(self.node)
        if scope is None:
            return None
        top = {id(s) for s in body_simple_statements(self.init)}
        owner = _self_name(self.init)
        bound: Dict[str, List[Optional[cst.BaseExpression]]] = {}
        for attr, bindings in scope.attributes.items():
            for b in bindings:
                single = (
                    b.kind == ASSIGN and b.value is not None and id(b.statement) in top
                    and (not isinstance(b.statement, cst.Assign) or len(b.statement.targets) == 1)
                )
                bound.setdefault(attr, []).append(b.value if single else None)
        for method in self.methods:
            method_owner = _self_name(method)
            if method_owner is None:
                continue
            for call in self.rule._index(method).calls:
                if _is_self_method(call, method_owner, "add_module") or _is_self_setattr(call, method_owner):
                    name_arg = call.args[0] if call.args else None
                    name = literal_value(name_arg.value) if name_arg is not None and not name_arg.star else None
                    if not isinstance(name, str):
                        return None  # a name we cannot read may be any attribute
                    value_arg = call.args[2] if len(call.args) == 3 else get_arg(call, "module", 1)
                    parent = self.rule._index(method).parent(call)
                    single = (
                        method is self.init and method_owner == owner and isinstance(parent, cst.Expr)
                        and id(parent) in top and value_arg is not None and not value_arg.star
                    )
                    bound.setdefault(name, []).append(value_arg.value if single else None)
        modules: Dict[str, Optional[cst.Call]] = {}
        for attr, values in bound.items():
            value = values[0] if len(values) == 1 else None
            modules[attr] = self.rule._constructed(value) if value is not None else None
        return modules

    def _container_elements(self, attr: str, call: Optional[cst.Call]) -> Optional[List[cst.BaseExpression]]:
        """The modules a ``nn.ModuleList``/``nn.Sequential`` attribute holds: its arguments
        (a literal, a comprehension's element, a list built in ``__init__``) and what
        ``self.<attr>.append/extend`` add; None when any is unknown."""
        kind = self.rule._resolve(call.func) if call is not None else None
        if kind not in _CONTAINERS:
            return None
        elements: List[cst.BaseExpression] = []
        for arg in call.args:
            value = arg.value
            if arg.keyword is not None or arg.star == "**":
                return None
            if arg.star == "*" or (kind != _SEQUENTIAL and isinstance(value, cst.Name)):
                built = self.rule._built_list(value)
                found = built.elements() if built is not None else None
                if found is None:
                    return None
                elements += found
            elif kind == _SEQUENTIAL:
                elements.append(value)
            elif isinstance(value, (cst.List, cst.Tuple)):
                found = _elements(value)
                if any(e is None for e in found):
                    return None
                elements += found
            elif isinstance(value, cst.ListComp):
                elements.append(value.elt)
            else:
                return None
        for read, method in self.reads.get(attr, ()):
            index = self.rule._index(method)
            parent = index.parent(read)
            if not (isinstance(parent, cst.Attribute) and parent.value is read
                    and parent.attr.value in ("append", "extend")):
                continue
            call_of = index.parent(parent)
            if method is not self.init or not isinstance(call_of, cst.Call) or len(call_of.args) != 1:
                return None
            added = call_of.args[0].value
            if parent.attr.value == "append" and not call_of.args[0].star:
                elements.append(added)
            elif isinstance(added, (cst.List, cst.Tuple)) and all(e is not None for e in _elements(added)):
                elements += _elements(added)
            else:
                return None
        return elements

    # -- how each attribute is used -------------------------------------------------------------
    def _self_reads(self) -> Dict[str, List[Tuple[cst.Attribute, cst.FunctionDef]]]:
        reads: Dict[str, List[Tuple[cst.Attribute, cst.FunctionDef]]] = {}
        for method in self.methods:
            owner = _self_name(method)
            if owner is None:
                continue
            for attribute in self.rule._index(method).self_attributes(owner):
                reads.setdefault(attribute.attr.value, []).append((attribute, method))
        return reads

    def _attribute_feeds_norm(self, reads) -> Optional[Tuple[str, bool]]:
        """(norm parameter or "", touches the bias) when every read of the conv attribute is a
        call whose result goes only into a norm attribute (or reads a parameter); else None."""
        applied, touches_bias, kind = False, False, None
        for read, method in reads:
            index = self.rule._index(method)
            parent = index.parent(read)
            if _is_store(read, parent):
                continue
            if isinstance(parent, cst.Call) and parent.func is read:
                owner = read.value.value
                norm = self._feeds(parent, index, lambda f, _i: self._norm_attribute(f, owner))
                if norm is None:
                    return None
                kind = norm if not kind else kind
                applied = True
            elif isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value not in _APPLY_METHODS:
                touches_bias |= parent.attr.value == "bias"
            else:
                return None  # handed to something else (Sequential, checkpoint, a fusing helper)
        return (kind or "", touches_bias) if applied else None

    def _norm_attribute(self, func: cst.BaseExpression, owner: str) -> Optional[str]:
        if _self_attribute(func, owner) in self.norms:
            return self.norms[func.attr.value]
        return None

    def _list_feeds_norm(self, attr: str, reads) -> Optional[Tuple[str, bool]]:
        applied, touches_bias = False, False
        for read, method in reads:
            index = self.rule._index(method)
            parent = index.parent(read)
            if _is_store(read, parent) or _is_len_argument(parent, index):
                continue
            if isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value in ("append", "extend"):
                if method is not self.init:
                    return None
                continue
            if isinstance(parent, cst.Subscript) and parent.value is read:
                outer = index.parent(parent)
                if isinstance(outer, cst.Attribute) and outer.value is parent and outer.attr.value not in _APPLY_METHODS:
                    touches_bias |= outer.attr.value == "bias"
                    continue
                key = _subscript_key(parent, self.model)
                if key is None or not (isinstance(outer, cst.Call) and outer.func is parent):
                    return None
                if self._feeds(outer, index, lambda f, _i: self._paired_subscript(f, key)) is None:
                    return None
                applied = True
                continue
            loop_vars = self._zip_loop_variables(read, parent, index)
            if loop_vars is None:
                return None
            conv_var, norm_vars = loop_vars
            uses = self.rule._uses(conv_var)
            if uses is None:
                return None
            for use in uses:
                call = index.parent(use)
                if not (isinstance(call, cst.Call) and call.func is use):
                    return None
                if self._feeds(call, index, lambda f, _i: "" if _bound_by(f, norm_vars, self.model) else None) is None:
                    return None
                applied = True
        return ("", touches_bias) if applied else None

    def _paired_subscript(self, func: cst.BaseExpression, key) -> Optional[str]:
        if not (isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute)
                and func.value.attr.value in self.norm_lists):
            return None
        return "" if _subscript_key(func, self.model) == key else None

    def _zip_loop_variables(self, read, parent, index) -> Optional[Tuple[cst.Name, List[cst.Name]]]:
        """For ``for conv, bn in zip(self.convs, self.bns)`` (also under ``enumerate``) and
        ``read`` being ``self.convs``: (the conv's loop variable, the loop variables of the
        norm lists zipped with it)."""
        if not isinstance(parent, cst.Arg) or parent.star or parent.keyword is not None:
            return None
        zipped = index.parent(parent)
        if not (isinstance(zipped, cst.Call) and dotted_name(zipped.func) == "zip"
                and self.model.resolve(zipped.func) is None):
            return None
        holder = index.parent(zipped)
        loop = holder
        target_of_zip: Optional[cst.BaseExpression] = None
        if isinstance(holder, (cst.For, cst.CompFor)) and holder.iter is zipped:
            target_of_zip = holder.target
        elif isinstance(holder, cst.Arg):
            wrapper = index.parent(holder)
            loop = index.parent(wrapper)
            if (isinstance(wrapper, cst.Call) and dotted_name(wrapper.func) == "enumerate"
                    and wrapper.args[0] is holder and isinstance(loop, (cst.For, cst.CompFor)) and loop.iter is wrapper
                    and isinstance(loop.target, cst.Tuple) and len(loop.target.elements) == 2):
                target_of_zip = loop.target.elements[1].value
        if not isinstance(target_of_zip, (cst.Tuple, cst.List)) or len(target_of_zip.elements) != len(zipped.args):
            return None
        names = [e.value for e in target_of_zip.elements]
        position = next(i for i, a in enumerate(zipped.args) if a is parent)
        conv_var = names[position]
        norm_vars = [
            names[i] for i, a in enumerate(zipped.args)
            if isinstance(names[i], cst.Name) and isinstance(a.value, cst.Attribute)
            and isinstance(a.value.value, cst.Name) and a.value.attr.value in self.norm_lists
        ]
        if not isinstance(conv_var, cst.Name) or not norm_vars:
            return None
        return conv_var, norm_vars

    def _feeds(self, call: cst.Call, index: "_Index", is_norm) -> Optional[str]:
        """Does the result of ``call`` go into a norm (``is_norm(func) -> kind or None``) and
        nowhere else? ``bn(conv(x))``, or ``y = conv(x)`` with ``y`` read only by ``bn(y)``."""
        parent = index.parent(call)
        if isinstance(parent, cst.Arg):
            return _norm_applied(parent, index, is_norm)
        if (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            uses = self.rule._uses(parent.targets[0].target)
            if uses is None or len(uses) != 1:
                return None
            arg = index.parent(uses[0])
            return _norm_applied(arg, index, is_norm) if isinstance(arg, cst.Arg) else None
        return None


def _norm_applied(arg: cst.Arg, index: "_Index", is_norm) -> Optional[str]:
    outer = index.parent(arg)
    if (isinstance(outer, cst.Call) and len(outer.args) == 1 and outer.args[0] is arg
            and arg.keyword is None and not arg.star):
        return is_norm(outer.func, index)
    return None


# -- a function's (or class's) tree, indexed once ---------------------------------------------------
class _Index:
    """Parents, Name reads by name and calls under one scope node (nested classes included)."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.parents: Dict[int, cst.CSTNode] = {}
        self.names: Dict[str, List[cst.Name]] = {}
        self.calls: List[cst.Call] = []
        self._attributes: List[cst.Attribute] = []
        stack = [root]
        while stack:  # depth first, in source order
            node = stack.pop()
            if isinstance(node, cst.Name):
                parent = self.parents.get(id(node))
                if not (isinstance(parent, cst.Attribute) and parent.attr is node) and not (
                        isinstance(parent, cst.Arg) and parent.keyword is node):
                    self.names.setdefault(node.value, []).append(node)  # a variable, not `.attr`/`kw=`
                continue
            if isinstance(node, cst.Call):
                self.calls.append(node)
            elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
                self._attributes.append(node)
            children = list(iter_children(node))
            for child in children:
                self.parents[id(child)] = node
            stack.extend(reversed(children))

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(id(node))

    def self_attributes(self, owner: str) -> List[cst.Attribute]:
        return [a for a in self._attributes if a.value.value == owner]


# -- small helpers --------------------------------------------------------------------------------
def _elements(node: cst.BaseExpression) -> Layers:
    return [e.value if isinstance(e, cst.Element) else None for e in node.elements]


def _self_name(method: Optional[cst.FunctionDef]) -> Optional[str]:
    if method is None:
        return None
    params = method.params.posonly_params or method.params.params
    if not params or any(dotted_name(d.decorator) in ("staticmethod", "classmethod") for d in method.decorators):
        return None
    return params[0].name.value


def _self_attribute(node: cst.CSTNode, owner: str) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == owner:
        return node.attr.value
    return None


def _is_self_method(call: cst.Call, owner: str, method: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == method and (
        isinstance(call.func.value, cst.Name) and call.func.value.value == owner)


def _is_self_setattr(call: cst.Call, owner: str) -> bool:
    return (isinstance(call.func, cst.Name) and call.func.value == "setattr" and len(call.args) >= 1
            and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == owner
            and len(call.args) == 3)


def _is_super_init(call: cst.Call) -> bool:
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
            and dotted_name(func.value.func) == "super")


def _registers(node: cst.CSTNode, owner: str) -> bool:
    """Does this statement (anywhere inside) register a module on ``owner``?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and (_is_self_method(n, owner, "add_module") or _is_super_init(n)
                                        or _is_self_setattr(n, owner)):
            return True
        if isinstance(n, (cst.AssignTarget, cst.AnnAssign)) and _self_attribute(n.target, owner) is not None:
            return True
        stack.extend(iter_children(n))
    return False


def _is_store(read: cst.Attribute, parent) -> bool:
    return isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and parent.target is read


def _is_len_argument(parent, index: _Index) -> bool:
    if not isinstance(parent, cst.Arg) or parent.star:
        return False
    call = index.parent(parent)
    return isinstance(call, cst.Call) and dotted_name(call.func) == "len" and len(call.args) == 1


def _is_star_of_sequence(parent, index: _Index, rule: ConvBiasBeforeBatchNorm) -> bool:
    """``nn.Sequential(*layers)`` or ``super().__init__(*layers)``: the list is read in order."""
    if not isinstance(parent, cst.Arg) or parent.star != "*":
        return False
    call = index.parent(parent)
    return isinstance(call, cst.Call) and (_is_super_init(call) or rule._resolve(call.func) == _SEQUENTIAL)


def _inside(node: cst.CSTNode, block: cst.CSTNode, index: _Index) -> bool:
    while node is not None:
        if node is block:
            return True
        node = index.parent(node)
    return False


@functools.cache
def _escape_types() -> Tuple[type, ...]:  # a function: naming libcst's classes at import loads it
    return (cst.Continue, cst.Break, cst.Return, cst.Raise)


def _next_in_block(previous: cst.CSTNode, statement: cst.CSTNode, index: _Index) -> bool:
    """Does ``statement`` run right after ``previous`` (small statements), with only simple
    statements that cannot leave the block between them?"""
    line_a, line_b = index.parent(previous), index.parent(statement)
    block = index.parent(line_a)
    if block is None or block is not index.parent(line_b):
        return False
    body = list(getattr(block, "body", ()))
    try:
        a, b = body.index(line_a), body.index(line_b)
    except ValueError:
        return False
    if a > b:
        return False
    between = body[a + 1:b]
    if a == b:
        smalls = list(line_a.body)
        between_smalls = smalls[smalls.index(previous) + 1:smalls.index(statement)]
        return not any(isinstance(s, _escape_types()) for s in between_smalls)
    tails = list(line_a.body)[list(line_a.body).index(previous) + 1:] + list(line_b.body)[:list(line_b.body).index(statement)]
    return not any(isinstance(s, _escape_types()) for s in tails) and all(
        isinstance(s, cst.SimpleStatementLine) and not any(isinstance(x, _escape_types()) for x in s.body) for s in between)


def _lone_guard(statement: cst.CSTNode, index: _Index) -> Optional[cst.If]:
    """The ``if`` (without ``else``) whose body is only ``statement``, or None."""
    line = index.parent(statement)
    block = index.parent(line) if line is not None else None
    guard = index.parent(block) if block is not None else None
    if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
            and isinstance(block, cst.IndentedBlock) and len(block.body) == 1
            and isinstance(guard, cst.If) and guard.body is block and guard.orelse is None):
        return None
    return guard


def _follows(previous: cst.CSTNode, statement: cst.CSTNode, index: _Index) -> bool:
    """``_next_in_block``, where ``previous`` may also be an ``if`` statement (the guard of a
    conditional mutation): ``statement`` runs right after it, in the same block."""
    if not isinstance(previous, cst.If):
        if isinstance(statement, cst.If):
            line = index.parent(previous)
            block = index.parent(line) if line is not None else None
            body = list(getattr(block, "body", ()))
            if line not in body or statement not in body or body.index(statement) != body.index(line) + 1:
                return False
            tail = list(line.body)[list(line.body).index(previous) + 1:]
            return not any(isinstance(s, _escape_types()) for s in tail)
        return _next_in_block(previous, statement, index)
    line = index.parent(statement)
    block = index.parent(previous)
    if line is None or index.parent(line) is not block:
        return False
    body = list(getattr(block, "body", ()))
    if body.index(line) != body.index(previous) + 1:
        return False
    head = list(line.body)[:list(line.body).index(statement)]
    return not any(isinstance(s, _escape_types()) for s in head)


def _subscript_key(subscript: cst.Subscript, model) -> Optional[tuple]:
    """What indexes ``self.convs[i]``: a literal int, or a name with the bindings that reach it."""
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    value = subscript.slice[0].slice.value
    literal = literal_value(value)
    if isinstance(literal, int):
        return ("int", literal)
    if isinstance(value, cst.Name):
        bindings = model.lookup(value)
        return ("name", value.value, tuple(id(b) for b in bindings)) if bindings else None
    return None


def _bound_by(func: cst.BaseExpression, loop_vars: List[cst.Name], model) -> bool:
    if not isinstance(func, cst.Name):
        return False
    bindings = model.lookup(func)
    return bool(bindings) and len(bindings) == 1 and bindings[0].kind == LOOP and any(
        bindings[0].node is v for v in loop_vars)


def _none_replaced_by_norm(name: str, bindings, model) -> bool:
    """``if norm_layer is None: norm_layer = nn.BatchNorm2d`` among the bindings that reach."""
    for b in bindings:
        if b.kind != ASSIGN or not b.blocks or model.resolve(b.value) not in MEAN_SUBTRACTING_NORMS:
            continue
        owner = model.block_owner.get(id(b.blocks[-1]))
        test = owner.test if isinstance(owner, cst.If) else None
        if (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == name
                and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is)
                and literal_value(test.comparisons[0].comparator) is None):
            return True
    return False


# -- the fix ------------------------------------------------------------------------------------
def _bias_false_edits(conv: cst.Call, block_indent: str, position: int) -> Tuple[NodeEdit, ...]:
    """Edits giving ``conv`` ``bias=False``: the bias value replaced, or a keyword appended.

    Small text edits rather than a re-rendered call, so the call's layout and comments stay;
    ``block_indent`` is the indentation of the statement holding the call.
    """
    for arg in conv.args:
        if (arg.keyword is not None and arg.keyword.value == "bias") or (
            arg.keyword is None and get_arg(conv, "bias", position) is arg
        ):
            return (NodeEdit(arg.value, "False"),)
    last = conv.args[-1]
    comma = last.comma
    if (
        isinstance(comma, cst.Comma)
        and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        and comma.whitespace_after.first_line.comment is None
    ):
        # one argument per line with a trailing comma: the new keyword gets its own line
        indent = _argument_indent(conv, block_indent)
        if indent is not None:
            return (NodeEdit(comma, f",\n{indent}bias=False,"),)
    return (NodeEdit(last.value, ", bias=False", INSERT_AFTER),)


def _argument_indent(call: cst.Call, block_indent: str) -> Optional[str]:
    """The absolute indentation of the arguments of a call spread over several lines."""
    spaces = [arg.comma.whitespace_after for arg in call.args[:-1] if isinstance(arg.comma, cst.Comma)]
    for whitespace in reversed(spaces + [call.whitespace_before_args]):
        if isinstance(whitespace, cst.ParenthesizedWhitespace):
            return (block_indent if whitespace.indent else "") + whitespace.last_line.value
    return None


RULES = [ConvBiasBeforeBatchNorm]
