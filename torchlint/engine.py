"""Stages 3-7 for one file: prefilter -> parse -> resolve imports -> visit (all rules, one pass)
-> position the findings -> filter (noqa, per-file-ignores).

``lint_source`` is the whole path an editor or the language server takes for one buffer.
"""

from __future__ import annotations

import ast
import gc
import os
import warnings
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple, Type

from torchlint import _cst as cst
from torchlint import editor_memo

from torchlint.astindex import AstIndex
from torchlint.testcode import is_test_module
from torchlint.context import (
    DELETE_LINES,
    INSERT_AFTER,
    INSERT_BEFORE,
    FileContext,
    NodeEdit,
    PendingDiagnostic,
    render_node,
)
from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.guards import Refusal, parse_failure, refusal, shallow, too_large
from torchlint.model import FileModel
from torchlint.parsing import LARGE_FILE_CHARS, IncrementalAst, IncrementalParser, parse_ast, parse_with_lines
from torchlint.partial import PartialMismatch, Plan, kept_rules, partial_text, plan as plan_statements, walk_plan, walk_plan_key
from torchlint.positions import Positions
from torchlint.project import EMPTY_FACTS, FileFacts, ProjectIndex, summarize, summarize_text
from torchlint.rules import ENGINE_CODES, all_rules
from torchlint.rules.base import Rule
from torchlint.suppression import filter_suppressed
from torchlint.workers import collector_paused
from torchlint.tree import _children

def walk(module: cst.Module, ctx: FileContext, rules: Sequence[Rule],
         plan: Optional[Sequence[Sequence[type]]] = None) -> None:
    """One pass over the tree, calling every rule's ``visit_X``/``leave_X`` for node type X.
    ``plan``: for each statement of ``module.body``, the classes of the rules that walk it
    (``partial.walk_plan``); every rule still visits and leaves the ``Module``."""
    everyone = _dispatch(rules)
    if plan is None:
        _walk_from(module, everyone, ctx.ancestors)
        return
    visit, leave = everyone
    for fn in visit.get("Module", ()):
        fn(module)
    tables: Dict[frozenset, tuple] = {}
    ancestors = ctx.ancestors
    ancestors.append(module)
    for statement, classes in zip(module.body, plan):
        if not classes:
            continue
        key = frozenset(classes)
        table = tables.get(key)
        if table is None:
            table = tables[key] = _dispatch([r for r in rules if type(r) in key])
        _walk_from(statement, table, ancestors)
    ancestors.pop()
    for fn in leave.get("Module", ()):
        fn(module)


def _dispatch(rules: Sequence[Rule]) -> Tuple[Dict[str, List[Callable]], Dict[str, List[Callable]]]:
    """node type name -> the rules' bound ``visit_X`` methods, and their ``leave_X`` methods."""
    visit: Dict[str, List[Callable]] = {}
    leave: Dict[str, List[Callable]] = {}
    for rule in rules:
        for attr in dir(type(rule)):
            if attr.startswith("visit_"):
                visit.setdefault(attr[6:], []).append(getattr(rule, attr))
            elif attr.startswith("leave_"):
                leave.setdefault(attr[6:], []).append(getattr(rule, attr))
    return visit, leave


def _walk_from(root: cst.CSTNode, tables, ancestors: List[cst.CSTNode]) -> None:
    visit, leave = tables
    no_calls = ()
    stack: List[Tuple[cst.CSTNode, bool]] = [(root, False)]
    push, pop = stack.append, stack.pop
    while stack:
        node, leaving = pop()
        kind = type(node).__name__
        if leaving:
            ancestors.pop()
            for fn in leave.get(kind, no_calls):
                fn(node)
            continue
        for fn in visit.get(kind, no_calls):
            fn(node)
        children = _children(node)
        if not children:  # a leaf: leave it now; ancestors are the same as when it was visited
            for fn in leave.get(kind, no_calls):
                fn(node)
            continue
        push((node, True))
        ancestors.append(node)
        for child in reversed(children):
            push((child, False))


