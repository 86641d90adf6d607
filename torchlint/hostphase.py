"""Functions a program runs only before it first touches an accelerator (issue 29, class 5).

The question behind ``FileModel.host_phase_functions()`` (``model.py``), asked of a program's text
and CPython tree: a script or a notebook (its cells in order, as one program) runs its module-level
statements top down. Until the first statement that may touch an accelerator has run, every
tensor and module the program made is on the host, so a function every call of which happens in
the statements before that one syncs with nothing: dlwpt-code's ``1_convolution.ipynb`` defines
``training_loop`` (cell 30) and calls it with a CPU model and CPU batches (cell 31), picks a
device in cell 35, and defines a new ``training_loop`` for the GPU in cell 36.

A module-level statement *may touch an accelerator* (read on its whole text, docstrings, comments
and the bodies of the functions it defines included, which only errs towards "touches"): an
accelerator word (``accelerator.accelerator_word``: ``cuda``, ``gpu``, ``Accelerator``...), a
device named (``device``, ``map_location``, ``.to(``), a deserialisation (``load(``: ``torch.load``
restores tensors on the device they were saved from), an import of anything but a few libraries
known to move no tensor of the program's (a project module may), or ``exec``/``eval``. A text that
runs other code unseen (``%run``, ``get_ipython``) has no such functions.

A function counts (module-level ``def``, found by name and by its place among the module-level
``def``s of that name) when it is called and every read of its name is in a module-level statement before the first
that may touch an accelerator, while this ``def`` is the name's binding, and never inside a
function, lambda or class body (those run later, or are methods); a ``global`` declaration of the
name anywhere disqualifies it. Pure functions on ``ast``; this module imports neither libcst, the
model nor the project.
"""

from __future__ import annotations

import ast
import re
from typing import Dict, FrozenSet, List, Optional, Tuple

from torchlint.accelerator import accelerator_word
from torchlint.source import line_starts

# Libraries whose code moves no tensor of the program's to a device unasked.
_HOST_LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "numpy", "scipy", "pandas", "matplotlib", "seaborn",
    "sklearn", "PIL", "cv2", "imageio", "skimage", "tqdm", "collections", "datetime", "time", "os", "sys", "math",
    "random", "json", "csv", "re", "itertools", "functools", "typing", "pathlib", "copy", "glob", "string", "io",
    "warnings", "dataclasses", "enum", "operator", "statistics", "__future__", "IPython", "h5py", "zipfile",
    "gzip", "tarfile", "shutil", "urllib", "requests", "logging", "argparse",
})
_TOUCHES = re.compile(r"device|map_location|\.\s*to\s*\(|\bload\s*\(|\bexec\s*\(|\beval\s*\(")
_UNSEEN_CODE = ("%run", "get_ipython", "run_line_magic", "run_cell_magic")


def _touches(statement: ast.stmt, text: str, starts: List[int]) -> bool:
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return False  # a docstring, a notebook cell's bare string: runs nothing
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        if isinstance(statement, ast.ImportFrom):
            if statement.level or not statement.module:
                return True
            roots = [statement.module.split(".", 1)[0]]
        else:
            roots = [alias.name.split(".", 1)[0] for alias in statement.names]
        if any(root not in _HOST_LIBRARIES for root in roots):
            return True
    first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", ())])
    last = statement.end_lineno or statement.lineno
    segment = text[starts[first - 1]:starts[min(last, len(starts) - 1)]]
    if accelerator_word(segment) is not None:
        return True
    for found in _TOUCHES.finditer(segment):  # a line that is only a comment does not count
        line_start = max(segment.rfind("\n", 0, found.start()), segment.rfind("\r", 0, found.start())) + 1
        if not segment[line_start:found.start()].lstrip().startswith("#"):
            return True
    return False


def host_phase_functions(text: str, tree: ast.Module) -> FrozenSet[Tuple[str, int]]:
    """(name, n) of the module-level ``def``s (the n-th, from 0, of that name) that run only
    before the program first touches an accelerator (see the module docstring)."""
    body = tree.body
    if not body or any(word in text for word in _UNSEEN_CODE):
        return frozenset()
    starts = line_starts(text)
    first_touch = next((i for i, s in enumerate(body) if _touches(s, text, starts)), len(body))
    if first_touch == 0:
        return frozenset()
    # the module-level `def`s before the first touch: name -> [(statement index, ordinal)]
    ordinals: Dict[str, int] = {}
    defs: Dict[str, List[Tuple[int, int]]] = {}
    for index, statement in enumerate(body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ordinal = ordinals.get(statement.name, 0)
            ordinals[statement.name] = ordinal + 1
            if index < first_touch:
                defs.setdefault(statement.name, []).append((index, ordinal))
    if not defs:
        return frozenset()
    # where each name is rebound unconditionally at module level (a later `def`, `name = ...`)
    rebinds: Dict[str, List[int]] = {}
    for index, statement in enumerate(body):
        for name in _bound_names(statement):
            if name in defs:
                rebinds.setdefault(name, []).append(index)
    spoiled = set()
    reads: Dict[str, List[int]] = {}  # name -> module-level statement indices reading it
    for index, statement in enumerate(body):
        stack: List[Tuple[ast.AST, bool]] = [(statement, False)]
        while stack:
            node, nested = stack.pop()
            kind = type(node)
            if kind is ast.Name and node.id in defs:  # type: ignore[attr-defined]
                if isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                    if nested:
                        spoiled.add(node.id)  # type: ignore[attr-defined]
                    else:
                        reads.setdefault(node.id, []).append(index)  # type: ignore[attr-defined]
                continue
            if kind in (ast.Global, ast.Nonlocal):
                spoiled.update(n for n in node.names if n in defs)  # type: ignore[attr-defined]
                continue
            inner = nested or kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                # decorators, defaults and bases run where the statement is
                fn = node
                for child in getattr(fn, "decorator_list", []) + getattr(fn, "bases", []):
                    stack.append((child, nested))
                if kind is not ast.ClassDef:
                    args = fn.args  # type: ignore[attr-defined]
                    for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
                        stack.append((default, nested))
                for child in fn.body:  # type: ignore[attr-defined]
                    stack.append((child, inner))
                continue
            stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    found = set()
    for name, places in defs.items():
        if name in spoiled:
            continue
        kills = rebinds.get(name, [])
        for index, ordinal in places:
            following = _next_after(kills, index)
            live = [read for read in reads.get(name, ()) if index < read and (following is None or read <= following)]
            if live and all(read < first_touch for read in live):  # called, and only early
                found.add((name, ordinal))
    return frozenset(found)


def _next_after(indices: List[int], index: int) -> Optional[int]:
    """The first of ``indices`` after ``index``."""
    return next((i for i in indices if i > index), None)


def _bound_names(statement: ast.stmt) -> List[str]:
    """Names a module-level statement binds for certain (not in a branch): ``def``/``class``
    names, plain assignment targets."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, ast.Assign):
        return [t.id for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and statement.value is not None and isinstance(statement.target, ast.Name):
        return [statement.target.id]
    return []
