"""``--set key.path=value`` overrides, applied to the composed YAML tree before validation.

The value is parsed as YAML (so ``dt=1e-4``, ``outputs.forces=true``, ``initial.low=[0,0]``
all work) and keeps a mark naming the override, so a bad value is reported as coming from
the command line rather than from the file.
"""

from __future__ import annotations

from collections.abc import Iterable

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from simrun.scene.errors import SceneError, error_at, shorten
from simrun.scene.nodes import describe
from simrun.scene.yamlio import read_node


def parse_override(text: str) -> tuple[list[str], Node]:
    """Split ``a.b.c=value`` into its key path and the value as a YAML node."""
    key, sep, value = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise SceneError(f"--set '{shorten(text)}' (command line): an override must look like "
                         "key.path=value, e.g. --set dt=1e-4 or --set energy.0.params.softening=0.01.")
    name = f"--set {shorten(text)}"
    node = read_node(value, name)
    if node is None:
        mark = yaml.error.Mark(name, 0, 0, 0, None, None)
        node = ScalarNode("tag:yaml.org,2002:null", "", mark, mark)
    return [p.strip() for p in parts], node


def _child(node: Node, part: str, text: str, create: bool) -> Node | None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == part:
                return value
        if not create:
            return None
        mark = yaml.error.Mark(f"--set {text}", 0, 0, 0, None, None)  # text: shortened
        child = MappingNode("tag:yaml.org,2002:map", [], mark, mark)
        node.value.append((ScalarNode("tag:yaml.org,2002:str", part, mark, mark), child))
        return child
    if isinstance(node, SequenceNode):
        if not (part.lstrip("-").isdigit() and len(part) < 20) or \
                not -len(node.value) <= int(part) < len(node.value):
            raise error_at(node, f"--set {text!r}: '{shorten(part)}' is not an index of this "
                           f"list of {len(node.value)} entries", "Use a list index such as 0")
        return node.value[int(part)]
    raise error_at(node, f"--set {text!r}: cannot go into '{shorten(part)}' because this value is "
                   f"{describe(node)}, not a mapping or list")


def _assign(parent: Node, part: str, value: Node, text: str) -> None:
    if isinstance(parent, SequenceNode):
        _child(parent, part, text, create=False)  # validates the index
        parent.value[int(part)] = value
        return
    if not isinstance(parent, MappingNode):
        raise error_at(parent, f"--set {text!r}: cannot set '{shorten(part)}' inside "
                       f"{describe(parent)}")
    for i, (key, _old) in enumerate(parent.value):
        if isinstance(key, ScalarNode) and key.value == part:
            parent.value[i] = (key, value)
            return
    parent.value.append((ScalarNode("tag:yaml.org,2002:str", part, value.start_mark,
                                    value.end_mark), value))


SHORTHAND_SECTIONS = ("integrator", "boundary")


def _expand_shorthand(parent: Node, node: Node, name: str) -> Node:
    """``integrator: verlet`` is short for ``integrator: {type: verlet}``; expand it in place
    so that ``--set integrator.damping=0.1`` can go inside."""
    if name not in SHORTHAND_SECTIONS or not isinstance(parent, MappingNode) or \
            not (isinstance(node, ScalarNode) and node.tag.endswith(":str")):
        return node
    key = ScalarNode("tag:yaml.org,2002:str", "type", node.start_mark, node.end_mark)
    mapping = MappingNode("tag:yaml.org,2002:map", [(key, node)], node.start_mark, node.end_mark)
    for i, (k, v) in enumerate(parent.value):
        if v is node:
            parent.value[i] = (k, mapping)
    return mapping


def apply_overrides(root: Node, overrides: Iterable[str]) -> Node:
    """Apply each override in order to ``root`` (mutated and returned)."""
    for full in overrides:
        parts, value = parse_override(full)
        text = shorten(full)  # for messages: a value may be huge
        node = root
        for part in parts[:-1]:
            parent, node = node, _child(node, part, text, create=True)
            node = _expand_shorthand(parent, node, part)
        _assign(node, parts[-1], value, text)
    return root
