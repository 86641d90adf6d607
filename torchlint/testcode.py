"""What counts as test code, for the engine's ``skip_in_tests`` (see ``rules/base.py``)."""

from __future__ import annotations

import re
from typing import Sequence

from torchlint import _cst as cst

_TEST_FOLDERS = frozenset({"test", "tests", "testing", "test_utils", "testing_utils", "test_helpers"})


def is_test_path(path: str) -> bool:
    """``test_x.py``, ``x_test.py``, ``conftest.py``, or anything under a ``tests``/``test``
    folder or a test-support one (``test_utils``, ``tests_fabric``, ``unit_tests``)."""
    parts = re.split(r"[\\/]", path)
    name = parts[-1]
    if name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return True
    return _in_test_folder(parts)


def _in_test_folder(parts: Sequence[str]) -> bool:
    # Not any `test_*` folder: pytest's temporary folders are named so, and a path may be absolute.
    return any(p in _TEST_FOLDERS or p.startswith("tests_") or p.endswith("_tests") for p in parts[:-1])


# What makes a `test_*.py` file a test module rather than a script that happens to be named so
# (`test_partseg.py`, an evaluation script): test functions or classes, or a test framework.
_TEST_MODULE_TEXT = re.compile(
    r"^(?:[ \t]*(?:async[ \t]+)?def[ \t]+test|class[ \t]+Test|import[ \t]+pytest|from[ \t]+pytest|"
    r"import[ \t]+unittest|from[ \t]+unittest)|unittest\.TestCase|@pytest\.",
    re.MULTILINE,
)


def is_test_module(path: str, text: str) -> bool:
    """Test code as a whole: ``conftest.py``, a file in a test folder, or a ``test_*.py`` /
    ``*_test.py`` file that holds tests (``def test_*``, ``class Test*``, pytest, unittest). A
    ``test_partseg.py`` with a loop over a loader and a ``__main__`` block is a script."""
    parts = re.split(r"[\\/]", path)
    name = parts[-1]
    if name == "conftest.py" or _in_test_folder(parts):
        return True
    if name.startswith("test_") or name.endswith("_test.py"):
        return _TEST_MODULE_TEXT.search(text) is not None
    return False


def in_test_scope(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside a ``test*`` function or a ``Test*`` class."""
    for node in ancestors:
        if isinstance(node, cst.FunctionDef) and node.name.value.startswith("test"):
            return True
        if isinstance(node, cst.ClassDef) and node.name.value.startswith("Test"):
            return True
    return False




def in_test_code(ctx) -> bool:
    """A test module, or inside a ``test*`` function or a ``Test*`` class. The engine applies
    this to every rule whose ``skip_in_tests`` is set; rules need not ask."""
    return is_test_module(ctx.path, ctx.text) or in_test_scope(ctx.ancestors)