_INCREMENTAL = IncrementalParser()
#: ``TORCHLINT_WHOLE_PARSE=1``: libcst parses every file whole (no partial parse), a switch for
#: checking that partial parses change nothing (tests/test_corpus_soundness.py) and for bisecting
WHOLE_PARSE = os.environ.get("TORCHLINT_WHOLE_PARSE", "") not in ("", "0")
_INCREMENTAL_AST = IncrementalAst()
# An editor's function records for the single-file project facts: path -> ``summarize``'s reuse.
_SUMMARY_RECORDS: Dict[str, Dict[tuple, tuple]] = {}
# An editor's walk plans: (walk_plan_key) -> (rules asked, a definition's text) -> the rules that walk it.
_WALK_ANSWERS: Dict[tuple, Dict[tuple, tuple]] = {}


def syntax_error(text: str, path: str, settings) -> Optional[Diagnostic]:
    """TL001 for text Python cannot compile, or None. Uses CPython's parser: fast and precise."""
    return _ast_parse(text, path)[1]


def _ast_parse(text: str, path: str, incremental: bool = False) -> Tuple[Optional[ast.Module], Optional[Diagnostic]]:
    """(CPython's tree, None) or (None, the TL001 finding; TL003 for more code than fits memory).
    ``incremental``: an editor's buffer, parsed again only where it changed (``IncrementalAst``)."""
    refused = too_large(text)
    if refused is not None:
        return None, _engine_diagnostic(refused.code, refused.message, path, refused.row, refused.column)
    try:
        with warnings.catch_warnings():  # SyntaxWarnings of the linted code are not ours to print
            warnings.simplefilter("ignore")
            if incremental:
                return _INCREMENTAL_AST.parse(text, path), None
            return parse_ast(text, path), None  # in chunks when large: the same tree, less memory
    except SyntaxError as exc:
        row = exc.lineno or 1
        col = exc.offset or 1
        msg = exc.msg or "invalid syntax"
        return None, _engine_diagnostic("TL001", f"SyntaxError: {msg}", path, row, max(col, 1))
    except (ValueError, MemoryError, RecursionError) as exc:  # e.g. source with NUL bytes
        return None, _engine_diagnostic("TL001", parse_failure(exc), path, 1, 1)


def _engine_diagnostic(code: str, message: str, path: str, row: int, col: int) -> Diagnostic:
    loc = Location(row, col)
    return Diagnostic(code, ENGINE_CODES[code][0], message, path, loc, loc, None, row, (row,))


def too_complex(path: str, settings) -> List[Diagnostic]:
    """[TL003] for a file whose lint ran out of recursion depth (issue 32), where enabled."""
    if "TL003" not in settings.codes_for_path(path):
        return []
    return [_engine_diagnostic("TL003", "too complex to analyse: nested past Python's recursion limit", path, 1, 1)]


def unreadable(path: str, reason: str) -> Diagnostic:
    return _engine_diagnostic("TL002", f"Cannot read file: {reason}", path, 1, 1)


