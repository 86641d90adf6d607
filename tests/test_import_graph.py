"""The package's import graph has no cycle, and only the application layer imports the CLI.

The graph is read with ``ast`` from every module of ``torchlint/``: imports at module level and
inside functions (a function-level import closes a cycle as surely as a top-level one, it only
hides it), imports under ``if TYPE_CHECKING:`` (they never run, but an annotation that names
a module above its own floor ties the two as surely: the context names the configuration and the
rule through protocols of its own instead), and modules named by a whole string
(``RULE_MODULES``, the reporters' ``FORMATS``: imported with ``importlib``).
"""

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

import torchlint

PACKAGE = Path(torchlint.__file__).resolve().parent
APPLICATION = ("torchlint.cli", "torchlint.__main__", "torchlint.commands")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: Dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _known(name: str) -> str:
    """The module of the package that importing ``name`` loads, or ''."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module: str) -> Set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: Set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(_known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from torchlint import fixer` imports a module
                found.add(_known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _known(base))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            found.add(node.value)  # importlib.import_module(name) over a table of names
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard("")
    found.discard(module)
    return found


GRAPH: Dict[str, Set[str]] = {m: imports_of(m) for m in MODULES}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _in_application(module: str) -> bool:
    return any(module == a or module.startswith(a + ".") for a in APPLICATION)


def test_the_graph_is_read():
    # A reader that finds nothing would pass the tests below: check edges known to exist.
    assert "torchlint.engine" in GRAPH["torchlint.runner"]  # function-level
    assert "torchlint.diagnostics" in GRAPH["torchlint.runner"]  # module-level
    assert "torchlint.rules.training" in GRAPH["torchlint.rules"]  # RULE_MODULES
    assert "torchlint.reporters.sarif" in GRAPH["torchlint.reporters"]  # FORMATS
    assert "torchlint.astindex" in GRAPH["torchlint.context"]  # only under TYPE_CHECKING
    assert "torchlint.commands.check" in GRAPH["torchlint.cli"]


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(GRAPH)
    detail = [
        f"{' <-> '.join(c)}: " + "; ".join(f"{m} -> {t}" for m in c for t in sorted(GRAPH[m] & set(c)))
        for c in found
    ]
    assert found == [], "\n".join(detail)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not _in_application(m)))
def test_below_the_application_layer_nothing_imports_it(module):
    assert not {t for t in GRAPH[module] if _in_application(t)}


def test_the_usage_module_is_a_leaf():
    assert GRAPH["torchlint.commands.usage"] <= {"torchlint.commands"}, GRAPH["torchlint.commands.usage"]
