"""``simrun check``: build a scene's system and compile (and run once) all of its kernels."""

from __future__ import annotations

import time
from dataclasses import dataclass

from simrun.scene import Scene
from simrun.stepper import thermostats
from simrun.stepper.integrators import State
from simrun.stepper.run import check_finite, check_guards, prepare


@dataclass
class CheckReport:
    energy_kernels: list[str]
    step_kernels: list[str]
    extra_fields: list[str]
    potential: float  # U at step 0 as run records it (before the controller's first action)
    compile_s: float
    controller: list[str]
    potential_controlled: float | None = None  # U once the controller acted at step 0


def check_scene(scene: Scene, threads: int | None = None, debug: bool = False
                ) -> CheckReport:
    """Compile every kernel by evaluating the forces once and each step kernel once.

    Nothing is written. Raises SceneError or simrun.lang's CompileError on bad input, and
    SimulationError when the energy or forces at step 0 are not finite (the run would stop
    there).
    """
    started = time.perf_counter()
    system, state = prepare(scene, None, threads, debug)  # run's own step 0: energy.csv's row
    acted = None
    if system.controller:  # the first step's forces: the controller has written its outputs
        system.control(0)
        acted, forces = system.forces()
        x, v = system.get_state()
        check_finite(State(0, x, v, forces, acted), scene)
    for kernel in system.step_kernels:
        kernel()
    check_guards(0, system.x.generation)  # a kernel wrote outside a field (no --debug)
    system.render_shapes()  # a broken render_shapes hook is bad input too
    return CheckReport([str(k.ref.name) for k in system.energy],
                       [str(k.ref.name) for k in system.step_kernels],
                       sorted(set(system.extra) - set(thermostats.FIELDS)), state.potential,
                       time.perf_counter() - started,
                       [str(k.ref.name) for k in system.controller], acted)
