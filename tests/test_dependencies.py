"""The declared torch version (torchlint/dependencies.py): every source, includes, cycles,
markers, malformed tables (a warning, never a traceback), setup.py never executed, and how the
version reaches the settings, the results cache and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from torchlint import dependencies
from torchlint.cli import main
from torchlint.config import SettingsResolver
from torchlint.dependencies import conda_bound, find_project_root, lower_bound, requirement_bound, scan_project
from torchlint.torch_api import DEFAULT_TORCH_VERSION

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "projects"
# A plain zero_grad() in a training loop: TL401 fires only when the target torch is below 2.0.
TRAIN = (
    "def train(model, optimizer, loader):\n"
    "    for x, y in loader:\n"
    "        optimizer.zero_grad()\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Warnings are printed once per process; each test starts with none printed."""
    dependencies._WARNED.clear()
    yield
    dependencies._WARNED.clear()


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    return tmp_path


def write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def version(root: Path):
    return scan_project(root).torch_version


def tl401(capsys, *args):
    """Rows of TL401 findings of a CLI run (json), with the exit code and stderr."""
    code = main(["--output-format", "json", "--no-cache", "--select", "TL401", *args])
    out, err = capsys.readouterr()
    findings = json.loads(out) if out.strip() else []
    return code, [(os.path.basename(d["filename"]), d["location"]["row"]) for d in findings], err


# -- specifiers --------------------------------------------------------------------------------

@pytest.mark.parametrize("requirement, expected", [
    ("torch>=1.13,<3", (1, 13)),
    ("torch==2.1.*", (2, 1)),
    ("torch~=1.12.1", (1, 12)),
    ("torch>1.9", (1, 9)),
    ("torch===1.11", (1, 11)),
    ("torch!=1.13.0,>=1.10", (1, 10)),
    ("torch (>=1.8)", (1, 8)),
    ("Torch[opt]==1.13.1+cu117", (1, 13)),
    ("torch>=1.13 ; sys_platform == 'linux'", (1, 13)),  # markers ignored: every platform counts
    ("pytorch>=1.4", (1, 4)),  # the conda name, written in a pip file
    ("torch==2.0.0a0", (2, 0)),
    ("torch", None),  # no lower bound
    ("torch<2", None),
    ("torch @ https://download.pytorch.org/whl/cu117/torch-1.13.1%2Bcu117-cp39-linux_x86_64.whl", None),
    ("torchvision>=0.5", None),
    ("torch-tb-profiler>=0.4", None),
    ("pytorch-lightning>=1.5", None),
])
def test_requirement_bound(requirement, expected):
    assert requirement_bound(requirement) == expected


@pytest.mark.parametrize("spec, expected", [
    ("^1.13", (1, 13)), ("~1.13", (1, 13)), ("1.13.1", (1, 13)), (">=1.8 <2.0", (1, 8)),
    ("^1.13 || ^2.0", (1, 13)), ("*", None), ("<2.0", None), (">=1.8,<2 || <0.4", None),
])
def test_lower_bound_of_poetry_constraints(spec, expected):
    assert lower_bound(spec) == expected


@pytest.mark.parametrize("spec, expected", [
    ("pytorch=1.13", (1, 13)),
    ("pytorch==1.13.1", (1, 13)),
    ("pytorch>=1.12,<2", (1, 12)),
    ("pytorch::pytorch=1.13.1=py3.9_cuda11.7_cudnn8.5.0_0", (1, 13)),  # channel and build string
    ("conda-forge::pytorch>=1.8", (1, 8)),
    ("pytorch 1.13.*", (1, 13)),
    ("pytorch[version='>=1.12']", (1, 12)),
    ("torch=2.1", (2, 1)),
    ("pytorch", None),
    ("pytorch-cuda=11.7", None),
    ("pytorch-lightning=1.5", None),
])
def test_conda_bound(spec, expected):
    assert conda_bound(spec) == expected


# -- pyproject.toml ----------------------------------------------------------------------------

