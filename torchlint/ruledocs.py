"""A rule's documentation page: loaded, split into sections, rendered (``torchlint rule CODE``
in ``commands/rule.py``, the SARIF help, the README check).

``docs/rules/<CODE>.md`` is the single source of each page. A wheel carries the pages as
``torchlint/_docs/<CODE>.md`` (copied there at build time by ``setup.py``); a source checkout or an
editable install reads them from ``docs/rules/`` beside the package.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from torchlint import __version__

PACKAGE_DIR = Path(__file__).resolve().parent
# Installed wheel first: a folder named docs/rules beside site-packages belongs to someone else.
DOCS_DIRS = (PACKAGE_DIR / "_docs", PACKAGE_DIR.parent / "docs" / "rules")

_CODE = re.compile(r"^TL\d{3}$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def docs_dir() -> Optional[Path]:
    for directory in DOCS_DIRS:
        if directory.is_dir() and any(directory.glob("TL*.md")):
            return directory
    return None


def load_doc(code: str) -> Optional[str]:
    """The markdown page of ``code``, or None when there is none."""
    if not _CODE.match(code):
        return None
    for directory in DOCS_DIRS:
        page = directory / f"{code}.md"
        if page.is_file():
            return page.read_text(encoding="utf-8")
    return None


def sections(markdown: str) -> Dict[str, str]:
    """``## Heading`` -> the text under it (up to the next ``##`` heading), fences respected."""
    found: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading and len(heading.group(1)) <= 2:
            current = found.setdefault(heading.group(2), []) if len(heading.group(1)) == 2 else None
            continue
        if current is not None:
            current.append(line)
    return {title: "\n".join(lines).strip() for title, lines in found.items()}


def code_blocks(text: str, language: str = "python") -> List[str]:
    """The contents of the fenced code blocks of ``language`` in ``text``, in order."""
    blocks: List[str] = []
    current: Optional[List[str]] = None
    fence, info = "", ""
    for line in text.splitlines():
        match = _FENCE.match(line)
        if current is None:
            if match:
                fence = match.group(1)
                info = line.strip()[3:].strip()
                current = []
        elif match and line.strip() == fence:
            if info.split()[:1] == [language]:
                blocks.append("\n".join(current) + "\n")
            current = None
        else:
            current.append(line)
    return blocks


def plain_text(markdown: str) -> str:
    """Markdown with links, code spans and emphasis unwrapped (SARIF ``text`` fields)."""
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", markdown)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    return text


class RuleInfo:
    """What is known of one code: a rule class or an engine code, with its page if any."""

    def __init__(self, code: str) -> None:
        from torchlint import DOCS_URL
        from torchlint.rules import ENGINE_CODES, rules_by_code

        self.code = code
        rule = rules_by_code().get(code)
        if rule is not None:
            self.name, self.summary = rule.name, rule.summary
            self.message: Optional[str] = rule.message
            self.hint: Optional[str] = rule.hint
            self.fix: Optional[str] = rule.fix_applicability
        else:
            self.name, self.summary = ENGINE_CODES[code]
            self.message, self.hint, self.fix = None, None, None
        self.url = DOCS_URL.format(code=code)
        self.doc = load_doc(code)

    @property
    def explanation(self) -> str:
        if self.doc is not None:
            return self.doc
        # A rule whose page is not written yet still gets a page from what the class says.
        lines = [f"# {self.code} {self.name}", "", "## What it does", self.summary]
        return "\n".join(lines) + "\n" + self.message_section

    @property
    def message_section(self) -> str:
        """The finding's message as the concise output shows it, then the hint the full format
        adds under it ('' for engine codes)."""
        if not self.message:
            return ""
        return "\n## Message\n\n> " + self.message + ("\n\n" + self.hint if self.hint else "") + "\n"

    @property
    def description(self) -> str:
        """The page's *What it does* section as plain text, or the summary."""
        what = sections(self.explanation).get("What it does")
        return plain_text(what) if what else self.summary

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "summary": self.summary,
            "message": self.message,
            "hint": self.hint,
            "fix": self.fix,
            "url": self.url,
            "explanation": self.explanation,
        }


def all_codes() -> List[str]:
    from torchlint.rules import known_codes

    return list(known_codes())


def resolve(code_or_name: str) -> Optional[str]:
    from torchlint.rules import code_for

    candidate = code_or_name.strip()
    return code_for(candidate.upper() if _CODE.match(candidate.upper()) else candidate)


def render_text(infos: Sequence[RuleInfo], color: bool, width: Optional[int] = None) -> str:
    import io

    from rich.console import Console
    from rich.markdown import Markdown
    from rich.rule import Rule as Separator

    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, color_system="standard" if color else None,
        width=width or 100, highlight=False,
    )
    for i, info in enumerate(infos):
        if i:
            console.print(Separator())
        page = info.explanation if info.doc is None else info.explanation.rstrip("\n") + "\n" + info.message_section
        console.print(Markdown(page, code_theme="ansi_dark", hyperlinks=color))
    text = buffer.getvalue()
    if not color:  # rich pads every line to the console width
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


__all__ = ["load_doc", "sections", "code_blocks", "RuleInfo", "__version__"]
