"""The torch version a project declares: the lowest lower bound of ``torch`` (or ``pytorch``)
in any of its dependency files.

A project's dependency files sit in one folder, its *root* (the folder of the config that
applies, else the nearest folder at or above the linted file that holds one of these files or a
``.git``):

- ``pyproject.toml``: ``[project]`` dependencies and optional-dependencies, ``[dependency-groups]``,
  Poetry (``[tool.poetry.dependencies]``, ``dev-dependencies``, groups), PDM
  (``[tool.pdm.dev-dependencies]``), Hatch (``[tool.hatch.envs.*]`` (extra-)dependencies);
- ``requirements*.txt`` and ``requirements/*.txt``, following ``-r``/``-c`` includes relative to
  the including file;
- ``setup.cfg``: ``[options] install_requires`` and ``[options.extras_require]``;
- ``setup.py``: the literals passed to ``setup(install_requires=..., extras_require=...)``, read
  with ``ast`` (never executed);
- ``environment.yml`` / ``environment.yaml`` (conda, with its ``pip:`` sub-list);
- ``Dockerfile`` (also ``Dockerfile.*``, ``*.Dockerfile``, ``Containerfile``): the base image
  (``FROM pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime``; ``FROM nvcr.io/nvidia/pytorch:22.10-py3``
  through ``NGC_TORCH``, NVIDIA's release -> torch table) and ``pip install``/``conda install``
  commands of ``RUN`` instructions, with ``ARG``/``ENV`` defaults substituted.

``requirements*.txt`` files and Dockerfiles in subfolders count too (``docker/Dockerfile``,
``envs/gpu/requirements.txt``: two levels down), except in hidden folders, virtual environments,
vendored code (``third_party``, ``vendor``, ``node_modules``, ``site-packages``) and nested
projects (a subfolder with its own ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``).
Only requirements count: a version stated in a comment (``# FROM pytorch/pytorch:1.8``,
``# torch>=1.8``), a ``LABEL`` or prose is ignored.

The lowest lower bound wins: ``torch>=1.13`` in one file and ``torch>=2.1`` in another mean
the code must run on 1.13. Specifiers without a lower bound (``torch``, ``torch<2``, a URL)
declare nothing; environment markers are ignored (every platform's requirement counts).

A malformed file or table never stops a run: it only gives up inference from that table, with
a one-line warning on stderr (once per process). Reads are bounded (regular files, 1 MB each,
64 files per project) and nothing here imports more than the standard library, except PyYAML
(optional, ``torchlint[yaml]``) for an ``environment.yml`` that mentions torch.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Version = Tuple[int, int]

#: Files whose presence makes a folder a project root (``requirements*.txt`` counts as well).
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
#: Names a language server watches (globs relative to any folder).
WATCHED_GLOBS = (
    "**/pyproject.toml", "**/setup.cfg", "**/setup.py", "**/environment.yml", "**/environment.yaml",
    "**/requirements*.txt", "**/requirements/*.txt",
    "**/Dockerfile", "**/Dockerfile.*", "**/*.Dockerfile", "**/*.dockerfile", "**/Containerfile",
)
TORCH_NAMES = frozenset({"torch", "pytorch"})
# Packages released in step with torch: a project that declares one of them and not torch itself
# declares torch through it (``torchvision>=0.10`` is built for torch 1.9).
COMPANION_NAMES = frozenset({"torchvision", "torchaudio"})
MAX_FILE_BYTES = 1 << 20
MAX_FILES = 64
MAX_INCLUDE_DEPTH = 8


@dataclass(frozen=True)
class Declaration:
    """One requirement on torch with a lower bound, and where it was written."""

    version: Version
    path: str
    where: str  # "line 3", "[project.optional-dependencies] gpu", "setup(install_requires=...)"
    text: str


@dataclass
class ProjectDependencies:
    root: Path
    files: List[Path] = field(default_factory=list)  # every dependency file read
    declarations: List[Declaration] = field(default_factory=list)
    #: torchvision/torchaudio requirements, as the torch version each was built for: they count
    #: only where no file declares torch itself (a loose ``torchvision>=0.2`` beside
    #: ``torch>=2.0`` says nothing of the torch the project supports).
    implied: List[Declaration] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    @property
    def torch_version(self) -> Optional[Version]:
        return min((d.version for d in self.declarations or self.implied), default=None)


# -- warnings --------------------------------------------------------------------------------

_WARNED: Set[str] = set()


def warn_once(message: str) -> None:
    """One line on stderr, the first time this message comes up in the process."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    try:
        print(f"torchlint: warning: {message}", file=sys.stderr)
    except (OSError, ValueError):  # a closed stderr must not stop a run either
        pass


# -- version specifiers ------------------------------------------------------------------------

