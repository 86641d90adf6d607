"""Fuzzing the whole path (issue 13): generated programs (hypothesmith, from Python's grammar)
and mutated rule fixtures (lines deleted, duplicated, re-indented, random tokens inserted, the
text cut at a random byte) through the API (``lint_source``, ``fix_text``) and the CLI.

Properties: no exception; every finding's range lies inside the file; ``--fix --unsafe-fixes``
output still compiles when the input did (and no fix is refused for breaking it); a second fix
pass changes nothing; ``--jobs 1`` and the pool, and a cold and a warm cache, give the same
findings.

The short profile runs with the normal test suite (fixed seed). A long local run:

    TORCHLINT_FUZZ_EXAMPLES=2000 python -m pytest -q tests/fuzz

(random seed each run; hypothesis prints the failing program and how to reproduce it).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from torchlint.cli import main  # noqa: E402
from torchlint.config import CliOverrides, SettingsResolver  # noqa: E402
from torchlint.engine import lint_source  # noqa: E402
from torchlint.fixer import fix_text  # noqa: E402
from torchlint.locator import Locator  # noqa: E402

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures").glob("TL*.py"))
SEEDS = [p.read_text(encoding="utf-8") for p in FIXTURES]

LONG = int(os.environ.get("TORCHLINT_FUZZ_EXAMPLES", "0"))


def profile(short: int):
    """Hypothesis settings: ``short`` examples with a fixed seed in the suite, else the long run."""
    return settings(
        max_examples=LONG or short,
        deadline=None,
        derandomize=not LONG,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


ALL = SettingsResolver(CliOverrides(select=["ALL"], preview=True), isolated=True).default

# -- inputs -----------------------------------------------------------------------------------------

TOKENS = [
    "(", ")", "[", "]", "{", "}", ":", ",", ".", "=", "+", "-", "*", "**", "\\\n", "\n", "\t", "    ",
    "'", '"', '"""', "#", "lambda", "if", "else", "for", "in", "not", "and", "await", "yield", "def f():",
    "class C:", "torch", ".cuda()", ".to(device)", ".item()", "loss.backward()", "optimizer.step()",
    "DataLoader(ds)", "with torch.no_grad():", "\r", "\r\n", "\x0c", "\u00e9", "\U0001f600", "0x", "1e",
    "# noqa", "# torchlint: noqa", "async ", "return", "import torch", "from torch import nn",
]


@st.composite
def mutated_fixture(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["delete", "duplicate", "truncate", "insert", "reindent", "endings"]))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "reindent":
            j = draw(st.integers(i, min(len(lines), i + 8)))
            shift = draw(st.sampled_from([-4, -2, -1, 1, 2, 4, 8]))
            for k in range(i, j):
                lines[k] = (" " * shift + lines[k]) if shift > 0 else lines[k][min(-shift, len(lines[k]) - len(lines[k].lstrip(" "))):]
        elif kind == "endings":  # lone CRs, CRLFs, or each line its own (issue 32): all valid Python
            style = draw(st.sampled_from(["\r", "\r\n", "mixed"]))
            for k, line in enumerate(lines):
                body = line.rstrip("\r\n")
                if body == line:
                    continue
                end = style if style != "mixed" else draw(st.sampled_from(["\n", "\r", "\r\n"]))
                if end == "\r" and k + 1 < len(lines) and lines[k + 1].startswith("\n"):
                    end = "\r\n"  # a lone CR before an empty LF line would make one CRLF of two ends
                lines[k] = body + end
        text = "".join(lines)
        if kind == "truncate":
            data = text.encode("utf-8")
            text = data[: draw(st.integers(0, len(data)))].decode("utf-8", "ignore")
        elif kind == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
    return text


def generated_programs():
    hypothesmith = pytest.importorskip("hypothesmith")
    # the generator's bare programs rarely mention torch: prefix an import so that rules run
    return hypothesmith.from_grammar().map(lambda source: "import torch\n" + source)


def compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "m.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False
    return True


# -- properties through the API ----------------------------------------------------------------------

def check_api(text: str) -> None:
    diagnostics = lint_source(text, "m.py", ALL)  # no exception
    lines = Locator(text + "\n").line_count
    for d in diagnostics:
        start, end = d.location, d.end_location
        assert 1 <= start.row <= lines and 1 <= end.row <= lines, d
        assert (start.row, start.column) <= (end.row, end.column), d
        assert start.column >= 1 and end.column >= 1, d
        for loc in (start, end):  # a column at most one past the end of its line
            assert loc.column <= len(Locator(text).line(loc.row)) + 2, d
    if not compiles(text):
        return
    result = fix_text(text, "m.py", ALL, unsafe=True)
    assert result.error is None, result.error  # no fix was refused for breaking the code
    assert compiles(result.text), result.text
    again = fix_text(result.text, "m.py", ALL, unsafe=True)
    assert again.text == result.text, "a second fix pass changed the file"


@profile(short=60)
@given(mutated_fixture())
def test_mutated_fixtures_api(text):
    check_api(text)


@profile(short=4)
@given(st.data())
def test_generated_programs_api(data):
    check_api(data.draw(generated_programs()))


# -- properties through the CLI ----------------------------------------------------------------------

def findings(args, capsys):
    code = main(["--isolated", "--select", "ALL", "--preview", "--output-format", "json", *args])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return sorted((d["filename"], d["code"], json.dumps(d["location"]), json.dumps(d["end_location"]))
                  for d in json.loads(out))


@profile(short=4)
@given(st.lists(mutated_fixture(), min_size=4, max_size=6))
def test_cli_pool_and_cache_agree(tmp_path_factory, capsys, monkeypatch, texts):
    import torchlint.runner

    monkeypatch.setattr(torchlint.runner, "MIN_BYTES_FOR_POOL", 0)  # a pool even for a few small files
    root = tmp_path_factory.mktemp("fuzz")
    for i, text in enumerate(texts):
        (root / f"m{i}.py").write_text(text, encoding="utf-8")
    single = findings(["--no-cache", "--jobs", "1", str(root)], capsys)
    pool = findings(["--no-cache", "--jobs", "2", str(root)], capsys)
    assert single == pool
    cache = str(root / "cache")
    cold = findings(["--cache-dir", cache, str(root)], capsys)
    warm = findings(["--cache-dir", cache, str(root)], capsys)
    assert cold == warm == single