def lint_source(
    text: str,
    path: str,
    settings,
    *,
    rules: Optional[Sequence[Type[Rule]]] = None,
    prefilter: bool = True,
    incremental: bool = False,
    project: Optional[FileFacts] = None,
    ast_codes: Optional[Collection[str]] = None,
    plan: Optional[Plan] = None,
) -> List[Diagnostic]:
    """All findings for one file's text, noqa and per-file-ignores applied, sorted.

    ``incremental=True`` (editors, the language server) reuses the parse trees of top-level
    statements unchanged since an earlier call (see ``parsing.IncrementalParser``).
    ``project``: what the project index says about this file's functions (``project.py``);
    without it, the file is its own project (its own loops and factories still count).
    ``ast_codes``: the rules phase 1's ast-level prefilter kept for this file (``runner``); None:
    this call asks it, when that may spare the libcst parse. ``plan``: the top-level definitions
    libcst must parse (``partial.py``), made by phase 1 for these rules; None: made here when it
    can pay (never in the editor path, whose parser reuses unchanged statements instead)."""
    if incremental and gc.isenabled():
        # An editor lints on every keystroke: the cyclic collector would re-scan the ~10^5
        # acyclic libcst nodes of each lint and the incremental parser's cached trees.
        return collector_paused(lint_source, text, path, settings, rules=rules, prefilter=prefilter,
                                incremental=True, project=project, ast_codes=ast_codes)
    if "\f" in text:  # a form feed in indentation, read as CPython reads it (formfeed.py)
        from torchlint.formfeed import shift_columns, without_form_feeds

        cleaned, shifts = without_form_feeds(text)
        if shifts:
            return shift_columns(lint_source(cleaned, path, settings, rules=rules, prefilter=prefilter,
                                             incremental=incremental, project=project, ast_codes=ast_codes), shifts)
    codes = settings.codes_for_path(path)
    tree = index = None
    if ast_codes is not None:  # phase 1 ran every prefilter on this same text: not again
        candidates = [r for r in (rules or all_rules()) if r.code in ast_codes and r.code in codes]
    else:
        # an editor builds CPython's tree whenever a rule passes: its token prefilter is enough here
        candidates = candidate_rules(text, path, settings, codes, rules, prefilter, project, tokens_only=incremental)
        if prefilter and candidates and (incremental or all(r.ast_candidate is not None for r in candidates)):
            # CPython's tree: cheap next to libcst, it may spare the libcst parse, and the
            # incremental parser, the single-file project facts and the positions reuse it
            tree = _ast_parse(text, path, incremental)[0]
            if tree is not None:
                index = AstIndex(tree, text, settings.target_torch_version)
                candidates = candidate_rules(text, path, settings, codes, candidates, prefilter, project, tree, index,
                                             tokens_only=incremental)
    diagnostics: List[Diagnostic] = []
    if not candidates:
        error = syntax_error(text, path, settings) if "TL001" in codes else None
        if error:
            diagnostics.append(error)
    elif (refused := _editor_refusal(text, tree) if incremental else refusal(text)) is not None:
        # guards.py: nesting or size that crashes libcst
        if refused.code in codes:
            diagnostics.append(_engine_diagnostic(refused.code, refused.message, path, refused.row, refused.column))
    else:
        try:
            first_lines = None
            cut = module = None
            if incremental:
                module = _INCREMENTAL.parse(text, tree)
            else:
                if ast_codes is not None:  # phase 1 made the plan for these rules (or found none)
                    plan = plan or getattr(ast_codes, "plan", None)
                elif plan is None and prefilter and not _facts_read(candidates, project):
                    plan = statement_plan(text, path, settings, candidates, tree, index)
                cut = partial_text(text, plan) if plan is not None else None
                if cut is not None:
                    module, first_lines = _parse_cut(cut, plan)
                    if module is not None:  # the rules whose questions said yes
                        candidates = [r for r in candidates if r.code in plan.codes]
                if module is None:
                    cut = None
                    module, first_lines = parse_with_lines(text, tree)
        except (cst.ParserSyntaxError, RecursionError, ValueError) as exc:
            error = syntax_error(text, path, settings)
            if error is None:  # valid Python that libcst cannot read
                row = getattr(exc, "raw_line", 1) or 1
                col = (getattr(exc, "raw_column", 0) or 0) + 1
                error = _engine_diagnostic(
                    "TL003", f"libcst cannot parse this file: {str(exc).splitlines()[0]}", path, row, col
                )
            if error.code in codes:
                diagnostics.append(error)
        else:
            if project is None and any(r.uses_project for r in candidates):
                project = single_file_facts(text, path, tree, incremental)
            walks = reuse = model = None
            if incremental and index is not None:  # an editor: walk only where each rule's visits matter
                walks = _walk_plan(module, tree, candidates, index, project)
                # and not where a statement-local rule's findings are kept from the last lint
                model = FileModel(tree, text, index)
                reuse = editor_memo.plan(path, text, tree, index, len(module.body), walks, candidates,
                                         project, settings.fingerprint, model.digest())
                if reuse is not None:
                    walks = reuse.walks
            try:
                found = check_module(module, text, path, settings, candidates, project, tree, first_lines,
                                     stubs=_stubs(module, plan) if cut is not None else None, walks=walks,
                                     ends=_ends(module, plan) if cut is not None else None, index=index,
                                     model=model)
                if reuse is not None:
                    found = reuse.merge(found)
            except PartialMismatch:  # a position in a left-out body, or one not placed exactly:
                del module  # the same rules on a whole parse (no prefilter: they passed it)
                return lint_source(text, path, settings, rules=candidates, prefilter=False, project=project)
            diagnostics.extend(found)
    diagnostics = filter_suppressed(text, diagnostics, path, codes)  # and TL004 unused-noqa
    diagnostics.sort(key=Diagnostic.sort_key)
    return diagnostics


def _editor_refusal(text: str, tree: Optional[ast.Module]) -> Optional[Refusal]:
    """``guards.refusal(text)`` for an editor's buffer: with CPython's tree (the file's size
    passed ``too_large``), only the chunks libcst has not parsed yet need the quick checks
    (``guards.shallow``); the whole text is looked at when one fails them."""
    if tree is not None:
        chunks = _INCREMENTAL.unparsed_chunks(text, tree)
        if chunks is not None and all(shallow(chunk) for chunk in chunks):
            return None
    return refusal(text)


def statement_plan(text: str, path: str, settings, rules: Sequence[Type[Rule]],
                   tree: Optional[ast.Module] = None, index: Optional[AstIndex] = None) -> Optional[Plan]:
    """Which top-level definitions libcst must parse for ``rules`` (``partial.py``), or None:
    the whole file (also for a file the parser takes in chunks for its memory). Parses
    CPython's tree when not given; ``index``: the ``AstIndex`` of ``tree`` when the caller has
    one (the prefilter's: the answers it found are cached there)."""
    if WHOLE_PARSE or not rules or len(text) >= LARGE_FILE_CHARS or any(r.ast_candidate is None for r in rules):
        return None
    if tree is None:
        tree = _ast_parse(text, path)[0]
        if tree is None:
            return None
    if index is None:
        index = AstIndex(tree, text, settings.target_torch_version)
    return plan_statements(tree, text, rules, index)


def _parse_cut(cut: str, plan: Plan) -> Tuple[Optional[cst.Module], Optional[List[int]]]:
    """libcst's tree of a partial text, with the first lines of its statements in the real text;
    (None, None) when it does not parse as the plan says (the caller parses the whole file)."""
    try:
        module = cst.parse_module(cut)
    except (cst.ParserSyntaxError, RecursionError, ValueError):
        return None, None
    if len(module.body) != len(plan.kept()):
        return None, None
    return module, list(plan.first_lines)


def _facts_read(rules: Sequence[Type[Rule]], project: Optional[FileFacts]) -> List[Type[Rule]]:
    """The rules that read project facts, when there are some: a fact (a helper that runs every
    step) may make them fire in a definition no ast question says yes to, so they must see
    every definition (no partial parse; every statement walked)."""
    return [r for r in rules if r.uses_project] if project is not None and project.digest else []


def _walk_plan(module: cst.Module, tree: ast.Module, rules: Sequence[Type[Rule]], index: AstIndex,
               project: Optional[FileFacts]) -> Optional[Tuple[Tuple[Type[Rule], ...], ...]]:
    """``partial.walk_plan`` for ``module`` (CPython's ``tree`` of the same text), or None when
    its statements do not line up with libcst's. With project facts, the rules that read them
    walk everything: a fact may make them fire where no ast question can see."""
    whole = _facts_read(rules, project)
    key = walk_plan_key(tree, rules, index, whole)
    plan = walk_plan(tree, rules, index, whole, editor_memo.recent(_WALK_ANSWERS, key))
    if plan is None or len(plan) != len(module.body):
        return None
    return plan


def _stubs(module: cst.Module, plan: Optional[Plan]) -> frozenset:
    """ids of the partial module's statements that stand for a left-out body."""
    return frozenset(id(stmt) for stmt, (piece, _) in zip(module.body, plan.kept()) if piece.stub_header or piece.replacement) if plan else frozenset()


def _ends(module: cst.Module, plan: Optional[Plan]) -> Dict[int, int]:
    """id of each statement of a partial module followed by a dropped definition -> the line
    after its own last one (where the real text goes on: ``Positions``)."""
    return {id(stmt): piece.end + 1 for stmt, (piece, before_dropped) in zip(module.body, plan.kept()) if before_dropped} if plan else {}


