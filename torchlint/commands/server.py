"""``torchlint server``: the language server over stdio (``torchlint.server``; needs pygls 2)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from torchlint.commands.usage import EXIT_ERROR, EXIT_OK, Parser


def build_parser() -> argparse.ArgumentParser:
    from torchlint.server import DEFAULT_DEBOUNCE_MS  # the module imports without pygls

    p = Parser(prog="torchlint server", description="Run the torchlint language server over stdio.")
    p.add_argument("--debounce-ms", type=int, default=DEFAULT_DEBOUNCE_MS, metavar="MS",
                   help=f"wait this long after the last edit before linting (default: {DEFAULT_DEBOUNCE_MS})")
    p.add_argument("--log-file", metavar="PATH", help="write the server's log here (default: stderr)")
    p.add_argument("--verbose", action="store_true", help="log debug messages")
    p.add_argument("--preview", action="store_true", default=None,
                   help="also run rules in preview, over the configuration's `preview`")
    p.add_argument("--no-preview", dest="preview", action="store_false",
                   help="do not run rules in preview, over the configuration's `preview`")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(list(argv or []))
    try:
        import lsprotocol  # noqa: F401
        import pygls.lsp.server  # noqa: F401  (pygls 2.x layout)
    except ImportError:
        print('torchlint: error: `torchlint server` needs pygls 2: pip install "torchlint[lsp]"', file=sys.stderr)
        return EXIT_ERROR
    if args.debounce_ms < 0:
        print("torchlint: error: --debounce-ms must not be negative", file=sys.stderr)
        return EXIT_ERROR
    import logging  # here: every other command would pay for it at start-up

    logging.basicConfig(
        filename=args.log_file,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    from torchlint.server import serve_stdio

    serve_stdio(args.debounce_ms, preview=args.preview)
    return EXIT_OK
