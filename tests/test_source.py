"""Reading and decoding files (stage 2) and the row/column <-> offset locator."""

from __future__ import annotations

import codecs
import os

import pytest

from torchlint.diagnostics import Location
from torchlint.locator import Locator
from torchlint.source import UnreadableFile, decode_source, read_source


def test_utf8_bom_is_stripped_and_remembered():
    src = decode_source(codecs.BOM_UTF8 + b"x = 1\n")
    assert src.text == "x = 1\n" and src.bom and src.encoding == "utf-8"
    assert src.encode(src.text) == codecs.BOM_UTF8 + b"x = 1\n"


def test_pep263_declaration_is_used_and_kept_for_writing():
    data = b"# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n"
    src = decode_source(data)
    assert src.encoding == "iso-8859-1" and "café" in src.text
    assert src.encode(src.text) == data


def test_crlf_is_kept_verbatim():
    assert decode_source(b"a = 1\r\nb = 2\r\n").text == "a = 1\r\nb = 2\r\n"


def test_permission_error_gives_reason(monkeypatch, tmp_path):
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n")
    real_open = os.open

    def fake_open(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)  # as unprivileged: tests/test_hostile_io.py
    with pytest.raises(UnreadableFile, match="^Permission denied$"):
        read_source(str(path))


def test_directory_is_unreadable(tmp_path):
    with pytest.raises(UnreadableFile, match=r"not a regular file \(a folder\)"):
        read_source(str(tmp_path))


@pytest.mark.parametrize("text", ["a\nbc\r\nd\re", "no newline", "", "\n\n", "é😀\nx"])
def test_locator_round_trips(text):
    loc = Locator(text)
    for offset in range(len(text) + 1):
        assert loc.offset(loc.location(offset)) == offset


def test_locator_lines_and_clamping():
    loc = Locator("a\r\nbc\rd")
    assert [loc.line(r) for r in (1, 2, 3)] == ["a", "bc", "d"]
    assert loc.offset(Location(9, 1)) == len("a\r\nbc\rd")
    assert loc.location(4) == Location(2, 2)
