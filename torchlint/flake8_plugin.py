"""torchlint's rules inside flake8: ``flake8 --select TL path/``, as TorchFix's ``TOR`` plugin ran.

Registered as the ``TL`` entry point of ``flake8.extension``. flake8 selects and ignores codes
(``--select``/``--extend-ignore``/``per-file-ignores``) and applies its own ``# noqa``; torchlint's
``# noqa`` (with TorchFix's codes mapped) is applied too. Fixes stay in ``torchlint --fix``.

Options (command line or ``[flake8]`` in setup.cfg / tox.ini / .flake8):
  --torchlint-target-torch-version X.Y   the torch version the code must run on
  --torchlint-preview                    also run rules in preview
Without them the nearest ``pyproject.toml`` with ``[tool.torchlint]`` (or a declared torch
dependency) gives the target version, as for ``torchlint`` itself.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Iterator, Optional, Tuple

from torchlint import __version__


class Plugin:
    name = "torchlint"
    version = __version__

    target_torch_version: Optional[str] = None
    preview: bool = False
    _settings_by_dir: dict = {}

    def __init__(self, tree, filename: str, lines) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option(
            "--torchlint-target-torch-version", default=None, parse_from_config=True,
            help="torch version the code must run on (torchlint), e.g. 2.4",
        )
        manager.add_option(
            "--torchlint-preview", default=False, action="store_true", parse_from_config=True,
            help="also run torchlint's rules in preview",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        cls.target_torch_version = options.torchlint_target_torch_version
        cls.preview = bool(options.torchlint_preview)
        cls._settings_by_dir = {}

    def _settings(self):
        from torchlint.config import CliOverrides, SettingsResolver

        folder = os.path.dirname(os.path.abspath(self.filename)) if self.filename not in ("-", "stdin") else os.getcwd()
        settings = self._settings_by_dir.get(folder)
        if settings is None:
            overrides = CliOverrides(target_torch_version=self.target_torch_version, preview=self.preview or None)
            settings = SettingsResolver(overrides, cwd=folder).default
            # flake8 selects the codes; every rule runs (TL001/TL002 are flake8's own E999/E902).
            settings = replace(settings, select=("ALL",),
                               extend_select=(), ignore=(), per_file_ignores=())
            self._settings_by_dir[folder] = settings
        return settings

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from torchlint.config import ConfigError
        from torchlint.engine import lint_source

        text = "".join(self.lines)
        try:
            diagnostics = lint_source(text, self.filename, self._settings())
        except ConfigError as exc:
            yield 1, 0, f"TL002 torchlint configuration error: {exc}", type(self)
            return
        for d in diagnostics:
            yield d.location.row, d.location.column - 1, f"{d.code} {d.message}", type(self)
