"""Jupyter notebooks (torchlint/notebook.py): the joined program, IPython masking, positions in
cells, reports, fixes written back byte for byte, the cache, discovery."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from torchlint.cli import main
from torchlint.config import Settings, settings_from_table
from torchlint.diagnostics import Diagnostic, Edit, Fix, Location
from torchlint.notebook import (
    JsonMap,
    _fit_fix,
    build_program,
    cell_magic,
    code_digest,
    fix_notebook,
    lint_notebook,
    mask_ipython,
    parse_notebook,
    render,
)
from torchlint.source import UnreadableFile

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "fixtures" / "notebooks"
ALL = Settings(root=str(ROOT))


def expected(name: str):
    lines = [l.strip() for l in (NOTEBOOKS / f"{name}.expected").read_text().splitlines() if l.strip()]
    if name == "syntax_error" and sys.version_info < (3, 10):  # 3.9's parser: the unclosed `(` at the input's end
        lines = [l.replace("cell 2:2:16-2:16 TL001", "cell 2:2:22-2:22 TL001") for l in lines]
    return lines


def found(diagnostics):
    return [
        f"cell {d.cell}:{d.location.row}:{d.location.column}-{d.end_location.row}:{d.end_location.column} {d.code}"
        for d in diagnostics
    ]


def notebook(*sources, metadata=None, indent=1, cell_type="code") -> str:
    """A notebook as Jupyter writes it: each source a code cell (or ``("markdown", text)``)."""
    cells = []
    for i, src in enumerate(sources):
        kind, text = src if isinstance(src, tuple) else (cell_type, src)
        cell = {"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": text.splitlines(True)}
        if kind == "code":
            cell.update(execution_count=i + 1, outputs=[{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}])
        cells.append(cell)
    nb = {"cells": cells, "metadata": metadata if metadata is not None else {"language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, sort_keys=True, indent=indent, ensure_ascii=False) + "\n"


def codes(raw: str, settings=ALL, path="nb.ipynb"):
    return [(d.code, d.cell, d.location.row, d.location.column) for d in lint_notebook(raw, path, settings)]


LOOP = "for x, y in loader:\n    x = x.cuda()\n    loss = model(x).sum()\n    loss.backward()\n    print(loss.item())\n"


# -- fixtures -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["train", "syntax_error"])
def test_fixture_notebooks_findings_exactly(name):
    raw = (NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8")
    assert found(lint_notebook(raw, f"{name}.ipynb", ALL)) == expected(name)


def test_cli_on_a_notebook_with_findings_exits_1_and_names_cells(capsys):
    code = main(["--no-cache", "--isolated", "--output-format", "concise", str(NOTEBOOKS / "train.ipynb")])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{NOTEBOOKS / 'train.ipynb'}:cell 6:9:15: TL201 " in out
    assert out.count("\n") == len(expected("train"))


# -- the program ---------------------------------------------------------------------------------

def test_cells_are_one_program_import_in_cell_1_loop_in_cell_3():
    raw = notebook("import torch\nfrom torch.utils.data import DataLoader\n",
                   ("markdown", "# data\n"), "loader = DataLoader(ds, num_workers=2, pin_memory=True)\n", LOOP)
    # the blocking copy of a batch of the pinned loader of cell 3 (TL203, out of preview since issue 29)
    assert codes(raw) == [("TL203", 4, 2, 9), ("TL201", 4, 5, 11)]


def test_masking_keeps_lengths_and_lines():
    text = ("%matplotlib inline\n!nvidia-smi\nfiles = !ls -la\nmodel?\n??torch\nif True:\n    !echo hi\n"
            "x = 1 != 2\ns = '%d' % 3\ndoc = '''\n!not a shell line\n%not magic\n'''\n"
            "!cat a \\\n   b\ny = (1,\n!2)\n")
    masked, ranges = mask_ipython(text)
    assert len(masked) == len(text)
    assert [len(l) for l in masked.splitlines()] == [len(l) for l in text.splitlines()]
    lines = masked.splitlines()
    assert lines[0].startswith("#") and lines[1].startswith("#")
    assert lines[2].startswith("files = 0#")  # keeps the binding
    assert lines[3].startswith("#") and lines[4].startswith("#")
    assert lines[6] == "    0#      "  # an indented escape stays a statement
    assert lines[7:13] == text.splitlines()[7:13]  # !=, %-formatting, a string's lines: Python
    assert lines[13].startswith("#") and lines[14].strip() == ""  # backslash continuation
    assert lines[16] == "!2)"  # inside brackets: not an escape (and not valid Python either)
    import ast

    ast.parse("\n".join(lines[:15]))
    assert len(ranges) == 8


@pytest.mark.parametrize("magic,linted", [
    ("%%time", True), ("%%timeit -n1", True), ("%%capture out", True), ("%%prun", True),
    ("%%bash", False), ("%%html", False), ("%%writefile x.py", False), ("%%sql", False), ("%%mystery", False),
])
def test_cell_magics_python_bodies_are_linted_others_skipped(magic, linted):
    raw = notebook("import torch\n", f"{magic}\nx = torch.zeros(3).cuda()\n")
    assert codes(raw) == ([("TL202", 2, 2, 5)] if linted else [])
    assert cell_magic(f"\n{magic}\nbody") == magic[2:].split()[0]


def test_line_magics_shell_and_help_do_not_break_the_parse():
    raw = notebook("%load_ext autoreload\n%autoreload 2\nimport torch\n",
                   "out = !nvidia-smi\nx = torch.zeros(3).cuda()\ntorch.zeros?\n%time y = 1\n")
    assert codes(raw) == [("TL202", 2, 2, 5)]


def test_a_cell_that_does_not_parse_is_tl001_in_that_cell_and_the_rest_is_linted():
    raw = notebook("import torch\n", "def f(:\n    pass\n", "x = torch.zeros(3).cuda()\n")
    assert codes(raw) == [("TL001", 2, 1, 7), ("TL202", 3, 1, 5)]


def test_empty_notebook_cells_and_a_notebook_without_code():
    assert codes(notebook("", "   \n", ("markdown", "text"))) == []
    assert codes(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})) == []


def test_a_notebook_without_language_info_is_python_and_another_language_is_skipped():
    raw = "import torch\nx = torch.zeros(3).cuda()\n"
    assert codes(notebook(raw, metadata={})) == [("TL202", 1, 2, 5)]
    assert codes(notebook(raw, metadata={"kernelspec": {"language": "python", "name": "python3"}})) != []
    assert codes(notebook(raw, metadata={"language_info": {"name": "R"}})) == []


@pytest.mark.parametrize("text,reason", [
    ("import torch\nx = 1\n", "invalid JSON (Expecting value at line 1 column 1)"),
    ('{"cells": 3}', '"cells" is not a list'),
    ('{"metadata": {}}', 'no "cells" list'),
    ('{"worksheets": []}', "nbformat 3 notebooks are not supported"),
    ('{"cells": [{"cell_type": "code", "source": 3}]}', "cell 1 has no source text"),
    ('{"cells": [1]}', "a cell is not a JSON object"),
    ('{"cells": []} x', "extra data"),
    ('[1, 2]', "expected a JSON object"),
])
def test_text_that_is_not_a_notebook_is_unreadable_with_the_reason(text, reason):
    with pytest.raises(UnreadableFile, match=None) as info:
        parse_notebook(text)
    assert reason in str(info.value)


def test_cli_reports_invalid_notebook_json_as_tl002_never_as_python(tmp_path, capsys):
    bad = tmp_path / "train.ipynb"
    bad.write_text("import torch\nx = torch.zeros(3).cuda()\n")
    code = main(["--no-cache", "--isolated", "--output-format", "concise", str(bad)])
    out = capsys.readouterr().out
    assert code == 1
    assert out == f"{bad}:1:1: TL002 Cannot read file: not a valid notebook: invalid JSON (Expecting value at line 1 column 1)\n"


# -- suppression -----------------------------------------------------------------------------------

def test_noqa_in_a_cell_and_file_level_noqa_in_any_cell():
    body = "import torch\nx = torch.zeros(3).cuda()  # noqa: TL202\ny = torch.ones(3).cuda()\n"
    assert codes(notebook(body)) == [("TL202", 1, 3, 5)]
    assert codes(notebook(body, "# torchlint: noqa\n")) == []
    assert codes(notebook(body, "# torchlint: noqa: TL202\n")) == []


# -- reports ---------------------------------------------------------------------------------------

def test_json_output_has_the_cell_and_edits_name_theirs(capsys):
    import jsonschema

    # --preview: TL101's fix (a preview rule since issue 29) puts `import os` in another cell
    main(["--no-cache", "--isolated", "--preview", "--output-format", "json", str(NOTEBOOKS / "train.ipynb")])
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, json.loads((ROOT / "docs" / "json-output.schema.json").read_text()))
    assert [d["cell"] for d in data] == [3, 3, 5, 6, 6, 9, 9]  # the last: TL004, `# noqa: TL501` outside a loop
    assert all(e["cell"] == d["cell"] for d in data if d["fix"] for e in d["fix"]["edits"])
    assert Diagnostic.from_json(data[0]).cell == 3


def test_full_format_frames_the_cells_own_lines(capsys):
    main(["--no-cache", "--isolated", str(NOTEBOOKS / "train.ipynb")])
    out = capsys.readouterr().out
    assert "train.ipynb:cell 6:9:15: TL201 [host-sync-in-loop]" in out
    assert " 9 |         print(loss.item())  # flagged (TL201): a sync every step\n" in out
    assert "\"cells\"" not in out


def test_sarif_and_github_point_into_the_json_file(capsys):
    raw = (NOTEBOOKS / "train.ipynb").read_text()
    line = raw.splitlines().index('    "        print(loss.item())  # flagged (TL201): a sync every step\\n",') + 1
    main(["--no-cache", "--isolated", "--output-format", "sarif", str(NOTEBOOKS / "train.ipynb")])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    tl201 = next(r for r in results if r["ruleId"] == "TL201")
    region = tl201["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"], region["endColumn"]) == (line, 20, 31)
    assert tl201["properties"]["notebookCell"] == 6 and "fixes" not in tl201
    main(["--no-cache", "--isolated", "--output-format", "github", str(NOTEBOOKS / "train.ipynb")])
    out = capsys.readouterr().out
    assert f"line={line},col=20,endLine={line},endColumn=31,title=torchlint (TL201) cell 6%3A9%3A15::" in out


def test_json_map_lands_on_the_same_character_through_escapes():
    raw = notebook('s = "é\\t\\"q\\""; x = torch.zeros(3)\n')
    json_map = JsonMap(raw)
    loc = json_map.location(1, Location(1, 17))
    assert raw.splitlines()[loc.row - 1][loc.column - 1:].startswith("x = torch")
    compact = json.dumps(json.loads(raw), ensure_ascii=True)
    loc = JsonMap(compact).location(1, Location(1, 17))
    assert compact[loc.column - 1:].startswith("x = torch")


# -- fixes -----------------------------------------------------------------------------------------

def _outside_sources(raw: str) -> str:
    """The notebook's text with every cell's source value cut out."""
    nb = parse_notebook(raw)
    out, cursor = [], 0
    for cell in nb.cells:
        out.append(raw[cursor:cell.span[0]])
        cursor = cell.span[1]
    return "".join(out) + raw[cursor:]


def test_fix_changes_only_edited_cells_and_a_second_fix_changes_nothing(tmp_path, capsys):
    nbformat = pytest.importorskip("nbformat")
    path = tmp_path / "train.ipynb"
    shutil.copy(NOTEBOOKS / "train.ipynb", path)
    before = path.read_text()
    # --preview keeps TL101 (a preview rule since issue 29) and its `import os` edit in the fix
    assert main(["--no-cache", "--isolated", "--preview", "--fix", "--unsafe-fixes", "-q", str(path)]) == 1
    after = path.read_text()
    assert after != before and after.endswith("}\n")
    assert _outside_sources(after) == _outside_sources(before)  # outputs, ids, metadata, layout
    old, new = json.loads(before), json.loads(after)
    changed = [i + 1 for i, (a, b) in enumerate(zip(old["cells"], new["cells"])) if a != b]
    assert changed == [3, 5, 6, 9]
    assert all(set(a) == set(b) and all(a[k] == b[k] for k in a if k != "source")
               for a, b in zip(old["cells"], new["cells"]))
    assert "".join(new["cells"][4]["source"]).count("bias=False") == 1
    nbformat.validate(nbformat.reads(after, as_version=4))
    program = build_program([(i + 1, "".join(c["source"])) for i, c in enumerate(new["cells"]) if c["cell_type"] == "code"])
    assert not program.broken
    compile(program.text, "nb", "exec")
    capsys.readouterr()
    assert main(["--no-cache", "--isolated", "--preview", "--fix", "--unsafe-fixes", "-q", str(path)]) == 1  # TL201 has no fix
    assert path.read_text() == after


def test_fix_keeps_a_string_source_a_string_and_compact_json_compact():
    raw = json.dumps({"cells": [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": "import torch\nx = torch.zeros(3).cuda()"},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["y = torch.ones(2).cuda()"]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 4})
    result = fix_notebook(raw, "nb.ipynb", ALL)
    assert result.error is None
    assert '"source": "import torch\\nx = torch.zeros(3, device=\\"cuda\\")"' in result.text
    assert '"source": ["y = torch.ones(2, device=\\"cuda\\")"]' in result.text
    assert "\n" not in result.text


def test_added_import_goes_to_the_first_code_cell_that_holds_imports():
    raw = notebook("!pip install torch\n", ("markdown", "# setup"),
                   "%matplotlib inline\nimport torch\nfrom torch.utils.data import DataLoader\n",
                   "import numpy as np\n",
                   "loader = DataLoader(ds, pin_memory=True)\nfor x in loader:\n    x.cuda()\n")
    settings = settings_from_table({"select": ["TL101"], "preview": True}, "t", ALL)  # TL101: preview
    result = fix_notebook(raw, "nb.ipynb", settings, unsafe=True)
    cells = json.loads(result.text)["cells"]
    # placed among that cell's imports (where exactly is the fix builder's import placement)
    lines = "".join(cells[2]["source"]).splitlines()
    assert lines.count("import os") == 1
    assert [line for line in lines if line and line != "import os"] == [
        "%matplotlib inline", "import torch", "from torch.utils.data import DataLoader"]
    assert "num_workers=min(4, os.cpu_count() or 1)" in "".join(cells[4]["source"])
    assert cells[0] == json.loads(raw)["cells"][0] and cells[3] == json.loads(raw)["cells"][3]


def test_an_edit_crossing_a_cell_boundary_or_a_magic_line_is_refused():
    program = build_program([(1, "import torch\n"), (2, "!ls\nx = 1\n")])
    d = Diagnostic("TL202", "n", "m", "nb.ipynb", Location(1, 1), Location(1, 2))
    refused = set()
    across = Fix("safe", "f", (Edit(Location(1, 1), Location(2, 2), "x"),))
    on_magic = Fix("safe", "f", (Edit(Location(2, 2), Location(2, 2), "x"),))
    inside = Fix("safe", "f", (Edit(Location(3, 1), Location(3, 2), "y"),))
    assert _fit_fix(program, Diagnostic(**{**d.__dict__, "fix": across}), refused).fix is None
    assert _fit_fix(program, Diagnostic(**{**d.__dict__, "fix": on_magic}), refused).fix is None
    assert refused == {"TL202"}
    assert _fit_fix(program, Diagnostic(**{**d.__dict__, "fix": inside}), set()).fix == inside


def test_diff_is_per_cell_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook("import torch\n", ("markdown", "x"), "x = torch.zeros(3).cuda()\ny = 1\n"))
    before = path.read_text()
    assert main(["--no-cache", "--isolated", "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert out == (f"--- a/{path}:cell 3\n+++ b/{path}:cell 3\n@@ -1,2 +1,2 @@\n"
                   "-x = torch.zeros(3).cuda()\n+x = torch.zeros(3, device=\"cuda\")\n y = 1\n")
    assert path.read_text() == before


def test_render_without_changes_is_the_same_text():
    raw = (NOTEBOOKS / "train.ipynb").read_text()
    nb = parse_notebook(raw)
    assert render(nb, {}) == raw
    assert render(nb, {c.number: c.source for c in nb.code_cells}) == raw
    raw2 = (NOTEBOOKS / "syntax_error.ipynb").read_text()
    nb2 = parse_notebook(raw2)
    assert render(nb2, {c.number: c.source for c in nb2.code_cells}) == raw2


def test_fixing_a_cell_that_was_an_empty_list_uses_the_notebook_indentation():
    raw = notebook("import torch\n")
    nb = parse_notebook(raw)
    assert render(nb, {1: "a\nb"}).count('"source": [\n    "a\\n",\n    "b"\n   ]') == 1
    empty = raw.replace('"source": [\n    "import torch\\n"\n   ]', '"source": []')
    nb = parse_notebook(empty)
    assert '"source": [\n    "a\\n",\n    "b"\n   ]' in render(nb, {1: "a\nb"})


# -- cache, discovery, stdin ----------------------------------------------------------------------

def test_rerunning_a_notebook_keeps_its_cache_digest_editing_code_changes_it():
    raw = notebook("import torch\n")
    rerun = json.loads(raw)
    rerun["cells"][0]["execution_count"] = 99
    rerun["cells"][0]["outputs"] = []
    assert code_digest(json.dumps(rerun)) == code_digest(raw)
    edited = json.loads(raw)
    edited["cells"][0]["source"] = ["import torch as t\n"]
    assert code_digest(json.dumps(edited)) != code_digest(raw)


def test_cache_hit_after_the_notebook_is_rerun(tmp_path):
    from torchlint.cache import Cache
    from torchlint.config import SettingsResolver
    from torchlint.runner import lint_paths

    path = tmp_path / "nb.ipynb"
    path.write_text(notebook("import torch\nx = torch.zeros(3).cuda()\n"))
    resolver = SettingsResolver(cwd=str(tmp_path), isolated=True)
    first = lint_paths([str(path)], resolver, jobs=1, cache=Cache(str(tmp_path / "cache")))
    data = json.loads(path.read_text())
    data["cells"][0]["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["a much longer output\n"]}]
    path.write_text(json.dumps(data, indent=1))
    second = lint_paths([str(path)], resolver, jobs=1, cache=Cache(str(tmp_path / "cache")))
    assert second.cached == 1 and second.diagnostics == first.diagnostics and first.diagnostics[0].cell == 1


def test_folders_include_notebooks_unless_configured_off(tmp_path, capsys):
    (tmp_path / "nb.ipynb").write_text(notebook("import torch\nx = torch.zeros(3).cuda()\n"))
    assert main(["--no-cache", "--output-format", "concise", str(tmp_path)]) == 1
    assert "nb.ipynb:cell 1:2:5: TL202" in capsys.readouterr().out
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\ninclude-notebooks = false\n")
    assert main(["--no-cache", "--output-format", "concise", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["--no-cache", "--output-format", "concise", str(tmp_path / "nb.ipynb")]) == 1  # named: linted


def _tree_with_a_notebook(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "nb.ipynb").write_text(notebook("import torch\nx = torch.zeros(3).cuda()\n"))
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(3).cuda()\n")
    (tmp_path / "stubs.pyi").write_text("x: int\n")
    return tmp_path


@pytest.mark.parametrize("flags, listed", [
    ([], ["nb.ipynb", "stubs.pyi", "train.py"]),
    (["--extension", "py,pyi"], ["stubs.pyi", "train.py"]),
    (["--extension", "py", "--extension", ".ipynb"], ["nb.ipynb", "train.py"]),
    (["--extension", "ipynb"], ["nb.ipynb"]),
    (["--no-include-notebooks"], ["stubs.pyi", "train.py"]),
    (["--extension", "PY,pyi,ipynb", "--include-notebooks"], ["nb.ipynb", "stubs.pyi", "train.py"]),
])
def test_extension_and_include_notebooks_flags_choose_the_suffixes_found(tmp_path, capsys, monkeypatch, flags, listed):
    monkeypatch.chdir(_tree_with_a_notebook(tmp_path))
    assert main(["--isolated", "--show-files", *flags, "."]) == 0
    assert capsys.readouterr().out.split() == listed


def test_flags_override_the_config_key_and_show_in_the_settings(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(_tree_with_a_notebook(tmp_path))
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\ninclude-notebooks = false\n")
    assert main(["--show-files", "."]) == 0
    assert capsys.readouterr().out.split() == ["stubs.pyi", "train.py"]
    assert main(["--show-files", "--include-notebooks", "."]) == 0
    assert capsys.readouterr().out.split() == ["nb.ipynb", "stubs.pyi", "train.py"]
    assert main(["--show-settings", "--extension", "ipynb,py", "."]) == 0
    out = capsys.readouterr().out
    assert 'extension = ["ipynb", "py"]' in out and "include-notebooks = true" in out


@pytest.mark.parametrize("flags, error", [
    (["--extension", "ipy"], "torchlint: error: --extension: unknown extension 'ipy' (expected some of py, pyi, ipynb)"),
    (["--extension", ","], "torchlint: error: --extension: expected some of py, pyi, ipynb"),
    (["--extension", "py", "--include-notebooks"],
     "torchlint: error: --extension py and --include-notebooks disagree; give one of them"),
])
def test_bad_extension_flags_are_one_line_errors(tmp_path, capsys, monkeypatch, flags, error):
    monkeypatch.chdir(_tree_with_a_notebook(tmp_path))
    assert main(["--isolated", "--no-cache", *flags, "."]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == error and captured.out == ""


def test_force_exclude_skips_a_named_notebook_when_notebooks_are_off(tmp_path, capsys, monkeypatch):
    """pre-commit names every changed file (`torchlint --force-exclude nb.ipynb train.py`)."""
    monkeypatch.chdir(_tree_with_a_notebook(tmp_path))
    assert main(["--isolated", "--no-cache", "--output-format", "concise", "--force-exclude",
                 "--no-include-notebooks", "nb.ipynb", "train.py"]) == 1
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["train.py"]
    assert main(["--isolated", "--no-cache", "--output-format", "concise", "--force-exclude",
                 "--extension", "ipynb", "nb.ipynb", "train.py"]) == 1
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["nb.ipynb"]
    # without --force-exclude, a named file is always linted
    assert main(["--isolated", "--no-cache", "--output-format", "concise", "--extension", "py", "nb.ipynb"]) == 1
    assert capsys.readouterr().out.startswith("nb.ipynb:cell 1:2:5: TL202")


def test_stdin_with_a_notebook_filename(monkeypatch, capsys):
    import io
    import sys

    raw = notebook("import torch\nx = torch.zeros(3).cuda()\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw.encode())))
    assert main(["--isolated", "--output-format", "concise", "--stdin-filename", "nb.ipynb", "-"]) == 1
    assert capsys.readouterr().out == "nb.ipynb:cell 1:2:5: TL202 Tensor created on the CPU then moved; pass `device=` to the factory\n"


# -- the language server ------------------------------------------------------------------------

def test_lint_for_editor_points_into_the_json_and_its_fix_rewrites_the_cell():
    from torchlint.edits import apply_edits
    from torchlint.notebook import lint_for_editor

    raw = (NOTEBOOKS / "train.ipynb").read_text()
    found_ = {d.code: d for d in lint_for_editor(raw, "train.ipynb", ALL)}
    d = found_["TL202"]
    line = raw.splitlines()[d.location.row - 1]
    assert line[d.location.column - 1:d.end_location.column - 1] == "torch.zeros(16, 3, 32, 32).cuda()"
    fixed = json.loads(apply_edits(raw, d.fix.edits))
    assert "".join(fixed["cells"][8]["source"]).startswith('noise = torch.zeros(16, 3, 32, 32, device="cuda")')
    # a client's Python view of the notebook: IPython lines masked, positions unchanged
    view = "%matplotlib inline\nimport torch\nx = torch.zeros(3).cuda()\n!ls\n"
    assert [(d.code, d.location.row, d.location.column) for d in lint_for_editor(view, "v.ipynb", ALL)] == [("TL202", 3, 5)]


def test_server_lints_an_ipynb_text_document_and_offers_its_fix(tmp_path):
    pytest.importorskip("pygls")
    from test_server import LspClient, code_action, uri_of  # noqa: F401  (the JSON-RPC test client)
    import os
    import sys

    (tmp_path / ".git").mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = LspClient(tmp_path, [sys.executable, "-m", "torchlint", "server", "--debounce-ms", "0"], env)
    try:
        client.initialize_result = client.initialize(tmp_path)
        path = tmp_path / "nb.ipynb"
        raw = notebook("import torch\n", ("markdown", "# data"), "x = torch.zeros(3).cuda()\n")
        path.write_text(raw)
        uri = uri_of(path)
        client.open(uri, raw, language="json")
        published = client.diagnostics(uri, 1)["diagnostics"]
        assert [d["code"] for d in published] == ["TL202"]
        start = published[0]["range"]["start"]
        assert raw.splitlines()[start["line"]][start["character"]:].startswith("torch.zeros(3).cuda()")
        actions = code_action(client, uri, published, only=["quickfix"])
        edit = actions[0]["edit"]
        edits = (edit.get("changes") or {}).get(uri) or edit["documentChanges"][0]["edits"]
        assert any('device=\\"cuda\\"' in e["newText"] for e in edits)
    finally:
        client.close()


def test_python_view_of_a_cell_magic_ending_in_a_quote_hides_no_finding():
    # jupyterlab-lsp's virtual document for fixtures/notebooks/train.ipynb: its `%%bash` cell ends
    # in `"`, and jupyterlab-lsp puts the cell unescaped in a triple-quoted string, so the view does
    # not parse. The magic's call is masked (the command line never lints a `%%bash` cell): the
    # notebook's findings show, at the same rows as in the view.
    from torchlint.notebook import lint_for_editor

    view = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n\n\n"
        "loader = DataLoader(ds, batch_size=8)\n\n\n"
        'get_ipython().run_cell_magic("bash", "", """# not Python\n'
        'echo "torch.zeros(3).cuda()"""")\n\n\n'
        'get_ipython().run_cell_magic("writefile", " helper.py", """x = torch.zeros(3).cuda()""")\n\n\n'
        "noise = torch.zeros(16).cuda()\n"
    )
    preview = Settings(root=str(ROOT), preview=True)  # TL101 is a preview rule (issue 29)
    found_ = [(d.code, d.location.row) for d in lint_for_editor(view, "train.ipynb", preview)]
    assert ("TL001" in dict(found_)) is False
    assert ("TL101", 5) in found_ and ("TL202", 15) in found_
    assert [row for code, row in found_ if code == "TL202"] == [15]  # not the %%writefile cell's
