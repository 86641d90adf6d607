"""``torchlint rule CODE|NAME`` / ``torchlint rule --all``: a rule's documentation in the
terminal (text through rich, or JSON); the pages come from ``torchlint.ruledocs``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from torchlint.commands.usage import EXIT_ERROR, EXIT_OK, Parser, use_color


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="torchlint rule", description="Show a rule's documentation.")
    p.add_argument("rule", nargs="?", metavar="CODE|NAME", help="a rule code (TL701) or name (data-parallel)")
    p.add_argument("--all", action="store_true", help="show every rule")
    p.add_argument("--output-format", choices=("text", "json"), default="text")
    return p


def main(argv: Sequence[str]) -> int:
    from torchlint.ruledocs import RuleInfo, all_codes, render_text, resolve

    args = build_parser().parse_args(list(argv))
    if args.all == bool(args.rule):
        print("torchlint: error: give one rule code or name, or --all", file=sys.stderr)
        return EXIT_ERROR
    if args.all:
        codes = all_codes()
    else:
        code = resolve(args.rule)
        if code is None:
            print(f"torchlint: error: unknown rule '{args.rule}' (see `torchlint rule --all`)", file=sys.stderr)
            return EXIT_ERROR
        codes = [code]
    infos = [RuleInfo(code) for code in codes]
    if args.output_format == "json":
        data = [info.to_json() for info in infos]
        sys.stdout.write(json.dumps(data if args.all else data[0], indent=2) + "\n")
    else:
        import shutil

        color = use_color(sys.stdout)
        width = shutil.get_terminal_size((100, 24)).columns if color else 100
        sys.stdout.write(render_text(infos, color, width))
    sys.stdout.flush()
    return EXIT_OK