def candidate_rules(text: str, path: str, settings, codes, rules=None, prefilter: bool = True,
                    project: Optional[FileFacts] = None, tree: Optional[ast.Module] = None,
                    index: Optional[AstIndex] = None, tokens_only: bool = False) -> List[Type[Rule]]:
    """The enabled rules that apply to this file (target torch version, test code) and whose
    prefilter passes (the wider one where the project index has facts about the file): an
    empty list means the file need not be parsed by libcst. With CPython's ``tree``, a rule's
    ``ast_candidate`` must pass too (``astindex.py``), asked of ``index`` when the caller has
    one for ``tree`` (its caches then serve ``statement_plan`` too). ``tokens_only``: with a
    tree, ``rules`` already passed their tokens (``may_fire``), for a caller that asks the ast
    questions next."""
    if rules is None:
        rules = [r for r in all_rules() if r.code in codes]
    version = settings.target_torch_version
    test_module = is_test_module(path, text)
    rules = [r for r in rules if r.applies_to(version) and not (test_module and r.skip_in_tests)]
    if not prefilter:
        return list(rules)
    with_facts = project is not None and bool(project.digest)
    if tree is not None and tokens_only and all(r.ast_candidate is not None for r in rules):
        by_text = list(rules)  # each is asked its question next
    else:
        by_text = [r for r in rules if r.may_fire(text)]
    # The ast questions are asked only when they may spare the libcst parse: a rule without one
    # sends the file to libcst anyway, and running a few more rules on a parsed tree is cheaper
    # than asking (on transformers the questions cost ~2 s of CPU where nothing was spared).
    if tree is not None and by_text and all(r.ast_candidate is not None for r in by_text):
        if index is None:
            index = AstIndex(tree, text, version)
        # Once one rule has a candidate site the file goes to libcst anyway: the rules not asked
        # yet are kept (running a rule on a parsed tree costs less than the question).
        for i, rule in enumerate(by_text):
            if rule.ast_candidate(index):
                by_text = by_text[i:]  # those before it answered no
                break
        else:
            by_text = []
    if not with_facts:
        return by_text
    kept = set(by_text)
    return [r for r in rules if r in kept or r.may_fire_in_project(text)]


def single_file_facts(text: str, path: str, tree: Optional[ast.Module] = None, incremental: bool = False) -> FileFacts:
    """The project facts of a file that is its own project (the API, the editor before the
    project index is built). ``incremental``: an editor's buffer, whose unchanged functions
    keep their records from its last summary (``project.summarize``'s ``reuse``)."""
    reuse = None
    if incremental and tree is not None:
        reuse = editor_memo.recent(_SUMMARY_RECORDS, path)
    summary = summarize(tree, path, text, reuse) if tree is not None else summarize_text(text, path)
    return ProjectIndex({path: summary}).facts_for(path) if summary is not None else EMPTY_FACTS


def buffer_summary(text: str, path: str) -> Optional[dict]:
    """An editor buffer's summary (phase 1, as ``summarize_text``), from the incremental
    parser's tree and the buffer's kept function records, as ``single_file_facts`` makes it;
    None when Python cannot parse the text. The language server's index takes it in place of
    the file's summary on disk."""
    tree = _ast_parse(text, path, incremental=True)[0]
    if tree is None:
        return None
    return summarize(tree, path, text, editor_memo.recent(_SUMMARY_RECORDS, path))


def first_pass(text: str, path: str, settings):
    """Phase 1 of a project run for one file: (its summary from CPython's ``ast``, its final
    findings when no rule can fire on it, whether a rule could fire given project facts, the
    codes of the rules its text and ast prefilters kept or None).
    Files with final findings never reach libcst unless the project index has facts about them
    and the third answer is yes. Findings are None when some rule may fire: the file is linted
    once the project index is built, by the rules in the last answer when it has no facts."""
    codes = settings.codes_for_path(path)
    tree, error = _ast_parse(text, path)
    summary = summarize(tree, path, text) if tree is not None else None
    index = AstIndex(tree, text, settings.target_torch_version) if tree is not None else None
    kept = candidate_rules(text, path, settings, codes, tree=tree, index=index)
    if kept:
        plan = statement_plan(text, path, settings, kept, tree, index) if tree is not None else None
        return summary, None, True, kept_rules(plan.codes if plan is not None else (r.code for r in kept), plan)
    # Every ast question above answered no (or no rule passed its text prefilter), so the index's
    # facts could only bring in a rule through its project prefilter: that alone is asked here
    # (asking ``candidate_rules`` again re-ran every text prefilter and ast question).
    version, test_module = settings.target_torch_version, is_test_module(path, text)
    with_project = tree is not None and any(
        r.may_fire_in_project(text) for r in all_rules()
        if r.code in codes and r.uses_project and r.applies_to(version) and not (test_module and r.skip_in_tests))
    diagnostics = [error] if error is not None and error.code in codes else []
    return summary, sorted(filter_suppressed(text, diagnostics, path, codes), key=Diagnostic.sort_key), with_project, None


