"""Fix builders rules share: a call with keyword or leading arguments added in its own layout,
a replacement printed as it sits in the file, the edits that remove a statement. The context,
where a function takes it, comes first. Tests in tests/test_analysis.py and tests/test_fix_layout.py."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from torchlint import _cst as cst


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that follows a comma between this call's arguments (no comments)."""
    ws = None
    if len(call.args) >= 2 and isinstance(call.args[-2].comma, cst.Comma):
        ws = call.args[-2].comma.whitespace_after
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return cst.SimpleWhitespace(" ")


def _split_comment(closing: cst.BaseParenthesizableWhitespace, sep: cst.BaseParenthesizableWhitespace):
    """(closing, separator) when an argument is added after the one ``closing`` followed: a
    comment on the old last argument's line stays there (it is the separator's first line now),
    and the new last argument gets ``closing`` without it (the line break and any comment lines
    before ``)`` stay before ``)``)."""
    if not (isinstance(closing, cst.ParenthesizedWhitespace) and closing.first_line.comment is not None):
        return closing, sep
    first = closing.first_line
    if isinstance(sep, cst.ParenthesizedWhitespace):
        kept = sep.with_changes(first_line=first)
    else:  # a one-line call whose last argument ends a line with a comment
        kept = closing.with_changes(first_line=first, empty_lines=[],
                                    last_line=cst.SimpleWhitespace(closing.last_line.value + "    "))
    return closing.with_changes(first_line=cst.TrailingWhitespace()), kept


def with_keyword_args(call: cst.Call, new: Sequence[Tuple[str, cst.BaseExpression]]) -> cst.Call:
    """``call`` with ``keyword=value`` arguments appended, keeping its layout: one argument per
    line stays one per line, and a trailing comma stays trailing."""
    made = [
        cst.Arg(
            value=value,
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            ),
        )
        for keyword, value in new
    ]
    if not made:
        return call
    args = list(call.args)
    sep = cst.Comma(whitespace_after=_separator(call))
    if not args:
        space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return call.with_changes(args=[a.with_changes(comma=space) for a in made[:-1]] + made[-1:])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: it moves to the new last argument
        closing, kept = _split_comment(last.comma.whitespace_after, sep.whitespace_after)
        tail = {"comma": last.comma.with_changes(whitespace_after=closing)}
        args[-1] = last.with_changes(comma=sep.with_changes(whitespace_after=kept))
    else:  # the whitespace before ")" moves to the new last argument
        closing, kept = _split_comment(last.whitespace_after_arg, sep.whitespace_after)
        tail = {"whitespace_after_arg": closing}
        args[-1] = last.with_changes(comma=sep.with_changes(whitespace_after=kept),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
    made = [a.with_changes(comma=sep) for a in made[:-1]] + [made[-1].with_changes(**tail)]
    return call.with_changes(args=args + made)


def with_leading_args(call: cst.Call, values: Sequence[cst.BaseExpression]) -> cst.Call:
    """``call`` with positional arguments ``values`` put first, keeping its layout: when its
    arguments sit one per line, the new ones get a line each too."""
    if not values:
        return call
    sep = cst.Comma(whitespace_after=_separator(call))
    made = [cst.Arg(value=value, comma=sep) for value in values]
    if not call.args:
        made = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in made[:-1]]
        made.append(cst.Arg(value=values[-1]))
    return call.with_changes(args=[*made, *call.args])


def code_in_place(ctx, node: cst.CSTNode) -> str:
    """Source for ``node`` (say, a replacement built with ``with_keyword_args``) as it prints at
    the statement being visited: continuation lines inside brackets keep the enclosing blocks'
    indentation, which ``Module.code_for_node`` (rendering at column 0) drops."""
    from torchlint.context import render_node

    return render_node(ctx.module, node, ctx.indentation())


def indentation(ctx, upto: Optional[cst.CSTNode] = None) -> str:
    """The absolute indentation of the statement being visited (or of ancestor ``upto``)."""
    return "".join(ctx.indentation(upto))


