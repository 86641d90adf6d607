"""Multi-file fixture projects (fixtures/projects/<name>/), linted as a user runs torchlint on a
repository: the CLI from the project's folder, so that its config files, its declared torch
version and the project index (cross-file facts) all apply. Each project's ``EXPECTED`` file
lists the exact findings, one per line, as ``relpath:row:col-endrow:endcol CODE``; lines
starting with ``#`` before them are TOML applied as CLI flags (``# select = ["TL401"]``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from torchlint.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"


def projects() -> List[Path]:
    return sorted(p for p in PROJECTS.iterdir() if (p / "EXPECTED").is_file()) if PROJECTS.is_dir() else []


def expected_for(project: Path) -> Tuple[List[str], List[str]]:
    lines = (project / "EXPECTED").read_text().splitlines()
    header = tomllib.loads("\n".join(l[1:].strip() for l in lines if l.startswith("#")))
    args: List[str] = []
    for key, value in header.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, list):
            args += [flag, ",".join(value)]
        else:
            args += [flag, str(value)]
    return args, [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def lint_project(project: Path, args: List[str], capsys, jobs: str = "1") -> List[str]:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        capsys.readouterr()
        main(["--output-format", "json", "--no-cache", "--jobs", jobs, *args, "."])
        out = capsys.readouterr().out
    finally:
        os.chdir(cwd)
    found = []
    for d in json.loads(out):
        # The report names files relative to the project (the cwd it ran in), or absolutely.
        rel = os.path.relpath(os.path.join(project, d["filename"]), project).replace(os.sep, "/")
        loc, end = d["location"], d["end_location"]
        found.append(f"{rel}:{loc['row']}:{loc['column']}-{end['row']}:{end['column']} {d['code']}")
    return sorted(found)


@pytest.mark.parametrize("project", projects(), ids=lambda p: p.name)
def test_project_findings(project, capsys):
    args, expected = expected_for(project)
    assert lint_project(project, args, capsys) == sorted(expected)


@pytest.mark.parametrize("project", projects(), ids=lambda p: p.name)
def test_project_findings_are_the_same_in_the_pool(project, capsys):
    args, expected = expected_for(project)
    assert lint_project(project, args, capsys, jobs="2") == sorted(expected)


def test_there_are_projects():
    assert len(projects()) >= 1