def check_module(module: cst.Module, text: str, path: str, settings, rules: Sequence[Type[Rule]],
                 project: Optional[FileFacts] = None, tree: Optional[ast.Module] = None,
                 first_lines: Optional[List[int]] = None, stubs: Optional[frozenset] = None,
                 walks: Optional[Sequence[Sequence[Type[Rule]]]] = None,
                 ends: Optional[Dict[int, int]] = None, index: Optional[AstIndex] = None,
                 model: Optional[FileModel] = None) -> List[Diagnostic]:
    """The findings of ``rules`` on ``module``. ``stubs``: ``module`` is a partial parse
    (``partial.py``) whose statements with these ids stand for left-out bodies; a position
    needed there raises ``PartialMismatch``. ``walks``: which rules walk each statement of
    ``module.body`` (``partial.walk_plan``); None: all of them. ``ends``: a partial module's
    statements followed by a dropped definition -> the line where the text goes on after them."""
    ctx = FileContext(path, text, module, settings, project, tree, index, model)
    tops: Dict[int, cst.CSTNode] = {}  # id(pending finding) -> the top-level statement holding it
    paths: Dict[int, List[cst.CSTNode]] = {}  # id(pending finding) -> the walk's ancestors then
    report = ctx.report

    def report_in_statement(rule, node, message, fix, hint=None) -> None:
        count = len(ctx.pending)
        report(rule, node, message, fix, hint)
        if len(ctx.pending) > count:
            ancestors = ctx.ancestors
            tops[id(ctx.pending[-1])] = ancestors[1] if len(ancestors) > 1 else node
            paths[id(ctx.pending[-1])] = list(ancestors)

    ctx.report = report_in_statement  # positions are then generated for those statements only
    try:
        walk(module, ctx, [rule(ctx) for rule in rules], walks)
        if not ctx.pending:
            return []
        positions = Positions(module, text, tree if stubs is None else None, first_lines, stubs, ends)
        found = [_to_diagnostic(p, positions, module, path, text, tops.get(id(p)), paths.get(id(p))) for p in ctx.pending]
        return _with_related(found, project) if project is not None and project.sites else found
    finally:
        ctx.release()


def _with_related(found: List[Diagnostic], project: FileFacts) -> List[Diagnostic]:
    """Each finding whose hint gives a reason the project index traced to a call ("called every
    step from train.py:16") gets that call as a related location."""
    import dataclasses
    import re

    from torchlint.diagnostics import Related

    out = []
    for d in found:
        related = tuple(
            Related(site, Location(line, 1), Location(line, 1), why) for why, (site, line) in sorted(project.sites.items())
            if d.hint and why in d.hint and re.search(re.escape(why) + r"(?!\d)", d.hint))
        out.append(dataclasses.replace(d, related=related) if related else d)
    return out


def _to_diagnostic(p: PendingDiagnostic, positions, module: cst.Module, path: str, text: str,
                   top: Optional[cst.CSTNode] = None, where: Optional[List[cst.CSTNode]] = None) -> Diagnostic:
    """``where``: the walk's ancestors when the finding was reported (``Positions.range``)."""
    start, end = positions.range(p.node, top, where)
    rows = {start.row}
    if isinstance(p.statement, cst.SimpleStatementLine):
        rows.add(positions.range(p.statement, top, where)[1].row)
    else:
        rows.add(end.row)
    fix = None
    if p.fix is not None:
        edits = tuple(_to_edit(e, positions, module, p.indent, top, where) for e in p.fix.edits)
        fix = Fix(p.fix.applicability, p.fix.message, tuple(sorted(edits, key=lambda e: e.location)))
    return Diagnostic(
        code=p.rule.code,
        name=p.rule.name,
        message=p.message,
        path=path,
        location=start,
        end_location=end,
        fix=fix,
        noqa_row=start.row,
        noqa_rows=tuple(sorted(rows)),
        hint=p.hint or p.rule.hint,
    )


def _to_edit(edit: NodeEdit, positions, module: cst.Module, indent, top: Optional[cst.CSTNode] = None,
             where: Optional[List[cst.CSTNode]] = None) -> Edit:
    # A replacement node prints with the indentation of the blocks around the finding.
    content = edit.content if isinstance(edit.content, str) else render_node(module, edit.content, indent)
    if isinstance(edit.node, cst.Module):
        start = end = Location(1, 1)
    else:
        start, end = positions.range(edit.node, top, where)
    if edit.mode == INSERT_BEFORE:
        return Edit(start, start, content)
    if edit.mode == INSERT_AFTER:
        return Edit(end, end, content)
    if edit.mode == DELETE_LINES:
        return Edit(Location(start.row, 1), Location(end.row + 1, 1), content)
    return Edit(start, end, content)
