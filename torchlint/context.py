"""What a rule sees of the file being checked: the import table, the ancestors of the node being
visited, the settings, and ``report``. Findings stay as nodes until the pass ends; positions are
computed only for files that have findings (see ``engine``)."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from torchlint import _cst as cst

from torchlint.testcode import in_test_scope
from torchlint.imports import ImportTable
from torchlint.model import FileModel
from torchlint.project import EMPTY_FACTS
from torchlint.semantic import SemanticModel

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex


# The context names neither the configuration nor the rule classes: both sit above it (the rules
# import the context; the configuration expands codes through the rules' registry), so what it
# reads of them is written here as protocols, and no import runs back up.
class Settings(Protocol):
    """What a file's context reads of its settings (``config.Settings`` is one)."""

    @property
    def target_torch_version(self) -> Tuple[int, int]: ...


class Rule(Protocol):
    """What a finding keeps of the rule that reported it (``rules.base.Rule`` is one)."""

    @property
    def code(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def hint(self) -> Optional[str]: ...

    @property
    def skip_in_tests(self) -> bool: ...

REPLACE = "replace"
INSERT_BEFORE = "insert-before"
INSERT_AFTER = "insert-after"
DELETE_LINES = "delete-lines"  # remove the node's whole lines, newline included


@dataclass(frozen=True)
class NodeEdit:
    """An edit expressed against a node; the engine turns it into a positioned ``Edit``."""

    node: cst.CSTNode
    content: Union[str, cst.CSTNode] = ""
    mode: str = REPLACE


@dataclass(frozen=True)
class FixSpec:
    applicability: str
    message: str
    edits: Tuple[NodeEdit, ...]


@dataclass
class PendingDiagnostic:
    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec]
    statement: Optional[cst.CSTNode]
    #: Indentation of the blocks around the finding, for rendering replacement nodes in place.
    indent: Tuple[str, ...] = ()
    #: The finding's own hint (None: the rule's ``hint``).
    hint: Optional[str] = None


def block_indents(
    module: cst.Module, ancestors: Sequence[cst.CSTNode], upto: Optional[cst.CSTNode] = None
) -> Tuple[str, ...]:
    """Indent tokens of the IndentedBlocks among ``ancestors`` (outermost first), stopping at
    ``upto``; a block's ``indent`` of None means the module's default."""
    tokens = []
    for node in ancestors:
        if node is upto:
            break
        if isinstance(node, cst.IndentedBlock):
            tokens.append(node.indent if node.indent is not None else module.default_indent)
    return tuple(tokens)


def render_node(module: cst.Module, node: cst.CSTNode, indent: Sequence[str] = ()) -> str:
    """Source for ``node`` as it prints inside blocks indented by ``indent``: continuation lines
    inside brackets keep the enclosing blocks' indentation, which ``Module.code_for_node``
    (rendering at column 0) drops."""
    from torchlint.positions import render_code  # libcst's codegen, without its private state class

    def generate() -> str:
        return render_code(module, node, tuple(indent))

    try:
        return generate()
    except RecursionError:  # a 500-term sum in a fix's node: again on a thread with room for it
        from torchlint.guards import deep_call

        return deep_call(generate)


class FileContext:
    def __init__(self, path: str, text: str, module: cst.Module, settings: "Settings", project=None,
                 tree: Optional[ast.Module] = None, index: Optional["AstIndex"] = None,
                 model: Optional[FileModel] = None) -> None:
        self.path = path
        self.text = text
        self.module = module
        self.settings = settings
        self.imports = ImportTable.from_module(module)
        #: Ancestors of the node being visited, outermost first (the Module is ancestors[0]).
        self.ancestors: List[cst.CSTNode] = []
        self.pending: List[PendingDiagnostic] = []
        #: Answers of the question helpers (syntax.memo), memoized per file: (helper name, id(node)) -> answer.
        self.analysis_memo: Dict[Tuple[str, int], Any] = {}
        self._semantic: Optional[SemanticModel] = None
        #: CPython's tree of the whole ``text`` when the caller has it (``model`` parses it otherwise)
        self._tree = tree
        self._index = index
        self._model: Optional[FileModel] = model
        #: Facts about this file that come from the rest of the project (see ``project.py``).
        self.project = project if project is not None else EMPTY_FACTS

    def release(self) -> None:
        """Break the references between this context, the rules and the model once the file is
        done (the rules, their findings, the model and ``report`` refer back to the context), so
        that reference counting frees the file's trees at once rather than the cyclic collector."""
        if self._semantic is not None:
            self._semantic.release()
        self.__dict__.clear()

    # -- names ------------------------------------------------------------------------------
    @property
    def semantic(self) -> SemanticModel:
        """Scopes, bindings and data flow of the file (built on the first question)."""
        model = self._semantic
        if model is None:
            model = self._semantic = SemanticModel(self.module, self.imports, lambda: self.ancestors)
        return model

    @property
    def model(self) -> FileModel:
        """The whole-file model (``model.py``): the only window a rule has on code outside the
        tree it walks, which may be a partial parse. Built from CPython's tree of the whole text."""
        model = self._model
        if model is None:
            if self._tree is None:
                model = self._model = FileModel.of_text(self.text)
            else:
                model = self._model = FileModel(self._tree, self.text, self._index)
        if model.project is None:  # its project half (``uses_accelerator``): this file's facts
            model.project = self.project
        return model

    def resolve(self, node: cst.BaseExpression) -> Optional[str]:
        """Canonical qualified name of a Name/Attribute, through the imports visible where it is
        read (function-local imports, local definitions that shadow an import)."""
        return self.semantic.resolve_at(node, self.ancestors)

    def resolve_call(self, node: cst.CSTNode) -> Optional[str]:
        return self.semantic.resolve_at(node.func, self.ancestors) if isinstance(node, cst.Call) else None

    @property
    def torch_version(self) -> Tuple[int, int]:
        return self.settings.target_torch_version

    @property
    def parent(self) -> Optional[cst.CSTNode]:
        return self.ancestors[-1] if self.ancestors else None

    def enclosing(self, types, stop: Sequence[type] = ()) -> Optional[cst.CSTNode]:
        """Nearest ancestor of ``types``; None if a ``stop`` type comes first."""
        for node in reversed(self.ancestors):
            if isinstance(node, types):
                return node
            if stop and isinstance(node, tuple(stop)):
                return None
        return None

    # -- findings ---------------------------------------------------------------------------
    def report(self, rule: "Rule", node: cst.CSTNode, message: str, fix: Optional[FixSpec],
               hint: Optional[str] = None) -> None:
        if rule.skip_in_tests and in_test_scope(self.ancestors):
            return  # test modules never reach the rules (engine); test functions end here
        statement = None
        for ancestor in reversed(self.ancestors):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                statement = ancestor
                break
        if isinstance(node, cst.SimpleStatementLine):
            statement = node
        indent = self.indentation() if fix is not None else ()
        self.pending.append(PendingDiagnostic(rule, node, message, fix, statement, indent, hint))

    def indentation(self, upto: Optional[cst.CSTNode] = None) -> Tuple[str, ...]:
        """Indent tokens of the blocks around the node being visited (or around ancestor ``upto``)."""
        return block_indents(self.module, self.ancestors, upto)

    def import_edit(self, module_name: str) -> Tuple[Optional[NodeEdit], str]:
        """An edit adding ``import module_name`` (None if already imported) and the name to use."""
        local = self.imports.local_name_for(module_name)
        if local is not None:
            return None, local
        return import_placement(self.module, module_name), module_name