def test_pyproject_tables(tmp_path):
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['numpy', 'torch>=2.2']\n"})
    assert version(tmp_path) == (2, 2)
    cases = {
        "[project.optional-dependencies]\ngpu = ['torch>=1.13']\n": (1, 13),
        "[dependency-groups]\ndev = ['torch==1.12.1', {include-group = 'lint'}]\nlint = ['ruff']\n": (1, 12),
        "[tool.poetry.dependencies]\npython = '^3.9'\ntorch = '^1.11'\n": (1, 11),
        "[tool.poetry.dependencies]\ntorch = { version = '~1.10', source = 'pytorch' }\n": (1, 10),
        "[tool.poetry.dependencies]\ntorch = [{ version = '>=1.9', markers = \"sys_platform == 'darwin'\" },"
        " { version = '>=2.0', markers = \"sys_platform == 'linux'\" }]\n": (1, 9),
        "[tool.poetry.group.train.dependencies]\ntorch = '1.8.1'\n": (1, 8),
        "[tool.poetry.dev-dependencies]\ntorch = '>=1.7'\n": (1, 7),
        "[tool.pdm.dev-dependencies]\ntest = ['torch>=1.6']\n": (1, 6),
        "[tool.hatch.envs.gpu]\ndependencies = ['torch>=1.5']\n": (1, 5),
        "[tool.hatch.envs.old]\nextra-dependencies = ['torch==1.4.0']\n": (1, 4),
        "[tool.poetry.dependencies]\ntorch = { git = 'https://github.com/pytorch/pytorch' }\n": (2, 2),
    }
    for table, expected in cases.items():
        write(tmp_path, {"pyproject.toml": "[project]\nname = 'x'\ndependencies = ['torch>=2.2']\n" + table})
        assert version(tmp_path) == expected, table


# -- requirements files ------------------------------------------------------------------------

def test_requirements_with_includes_options_hashes_and_urls(tmp_path):
    write(tmp_path, {
        "requirements.txt": (
            "# training\n"
            "--index-url https://download.pytorch.org/whl/cu117\n"
            "--extra-index-url=https://pypi.org/simple\n"
            "-e git+https://github.com/x/torch-utils.git#egg=torch\n"
            "https://download.pytorch.org/whl/torch-1.0.0-cp37-linux_x86_64.whl\n"
            "torch @ https://download.pytorch.org/whl/torch-1.1.0-cp37-linux_x86_64.whl\n"
            "-r requirements/base.txt\n"
            "numpy>=1.21  # torch==0.4 in a comment\n"
        ),
        "requirements/base.txt": "--requirement=../constraints/torch.txt\n",
        "constraints/torch.txt": (
            "torch==2.0.1 \\\n"
            "    --hash=sha256:0123456789abcdef \\\n"
            "    --hash=sha256:fedcba9876543210\n"
        ),
    })
    project = scan_project(tmp_path)
    assert project.torch_version == (2, 0)
    # -r paths are relative to the including file; requirements/base.txt is read once.
    assert sorted(p.relative_to(tmp_path).as_posix() for p in project.files) == [
        "constraints/torch.txt", "requirements.txt", "requirements/base.txt",
    ]
    [declaration] = project.declarations
    assert declaration.path.endswith("torch.txt") and declaration.where == "line 1"


def test_every_requirements_file_counts_and_the_lowest_wins(tmp_path):
    write(tmp_path, {
        "requirements.txt": "torch>=2.1\n",
        "requirements-dev.txt": "-r requirements.txt\npytest\n",
        "requirements_legacy.txt": "-c constraints.txt\n",
        "constraints.txt": "torch>=1.9,<1.14 ; python_version < '3.8'\n",  # markers ignored
        "requirements/docs.txt": "torch>=2.0\n",
        "other.txt": "torch==1.0\n",  # not a requirements file, included by nothing
    })
    assert version(tmp_path) == (1, 9)


def test_include_cycles_and_depth(tmp_path, capsys):
    write(tmp_path, {
        "requirements.txt": "-r a.txt\n",
        "a.txt": "-r b.txt\ntorch>=1.12\n",
        "b.txt": "-r a.txt\n-r requirements.txt\n-rb.txt\n",
    })
    project = scan_project(tmp_path)
    assert project.torch_version == (1, 12)
    assert len(project.files) == 3
    # A chain longer than MAX_INCLUDE_DEPTH stops with one warning.
    depth = dependencies.MAX_INCLUDE_DEPTH + 3
    chain = {f"r{i}.txt": f"-r r{i + 1}.txt\n" for i in range(depth)}
    chain[f"r{depth}.txt"] = "torch==1.0\n"
    chain["requirements.txt"] = "-r r0.txt\ntorch>=2.0\n"
    shutil.rmtree(tmp_path)
    write(tmp_path, chain)
    assert version(tmp_path) == (2, 0)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested deeper than" in err


