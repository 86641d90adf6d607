"""Stage 5 of the pipeline: a light import-alias table.

libcst's QualifiedNameProvider costs several times the parse itself; rules only need to know
which dotted name an expression like ``nn.DataParallel`` or ``DL`` stands for, and a table of the
file's import bindings answers that in a dictionary look-up.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple, Union

from torchlint import _cst as cst

from torchlint.torch_api import STAR_EXPORTS, canonical_name


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None (calls, subscripts, ...)."""
    parts: List[str] = []
    # exact types: a failed isinstance of a libcst node class (an ABC) costs a Python call
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


class ImportTable:
    """Maps local names bound by imports to the qualified names they refer to."""

    def __init__(self) -> None:
        self.aliases: Dict[str, str] = {}
        self.star_modules: List[str] = []

    @classmethod
    def from_module(cls, module: cst.Module) -> "ImportTable":
        """Collect the module-level imports (also those under top-level if/try blocks)."""
        table = cls()
        table._scan(module.body)
        return table

    def _scan(self, body) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self.add(small)
            elif isinstance(stmt, cst.If):
                self._scan(stmt.body.body)
                if isinstance(stmt.orelse, (cst.Else, cst.If)):
                    self._scan([stmt.orelse] if isinstance(stmt.orelse, cst.If) else stmt.orelse.body.body)
            elif isinstance(stmt, cst.Try):
                self._scan(stmt.body.body)
                for handler in stmt.handlers:
                    self._scan(handler.body.body)

    def add(self, node: Union[cst.Import, cst.ImportFrom]) -> None:
        if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
            module = dotted_name(node.module) if node.module is not None and not node.relative else None
            if module is not None and module not in self.star_modules:
                self.star_modules.append(module)
            return
        for local, qualified, _ in import_bindings(node):
            if not qualified.startswith("."):  # relative imports are the project's own code, never torch
                self.aliases[local] = qualified

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """The canonical qualified name of a Name/Attribute expression, or None if unknown."""
        name = dotted_name(node)
        if name is None:
            return None
        return self.resolve_dotted(name)

    def resolve_dotted(self, name: str) -> Optional[str]:
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            for module in self.star_modules:
                if head in STAR_EXPORTS.get(module, ()):
                    target = f"{module}.{head}"
                    break
            else:
                return None
        return canonical_name(f"{target}.{rest}" if rest else target)

    def local_name_for(self, qualified: str) -> Optional[str]:
        """How this file can spell ``qualified`` (e.g. ``os`` for ``os``), or None if not imported."""
        for local, target in self.aliases.items():
            if target == qualified:
                return local
            if qualified.startswith(target + "."):
                return local + qualified[len(target):]
        return None


def import_bindings(node: Union[cst.Import, cst.ImportFrom]) -> Iterator[Tuple[str, str, cst.CSTNode]]:
    """(local name, qualified name, alias node) for each name an import statement binds;
    ``import a.b`` binds ``a``; a relative import's qualified name starts with ``.``; a star
    import binds nothing we can name."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full, alias
            else:
                top = full.split(".", 1)[0]
                yield top, top, alias
        return
    if isinstance(node.names, cst.ImportStar):
        return
    module = dotted_name(node.module) if node.module is not None else None
    for alias in node.names:
        if not isinstance(alias.name, cst.Name):
            continue
        local = alias.name.value
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            local = alias.asname.name.value
        qualified = f"{module}.{alias.name.value}" if module and not node.relative else f".{alias.name.value}"
        yield local, qualified, alias
