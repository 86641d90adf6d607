"""TL404: mixed precision through the device-generic ``torch.amp`` API."""

from __future__ import annotations

import functools
import re
from typing import Optional

from torchlint import _cst as cst

from torchlint.context import FixSpec, NodeEdit
from torchlint.diagnostics import SAFE
from torchlint.fixbuilders import with_leading_args
from torchlint.imports import dotted_name
from torchlint.rules.base import Rule
from torchlint.rules.compat import _spelling, compat_imported_names, in_compatibility_code
from torchlint.syntax import memo
from torchlint.tree import walk

# legacy name -> (new name, device, the legacy positional parameters in order)
LEGACY_AMP = {
    "torch.cuda.amp.autocast": ("torch.amp.autocast", "cuda", ("enabled", "dtype", "cache_enabled")),
    "torch.cpu.amp.autocast": ("torch.amp.autocast", "cpu", ("enabled", "dtype", "cache_enabled")),
    "torch.cuda.amp.GradScaler": ("torch.amp.GradScaler", "cuda", None),
    "torch.cpu.amp.GradScaler": ("torch.amp.GradScaler", "cpu", None),
}
# Changing these process-wide defaults makes `torch.amp.autocast(device)` (dtype=None,
# cache_enabled=None: read from them) differ from the legacy classes, which pass fixed values.
_AUTOCAST_DEFAULT_SETTERS = frozenset({"set_autocast_dtype", "set_autocast_cache_enabled"})


class LegacyAmpApi(Rule):
    """Flags the device-specific mixed-precision classes ``torch.cuda.amp.autocast``,
    ``torch.cuda.amp.GradScaler``, ``torch.cpu.amp.autocast`` and ``torch.cpu.amp.GradScaler``
    called directly, as context managers or as decorators, however imported. They are
    deprecated since torch 2.4 (a ``FutureWarning`` on every construction) in favour of
    ``torch.amp.autocast(device_type, ...)`` / ``torch.amp.GradScaler(device, ...)``.
    Silent for targets before 2.4 (the rule's ``min_torch_version``), in compatibility code
    (version tests, ``except ImportError``/``AttributeError``) and in test code.
    """

    code = "TL404"
    name = "legacy-amp-api"
    summary = "`torch.cuda.amp.autocast`/`GradScaler` (or `torch.cpu.amp.*`): deprecated device-specific AMP API."
    message = "`{old}` is deprecated since torch 2.4; use `{new}`."
    hint = "The device-specific `torch.cuda.amp`/`torch.cpu.amp` names warn on use; `torch.amp` takes the device type."
    calls = frozenset(LEGACY_AMP)
    fix_applicability = SAFE
    min_torch_version = (2, 4)
    tags = ("deprecation", "mixed-precision")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        last = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if last not in self._spellings():
            return
        name = self.ctx.resolve_call(node)
        entry = LEGACY_AMP.get(name) if name else None
        if entry is None:
            return
        root = dotted_name(node.func)
        if root and root.split(".", 1)[0] in compat_imported_names(self.ctx):
            return
        if in_compatibility_code(self.ctx, node) or _under_version_flag(self.ctx, node):
            return
        new, device, _ = entry
        message = self.message.format(old=name, new=f'{new}("{device}", ...)')
        self.report(node, message, self._fix(node, entry))

    def _spellings(self) -> frozenset:
        """Callee names that may stand for a legacy class here: its own names, and local names
        the file imports them under (``from torch.cuda.amp import autocast as ac``)."""
        def compute():
            names = {"autocast", "GradScaler"}
            names.update(local for local, target in self.ctx.imports.aliases.items()
                         if target.rsplit(".", 1)[-1] in names)
            return frozenset(names)

        return memo(self.ctx, "legacy_amp_spellings", self.ctx.module, compute)

    def _fix(self, node: cst.Call, entry) -> Optional[FixSpec]:
        new, device, positional_names = entry
        args = list(node.args)
        if positional_names is not None:  # autocast: the device takes the first position
            if any(a.star == "*" for a in args):
                return None
            if _sets_autocast_defaults(self.ctx):
                return None
            positional = [a for a in args if a.keyword is None and not a.star]
            if len(positional) > len(positional_names):
                return None
            args = [
                a.with_changes(keyword=cst.Name(positional_names[i]), equal=_equal()) if i < len(positional) else a
                for i, a in enumerate(args)
            ]
        spelling, import_edit = _spelling(self.ctx, new)
        replacement = with_leading_args(
            node.with_changes(func=cst.parse_expression(spelling), args=args), [cst.SimpleString(f'"{device}"')]
        )
        edits = (NodeEdit(node, replacement),) if import_edit is None else (import_edit, NodeEdit(node, replacement))
        return FixSpec(SAFE, f'Use `{new}("{device}", ...)`', edits)


# Version flags named for a torch release: `TORCH_2_4`, `TORCH_1_13`, `is_torch_2`, `torch_ge_2_4`.
_VERSION_FLAG = re.compile(r"(?i)torch\w*\d")


def _under_version_flag(ctx, node: cst.CSTNode) -> bool:
    """Either branch of an ``if``/conditional expression on a torch version flag
    (``torch.amp.GradScaler("cuda") if TORCH_2_4 else torch.cuda.amp.GradScaler()``)."""
    path = [*ctx.ancestors, node]
    for outer, inner in zip(path, path[1:]):
        if isinstance(outer, (cst.If, cst.IfExp)) and inner is not outer.test:
            for name in walk(outer.test):
                if isinstance(name, (cst.Name, cst.Attribute)) and _VERSION_FLAG.search(dotted_name(name) or ""):
                    return True
    return False


@functools.cache
def _equal() -> cst.AssignEqual:  # ``=`` without spaces; a function: a libcst node at import loads libcst
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _sets_autocast_defaults(ctx) -> bool:
    """May the file change autocast's process-wide dtype or cache default? Read from the text
    (a setter named anywhere, an alias or a comment included), not the tree: a partial parse
    leaves out the definitions without a legacy AMP call, and the setter may be in one of them."""
    return any(word in ctx.text for word in _AUTOCAST_DEFAULT_SETTERS)


RULES = [LegacyAmpApi]