def test_missing_and_remote_includes_are_skipped(tmp_path):
    write(tmp_path, {"requirements.txt": "-r missing.txt\n-r https://x/r.txt\n-r ${BASE}/r.txt\ntorch>=1.13\n"})
    assert version(tmp_path) == (1, 13)


# -- setup.cfg / setup.py ------------------------------------------------------------------------

def test_setup_cfg(tmp_path):
    write(tmp_path, {"setup.cfg": (
        "[metadata]\nname = x\n\n[options]\ninstall_requires =\n    numpy\n    # torch==0.4 commented out\n"
        "    torch>=1.11,<2.0\n\n[options.extras_require]\nlegacy =\n    torch==1.8.1 ; python_version<'3.8'\n"
    )})
    assert version(tmp_path) == (1, 8)
    write(tmp_path, {"setup.cfg": "[options]\ninstall_requires = file: reqs/base.txt\n", "reqs/base.txt": "torch>=1.7\n"})
    assert version(tmp_path) == (1, 7)


def test_setup_py_literals(tmp_path):
    write(tmp_path, {"setup.py": (
        "import setuptools\n"
        "BASE = ['numpy']\n"
        "TORCH: str = 'torch>=1.12'\n"
        "EXTRAS = {'old': ('torch==1.9.0',), 'dev': ['pytest']}\n"
        "setuptools.setup(name='x', install_requires=BASE + [TORCH], extras_require=EXTRAS)\n"
    )})
    assert version(tmp_path) == (1, 9)
    write(tmp_path, {"setup.py": (
        "from setuptools import setup\n"
        "if __name__ == '__main__':\n"
        "    setup(install_requires=['torch>=1.10'], extras_require=dict(gpu=['torch>=2.0']))\n"
    )})
    assert version(tmp_path) == (1, 10)


def test_setup_py_is_never_executed(tmp_path, capsys):
    marker = tmp_path / "EXECUTED"
    write(tmp_path, {"setup.py": (
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "raise SystemExit('setup.py must not run')\n"
        "from setuptools import setup\n"
        "setup(install_requires=['torch>=1.13'])\n"
    )})
    assert version(tmp_path) == (1, 13)
    assert not marker.exists()
    write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.13'\n"})
    assert version(tmp_path) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "setup.py: cannot parse (SyntaxError)" in err


# -- environment.yml ---------------------------------------------------------------------------

def test_environment_yml(tmp_path):
    write(tmp_path, {"environment.yml": (
        "name: train  # pytorch=0.4 in a comment\n"
        "channels:\n  - pytorch\n  - nvidia\n"
        "dependencies:\n"
        "  - python=3.10\n"
        "  - pytorch::pytorch=2.0.1=py3.10_cuda11.8_cudnn8.7.0_0\n"
        "  - pytorch-cuda=11.8\n"
        "  - 'torchvision>=0.15'\n"
        "  - pip\n"
        "  - pip:\n"
        "      - torch>=1.13.1  # the pip sub-list counts too\n"
        "      - -r requirements-extra.txt\n"
        "  - numpy\n"
        "variables:\n  TORCH_VERSION: 0.4\n"
    ), "requirements-extra.txt": "tqdm\n"})
    project = scan_project(tmp_path)
    assert project.torch_version == (1, 13)
    assert [d.version for d in project.declarations] == [(2, 0), (1, 13)]
    write(tmp_path, {"environment.yml": "dependencies: [python=3.8, 'pytorch>=1.12,<2', {pip: [x, 'torch>=2.0,<3']}]\n"})
    assert [d.version for d in scan_project(tmp_path).declarations] == [(1, 12), (2, 0)]
    write(tmp_path, {"environment.yml": "dependencies:\n- pytorch 1.11.*\n- pip:\n  - torch>=2.0\n"})
    assert version(tmp_path) == (1, 11)
    (tmp_path / "environment.yml").rename(tmp_path / "environment.yaml")
    assert version(tmp_path) == (1, 11)


