"""Glob patterns as git reads them (``.gitignore``, ``exclude``, ``per-file-ignores``), matched
in time that grows with the pattern's and the path's lengths: never a regex that backtracks
exponentially.

The dialect is git's wildmatch: ``*`` and ``?`` stay within a folder, a whole component ``**``
crosses folders (``**/x``, ``a/**/b``, ``a/**``; another ``**``, as in ``a**b``, is a plain
``*``); ``[abc]``, ``[a-z]``, ``[!a]``/``[^a]``, POSIX classes (``[[:alpha:]]``); ``\\`` quotes
the next character. A pattern also matches everything under a folder it matches. A range
written backwards (``[z-a]``) matches its first character only, as in git; an unclosed class
(``[]``, ``[!]``), an unknown POSIX class or a trailing ``\\`` make the pattern invalid
(``GlobError``): git's ``.gitignore`` reader then never matches the line, a configuration
reports it.

Why not a plain translation to a regex: ``*a*a*a*a*a*a*a*a*b`` against a name of 60 ``a``
makes Python's regex engine try every way to split the name between the stars (one match
took minutes). Here every star but a component's last, and every ``**`` but the last, match
the earliest place the rest can start (a lazy look-ahead whose captured text is then matched
by a back-reference, which never backtracks: the atomic group of older Pythons). Taking the
earliest place is always right, because what follows starts with another star that can take
up any extra text.
"""

from __future__ import annotations

import itertools
import os
import re
import string
from functools import lru_cache
from typing import Iterator, List, Optional, Pattern, Tuple


class GlobError(ValueError):
    """An invalid pattern; the message says why in a few words."""


_POSIX_CLASSES = {  # ASCII, as git's wildmatch
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": r" \t",
    "cntrl": r"\x00-\x1f\x7f",
    "digit": "0-9",
    "graph": r"\x21-\x7e",
    "lower": "a-z",
    "print": r"\x20-\x7e",
    "punct": "".join(re.escape(c) for c in string.punctuation),
    "space": r" \t\n\r\x0b\x0c",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}
_NEVER = "(?!)"
_STAR = object()  # a star inside a component, in a component's list of pieces


def _class_member(text: str, j: int) -> Tuple[str, int]:
    """The character at ``text[j]`` inside a class (``\\`` quotes), and the index after it."""
    if text[j] == "\\":
        if j + 1 >= len(text):
            raise GlobError("unclosed character class")
        return text[j + 1], j + 2
    return text[j], j + 1


def _char_class(text: str, i: int) -> Tuple[str, int]:
    """The regex for the class starting at ``text[i] == '['`` and the index after its ``]``,
    read as git's wildmatch reads it: a ``]`` first is a member, ``!`` or ``^`` first negates."""
    j = i + 1
    negated = j < len(text) and text[j] in "!^"
    if negated:
        j += 1
    items: List[str] = []
    slash = False  # can a member be '/'? (never matched: a class stays in its folder)
    first = True
    while True:
        if j >= len(text):
            raise GlobError("unclosed character class")
        if text[j] == "]" and not first:
            j += 1
            break
        first = False
        if text.startswith("[:", j):
            close = text.find("]", j + 2)
            if close < 0:
                raise GlobError("unclosed character class")
            if close > j + 2 and text[close - 1] == ":":
                name = text[j + 2:close - 1]
                if name not in _POSIX_CLASSES:
                    raise GlobError(f"unknown character class [:{name}:]")
                items.append(_POSIX_CLASSES[name])
                slash = slash or name in ("graph", "print", "punct")
                j = close + 1
                continue
        low, j = _class_member(text, j)
        if j + 1 < len(text) and text[j] == "-" and text[j + 1] != "]":
            high, j = _class_member(text, j + 1)
            if low <= high:
                items.append(re.escape(low) + "-" + re.escape(high))
                slash = slash or low <= "/" <= high
            else:  # written backwards: git's wildmatch still matches its first character
                items.append(re.escape(low))
                slash = slash or low == "/"
        else:
            items.append(re.escape(low))
            slash = slash or low == "/"
    body = "".join(items)
    if negated:
        return ("[^/" + body + "]" if body else "[^/]"), j
    if not body:
        return _NEVER, j
    return ("(?!/)[" + body + "]" if slash else "[" + body + "]"), j


def _pieces(component: str) -> List[object]:
    """A component's regex pieces, one per character it matches, and ``_STAR`` for each run of
    stars (``**`` inside a component is a plain ``*``, as in git)."""
    out: List[object] = []
    i = 0
    while i < len(component):
        c = component[i]
        if c == "*":
            while i < len(component) and component[i] == "*":
                i += 1
            out.append(_STAR)
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            piece, i = _char_class(component, i)
            out.append(piece)
        elif c == "\\":
            if i + 1 >= len(component):
                raise GlobError("a trailing backslash")
            out.append(re.escape(component[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return out


def _component(component: str, names: Iterator[int]) -> str:
    """One component's regex: each star but the last is atomic and lazy (see the module doc),
    the last is a plain ``[^/]*`` (it can only try the positions of one folder name)."""
    pieces = _pieces(component)
    stars = [k for k, p in enumerate(pieces) if p is _STAR]
    if not stars:
        return "".join(pieces)  # type: ignore[arg-type]
    out = "".join(pieces[:stars[0]])  # type: ignore[arg-type]
    for start, end in zip(stars, stars[1:]):
        segment = "".join(pieces[start + 1:end])  # type: ignore[arg-type]
        name = f"g{next(names)}"
        out += f"(?=(?P<{name}>[^/]*?{segment}))(?P={name})"
    return out + "[^/]*" + "".join(pieces[stars[-1] + 1:])  # type: ignore[arg-type]


def glob_regex(pattern: str) -> str:
    """The regex text of ``pattern`` for ``re.match`` on a '/'-separated relative path: the
    path, or one of its folders, matches the pattern. Raises ``GlobError``."""
    if os.sep != "/":
        pattern = pattern.replace(os.sep, "/")
    names = itertools.count()
    components: List[Optional[str]] = []  # None: a '**' component
    for part in pattern.split("/"):
        if not part:
            continue  # a leading, trailing or doubled '/'
        if part == "**":
            if not components or components[-1] is not None:
                components.append(None)
        else:
            components.append(_component(part, names))
    if not components:
        return _NEVER
    segments: List[List[str]] = [[]]  # the runs of components between '**'
    for comp in components:
        if comp is None:
            segments.append([])
        else:
            segments[-1].append(comp)
    if len(segments) == 1:
        return "(?s)" + "/".join(segments[0]) + r"(?:/.*)?\Z"
    out = "(?s)" + ("/".join(segments[0]) + "/" if segments[0] else "")
    for middle in segments[1:-1]:  # '**/m/': the earliest place m is found, atomic
        name = f"g{next(names)}"
        out += f"(?=(?P<{name}>(?:[^/]*/)*?{'/'.join(middle)}/))(?P={name})"
    last = segments[-1]
    if not last:  # 'a/**': one or more components under a
        return out + r".+\Z"
    return out + "(?:.*/)?" + "/".join(last) + r"(?:/.*)?\Z"


@lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> Pattern[str]:
    """``glob_regex`` compiled (remembered: the same patterns are asked about every file)."""
    return re.compile(glob_regex(pattern))


def glob_problem(pattern: str) -> Optional[str]:
    """Why ``pattern`` is not a valid glob, or None."""
    try:
        compile_glob(pattern)
    except GlobError as exc:
        return str(exc)
    return None