# One clause: an optional operator and a version (PEP 440, Poetry's ^ and ~, conda's `=`).
_CLAUSE = re.compile(r"(===|==|~=|!=|<=|>=|<|>|=|\^|~)?\s*(v?\d+(?:\.(?:\d+|\*))*[\w.+!*-]*|\*)")
_LOWER_OPS = frozenset({None, "===", "==", "~=", ">=", ">", "=", "^", "~"})


#: The most digits a version component may have: ``int()`` of an unbounded digit string is
#: refused by CPython above 4,300 digits (and costs quadratic time below); no torch release will
#: need more than a few.
MAX_COMPONENT_DIGITS = 6


def parse_version(text: str) -> Optional[Version]:
    """``"1.13.1"``, ``"v2"``, ``"2.1.0+cu118"`` -> (major, minor); None for text that does not
    start with a version, and for an absurd one (a component longer than
    ``MAX_COMPONENT_DIGITS`` digits), which is ignored with a one-line warning. The one place a
    declared version's digits become numbers (the CLI, the language server and the flake8
    plugin all read dependency files through here)."""
    m = re.match(r"v?(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    major, minor = m.group(1), m.group(2) or "0"
    if len(major) > MAX_COMPONENT_DIGITS or len(minor) > MAX_COMPONENT_DIGITS:
        shown = text if len(text) <= 24 else text[:20] + f"... ({len(text)} characters)"
        warn_once(f"ignoring torch version {shown!r}: a component has more than {MAX_COMPONENT_DIGITS} digits")
        return None
    return int(major), int(minor)


_version_of = parse_version


def lower_bound(spec: str) -> Optional[Version]:
    """The lowest (major, minor) a specifier admits, or None if it has no lower bound.

    Clauses joined by ``,`` or spaces must all hold (the largest lower bound counts);
    alternatives joined by ``|``/``||`` (conda, Poetry) each need one (the smallest counts).
    """
    bounds = []
    for alternative in re.split(r"\|\|?", spec):
        best: Optional[Version] = None
        for m in _CLAUSE.finditer(alternative):
            op, text = m.group(1), m.group(2)
            if op not in _LOWER_OPS or text == "*":
                continue
            version = _version_of(text)
            if version is not None and (best is None or version > best):
                best = version
        if best is None:
            return None
        bounds.append(best)
    return min(bounds) if bounds else None


_PEP508 = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)", re.DOTALL)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_bound(requirement: str, names: frozenset = TORCH_NAMES) -> Optional[Version]:
    """``torch>=1.13,<3; python_version<'3.12'`` -> (1, 13); None for other packages (than
    ``names``), URLs (``torch @ https://...``) and specifiers without a lower bound. Markers are
    ignored."""
    m = _PEP508.match(requirement)
    if not m or _canonical(m.group(1)) not in names:
        return None
    spec = m.group(2).split(";", 1)[0].strip()
    if not spec or spec.startswith("@") or "://" in spec:
        return None
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    if not re.match(r"[<>=!~^\d]", spec):
        return None  # `torchvision`-like names were refused above; this is not a specifier
    return lower_bound(spec)


def conda_bound(spec: str, names: frozenset = TORCH_NAMES) -> Optional[Version]:
    """A conda match spec: ``pytorch=1.13``, ``pytorch==1.13.1``, ``pytorch>=1.12,<2``,
    ``pytorch::pytorch=1.13.1=py3.9_cuda11.7_0``, ``pytorch 1.13.*``."""
    spec = spec.split("::", 1)[-1].strip()
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(.*)", spec, re.DOTALL)
    if not m or _canonical(m.group(1)) not in names:
        return None
    rest = m.group(2).strip()
    if rest.startswith("["):  # pytorch[version='>=1.12']
        inner = re.search(r"version\s*=\s*['\"]?([^'\"\],]+(?:,[^'\"\]]+)*)", rest)
        rest = inner.group(1) if inner else ""
    elif rest.startswith("=") and not rest.startswith("=="):
        rest = rest[1:].split("=", 1)[0]  # fuzzy `=1.13` (1.13.*), then an optional `=build`
    else:
        rest = rest.split()[0] if rest.split() else ""  # `pytorch 1.13.* build`
    if not rest or not re.match(r"[<>=!~\d]", rest):
        return None
    return lower_bound(rest)


# -- reading files ---------------------------------------------------------------------------

