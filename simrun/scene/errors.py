"""The one error type of scene loading, and helpers that place it in the YAML source."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from yaml.error import Mark
from yaml.nodes import Node


class SceneError(Exception):
    """A problem with a scene (or its kernels) that the user can fix.

    ``str(error)`` is one paragraph: where (file:line:col), what is wrong, how to fix it.
    The CLI prints it as is and exits with status 2.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def where(mark: Mark | Node | None) -> str:
    """``file:line:col`` (1-based) of a YAML mark or node; overrides name their ``--set``."""
    if isinstance(mark, Node):
        mark = mark.start_mark
    if mark is None:
        return "<scene>"
    if mark.name.startswith("--set "):
        return f"{mark.name} (command line)"
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def error_at(node: Node | Mark | None, what: str, fix: str = "") -> SceneError:
    """Build a SceneError for ``node``: ``"file:l:c: what. fix"`` as one paragraph."""
    text = f"{where(node)}: {_sentence(what)}"
    if fix:
        text += " " + _sentence(fix)
    return SceneError(text)


MAX_SHOWN = 80  # characters of a value a message may echo back


PATH_SHOWN = 240  # a path is where an error is: 80 would cut deep folders, 240 few


def shorten_path(path: object) -> str:
    """A path in a message: whole, unless absurdly long (a user's folders can pass 80)."""
    return shorten(str(path), PATH_SHOWN)


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to about ``limit`` characters, saying how long it was: an error message
    must not echo a 100 KB value back at the user. Control characters are escaped."""
    if len(text) > limit:
        text = f"{text[:limit - 24]}... ({len(text):,} characters)"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "?", "!")) else text + "."


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"Did you mean 'x'?"`` for the closest choice, or ``""`` when nothing is close."""
    if len(word) > MAX_SHOWN:  # difflib is quadratic; nothing that long is a typo
        return ""
    choices = list(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close and len(word) >= 3:
        close = [c for c in choices if word.lower() in c.lower()][:1]
    return f"Did you mean '{close[0]}'?" if close else ""


def choices_text(choices: Iterable[str]) -> str:
    """``'a', 'b' or 'c'`` for messages."""
    items = [f"'{c}'" for c in choices]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]
