"""Fuzzing what issue 32 found at the edges of the file system: package layouts that change
under a warm cache (``__init__.py`` added and removed, a module moved between packages) and
hostile globs (``.gitignore``, ``exclude``, ``per-file-ignores``).

Properties: after every change a warm run reports exactly what a ``--no-cache`` run does, over
the whole tree and over the files named one by one; every glob either is rejected with a reason
or matches exactly as an independent reference matcher (git's wildmatch, read character by
character) says, and within a time bound whatever its stars; discovery and linting with those
globs in ``.gitignore``/``exclude``/``per-file-ignores`` end, without an exception.

Short profile with the suite (fixed seed); a long run: ``TORCHLINT_FUZZ_EXAMPLES=2000 python -m
pytest -q tests/fuzz``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from functools import lru_cache
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from torchlint.cli import main  # noqa: E402
from torchlint.config import CliOverrides, ConfigError, SettingsResolver, path_matches  # noqa: E402
from torchlint.discovery import discover  # noqa: E402
from torchlint.globs import GlobError, compile_glob  # noqa: E402

LONG = int(os.environ.get("TORCHLINT_FUZZ_EXAMPLES", "0"))
OLD = 1_600_000_000  # seconds: no mtime "racily clean"


def profile(short: int):
    return settings(max_examples=LONG or short, deadline=None, derandomize=not LONG,
                    suppress_health_check=list(HealthCheck), database=None)


# -- package layouts under a warm cache ---------------------------------------------------------

HELPER = "def accuracy(logits, y):\n    return (logits.argmax(1) == y).float().mean().item()\n"
#: Every module name the helper can have, imported under each: which one resolves depends on
#: where the helper lies and which folders are packages.
MODULES = ["metrics", "pkg.metrics", "pkg.sub.metrics", "sub.metrics", "other.metrics"]
TRAIN = "".join(f"from {m} import accuracy as a{i}\n" for i, m in enumerate(MODULES)) + (
    "\ndef train(model, opt, loader):\n    for x, y in loader:\n        out = model(x.cuda())\n"
    "        out.sum().backward()\n        opt.step()\n"
    + "".join(f"        a{i}(out, y)\n" for i in range(len(MODULES))))
PACKAGES = ["pkg", "pkg/sub", "other"]
PLACES = ["metrics.py", "pkg/metrics.py", "pkg/sub/metrics.py", "other/metrics.py"]

operations = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(PACKAGES)),  # add or remove <package>/__init__.py
    st.tuples(st.just("move"), st.sampled_from(PLACES)),  # the helper moves there
    st.tuples(st.just("copy"), st.sampled_from(PLACES)),  # a second helper appears there
    st.tuples(st.just("edit"), st.sampled_from(PLACES)),  # a helper's bytes change (or it appears)
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (OLD, OLD))


def _findings(args, capsys):
    code = main(["--isolated", "--select", "TL201", "--output-format", "json", "--exit-zero", "-j", "1", *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return sorted((os.path.relpath(d["filename"]), d["code"], d["location"]["row"]) for d in json.loads(out))


def _apply(root: Path, op, place: list) -> None:
    kind, where = op
    if kind == "init":
        init = root / where / "__init__.py"
        if init.exists():
            init.unlink()
        else:
            _write(init, "")
    elif kind == "move" and (root / place[0]).exists():
        (root / where).parent.mkdir(parents=True, exist_ok=True)
        if where != place[0]:
            os.replace(root / place[0], root / where)  # keeps its bytes and mtime
            place[0] = where
    elif kind in ("copy", "edit"):
        path = root / where
        text = path.read_text() + "\n# edited\n" if kind == "edit" and path.exists() else HELPER
        _write(path, text)


@profile(short=5)
@given(st.lists(operations, min_size=3, max_size=7))
def test_package_layout_changes_under_a_warm_cache(tmp_path_factory, capsys, monkeypatch, ops):
    root = tmp_path_factory.mktemp("layout")
    monkeypatch.chdir(root)
    cache = str(root.parent / (root.name + "-cache"))
    shutil.rmtree(cache, ignore_errors=True)
    _write(root / "train.py", TRAIN)
    _write(root / "metrics.py", HELPER)
    place = ["metrics.py"]
    for step, op in enumerate(ops):
        _apply(root, op, place)
        cold = _findings(["--no-cache", "."], capsys)
        assert _findings(["--cache-dir", cache, "."], capsys) == cold, (step, op)
        assert _findings(["--cache-dir", cache, "."], capsys) == cold, (step, op)  # and warm again
        named = sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))
        assert _findings(["--cache-dir", cache, *named], capsys) == _findings(["--no-cache", *named], capsys), (step, op)


# -- globs: an independent reference -----------------------------------------------------------

class Invalid(Exception):
    pass


_POSIX = {
    "alnum": str.isalnum, "alpha": str.isalpha, "blank": lambda c: c in " \t", "cntrl": lambda c: ord(c) < 32 or c == "\x7f",
    "digit": lambda c: "0" <= c <= "9", "graph": lambda c: "!" <= c <= "~", "lower": lambda c: "a" <= c <= "z",
    "print": lambda c: " " <= c <= "~", "punct": lambda c: "!" <= c <= "~" and not c.isalnum(),
    "space": lambda c: c in " \t\n\r\x0b\x0c", "upper": lambda c: "A" <= c <= "Z",
    "xdigit": lambda c: c in "0123456789abcdefABCDEF",
}


def _ref_class(p: str, i: int):
    """git's wildmatch reading of the class at ``p[i] == '['``: (predicate, index after it)."""
    i += 1
    negated = i < len(p) and p[i] in "!^"
    if negated:
        i += 1
    tests = []
    prev = None
    first = True
    while True:
        if i >= len(p):
            raise Invalid
        ch = p[i]
        if ch == "]" and not first:
            break
        first = False
        if ch == "\\":
            i += 1
            if i >= len(p):
                raise Invalid
            ch = p[i]
            tests.append(lambda c, ch=ch: c == ch)
            prev = ch
        elif ch == "-" and prev is not None and i + 1 < len(p) and p[i + 1] != "]":
            i += 1
            high = p[i]
            if high == "\\":
                i += 1
                if i >= len(p):
                    raise Invalid
                high = p[i]
            tests.append(lambda c, lo=prev, hi=high: lo <= c <= hi)
            prev = None
        elif ch == "[" and i + 1 < len(p) and p[i + 1] == ":":
            close = p.find("]", i + 2)
            if close < 0:
                raise Invalid
            if close - (i + 2) < 1 or p[close - 1] != ":":
                tests.append(lambda c: c == "[")  # not a POSIX class: '[' itself
                prev = "["
            else:
                name = p[i + 2:close - 1]
                if name not in _POSIX:
                    raise Invalid
                check = _POSIX[name]
                tests.append(lambda c, check=check: c.isascii() and check(c))
                prev = None
                i = close
        else:
            tests.append(lambda c, ch=ch: c == ch)
            prev = ch
        i += 1
    return (lambda c: c != "/" and any(t(c) for t in tests) != negated), i + 1


def _ref_tokens(component: str) -> list:
    out, i = [], 0
    while i < len(component):
        c = component[i]
        if c == "*":
            while i < len(component) and component[i] == "*":
                i += 1
            out.append("*")
            continue
        if c == "?":
            out.append(lambda ch: ch != "/")
        elif c == "[":
            test, i = _ref_class(component, i)
            out.append(test)
            continue
        elif c == "\\":
            if i + 1 >= len(component):
                raise Invalid
            i += 1
            out.append(lambda ch, lit=component[i]: ch == lit)
        else:
            out.append(lambda ch, lit=c: ch == lit)
        i += 1
    return out


def _ref_component(tokens: list, text: str) -> bool:
    @lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(tokens):
            return j == len(text)
        if tokens[i] == "*":
            return any(match(i + 1, k) for k in range(j, len(text) + 1))
        return j < len(text) and tokens[i](text[j]) and match(i + 1, j + 1)
    return match(0, 0)


def reference(pattern: str, path: str) -> bool:
    """Does ``pattern`` match ``path`` or one of its folders (raises Invalid)? Components:
    ``**`` alone is any number of them (at the end, at least one)."""
    parts = []
    for part in pattern.split("/"):
        if part == "**":
            if not parts or parts[-1] is not None:
                parts.append(None)
        elif part:
            parts.append(_ref_tokens(part))
    if not parts:
        return False
    names = path.split("/")

    @lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(parts):
            return True  # the rest lies inside the folder matched
        if parts[i] is None:
            if i == len(parts) - 1:
                return j < len(names)
            return any(match(i + 1, k) for k in range(j, len(names) + 1))
        return j < len(names) and _ref_component(parts[i], names[j]) and match(i + 1, j + 1)
    return match(0, 0)


GLOB_TOKENS = ["a", "b", "/", "*", "**", "?", "[", "]", "!", "^", "-", "\\", "[ab]", "[!a]", "[a-b]", "[b-a]",
               "[[:alpha:]]", "[[:digit:]]", "[:", ":]", "**/", "/**/", "/**", "*a", "*b", "."]
globs = st.lists(st.sampled_from(GLOB_TOKENS), min_size=1, max_size=10).map("".join)
paths = st.lists(st.text(alphabet="ab.-[]!", min_size=1, max_size=6), min_size=1, max_size=5).map("/".join)


@profile(short=300)
@given(globs, st.lists(paths, min_size=1, max_size=8))
def test_globs_match_as_git_reads_them(pattern, names):
    try:
        rx = compile_glob(pattern)
    except GlobError:
        with pytest.raises(Invalid):
            for name in names:
                reference(pattern, name)
        return
    for name in names:
        assert (rx.match(name) is not None) == reference(pattern, name), (pattern, name)


@profile(short=40)
@given(st.integers(1, 40), st.sampled_from(["*a", "*?", "*[ab]", "**/*a", "*a*"]), st.sampled_from(["b", "c", "", "/b"]),
       st.integers(20, 200))
def test_hostile_globs_are_matched_in_bounded_time(stars, piece, tail, length):
    pattern = piece * stars + "*" + tail
    started = time.perf_counter()
    rx = compile_glob(pattern)
    for name in ("a" * length, "/".join(["a" * 30] * (length // 30 + 1)), ("ab" * length)[:length]):
        rx.match(name)
        path_matches(pattern, name)
    assert time.perf_counter() - started < 0.5, pattern


def _within(seconds: float, fn):
    """``fn()``'s result; fails (instead of hanging the suite) when it takes longer."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # pragma: no cover - reported below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


hostile_lines = st.one_of(
    globs,
    st.builds(lambda n, t: "*a" * n + "*" + t, st.integers(4, 30), st.sampled_from(["b", "[b]", "?b", "/b"])),
    st.sampled_from(["[z-a]", "[]", "[!]", "[[:alpha:]]*.py", "[[:nope:]]", "x\\", "!*.py", "\\!x", "a/**/b/**/c"]),
)


@profile(short=12)
@given(st.lists(hostile_lines, min_size=1, max_size=5), st.sampled_from(["gitignore", "exclude", "per-file-ignores"]))
def test_hostile_globs_through_discovery_and_config(tmp_path_factory, capsys, lines, where):
    root = tmp_path_factory.mktemp("globs")
    (root / ".git").mkdir()
    names = ["a" * 60 + ".py", "ab" * 20 + ".py", "[x].py", "!x.py", "a/b/c.py", "sub/a" * 3 + ".py"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("import torch.nn as nn\nm = nn.DataParallel(m)\n")
    overrides = CliOverrides(select=["TL701"])
    config = root.parent / (root.name + ".toml")  # the same globs for the command line run
    if where == "gitignore":
        (root / ".gitignore").write_text("\n".join(lines) + "\n")
        config.write_text('select = ["TL701"]\n')
    elif where == "exclude":
        overrides.exclude = lines
        config.write_text(f'select = ["TL701"]\nexclude = {json.dumps(lines)}\n')
    else:
        overrides.per_file_ignores = [f"{line}:TL701" for line in lines]
        table = ", ".join(f"{json.dumps(line)} = [\"TL701\"]" for line in dict.fromkeys(lines))
        config.write_text(f'select = ["TL701"]\nper-file-ignores = {{ {table} }}\n')
    argv = ["--config", str(config), "--no-cache", "--output-format", "json", str(root)]
    try:
        resolver = SettingsResolver(overrides, isolated=True, cwd=str(root))
    except ConfigError as exc:  # an invalid glob in the configuration: a one-line reason
        assert "invalid glob" in str(exc) and "\n" not in str(exc)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "invalid glob" in err and len(err.strip().splitlines()) == 1
        return
    found = _within(10, lambda: discover([str(root)], resolver))
    assert set(found) <= {os.path.normpath(str(root / n)) for n in names}
    for path in found:
        _within(10, lambda: resolver.for_path(path).codes_for_path(path))
    code = _within(30, lambda: main(argv))
    out = capsys.readouterr().out
    assert code in (0, 1) and isinstance(json.loads(out), list)