def _read_text(path: Path, project: ProjectDependencies) -> Optional[str]:
    """A regular file's text, at most MAX_FILE_BYTES; None (with a warning) if it cannot be."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > MAX_FILE_BYTES:
            _warn(project, f"{path}: larger than {MAX_FILE_BYTES // 1024} KB; torch version not inferred from it")
            return None
        if len(project.files) >= MAX_FILES:
            _warn(project, f"{project.root}: more than {MAX_FILES} dependency files; the rest are not read")
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:  # gone since listed, or a `-r` include naming nothing
        return None
    except OSError as exc:  # unreadable (permissions, a folder named like one): say so
        _warn(project, f"{path}: cannot be read ({exc.strerror or exc.__class__.__name__}); torch version not inferred from it")
        return None
    project.files.append(Path(os.path.normpath(path)))
    return data.decode("utf-8", errors="replace")


def _warn(project: ProjectDependencies, message: str) -> None:
    project.warnings.append(message)
    warn_once(message)


def _malformed(project: ProjectDependencies, path: Path, table: str, expected: str) -> None:
    _warn(project, f"{path}: {table} is not {expected}; torch version not inferred from it")


def companion_torch_version(package: str, version: Version) -> Optional[Version]:
    """The torch a torchvision/torchaudio release was built for: torchvision 0.10 -> 1.9,
    0.13 -> 1.12, 0.15 -> 2.0, 0.21 -> 2.6; torchaudio 0.13 -> 1.13, 2.1 -> 2.1."""
    major, minor = version
    if package == "torchvision" and major == 0:
        if minor >= 15:
            return (2, minor - 15)
        if minor >= 6:
            return (1, minor - 1)
        return {5: (1, 4), 4: (1, 1), 3: (1, 0)}.get(minor, (0, 4))
    if package == "torchaudio":
        if major == 0:
            return (1, minor) if minor >= 1 else (1, 0)
        return version
    return None


def companion_bound(text: str) -> Optional[Version]:
    """``torchvision>=0.10`` (PEP 508 or a conda spec) -> the torch it implies, (1, 9)."""
    text = text.strip()
    for bound in (requirement_bound, conda_bound):
        version = bound(text, COMPANION_NAMES)
        if version is not None:
            name = re.match(r"(?:[\w.-]+::)?([A-Za-z0-9][A-Za-z0-9._-]*)", text)
            return companion_torch_version(_canonical(name.group(1)), version) if name else None
    return None


def _add(project: ProjectDependencies, version: Optional[Version], path: Path, where: str, text: str) -> None:
    if version is not None:
        project.declarations.append(Declaration(version, str(path), where, text.strip()))
        return
    implied = companion_bound(text)
    if implied is not None:
        project.implied.append(Declaration(implied, str(path), where, text.strip()))


def _requirement_list(project: ProjectDependencies, value: Any, path: Path, table: str) -> None:
    """A TOML list of PEP 508 strings (PEP 735 ``{include-group = ...}`` entries are skipped)."""
    if not isinstance(value, list):
        _malformed(project, path, table, "a list of requirements")
        return
    for item in value:
        if isinstance(item, str):
            _add(project, requirement_bound(item), path, table, item)
        elif not isinstance(item, dict):
            _malformed(project, path, table, "a list of requirement strings")
            return


def _table(project: ProjectDependencies, data: Mapping[str, Any], key: str, path: Path, name: str) -> Optional[Mapping[str, Any]]:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        _malformed(project, path, f"[{name}]", "a table")
        return None
    return value


def _poetry_table(project: ProjectDependencies, deps: Any, path: Path, table: str) -> None:
    if not isinstance(deps, dict):
        _malformed(project, path, f"[{table}]", "a table")
        return
    for name, spec in deps.items():
        if _canonical(str(name)) not in TORCH_NAMES:
            continue
        for entry in spec if isinstance(spec, list) else [spec]:  # multiple-constraint lists
            if isinstance(entry, dict):
                entry = entry.get("version")
            if isinstance(entry, str):
                _add(project, lower_bound(entry), path, f"[{table}] {name}", f"{name} = {entry!r}")
            elif entry is not None:
                _malformed(project, path, f"[{table}] {name}", "a version string or table")


def pyproject_declarations(project: ProjectDependencies, data: Mapping[str, Any], path: Path) -> None:
    """Every torch requirement in a parsed ``pyproject.toml``; malformed tables are skipped."""
    proj = _table(project, data, "project", path, "project")
    if proj is not None:
        if "dependencies" in proj:
            _requirement_list(project, proj["dependencies"], path, "[project] dependencies")
        optional = _table(project, proj, "optional-dependencies", path, "project.optional-dependencies")
        for group, reqs in (optional or {}).items():
            _requirement_list(project, reqs, path, f"[project.optional-dependencies] {group}")
    groups = _table(project, data, "dependency-groups", path, "dependency-groups")
    for group, reqs in (groups or {}).items():
        _requirement_list(project, reqs, path, f"[dependency-groups] {group}")
    tool = _table(project, data, "tool", path, "tool")
    if tool is None:
        return
    poetry = _table(project, tool, "poetry", path, "tool.poetry")
    if poetry is not None:
        for key in ("dependencies", "dev-dependencies"):
            if key in poetry:
                _poetry_table(project, poetry[key], path, f"tool.poetry.{key}")
        poetry_groups = _table(project, poetry, "group", path, "tool.poetry.group")
        for name, group in (poetry_groups or {}).items():
            if not isinstance(group, dict):
                _malformed(project, path, f"[tool.poetry.group.{name}]", "a table")
            elif "dependencies" in group:
                _poetry_table(project, group["dependencies"], path, f"tool.poetry.group.{name}.dependencies")
    pdm = _table(project, tool, "pdm", path, "tool.pdm")
    if pdm is not None:
        dev = _table(project, pdm, "dev-dependencies", path, "tool.pdm.dev-dependencies")
        for group, reqs in (dev or {}).items():
            _requirement_list(project, reqs, path, f"[tool.pdm.dev-dependencies] {group}")
    hatch = _table(project, tool, "hatch", path, "tool.hatch")
    envs = _table(project, hatch, "envs", path, "tool.hatch.envs") if hatch is not None else None
    for env, table in (envs or {}).items():
        if not isinstance(table, dict):
            _malformed(project, path, f"[tool.hatch.envs.{env}]", "a table")
            continue
        for key in ("dependencies", "extra-dependencies"):
            if key in table:
                _requirement_list(project, table[key], path, f"[tool.hatch.envs.{env}] {key}")


def _pyproject(project: ProjectDependencies, path: Path) -> None:
    text = _read_text(path, project)
    if text is None or "torch" not in text.lower():
        return
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _warn(project, f"{path}: invalid TOML ({exc}); torch version not inferred from it")
        return
    pyproject_declarations(project, data, path)


# requirements files ---------------------------------------------------------------------------

_INCLUDE = re.compile(r"(--requirement|--constraint|-r|-c)\s*=?\s*(\S.*)")


def _logical_lines(text: str) -> Iterable[Tuple[int, str]]:
    """Lines with backslash continuations joined and comments removed, as pip reads them."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = re.sub(r"(^|\s)#.*", "", pending + line).strip()
        pending = ""
        if line:
            yield start, line
    if pending.strip():
        yield start, re.sub(r"(^|\s)#.*", "", pending).strip()


