"""Hostile and unlucky input, round two (issue 32), on the file-system side: a cache folder that
is not torchlint's (items 1, 11), globs that made the regex engine backtrack for minutes or
crash (items 2, 16), an unreadable subfolder during config discovery (item 3), a package layout
change the summaries cache missed (item 4), a configuration nested 100,000 deep (item 26); and
issue 30's configuration traps: ``!`` in ``per-file-ignores``/``exclude``, ``.git/info/exclude``
and the global gitignore, the user guide's configuration examples.

Permission tests run as an unprivileged user: as root (CI), a forked child drops to ``nobody``
(created if the machine has none) and calls ``torchlint.cli.main`` itself; everything it needs
is imported before (the interpreter's files may not be readable by that user)."""

from __future__ import annotations

import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import torchlint.cache as cache_mod
import torchlint.dependencies  # noqa: F401  (imported before dropping privileges)
import torchlint.gitconfig  # noqa: F401
import torchlint.runner  # noqa: F401
from torchlint.cli import main
from torchlint.config import ConfigError, Settings, path_matches, settings_from_table
from torchlint.globs import compile_glob, glob_problem
from torchlint.ruledocs import code_blocks

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "torchlint"]
BAD = "import torch.nn as nn\nm = nn.DataParallel(m)\n"  # TL701
OLD = 1_600_000_000  # seconds: an mtime far older than the cache's 7 days
IS_ROOT = os.geteuid() == 0
HOSTILE = "*a" * 12 + "*b"  # 27 bytes; against 60 'a's a backtracking regex never returns


