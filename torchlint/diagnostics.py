"""The plain data that flows through the pipeline: locations, edits, fixes, diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Location:
    """A position in a file: 1-based row, 1-based column counted in characters."""

    row: int
    column: int

    def to_json(self) -> dict:
        return {"row": self.row, "column": self.column}


@dataclass(frozen=True)
class Edit:
    """Replace the text between ``location`` and ``end_location`` with ``content``."""

    location: Location
    end_location: Location
    content: str
    #: In a notebook, the 1-based cell the edit's rows and columns are in (None in a file).
    cell: Optional[int] = None

    def to_json(self) -> dict:
        data: Dict[str, Any] = {
            "content": self.content,
            "location": self.location.to_json(),
            "end_location": self.end_location.to_json(),
        }
        if self.cell is not None:
            data["cell"] = self.cell
        return data


@dataclass(frozen=True)
class Fix:
    applicability: str  # SAFE or UNSAFE
    message: str
    edits: Tuple[Edit, ...]

    def to_json(self) -> dict:
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [e.to_json() for e in self.edits],
        }


@dataclass(frozen=True)
class Related:
    """Where the reason for a finding is, in this file or another (the call that makes a helper
    run every step): LSP's ``relatedInformation``, the JSON output's ``related``."""

    path: str
    location: Location
    end_location: Location
    message: str

    def to_json(self) -> dict:
        return {"filename": self.path, "location": self.location.to_json(),
                "end_location": self.end_location.to_json(), "message": self.message}

    @classmethod
    def from_json(cls, data: dict) -> "Related":
        return cls(data["filename"], Location(**data["location"]), Location(**data["end_location"]), data["message"])


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Optional[Fix] = None
    noqa_row: Optional[int] = None
    # Lines on which a ``# noqa`` comment also suppresses this finding (start and statement end).
    noqa_rows: Tuple[int, ...] = field(default=(), compare=False, repr=False)
    #: In a notebook, the 1-based cell (counting every cell) that rows and columns are in, as
    #: in ruff's JSON; None in a Python file.
    cell: Optional[int] = None
    #: Why it matters, a sentence or two (the rule's ``hint``): the full format shows it under
    #: the finding; the short ``message`` alone goes to the concise, JSON and editor outputs.
    hint: Optional[str] = field(default=None, compare=False, repr=False)
    #: The places the reason is (a caller in another function or file); in the JSON output
    #: (``related``) when there are any.
    related: Tuple[Related, ...] = field(default=(), compare=False, repr=False)

    @property
    def url(self) -> str:
        from torchlint import DOCS_URL

        return DOCS_URL.format(code=self.code)

    def sort_key(self):
        return (self.path, self.cell or 0, self.location.row, self.location.column, self.code, self.message)

    def to_json(self) -> dict:
        data: Dict[str, Any] = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.path,
            "location": self.location.to_json(),
            "end_location": self.end_location.to_json(),
            "fix": self.fix.to_json() if self.fix else None,
            "noqa_row": self.noqa_row,
            "cell": self.cell,
            "url": self.url,
        }
        if self.related:
            data["related"] = [r.to_json() for r in self.related]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Diagnostic":
        fix = data.get("fix")
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            path=data["filename"],
            location=Location(**data["location"]),
            end_location=Location(**data["end_location"]),
            fix=Fix(
                applicability=fix["applicability"],
                message=fix["message"],
                edits=tuple(
                    Edit(Location(**e["location"]), Location(**e["end_location"]), e["content"], e.get("cell"))
                    for e in fix["edits"]
                ),
            )
            if fix
            else None,
            noqa_row=data.get("noqa_row"),
            cell=data.get("cell"),
            hint=data.get("hint"),
            related=tuple(Related.from_json(r) for r in data.get("related", ())),
        )
