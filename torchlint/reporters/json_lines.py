"""One JSON object per line, each with the same shape as an item of ``--output-format json``."""

from __future__ import annotations

import json
from typing import Sequence

from torchlint.diagnostics import Diagnostic


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    return "".join(json.dumps(d.to_json(), sort_keys=True) + "\n" for d in diagnostics)
