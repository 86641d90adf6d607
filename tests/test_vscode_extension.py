"""The VS Code extension (editors/vscode) agrees with the server and the docs, without npm: the
settings package.json contributes are the ones the docs list, the code action kinds and server
flags it uses are the server's, and the lockfile pins what package.json asks for. (The extension
itself runs in code-server in scripts/e2e/run, outside the suite.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "editors" / "vscode"
SETTINGS = {
    "torchlint.enable", "torchlint.path", "torchlint.interpreter", "torchlint.args", "torchlint.preview",
    "torchlint.notebooks.enable", "torchlint.trace.server",
}


@pytest.fixture(scope="module")
def package() -> dict:
    return json.loads((EXT / "package.json").read_text())


def test_package_contributes_the_documented_settings_and_commands(package):
    contributed = set(package["contributes"]["configuration"]["properties"])
    assert contributed == SETTINGS
    docs = (ROOT / "docs" / "editors.md").read_text()
    readme = (EXT / "README.md").read_text()
    for name in SETTINGS:
        assert f"`{name}`" in docs, f"docs/editors.md does not list {name}"
        assert f"`{name}`" in readme, f"editors/vscode/README.md does not list {name}"
    commands = {c["command"] for c in package["contributes"]["commands"]}
    assert commands == {"torchlint.restart", "torchlint.fixAll", "torchlint.showLogs"}
    assert "onNotebook:jupyter-notebook" in package["activationEvents"]


def test_the_extension_uses_the_servers_code_action_kinds_and_flags():
    from torchlint.commands.server import build_parser
    from torchlint.server import FIX_ALL_KIND, NOTEBOOK_FIX_ALL_KIND, NOTEBOOK_TYPE

    source = (EXT / "src" / "extension.ts").read_text()
    command = (EXT / "src" / "command.ts").read_text()
    assert f'"{FIX_ALL_KIND}"' in source and f'"{NOTEBOOK_FIX_ALL_KIND}"' in source
    assert f"onNotebook:{NOTEBOOK_TYPE}" in (EXT / "package.json").read_text()
    flags = re.findall(r'args\.push\("(--[a-z-]+)"\)', command)
    assert sorted(flags) == ["--no-preview", "--preview"]
    for flag in flags:  # `torchlint server` accepts what the extension passes
        build_parser().parse_args([flag])


def test_the_lockfile_pins_package_json_and_build_output_is_not_committed(package):
    lock = json.loads((EXT / "package-lock.json").read_text())
    root = lock["packages"][""]
    assert root.get("dependencies", {}) == package["dependencies"]
    assert root.get("devDependencies", {}) == package["devDependencies"]
    assert lock["packages"]["node_modules/vscode-languageclient"]["version"] == package["dependencies"]["vscode-languageclient"]
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert {"editors/vscode/node_modules/", "editors/vscode/dist/", "*.vsix", ".e2e/"} <= set(ignored)
    # the .vsix holds the bundle, not the sources or node_modules
    assert (EXT / ".vscodeignore").read_text().splitlines()[:2] == ["**", "!dist/extension.js"]
