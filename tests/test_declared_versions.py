"""Where projects declare their torch version (issue 29, item 9): Dockerfiles (the base image,
NVIDIA's NGC release table, ``pip install`` / ``conda install`` in ``RUN``) and requirements
files in subfolders; the lowest lower bound still wins; a version stated only in a comment,
a label or prose declares nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import dependencies
from torchlint.cli import main
from torchlint.dependencies import (
    NGC_TORCH, image_torch_version, is_dependency_file, ngc_torch_version, scan_project,
)


@pytest.fixture(autouse=True)
def fresh_warnings():
    dependencies._WARNED.clear()
    yield
    dependencies._WARNED.clear()


# A plain zero_grad() in a training loop: TL401 fires only when the target torch is below 2.0.
TRAIN = (
    "def train(model, optimizer, loader):\n"
    "    for x, y in loader:\n"
    "        optimizer.zero_grad()\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
)


def write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def version(root: Path):
    return scan_project(root).torch_version


@pytest.mark.parametrize("image, expected", [
    ("pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime", (1, 13)),
    ("docker.io/pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel", (2, 1)),
    ("docker.io/library/pytorch/pytorch:2.2.0", (2, 2)),
    ("pytorch/pytorch:2.0.1@sha256:0123abcd", (2, 0)),
    ("pytorch/pytorch:latest", None),
    ("pytorch/pytorch", None),
    ("nvcr.io/nvidia/pytorch:22.10-py3", (1, 13)),
    ("nvcr.io/nvidia/pytorch:23.10-py3", (2, 1)),
    ("nvcr.io/nvidia/pytorch:24.07-py3", (2, 4)),
    ("nvcr.io/nvidia/pytorch:19.10-py3", None),  # before the table: declares nothing
    ("nvcr.io/nvidia/tensorflow:22.10-tf2-py3", None),
    ("python:3.11-slim", None),
    ("myregistry:5000/pytorch/pytorch:1.8.0", None),  # someone else's image of that name
])
def test_base_image_versions(image, expected):
    assert image_torch_version(image) == expected


def test_ngc_table_is_monotonic_enough_and_fills_gaps_from_the_earlier_release():
    assert ngc_torch_version("22.10-py3") == (1, 13)
    assert ngc_torch_version("25.07-py3") == NGC_TORCH[(25, 6)]  # not in the table: the earlier one
    assert ngc_torch_version("30.01-py3") == NGC_TORCH[max(NGC_TORCH)]  # newer than the table: a lower bound
    assert ngc_torch_version("latest") is None
    assert ngc_torch_version("22.1-py3") is None
    assert sorted(NGC_TORCH) == list(NGC_TORCH)


def test_dockerfile_from_and_run_lines(tmp_path):
    write(tmp_path, {
        ".git/HEAD": "",
        "Dockerfile": (
            "# FROM pytorch/pytorch:1.4-cuda10.1-cudnn7-runtime\n"
            "ARG TORCH=1.12.1\n"
            "FROM --platform=linux/amd64 pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime AS base\n"
            'LABEL description="needs torch 1.2"\n'
            "RUN apt-get update && apt-get install -y git \\\n"
            "    # pip install torch==1.3\n"
            "    && pip install --no-cache-dir \\\n"
            "       torch==${TORCH} torchvision\n"
            'RUN echo "pip install torch==1.5"\n'
        ),
    })
    project = scan_project(tmp_path)
    found = sorted((d.version, d.where) for d in project.declarations)
    assert found == [((1, 12), "line 5 (RUN pip install)"), ((1, 13), "line 3 (FROM)")]
    assert project.torch_version == (1, 12)


def test_dockerfile_conda_and_python_m_pip(tmp_path):
    write(tmp_path, {"Dockerfile": "FROM python:3.10\nRUN python -m pip install 'torch>=2.1,<3' ; conda install -y pytorch=1.13 -c pytorch\n"})
    assert sorted(d.version for d in scan_project(tmp_path).declarations) == [(1, 13), (2, 1)]


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.gpu", "train.Dockerfile", "Containerfile", "docker/Dockerfile"])
def test_dockerfile_names_and_places(tmp_path, name):
    write(tmp_path, {name: "FROM nvcr.io/nvidia/pytorch:22.10-py3\n"})
    assert version(tmp_path) == (1, 13)
    assert is_dependency_file(str(tmp_path / name))


def test_requirements_in_subfolders_count_and_the_lowest_wins(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[project]\nname = 'x'\ndependencies = ['torch>=2.1']\n",
        "envs/gpu/requirements-gpu.txt": "torch>=1.11  # torch>=1.0 in a comment counts for nothing\n",
        "docker/requirements.txt": "# torch==1.2\ntorch>=2.0\n",
        "README.md": "Works with torch 1.3 and later.\n",  # prose
    })
    project = scan_project(tmp_path)
    assert project.torch_version == (1, 11)
    assert {os.path.basename(d.path) for d in project.declarations} == {"pyproject.toml", "requirements-gpu.txt", "requirements.txt"}


def test_vendored_hidden_nested_and_deep_folders_are_not_searched(tmp_path):
    write(tmp_path, {
        "requirements.txt": "torch>=2.0\n",
        "third_party/lib/requirements.txt": "torch>=1.0\n",
        ".venv/requirements.txt": "torch>=1.0\n",
        "node_modules/x/Dockerfile": "FROM pytorch/pytorch:1.0.0\n",
        "sub/nested/pyproject.toml": "[project]\nname = 'n'\n",
        "sub/nested/requirements.txt": "torch>=1.1\n",
        "env/pyvenv.cfg": "home = /usr\n",
        "env/requirements.txt": "torch>=1.1\n",
        "a/b/c/requirements.txt": "torch>=1.2\n",  # three levels down
    })
    assert version(tmp_path) == (2, 0)


def test_dockerfile_version_reaches_tl401_through_the_cli(tmp_path, monkeypatch, capsys):
    """The CLI infers the target from a Dockerfile alone: TL401 (an API newer than the target)
    fires on torch 1.13 and not once the image moves to 2.x."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    write(tmp_path, {
        "docker/Dockerfile": "FROM nvcr.io/nvidia/pytorch:22.10-py3\n",
        "train.py": TRAIN,
    })

    def rows():
        code = main(["--output-format", "json", "--no-cache", "--select", "TL401", "."])
        out = capsys.readouterr().out
        return code, [(os.path.basename(d["filename"]), d["location"]["row"]) for d in json.loads(out or "[]")]

    code, found = rows()
    assert found == [("train.py", 3)], found
    write(tmp_path, {"docker/Dockerfile": "FROM nvcr.io/nvidia/pytorch:24.07-py3\n"})
    assert rows()[1] == []


