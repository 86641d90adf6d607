"""GitHub Actions workflow commands: one ``::warning`` annotation per finding (``::error`` for
files torchlint could not parse or read), shown inline on the pull request's diff.

Escaping follows ``@actions/core`` (``escapeData`` / ``escapeProperty`` in its command.ts).
"""

from __future__ import annotations

from typing import Sequence

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.paths import display_path
from torchlint.rules import ENGINE_CODES


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def level(code: str) -> str:
    return "error" if code in ENGINE_CODES else "warning"


def annotation(d: Diagnostic, root: str) -> str:
    properties = (
        ("file", display_path(d.path, root)),
        ("line", str(d.location.row)),
        ("col", str(d.location.column)),
        ("endLine", str(d.end_location.row)),
        ("endColumn", str(d.end_location.column)),
        ("title", f"torchlint ({d.code})"),
    )
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{level(d.code)} {props}::{escape_data(d.message)}"


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    return "".join(annotation(d, context.root) + "\n" for d in diagnostics)
