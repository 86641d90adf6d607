"""Fuzzing text and names (issue 32): line endings and file names.

- Line endings: a mutated fixture saved with lone CRs, CRLFs or a mix lints exactly like the
  same text with LF endings (CPython counts each as one line end), and its fixes keep the
  file's endings and compile.
- File names: any bytes a POSIX name may hold (not UTF-8, control characters, escape sequences,
  newlines, bidirectional controls) through every output format: valid UTF-8 out, JSON that a
  strict parser reads (no lone surrogate), XML that parses, one line per finding where the
  format says so, nothing a terminal would act on in the terminal formats.

Short profile with the suite (fixed seed); ``TORCHLINT_FUZZ_EXAMPLES=N`` for a long run.
"""

from __future__ import annotations

import json
import os
import re
from xml.etree import ElementTree as ET

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from test_fuzz import ALL, check_api, compiles, mutated_fixture  # noqa: E402
from torchlint.cli import main  # noqa: E402
from torchlint.engine import lint_source  # noqa: E402
from torchlint.fixer import fix_text  # noqa: E402
from torchlint.reporters import FORMATS  # noqa: E402

LONG = int(os.environ.get("TORCHLINT_FUZZ_EXAMPLES", "0"))


def profile(short: int):
    return settings(max_examples=LONG or short, deadline=None, derandomize=not LONG,
                    suppress_health_check=list(HealthCheck), database=None)


# -- line endings ---------------------------------------------------------------------------------

@st.composite
def with_endings(draw):
    """(LF text, the same text with other line endings)."""
    text = draw(mutated_fixture()).replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    style = draw(st.sampled_from(["cr", "crlf", "mixed"]))
    out = []
    for k, line in enumerate(lines[:-1]):
        if style == "cr":
            end = "\r"
        elif style == "crlf":
            end = "\r\n"
        else:
            end = draw(st.sampled_from(["\n", "\r", "\r\n"]))
        if end == "\r" and lines[k + 1] == "" and k + 1 < len(lines) - 1:
            end = "\r\n"  # "\r" + "\n" would be one CRLF: a line fewer
        out.append(line + end)
    return text, "".join(out) + lines[-1]


def _found(text: str):
    return sorted((d.code, d.location.row, d.location.column, d.end_location.row, d.end_location.column)
                  for d in lint_source(text, "m.py", ALL))


@profile(short=40)
@given(with_endings())
def test_line_endings_lint_as_lf(pair):
    lf, other = pair
    assert other.replace("\r\n", "\n").replace("\r", "\n") == lf
    assert _found(other) == _found(lf)
    check_api(other)
    if compiles(lf) and "\r" in other:
        fixed = fix_text(other, "m.py", ALL, unsafe=True).text
        if fixed != other and "\n" not in other:  # lone CRs only: a fix writes CRs too
            assert "\n" not in fixed, fixed


# -- file names through every output format ------------------------------------------------------

NAME_BYTES = st.sampled_from(
    [bytes([b]) for b in range(1, 256) if b != ord("/")] + [b"\xe2\x80\xae", b"\xe2\x80\xa8", b"\x1b[31m", b"\xc3\xa9"]
)
NAMES = st.lists(NAME_BYTES, min_size=1, max_size=8).map(lambda parts: b"".join(parts) + b".py").filter(
    lambda name: name not in (b".py",) and not name.startswith(b".") and len(name) < 200)
SNIPPET = b"import torch\nfor i in range(3):\n    y = torch.zeros(3).cuda()\n"
ONE_PER_LINE = {"concise": "TL202", "pylint": "TL202", "github": "::warning", "azure": "##vso", "json-lines": "TL202"}


def _no_raw_controls(text: str) -> None:
    bad = re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\ud800-\udfff]", text)
    assert not bad, (bad, text[:500])


@profile(short=6)
@given(st.lists(NAMES, min_size=1, max_size=4, unique=True))
def test_hostile_names_through_every_format(tmp_path_factory, capsys, names):
    root = tmp_path_factory.mktemp("names")
    for name in names:
        (root / os.fsdecode(name)).write_bytes(SNIPPET)
    here = os.getcwd()
    os.chdir(root)
    try:
        for fmt in sorted(FORMATS):
            code = main(["--isolated", "--no-cache", "--output-format", fmt, "."])
            out, err = capsys.readouterr()
            assert code == 1 and "internal error" not in err, (fmt, err)
            out.encode("utf-8")  # no lone surrogate: any strict UTF-8 stream takes it
            _no_raw_controls(out)
            if fmt in ONE_PER_LINE:
                lines = out.splitlines()
                assert len(lines) == len(names) and all(ONE_PER_LINE[fmt] in line for line in lines), (fmt, out)
            if fmt in ("json", "sarif", "gitlab", "rdjson"):
                json.dumps(json.loads(out), ensure_ascii=False).encode("utf-8")
            if fmt == "junit":
                assert len(ET.fromstring(out.encode("utf-8")).findall(".//failure")) == len(names)
            if fmt == "sarif":
                from urllib.parse import unquote_to_bytes

                uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                        for r in json.loads(out)["runs"][0]["results"]}
                assert {unquote_to_bytes(u) for u in uris} == set(names)
    finally:
        os.chdir(here)