def test_lowest_lower_bound_across_sources_wins(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'x'\ndependencies = ['torch>=2.1']\n",
        "requirements.txt": "torch>=2.0\n",
        "setup.cfg": "[options]\ninstall_requires = torch>=1.13\n",
        "setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=2.2'])\n",
        "environment.yml": "dependencies:\n  - pytorch=1.12\n",
    })
    project = scan_project(tmp_path)
    assert project.torch_version == (1, 12)
    assert len(project.files) == 5 and len(project.declarations) == 5


# -- malformed input: a warning, never a traceback -----------------------------------------------

@pytest.mark.parametrize("pyproject", [
    "[project]\nname = 'x'\ndependencies = 5\n",
    "project = 5\n",
    "[tool.poetry]\ndependencies = 1\n",
    "[project]\ndependencies = ['numpy', 5]\n",
    "[project]\noptional-dependencies = 'torch'\n",
    "tool = 'x'\n",
    "[tool.hatch]\nenvs = []\n",
    "[tool.poetry.dependencies]\ntorch = 1.13\n",
    "[project\ndependencies = ['torch>=1.0']\n",  # not TOML at all
])
@pytest.mark.parametrize("with_config", [False, True])
def test_malformed_dependency_tables_only_disable_inference(project, capsys, pyproject, with_config):
    """Issue 13: other tables never stop a run; inference from them is off, with one warning
    line; the torch version still comes from the project's other files (here 1.13)."""
    if with_config and not pyproject.startswith(("tool =", "[project\n")):
        pyproject += "\n[tool.torchlint]\nselect = ['ALL']\n"  # a well-formed config beside it
    write(project, {"pyproject.toml": pyproject + "# torch\n", "requirements.txt": "torch==1.13.1\n", "train.py": TRAIN})
    code, found, err = tl401(capsys, ".")
    assert (code, found) == (1, [("train.py", 3)])
    warnings = [l for l in err.splitlines() if l.startswith("torchlint: warning:")]
    assert len(warnings) == 1 and "pyproject.toml" in warnings[0] and "not inferred" in warnings[0]
    assert "Traceback" not in err
    # once per process
    assert tl401(capsys, ".")[2].count("torchlint: warning:") == 0


def test_bad_torchlint_table_still_stops_the_run(project, capsys):
    write(project, {"pyproject.toml": "project = 5\n[tool.torchlint]\nselect = 5\n", "train.py": TRAIN})
    code = main(["--no-cache", "."])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "tool.torchlint.select" in err


def test_hostile_dependency_files_are_skipped(tmp_path, capsys):
    write(tmp_path, {"requirements.txt": "-r big.txt\n-r fifo.txt\n-r zero.txt\ntorch>=1.13\n"})
    (tmp_path / "big.txt").write_text("torch==1.0\n" + "#" * (dependencies.MAX_FILE_BYTES + 1))
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.txt")  # reading it would block forever
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.txt").symlink_to("/dev/zero")  # reading it would never end
    assert version(tmp_path) == (1, 13)
    assert "big.txt: larger than 1024 KB" in capsys.readouterr().err


def test_config_parser_errors_warn(tmp_path, capsys):
    write(tmp_path, {"setup.cfg": "install_requires = torch>=1.0\n[options]\n", "requirements.txt": "torch>=2.0\n"})
    assert version(tmp_path) == (2, 0)
    assert "setup.cfg: cannot parse" in capsys.readouterr().err


# -- where a project's files are ------------------------------------------------------------------

def test_project_root_is_the_nearest_folder_with_a_dependency_file_or_git(tmp_path):
    write(tmp_path, {"repo/requirements.txt": "torch>=1.12\n", "repo/src/pkg/train.py": TRAIN,
                     "repo/sub/setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=2.0'])\n",
                     "repo/sub/a/b.py": "", "outside/requirements.txt": "torch==1.0\n", "outside/inner/.git/x": ""})
    repo = tmp_path / "repo"
    assert find_project_root(repo / "src" / "pkg") == repo
    assert find_project_root(repo / "sub" / "a") == repo / "sub"
    assert find_project_root(tmp_path / "outside" / "inner") == tmp_path / "outside" / "inner"  # .git: the edge
    resolver = SettingsResolver(cwd=str(repo))
    assert resolver.for_path(str(repo / "src" / "pkg" / "train.py")).target_torch_version == (1, 12)
    assert resolver.for_path(str(repo / "sub" / "a" / "b.py")).target_torch_version == (2, 0)
    assert resolver.for_path(str(tmp_path / "outside" / "inner" / "x.py")).target_torch_version == DEFAULT_TORCH_VERSION
    assert resolver.dependency_files == {str(repo / "requirements.txt"), str(repo / "sub" / "setup.py")}


