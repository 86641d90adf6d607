"""TL6xx: debugging and profiling tools left switched on."""

from __future__ import annotations

from typing import Optional, Tuple

from torchlint import _cst as cst

from torchlint.context import REPLACE, FixSpec, NodeEdit
from torchlint.fixbuilders import code_in_place, indentation, statement_removal_edits
from torchlint.heuristics import in_debug_branch
from torchlint.rules.base import Rule
from torchlint.syntax import get_arg, has_star_args, literal_value
from torchlint.torch_api import DETECT_ANOMALY, LEGACY_PROFILERS, SET_DETECT_ANOMALY

_MESSAGES = {
    SET_DETECT_ANOMALY: "`torch.autograd.set_detect_anomaly(True)` left on; remove it or put it behind a debug flag",
    DETECT_ANOMALY: "`torch.autograd.detect_anomaly()` left on; remove it or put it behind a debug flag",
    "torch.autograd.profiler.emit_nvtx": "`emit_nvtx()` left on; remove it or pass `enabled=` a flag",
}
_ANOMALY_HINT = (
    "Every forward op records a stack trace and every backward op checks its outputs for NaN, "
    "slowing training several-fold."
)
_HINTS = {
    SET_DETECT_ANOMALY: _ANOMALY_HINT,
    DETECT_ANOMALY: _ANOMALY_HINT,
    "torch.autograd.profiler.emit_nvtx": "It pushes an NVTX range around every op (`emit_nvtx(enabled=args.nvtx)`).",
}
_PROFILE_MESSAGE = "`torch.autograd.profiler.profile()` left on; remove it or pass `enabled=` a flag"
_PROFILE_HINT = (
    "It records every op's timing (and shapes/stacks if asked); `torch.profiler.profile` with a "
    "`schedule` profiles only a few steps."
)


def _switched_on(call: cst.Call, name: str) -> bool:
    """Is the tool certainly enabled? A variable or `**kwargs` flag is a deliberate switch."""
    if name in (SET_DETECT_ANOMALY, DETECT_ANOMALY) and get_arg(call, "check_nan") is not None:
        return False  # tuned on purpose: PyTorch's own AOTAutograd records stacks this way
    if name == SET_DETECT_ANOMALY:
        mode = get_arg(call, "mode", 0)
        return mode is not None and literal_value(mode.value) is True
    if name == DETECT_ANOMALY:
        return True
    if has_star_args(call):
        return False
    enabled = get_arg(call, "enabled", 0)
    return enabled is None or literal_value(enabled.value) is True


def _does_nothing(with_node: cst.With) -> bool:
    """The body is only `pass` / `...`."""
    body = with_node.body
    if isinstance(body, cst.SimpleStatementSuite):
        smalls = list(body.body)
    else:
        smalls = [s for line in body.body for s in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])]
    return all(
        isinstance(s, cst.Pass) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.Ellipsis)) for s in smalls
    )


def unwrap_with_edits(ctx, with_node: cst.With, item: cst.WithItem) -> Optional[Tuple[NodeEdit, ...]]:
    """Edits removing ``item`` from ``with_node``: the whole statement gives way to its body, moved
    left one level, when it is the only item; otherwise just that item goes. A comment on the
    `with` line is kept above the body. None when the item binds a name (`as prof`)."""
    if item.asname is not None or with_node.asynchronous is not None:
        return None
    indent = indentation(ctx, upto=with_node)
    if len(with_node.items) > 1:
        items = [i for i in with_node.items if i is not item]
        items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        code = code_in_place(ctx, with_node.with_changes(items=items, leading_lines=()))
        return (NodeEdit(with_node, code[len(indent):].rstrip("\r\n"), REPLACE),)
    body = with_node.body
    header = body.header if isinstance(body, cst.IndentedBlock) else body.trailing_whitespace
    comment = f"{header.comment.value}\n{indent}" if header.comment is not None else ""
    if isinstance(body, cst.SimpleStatementSuite):
        code = code_in_place(ctx, cst.SimpleStatementLine(body=body.body))
    else:
        code = "".join(code_in_place(ctx, stmt) for stmt in [*body.body, *body.footer])
    return (NodeEdit(with_node, comment + code[len(indent):].rstrip("\r\n"), REPLACE),)


class DebugToolLeftOn(Rule):
    """Flags autograd anomaly detection (`set_detect_anomaly(True)`, `with detect_anomaly():`)
    and the legacy autograd profilers (`torch.autograd.profiler.profile`, `emit_nvtx`) left
    switched on in non-test code.

    Anomaly mode records a Python stack trace for every forward op and checks every backward
    output for NaN; the legacy profiler records every op. Both are debugging aids that slow a
    run several-fold. Silent: `set_detect_anomaly(False)`, a flag passed as a variable
    (`set_detect_anomaly(args.debug)`, `profile(enabled=args.profile)`), test files and test
    functions, code under a debug branch (`if args.debug:`) or in a function, class or file named
    for debugging or profiling (`class AutogradProfiler`), and `torch.profiler.profile`.
    """

    code = "TL601"
    name = "anomaly-detection"
    summary = "Autograd anomaly detection or the legacy autograd profiler is left switched on."
    message = _MESSAGES[DETECT_ANOMALY]
    hint = _ANOMALY_HINT
    requires = (("detect_anomaly", "profile", "emit_nvtx"),)
    ast_candidate = staticmethod(lambda index: index.mentions("detect_anomaly", "profile", "emit_nvtx", substring=True))
    fix_applicability = "unsafe"

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve_call(node)
        if name != SET_DETECT_ANOMALY and name != DETECT_ANOMALY and name not in LEGACY_PROFILERS:
            return
        if not _switched_on(node, name) or in_debug_branch(self.ctx, node):
            return
        parent = self.ctx.parent
        in_with = isinstance(parent, cst.WithItem) and parent.item is node and isinstance(self.ctx.ancestors[-2], cst.With)
        if in_with and _does_nothing(self.ctx.ancestors[-2]):
            return  # `with profile(): pass`: a one-off initialisation, nothing is recorded
        edits = None
        if in_with:
            edits = unwrap_with_edits(self.ctx, self.ctx.ancestors[-2], parent)
            fix_message = "Remove the context manager, keeping its body"
        elif name == SET_DETECT_ANOMALY:
            edits = statement_removal_edits(self.ctx, node)
            fix_message = "Remove the `set_detect_anomaly(True)` call"
        fix = FixSpec("unsafe", fix_message, edits) if edits else None
        self.report(node, _MESSAGES.get(name, _PROFILE_MESSAGE), fix, hint=_HINTS.get(name, _PROFILE_HINT))


RULES = [DebugToolLeftOn]
