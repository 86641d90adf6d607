"""libcst is imported only when a run parses, fixes or walks a libcst tree (torchlint/_cst.py).

Importing libcst costs 0.12-0.19 s: more than the rest of a run where one touched file has no
candidate site. Each case runs in a fresh interpreter, since this one has libcst loaded already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cache_support import OLD, new_project, write

# Uses torch, but no rule can fire on it: the prefilter stops it before libcst.
PLAIN = "import torch\n\n\ndef scale(x):\n    return torch.relu(x) * 2\n"
BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"

# Prints the run's JSON findings on stdout and, on stderr, whether libcst was loaded.
PROBE = (
    "import sys\n"
    "from torchlint.cli import main\n"
    "code = main(['--select', 'ALL', '--output-format', 'json', '--exit-zero', '-j', '1', '.'])\n"
    "sys.stderr.write('LIBCST=' + str('libcst' in sys.modules))\n"
    "sys.exit(code)\n"
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    return new_project(tmp_path, monkeypatch)


def run(project: Path, code: str = PROBE) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def libcst_loaded(done: subprocess.CompletedProcess) -> bool:
    flag = done.stderr.rsplit("LIBCST=", 1)[-1].strip()
    assert flag in ("True", "False"), done.stderr
    return flag == "True"


def codes(done: subprocess.CompletedProcess):
    return [(Path(d["filename"]).name, d["code"], d["location"]["row"]) for d in json.loads(done.stdout)]


def test_importing_every_module_leaves_libcst_unloaded(tmp_path):
    """A module-level ``cst.X`` (a base class, a tuple of node types, an evaluated annotation)
    would import libcst with its module."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import torchlint\n"
        "names = [m.name for m in pkgutil.walk_packages(torchlint.__path__, 'torchlint.')\n"
        "         if m.name != 'torchlint.__main__']\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "sys.stderr.write(str(len(names)) + ' LIBCST=' + str('libcst' in sys.modules))\n"
    )
    done = run(tmp_path, code)
    assert int(done.stderr.split()[0]) > 50  # the rules and every stage were imported
    assert not libcst_loaded(done)


def test_cold_run_without_candidate_sites_never_imports_libcst(project):
    write(project / "a.py", PLAIN)
    write(project / "b.py", "VALUE = 1\n")
    done = run(project)
    assert codes(done) == []
    assert not libcst_loaded(done)


def test_touched_file_without_candidate_sites_never_imports_libcst(project):
    write(project / "bad.py", BAD)
    write(project / "plain.py", PLAIN)
    cold = run(project)
    assert codes(cold) == [("bad.py", "TL701", 3)]
    assert libcst_loaded(cold)
    write(project / "plain.py", PLAIN + "# touched\n", mtime_ns=OLD + 10**9)
    touched = run(project)
    assert codes(touched) == codes(cold)  # the cached finding of bad.py is still reported
    assert not libcst_loaded(touched)


def test_touched_file_with_a_finding_is_linted_with_libcst(project):
    write(project / "bad.py", "VALUE = 1\n")
    write(project / "plain.py", PLAIN)
    cold = run(project)
    assert codes(cold) == [] and not libcst_loaded(cold)
    write(project / "bad.py", BAD, mtime_ns=OLD + 10**9)
    touched = run(project)
    assert codes(touched) == [("bad.py", "TL701", 3)]
    assert libcst_loaded(touched)


def test_fix_through_the_lazy_module(project):
    """``--fix`` builds libcst nodes: TL404's fix names the positional argument ``enabled=`` (an
    ``=`` node the rule module used to build at import)."""
    write(project / "z.py", "import torch\n\nwith torch.cuda.amp.autocast(True):\n    pass\n")
    code = (
        "import sys\nfrom torchlint.cli import main\n"
        "sys.exit(main(['--select', 'ALL', '--fix', '--exit-zero', '--output-format', 'json', '.']))\n"
    )
    run(project, code)
    assert (project / "z.py").read_text() == 'import torch\n\nwith torch.amp.autocast("cuda", enabled=True):\n    pass\n'



def test_the_lazy_module_hands_out_libcst_s_own_objects(tmp_path):
    code = (
        "import sys\n"
        "from torchlint import _cst as cst\n"
        "assert not hasattr(cst, '__wrapped__') and 'libcst' not in sys.modules\n"
        "call = cst.Call\n"
        "import libcst\n"
        "assert call is libcst.Call\n"
        "assert vars(cst)['Name'] is libcst.Name  # copied: later lookups are plain attributes\n"
        "assert cst.parse_module('x = 1\\n').code == 'x = 1\\n'\n"
        "real, seen = libcst.parse_module, []\n"
        "libcst.parse_module = lambda text: seen.append(text) or real(text)  # a test's patch\n"
        "cst.parse_module('y = 2\\n')\n"
        "assert seen == ['y = 2\\n']\n"
        "try:\n"
        "    cst.NoSuchNode\n"
        "except AttributeError:\n"
        "    sys.stderr.write('ok')\n"
    )
    assert run(tmp_path, code).stderr == "ok"