def test_with_a_config_the_files_in_its_folder_count(project):
    write(project, {"pyproject.toml": "[tool.torchlint]\n", "requirements.txt": "torch>=1.11\n",
                    "sub/requirements.txt": "torch>=1.0\n", "sub/train.py": TRAIN})
    # requirements files in subfolders of the root count too (issue 29, item 9): the lowest wins
    assert SettingsResolver(cwd=str(project)).for_path(str(project / "sub" / "train.py")).target_torch_version == (1, 0)


def test_explicit_version_wins_over_declared(project, capsys):
    write(project, {"requirements.txt": "torch==1.13.1\n", "train.py": TRAIN})
    assert tl401(capsys, ".")[1] == [("train.py", 3)]
    assert tl401(capsys, "--target-torch-version", "2.1", ".")[1] == []
    write(project, {"pyproject.toml": "[tool.torchlint]\ntarget-torch-version = '2.0'\n"})
    assert tl401(capsys, ".")[1] == []
    assert tl401(capsys, "--target-torch-version", "1.12", ".")[1] == [("train.py", 3)]
    # --config points at a file elsewhere: the dependency files of that file's folder count.
    write(project, {"conf/pyproject.toml": "[tool.torchlint]\n", "conf/setup.cfg": "[options]\ninstall_requires = torch>=1.9\n",
                    "pyproject.toml": "[tool.torchlint]\n", "requirements.txt": "torch>=2.0\n"})
    assert tl401(capsys, ".")[1] == []
    assert tl401(capsys, "--config", "conf/pyproject.toml", ".")[1] == [("train.py", 3)]


def test_isolated_ignores_dependency_files(project, capsys):
    """--isolated ignores all configuration, dependency declarations included (as ruff ignores
    requires-python): the default target version, unless --target-torch-version is given."""
    write(project, {"requirements.txt": "torch==1.13.1\n", "train.py": TRAIN})
    assert tl401(capsys, ".")[1] == [("train.py", 3)]
    assert tl401(capsys, "--isolated", ".")[1] == []
    assert tl401(capsys, "--isolated", "--target-torch-version", "1.13", ".")[1] == [("train.py", 3)]
    resolver = SettingsResolver(isolated=True, cwd=str(project))
    assert resolver.for_path("train.py").target_torch_version == DEFAULT_TORCH_VERSION
    assert resolver.dependency_files == set()


def test_stdin_with_a_filename_gets_the_declared_version(project, capsys, monkeypatch):
    import io

    write(project, {"requirements.txt": "torch==1.13.1\n"})
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TRAIN.encode())))
    assert tl401(capsys, "--stdin-filename", "train.py", "-")[1] == [("train.py", 3)]


# -- the results cache ---------------------------------------------------------------------------

def test_fingerprint_follows_the_declared_version(project):
    write(project, {"requirements.txt": "torch==1.13.1\n"})
    before = SettingsResolver(cwd=str(project)).default.fingerprint
    assert SettingsResolver(cwd=str(project)).default.fingerprint == before
    write(project, {"requirements.txt": "torch==2.1.0\n"})
    assert SettingsResolver(cwd=str(project)).default.fingerprint != before


def test_warm_run_after_editing_requirements_gives_the_new_findings(project, capsys):
    write(project, {"requirements.txt": "-r requirements/base.txt\n", "requirements/base.txt": "torch>=2.1\n", "train.py": TRAIN})
    cache = ["--cache-dir", str(project / "cache"), "--select", "TL401", "--output-format", "json", "."]
    assert main(cache) == 0 and json.loads(capsys.readouterr().out) == []
    write(project, {"requirements/base.txt": "torch>=1.12\n"})  # only the included file changes
    assert main(cache) == 1 and [d["location"]["row"] for d in json.loads(capsys.readouterr().out)] == [3]
    assert main(cache) == 1 and len(json.loads(capsys.readouterr().out)) == 1  # warm again, same answer
    write(project, {"requirements/base.txt": "torch>=2.1\n"})
    assert main(cache) == 0 and json.loads(capsys.readouterr().out) == []


# -- the fixture projects, also as plain repositories without a config ------------------------------

