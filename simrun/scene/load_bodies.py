"""The ``bodies:`` section: 2-D rigid boxes and the springs between them.

    bodies:
      boxes:                     # the particles are the boxes' centres
        - {position: [0.15, 0.25], halfsize: [0.1, 0.03], angle: 0.0}
      springs:                   # between points fixed on two boxes (offsets in box frames)
        - {a: 0, b: 1, offset_a: [0.08, 0.02], offset_b: [0, -0.08], length: 0.22,
           stiffness: 50, actuation: 0.03}
        - {a: 0, b: 1, offset_a: [-0.08, 0], offset_b: [0, 0.03], joint: true, stiffness: 50}

A box's mass is its area (density 1). A spring's rest length is `length (1 + actuation act)`
with `act` the controller's output in [-1, 1]; a `joint` pulls its two points together
(rest length 0) and damps their relative velocity. The dynamics are kernels
(``simrun.kernels.rigid_body``); this module only reads and checks the YAML, every mistake
at its file:line:col.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from yaml.nodes import Node, SequenceNode

from simrun.scene import load_state
from simrun.scene.bodies import DEFAULT_ACTUATION, Bodies, Box, Spring  # noqa: F401
from simrun.scene.errors import error_at
from simrun.scene.nodes import MapReader, as_bool, as_float, as_int, as_seq, as_vector
from simrun.scene.schema import Initial, Particles

BOX_KEYS = ("position", "halfsize", "angle")
SPRING_KEYS = ("a", "b", "offset_a", "offset_b", "length", "stiffness", "actuation", "joint")


def _box(node: Node, i: int) -> Box:
    name = f"bodies.boxes[{i}]"
    r = MapReader(node, name)
    r.done(BOX_KEYS)
    position = as_vector(r.require("position", "Write position: [x, y] (the centre)"),
                         f"{name}.position", 2)
    half_node = r.require("halfsize", "Write halfsize: [hx, hy] (half the width and height)")
    half = as_vector(half_node, f"{name}.halfsize", 2)
    if min(half) <= 0:
        raise error_at(half_node, f"'{name}.halfsize' is {list(half)}, but a box needs a "
                       "positive half width and height", "Give two numbers > 0")
    angle = r.get("angle")
    return Box(position, half, as_float(angle, f"{name}.angle") if angle else 0.0)


def _spring(node: Node, i: int, n_boxes: int) -> Spring:
    name = f"bodies.springs[{i}]"
    r = MapReader(node, name)
    r.done(SPRING_KEYS)
    ends = []
    for end in ("a", "b"):
        end_node = r.require(end, f"Write {end}: <box index> (0 to {n_boxes - 1})")
        index = as_int(end_node, f"{name}.{end}", 0)
        if index >= n_boxes:
            raise error_at(end_node, f"'{name}.{end}' is box {index}, but there are "
                           f"{n_boxes} boxes (indices 0 to {n_boxes - 1})",
                           "Fix the index or add the box to 'bodies.boxes'")
        ends.append(index)
    if ends[0] == ends[1]:
        raise error_at(r.get("b"), f"'{name}' joins box {ends[0]} to itself, so it can "
                       "exert no force", "Give two different boxes as a and b")
    offsets = [as_vector(r.require(k, f"Write {k}: [dx, dy] (in box {e}'s frame)"),
                         f"{name}.{k}", 2) for k, e in (("offset_a", ends[0]),
                                                         ("offset_b", ends[1]))]
    stiffness = as_float(r.require("stiffness", "Write stiffness: 50"), f"{name}.stiffness",
                         nonnegative=True)
    joint_node, length_node = r.get("joint"), r.get("length")
    joint = as_bool(joint_node, f"{name}.joint") if joint_node else False
    if joint and length_node is not None:
        raise error_at(length_node, f"'{name}' is a joint, which has no rest length",
                       "Remove 'length', or 'joint: true' for a spring")
    if not joint and length_node is None:
        raise error_at(node, f"'{name}' has no rest length", "Add 'length: 0.1', or "
                       "'joint: true' for a joint that pins the two points together")
    length = -1.0 if joint else as_float(length_node, f"{name}.length", positive=True)
    act_node = r.get("actuation")
    actuation = as_float(act_node, f"{name}.actuation") if act_node else DEFAULT_ACTUATION
    if not -1 < actuation < 1:
        raise error_at(act_node, f"'{name}.actuation' is {actuation:g}, but the rest length "
                       "length (1 + actuation act), act in [-1, 1], must stay positive",
                       f"Give a fraction between -1 and 1 (default {DEFAULT_ACTUATION})")
    return Spring(ends[0], ends[1], offsets[0], offsets[1], stiffness, length, actuation, joint)


def _read(node: Node) -> Bodies:
    r = MapReader(node, "bodies")
    r.done(("boxes", "springs"))
    box_nodes = as_seq(r.require("boxes", "Add boxes: [{position: [0.5, 0.3], halfsize: "
                                 "[0.1, 0.03]}]"), "bodies.boxes")
    if not box_nodes:
        raise error_at(r.get("boxes"), "'bodies.boxes' is empty", "Give at least one box")
    boxes = tuple(_box(b, i) for i, b in enumerate(box_nodes))
    spring_node = r.get("springs")
    springs = tuple(_spring(s, i, len(boxes)) for i, s in
                    enumerate(as_seq(spring_node, "bodies.springs") if spring_node else ()))
    return Bodies(boxes, springs)


def bodies(node: Node | None, scene: MapReader, precision: str, scene_dir: Path
           ) -> tuple[Bodies, Particles, Initial] | None:
    """The ``bodies:`` section, checked, with the particles and initial state it gives (the
    boxes' centres, masses their areas, at rest); None where the scene has none. Beside it
    a scene may set ``particles: {mass}`` and an ``initial`` state: without a ``type`` only
    the velocities (the boxes start where ``bodies.boxes`` puts them), with one (a file, as
    a trained ``state.x0`` writes) the centres too."""
    if node is None:
        return None
    found = _read(node)
    _check_sizes(node, found, precision)
    masses = _masses(scene.get("particles"), len(found.boxes)) or found.masses(precision)
    particles = Particles(len(found.boxes), 2, masses)
    init_node = scene.get("initial")
    if init_node is None:
        return found, particles, Initial("bodies", {}, (0.0, 0.0), 0.0)
    typed = MapReader(init_node, "initial")
    if typed.get("type") is None:  # velocities only: the centres are where the boxes are
        typed.done(tuple(k for k in load_state.COMMON_KEYS if k != "type"),
                   " (beside 'bodies' an 'initial' without a 'type' sets velocities only)")
    initial = load_state.initial(init_node, particles, scene_dir)
    if typed.get("type") is None:
        initial = replace(initial, type="bodies", options={})  # positions: scene.bodies
    return found, particles, initial


def _check_sizes(node: Node, found: Bodies, precision: str) -> None:
    """Each box's mass (area) and moment of inertia are normal numbers of the precision, so
    their inverses, which the kernels use, are finite."""
    fp = np.float32 if precision == "f32" else np.float64
    tiny, huge = np.finfo(fp).tiny, np.finfo(fp).max
    for i, (box, mass) in enumerate(zip(found.boxes, found.masses(precision))):
        hx, hy = (float(h) for h in box.halfsize)
        inertia = mass * (hx * hx + hy * hy) / 3
        if not all(tiny <= q <= huge for q in (mass, inertia)):
            at = MapReader(node, "bodies").get("boxes").value[i]
            raise error_at(at, f"box {i}'s mass {mass:.3g} or moment of inertia "
                           f"{inertia:.3g} is outside what {precision} holds ({tiny:.3g} to "
                           f"{huge:.3g})", "Give half sizes of ordinary magnitude (or "
                           "'precision: f64')")


def _masses(node: Node | None, count: int) -> tuple[float, ...] | None:
    """``particles: {mass: ...}`` beside ``bodies`` (what a trained ``particles.mass``
    writes): one mass for every box or one each; None without it (the boxes' areas)."""
    if node is None:
        return None
    r = MapReader(node, "particles")
    r.done(("mass",), " (with 'bodies' the boxes give the count and dim; only 'mass' may be "
           "set here)")
    mass = r.require("mass", "Write particles: {mass: 1.0}, or remove 'particles'")
    if isinstance(mass, SequenceNode):
        return tuple(as_float(m, f"particles.mass[{i}]", positive=True)
                     for i, m in enumerate(as_seq(mass, "particles.mass", count)))
    return (as_float(mass, "particles.mass", positive=True),) * count
