"""Print a run's findings in the chosen format and turn them into the exit code (``check`` and
``fix`` both end here)."""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

from torchlint.commands.usage import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, UsageError, use_color


def write_output(text: str, args: Any) -> None:
    """``text`` to ``-o PATH`` (atomically) or stdout."""
    if args.output_file:
        from torchlint.atomic import write_report

        try:  # never replaces a device, FIFO or symlink; see atomic.write_report
            write_report(args.output_file, text.encode("utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot write report to {args.output_file}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def report(result: Any, args: Any, resolver: Any, fixed_note: Optional[str] = None,
           checked_paths: Sequence[str] = ()) -> int:
    """Print the findings of ``result`` (a ``runner.RunResult``) in the chosen format; return
    the exit code they call for."""
    from torchlint.fixer import apply_fix_settings
    from torchlint.reporters import HUMAN_FORMATS, ReportContext, get_renderer, summary

    # fixable/unfixable/extend-(un)safe-fixes, applied after the cache: what --fix would do.
    result.diagnostics = apply_fix_settings(result.diagnostics, resolver)

    fmt = args.output_format or "full"
    context = ReportContext(
        files_checked=result.files_checked,
        sources=result.sources,
        color=use_color(sys.stdout, args.color) and (not args.output_file or args.color == "always"),
        root=resolver.default.root,
        unsafe_fixes=args.unsafe_fixes,
        output_format=fmt,
        checked_paths=checked_paths,
    )
    if getattr(args, "silent", False):  # -s: the exit code alone speaks
        pass
    elif args.statistics:
        from torchlint.reporters.statistics import render as render_statistics

        write_output(render_statistics(result.diagnostics, context), args)
    else:
        write_output(get_renderer(fmt)(result.diagnostics, context), args)
    for error in result.errors:
        print(f"torchlint: error: {error}", file=sys.stderr)
    if fmt in HUMAN_FORMATS and not args.quiet:
        if fixed_note:
            print(fixed_note, file=sys.stderr)
        if result.errors and not result.diagnostics:  # not "All checks passed!": some were not
            n = len(result.errors)
            print(f"{n} error{'s' if n != 1 else ''}; not every file was checked "
                  f"({result.files_checked} file{'s' if result.files_checked != 1 else ''}).", file=sys.stderr)
        else:
            print(summary(result.diagnostics, result.files_checked), file=sys.stderr)
        fixable = sum(
            1 for d in result.diagnostics if d.fix and (d.fix.applicability == "safe" or args.unsafe_fixes)
        )
        if fixable:
            flags = "--fix --unsafe-fixes" if args.unsafe_fixes else "--fix"
            print(f"{fixable} fixable with `torchlint {flags}`.", file=sys.stderr)
        hidden = sum(1 for d in result.diagnostics if d.fix and d.fix.applicability == "unsafe")
        if hidden and not args.unsafe_fixes:
            print(f"{hidden} unsafe fix{'es' if hidden != 1 else ''} available with --unsafe-fixes.", file=sys.stderr)
    if result.errors:
        return EXIT_ERROR
    if result.diagnostics and not args.exit_zero:
        return EXIT_FINDINGS
    if fixed_note and getattr(args, "exit_non_zero_on_fix", False) and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK
