"""The base class every rule derives from.

A rule is one class: its code, name, message, the tokens it cannot fire without (for the
prefilter) and its fix safety all sit at the top, and its ``visit_<Node>`` /
``leave_<Node>`` methods are called by the engine's single pass over the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar, Dict, FrozenSet, Optional, Pattern, Tuple, Union, final

from torchlint import _cst as cst
# What Python allows between the tokens of `x . to (`, comments read for at most
# MAX_GAP_COMMENT characters (astindex.py says why): regex tokens of `requires` use it to stay sound.
from torchlint.astindex import GAP, MAX_GAP_COMMENT  # noqa: F401  (re-exported for the rules)

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.astindex import AstIndex
    from torchlint.context import FileContext, FixSpec


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    #: One line: what the rule flags (rule tables, SARIF shortDescription).
    summary: ClassVar[str]
    #: Default message, under 100 characters (concise, JSON and editor output show it alone):
    #: what is wrong and what to do instead, without the why.
    message: ClassVar[str]
    #: The why, a sentence or two: the full format shows it under the finding (``= hint:``) and
    #: ``torchlint rule`` with the rule. A finding may pass its own to ``report``.
    hint: ClassVar[Optional[str]] = None
    #: Prefilter: every group must have at least one token present in the file's text. A token is
    #: a substring, or a compiled regex searched for where no substring is selective enough
    #: (`.to(` may be spelt `. to (`; "to" alone is in almost every file), or a predicate.
    requires: ClassVar[Tuple[Tuple[Union[str, Pattern[str]], ...], ...]] = ()
    #: Where the rule can fire, declared instead of written: the qualified names of the calls it
    #: subscribes to (``torch.cuda.synchronize``; a call that may resolve to one of them). The
    #: engine derives the rule's text prefilter (``requires``: the names' last parts; a call
    #: resolving to one spells its last part in the file, at the call or in the import or
    #: assignment binding the name called) and its ast question (``ast_candidate``: such a call,
    #: ``AstIndex.qualified_calls``). A rule that declares ``calls`` declares neither.
    calls: ClassVar[FrozenSet[str]] = frozenset()
    #: "safe", "unsafe" or None when the rule offers no fix (each fix also carries its own).
    fix_applicability: ClassVar[Optional[str]] = None
    #: Metadata the engine applies, so that rules never check these by hand:
    #: silent in test code (test modules, ``test*`` functions, ``Test*`` classes);
    skip_in_tests: ClassVar[bool] = True
    #: runs only when ``min_torch_version <= target-torch-version < max_torch_version``;
    min_torch_version: ClassVar[Optional[Tuple[int, int]]] = None
    max_torch_version: ClassVar[Optional[Tuple[int, int]]] = None
    #: a preview rule runs only with ``--preview`` / ``preview = true`` (ruff's model);
    preview: ClassVar[bool] = False
    #: tags for SARIF ``properties.tags`` and docs (``performance``, ``correctness``, ...).
    tags: ClassVar[Tuple[str, ...]] = ()
    #: reads ``ctx.project`` (facts from other files): the engine provides them.
    uses_project: ClassVar[bool] = False
    #: The prefilter for a file the project index has facts about (None: ``requires``): a
    #: helper that runs every step needs no training loop of its own.
    project_requires: ClassVar[Optional[Tuple[Tuple[Union[str, Pattern[str]], ...], ...]]] = None
    #: The ast-level prefilter, asked only when ``requires`` passes (``torchlint/astindex.py``):
    #: a function of the file's ``AstIndex`` (CPython's tree, built in phase 1 anyway) saying
    #: whether the file holds a real candidate site (a `DataLoader` call, a factory call moved at
    #: once...), not just the words in a comment or docstring. Must be sound: False only when
    #: the rule cannot fire. None: ``requires`` alone decides.
    ast_candidate: ClassVar[Optional[Callable[["AstIndex"], bool]]] = None
    #: Whether every finding lies in a top-level statement whose ``ast_candidate``, asked of that
    #: statement and the module's other statements that are not function or class definitions
    #: (``AstIndex.restricted``), is true, and depends on no other definition's body (only on
    #: its name and header). Then libcst parses only such statements of a file in a batch run
    #: (``torchlint/partial.py``). False for rules that pair sites across definitions in
    #: ``leave_Module`` or read the whole module up front.
    statement_local: ClassVar[bool] = True
    #: Whether, in a class, every finding lies in a method whose ``ast_candidate``, asked of that
    #: method, the class's own statements that are not definitions and the module's (as above),
    #: is true, and depends on no other method's body: a call checked with the imports and the
    #: method's own scope (TL903's ``checkpoint(...)``), never a ``self.x`` set elsewhere or an
    #: order across methods (TL301's conv in ``__init__``, BatchNorm after it in ``forward``).
    #: Then libcst parses, of a class it needs, only those methods (``partial.py``).
    method_local: ClassVar[bool] = False
    #: For a rule that is not ``statement_local``: the question, asked of one top-level
    #: definition and the module's statements that are not definitions, whether the rule's own
    #: visits in that definition can matter (hold a finding, or collect what a finding elsewhere
    #: needs). Where it says no the engine's walk skips the definition for this rule; the rule
    #: still reads it through ``ctx`` (the semantic model, helpers). Must be sound like
    #: ``ast_candidate``. None: the rule walks every definition. A ``statement_local`` rule's
    #: question is its ``ast_candidate`` (``walk_question``).
    walk_candidate: ClassVar[Optional[Callable[["AstIndex"], bool]]] = None
    #: For a rule that is not ``statement_local``: whether what its visits read outside the
    #: definitions it walks is only (a) the module's statements that are not definitions, (b)
    #: other top-level definitions reached *by name*: a function or class its code names (a
    #: helper it calls, a dataset class, a loader factory), a function whose callers it looks
    #: at, and the readers of a module-level name bound from a ``DataLoader`` call, (c) a
    #: ``DataLoader`` call's assignment anywhere (``heuristics.dataloader_names``) and (d) the
    #: project facts. Then an editor keeps its findings over the whole file while all of those
    #: are unchanged (``editor_memo``: an edit elsewhere spares its walk). False: the rule walks
    #: at every lint, as ``walk_candidate`` says.
    reads_by_name: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        calls = cls.__dict__.get("calls")
        if not calls:
            return
        if "requires" in cls.__dict__ or "ast_candidate" in cls.__dict__:
            raise TypeError(f"{cls.__name__} declares `calls`: its `requires` and `ast_candidate` are derived from them")
        cls.calls = names = frozenset(calls)
        cls.requires = derived_requires(names)
        cls.ast_candidate = staticmethod(calls_question(names))

    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        fix: Optional["FixSpec"] = None,
        hint: Optional[str] = None,
    ) -> None:
        self.ctx.report(self, node, message or self.message, fix, hint)

    @classmethod
    def applies_to(cls, version: Tuple[int, int]) -> bool:
        """Does the rule apply when the code must run on torch ``version``?"""
        if cls.min_torch_version is not None and version < cls.min_torch_version:
            return False
        return cls.max_torch_version is None or version < cls.max_torch_version

    @classmethod
    def walk_question(cls) -> Optional[Callable[["AstIndex"], bool]]:
        """Which definitions the rule's visits must see (``partial.walk_plan``): its
        ``walk_candidate``, else for a statement-local rule its ``ast_candidate``; None: all."""
        if cls.walk_candidate is not None:
            return cls.walk_candidate
        return cls.ast_candidate if cls.statement_local else None

    @classmethod
    @final
    def may_fire(cls, text: str) -> bool:
        """The text prefilter: False only when the rule cannot possibly fire on ``text``: its
        ``requires`` tokens, the same with or without a tree (the engine asks ``ast_candidate``
        next where CPython's tree is at hand). Not overridden: a rule's precision belongs in its
        ast question, asked wherever the tree is."""
        return all_present(cls.requires, text)

    @classmethod
    @final
    def may_fire_in_project(cls, text: str) -> bool:
        """The prefilter when the project index has facts about the file."""
        if not cls.uses_project:
            return False
        if cls.project_requires is None:
            return cls.may_fire(text)
        return all_present(cls.project_requires, text)


def derived_requires(calls: FrozenSet[str]) -> Tuple[Tuple[str, ...], ...]:
    """The text prefilter of a rule that declares ``calls``: one group, the last part of each
    name. Sound: ``AstIndex.qualified_calls`` looks only at names and attributes spelling a
    last part, or at local names bound to a qualified name by an import or an assignment,
    whose statement spells it."""
    return (tuple(sorted({name.rsplit(".", 1)[-1] for name in calls})),)


def calls_question(calls: FrozenSet[str]) -> Callable[["AstIndex"], bool]:
    """The ast question of a rule that declares ``calls``: a call that may resolve to one."""
    def question(index: "AstIndex") -> bool:
        return bool(index.qualified_calls(calls))

    question.__name__ = f"calls_question({sorted(calls)!r})"
    return question


def gated(pattern: Pattern[str], *words: str) -> Callable[[str], bool]:
    """A ``requires`` token: ``pattern`` searched only in a text holding one of ``words``, which
    every match of it contains (a ``str`` search is several times faster than a regex scan of
    a text without a match: most files)."""
    def present(text: str) -> bool:
        return any(word in text for word in words) and pattern.search(text) is not None

    present.__name__ = f"gated({pattern.pattern!r})"
    return present


def mentions_loader(text: str) -> bool:
    """Prefilter token: ``loader`` in any case (``is_loader_expression`` compares lower-cased
    names)."""
    return "loader" in text.lower()


_SCAN_ORDER: Dict[int, Tuple[tuple, tuple]] = {}  # id(requires) -> (requires, the groups reordered)


def _scan_order(groups: tuple) -> tuple:
    """Each group of ``groups`` as it is scanned: plain substrings before regexes and
    predicates, the shortest first (any of them will do: a short word such as ``lu`` or
    ``range`` is in most files, so the scan ends there instead of first reading the whole text
    for each rare ``UpsamplingBilinear2d``). The groups keep their order (all of them must
    match: a rule lists its most selective first). Every token is a pure test of the text:
    the answer is the same in any order."""
    def cost(token) -> tuple:
        return (0, len(token)) if isinstance(token, str) else (1, 0)

    return tuple(tuple(sorted(group, key=cost)) for group in groups)


#: (the last text all_present scanned, its answers by token), replaced as one tuple: a thread
#: (the language server's) that finds another text there starts its own pair, never reads one
_SEEN: list = [(None, {})]


def all_present(groups, text: str) -> bool:
    """Does ``text`` hold a token of each group (a rule's ``requires``)? The answers for the
    last text asked about are kept: the rules ask about one file in turn, several with the
    same tokens (``DataLoader``, ``torch``, a backward call, ``loader`` in any case)."""
    if not groups:
        return True
    entry = _SCAN_ORDER.get(id(groups))
    if entry is None or entry[0] is not groups:
        entry = _SCAN_ORDER[id(groups)] = (groups, _scan_order(groups))
    last = _SEEN[0]
    if last[0] is not text:
        last = _SEEN[0] = (text, {})
    seen = last[1]
    for group in entry[1]:
        for token in group:
            found = seen.get(token)
            if found is None:
                found = seen[token] = _present(token, text)
            if found:
                break
        else:
            return False
    return True


def _present(token, text: str) -> bool:
    """A token is a substring, a compiled regex, or a predicate on the text."""
    if isinstance(token, str):
        return token in text
    if callable(token):
        return bool(token(text))
    return token.search(text) is not None
