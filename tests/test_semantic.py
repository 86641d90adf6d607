"""The semantic model: scopes, order-aware bindings, values on the host, loaders."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from torchlint.semantic import ASSIGN, LOOP, PARAM, SemanticModel
from torchlint.tree import walk


def model(code: str):
    module = cst.parse_module(textwrap.dedent(code))
    return module, SemanticModel(module)


def calls(module):
    return {cst.Module([]).code_for_node(n.func): n for n in walk(module) if isinstance(n, cst.Call)}


def names(module, value):
    return [n for n in walk(module) if isinstance(n, cst.Name) and n.value == value]


def test_function_local_imports_are_scoped():
    module, sm = model("""
        def f(m):
            import torch.nn as nn
            return nn.DataParallel(m)
        def g(m):
            return nn.DataParallel(m)
    """)
    found = [sm.resolve(n.func) for n in walk(module) if isinstance(n, cst.Call)]
    assert found == ["torch.nn.DataParallel", None]


def test_a_later_local_definition_shadows_the_import_in_functions():
    module, sm = model("""
        from torch.utils.data import DataLoader
        top = DataLoader(ds)
        def build(ds):
            return DataLoader(ds)
        def DataLoader(ds):
            return ds
    """)
    first, second = [n for n in walk(module) if isinstance(n, cst.Call)]
    assert sm.resolve(first.func) == "torch.utils.data.DataLoader"  # module code runs in order
    assert sm.resolve(second.func) is None  # the function runs after `def DataLoader`


def test_aliases_parameters_and_import_fallbacks():
    module, sm = model("""
        import torch.nn as nn
        try:
            import apex
        except ImportError:
            apex = None
        DP = nn.DataParallel
        def f(m, torch):
            DP(m)
            apex.amp.initialize(m)
            torch.zeros(3)
    """)
    c = calls(module)
    assert sm.resolve(c["DP"].func) == "torch.nn.DataParallel"
    assert sm.resolve(c["apex.amp.initialize"].func) == "apex.amp.initialize"
    assert sm.resolve(c["torch.zeros"].func) is None  # a parameter named torch


def test_reaching_definitions_are_order_aware_in_loops():
    module, sm = model("""
        def f(loader, x):
            for points, label in loader:
                a = points.data.numpy()
                points = points.cuda()
                b = points.sum()
            x = 1
            y = x
    """)
    reads = names(module, "points")
    # the read before the move sees the loop target only; the back edge is cut by the rebinding
    before = sm.lookup(reads[1])
    assert [b.kind for b in before] == [LOOP]
    after = sm.lookup(reads[4])
    assert [b.kind for b in after] == [ASSIGN]
    x_read = names(module, "x")[-1]
    assert [b.kind for b in sm.lookup(x_read)] == [ASSIGN]


def test_branches_and_back_edges_give_every_possible_binding():
    module, sm = model("""
        def f(loader, flag):
            state = None
            for batch in loader:
                use(state)
                state = batch.cuda()
            if flag:
                z = 1
            else:
                z = 2
            use(z)
    """)
    state_read = names(module, "state")[1]
    kinds = sorted(b.value is None or cst.Module([]).code_for_node(b.value) for b in sm.lookup(state_read))
    assert kinds == ["None", "batch.cuda()"]
    z_read = names(module, "z")[-1]
    assert len(sm.lookup(z_read)) == 2


def test_self_attributes_across_methods():
    module, sm = model("""
        class T:
            def __init__(self, ds):
                self.loader = DataLoader(ds)
            def run(self):
                for b in self.loader:
                    pass
    """)
    loop = next(n for n in walk(module) if isinstance(n, cst.For))
    bindings = sm.attribute_bindings(loop.iter, "loader")
    assert [cst.Module([]).code_for_node(b.value) for b in bindings] == ["DataLoader(ds)"]


def test_on_host():
    module, sm = model("""
        def f(loader, model):
            for x, y in loader:
                a = x[0]
                v = model(x.cuda()).cpu()
                w = model(x.cuda())
                use(a, v, w, y)
    """)
    is_loader = lambda n: isinstance(n, cst.Name) and n.value == "loader"  # noqa: E731
    use = next(n for n in walk(module) if isinstance(n, cst.Call) and getattr(n.func, "value", None) == "use")
    a, v, w, y = (arg.value for arg in use.args)
    assert sm.on_host(a, is_loader) and sm.on_host(v, is_loader) and sm.on_host(y, is_loader)
    assert not sm.on_host(w, is_loader)


def test_loader_calls_through_names_wrappers_and_factories():
    module, sm = model("""
        from torch.utils.data import DataLoader
        def make(ds):
            return DataLoader(ds)
        def f(ds, accelerator):
            a = DataLoader(ds)
            b = accelerator.prepare(DataLoader(ds))
            for i, (x, y) in enumerate(a):
                pass
            for x in b:
                pass
            for x in make(ds):
                pass
    """)
    loops = [n for n in walk(module) if isinstance(n, cst.For)]

    def factory(call):
        function = sm.module_function(call.func)
        return [c for v in sm.returned_values(function) for c in sm.loader_calls(v)] if function else []

    assert len(sm.loader_calls(loops[0].iter)) == 1
    assert sm.loader_calls(loops[1].iter) == []  # a wrapper we cannot see into
    assert len(sm.loader_calls(loops[2].iter, factory)) == 1


def test_parameters_are_bound():
    module, sm = model("def f(a):\n    return a\n")
    assert [b.kind for b in sm.lookup(names(module, "a")[-1])] == [PARAM]


def _ancestors(module, target):
    """The path from the module down to ``target`` (excluded)."""
    from torchlint.tree import _children

    stack = [(module, [])]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        stack.extend((child, path + [node]) for child in _children(node))
    raise AssertionError("not found")


def test_resolve_at_agrees_with_the_full_model():
    module, sm = model("""
        import torch
        from torch.utils.data import DataLoader
        import torch.nn as nn
        DP = nn.DataParallel
        top = DataLoader(ds)
        def f(m):
            import torch.nn as nn2
            return nn2.DataParallel(m), DP(m), DataLoader(ds)
        def g(m, torch):
            return nn2.DataParallel(m), torch.zeros(3)
        def DataLoader(ds):
            return ds
    """)
    for call in (n for n in walk(module) if isinstance(n, cst.Call)):
        assert sm.resolve_at(call.func, _ancestors(module, call)) == sm.resolve(call.func), cst.Module([]).code_for_node(call)


def test_attribute_names_and_keywords_are_not_reads():
    module, sm = model("""
        def f(x, cuda):
            y = x.cuda
            return g(cuda=1)
    """)
    attr = next(n for n in walk(module) if isinstance(n, cst.Attribute)).attr
    keyword = next(n for n in walk(module) if isinstance(n, cst.Arg) and n.keyword is not None).keyword
    assert sm.lookup(attr) is None and sm.lookup(keyword) is None


def test_small_statements_are_every_simple_statement_of_a_walk():
    """``tree.small_statements`` (dataloader_names' scan) finds what a walk of every node finds,
    in functions, classes, branches, handlers and match cases, never inside an expression."""
    import libcst

    from torchlint.tree import small_statements, walk

    source = textwrap.dedent('''\
        import torch
        x = 1; y = 2
        def f(a):
            if a:
                b = torch.zeros(3)
            elif a > 1:
                pass
            else:
                return [lambda: 0 for _ in range(3)]
            for i in a:
                continue
            else:
                del a
            while a:
                break
            try:
                raise ValueError
            except ValueError:
                c: int = 3
            finally:
                global g
            with open(a) as h: h.read()
            match a:
                case 1:
                    assert a
        class C:
            z = 3
            def m(self):
                nonlocal_ = 1
        ''')
    module = libcst.parse_module(source)
    found = list(small_statements(module))
    expected = [n for n in walk(module) if isinstance(n, libcst.BaseSmallStatement)]
    assert sorted(map(id, found)) == sorted(map(id, expected)) and len(found) == len(expected) == 16
    # the repository's own modules and the fixtures too
    root = Path(__file__).resolve().parent.parent
    for path in [*root.joinpath("fixtures").rglob("*.py"), *root.joinpath("torchlint").rglob("*.py")]:
        module = libcst.parse_module(path.read_text(encoding="utf-8"))
        found = [id(n) for n in small_statements(module)]
        assert sorted(found) == sorted(id(n) for n in walk(module) if isinstance(n, libcst.BaseSmallStatement)), path
