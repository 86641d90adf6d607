"""``torchlint version``: the version, as ``torchlint --version`` prints it (ruff's ``ruff
version``); ``--output-format json`` gives it with the Python that runs it."""

from __future__ import annotations

import sys
from typing import Sequence

from torchlint import __version__
from torchlint.commands.usage import EXIT_OK, Parser


def main(argv: Sequence[str]) -> int:
    parser = Parser(prog="torchlint version", description="Print torchlint's version.")
    parser.add_argument("--output-format", choices=("text", "json"), default="text", help="text (default) or json")
    args = parser.parse_args(list(argv))
    if args.output_format == "json":
        import json
        import platform

        data = {"version": __version__, "python": platform.python_version(), "executable": sys.executable}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(f"torchlint {__version__}\n")
    return EXIT_OK