# -- environment.yml through PyYAML (issue 30, item 6) -----------------------------------------

ENV_CASES = [
    ("dependencies:\n  - python=3.10\n  - pytorch=1.12\n  - pip:\n    - torch>=1.13\n", (1, 12)),
    ("dependencies: [python=3.8, 'pytorch>=1.12,<2', {pip: [x, 'torch>=2.0,<3']}]\n", (1, 12)),
    ("# torch 1.0 in a comment\nname: x\ndependencies:\n- pytorch 1.11.*\n", (1, 11)),
]


@pytest.fixture(params=["pyyaml", "line-reader"])
def yaml_reader(request, monkeypatch):
    """Both readers: PyYAML (the test extra installs it) and the fallback without it."""
    if request.param == "line-reader":
        monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    else:
        import yaml  # noqa: F401 - the test extra installs PyYAML
    return request.param


@pytest.mark.parametrize("text, expected", ENV_CASES)
def test_environment_yml_both_readers_agree_on_the_common_forms(tmp_path, yaml_reader, text, expected):
    write(tmp_path, {"environment.yml": text})
    assert version(tmp_path) == expected


@pytest.mark.parametrize("text, expected", [
    ("dependencies: [\n  python=3.10,\n  pytorch=1.11\n]\n", (1, 11)),  # a flow list over lines
    ("dependencies:\n  - &gpu pytorch=1.10\n", (1, 10)),  # an anchor
    ('"dependencies":\n  - "pytorch>=1.9"\n', (1, 9)),  # quoted key and item
    ("dependencies:\n  - pip:\n    - >-\n      torch>=1.8\n", (1, 8)),  # a folded scalar
])
def test_environment_yml_forms_only_a_yaml_parser_reads(tmp_path, text, expected):
    write(tmp_path, {"environment.yml": text})
    project = scan_project(tmp_path)
    assert project.torch_version == expected
    assert [d.where for d in project.declarations][0].startswith("line ")


def test_environment_yml_lines_are_reported(tmp_path):
    write(tmp_path, {"environment.yml": "name: x\ndependencies:\n  - python=3.10\n  - pytorch=1.12\n  - pip:\n    - torch>=1.13\n"})
    assert sorted((d.version, d.where) for d in scan_project(tmp_path).declarations) == [
        ((1, 12), "line 4"), ((1, 13), "line 6 (pip)")]


def test_invalid_environment_yml_warns_once(tmp_path, capsys):
    write(tmp_path, {"environment.yml": "dependencies: [pytorch=1.12\n  - torch: [\n"})
    project = scan_project(tmp_path)
    assert project.torch_version is None
    assert len(project.warnings) == 1 and "environment.yml: invalid YAML" in project.warnings[0]
    assert capsys.readouterr().err.count("torchlint: warning:") == 1


def test_pyyaml_is_imported_only_for_an_environment_file(tmp_path):
    write(tmp_path, {".git/HEAD": "", "a.py": "x = 1\n", "requirements.txt": "torch>=2.0\n"})
    probe = ("import sys\nfrom torchlint.cli import main\nmain(['--no-cache', '-q', '.'])\n"
             "print('yaml' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
    assert out.strip().splitlines()[-1] == "False"
    write(tmp_path, {"environment.yml": "dependencies:\n  - pytorch=1.12\n"})
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
    assert out.strip().splitlines()[-1] == "True"