def statement_removal_edits(ctx, call: cst.Call) -> Optional[tuple]:
    """Edits deleting the expression statement ``call`` (being visited) from its block: its lines
    go, a trailing comment stays as a comment line, and a block it would empty gets ``pass``.
    None when the call is not a statement alone on its line."""
    from torchlint.context import DELETE_LINES, REPLACE, NodeEdit

    ancestors = ctx.ancestors
    if len(ancestors) < 3 or not isinstance(ancestors[-1], cst.Expr) or ancestors[-1].value is not call:
        return None
    expr, line, block = ancestors[-1], ancestors[-2], ancestors[-3]
    if len(getattr(line, "body", ())) != 1:
        return None
    if isinstance(line, cst.SimpleStatementSuite) or (isinstance(block, cst.IndentedBlock) and len(block.body) == 1):
        return (NodeEdit(expr, "pass", REPLACE),)
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    comment = line.trailing_whitespace.comment
    kept = f"{indentation(ctx)}{comment.value}\n" if comment is not None else ""
    return (NodeEdit(line, kept, DELETE_LINES),)


def line_after(ctx, code: str):
    """An edit putting the statement ``code`` on a line of its own right after the simple
    statement line being visited (the nearest among ``ctx.ancestors``), at its indentation: the
    line is printed again (its trailing comment stays on it) with ``code`` below it. None when
    the statement shares its line with a compound statement's header (``if x: load()``)."""
    from torchlint.context import DELETE_LINES, NodeEdit, render_node

    for i in range(len(ctx.ancestors) - 1, -1, -1):
        node = ctx.ancestors[i]
        if isinstance(node, cst.SimpleStatementSuite):
            return None
        if isinstance(node, cst.SimpleStatementLine):
            line = node
            indents = ctx.indentation(upto=node)
            break
    else:
        return None
    text = render_node(ctx.module, line.with_changes(leading_lines=[]), indents)
    if not text.endswith("\n"):
        text += "\n"
    return NodeEdit(line, f"{text}{''.join(indents)}{code}\n", DELETE_LINES)


def _name_key(name: str) -> Tuple[int, str]:
    """isort's / ruff's default order of the names of one ``from`` import (``order-by-type``):
    CONSTANTS, then Classes, then functions and variables."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name


def from_import_edit(ctx, modules: Sequence[str], name: str):
    """An edit making ``name`` importable ``from`` the first of ``modules`` (all of which export
    it), written as isort would: added at its sorted place to a top-level ``from <module> import
    ...`` line of the file when there is one (the first of ``modules`` that has one), else a new
    line ``from <modules[0]> import <name>`` at its sorted place among the ``from`` lines of its
    section of the leading import block (after the section's ``import x`` lines)."""
    from torchlint.context import NodeEdit, _section, line_placement, render_node

    code = cst.Module([]).code_for_node
    for module_name in modules:
        for stmt in ctx.module.body:
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
                continue
            imp = stmt.body[0]
            if (isinstance(imp, cst.ImportFrom) and not imp.relative and imp.module is not None
                    and code(imp.module) == module_name and not isinstance(imp.names, cst.ImportStar)):
                return NodeEdit(imp, render_node(ctx.module, _with_name(imp, name), ()))  # at column 0
    module_name = modules[0]
    return line_placement(ctx.module, f"from {module_name} import {name}", (_section(module_name), 1, module_name.lower()))


def _with_name(imp: cst.ImportFrom, name: str) -> cst.ImportFrom:
    """``imp`` with ``name`` among its names, before the first name that sorts after it (the
    others keep their order), in the line's own layout: a parenthesized list laid out one name
    per line gets the new name on its own line."""
    names = list(imp.names)
    key = _name_key(name)
    at = next((i for i, a in enumerate(names) if isinstance(a.name, cst.Name) and _name_key(a.name.value) > key),
              len(names))
    if len(names) >= 2 and isinstance(names[0].comma, cst.Comma):
        between = names[0].comma.whitespace_after
    elif imp.lpar is not None and isinstance(imp.lpar.whitespace_after, cst.ParenthesizedWhitespace):
        between = imp.lpar.whitespace_after
    else:
        between = cst.SimpleWhitespace(" ")
    if isinstance(between, cst.ParenthesizedWhitespace):
        between = between.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    sep = cst.Comma(whitespace_after=between)
    alias = cst.ImportAlias(name=cst.Name(name))
    if at < len(names):
        names.insert(at, alias.with_changes(comma=sep))
    else:
        last = names[-1]
        if isinstance(last.comma, cst.Comma):  # a trailing comma stays trailing
            closing, kept = _split_comment(last.comma.whitespace_after, between)
            names[-1] = last.with_changes(comma=sep.with_changes(whitespace_after=kept))
            names.append(alias.with_changes(comma=last.comma.with_changes(whitespace_after=closing)))
        else:
            names[-1] = last.with_changes(comma=sep)
            names.append(alias)
    return imp.with_changes(names=names)
