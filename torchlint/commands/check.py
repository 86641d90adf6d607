"""``torchlint check`` (the default command): parse the flags, then discover -> lint -> report,
or hand over to ``fix`` (``--fix``, ``--diff``, ``--fix-only``). Heavy modules (libcst, rich, the
rules) are imported only on the paths that need them, so ``torchlint --version`` and pre-commit
start fast."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

from torchlint import __version__
from torchlint.commands.report import report, write_output
from torchlint.commands.usage import COMMANDS, EXIT_ERROR, EXIT_OK, Parser, UsageError

OUTPUT_FORMATS = (
    "full", "concise", "json", "json-lines", "sarif", "github", "grouped", "junit",
    "gitlab", "rdjson", "pylint", "azure",
)
COLOR_MODES = ("auto", "always", "never")


def _codes(value: str) -> List[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def _extend(values: Optional[List[List[str]]]) -> Optional[List[str]]:
    return None if values is None else [c for group in values for c in group]


def build_check_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="torchlint",
        description="Find PyTorch code that quietly wastes GPU time and memory.",
        epilog="Subcommands: torchlint rule CODE | torchlint server | torchlint clean | torchlint version",
    )
    p.add_argument("paths", nargs="*", help="files or folders to lint (default: .); '-' reads stdin")
    p.add_argument("--version", action="version", version=f"torchlint {__version__}")
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", type=_codes, action="append", metavar="CODES", help="codes or prefixes to enable (replaces the config's select)")
    sel.add_argument("--extend-select", type=_codes, action="append", metavar="CODES", help="codes to enable in addition")
    sel.add_argument("--ignore", type=_codes, action="append", metavar="CODES", help="codes or prefixes to disable")
    sel.add_argument("--per-file-ignores", action="append", metavar="GLOB:CODES", help="ignore codes in files matching GLOB")
    sel.add_argument("--target-torch-version", metavar="X.Y", help="lowest torch version the code must run on")
    sel.add_argument("--preview", action="store_true", default=None, help="also run rules in preview")
    sel.add_argument("--no-preview", dest="preview", action="store_false", help="do not run rules in preview")
    sel.add_argument("--ignore-noqa", action="store_true", help="ignore `# noqa` comments (and `# torchlint: noqa`): report every finding")
    files = p.add_argument_group("files")
    files.add_argument("--exclude", type=_codes, action="append", metavar="GLOBS", help="globs to exclude (replaces the config's exclude)")
    files.add_argument("--extend-exclude", type=_codes, action="append", metavar="GLOBS", help="globs to exclude in addition")
    files.add_argument("--force-exclude", action="store_true", help="apply excludes to paths named on the command line too")
    files.add_argument("--extension", type=_codes, action="append", metavar="EXTS", help="file suffixes to find in folders: some of py,pyi,ipynb (default: all; ipynb left out turns notebooks off)")
    files.add_argument("--include-notebooks", action="store_true", default=None, help="find .ipynb notebooks in folders (the default)")
    files.add_argument("--no-include-notebooks", dest="include_notebooks", action="store_false", help="do not find .ipynb notebooks in folders")
    files.add_argument("--stdin-filename", metavar="PATH", help="the name of the file read from stdin (reads stdin when no path is given)")
    files.add_argument("--show-files", action="store_true", help="list the files that would be linted, then exit")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--config", action="append", metavar="PATH|KEY=VALUE", help="use this pyproject.toml or torchlint.toml instead of discovering one; or KEY=VALUE (a TOML value, e.g. \"select=['TL2']\"), applied over every configuration file (repeatable)")
    cfg.add_argument("--show-settings", action="store_true", help="print the settings used for the first path (default: .), then exit")
    cfg.add_argument("--isolated", action="store_true", help="ignore all configuration files")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=OUTPUT_FORMATS, default=None, help="report format (default: full)")
    out.add_argument("-o", "--output-file", metavar="PATH", help="write the report to a file")
    out.add_argument("--statistics", action="store_true", help="print counts per rule instead of findings")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (errors still exit 2)")
    out.add_argument("-q", "--quiet", action="store_true", help="print the findings and nothing else (no summary, progress or warnings)")
    out.add_argument("-s", "--silent", action="store_true", help="print nothing; the exit code still says whether there were findings (errors are still printed)")
    out.add_argument("--color", choices=COLOR_MODES, default="auto", help="colour the full format: auto (a terminal; NO_COLOR, CLICOLOR=0, TERM=dumb turn it off), always, never")
    out.add_argument("--watch", action="store_true", help="re-run whenever a linted file or a config file changes")
    fix = p.add_argument_group("fixes")
    fix.add_argument("--fix", action="store_true", help="apply safe fixes")
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply (or show) unsafe fixes")
    fix.add_argument("--diff", action="store_true", help="print the diff --fix would make; write nothing")
    fix.add_argument("--show-fixes", action="store_true", help="list the fixes applied")
    fix.add_argument("--fix-only", action="store_true", help="apply fixes and do not report what remains")
    fix.add_argument("--fixable", type=_codes, action="append", metavar="CODES", help="codes whose fixes may be applied")
    fix.add_argument("--unfixable", type=_codes, action="append", metavar="CODES", help="codes never to fix")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 when a fix was applied, even if no finding remains")
    fix.add_argument("--add-noqa", action="store_true", help="add `# noqa: CODE` comments for the current findings")
    perf = p.add_argument_group("performance")
    perf.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: all cores)")
    perf.add_argument("--no-cache", action="store_true", help="do not read or write the results cache")
    perf.add_argument("--cache-dir", metavar="PATH", help="results cache folder (default: .torchlint_cache)")
    return p


def _split_config(args) -> None:
    """``--config`` values: a file (at most one) into ``args.config``, ``KEY=VALUE`` overrides
    (ruff's form: a TOML ``key = value`` line; not a file's name) into ``args.config_overrides``."""
    values, args.config, args.config_overrides = args.config or [], None, {}
    for value in values:
        if os.path.isfile(value) or "=" not in value:
            if args.config is not None:
                raise UsageError("--config names one configuration file (others are KEY=VALUE)")
            args.config = value
            continue
        args.config_overrides.update(parse_config_override(value))


def parse_config_override(text: str) -> dict:
    """``--config "select = ['TL2']"`` -> {"select": ["TL2"]}: one TOML ``key = value`` pair; a
    one-line usage error otherwise (the keys are checked with the configuration's)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--config {text!r}: not a file and not a TOML KEY = VALUE pair ({exc})") from None
    except RecursionError:
        raise UsageError(f"--config {text!r}: value nested too deeply") from None
    key = next(iter(table), None)
    if len(table) != 1 or (key == "tool" and isinstance(table.get("tool"), dict)):
        tool = table.get("tool")  # tool.torchlint.select = [...] is taken as select = [...]
        if len(table) == 1 and isinstance(tool, dict) and list(tool) == ["torchlint"] and isinstance(tool["torchlint"], dict):
            return dict(tool["torchlint"])
        raise UsageError(f"--config {text!r}: expected one KEY = VALUE pair")
    return table


def _warn(args, message: str) -> None:
    """``torchlint: warning: ...`` on stderr, unless -q/-s."""
    if not args.quiet:
        print(f"torchlint: warning: {message}", file=sys.stderr)


def _warn_preview(args, resolver) -> None:
    """ruff's warning: a rule selected by name (or a selector naming only rules in preview)
    does nothing while preview is off."""
    settings = resolver.default
    if settings.preview or args.quiet:
        return
    from torchlint.config import ConfigError, expand_codes
    from torchlint.rules import preview_codes

    preview = preview_codes()
    for selector in dict.fromkeys([*settings.select, *settings.extend_select]):
        try:
            codes = expand_codes([selector], "select")
        except ConfigError:
            continue
        if codes and codes <= preview:
            _warn(args, f"Selection `{selector}` has no effect because preview is not enabled (add --preview).")


def _overrides(args):
    from torchlint.config import CliOverrides

    return CliOverrides(
        select=_extend(args.select),
        extend_select=_extend(args.extend_select),
        ignore=_extend(args.ignore),
        exclude=_extend(args.exclude),
        extend_exclude=_extend(args.extend_exclude),
        per_file_ignores=args.per_file_ignores,
        target_torch_version=args.target_torch_version,
        fixable=_extend(args.fixable),
        unfixable=_extend(args.unfixable),
        preview=args.preview,
        extension=_extend(args.extension),
        include_notebooks=args.include_notebooks,
        table=getattr(args, "config_overrides", None) or None,
    )


def _check_output_file(path: str) -> None:
    """Refuse an ``-o`` target that cannot be written before spending a run on it."""
    import stat

    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write report to {path}: folder {os.path.dirname(path) or '.'} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"cannot write report to {path}: folder is not writable")
        return
    except OSError as exc:
        raise UsageError(f"cannot write report to {path}: {exc.strerror or exc}")
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"cannot write report to {path}: is a folder")
    if stat.S_ISREG(st.st_mode) and (not os.access(target, os.W_OK) or not st.st_mode & 0o222):
        raise UsageError(f"cannot write report to {path}: permission denied (file is not writable)")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        raise UsageError(f"cannot write report to {path}: not a regular file, terminal or FIFO")


