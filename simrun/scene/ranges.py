"""Numbers a scene hands its kernels, checked against the scene's precision, and sizes a
division meets, checked against underflow: up front, at the scene's key, so that
``precision: f32`` with ``dt: 1e39`` or a box of side 1e-300 is exit 2 at ``check``, not an
OverflowError or ZeroDivisionError in the middle of a run.

Scene ``params`` are checked where their kernel's argument types are known (the stepper's
binding); everything else that reaches a kernel is checked here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from yaml.nodes import MappingNode, Node, SequenceNode

from simrun.scene import limits
from simrun.scene.errors import error_at
from simrun.scene.schema import Scene

Value = tuple[str, float]  # (scene key, value)


def node_at(root: Node, key: str) -> Node:
    """The deepest node on ``key``'s path (``a.b.0``): the value itself where the scene
    wrote it out, else the scalar or section it was broadcast or defaulted from."""
    node = root
    for part in key.split("."):
        if isinstance(node, MappingNode):
            found = [v for k, v in node.value if getattr(k, "value", None) == part]
            if not found:
                return node
            node = found[0]
        elif isinstance(node, SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
        else:
            return node
    return node


def _vector(key: str, values) -> Iterator[Value]:
    return ((f"{key}.{i}", float(v)) for i, v in enumerate(values))


def kernel_numbers(scene: Scene) -> Iterator[Value]:
    """Every scene number (other than params) that reaches a kernel argument or field."""
    yield "dt", scene.dt
    masses = scene.particles.masses
    if len(set(masses)) == 1:
        yield "particles.mass", masses[0]
    else:
        yield from _vector("particles.mass", masses)
    init = scene.initial
    yield from _vector("initial.velocity", init.velocity)
    yield "initial.temperature", init.temperature
    for name, value in init.options.items():
        if isinstance(value, list) and name != "shape":
            yield from _vector(f"initial.{name}", value)
        elif isinstance(value, float) and name != "angle":
            yield f"initial.{name}", value
    if scene.boundary.type != "none":
        yield from _vector("boundary.low", scene.boundary.low or ())
        yield from _vector("boundary.high", scene.boundary.high or ())
    if scene.neighbors is not None:
        yield "neighbors.cutoff", scene.neighbors.cutoff
        yield "neighbors.skin", scene.neighbors.skin
    for name in ("damping", "temperature", "friction", "tau"):
        value = getattr(scene.integrator, name)
        if value is not None:
            yield f"integrator.{name}", value


def float_range(precision: str) -> tuple[float, float]:
    """(smallest normal, largest finite) magnitude of the scene's float type."""
    info = np.finfo(np.float32 if precision == "f32" else np.float64)
    return float(info.tiny), float(info.max)


def _fits(root: Node, precision: str, key: str, value: float) -> None:
    largest = float_range(precision)[1]
    if abs(value) > largest:
        what = f"beyond the largest number of the scene's precision {precision} ({largest:.4g})"
    elif value != 0 and float(np.float32(value) if precision == "f32" else value) == 0:
        what = f"which the scene's precision {precision} rounds to 0"
    else:
        return
    raise error_at(node_at(root, key), f"'{key}' is {value:g}, {what}",
                   "Use a value in range, or 'precision: f64'" if precision == "f32"
                   else "Use a value in range")


def _size(root: Node, precision: str, key: str, value: float, what: str) -> None:
    """A size something is divided by: a normal number of the scene's precision."""
    tiny, largest = float_range(precision)
    if not tiny <= value <= largest:
        raise error_at(node_at(root, key), f"{what} is {value:g}, outside the range "
                       f"{precision} holds for a size ({tiny:.3g} to {largest:.3g}), which "
                       "kernels divide by or square",
                       "Use a size in range (and the units that make it one)")


def check_boxes(scene: Scene, root: Node) -> None:
    """Box sides, the volume (the pressure divides by it) and the neighbour grid a periodic
    box makes: sized from the scene, so an absurd box is bad input, not a machine limit."""
    b, p = scene.boundary, scene.precision
    if b.type == "none":
        return
    low, high = np.asarray(b.low, float), np.asarray(b.high, float)
    with np.errstate(over="ignore"):
        sides = high - low
    for i, side in enumerate(sides):
        _size(root, p, f"boundary.high.{i}", float(side), f"the box's side {i} (high - low)")
    volume = math.prod(float(s) for s in sides)
    if not float_range("f64")[0] <= volume <= float_range(p)[1]:
        raise error_at(node_at(root, "boundary.high"), f"the box's volume (the product of "
                       f"its sides, which the pressure divides by) is {volume:g} in {p}",
                       "Use a box whose sides multiply to a normal number")
    if b.type == "periodic" and scene.neighbors is not None:
        reach = scene.neighbors.cutoff + scene.neighbors.skin
        cells = math.prod(max(1.0, math.floor(float(s) / reach)) for s in sides)
        node = node_at(root, "boundary.high")
        if cells >= 2**31 - 1:
            raise error_at(node, f"the periodic box makes {cells:.3g} cells of side "
                           f"cutoff + skin = {reach:g} for the neighbour list, more than its "
                           "i32 index holds (2,147,483,647)", "Use a smaller box")
        limits.check_memory(node, int(cells) * 8, f"the neighbour grid of this box "
                            f"({int(cells):,} cells)", "Use a smaller box")


def check_ranges(scene: Scene, root: Node) -> None:
    """Every kernel-bound number fits the precision; every divisor is a normal size."""
    p = scene.precision
    for key, value in kernel_numbers(scene):
        _fits(root, p, key, value)
    masses = scene.particles.masses
    if len(set(masses)) == 1:
        _size(root, p, "particles.mass", masses[0], "'particles.mass'")
    else:  # each distinct mass once, named at its first particle (was a set per particle:
        first: dict[float, int] = {}  # 11 s for liquid.yaml's 28,146)
        for i, mass in enumerate(masses):
            first.setdefault(mass, i)
        for mass, i in first.items():
            _size(root, p, f"particles.mass.{i}", mass, f"'particles.mass.{i}'")
    if scene.integrator.tau is not None:
        _size(root, p, "integrator.tau", scene.integrator.tau, "'integrator.tau'")
    if scene.neighbors is not None:  # the neighbour search compares squared distances
        reach = scene.neighbors.cutoff + scene.neighbors.skin
        _size(root, p, "neighbors.cutoff", reach * reach, f"(cutoff + skin)^2 = ({reach:g})^2")
    check_boxes(scene, root)
    _check_extent(scene, root)


def _check_extent(scene: Scene, root: Node) -> None:
    """The initial positions stay finite in the precision: a random box's side, a lattice's
    far corner, a chain's length."""
    opts, largest = scene.initial.options, float_range(scene.precision)[1]
    kind = scene.initial.type
    with np.errstate(over="ignore"):
        if kind == "random":
            far = np.abs(np.asarray(opts["high"]) - np.asarray(opts["low"]))
            key = "initial.high"
        elif kind == "lattice":
            span = np.asarray(opts["shape"], float) * np.asarray(opts["spacing"])
            far = np.abs(np.asarray(opts["origin"])) + span + opts["jitter"]
            key = "initial.spacing"
        elif kind == "random_walk":
            far = np.abs(np.asarray(opts["start"])) + scene.particles.count * opts["bond_length"]
            key = "initial.bond_length"
        else:
            return
    if not np.all(far <= largest):
        raise error_at(node_at(root, key), f"the initial positions reach {float(far.max()):g}, "
                       f"beyond the largest {scene.precision} ({largest:.4g})",
                       "Use a smaller box, spacing or bond length")