def requirements_file(project: ProjectDependencies, path: Path, seen: Set[Path], depth: int = 0) -> None:
    """One requirements file and, depth-first, the files it includes with -r/-c."""
    try:
        key = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return
    if key in seen:
        return  # read already, or an include cycle
    seen.add(key)
    text = _read_text(path, project)
    if text is None:
        return
    for number, line in _logical_lines(text):
        if line.startswith("-"):
            m = _INCLUDE.match(line)
            if m:
                target = m.group(2).strip().strip("'\"")
                if "://" in target or "$" in target:
                    continue  # remote or templated includes are not followed
                if depth + 1 > MAX_INCLUDE_DEPTH:
                    _warn(project, f"{path}:{number}: includes nested deeper than {MAX_INCLUDE_DEPTH}; not followed")
                    continue
                requirements_file(project, path.parent / target, seen, depth + 1)
            continue  # -e, --index-url, -f and other options
        if "://" in line and "@" not in line.split("://", 1)[0]:
            continue  # a bare URL or path to an archive
        requirement = re.split(r"\s--?[A-Za-z]", line, maxsplit=1)[0]  # per-requirement options: --hash=...
        _add(project, requirement_bound(requirement), path, f"line {number}", requirement)


# setup.cfg ------------------------------------------------------------------------------------

def _setup_cfg(project: ProjectDependencies, path: Path, seen: Set[Path]) -> None:
    text = _read_text(path, project)
    if text is None or ("torch" not in text.lower() and "file:" not in text):
        return
    import configparser

    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text, str(path))
    except configparser.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _warn(project, f"{path}: cannot parse ({first}); torch version not inferred from it")
        return
    values: List[Tuple[str, str]] = []
    if parser.has_option("options", "install_requires"):
        values.append(("[options] install_requires", parser.get("options", "install_requires")))
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            values.append((f"[options.extras_require] {extra}", value))
    for where, value in values:
        value = value.strip()
        if value.startswith("file:"):  # install_requires = file: requirements.txt, more.txt
            for name in value[5:].split(","):
                if name.strip():
                    requirements_file(project, path.parent / name.strip(), seen, 1)
            continue
        for line in value.splitlines():
            line = re.sub(r"(^|\s)#.*", "", line).strip()
            if line:
                _add(project, requirement_bound(line), path, where, line)


# setup.py -------------------------------------------------------------------------------------

