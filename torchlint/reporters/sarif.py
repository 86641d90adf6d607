"""SARIF 2.1.0, the format GitHub code scanning (``github/codeql-action/upload-sarif``) reads.

Every known rule is listed in ``tool.driver.rules`` with its docs page as help; each finding is a
result pointing at a repository-relative ``artifactLocation`` under ``%SRCROOT%``. Columns count
characters (``columnKind: unicodeCodePoints``); ``endColumn`` is exclusive, as in SARIF.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from torchlint import __version__
from torchlint.diagnostics import Diagnostic, Location
from torchlint.reporters.base import dumps, uri_path
from torchlint.reporters.paths import relative_path

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://github.com/torchlint/torchlint"
SRCROOT = "%SRCROOT%"


def level(code: str) -> str:
    from torchlint.reporters.base import is_error

    return "error" if is_error(code) else "warning"


def rule_descriptor(code: str, name: str = "") -> dict:
    from torchlint.ruledocs import RuleInfo, plain_text
    from torchlint.rules import known_codes

    if code not in known_codes():
        return {"id": code, "name": name or code, "shortDescription": {"text": name or code}}
    info = RuleInfo(code)
    descriptor: Dict[str, Any] = {
        "id": code,
        "name": info.name,
        "shortDescription": {"text": plain_text(info.summary)},
        "fullDescription": {"text": info.description},
        "help": {"text": plain_text(info.explanation), "markdown": info.explanation},
        "helpUri": info.url,
        "defaultConfiguration": {"level": level(code)},
        "properties": {"tags": ["performance"] if level(code) == "warning" else []},
    }
    if info.fix:
        descriptor["properties"]["fixApplicability"] = info.fix
    return descriptor


def _region(start: Location, end: Location) -> dict:
    return {
        "startLine": start.row,
        "startColumn": start.column,
        "endLine": end.row,
        "endColumn": end.column,
    }


def artifact_location(path: str, root: str) -> dict:
    rel = relative_path(path, root)
    if rel is None:  # outside the repository: an absolute file URI
        from pathlib import Path

        return {"uri": Path(path).resolve().as_uri()}
    return {"uri": uri_path(rel), "uriBaseId": SRCROOT}  # the name's bytes: UTF-8 or not


def result(d: Diagnostic, rule_index: int, root: str, file_range=None) -> dict:
    """One result. A finding in a notebook has its region in the ``.ipynb`` file as stored (the
    JSON line holding the flagged code, ``file_range``), where code scanning can show it, and its
    cell, row and column in ``properties``; its fix is left out (edits to the JSON text would
    have to re-escape the cell's source)."""
    location = artifact_location(d.path, root)
    physical = {"artifactLocation": location}
    if d.cell is None:
        physical["region"] = _region(d.location, d.end_location)
    elif file_range is not None:
        physical["region"] = _region(*file_range)
    item = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": level(d.code),
        "message": {"text": d.message},
        "locations": [{"physicalLocation": physical}],
    }
    if d.cell is not None:
        item["properties"] = {
            "notebookCell": d.cell,
            "cellRegion": _region(d.location, d.end_location),
        }
    elif d.fix is not None:
        item["fixes"] = [{
            "description": {"text": f"{d.fix.message} ({d.fix.applicability} fix)"},
            "artifactChanges": [{
                "artifactLocation": location,
                "replacements": [
                    {"deletedRegion": _region(e.location, e.end_location), "insertedContent": {"text": e.content}}
                    for e in d.fix.edits
                ],
            }],
        }]
    return item


def build_log(diagnostics: Sequence[Diagnostic], context) -> dict:
    from torchlint.rules import known_codes

    names: Dict[str, str] = {code: "" for code in known_codes()}
    for d in diagnostics:  # a code not registered (a stale cache) still gets a rule
        names.setdefault(d.code, d.name)
    codes: List[str] = list(names)
    index: Dict[str, int] = {code: i for i, code in enumerate(codes)}
    ranges = {}
    if any(d.cell is not None for d in diagnostics):
        from torchlint.notebook import file_ranges

        ranges = file_ranges(diagnostics, context.sources)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "torchlint",
                    "version": __version__,
                    "semanticVersion": __version__,
                    "informationUri": INFORMATION_URI,
                    "rules": [rule_descriptor(code, names[code]) for code in codes],
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": [result(d, index[d.code], context.root, ranges.get(id(d))) for d in diagnostics],
        }],
    }


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    return dumps(build_log(diagnostics, context), indent=2) + "\n"
