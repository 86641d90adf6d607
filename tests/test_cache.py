"""The results cache: a warm run gives the same findings as a cold one, and any change that can
change findings (content, settings, torchlint's own code) makes the file be linted again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cache_support import OLD, new_project, write
from torchlint import cache as cache_mod
from torchlint.cli import main

BAD = "import torch.nn as nn\n\nmodel = nn.DataParallel(model)\n"
GOOD = "import torch.nn as nn\n\nmodel = nn.Linear(2, 2)\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return new_project(tmp_path, monkeypatch)


def findings(capsys, *args):
    code = main(["--output-format", "json", "--exit-zero", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [(d["filename"], d["code"], d["location"]["row"], d["location"]["column"]) for d in json.loads(out)]


def spy(monkeypatch):
    """Names of the files the engine actually lints."""
    from torchlint import runner

    linted = []
    real_lint, real_first = runner._lint_for_cache, runner._first_pass

    def counting(path, settings, project=None, *rest):
        linted.append(os.path.basename(path))
        return real_lint(path, settings, project, *rest)

    def first(path, settings):  # phase 1 reads every file; those no rule needs end there, and
        # those some rule needs are linted there too (without project facts)
        result = real_first(path, settings)
        if result[3][0] is not None or result[3][3] is not None:
            linted.append(os.path.basename(path))
        return result

    monkeypatch.setattr(runner, "_lint_for_cache", counting)
    monkeypatch.setattr(runner, "_first_pass", first)
    return linted


def test_warm_run_reads_findings_from_the_cache(project, capsys, monkeypatch):
    write(project / "bad.py", BAD)
    write(project / "good.py", GOOD)
    linted = spy(monkeypatch)
    cold = findings(capsys, ".")
    assert sorted(linted) == ["bad.py", "good.py"]
    assert (project / ".torchlint_cache" / "CACHEDIR.TAG").is_file()
    linted.clear()
    assert findings(capsys, ".") == cold == [("bad.py", "TL701", 3, 9)]
    assert linted == []


def test_full_report_rereads_text_for_code_frames(project, capsys):
    write(project / "bad.py", BAD)
    main(["--output-format", "full", "."])
    cold = capsys.readouterr().out
    main(["--output-format", "full", "."])
    assert capsys.readouterr().out == cold
    assert "nn.DataParallel(model)" in cold


def test_changed_content_is_linted_again(project, capsys, monkeypatch):
    write(project / "a.py", GOOD)
    findings(capsys, ".")
    linted = spy(monkeypatch)
    write(project / "a.py", BAD)  # different size
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    write(project / "a.py", BAD.replace("model", "modes"), mtime_ns=OLD + 10**9)  # same size
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    assert linted == ["a.py", "a.py"]


def test_touched_but_unchanged_file_is_rehashed_not_relinted(project, capsys, monkeypatch):
    write(project / "a.py", BAD)
    findings(capsys, ".")
    linted = spy(monkeypatch)
    os.utime(project / "a.py", ns=(OLD + 10**9, OLD + 10**9))
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    assert linted == []


def test_recent_mtime_is_not_trusted(project, capsys, monkeypatch):
    # Written "now": a same-size edit within the timestamp granularity would keep size and mtime.
    (project / "a.py").write_text(GOOD)
    st = os.stat(project / "a.py")
    findings(capsys, ".")
    (project / "a.py").write_text(GOOD.replace("2, 2", "3, 3"))
    os.utime(project / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    linted = spy(monkeypatch)
    findings(capsys, ".")
    assert linted == ["a.py"]


def test_settings_and_code_changes_invalidate(project, capsys, monkeypatch):
    write(project / "a.py", BAD)
    findings(capsys, ".")
    linted = spy(monkeypatch)
    assert findings(capsys, "--ignore", "TL701", ".") == []
    assert linted == ["a.py"]
    monkeypatch.setattr(cache_mod, "code_signature", lambda: "a-new-rule-landed")
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    assert linted == ["a.py", "a.py"]


def test_indexes_of_other_torchlint_code_unused_for_a_week_are_removed(project, capsys):
    write(project / "a.py", BAD)
    findings(capsys, ".")
    folder = project / ".torchlint_cache" / "v1"
    stale, recent = folder / "0123456789abcdef01234567.json", folder / "summaries" / "76543210fedcba9876543210.json"
    for index in (stale, recent):
        index.write_text("{}")
    week = cache_mod.STALE_INDEX_SECONDS
    os.utime(stale, (OLD // 10**9, OLD // 10**9))
    os.utime(recent, (os.path.getmtime(recent) - week / 2,) * 2)
    write(project / "a.py", GOOD)  # something to save
    assert findings(capsys, ".") == []
    assert not stale.exists() and recent.exists()
    assert len(list(folder.glob("*.json"))) == 1  # this run's index


def test_corrupt_index_is_ignored_and_rewritten(project, capsys, monkeypatch):
    write(project / "a.py", BAD)
    findings(capsys, ".")
    [index] = (project / ".torchlint_cache" / "v1").glob("*.json")
    index.write_text("{not json")
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    assert json.loads(index.read_text())["format"] == "v1"
    data = json.loads(index.read_text())
    for row in data["files"].values():
        row[4] = [{"code": "TL701"}]  # an entry missing fields
    index.write_text(json.dumps(data))
    linted = spy(monkeypatch)
    assert findings(capsys, ".") == [("a.py", "TL701", 3, 9)]
    assert linted == ["a.py"]


def test_deleted_files_are_pruned(project, capsys):
    write(project / "a.py", BAD)
    write(project / "b.py", GOOD)
    findings(capsys, ".")
    (project / "b.py").unlink()
    findings(capsys, ".")
    [index] = (project / ".torchlint_cache" / "v1").glob("*.json")
    assert [os.path.basename(k) for k in json.loads(index.read_text())["files"]] == ["a.py"]


def test_no_cache_and_cache_dir_locations(project, capsys, monkeypatch):
    write(project / "a.py", BAD)
    findings(capsys, "--no-cache", ".")
    assert not (project / ".torchlint_cache").exists()
    findings(capsys, "--cache-dir", "elsewhere", ".")
    assert (project / "elsewhere" / "CACHEDIR.TAG").is_file()
    monkeypatch.setenv(cache_mod.ENV_VAR, str(project / "from-env"))
    findings(capsys, ".")
    assert (project / "from-env" / "CACHEDIR.TAG").is_file()
    monkeypatch.delenv(cache_mod.ENV_VAR)
    (project / "pyproject.toml").write_text('[tool.torchlint]\ncache-dir = "from-config"\n')
    findings(capsys, ".")
    assert (project / "from-config" / "CACHEDIR.TAG").is_file()
    assert not (project / ".torchlint_cache").exists()


def test_clean_removes_the_cache(project, capsys):
    write(project / "a.py", BAD)
    findings(capsys, ".")
    assert main(["clean"]) == 0
    assert not (project / ".torchlint_cache").exists()
    assert main(["clean"]) == 0  # nothing to remove
    (project / "precious").mkdir()
    (project / "precious" / "data.txt").write_text("keep me")
    assert main(["clean", "--cache-dir", "precious"]) == 2
    assert (project / "precious" / "data.txt").is_file()


def test_unwritable_cache_does_not_fail_the_run(project, capsys):
    write(project / "a.py", BAD)
    (project / "blocker").write_text("a file where the cache folder should go")
    code = main(["--output-format", "json", "--cache-dir", "blocker/cache", "."])
    out, err = capsys.readouterr()
    assert code == 1 and len(json.loads(out)) == 1
    assert "cannot write cache" in err


def test_concurrent_runs_leave_a_valid_cache(project):
    for i in range(40):
        write(project / f"m{i}.py", BAD if i % 2 else GOOD)
    cmd = [sys.executable, "-m", "torchlint", "--output-format", "json", "--exit-zero", "-j", "1", "."]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert len({o[0] for o in outs}) == 1
    warm = subprocess.run(cmd, capture_output=True, check=True)
    assert warm.stdout == outs[0][0]
    v1 = project / ".torchlint_cache" / "v1"
    leftovers = [p for p in [*v1.iterdir(), *(v1 / "summaries").iterdir()]
                 if p.suffix != ".json" and p.name != "summaries"]
    assert leftovers == []


def test_fully_warm_run_imports_neither_libcst_nor_the_rules(project):
    write(project / "a.py", BAD)
    write(project / "b.py", GOOD)
    probe = (
        "import sys\nfrom torchlint.cli import main\n"
        "code = main(['--select', 'ALL', '--output-format', '{fmt}', '--exit-zero', '.'])\n"
        "sys.stderr.write(' '.join(sorted(m for m in sys.modules if m == 'libcst' or m.startswith('torchlint.rules.'))))\n"
    )
    run = lambda fmt: subprocess.run(  # noqa: E731
        [sys.executable, "-c", probe.format(fmt=fmt)], capture_output=True, text=True, check=True)
    cold = run("full")
    assert "libcst" in cold.stderr.split()
    for fmt in ("full", "json"):  # code frames re-read the file; JSON needs no text
        warm = run(fmt)
        assert "DataParallel" in warm.stdout
        assert "libcst" not in warm.stderr.split() and "torchlint.rules." not in warm.stderr
    assert run("full").stdout == cold.stdout


HELPER = "def accuracy(logits, y):\n    return (logits.argmax(1) == y).float().mean().item()\n"
LOOP = ("from helper import accuracy\n\ndef train(model, opt, loader):\n    for x, y in loader:\n"
        "        out = model(x.cuda())\n        out.sum().backward()\n        opt.step()\n"
        "        acc = accuracy(out, y)\n")


def test_one_touched_file_whose_summary_is_unchanged_keeps_the_project_facts(project, capsys, monkeypatch):
    """One file edited without changing what the project index reads of it (a comment, a
    change inside a statement that calls nothing new): phase 1 runs for that file alone, the
    index is not rebuilt and the other file's findings stand. An edit that changes its summary
    (a call removed, a syntax error) rebuilds the index and moves the other file's finding."""
    from torchlint import project as project_mod
    from torchlint import runner

    write(project / "helper.py", HELPER)
    write(project / "train.py", LOOP)
    built, first = [], []
    real_index, real_first = project_mod.ProjectIndex, runner._first_pass
    # the project's index, not phase 1's over one file's summary (``runner._own_facts``)
    monkeypatch.setattr(project_mod, "ProjectIndex", lambda summaries: (
        sys._getframe(1).f_code.co_name != "_own_facts" and built.append(len(summaries))) or real_index(summaries))
    monkeypatch.setattr(runner, "_first_pass", lambda path, settings: first.append(os.path.basename(path)) or real_first(path, settings))
    expected = [("helper.py", "TL201", 2, 12)]
    assert findings(capsys, "--select", "TL201") == expected
    assert built == [2] and sorted(first) == ["helper.py", "train.py"]

    def edit(text: str, mtime: int):
        built.clear(), first.clear()
        write(project / "train.py", text, mtime)
        return findings(capsys, "--select", "TL201")

    summaries_index = next(p for p in (project / ".torchlint_cache").rglob("*.json")
                           if p.parent.name == "summaries" and not p.name.endswith(".project.json"))
    written = summaries_index.stat().st_mtime_ns
    assert edit(LOOP + "# a comment\n", OLD + 1) == expected
    assert built == [] and first == ["train.py"]
    assert summaries_index.stat().st_mtime_ns == written  # the facts stand: no summary rewritten
    assert edit(LOOP.replace("model(x.cuda())", "model(x.cuda(non_blocking=True))"), OLD + 2) == expected
    assert built == [] and first == ["train.py"]
    assert edit(LOOP.replace("        acc = accuracy(out, y)\n", ""), OLD + 3) == []  # no longer per step
    assert built == [2] and first == ["train.py"]  # helper.py's summary came from the cache
    assert edit(LOOP, OLD + 4) == expected
    assert built == [2] and first == ["train.py"]
    assert edit(LOOP + "def broken(:\n", OLD + 5) == []  # no summary now: no loop calls accuracy
    assert built == [1] and first == ["train.py"]
    assert edit(LOOP, OLD + 6) == expected
    assert built == [2]


def test_a_file_changed_while_its_mtime_is_too_recent_is_summarized_again(project, capsys, monkeypatch):
    """The project snapshot records a file whose mtime was too recent to trust as changed: the
    next run summarizes it again (a same-size edit within the mtime's granularity is seen)."""
    from torchlint import runner

    write(project / "helper.py", HELPER)
    write(project / "train.py", LOOP, mtime_ns=cache_mod.time.time_ns())  # racy
    assert findings(capsys, "--select", "TL201") == [("helper.py", "TL201", 2, 12)]
    first = []
    real_first = runner._first_pass
    monkeypatch.setattr(runner, "_first_pass", lambda path, settings: first.append(os.path.basename(path)) or real_first(path, settings))
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)  # by now the mtime would be trusted: the stored flag counts
    st = os.stat(project / "train.py")
    same_size = LOOP.replace("acc = accuracy(out, y)", "acc = accurac_(out, y)")
    (project / "train.py").write_text(same_size)
    os.utime(project / "train.py", ns=(st.st_mtime_ns, st.st_mtime_ns))
    assert findings(capsys, "--select", "TL201") == []
    assert first == ["train.py"]
