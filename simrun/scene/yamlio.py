"""YAML text -> node tree for scene files and ``--set`` values; every failure is a SceneError.

PyYAML's own errors are not all ``MarkedYAMLError``s: a control character or NUL is a
``ReaderError`` (a position, no line), and deep nesting exhausts the composer's recursion.
Nesting is bounded while composing (a scene needs a handful of levels), so neither reaches
the user as a traceback.
"""

from __future__ import annotations

import yaml
from yaml.nodes import Node

from simrun.scene.errors import SceneError, error_at, shorten

MAX_DEPTH = 64  # nesting levels of lists and mappings; the deepest shipped scene uses 4


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing documents nested deeper than ``MAX_DEPTH``."""

    depth = 0

    def compose_node(self, parent: Node | None, index: object) -> Node:  # type: ignore[override]
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise error_at(self.peek_event().start_mark, f"the YAML is nested more than "
                               f"{MAX_DEPTH} levels deep here", "A scene needs only a few "
                               "levels of lists and mappings: check for unclosed or repeated "
                               "brackets")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _line_col(text: str, position: int) -> tuple[int, int]:
    before = text[:position]
    return before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1


def read_node(text: str, name: str) -> Node | None:
    """Compose ``text`` (named ``name`` in marks) into a node tree; None for an empty one.

    Raises SceneError naming ``name:line:col`` for syntax errors, characters YAML does not
    allow and nesting deeper than ``MAX_DEPTH``."""
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        loader.name = name
        return loader.get_single_node()
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        what = (f"character #x{exc.character:04x}" if isinstance(exc.character, int)
                else f"byte {exc.character!r}")
        mark = yaml.error.Mark(name, exc.position, line - 1, col - 1, None, None)
        raise error_at(mark, f"{what} is not allowed in YAML (control characters and NUL "
                       "are not text)", "Remove it: a scene is plain UTF-8 text") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise error_at(mark, f"YAML syntax error: {shorten(exc.problem or exc.context)}",
                       "Check indentation, colons and brackets around this place") from None
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML raises the two kinds above
        raise SceneError(f"{name}: the YAML cannot be read ({shorten(str(exc))}).") from None
    finally:
        if loader is not None:
            loader.dispose()
