"""torchlint and libcst's API (issue 30 item 6): no private libcst name is imported by the
positions code, the one private call left (``CSTNode._codegen``) is checked against libcst's
public ``ByteSpanPositionProvider`` and falls back to it, and the pin is open.

Why ``_codegen`` stays (docs/architecture.md, positions.py): libcst's public positions come only
through ``MetadataWrapper.resolve``, which generates the whole module and then visits every node
(on the fixtures 5-7 times the CPU of torchlint's per-statement generation), and cannot generate
one statement of a module."""

from __future__ import annotations

import ast
import glob
import re
from pathlib import Path

import pytest

from torchlint import _cst as cst
from torchlint import engine, positions
from torchlint.config import Settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(set(glob.glob(str(ROOT / "fixtures" / "*.py")) + glob.glob(str(ROOT / "fixtures" / "**" / "*.py"), recursive=True)))


def _private_libcst_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("libcst"):
            if any(part.startswith("_") for part in node.module.split(".")):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("libcst") and any(p.startswith("_") for p in alias.name.split(".")):
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
    return found


def test_positions_and_cst_import_no_private_libcst_module():
    found = []
    for name in ("positions.py", "_cst.py", "context.py"):
        found += _private_libcst_imports(ROOT / "torchlint" / name)
    assert not found, "\n".join(found)


def test_the_pin_is_open():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    requirement = re.search(r'"(libcst[<>=~!][^"]*)"', text).group(1)
    assert requirement.startswith("libcst>=") and "<" not in requirement, requirement


def test_the_protocol_holds_on_the_installed_libcst():
    positions._PROTOCOL.clear()
    assert positions.protocol_ok()


def _findings(settings):
    out = []
    for path in FIXTURES:
        text = Path(path).read_text(encoding="utf-8")
        out.append([(d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column)
                    for d in engine.lint_source(text, path, settings)])
    return out


@pytest.fixture
def restore_protocol():
    saved = dict(positions._PROTOCOL)
    yield
    positions._PROTOCOL.clear()
    positions._PROTOCOL.update(saved)


def test_public_path_gives_the_same_ranges_on_every_fixture(restore_protocol):
    settings = Settings(root=str(ROOT))
    positions._PROTOCOL["ok"] = True
    private = _findings(settings)
    positions._PROTOCOL["ok"] = False  # as on a libcst whose codegen protocol changed
    public = _findings(settings)
    assert sum(map(len, private)) > 100
    assert public == private


def test_public_spans_count_characters_not_bytes():
    text = 's = "é😀"; t = x.cuda()  # ü\nu = "ß" + y\n'
    module = cst.parse_module(text)
    public = positions._public_spans(module, text)
    private = positions._spans(module)
    assert public == private
    call = module.body[0].body[1].value
    start, end = private[call]
    assert text[start:end] == "x.cuda()"


def test_a_protocol_change_met_on_a_real_tree_falls_back(monkeypatch, restore_protocol):
    """A libcst whose nodes call a state method torchlint's state lacks: the AttributeError
    switches this process to the public path, and the ranges are the same."""
    text = (ROOT / "fixtures" / "TL701.py").read_text(encoding="utf-8")  # findings inside functions
    settings = Settings(root=str(ROOT))
    positions._PROTOCOL["ok"] = True
    expected = [(d.code, d.location, d.end_location) for d in engine.lint_source(text, "t.py", settings)]
    assert expected
    monkeypatch.delattr(positions._OffsetState, "add_indent_tokens")
    found = [(d.code, d.location, d.end_location) for d in engine.lint_source(text, "t.py", settings)]
    assert found == expected
    assert positions._PROTOCOL["ok"] is False


def test_the_check_notices_a_state_that_records_wrong_ranges(monkeypatch, restore_protocol):
    monkeypatch.setattr(positions._OffsetState, "before_codegen", lambda self, node: self._starts.append(self.offset + 1))
    positions._PROTOCOL.clear()
    assert positions.protocol_ok() is False


def test_render_code_keeps_the_blocks_indentation_and_falls_back(restore_protocol):
    from torchlint.context import render_node

    module = cst.parse_module("def f():\n    if x:\n        y = g(1,\n              2)\n")
    call = module.body[0].body.body[0].body.body[0].body[0].value
    assert render_node(module, call, ("    ", "    ")) == "g(1,\n              2)"
    positions._PROTOCOL["ok"] = False
    assert render_node(module, call, ("    ", "    ")) == module.code_for_node(call)
