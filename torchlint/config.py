"""Configuration: ``[tool.torchlint]`` in the nearest ``pyproject.toml``, merged with CLI flags.

Every file gets the settings of the nearest ``pyproject.toml`` above it that has a
``[tool.torchlint]`` table, or ``.torchlint.toml`` / ``torchlint.toml`` (top-level keys; in one
folder ``.torchlint.toml`` > ``torchlint.toml`` > ``pyproject.toml``), or ``--config``;
``--isolated`` ignores config files.

Unless ``target-torch-version`` is given (config or ``--target-torch-version``), it is the
lowest torch version the project declares in its dependency files (``dependencies.py``): those in
the config's folder, or with no config, in the nearest folder above the file that holds one (or a
``.git``). ``--isolated`` ignores dependency files too: they are configuration as well.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import sys
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from torchlint.globs import GlobError, compile_glob, glob_problem
from torchlint.torch_api import DEFAULT_TORCH_VERSION


class ConfigError(Exception):
    """A bad configuration value or flag; the message is one line naming the culprit."""


LIST_KEYS = (
    "select", "ignore", "extend-select", "exclude", "extend-exclude",
    "fixable", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes",
)
KNOWN_KEYS = frozenset(LIST_KEYS) | {
    "per-file-ignores", "target-torch-version", "respect-gitignore", "cache-dir", "preview",
    "include-notebooks",
    "max-file-size",
}
CODE_LIST_KEYS = frozenset({
    "select", "ignore", "extend-select", "fixable", "unfixable",
    "extend-safe-fixes", "extend-unsafe-fixes",
})


def parse_version(text: str, where: str) -> Tuple[int, int]:
    # components of at most 6 digits: int() of a 5,000-digit string is a ValueError (issue 32)
    match = re.fullmatch(r"\s*(\d{1,6})\.(\d{1,6})(?:\.\d{1,6})?\s*", str(text))
    if not match:
        shown = repr(text) if len(str(text)) <= 40 else repr(str(text)[:30]) + f"... ({len(str(text))} characters)"
        raise ConfigError(f"{where}: expected a version like \"2.4\", got {shown}")
    return int(match.group(1)), int(match.group(2))


def expand_codes(selectors: Iterable[str], where: str) -> FrozenSet[str]:
    """Codes named by selectors: ``ALL``, a code, a code prefix (``TL1``) or a rule name."""
    from torchlint.rules import code_for, known_codes

    codes = known_codes()
    out: Set[str] = set()
    for selector in selectors:
        sel = selector.strip()
        if sel.upper() == "ALL":
            out.update(codes)
            continue
        named = code_for(sel)
        if named:
            out.add(named)
            continue
        from torchlint.deprecations import TORCHFIX_CODES  # migration: TorchFix's codes, once each

        if sel.upper() in TORCHFIX_CODES:
            tl_code, warned = TORCHFIX_CODES[sel.upper()], expand_codes.__dict__.setdefault("warned", set())
            if sel.upper() not in warned:
                warned.add(sel.upper())
                print(f"torchlint: warning: {where}: TorchFix code {sel} is deprecated; use {tl_code}", file=sys.stderr)
            out.add(tl_code)
            continue
        matched = [c for c in codes if c.startswith(sel.upper())] if re.fullmatch(r"(?i)TL\d*", sel) else []
        if not matched:
            raise ConfigError(f"{where}: unknown rule code or prefix {selector!r}")
        out.update(matched)
    return frozenset(out)


def path_matches(pattern: str, relpath: str) -> bool:
    """Does ``relpath`` (relative, '/'-separated) match; a pattern without '/' matches any
    single component, as in .gitignore and flake8's ``exclude``. The glob dialect and its
    linear-time matching: ``torchlint.globs``. An invalid pattern matches nothing (the
    configuration reports it: ``check_globs``)."""
    rel = relpath.replace(os.sep, "/")
    while rel.startswith("./"):
        rel = rel[2:]
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    try:
        rx = compile_glob(pattern.lstrip("/"))
    except GlobError:
        return False
    if "/" not in pattern.rstrip("/"):
        return any(rx.match(part) for part in rel.split("/"))
    return rx.match(rel) is not None


def check_globs(globs: Iterable[str], where: str) -> None:
    """A ``ConfigError`` naming the first invalid glob of ``globs`` (a leading ``!`` negates)."""
    for glob in globs:
        body = glob[1:] if glob.startswith("!") else glob
        problem = glob_problem(body.strip().lstrip("/"))
        if problem:
            raise ConfigError(f"{where}: invalid glob {glob!r}: {problem}")


@dataclass(frozen=True)
class Settings:
    select: Tuple[str, ...] = ("ALL",)
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    exclude: Tuple[str, ...] = ()
    extend_exclude: Tuple[str, ...] = ()
    target_torch_version: Tuple[int, int] = DEFAULT_TORCH_VERSION
    fixable: Tuple[str, ...] = ("ALL",)
    unfixable: Tuple[str, ...] = ()
    extend_safe_fixes: Tuple[str, ...] = ()
    extend_unsafe_fixes: Tuple[str, ...] = ()
    respect_gitignore: bool = True
    #: Folders' ``*.ipynb`` files are linted too (docs/notebooks.md).
    include_notebooks: bool = True
    #: ``--extension``: the suffixes folders are searched for, without dots; None: py, pyi and,
    #: with ``include_notebooks``, ipynb.
    extensions: Optional[Tuple[str, ...]] = None
    cache_dir: Optional[str] = None
    #: Larger files are not read (TL002); 0 means no limit. See source.read_bytes.
    max_file_size: int = 10 * 1024 * 1024
    #: Preview rules run only when this is on (``--preview`` / ``preview = true``), as in ruff.
    preview: bool = False
    #: Folder globs are relative to (the config file's folder, else the working directory).
    root: str = "."
    config_path: Optional[str] = None

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def lint_suffixes(self) -> Tuple[str, ...]:
        """The file suffixes folder discovery picks (``.py``, ``.pyi``, ``.ipynb``)."""
        if self.extensions is not None:
            return tuple("." + e for e in self.extensions)
        return (".py", ".pyi", ".ipynb") if self.include_notebooks else (".py", ".pyi")

    @cached_property
    def enabled_codes(self) -> FrozenSet[str]:
        selected = expand_codes(self.select, "select") | expand_codes(self.extend_select, "extend-select")
        enabled = selected - expand_codes(self.ignore, "ignore")
        if not self.preview:
            from torchlint.rules import preview_codes

            enabled -= preview_codes()
        return enabled

    @cached_property
    def _per_file(self) -> Tuple[Tuple[str, FrozenSet[str]], ...]:
        return tuple(
            (glob, expand_codes(codes, f"per-file-ignores[{glob!r}]")) for glob, codes in self.per_file_ignores
        )

    @cached_property
    def fixable_codes(self) -> FrozenSet[str]:
        return expand_codes(self.fixable, "fixable") - expand_codes(self.unfixable, "unfixable")

    @cached_property
    def promoted_safe(self) -> FrozenSet[str]:
        return expand_codes(self.extend_safe_fixes, "extend-safe-fixes")

    @cached_property
    def demoted_unsafe(self) -> FrozenSet[str]:
        return expand_codes(self.extend_unsafe_fixes, "extend-unsafe-fixes")

    def relpath(self, path: str) -> str:
        try:
            return os.path.relpath(os.path.abspath(path), os.path.abspath(self.root)).replace(os.sep, "/")
        except ValueError:  # other drive on Windows
            return path.replace(os.sep, "/")

    def codes_for_path(self, path: str) -> FrozenSet[str]:
        """The codes enabled for ``path``: ``per-file-ignores`` applied. A glob starting with
        ``!`` applies to the files it does not match (as in ruff)."""
        codes = self.enabled_codes
        if self._per_file:
            rel = self.relpath(path)
            for glob, ignored in self._per_file:
                negated = glob.startswith("!")
                if path_matches(glob[1:] if negated else glob, rel) != negated:
                    codes = codes - ignored
        return codes

    @cached_property
    def _exclude_patterns(self) -> Tuple[Tuple[str, ...], bool]:
        patterns = self.exclude + self.extend_exclude
        return patterns, any(p.startswith("!") for p in patterns)

    def is_excluded(self, path: str) -> bool:
        """Does ``exclude``/``extend-exclude`` leave ``path`` out? As in a ``.gitignore``, a
        pattern starting with ``!`` takes back what earlier ones excluded, and the last match
        wins (a folder left out is not searched, so a file in it cannot be taken back)."""
        patterns, negations = self._exclude_patterns
        if not patterns:
            return False
        rel = self.relpath(path)
        if not negations:
            return any(path_matches(p, rel) for p in patterns)
        excluded = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            if negated != excluded:
                continue  # cannot change the answer
            if path_matches(pattern[1:] if negated else pattern, rel):
                excluded = not negated
        return excluded

    @cached_property
    def fingerprint(self) -> str:
        """Identifies everything that can change findings (for the results cache)."""
        data = {
            "codes": sorted(self.enabled_codes),
            "per_file": [(g, sorted(c)) for g, c in self._per_file],
            "torch": list(self.target_torch_version),
            "root": os.path.abspath(self.root),
            "max_file_size": self.max_file_size,
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]


# -- reading files -----------------------------------------------------------------------------

def load_toml(path: Path) -> Dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively
        raise ConfigError(f"{path}: invalid TOML: values nested too deeply") from None


def _str_list(value: Any, where: str) -> Tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return tuple(value)


def settings_from_table(table: Mapping[str, Any], where: str, base: Settings) -> Settings:
    """Apply a ``[tool.torchlint]`` table over ``base``; unknown keys and codes are errors."""
    changes: Dict[str, Any] = {}
    for key, value in table.items():
        if key not in KNOWN_KEYS:
            if key in ("rules", "lint"):  # ruff's and pylint's habit: per-rule tables
                raise ConfigError(f"{where}: unknown key 'tool.torchlint.{key}': torchlint's rules have no "
                                  "options; choose them with select, ignore and per-file-ignores")
            raise ConfigError(f"{where}: unknown key 'tool.torchlint.{key}'")
        attr = key.replace("-", "_")
        if key in LIST_KEYS:
            values = _str_list(value, f"{where}: tool.torchlint.{key}")
            if key in CODE_LIST_KEYS:
                expand_codes(values, f"{where}: tool.torchlint.{key}")
            else:
                check_globs(values, f"{where}: tool.torchlint.{key}")
            changes[attr] = values
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: tool.torchlint.per-file-ignores: expected a table of glob = [codes]")
            pairs = []
            for glob, codes in value.items():
                codes = _str_list(codes, f"{where}: tool.torchlint.per-file-ignores.{glob!r}")
                expand_codes(codes, f"{where}: tool.torchlint.per-file-ignores.{glob!r}")
                check_globs([glob], f"{where}: tool.torchlint.per-file-ignores")
                pairs.append((glob, codes))
            changes[attr] = tuple(pairs)
        elif key == "target-torch-version":
            changes[attr] = parse_version(value, f"{where}: tool.torchlint.target-torch-version")
        elif key in ("respect-gitignore", "preview", "include-notebooks"):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: tool.torchlint.{key}: expected true or false")
            changes[attr] = value
        elif key == "max-file-size":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{where}: tool.torchlint.max-file-size: expected a number of bytes (0: no limit)")
            changes[attr] = value
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: tool.torchlint.cache-dir: expected a string")
            changes[attr] = value
    return replace(base, **changes)


@dataclass
class CliOverrides:
    """Flags given on the command line; None means 'not given'."""

    select: Optional[Sequence[str]] = None
    extend_select: Optional[Sequence[str]] = None
    ignore: Optional[Sequence[str]] = None
    exclude: Optional[Sequence[str]] = None
    extend_exclude: Optional[Sequence[str]] = None
    per_file_ignores: Optional[Sequence[str]] = None  # "glob:CODE,CODE"
    target_torch_version: Optional[str] = None
    fixable: Optional[Sequence[str]] = None
    unfixable: Optional[Sequence[str]] = None
    preview: Optional[bool] = None
    extension: Optional[Sequence[str]] = None  # "py", "pyi", "ipynb" (a leading dot is allowed)
    include_notebooks: Optional[bool] = None
    #: ``--config KEY=VALUE`` pairs: a ``[tool.torchlint]`` table applied over every
    #: configuration (before the flags above, which win, as in ruff)
    table: Optional[Mapping[str, Any]] = None

    def apply(self, settings: Settings) -> Settings:
        if self.table:
            try:
                settings = settings_from_table(self.table, "--config", settings)
            except ConfigError as exc:
                raise ConfigError(str(exc).replace("tool.torchlint.", "")) from None
        changes: Dict[str, Any] = {}
        if self.extension is not None:
            changes.update(_extension_changes(self.extension, self.include_notebooks))
        elif self.include_notebooks is not None:
            changes["include_notebooks"] = self.include_notebooks
        if self.select is not None:
            expand_codes(self.select, "--select")
            changes["select"] = tuple(self.select)
            changes["extend_select"] = ()
        if self.extend_select:
            expand_codes(self.extend_select, "--extend-select")
            changes["extend_select"] = changes.get("extend_select", settings.extend_select) + tuple(self.extend_select)
        if self.ignore:
            expand_codes(self.ignore, "--ignore")
            changes["ignore"] = settings.ignore + tuple(self.ignore)
        if self.exclude is not None:
            check_globs(self.exclude, "--exclude")
            changes["exclude"] = tuple(self.exclude)
        if self.extend_exclude:
            check_globs(self.extend_exclude, "--extend-exclude")
            changes["extend_exclude"] = settings.extend_exclude + tuple(self.extend_exclude)
        if self.per_file_ignores:
            pairs = list(settings.per_file_ignores)
            for item in self.per_file_ignores:
                glob, sep, codes = item.rpartition(":")
                if not sep or not glob:
                    raise ConfigError(f"--per-file-ignores: expected GLOB:CODES, got {item!r}")
                code_list = tuple(c for c in codes.split(",") if c)
                expand_codes(code_list, "--per-file-ignores")
                check_globs([glob], "--per-file-ignores")
                pairs.append((glob, code_list))
            changes["per_file_ignores"] = tuple(pairs)
        if self.target_torch_version is not None:
            changes["target_torch_version"] = parse_version(self.target_torch_version, "--target-torch-version")
        if self.fixable is not None:
            expand_codes(self.fixable, "--fixable")
            changes["fixable"] = tuple(self.fixable)
        if self.unfixable:
            expand_codes(self.unfixable, "--unfixable")
            changes["unfixable"] = settings.unfixable + tuple(self.unfixable)
        if self.preview is not None:
            changes["preview"] = self.preview
        return replace(settings, **changes) if changes else settings


#: What ``--extension`` accepts: the suffixes torchlint can read.
LINTABLE_EXTENSIONS = ("py", "pyi", "ipynb")


def _extension_changes(given: Sequence[str], include_notebooks: Optional[bool]) -> Dict[str, Any]:
    extensions: List[str] = []
    for item in given:
        ext = item.strip().lstrip(".").lower()
        if ext not in LINTABLE_EXTENSIONS:
            raise ConfigError(f"--extension: unknown extension {item!r} (expected some of {', '.join(LINTABLE_EXTENSIONS)})")
        if ext not in extensions:
            extensions.append(ext)
    if not extensions:
        raise ConfigError(f"--extension: expected some of {', '.join(LINTABLE_EXTENSIONS)}")
    notebooks = "ipynb" in extensions
    if include_notebooks is not None and include_notebooks != notebooks:
        flag = "--include-notebooks" if include_notebooks else "--no-include-notebooks"
        raise ConfigError(f"--extension {','.join(extensions)} and {flag} disagree; give one of them")
    return {"extensions": tuple(extensions), "include_notebooks": notebooks}


def settings_from_pyproject(
    path: Path,
    overrides: Optional[CliOverrides] = None,
    declared_version: Optional[Callable[[Path, Optional[Mapping[str, Any]]], Optional[Tuple[int, int]]]] = None,
) -> Settings:
    """Settings of one config file. The torch version its folder's dependency files declare
    (``declared_version(folder, parsed pyproject)``, by default ``dependencies``) applies unless
    ``target-torch-version`` is given; other tables never stop a run, only ``[tool.torchlint]``."""
    data = load_toml(path)
    tool = data.get("tool")
    table = tool.get("torchlint") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.torchlint must be a table")
    if is_standalone_config(path, data):  # torchlint.toml: the keys are at the top level
        table = data
    try:
        settings = settings_from_table(table or {}, str(path), Settings(root=str(path.parent), config_path=str(path)))
    except ConfigError as exc:
        if table is data:  # name the key as it is spelt in a standalone file
            raise ConfigError(str(exc).replace("tool.torchlint.", "")) from None
        raise
    explicit = "target-torch-version" in (table or {}) or (overrides is not None and overrides.target_torch_version is not None)
    if not explicit:
        if declared_version is None:
            from torchlint.dependencies import declared_torch_version

            declared_version = declared_torch_version
        declared = declared_version(path.parent, data if path.name == "pyproject.toml" else None)
        if declared:
            settings = replace(settings, target_torch_version=declared)
    return overrides.apply(settings) if overrides else settings


#: Standalone config files, top-level keys, in order of precedence within one folder (ruff's
#: order: .ruff.toml, ruff.toml, pyproject.toml); any of them beats a pyproject.toml beside it.
STANDALONE_CONFIGS = (".torchlint.toml", "torchlint.toml")


def is_standalone_config(path: Path, data: Mapping[str, Any]) -> bool:
    """Are ``path``'s settings its top-level keys? Yes for ``torchlint.toml`` /
    ``.torchlint.toml``, no for ``pyproject.toml``; another name (``--config ci.toml``) is
    standalone unless it holds a ``[tool.torchlint]`` table."""
    if path.name in STANDALONE_CONFIGS:
        return True
    if path.name == "pyproject.toml":
        return False
    tool = data.get("tool")
    return not (isinstance(tool, dict) and "torchlint" in tool)


def _config_in(directory: Path) -> Optional[Path]:
    for name in STANDALONE_CONFIGS:  # used even when empty: the file says "this folder is configured"
        candidate = directory / name
        if _is_file(candidate):
            return candidate
    candidate = directory / "pyproject.toml"
    return candidate if _is_file(candidate) and _has_torchlint_table(candidate) else None


_UNSEARCHABLE: Set[str] = set()  # folders already warned about


def _is_file(path: Path) -> bool:
    """``path.is_file()``, but a folder that cannot be searched (mode 0000, another user's)
    holds no configuration: a one-line warning once per folder, never a crash. Its files are
    reported as unreadable by the read stage."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM):
            return False  # absent, a dangling or looping link (as Path.is_file)
        folder = str(path.parent)
        if folder not in _UNSEARCHABLE:
            _UNSEARCHABLE.add(folder)
            print(f"torchlint: warning: cannot look for configuration in {folder}: {exc.strerror or exc}",
                  file=sys.stderr)
        return False


def _has_torchlint_table(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "tool.torchlint" in text


_FILE_SUFFIXES = (".py", ".pyi", ".ipynb")


class SettingsResolver:
    """Finds the settings for each file: nearest config above it, cached per folder."""

    def __init__(
        self,
        overrides: Optional[CliOverrides] = None,
        config_file: Optional[str] = None,
        isolated: bool = False,
        cwd: Optional[str] = None,
    ) -> None:
        self.overrides = overrides or CliOverrides()
        self.isolated = isolated
        self.cwd = Path(cwd or os.getcwd()).resolve()
        self._by_dir: Dict[Path, Settings] = {}
        self._by_folder: Dict[str, Settings] = {}  # absolute folder as given -> its settings
        self._by_file: Dict[Path, Settings] = {}
        self._config_of: Dict[Path, Optional[Path]] = {}  # folder -> nearest [tool.torchlint] file
        self._root_of: Dict[Path, Optional[Path]] = {}  # folder -> its project root (dependency files)
        self._declared: Dict[Path, Optional[Tuple[int, int]]] = {}  # project root -> version
        self._no_config_by_root: Dict[Optional[Path], Settings] = {}
        #: Every dependency file read (absolute paths): a language server reloads when one changes.
        self.dependency_files: Set[str] = set()
        self.fixed: Optional[Settings] = None
        if config_file is not None:
            path = Path(config_file)
            try:
                found = stat.S_ISREG(os.stat(path).st_mode)
            except OSError as exc:  # absent, or in a folder this user cannot search
                found = False
                if exc.errno in (errno.EACCES, errno.EPERM):
                    raise ConfigError(f"--config: cannot read {config_file}: {exc.strerror}") from None
            if not found:
                raise ConfigError(f"--config: no such file: {config_file}")
            self.fixed = settings_from_pyproject(path.resolve(), self.overrides, self._declared_version)
        elif isolated:
            self.fixed = self.overrides.apply(Settings(root=str(self.cwd)))
        self.default = self.fixed or self._for_dir(self.cwd)

    def _settings_for_file(self, path: Path) -> Settings:
        settings = self._by_file.get(path)
        if settings is None:
            settings = settings_from_pyproject(path, self.overrides, self._declared_version)
            self._by_file[path] = settings
        return settings

    def _for_dir(self, directory: Path) -> Settings:
        settings = self._by_dir.get(directory)
        if settings is None:
            config = self._nearest(directory, self._config_of, _config_in)
            settings = self._settings_for_file(config) if config is not None else self._no_config(directory)
            self._by_dir[directory] = settings
        return settings

    @staticmethod
    def _nearest(directory: Path, memo: Dict[Path, Optional[Path]], found_in) -> Optional[Path]:
        """``found_in(d)`` for the nearest folder ``d`` at or above ``directory`` where it is not
        None; every folder walked through is memoised, so a tree costs one walk per folder."""
        chain: List[Path] = []
        current = directory
        while True:
            if current in memo:
                found = memo[current]
                break
            chain.append(current)
            found = found_in(current)
            if found is not None or current.parent == current:
                break
            current = current.parent
        for d in chain:
            memo[d] = found
        return found

    def _declared_version(self, root: Path, pyproject: Optional[Mapping[str, Any]] = None) -> Optional[Tuple[int, int]]:
        """The torch version declared in ``root``'s dependency files, scanned once per root."""
        if root not in self._declared:
            from torchlint.dependencies import scan_project

            project = scan_project(root, pyproject)
            self.dependency_files.update(str(f) for f in project.files)
            self._declared[root] = project.torch_version
        return self._declared[root]

    def _no_config(self, directory: Path) -> Settings:
        """No [tool.torchlint] anywhere: defaults, but still the torch version the project
        declares (its root: the nearest folder with a dependency file or a ``.git``)."""
        root: Optional[Path] = None
        if self.overrides.target_torch_version is None:
            from torchlint.dependencies import is_project_root

            root = self._nearest(directory, self._root_of, lambda d: d if is_project_root(d) else None)
        settings = self._no_config_by_root.get(root)
        if settings is None:
            base = Settings(root=str(self.cwd))
            declared = self._declared_version(root) if root is not None else None
            if declared:
                base = replace(base, target_torch_version=declared)
            settings = self._no_config_by_root[root] = self.overrides.apply(base)
        return settings

    def for_path(self, path: str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        # the folder as given, made absolute, is resolved once (a tree has few folders, many files);
        # a name with a Python suffix is taken for a file without a stat (a warm run asks per file)
        if path.endswith(_FILE_SUFFIXES) or not os.path.isdir(path):
            folder = os.path.abspath(os.path.dirname(path) or ".")
        else:
            folder = os.path.abspath(path)
        settings = self._by_folder.get(folder)
        if settings is None:
            try:
                directory = Path(folder).resolve()
            except OSError:
                return self.default
            settings = self._by_folder[folder] = self._for_dir(directory)
        return settings