def _check_command_word(paths: Sequence[str]) -> None:
    """``torchlint chek .``: a first path that is a bare word naming nothing on disk is a
    mistyped command, not a file to report TL002 for."""
    import re

    word = paths[0] if paths else ""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", word) or os.path.lexists(word):
        return
    import difflib

    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    hint = f"did you mean `torchlint {close[0]}`?" if close else "commands: " + ", ".join(COMMANDS)
    raise UsageError(f"no such file or command: {word!r} ({hint})")


def main(argv: Sequence[str]) -> int:
    """`torchlint check [PATHS] [FLAGS]` (also `torchlint [PATHS] [FLAGS]`)."""
    args = build_check_parser().parse_args(list(argv))
    _split_config(args)
    if args.silent:
        args.quiet = True
    if args.ignore_noqa:  # read by suppression.filter_suppressed, in this process and the workers
        args.no_cache = True  # cached findings are the ones noqa comments left
        previous = os.environ.get("TORCHLINT_IGNORE_NOQA")
        os.environ["TORCHLINT_IGNORE_NOQA"] = "1"
        try:
            return _checked(args)
        finally:  # main() is also called in-process (tests, tools): leave the environment as it was
            if previous is None:
                os.environ.pop("TORCHLINT_IGNORE_NOQA", None)
            else:
                os.environ["TORCHLINT_IGNORE_NOQA"] = previous
    return _checked(args)