@pytest.mark.parametrize("name", ["pinned_requirements", "pinned_setup_cfg", "pinned_setup_py", "pinned_environment_yml"])
def test_fixture_projects_without_their_pyproject(name, tmp_path, capsys, monkeypatch):
    """Each fixture project carries an empty [tool.torchlint] so that it is its own root whatever
    the repository's config; without it (a plain repository) the findings are the same."""
    from test_fixture_projects import expected_for

    copy = tmp_path / name
    shutil.copytree(PROJECTS / name, copy)
    (copy / "pyproject.toml").unlink()
    (copy / ".git").mkdir()
    monkeypatch.chdir(copy)
    args, expected = expected_for(PROJECTS / name)
    main(["--output-format", "json", "--no-cache", *args, "."])
    found = json.loads(capsys.readouterr().out)
    rows = sorted(f"{os.path.relpath(d['filename'], copy) if os.path.isabs(d['filename']) else d['filename']}:"
                  f"{d['location']['row']}:{d['location']['column']}-{d['end_location']['row']}:{d['end_location']['column']} {d['code']}"
                  for d in found)
    assert rows == sorted(expected)
    # and with a 2.x pin instead, nothing
    assert main(["--output-format", "json", "--no-cache", "--target-torch-version", "2.0", *args, "."]) == 0
    capsys.readouterr()


def test_fixture_project_setup_py_infers_from_setup_py():
    project = scan_project(PROJECTS / "pinned_setup_py")
    assert project.torch_version == (1, 10)
    assert [Path(d.path).name for d in project.declarations] == ["setup.py"]


def test_dependency_file_names():
    from torchlint.dependencies import is_dependency_file

    for name in ("a/pyproject.toml", "requirements.txt", "requirements-dev.txt", "x/requirements/gpu.txt",
                 "setup.cfg", "setup.py", "environment.yml", "file:///w/environment.yaml"):
        assert is_dependency_file(name), name
    for name in ("train.py", "notes.txt", "reqs.txt", "setup.pyc"):
        assert not is_dependency_file(name), name


# -- torchvision and torchaudio: torch declared through its companions (issue 29 class 9) ----------

@pytest.mark.parametrize("text, expected", [
    ("torchvision >=0.10.0  # todo", (1, 9)),  # lightning-bolts' requirements
    ("torchvision>=0.13", (1, 12)),
    ("torchvision==0.15.2", (2, 0)),
    ("torchvision>=0.21", (2, 6)),
    ("torchvision>=0.4", (1, 1)),
    ("torchaudio>=0.13", (1, 13)),
    ("torchaudio==2.1.0", (2, 1)),
    ("conda-forge::torchvision=0.14", (1, 13)),
    ("torchvision", None),  # no lower bound
    ("torchvision<0.13", None),
    ("torchvision @ https://download.pytorch.org/whl/torchvision-0.10.0-cp39-linux_x86_64.whl", None),
    ("torchmetrics>=0.10.0", None),
    ("pytorch-lightning>1.7.0", None),
])
def test_companion_bound(text, expected):
    assert dependencies.companion_bound(text) == expected


def test_a_companion_declares_torch_only_where_torch_is_not_declared(tmp_path):
    write(tmp_path, {"requirements.txt": "pytorch-lightning >1.7.0, <2.0.0\ntorchvision >=0.10.0\n"})
    project = scan_project(tmp_path)
    assert project.torch_version == (1, 9) and project.declarations == []
    [implied] = project.implied
    assert implied.where == "line 2" and implied.text == "torchvision >=0.10.0"
    # torch itself declared: a loose companion bound beside it says nothing of torch
    write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=2.0', 'torchvision>=0.2'])\n"})
    assert scan_project(tmp_path).torch_version == (2, 0)


def test_tl907_is_silent_where_the_declared_torchvision_predates_weights(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, {
        "requirements.txt": "torchvision>=0.10\n",
        "model.py": "import torchvision\n\nnet = torchvision.models.resnet18(pretrained=True)\n",
    })
    assert main(["check", "--no-cache", "--select", "TL907", "model.py"]) == 0
    write(tmp_path, {"requirements.txt": "torchvision>=0.13\n"})
    assert main(["check", "--no-cache", "--select", "TL907", "model.py"]) == 1
    assert "TL907" in capsys.readouterr().out