def cli(*args, cwd, timeout=60, env=None):
    """The command in a fresh process: a hang fails the test instead of blocking it."""
    return subprocess.run(CLI + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A git repository (a ``.git`` folder) as the working directory, with no cache folder
    and no git configuration from outside it."""
    monkeypatch.delenv(cache_mod.ENV_VAR, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    return repo


def concise(capsys, *args):
    """(exit code, the concise lines, stderr)."""
    code = main(["--output-format", "concise", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def files_of(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


# -- item 1: a cache folder that is not torchlint's is never written into or pruned --------------

def _precious(folder: Path) -> dict:
    """A user's folder holding what the old cache code destroyed: a .gitignore and old JSON
    files under v1/ and v1/summaries/, some named as torchlint names its indexes."""
    (folder / "v1" / "summaries").mkdir(parents=True)
    (folder / ".gitignore").write_text("secrets.txt\n")
    for rel in ("v1/results.json", "v1/0123456789abcdef01234567.json",
                "v1/summaries/data.json", "v1/summaries/76543210fedcba9876543210.project.json"):
        (folder / rel).write_text('{"mine": true}')
        os.utime(folder / rel, (OLD, OLD))
    return files_of(folder)


@pytest.mark.parametrize("how", ["flag", "env", "config"])
def test_a_cache_dir_naming_a_users_folder_destroys_nothing(project, capsys, monkeypatch, how):
    outside = project.parent / "outside"
    outside.mkdir()
    before = _precious(outside)
    (project / "a.py").write_text(BAD)
    args = ["a.py"]
    if how == "flag":
        args = ["--cache-dir", str(outside), "a.py"]
    elif how == "env":
        monkeypatch.setenv(cache_mod.ENV_VAR, str(outside))
    else:  # a repository's configuration aiming outside the repository
        (project / "pyproject.toml").write_text('[tool.torchlint]\ncache-dir = "../outside"\n')
    for _ in range(2):
        code, out, err = concise(capsys, *args)
        assert code == 1 and [line.split()[1] for line in out] == ["TL701"]
        assert err.count("torchlint: warning: not caching:") == 1 and "is not a torchlint cache" in err
    assert files_of(outside) == before


def test_cache_dir_dot_keeps_the_projects_gitignore(project, capsys):
    (project / ".gitignore").write_text("*.log\n")
    (project / "a.py").write_text(BAD)
    code, out, err = concise(capsys, "--cache-dir", ".", "a.py")
    assert code == 1 and len(out) == 1
    assert "not caching" in err
    assert (project / ".gitignore").read_text() == "*.log\n"
    assert sorted(p.name for p in project.iterdir()) == [".git", ".gitignore", "a.py"]


def test_an_empty_folder_becomes_the_cache_and_a_torchlint_cache_keeps_its_gitignore(project, capsys):
    (project / "a.py").write_text(BAD)
    (project / "empty").mkdir()
    concise(capsys, "--cache-dir", "empty", "a.py")
    assert cache_mod.is_torchlint_cache(str(project / "empty"))
    assert (project / "empty" / ".gitignore").read_text() == "# Created by torchlint.\n*\n"
    (project / "empty" / ".gitignore").write_text("*\n!keep-me\n")  # the user's edit stays
    os.utime(project / "a.py", (OLD, OLD))
    code, out, err = concise(capsys, "--cache-dir", "empty", "a.py")
    assert code == 1 and err.count("warning") == 0
    assert (project / "empty" / ".gitignore").read_text() == "*\n!keep-me\n"


def test_only_torchlints_own_old_indexes_are_pruned(project, capsys):
    (project / "a.py").write_text(BAD)
    concise(capsys, "a.py")
    v1 = project / ".torchlint_cache" / "v1"
    stale, mine = v1 / "0123456789abcdef01234567.json", v1 / "notes.json"
    for path in (stale, mine, v1 / "summaries" / "readme.json"):
        path.write_text("{}")
        os.utime(path, (OLD, OLD))
    os.utime(project / "a.py", (OLD + 1, OLD + 1))  # a change: the index is written again
    concise(capsys, "a.py")
    assert not stale.exists()
    assert mine.exists() and (v1 / "summaries" / "readme.json").exists()


@pytest.mark.parametrize("linked", ["v1", "v1/summaries"])
def test_a_symlinked_folder_inside_the_cache_is_never_followed(project, capsys, linked):
    """In a shared cache another user can point ``v1`` at a victim's folder."""
    (project / "a.py").write_text(BAD)
    concise(capsys, "a.py")
    victim = project.parent / "victim"
    victim.mkdir()
    before = _precious(victim)
    target = project / ".torchlint_cache" / linked
    shutil.rmtree(target)
    target.symlink_to(victim, target_is_directory=True)
    os.utime(project / "a.py", (OLD + 1, OLD + 1))
    for _ in range(2):
        code, out, err = concise(capsys, "a.py")
        assert code == 1 and len(out) == 1  # the finding still reported
        assert "is a symbolic link; torchlint does not follow links inside its cache" in err
    assert files_of(victim) == before


def test_clean_refuses_a_folder_tagged_by_another_program(project, capsys):
    other = project / "pipcache"
    other.mkdir()
    (other / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# pip's cache\n")
    (other / "wheel.whl").write_text("keep")
    assert main(["clean", "--cache-dir", "pipcache"]) == 2
    assert "not a torchlint cache" in capsys.readouterr().err
    assert (other / "wheel.whl").exists()


# -- item 11: the project snapshot carries a checksum -------------------------------------------

HELPER = "def accuracy(logits, y):\n    return (logits.argmax(1) == y).float().mean().item()\n"
TRAIN = ("from {module} import accuracy\n\ndef train(model, opt, loader):\n    for x, y in loader:\n"
         "        out = model(x.cuda())\n        out.sum().backward()\n        opt.step()\n"
         "        acc = accuracy(out, y)\n")


def tl201(capsys, *extra):
    main(["--output-format", "json", "--exit-zero", "--select", "TL201", *extra, "."])
    found = json.loads(capsys.readouterr().out)
    return sorted((os.path.relpath(d["filename"]), d["location"]["row"]) for d in found)


def test_an_edited_project_snapshot_is_rebuilt_not_trusted(project, capsys):
    for name, text in (("metrics.py", HELPER), ("train.py", TRAIN.format(module="metrics"))):
        (project / name).write_text(text)
        os.utime(project / name, (OLD, OLD))
    assert tl201(capsys) == [("metrics.py", 2)]
    (stored,) = (project / ".torchlint_cache").rglob("*.project.json")
    text = stored.read_text()
    header, _, body = text.partition("\n") if not text.startswith("{") else ("", "", text)
    data = json.loads(body)
    assert data["facts"]
    data["facts"] = {}  # stats unchanged: only a checksum can tell
    stored.write_text((header + "\n" if header else "") + json.dumps(data, separators=(",", ":")))
    assert tl201(capsys) == [("metrics.py", 2)]
    stored.write_bytes(stored.read_bytes()[:-3])  # cut short
    assert tl201(capsys) == [("metrics.py", 2)]
    assert tl201(capsys) == tl201(capsys, "--no-cache")


# -- item 4: the summaries cache follows the package layout -------------------------------------

def test_an_init_py_added_or_removed_changes_the_warm_run_as_the_cold_one(project, capsys):
    (project / "pkg").mkdir()
    for path, text in ((project / "pkg" / "metrics.py", HELPER), (project / "train.py", TRAIN.format(module="pkg.metrics"))):
        path.write_text(text)
        os.utime(path, (OLD, OLD))
    assert tl201(capsys) == tl201(capsys, "--no-cache") == []  # pkg.metrics is not a module yet
    init = project / "pkg" / "__init__.py"
    for step in range(3):
        init.write_text("")
        os.utime(init, (OLD, OLD))
        assert tl201(capsys) == tl201(capsys, "--no-cache") == [("pkg/metrics.py", 2)], step
        init.unlink()
        assert tl201(capsys) == tl201(capsys, "--no-cache") == [], step
    # the package marker outside the linted files (only pkg/metrics.py and train.py named)
    init.write_text("")
    os.utime(init, (OLD, OLD))
    named = ["pkg/metrics.py", "train.py"]
    main(["--output-format", "json", "--exit-zero", "--select", "TL201", *named])
    warm = json.loads(capsys.readouterr().out)
    init.unlink()
    main(["--output-format", "json", "--exit-zero", "--select", "TL201", *named])
    after = json.loads(capsys.readouterr().out)
    main(["--output-format", "json", "--exit-zero", "--select", "TL201", "--no-cache", *named])
    assert after == json.loads(capsys.readouterr().out) == [] and len(warm) == 1


# -- items 2 and 16: globs ---------------------------------------------------------------------

@pytest.mark.parametrize("pattern, path, expected", [
    ("**/*.py", "a/b/c.py", True),
    ("*.py", "c.py/inside", True),  # a match of a folder covers what it holds
    ("*.py", "a.pyc", False),
    ("tests/*.py", "tests/a.py", True),
    ("tests/*.py", "tests/sub/a.py", False),
    ("tests/**", "tests/sub/a.py", True),
    ("tests/**", "tests", False),  # git: everything inside, not the folder itself
    ("**/gen", "a/b/gen/x.py", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b/z.py", True),
    ("a**b", "a/x/b", False),  # '**' inside a component is a plain '*', as in git
    ("a**b", "axxb", True),
    ("[z-a]*", "m.py", False),  # a range written backwards: its first character only, as in git
    ("[z-a]*", "z.py", True),
    ("[!a]*.py", "b.py", True),
    ("[!a]*.py", "a.py", False),
    ("[^a]x", "/x", False),  # a class never matches '/'
    ("[[:alpha:]]*.py", "x1.py", True),
    ("[[:alpha:]]*.py", "1x.py", False),
    ("[[:digit:][:upper:]]", "7", True),
    ("[]]", "]", True),
    ("[!]]", "a", True),
    ("\\*.py", "*.py", True),
    ("\\*.py", "a.py", False),
    ("*", "name\nwith newline.py", True),
    (HOSTILE, "a" * 60, False),
    (HOSTILE, "a" * 60 + "b", True),
    ("**/" + HOSTILE, "/".join(["a" * 60] * 40), False),
    ("**/a/" * 20 + "b", "/".join(["a"] * 200), False),
])
def test_glob_matching(pattern, path, expected):
    assert (compile_glob(pattern).match(path) is not None) is expected


@pytest.mark.parametrize("pattern, path, expected", [
    ("*.py", "a/b/c.py", True),  # without '/': any component
    ("b", "a/b/c.py", True),
    ("a/b", "x/a/b/c.py", False),  # with '/': from the root
    ("/a", "a/c.py", True),
    ("./a/*.py", "./a/c.py", True),
    (".hidden/*.py", "./.hidden/c.py", True),
])
def test_path_matches(pattern, path, expected):
    assert path_matches(pattern, path) is expected


@pytest.mark.parametrize("pattern, problem", [
    ("[]", "unclosed character class"), ("[!]", "unclosed character class"),
    ("x[", "unclosed character class"), ("[[:nope:]]", "unknown character class [:nope:]"),
    ("a\\", "a trailing backslash"),
])
def test_globs_git_cannot_match_are_named(pattern, problem):
    assert glob_problem(pattern) == problem


def test_a_hostile_glob_matches_in_linear_time():
    started = time.perf_counter()
    for stars in range(1, 40):
        compile_glob("*a" * stars + "*b").match("a" * 60)
        compile_glob("**/" + "*a" * stars + "*b").match("/".join(["a" * 60] * 20))
    assert time.perf_counter() - started < 1.0  # was 4 s for 6 stars alone, 28 s for 7


@pytest.mark.parametrize("where", ["gitignore", "exclude", "per-file-ignores", "info-exclude"])
def test_hostile_globs_do_not_hang_a_run(tmp_path, where):
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    name = "a" * 60 + ".py"
    (repo / name).write_text(BAD)
    if where == "gitignore":
        (repo / ".gitignore").write_text(HOSTILE + "\n")
    elif where == "info-exclude":
        (repo / ".git" / "info" / "exclude").write_text(HOSTILE + "\n")
    elif where == "exclude":
        (repo / "pyproject.toml").write_text(f'[tool.torchlint]\nexclude = ["{HOSTILE}"]\n')
    else:
        (repo / "pyproject.toml").write_text(f'[tool.torchlint]\nper-file-ignores = {{ "{HOSTILE}" = ["TL701"] }}\n')
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"), GIT_CONFIG_NOSYSTEM="1")
    env.pop(cache_mod.ENV_VAR, None)
    started = time.monotonic()
    done = cli("--no-cache", "--output-format", "concise", ".", cwd=repo, timeout=30, env=env)
    assert time.monotonic() - started < 20
    assert done.returncode == 1, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()] == ["TL701"]


def test_gitignore_lines_git_accepts_never_crash_and_posix_classes_work(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("[z-a]\n[]\n[!]\n[[:nope:]]\nx\\\n[[:alpha:]]*.py\n")
    (repo / "abc.py").write_text(BAD)  # ignored by [[:alpha:]]*.py
    (repo / "1.py").write_text(BAD)
    done = subprocess.run([sys.executable, "-W", "error", "-m", "torchlint", "--no-cache", "--output-format",
                           "concise", "."], cwd=repo, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, HOME=str(tmp_path), GIT_CONFIG_NOSYSTEM="1"))
    assert done.returncode == 1, done.stderr
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["1.py"]
    assert "Warning" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.parametrize("table, flag", [
    ('exclude = ["[]"]', None), ('per-file-ignores = { "x[" = ["TL701"] }', None),
    (None, ["--exclude", "[!]"]), (None, ["--per-file-ignores", "[[:nope:]]:TL701"]),
])
def test_an_invalid_glob_in_the_configuration_is_a_one_line_error(project, capsys, table, flag):
    (project / "a.py").write_text(BAD)
    if table:
        (project / "pyproject.toml").write_text(f"[tool.torchlint]\n{table}\n")
    code = main(["--no-cache", *(flag or []), "a.py"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "invalid glob" in err and "Traceback" not in err


# -- issue 30: '!' in per-file-ignores and exclude ----------------------------------------------

def test_a_negated_per_file_ignores_glob_applies_to_the_files_it_does_not_match(project, capsys):
    (project / "src").mkdir()
    for rel in ("train.py", "src/model.py"):
        (project / rel).write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nper-file-ignores = { "!src/**" = ["TL701"] }\n')
    code, out, _ = concise(capsys, "--no-cache", ".")
    assert [line.split(":")[0] for line in out] == ["src/model.py"]
    code, out, _ = concise(capsys, "--no-cache", "--isolated", "--per-file-ignores", "!train.py:TL701", ".")
    assert [line.split(":")[0] for line in out] == ["train.py"]


def test_a_negated_exclude_glob_takes_back_what_an_earlier_one_left_out(project, capsys):
    (project / "gen").mkdir()
    for rel in ("gen_a.py", "gen_keep.py", "main.py", "gen/x.py"):
        (project / rel).write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["gen_*.py", "!gen_keep.py", "gen"]\n')
    code, out, _ = concise(capsys, "--no-cache", ".")
    assert sorted(line.split(":")[0] for line in out) == ["gen_keep.py", "main.py"]
    code, out, _ = concise(capsys, "--no-cache", "--force-exclude", "gen_a.py", "gen_keep.py")
    assert [line.split(":")[0] for line in out] == ["gen_keep.py"]


# -- issue 30: .git/info/exclude and the global gitignore ---------------------------------------

def _tree(repo: Path) -> None:
    for rel in ("kept.py", "local.py", "global.py", "sub/global.py", "configured.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(BAD)


def _linted(capsys) -> list:
    code, out, _ = concise(capsys, "--no-cache", ".")
    return sorted(line.split(":")[0] for line in out)


def test_info_exclude_and_the_default_global_ignore_file_are_honoured(project, capsys):
    _tree(project)
    (project / ".git" / "info").mkdir()
    (project / ".git" / "info" / "exclude").write_text("local.py\n")
    xdg = Path(os.environ["XDG_CONFIG_HOME"]) / "git"
    xdg.mkdir(parents=True)
    (xdg / "ignore").write_text("global.py\n")
    assert _linted(capsys) == ["configured.py", "kept.py"]
    (project / ".gitignore").write_text("!sub/global.py\n")  # a .gitignore wins over both
    assert _linted(capsys) == ["configured.py", "kept.py", "sub/global.py"]


def test_core_excludes_file_from_the_users_and_the_repositorys_git_config(project, capsys, monkeypatch):
    _tree(project)
    home = Path(os.environ["HOME"])
    (home / "ignores").write_text("global.py\n")
    (home / ".gitconfig").write_text('[user]\n\tname = x\n[core]\n\texcludesFile = "~/ignores"  ; mine\n')
    assert _linted(capsys) == ["configured.py", "kept.py", "local.py"]
    (project / ".git" / "repo-ignores").write_text("configured.py\n")
    (project / ".git" / "config").write_text(f"[core]\n\texcludesfile = {project / '.git' / 'repo-ignores'}\n")
    assert _linted(capsys) == ["global.py", "kept.py", "local.py", "sub/global.py"]
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "nothing"))
    (project / ".git" / "config").write_text("[core]\n\texcludesFile =\n")  # set empty: none
    assert _linted(capsys) == ["configured.py", "global.py", "kept.py", "local.py", "sub/global.py"]


def test_a_worktree_reads_the_common_git_folders_info_exclude(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    main_git = tmp_path / "main" / ".git"
    (main_git / "info").mkdir(parents=True)
    (main_git / "info" / "exclude").write_text("local.py\n")
    (main_git / "worktrees" / "wt").mkdir(parents=True)
    (main_git / "worktrees" / "wt" / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'wt'}\n")
    _tree(wt)
    monkeypatch.chdir(wt)
    assert _linted(capsys) == ["configured.py", "global.py", "kept.py", "sub/global.py"]


# -- issue 30: the user guide's configuration examples are accepted -----------------------------

def test_every_toml_example_of_the_user_guide_is_a_valid_configuration():
    blocks = code_blocks((ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8"), "toml")
    assert blocks
    for block in blocks:
        import tomllib

        data = tomllib.loads(block)
        table = data.get("tool", {}).get("torchlint", data if "tool" not in data else {})
        settings_from_table(table, "docs/user-guide.md", Settings())


def test_a_rules_table_gets_an_error_that_says_what_to_use_instead():
    with pytest.raises(ConfigError, match=r"unknown key 'tool.torchlint.rules'.*no options"):
        settings_from_table({"rules": {"TL101": {}}}, "pyproject.toml", Settings())


# -- item 26: a configuration nested 100,000 deep ------------------------------------------------

@pytest.mark.parametrize("name, prefix", [("pyproject.toml", "[tool.torchlint]\n"), ("torchlint.toml", "")])
@pytest.mark.parametrize("value", ["[" * 100_000 + "]" * 100_000, "{a=" * 100_000 + "1" + "}" * 100_000],
                         ids=["arrays", "inline-tables"])
def test_a_value_nested_100000_deep_is_a_configuration_error(project, capsys, name, prefix, value):
    (project / "a.py").write_text("x = 1\n")
    (project / name).write_text(f"{prefix}select = {value}\n")
    code = main(["--no-cache", "a.py"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [f"torchlint: error: {project / name}: invalid TOML: values nested too deeply"]


# -- item 3: an unreadable subfolder, as an unprivileged user -----------------------------------

@pytest.fixture
def shared_dir():
    """A folder an unprivileged user can enter (pytest's tmp_path lives under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="torchlint-round2-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    for p in path.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:  # a machine without nobody: make a user (root only gets here)
        subprocess.run(["useradd", "--system", "--no-create-home", "torchlint-test"], check=True)
        return pwd.getpwnam("torchlint-test")


def as_unprivileged(argv, cwd):
    """(exit code, stdout, stderr) of ``torchlint argv`` run by an unprivileged user: as root,
    a forked child that switches to ``nobody``; otherwise the current user."""
    user = _unprivileged_user() if IS_ROOT else None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 99
        try:
            os.close(out_r)
            os.close(err_r)
            if user is not None:
                os.setgroups([])
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
            os.chdir(cwd)
            sys.stdout = io.TextIOWrapper(os.fdopen(out_w, "wb", buffering=0), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(err_w, "wb", buffering=0), write_through=True)
            code = main(list(argv))
        except BaseException as exc:
            os.write(err_w, f"child failed: {exc!r}".encode())
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    with os.fdopen(out_r) as out, os.fdopen(err_r) as err:
        stdout, stderr = out.read(), err.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), stdout, stderr


@pytest.mark.parametrize("lock", ["mode 0000", "another user's 0700"])
def test_an_unreadable_subfolder_does_not_abort_config_discovery(shared_dir, capsys, lock):
    (shared_dir / ".git").mkdir()
    (shared_dir / "ok.py").write_text(BAD)
    (shared_dir / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["ALL"]\n')
    locked = shared_dir / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(BAD)
    (locked / "torchlint.toml").write_text('ignore = ["TL701"]\n')
    argv = ["--no-cache", "--output-format", "concise", "-j", "1", "."]
    main(argv[:-1] + [str(shared_dir)])  # as root: every lazily imported module loaded before the fork
    capsys.readouterr()
    if lock == "mode 0000":
        if IS_ROOT:
            user = _unprivileged_user()
            os.chown(locked, user.pw_uid, user.pw_gid)
        locked.chmod(0o000)
    else:
        if not IS_ROOT:
            pytest.skip("needs a folder of another user: run as root, it makes one")  # pragma: no cover
        locked.chmod(0o700)  # root's, and nobody cannot enter it
    for args in (argv, argv[:-1] + ["locked/hidden.py"]):
        code, out, err = as_unprivileged(args, shared_dir)
        assert "internal error" not in err and "child failed" not in err, err
        assert code == 1, err
        lines = out.splitlines()
        assert "All checks passed" not in out + err
        if args is argv:
            assert lines[0] == "locked:1:1: TL002 Cannot read file: cannot list folder: Permission denied"
            assert [line.split()[1] for line in lines[1:]] == ["TL701"] and lines[1].startswith("ok.py")
        else:
            assert lines == ["locked/hidden.py:1:1: TL002 Cannot read file: Permission denied"]
        # once at most: a folder's settings are looked for once (the folder named as TL002 may
        # not need them); a file in it does
        warnings = [line for line in err.splitlines() if "warning" in line]
        expected = [f"torchlint: warning: cannot look for configuration in {locked}: Permission denied"]
        assert warnings == expected or (args is argv and warnings == []), err
    code, out, err = as_unprivileged(["--config", "locked/torchlint.toml", "ok.py"], shared_dir)
    assert code == 2 and out == ""
    assert err == "torchlint: error: --config: cannot read locked/torchlint.toml: Permission denied\n"


def test_guide_has_no_rules_table():
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    assert not re.search(r"^\[rules\.", text, re.MULTILINE)
