"""Typed reading of composed YAML nodes; every failure names the node's file:line:col."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from simrun.scene.errors import choices_text, did_you_mean, error_at, shorten

_TYPE_NAMES = {
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:str": "a string",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}


def describe(node: Node) -> str:
    """A short human description of what a node holds, for 'got ...' messages."""
    kind = _TYPE_NAMES.get(node.tag, node.tag)
    if isinstance(node, ScalarNode) and node.tag.endswith(":str") and node.style is None:
        try:
            float(node.value)
            kind = "a number"
        except ValueError:
            pass
    if isinstance(node, ScalarNode):
        return f"{kind} ('{shorten(node.value)}')"
    return kind


MAX_DIGITS = 100  # longer integers are refused before Python converts them (4300 at most)


def scalar(node: Node) -> Any:
    """The Python value of a scalar node (SafeLoader rules)."""
    if node.tag == "tag:yaml.org,2002:int" and len(node.value) > MAX_DIGITS:
        raise error_at(node, f"this integer has {len(node.value):,} characters, more than any "
                       "scene value needs",
                       f"Write a number of at most {MAX_DIGITS} digits (or e.g. 1e30)")
    try:
        return SafeConstructor().construct_object(node, deep=True)
    except ConstructorError as exc:
        raise error_at(node, f"cannot read this value: {shorten(str(exc.problem))}") from None
    except (ValueError, OverflowError) as exc:  # e.g. a timestamp such as 2024-13-45
        raise error_at(node, f"cannot read this value ({shorten(str(exc))})",
                       "Quote it if it is text") from None


def plain(node: Node) -> Any:
    """The whole subtree as plain Python data (for params and the resolved scene copy)."""
    if isinstance(node, MappingNode):
        return {scalar(k): plain(v) for k, v in node.value}
    if isinstance(node, SequenceNode):
        return [plain(v) for v in node.value]
    return scalar(node)


def as_str(node: Node, name: str) -> str:
    if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
        raise error_at(node, f"'{name}' must be a string, got {describe(node)}",
                       "Write it as text, quoted if it looks like a number")
    return node.value


def as_bool(node: Node, name: str) -> bool:
    value = scalar(node) if isinstance(node, ScalarNode) else None
    if not isinstance(value, bool):
        raise error_at(node, f"'{name}' must be true or false, got {describe(node)}")
    return value


INT_MAX = 2**63 - 1  # the largest 64-bit integer: what NumPy, kernels and clocks hold


def as_int(node: Node, name: str, minimum: int | None = None, maximum: int = INT_MAX,
           why: str = "the largest 64-bit integer") -> int:
    """An integer in [minimum, maximum]: every integer of a scene has an upper bound (by
    default one a 64-bit integer holds), so none reaches NumPy or a kernel argument that
    cannot take it; ``why`` says where the bound comes from."""
    value = scalar(node) if isinstance(node, ScalarNode) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise error_at(node, f"'{name}' must be an integer, got {describe(node)}",
                       "Write a whole number such as 100")
    if minimum is not None and value < minimum:
        raise error_at(node, f"'{name}' is {shorten(str(value))} but must be at least {minimum}",
                       f"Use a value >= {minimum}")
    if value > maximum:
        raise error_at(node, f"'{name}' is {shorten(str(value))} but must be at most "
                       f"{maximum:,} ({why})", f"Use a value <= {maximum}")
    return value


def as_float(node: Node, name: str, *, positive: bool = False,
             nonnegative: bool = False) -> float:
    """A finite number; plain scalars like ``1e-5`` (a string to YAML 1.1) are accepted."""
    value = scalar(node) if isinstance(node, ScalarNode) else None
    if isinstance(value, str) and node.style is None:
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error_at(node, f"'{name}' must be a number, got {describe(node)}",
                       "Write a number such as 0.5 or 1e-5")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond 1.8e308
        value = math.inf
    if not math.isfinite(value):
        raise error_at(node, f"'{name}' must be finite, got {value}")
    if positive and value <= 0:
        raise error_at(node, f"'{name}' is {value:g} but must be greater than 0",
                       "Use a positive value")
    if nonnegative and value < 0:
        raise error_at(node, f"'{name}' is {value:g} but must not be negative",
                       "Use 0 or a positive value")
    return value


def as_choice(node: Node, name: str, choices: Sequence[str]) -> str:
    value = scalar(node) if isinstance(node, ScalarNode) else None
    if not isinstance(value, str) or value not in choices:
        shown = f"'{shorten(value)}'" if isinstance(value, str) else describe(node)
        hint = did_you_mean(value, choices) if isinstance(value, str) else ""
        raise error_at(node, f"'{name}' is {shown}, which is not one of {choices_text(choices)}",
                       hint or f"Use one of {choices_text(choices)}")
    return value


def as_seq(node: Node, name: str, length: int | None = None) -> list[Node]:
    if not isinstance(node, SequenceNode):
        raise error_at(node, f"'{name}' must be a list, got {describe(node)}",
                       "Write it as [a, b, ...] or as '- item' lines")
    if length is not None and len(node.value) != length:
        raise error_at(node, f"'{name}' has {len(node.value)} "
                       f"entr{'y' if len(node.value) == 1 else 'ies'} but needs {length}",
                       f"Give exactly {length} values")
    return list(node.value)


def as_vector(node: Node, name: str, length: int) -> tuple[float, ...]:
    """A list of ``length`` numbers; a single number is broadcast."""
    if isinstance(node, ScalarNode):
        return (as_float(node, name),) * length
    items = as_seq(node, name, length)
    return tuple(as_float(item, f"{name}[{i}]") for i, item in enumerate(items))


def as_index_rows(node: Node, name: str, arity: int, count: int) -> list[tuple[int, ...]]:
    """Rows of ``arity`` particle indices, each in ``[0, count)``."""
    rows = []
    for r, row in enumerate(as_seq(node, name)):
        items = as_seq(row, f"{name}[{r}]", arity)
        idx = tuple(as_int(item, f"{name}[{r}]", 0) for item in items)
        for item, i in zip(items, idx):
            if i >= count:
                raise error_at(item, f"particle index {shorten(str(i))} in '{name}' is out of "
                               f"range: the scene has {count} particles (indices 0..{count - 1})",
                               "Fix the index or raise particles.count")
        rows.append(idx)
    return rows


class MapReader:
    """Reads one YAML mapping; ``done()`` rejects keys nobody asked for (with a suggestion)."""

    def __init__(self, node: Node, section: str) -> None:
        if not isinstance(node, MappingNode):
            raise error_at(node, f"'{section}' must be a mapping of 'key: value' lines, "
                           f"got {describe(node)}")
        self.node = node
        self.section = section
        self.items: dict[str, tuple[Node, Node]] = {}
        for key, value in node.value:
            name = scalar(key) if isinstance(key, ScalarNode) else None
            if not isinstance(name, str):
                raise error_at(key, f"keys in '{section}' must be names, got {describe(key)}")
            if name in self.items:
                raise error_at(key, f"key '{shorten(name)}' appears twice in '{section}'",
                               "Keep only one of them")
            self.items[name] = (key, value)
        self.seen: set[str] = set()

    def get(self, key: str) -> Node | None:
        self.seen.add(key)
        item = self.items.get(key)
        return None if item is None else item[1]

    def require(self, key: str, fix: str = "") -> Node:
        node = self.get(key)
        if node is None:
            raise error_at(self.node, f"'{self.section}' is missing the required key '{key}'",
                           fix or f"Add '{key}: ...' to '{self.section}'")
        return node

    def key_node(self, key: str) -> Node:
        return self.items[key][0]

    def done(self, allowed: Iterable[str] | None = None, context: str = "") -> None:
        """Fail on the first key that was not read (or is not in ``allowed``)."""
        allowed = sorted(self.seen if allowed is None else set(allowed))
        for name, (key, _value) in self.items.items():
            if name not in allowed:
                hint = did_you_mean(name, allowed)
                known = "Known keys here: " + ", ".join(allowed)
                raise error_at(key, f"unknown key '{shorten(name)}' in '{self.section}'{context}",
                               f"{hint} {known}" if hint else known)
