"""Azure Pipelines logging commands: one ``##vso[task.logissue ...]`` line per finding, shown on
the run's summary and in pull requests (``type=error`` for files torchlint could not check).

Escaping follows azure-pipelines-task-lib (``taskcommand.ts``), which the agent reverses: in the
message ``%`` ``\\r`` ``\\n``; in a property also ``;`` and ``]``.
"""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import file_ranges, is_error, printable
from torchlint.reporters.paths import display_path


def escape_data(text: str) -> str:
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(";", "%3B").replace("]", "%5D")


def command(d: Diagnostic, root: str, start) -> str:
    properties = [
        ("type", "error" if is_error(d.code) else "warning"),
        ("sourcepath", printable(display_path(d.path, root), keep="\r\n")),
        ("linenumber", str(start.row)),
        ("columnnumber", str(start.column)),
        ("code", d.code),
    ]
    props = "".join(f"{key}={escape_property(value)};" for key, value in properties)
    message = printable(f"{d.code} [{d.name}] {d.message}", keep="\r\n")
    return f"##vso[task.logissue {props}]{escape_data(message)}"


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ranges = file_ranges(diagnostics, context)
    return "".join(command(d, context.root, ranges[id(d)][0]) + "\n" for d in diagnostics)