def _setup_py(project: ProjectDependencies, path: Path) -> None:
    """Literals passed to ``setup(...)``, read with ``ast``. The file is never executed."""
    text = _read_text(path, project)
    if text is None or "torch" not in text.lower() or ("install_requires" not in text and "extras_require" not in text):
        return  # parsing costs about 1 ms per 40 lines: only when it can find something
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of someone else's code
            tree = ast.parse(text, str(path))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        _warn(project, f"{path}: cannot parse ({type(exc).__name__}); torch version not inferred from it")
        return

    constants: Dict[str, Any] = {}
    for stmt in tree.body:  # module-level NAME = [...] / (...) / {...} / "..."
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            constants[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            constants[stmt.target.id] = stmt.value

    def resolve(node: Any, depth: int = 0) -> Any:
        if depth < 8 and isinstance(node, ast.Name) and node.id in constants:
            return resolve(constants[node.id], depth + 1)
        return node

    def strings(node: Any, depth: int = 0) -> List[str]:
        node = resolve(node)
        if depth > 8:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [s for elt in node.elts for s in strings(elt, depth + 1)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # BASE + EXTRA
            return strings(node.left, depth + 1) + strings(node.right, depth + 1)
        return []

    def mapping_values(node: Any) -> List[Tuple[str, Any]]:
        node = resolve(node)
        if isinstance(node, ast.Dict):
            return [
                (k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else "?", v)
                for k, v in zip(node.keys, node.values) if k is not None
            ]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            return [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
        return []

    for node in _setup_calls(tree):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name != "setup":
            continue
        for kw in node.keywords:
            if kw.arg == "install_requires":
                for req in strings(kw.value):
                    _add(project, requirement_bound(req), path, "setup(install_requires=...)", req)
            elif kw.arg == "extras_require":
                for extra, value in mapping_values(kw.value):
                    for req in strings(value):
                        _add(project, requirement_bound(req), path, f"setup(extras_require={{{extra!r}: ...}})", req)


def _setup_calls(tree: Any) -> Iterable[Any]:
    """Calls in statement position (``setup(...)``, ``dist = setup(...)``) anywhere in the
    statement tree (``if __name__ == ...``, functions, ``with``, ``try``); expressions are not
    searched, which keeps a long setup.py's walk to its statements (ast.walk costs 3x more)."""
    import ast

    stack = list(reversed(tree.body))
    while stack:
        stmt = stack.pop()
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) and isinstance(value, ast.Call):
            yield value
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(stmt, name, None)
            if isinstance(children, list):
                stack.extend(reversed(children))


# environment.yml ------------------------------------------------------------------------------

def _flow_items(text: str) -> List[str]:
    """The items of a YAML flow sequence ``[a, 'b,c', {pip: [d]}]``: commas inside quotes or
    nested brackets do not split."""
    items, current, depth, quote = [], "", 0, ""
    for char in text.strip()[1:-1]:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        current += char
    return [item for item in items + [current] if item.strip()]


def _yaml_scalar(text: str) -> str:
    text = re.sub(r"(^|\s)#.*", "", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text.strip()


def _environment_yml(project: ProjectDependencies, path: Path, seen: Set[Path]) -> None:
    """A conda environment file: read with PyYAML when it is installed (``pip install
    torchlint[yaml]``; imported only here, for a file that mentions torch: 30-60 ms), else line
    by line (block or flow lists, the common forms)."""
    text = _read_text(path, project)
    if text is None or "torch" not in text.lower():
        return
    import importlib

    try:
        yaml = importlib.import_module("yaml")  # untyped: Any (no stubs needed to type-check)
    except ImportError:
        _environment_lines(project, path, seen, text)
        return
    _environment_yaml(project, path, seen, text, yaml)


def _environment_yaml(project: ProjectDependencies, path: Path, seen: Set[Path], text: str, yaml: Any) -> None:
    """The ``dependencies`` of a conda environment file, from PyYAML's node tree (``compose``:
    real YAML, anchors never expanded, each item with its line)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        root = yaml.compose(text, Loader=loader)
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _warn(project, f"{path}: invalid YAML ({first}); torch version not inferred from it")
        return

    def scalar(node: Any) -> Optional[str]:
        return str(node.value) if isinstance(node, yaml.ScalarNode) else None

    def mapping(node: Any) -> Dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            return {}
        return {key.value: value for key, value in node.value if isinstance(key, yaml.ScalarNode)}

    deps = mapping(root).get("dependencies")
    if deps is None:
        return
    if not isinstance(deps, yaml.SequenceNode):
        _malformed(project, path, "dependencies", "a list")
        return
    for item in deps.value:
        line = item.start_mark.line + 1
        spec = scalar(item)
        if spec is not None:
            _add(project, conda_bound(spec), path, f"line {line}", spec)
            continue
        pip = mapping(item).get("pip")
        if not isinstance(pip, yaml.SequenceNode):
            continue
        for req in pip.value:
            value = scalar(req)
            if value is None:
                continue
            m = _INCLUDE.match(value)
            if m:
                requirements_file(project, path.parent / m.group(2).strip().strip("'\""), seen, 1)
            else:
                _add(project, requirement_bound(value), path, f"line {req.start_mark.line + 1} (pip)", value)


def _environment_lines(project: ProjectDependencies, path: Path, seen: Set[Path], text: str) -> None:
    """The reader without PyYAML: line by line (block or flow lists)."""
    in_deps = False
    pip_indent: Optional[int] = None  # indentation of the `- pip:` item while inside its list
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0 and not line.startswith("-"):
            key, _, value = line.partition(":")
            in_deps = key.strip().strip("'\"") == "dependencies"
            pip_indent = None
            value = _yaml_scalar(value)
            if in_deps and value.startswith("[") and value.endswith("]"):  # flow style
                for item in _flow_items(value):
                    item = _yaml_scalar(item)
                    if item.startswith("{") and "pip" in item and "[" in item:  # {pip: [torch>=1.13]}
                        for req in _flow_items(item[item.index("["):item.rindex("]") + 1]):
                            _add(project, requirement_bound(_yaml_scalar(req)), path, f"line {number} (pip)", req)
                    else:
                        _add(project, conda_bound(item), path, f"line {number}", item)
            continue
        if not in_deps or not line.startswith("-"):
            continue
        item = _yaml_scalar(line[1:])
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if pip_indent is not None:
            m = _INCLUDE.match(item)
            if m:
                requirements_file(project, path.parent / m.group(2).strip().strip("'\""), seen, 1)
            else:
                _add(project, requirement_bound(item), path, f"line {number} (pip)", item)
        elif re.fullmatch(r"pip\s*:", item):
            pip_indent = indent
        elif item.startswith("pip:") and item[4:].strip().startswith("["):  # - pip: [torch>=1.13]
            for req in _flow_items(item[4:]):
                _add(project, requirement_bound(_yaml_scalar(req)), path, f"line {number} (pip)", req)
        else:
            _add(project, conda_bound(item), path, f"line {number}", item)


# Dockerfile -----------------------------------------------------------------------------------

#: NVIDIA's PyTorch containers (``nvcr.io/nvidia/pytorch:YY.MM-py3``): the torch each release is
#: based on, from NVIDIA's "PyTorch Release Notes" (each ships an alpha of the next torch, e.g.
#: 22.10 is ``1.13.0a0+d0d6b1f``, counted as 1.13; 22.12-23.02's ``1.14.0a0`` is the 2.0
#: pre-release, counted as 1.14, below 2.0). A release missing here takes the entry of the
#: nearest earlier one (a lower bound, never above the truth as releases only move forward;
#: tags before 20.01 declare nothing).
NGC_TORCH: Dict[Tuple[int, int], Version] = {
    (20, 1): (1, 4), (20, 2): (1, 4), (20, 3): (1, 5), (20, 6): (1, 6), (20, 7): (1, 6),
    (20, 8): (1, 7), (20, 9): (1, 7), (20, 10): (1, 7), (20, 11): (1, 8), (20, 12): (1, 8),
    (21, 2): (1, 8), (21, 3): (1, 9), (21, 4): (1, 9), (21, 5): (1, 9), (21, 6): (1, 9),
    (21, 7): (1, 10), (21, 8): (1, 10), (21, 9): (1, 10), (21, 10): (1, 10), (21, 11): (1, 11),
    (21, 12): (1, 11), (22, 1): (1, 11), (22, 2): (1, 11), (22, 3): (1, 12), (22, 4): (1, 12),
    (22, 5): (1, 12), (22, 6): (1, 13), (22, 7): (1, 13), (22, 8): (1, 13), (22, 9): (1, 13),
    (22, 10): (1, 13), (22, 11): (1, 13), (22, 12): (1, 14), (23, 1): (1, 14), (23, 2): (1, 14),
    (23, 3): (2, 0), (23, 4): (2, 1), (23, 5): (2, 0), (23, 6): (2, 1), (23, 7): (2, 1),
    (23, 8): (2, 1), (23, 9): (2, 1), (23, 10): (2, 1), (23, 11): (2, 2), (23, 12): (2, 2),
    (24, 1): (2, 2), (24, 2): (2, 3), (24, 3): (2, 3), (24, 4): (2, 3), (24, 5): (2, 4),
    (24, 6): (2, 4), (24, 7): (2, 4), (24, 8): (2, 5), (24, 9): (2, 5), (24, 10): (2, 5),
    (24, 11): (2, 6), (24, 12): (2, 6), (25, 1): (2, 6), (25, 2): (2, 7), (25, 3): (2, 7),
    (25, 4): (2, 7), (25, 5): (2, 8), (25, 6): (2, 8), (25, 8): (2, 8), (25, 9): (2, 9),
    (25, 10): (2, 9), (25, 12): (2, 10),
}


def ngc_torch_version(tag: str) -> Optional[Version]:
    """``22.10-py3`` -> (1, 13); None for tags that are not a ``YY.MM`` release."""
    m = re.match(r"(\d{2})\.(\d{2})(?:\D|$)", tag)
    if not m:
        return None
    release = (int(m.group(1)), int(m.group(2)))
    earlier = [key for key in NGC_TORCH if key <= release]
    return NGC_TORCH[max(earlier)] if earlier else None


def image_torch_version(image: str) -> Optional[Version]:
    """The torch a base image ships: ``pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime`` ->
    (1, 13), ``nvcr.io/nvidia/pytorch:22.10-py3`` -> through ``NGC_TORCH``; None for others
    (``latest``, images that are not torch's)."""
    reference = image.strip().split("@", 1)[0]  # a digest pins the same tag
    path, _, tag = reference.rpartition(":")
    if not path or "/" in tag:  # no tag (``latest``), or a registry port without one
        return None
    parts = path.lower().split("/")
    host = parts.pop(0) if len(parts) > 2 or (len(parts) == 2 and ("." in parts[0] or ":" in parts[0])) else ""
    name = "/".join(parts[1:] if parts[:1] == ["library"] else parts)
    if name == "pytorch/pytorch" and host in ("", "docker.io", "index.docker.io", "registry-1.docker.io"):
        return parse_version(tag) if re.match(r"\d+\.\d+", tag) else None
    if name == "nvidia/pytorch" and host == "nvcr.io":
        return ngc_torch_version(tag)
    return None


def _docker_instructions(text: str) -> Iterable[Tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuation lines joined and comment lines dropped
    (also between continued lines, as Docker does)."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            continue
        if not pending:
            start = number
            if not line:
                continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        word, _, rest = line.partition(" ")
        yield start, word.upper(), rest.strip()
    if pending.strip():
        word, _, rest = pending.strip().partition(" ")
        yield start, word.upper(), rest.strip()


_DOCKER_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}?")


def _install_commands(command: str) -> Iterable[Tuple[str, List[str]]]:
    """("pip" or "conda", the words after ``install``) for each install in a shell command."""
    import shlex

    for part in re.split(r"&&|\|\||;|\n", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:  # an unbalanced quote
            words = part.split()
        for i, word in enumerate(words[:-1]):
            tool = word.rsplit("/", 1)[-1]
            if words[i + 1] != "install":
                continue
            if re.fullmatch(r"pip3?(\.\d+)?|uv|poetry", tool) or (tool == "pip" and i and words[i - 1] == "-m"):
                yield "pip", words[i + 2:]
            elif tool in ("conda", "mamba", "micromamba"):
                yield "conda", words[i + 2:]
            break


def _dockerfile(project: ProjectDependencies, path: Path) -> None:
    """A Dockerfile's base images and the torch its ``RUN`` lines install (never built)."""
    text = _read_text(path, project)
    if text is None or "torch" not in text.lower():
        return
    variables: Dict[str, str] = {}

    def substitute(value: str) -> str:
        return _DOCKER_VAR.sub(lambda m: variables.get(m.group(1), m.group(2) or m.group(0)), value)

    for number, instruction, args in _docker_instructions(text):
        if instruction in ("ARG", "ENV"):
            for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S*)", args):
                variables[m.group(1)] = substitute(m.group(2).strip("'\""))
            if instruction == "ENV" and "=" not in args.split(" ", 1)[0] and " " in args:  # ENV KEY value
                key, value = args.split(" ", 1)
                variables[key] = substitute(value.strip())
        elif instruction == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            if words:
                image = substitute(words[0])
                _add(project, image_torch_version(image), path, f"line {number} (FROM)", image)
        elif instruction == "RUN" and "install" in args:
            for tool, words in _install_commands(substitute(args)):
                for word in words:
                    if word.startswith("-"):
                        continue
                    bound = requirement_bound(word) if tool == "pip" else conda_bound(word)
                    _add(project, bound, path, f"line {number} (RUN {tool} install)", word)


def is_dockerfile_name(name: str) -> bool:
    return (name in ("Dockerfile", "Containerfile") or name.startswith("Dockerfile.")
            or name.endswith((".Dockerfile", ".dockerfile")))


# -- the project -----------------------------------------------------------------------------

def _requirement_files(root: Path) -> List[Path]:
    found: List[Path] = []
    try:
        with os.scandir(root) as entries:
            found += sorted(Path(e.path) for e in entries if e.name.startswith("requirements") and e.name.endswith(".txt"))
    except OSError:
        return found
    sub = root / "requirements"
    if sub.is_dir():
        try:
            with os.scandir(sub) as entries:
                found += sorted(Path(e.path) for e in entries if e.name.endswith(".txt"))
        except OSError:
            pass
    return found


def is_project_root(directory: Path) -> bool:
    """Does this folder hold a dependency file or a ``.git``? (One directory listing, not a
    ``stat`` per name: every folder of a tree is asked once per run.)"""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if name in _ROOT_NAMES or (name.startswith("requirements") and (name.endswith(".txt") or name == "requirements")):
                    return True
    except OSError:
        return False
    return False


_ROOT_NAMES = frozenset(ROOT_MARKERS) | {".git"}


def find_project_root(directory: Path) -> Optional[Path]:
    """The nearest folder at or above ``directory`` holding a dependency file or a ``.git``."""
    for d in [directory, *directory.parents]:
        if is_project_root(d):
            return d
    return None


def scan_project(root: Path, pyproject: Optional[Mapping[str, Any]] = None) -> ProjectDependencies:
    """Every torch declaration in the dependency files of ``root``. ``pyproject`` is the already
    parsed ``root/pyproject.toml`` when the caller has it (the config loader does)."""
    project = ProjectDependencies(root=root)
    seen: Set[Path] = set()
    if pyproject is not None:
        project.files.append(root / "pyproject.toml")
        pyproject_declarations(project, pyproject, root / "pyproject.toml")
    elif (root / "pyproject.toml").is_file():
        _pyproject(project, root / "pyproject.toml")
    for path in _requirement_files(root):
        requirements_file(project, path, seen)
    if (root / "setup.cfg").is_file():
        _setup_cfg(project, root / "setup.cfg", seen)
    if (root / "setup.py").is_file():
        _setup_py(project, root / "setup.py")
    for name in ("environment.yml", "environment.yaml"):
        if (root / name).is_file():
            _environment_yml(project, root / name, seen)
    requirements, dockerfiles = _subfolder_files(root)
    for path in requirements:
        requirements_file(project, path, seen)
    for path in dockerfiles:
        _dockerfile(project, path)
    return project


#: Subfolders never searched for dependency files: vendored code and build output.
SKIPPED_FOLDERS = frozenset({
    "node_modules", "site-packages", "third_party", "third-party", "thirdparty", "vendor",
    "external", "__pycache__", "build", "dist",
})
#: How deep below the root, and how many directory entries at most, the search looks.
SUBFOLDER_DEPTH = 2
MAX_SUBFOLDER_ENTRIES = 4096


def _subfolder_files(root: Path) -> Tuple[List[Path], List[Path]]:
    """(requirements files in subfolders, Dockerfiles in the root and its subfolders), in a
    bounded walk (``SUBFOLDER_DEPTH`` levels, ``MAX_SUBFOLDER_ENTRIES`` entries) that skips
    hidden folders, virtual environments, ``SKIPPED_FOLDERS`` and nested projects."""
    requirements: List[Path] = []
    dockerfiles: List[Path] = []
    budget = MAX_SUBFOLDER_ENTRIES
    level = [(root, 0)]
    while level:
        folder, depth = level.pop(0)
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        budget -= len(entries)
        if budget < 0:
            break
        names = {e.name for e in entries}
        if depth and (names & _NESTED_PROJECT or "pyvenv.cfg" in names):
            continue  # a project of its own, or a virtual environment
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if depth < SUBFOLDER_DEPTH and not name.startswith(".") and name not in SKIPPED_FOLDERS \
                        and not (depth == 0 and name == "requirements"):  # read already
                    level.append((Path(entry.path), depth + 1))
            elif is_dockerfile_name(name):
                dockerfiles.append(Path(entry.path))
            elif depth and name.endswith(".txt") and (name.startswith("requirements") or folder.name == "requirements"):
                requirements.append(Path(entry.path))
    return requirements, dockerfiles


_NESTED_PROJECT = frozenset({"pyproject.toml", "setup.py", "setup.cfg", ".git"})


def declared_torch_version(root: Path, pyproject: Optional[Mapping[str, Any]] = None) -> Optional[Version]:
    """The lowest lower bound of torch declared in the dependency files of ``root``."""
    return scan_project(root, pyproject).torch_version


def is_dependency_file(path: str) -> bool:
    """Is this the name of a file whose change can change the declared torch version?"""
    p = Path(path)
    name = p.name
    if name in ROOT_MARKERS:
        return True
    if name.endswith(".txt") and (name.startswith("requirements") or p.parent.name == "requirements"):
        return True
    return is_dockerfile_name(name)
