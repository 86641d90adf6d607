"""JUnit XML for CI test reports: a test suite per file, a failing test case per finding and,
when the reporter is told which files were checked, a passing test case per clean file."""

from __future__ import annotations

from itertools import groupby
from typing import Dict, List, Sequence
from xml.etree import ElementTree as ET

from torchlint.diagnostics import Diagnostic
from torchlint.reporters.base import json_safe, position, printable

SUITES_NAME = "torchlint"


def _clean(text: str) -> str:
    # XML 1.0 cannot hold most control characters, even escaped, nor a lone surrogate (the
    # undecodable bytes of a name that is not UTF-8): those are written as ``\\xff``
    return json_safe("".join(c if c in "\t\n\r" or ord(c) >= 0x20 else "\ufffd" for c in text))


def _name(path: str) -> str:
    """A file name as an attribute or in a message: escaped as the terminal formats show it."""
    return printable(path)


def _suite(parent: ET.Element, path: str, cases: int, failures: int) -> ET.Element:
    return ET.SubElement(parent, "testsuite", {
        "name": _name(path), "tests": str(cases), "failures": str(failures), "errors": "0", "skipped": "0",
    })


def render(diagnostics: Sequence[Diagnostic], context) -> str:
    ordered = sorted(diagnostics, key=Diagnostic.sort_key)
    by_path: Dict[str, List[Diagnostic]] = {p: list(g) for p, g in groupby(ordered, key=lambda d: d.path)}
    clean_paths = sorted(set(getattr(context, "checked_paths", ()) or ()) - set(by_path))
    failures = len(ordered)
    tests = failures + len(clean_paths)
    root = ET.Element("testsuites", {
        "name": SUITES_NAME, "tests": str(max(tests, 1)), "failures": str(failures), "errors": "0",
    })
    for path, items in by_path.items():
        suite = _suite(root, path, len(items), len(items))
        for d in items:
            where = position(d)
            case = ET.SubElement(suite, "testcase", {
                "name": _clean(f"{d.code} {d.name} at {where}"),
                "classname": _name(path),
                "file": _name(path),
                "line": str(d.location.row),
            })
            failure = ET.SubElement(case, "failure", {"message": _clean(d.message), "type": d.code})
            failure.text = _clean(f"{_name(path)}:{where}: {d.code} {d.message}")
    for path in clean_paths:
        suite = _suite(root, path, 1, 0)
        ET.SubElement(suite, "testcase", {"name": "torchlint", "classname": _name(path), "file": _name(path)})
    if tests == 0:  # a report with no test at all reads as "no tests ran" in most CI systems
        suite = _suite(root, SUITES_NAME, 1, 0)
        ET.SubElement(suite, "testcase", {"name": "no findings", "classname": SUITES_NAME})
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