#: isort's sections, in order: ``from __future__``, the standard library, everything else.
FUTURE, STDLIB, THIRD_PARTY = 0, 1, 2
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) or frozenset(
    "abc argparse collections contextlib copy dataclasses functools glob io itertools json logging "
    "math os pathlib pickle random re shutil subprocess sys tempfile threading time typing "
    "warnings".split()
)


def _section(module: str) -> int:
    if module == "__future__":
        return FUTURE
    return STDLIB if module.partition(".")[0] in _STDLIB else THIRD_PARTY


def _import_key(stmt: cst.SimpleStatementLine) -> Optional[Tuple[int, int, str]]:
    """(section, 0 for ``import x`` / 1 for ``from x import``, module) of an import line, or
    None for any other statement (and for relative imports, which isort puts last)."""
    first = stmt.body[0] if stmt.body else None
    if isinstance(first, cst.Import):
        module = cst.Module([]).code_for_node(first.names[0].name)
        return _section(module), 0, module.lower()
    if isinstance(first, cst.ImportFrom) and first.module is not None and not first.relative:
        module = cst.Module([]).code_for_node(first.module)
        return _section(module), 1, module.lower()
    return None


def import_placement(module: cst.Module, module_name: str) -> NodeEdit:
    """An edit adding ``import module_name`` where isort (or ruff's ``I`` rules, default
    settings) would put it: in its section (standard library or third party) of the file's
    leading import block, at its sorted place among the ``import x`` lines, which come before
    the ``from x import`` lines; a new section gets a blank line around it."""
    return line_placement(module, f"import {module_name}", (_section(module_name), 0, module_name.lower()))


def line_placement(module: cst.Module, line: str, target: Tuple[int, int, str]) -> NodeEdit:
    """An edit adding the import ``line`` whose sort key is ``target`` ((section, 0 for ``import
    x`` or 1 for ``from x import``, the module lower-cased): ``_import_key``) at its sorted place
    in the file's leading import block, a new section with a blank line around it."""
    keyed: List[Tuple[Tuple[int, int, str], cst.CSTNode]] = []
    anchor = None  # the last statement of the leading docstring-and-imports block
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            anchor = stmt
            key = _import_key(stmt)
            if key is not None:
                keyed.append((key, stmt))
        elif anchor is None and _is_docstring(stmt):
            anchor = stmt
        else:
            break
    same = [(key, stmt) for key, stmt in keyed if key[0] == target[0]]
    if same:
        for key, stmt in same:
            if key > target:
                return NodeEdit(stmt, line + "\n", INSERT_BEFORE)
        return NodeEdit(same[-1][1], "\n" + line, INSERT_AFTER)
    later = [stmt for key, stmt in keyed if key[0] > target[0]]
    if later:
        return NodeEdit(later[0], line + "\n\n", INSERT_BEFORE)
    earlier = [stmt for key, stmt in keyed if key[0] < target[0]]
    if earlier:
        return NodeEdit(earlier[-1], "\n\n" + line, INSERT_AFTER)
    if anchor is not None:
        return NodeEdit(anchor, "\n" + line, INSERT_AFTER)
    if module.body:
        return NodeEdit(module.body[0], line + "\n", INSERT_BEFORE)
    return NodeEdit(module, line + "\n", INSERT_BEFORE)


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
