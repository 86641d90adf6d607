"""pylint's ``parseable`` format, ``{path}:{line}: [{msg_id}({symbol}), {obj}] {msg}``, one line
per finding, for tools that read pylint's output (Jenkins Warnings, editors' problem matchers).
torchlint has no enclosing object to name, so ``obj`` is empty; a notebook finding names the
line of the ``.ipynb`` file that holds the flagged code.
"""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import file_ranges, one_line, printable


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ranges = file_ranges(diagnostics, context)
    return "".join(
        f"{printable(d.path)}:{ranges[id(d)][0].row}: [{d.code}({d.name}), ] {printable(one_line(d.message))}\n" for d in diagnostics
    )