def _checked(args) -> int:
    """``main`` once the flags are parsed: their combinations checked, then the run."""
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.diff and args.fix_only:
        raise UsageError("--diff and --fix-only cannot be combined")
    if args.add_noqa and (args.fix or args.diff or args.fix_only):
        raise UsageError("--add-noqa cannot be combined with --fix, --diff or --fix-only")
    _check_command_word(args.paths)
    stdin = "-" in args.paths or (args.stdin_filename is not None and not args.paths)
    if stdin and len(args.paths) > 1:
        raise UsageError("'-' (stdin) cannot be combined with other paths")
    if args.stdin_filename is not None and not stdin:
        raise UsageError("--stdin-filename names the file read from stdin; give no paths (or '-')")
    if stdin and (args.add_noqa or args.show_files):
        raise UsageError("--add-noqa and --show-files work on files, not stdin")
    if args.watch and (stdin or args.add_noqa or args.show_settings or args.show_files):
        raise UsageError("--watch cannot be combined with stdin, --add-noqa, --show-settings or --show-files")
    if args.output_file:
        _check_output_file(args.output_file)
    if args.watch:
        return _watch(args)
    return _run(args, stdin)


def _run(args, stdin: bool = False) -> int:
    from torchlint.config import ConfigError, SettingsResolver

    try:
        resolver = SettingsResolver(_overrides(args), config_file=args.config, isolated=args.isolated)
        paths = args.paths or ["."]
        if args.show_settings:
            return _show_settings(args, resolver, args.stdin_filename if stdin and args.stdin_filename else paths[0])
        if stdin:
            return _run_stdin(args, resolver)
        from torchlint.discovery import discover

        files = discover(paths, resolver, force_exclude=args.force_exclude)
        _warn_preview(args, resolver)
        if not files:
            _warn(args, "No Python files found under the given path(s)")
        if args.show_files:
            write_output("".join(f"{path}\n" for path in files), args)
            return EXIT_OK
        if args.add_noqa:
            return _add_noqa(files, resolver, args)
        if args.fix or args.diff or args.fix_only:
            from torchlint.commands.fix import run_fix

            return run_fix(files, resolver, args)
        from torchlint.runner import lint_paths

        cache = None
        if not args.no_cache:
            from torchlint.cache import open_cache

            cache = open_cache(resolver.default, args.cache_dir)
        from torchlint.commands.progress import progress
        from torchlint.runner import project_context

        with progress(args, len(files)):
            # the whole project's summaries join the index: the named files get their cross-file findings
            context = project_context(paths, files, resolver)
            result = lint_paths(files, resolver, jobs=args.jobs, cache=cache, context=context)
        return report(result, args, resolver, checked_paths=files)
    except ConfigError as exc:
        print(f"torchlint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _watch(args) -> int:
    """``--watch``: run, then wait for a change to a linted file or a config file and run again.
    With ``watchfiles`` installed (``pip install torchlint[watch]``) the kernel's file events
    wake it (no polling of the tree); otherwise, or with ``TORCHLINT_WATCH_POLL=1``, the files'
    (mtime, size) are polled every ``TORCHLINT_WATCH_INTERVAL`` seconds (default 0.5). Config
    files in the current folder and above are checked at that interval either way. Ctrl-C ends
    it with exit 0."""
    import time

    interval = float(os.environ.get("TORCHLINT_WATCH_INTERVAL") or 0.5)
    wait = _event_waiter(args, interval) if _watch_backend() == "watchfiles" else _poll_waiter(args, interval)
    try:
        while True:
            _run(args)
            sys.stdout.flush()
            print(f"[{time.strftime('%H:%M:%S')}] Watching for file changes (Ctrl-C to stop).", file=sys.stderr, flush=True)
            wait()
            print(f"[{time.strftime('%H:%M:%S')}] File change detected...", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        return EXIT_OK


def _watch_backend() -> str:
    """"watchfiles" when it can be imported and polling is not asked for, else "poll"."""
    if os.environ.get("TORCHLINT_WATCH_POLL"):
        return "poll"
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        return "poll"
    return "watchfiles"


def _poll_waiter(args, interval: float):
    def wait() -> None:
        import time

        before = _watched_state(args)
        while _watched_state(args) == before:
            time.sleep(interval)
    return wait


#: Files whose change starts a new run, besides the linted suffixes and dependency files.
_WATCHED_NAMES = frozenset({"pyproject.toml", ".torchlint.toml", "torchlint.toml", ".gitignore"})


def _event_waiter(args, interval: float):
    """Wait on ``watchfiles``' events under the linted paths (and the ``--config`` file); wake
    up every ``interval`` to check the config files of the current folder and its parents."""
    import watchfiles

    from torchlint.dependencies import is_dependency_file

    roots = [p for p in (args.paths or ["."]) if os.path.exists(p)]
    if args.config:
        roots.append(args.config)
    roots = roots or ["."]

    def relevant(_change, path: str) -> bool:
        name = os.path.basename(path)
        return (path.endswith((".py", ".pyi", ".ipynb")) or name in _WATCHED_NAMES or is_dependency_file(path)) \
            and "__pycache__" not in path.split(os.sep)

    def wait() -> None:
        configs = _config_state(args)
        for changes in watchfiles.watch(*roots, watch_filter=relevant, debounce=200, step=50,
                                        rust_timeout=max(50, int(interval * 1000)), yield_on_timeout=True,
                                        raise_interrupt=True):
            if changes or _config_state(args) != configs:
                return
    return wait


def _config_state(args) -> dict:
    """(mtime, size) of the config files of the current folder and its parents."""
    from pathlib import Path

    from torchlint.config import STANDALONE_CONFIGS

    state: dict = {}
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        for name in (*STANDALONE_CONFIGS, "pyproject.toml"):
            try:
                st = os.stat(folder / name)
            except OSError:
                continue
            state[str(folder / name)] = (st.st_mtime_ns, st.st_size)
    return state


def _watched_state(args) -> dict:
    """(mtime, size) of every file a run would lint and of every config file that could apply."""
    from pathlib import Path

    from torchlint.config import STANDALONE_CONFIGS, ConfigError, SettingsResolver
    from torchlint.discovery import discover

    state: dict = {}
    folders = set()
    try:
        resolver = SettingsResolver(_overrides(args), config_file=args.config, isolated=args.isolated)
        files = discover(args.paths or ["."], resolver, force_exclude=args.force_exclude)
    except ConfigError:  # a broken config: watch the config files until it is mended
        files = []
    if args.config:
        files = [*files, args.config]
    for path in files:
        folders.add(os.path.dirname(os.path.abspath(path)))
    cwd = Path.cwd()
    folders.update(str(p) for p in (cwd, *cwd.parents))
    for folder in folders:
        files.extend(os.path.join(folder, name) for name in (*STANDALONE_CONFIGS, "pyproject.toml"))
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        state[path] = (st.st_mtime_ns, st.st_size)
    return state


def _show_settings(args, resolver, path: str) -> int:
    """``--show-settings``: the settings the first path gets, as TOML (JSON with a json format)."""
    import json

    settings = resolver.for_path(path)
    data = {
        "file": path,
        "config-file": settings.config_path,
        "root": os.path.abspath(settings.root),
        "target-torch-version": ".".join(map(str, settings.target_torch_version)),
        "preview": settings.preview,
        "select": list(settings.select),
        "extend-select": list(settings.extend_select),
        "ignore": list(settings.ignore),
        "enabled": sorted(settings.codes_for_path(path)),
        "per-file-ignores": {glob: list(codes) for glob, codes in settings.per_file_ignores},
        "exclude": list(settings.exclude),
        "extend-exclude": list(settings.extend_exclude),
        "fixable": list(settings.fixable),
        "unfixable": list(settings.unfixable),
        "extend-safe-fixes": list(settings.extend_safe_fixes),
        "extend-unsafe-fixes": list(settings.extend_unsafe_fixes),
        "respect-gitignore": settings.respect_gitignore,
        "include-notebooks": settings.include_notebooks,
        "extension": [suffix.lstrip(".") for suffix in settings.lint_suffixes],
        "max-file-size": settings.max_file_size,
        "cache-dir": settings.cache_dir,
    }
    if args.output_format in ("json", "json-lines"):
        write_output(json.dumps(data, indent=2) + "\n", args)
        return EXIT_OK
    lines = [f"# Settings for {path}"]
    for key, value in data.items():
        if key in ("file",) or value is None:
            if value is None:
                lines.append(f"# {key}: none")
            continue
        if isinstance(value, dict):
            value = "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + " }" if value else "{}"
        else:
            value = json.dumps(value)
        lines.append(f"{key} = {value}")
    write_output("\n".join(lines) + "\n", args)
    return EXIT_OK


def _add_noqa(files: Sequence[str], resolver, args) -> int:
    """``--add-noqa``: lint, then add ``# noqa: CODE`` to the line of each finding; each file is
    rewritten atomically, only if it has not changed since it was linted (as ``--fix`` does)."""
    from torchlint.commands.fix import write_if_unchanged
    from torchlint.fixer import parse_error
    from torchlint.runner import lint_paths, read_file
    from torchlint.source import is_notebook_path
    from torchlint.suppression import add_noqa

    stamps = {}
    for path in files:
        try:
            st = os.stat(path)
            stamps[path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    from torchlint.runner import project_context

    result = lint_paths(files, resolver, jobs=args.jobs, cache=None,
                        context=project_context(args.paths or ["."], files, resolver))
    by_path: dict = {}
    for d in result.diagnostics:
        by_path.setdefault(d.path, []).append(d)
    errors = list(result.errors)
    added_total = changed = 0
    for path, diagnostics in sorted(by_path.items()):
        if is_notebook_path(path) or any(d.code == "TL001" for d in diagnostics):
            continue  # notebooks are not supported; a file that does not parse is left alone
        settings = resolver.for_path(path)
        data, before, source, _ = read_file(path, settings)
        if data is None or before is None or source is None:
            continue
        if (before.st_mtime_ns, before.st_size) != stamps.get(path):
            errors.append(f"{path}: changed while it was linted; file left unchanged")
            continue
        text, added = add_noqa(source.text, diagnostics)
        if not added:
            continue
        why = parse_error(text, path, strict=False)
        if why is not None:  # never expected: a comment at a line end outside strings
            errors.append(f"{path}: adding noqa comments would break the file ({why}); file left unchanged")
            continue
        error = write_if_unchanged(path, data, before, source.encode(text))
        if error:
            errors.append(error)
            continue
        added_total += added
        changed += 1
    for error in errors:
        print(f"torchlint: error: {error}", file=sys.stderr)
    if not args.quiet:
        files_note = f" in {changed} file{'s' if changed != 1 else ''}" if added_total else ""
        print(f"Added {added_total} noqa directive{'s' if added_total != 1 else ''}{files_note}.", file=sys.stderr)
    return EXIT_ERROR if errors else EXIT_OK


def _stdin_unreadable(args, resolver, settings, name: str, data: bytes, exc: Exception) -> int:
    """stdin that is not Python text: TL002 with the reason (a file gets the same finding);
    ``--fix``/``--fix-only`` give the buffer back unchanged on stdout, the report on stderr."""
    import contextlib

    from torchlint.runner import RunResult, unreadable_findings

    fixing = bool(args.fix or args.fix_only)
    if fixing:
        out = getattr(sys.stdout, "buffer", None)
        sys.stdout.flush()
        if out is not None:
            out.write(data)
            out.flush()
        else:
            sys.stdout.write(data.decode("utf-8", "surrogateescape"))
    result = RunResult(diagnostics=unreadable_findings(name, exc, settings), files_checked=1)
    with contextlib.redirect_stdout(sys.stderr) if fixing else contextlib.nullcontext():
        return report(result, args, resolver, checked_paths=[name])


def _run_stdin(args, resolver) -> int:
    from torchlint.runner import RunResult, lint_text
    from torchlint.source import UnreadableFile, copy_stdin, decode_source, read_stdin, stdin_limit

    name = args.stdin_filename or "-"
    settings = resolver.for_path(name if args.stdin_filename else ".")
    if args.stdin_filename and args.force_exclude and settings.is_excluded(name):
        if args.fix or args.fix_only:
            copy_stdin()
        return EXIT_OK
    try:  # at most max-file-size bytes; a closed stdin: one line, exit 2
        data = read_stdin(*stdin_limit(name, settings))
    except UnreadableFile as exc:
        print(f"torchlint: error: {name}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        source = decode_source(data, name)
    except UnreadableFile as exc:  # UTF-16, binary, a bad coding cookie: TL002, as a file gets
        return _stdin_unreadable(args, resolver, settings, name, data, exc)
    if args.fix or args.diff or args.fix_only:
        from torchlint.commands.fix import run_fix_stdin

        return run_fix_stdin(source, settings, args)
    facts = _stdin_facts(args, resolver, name, source.text)
    diagnostics, text, error = lint_text(source, settings, facts)
    result = RunResult(diagnostics=diagnostics, files_checked=1, sources={name: source.text})
    if error:
        result.errors.append(error)
    return report(result, args, resolver, checked_paths=[name])


def _stdin_facts(args, resolver, name: str, text: str):
    """``--stdin-filename``: the project facts the named file gets in its project (with this
    text in place of the file on disk), so that stdin gets the cross-file findings of
    ``torchlint .``; None without a name or a project around it."""
    if not args.stdin_filename:
        return None
    from torchlint.runner import facts_with_text, project_context

    context = project_context([name], [name], resolver)
    if not context:
        return None
    cache = None
    if not args.no_cache:
        from torchlint.cache import open_cache

        cache = open_cache(resolver.default, args.cache_dir)
    return facts_with_text(name, text, context, resolver, cache, args.jobs)
