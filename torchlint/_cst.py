"""libcst, imported on first use.

Importing libcst costs 0.12-0.19 s, more than a run where one touched file has no candidate
site spends on everything else; such runs never parse with libcst. Every torchlint module says
``from torchlint import _cst as cst`` and writes ``cst.Call`` as before: the first name asked of
this module imports libcst and copies its public classes here, so every later ``cst.Call`` is a
plain module attribute, as fast as on libcst itself (the walk's isinstance checks ask millions
of times). Functions are looked up on libcst at each call, as before: a test that patches
``libcst.parse_module`` (or ``cst.parse_module`` here) sees torchlint's calls, and its undo
leaves nothing behind.

Module-level code must not touch ``cst.X`` (base classes, tuples of node types, annotations
evaluated at import): that would import libcst with the module. ``tests/test_lazy_import.py``
checks that importing every module, and a run which needs no libcst tree, never load it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator  # no other names: libcst has its own (``List``)

if TYPE_CHECKING:  # type checkers and editors see libcst's own names and types
    from libcst import *  # noqa: F401,F403
else:

    def __getattr__(name: str) -> Any:  # PEP 562: called only for a name not yet here
        if name.startswith("__"):  # probes such as __wrapped__ or __file__ lookups never load libcst
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import libcst

        namespace = globals()
        if "Module" not in namespace:  # the first use: libcst's classes become attributes here
            for public in libcst.__all__:
                value = getattr(libcst, public)
                if isinstance(value, type):
                    namespace[public] = value
        return getattr(libcst, name)  # a function, a submodule (``cst.metadata``) or AttributeError

    # The parsers by name: patching one here (``monkeypatch.setattr(parsing.cst, ...)``) and
    # undoing it restores this forwarder, never a copy that would hide a later patch of libcst.
    def parse_module(*args: Any, **kwargs: Any) -> Any:
        import libcst

        with unvalidated():
            return libcst.parse_module(*args, **kwargs)

    def parse_expression(*args: Any, **kwargs: Any) -> Any:
        import libcst

        return libcst.parse_expression(*args, **kwargs)

    def parse_statement(*args: Any, **kwargs: Any) -> Any:
        import libcst

        return libcst.parse_statement(*args, **kwargs)

    def __dir__() -> list[str]:
        import libcst

        return sorted(set(globals()) | set(libcst.__all__))


_validation_lock = threading.Lock()
_unvalidated_depth = 0


def _no_validation(self: Any) -> None:
    return None


@contextmanager
def unvalidated() -> Iterator[None]:
    """libcst's nodes built without their ``_validate()`` check meanwhile. Every node's
    ``__post_init__`` runs it (a node built by hand must be well formed); on a parser's output
    it can only pass, yet it costs 10-17% of ``parse_module`` (libcst's own comment on it: "It
    might make more sense to move validation work into the visitor, which would allow us to
    avoid validating the tree when parsing a file"). Only where ``CSTNode.__post_init__`` is
    exactly that call (libcst 1.9, pinned); nested and concurrent uses (the language server's
    threads) restore it when the last one ends. A node another thread builds by hand meanwhile
    is not checked: fixes are checked anyway by parsing the code they produce."""
    global _unvalidated_depth
    import libcst

    node = libcst.CSTNode
    original: Any
    with _validation_lock:
        original = _VALIDATING.get("post_init")
        if original is None:
            original = node.__dict__.get("__post_init__")
            if original is None or getattr(original, "__code__", None) is None or original.__code__.co_names != ("_validate",):
                original = False  # another libcst: nothing is patched
            _VALIDATING["post_init"] = original
        if original is not False:
            if _unvalidated_depth == 0:
                setattr(node, "__post_init__", _no_validation)
            _unvalidated_depth += 1
    try:
        yield
    finally:
        if original is not False:
            with _validation_lock:
                _unvalidated_depth -= 1
                if _unvalidated_depth == 0:
                    setattr(node, "__post_init__", original)


_VALIDATING: dict = {}  # "post_init": libcst's own CSTNode.__post_init__, or False: not patched


def load() -> None:
    """Import libcst now: a parent about to fork workers that will all parse with it (phase 3)
    imports it once, and every worker inherits it instead of importing it again."""
    import sys

    getattr(sys.modules[__name__], "Module")
