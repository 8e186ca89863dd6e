"""What a step is: the ordered nodes of one step of a scene, built once by `build_program`.

This is the one place where the order of a step is written. A step is:

    controller      the scene's controller kernels at the step index (they write what the
                    energies read, e.g. a robot's actuations)            [with a controller]
    neighbors       the neighbour list's rebuild check             [with a neighbour list]
    forces -> G     U and G = dU/dx at x_k; `carried` without a controller: the state
                    after the previous step already holds them (F = -G)
    step kernels    the scene's own step kernels, reading G        [scene.step_kernels]
    first updates   the integrator's or thermostat's first launches (kick and drift with
                    the walls, BAOA, a chain half-step) or the walls after step kernels
    neighbors                                                      [with a neighbour list]
    forces -> G2    U and G2 = dU/dx at x_(k+1): the state's F, and what the second stage
                    reads (`read_in_step` False where no second stage follows)
    second updates  velocity Verlet's second kick, a thermostat's updates
    watch           the NaN watch: a flag set where x, v or U is not finite

`run` binds both gradient slots to x.grad (stepper/fieldstep.py); `grad` gives each its own
field so that G is an input with an adjoint (adjoint/trajectory.py, reverse_step.py,
tangent.py walk the same nodes). Each update's scalar inputs (dt, a thermostat's
temperature, ...) are named by KEY in ``Update.keys`` (plan.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from simrun.scene.schema import Scene
from simrun.stepper.plan import Update, build_plan

CONTROLLER, NEIGHBORS, FORCES = "controller", "neighbors", "forces"
STEP_KERNELS, UPDATES, WATCH = "step kernels", "updates", "watch"
AT_START, AFTER = "G", "G2"  # the gradient slots: dU/dx at x_k, at x_(k+1)


@dataclass(frozen=True)
class Node:
    """One node of a step. `launches`: BoundKernels (controller, step kernels) or Updates;
    `stage`: 0 or 1 for launches that read a gradient slot (`slot`), which a forces node
    writes instead."""

    kind: str
    launches: tuple = ()
    slot: str | None = None
    stage: int | None = None
    carried: bool = False  # forces the state already holds (F at x_k, no controller)
    read_in_step: bool = True  # forces a later node of the step reads
    terms: tuple[str, ...] = ()  # forces: the energy terms whose sum is U

    @property
    def name(self) -> str:
        if self.kind == FORCES:
            return f"forces -> {self.slot}"
        if self.kind == UPDATES:
            return ("first", "second")[self.stage] + " updates"
        return self.kind


@dataclass(frozen=True)
class StepProgram:
    """The ordered nodes of a scene's step (see the module docstring)."""

    nodes: tuple[Node, ...]
    scratch: tuple = ()  # per-step scalars the updates pass on, which a gradient differentiates

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def stage(self, index: int) -> list:
        """The launches of stage `index` (step kernels, then updates), in order."""
        return [launch for node in self.nodes if node.stage == index
                for launch in node.launches]

    @property
    def updates(self) -> list[Update]:
        return [u for node in self.nodes if node.kind == UPDATES for u in node.launches]

    def walk(self, part: Callable[[Node], list | None]) -> list | None:
        """The launches of a step: `part(node)` for each node in order, concatenated;
        None where a part is None (a node the caller cannot make this way)."""
        out = []
        for node in self.nodes:
            launches = part(node)
            if launches is None:
                return None
            out += launches
        return out

    def describe(self) -> str:
        """The nodes, one a line, with their launches and named scalar inputs."""
        lines = []
        for i, node in enumerate(self.nodes, 1):
            line = f"{i}. {node.name}"
            if node.kind == FORCES:
                notes = [n for n, on in (("carried", node.carried),
                                         ("not read in the step", not node.read_in_step)) if on]
                line += f" ({', '.join(notes)})" if notes else ""
                line += f": U = {' + '.join(node.terms) or '0'}, {node.slot} = dU/dx"
            if node.stage is not None:
                line += f" [reads {node.slot}]"
            if node.launches:
                line += ": " + ", ".join(_describe_launch(x) for x in node.launches)
            lines.append(line)
        return "\n".join(lines)


def _describe_launch(launch) -> str:
    name = getattr(getattr(launch, "kernel", None), "__name__", None) or \
        getattr(launch.kernel, "name", type(launch.kernel).__name__)
    keys = getattr(launch, "keys", None)
    if not keys:
        return name
    inputs = ", ".join(f"{arg}={key}" + (f"*{factor:g}" if factor != 1.0 else "")
                       for arg, (key, factor) in keys.items())
    return f"{name}({inputs})"


def build_program(scene: Scene, system, box, differentiated: frozenset[str] | None = None
                  ) -> StepProgram:
    """The step of `scene` on `system`'s fields; `box` is the walls' bounds field,
    `differentiated` the KEYs a gradient is taken with respect to (None: `run`'s step)."""
    plan = build_plan(scene, system, box, differentiated)
    controlled = bool(system.controller)
    listed = [Node(NEIGHBORS)] if system.neighbor_list is not None else []
    terms = tuple(b.ref.name for b in system.energy)
    nodes = [Node(CONTROLLER, tuple(system.controller)), *listed] if controlled else []
    nodes.append(Node(FORCES, slot=AT_START, carried=not controlled, terms=terms))
    if system.step_kernels:
        nodes.append(Node(STEP_KERNELS, tuple(system.step_kernels), AT_START, 0))
    if plan.first:
        nodes.append(Node(UPDATES, tuple(plan.first), AT_START, 0))
    nodes += [*listed, Node(FORCES, slot=AFTER, read_in_step=bool(plan.second), terms=terms)]
    if plan.second:
        nodes.append(Node(UPDATES, tuple(plan.second), AFTER, 1))
    nodes.append(Node(WATCH))
    return StepProgram(tuple(nodes), tuple(plan.scratch))
