"""What a step is, as `build_program` writes it (simrun/stepper/program.py), for shipped
scenes of each kind: plain velocity Verlet under a neighbour list, a thermostat, a
controller with step kernels, symplectic Euler. A maintainer reads a step here; a change
of a step's order shows up as a diff of this text. And the order is written in one place:
no other module builds the update plan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simrun.scene import load_scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.run import prepare

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "simrun" / "scenes"

GRAVITY = """\
1. forces -> G (carried): U = gravity, G = dU/dx
2. first updates [reads G]: kick_drift(h=dt, dt=dt, damping=integrator.damping)
3. forces -> G2 (not read in the step): U = gravity, G2 = dU/dx
4. watch"""

LJ_NVT_LANGEVIN = """\
1. forces -> G (carried): U = lj_shifted, G = dU/dx
2. first updates [reads G]: baoa(dt=dt, friction=integrator.friction, \
kT=integrator.temperature)
3. neighbors
4. forces -> G2: U = lj_shifted, G2 = dU/dx
5. second updates [reads G2]: kick(h=dt*0.5, damping=integrator.damping), tick
6. watch"""

CHAIN_HALF = "zero, kinetic, chain_half(dt=dt, kT=integrator.temperature, " \
    "tau=integrator.tau), scale_velocities"
LJ_NVT_NOSE_HOOVER = f"""\
1. forces -> G (carried): U = lj_shifted, G = dU/dx
2. first updates [reads G]: {CHAIN_HALF}, kick_drift(h=dt*0.5, dt=dt, \
damping=integrator.damping)
3. neighbors
4. forces -> G2: U = lj_shifted, G2 = dU/dx
5. second updates [reads G2]: kick(h=dt*0.5, damping=integrator.damping), {CHAIN_HALF}
6. watch"""

MASS_SPRING = """\
1. controller: centroid, hidden_layer, actuation_layer
2. forces -> G: U = actuated_springs, G = dU/dx
3. step kernels [reads G]: advance
4. forces -> G2 (not read in the step): U = actuated_springs, G2 = dU/dx
5. watch"""

LJ_MELT = """\
1. forces -> G (carried): U = lj, G = dU/dx
2. first updates [reads G]: kick_drift(h=dt*0.5, dt=dt, damping=integrator.damping)
3. neighbors
4. forces -> G2: U = lj, G2 = dU/dx
5. second updates [reads G2]: kick(h=dt*0.5, damping=integrator.damping)
6. watch"""


@pytest.mark.parametrize("scene, overrides, expected", [
    ("gravity.yaml", [], GRAVITY),
    ("lj_nvt.yaml", [], LJ_NVT_LANGEVIN),
    ("lj_nvt.yaml", ["integrator={type: nose_hoover, temperature: 1.5, tau: 0.2}"],
     LJ_NVT_NOSE_HOOVER),
    ("mass_spring.yaml", [], MASS_SPRING),
    ("lj_melt.yaml", ["particles.count=256", "initial.shape=[4,4,4]",
                      "neighbors={cutoff: 2.5, skin: 0.3, max_neighbors: 100}"], LJ_MELT),
])
def test_a_shipped_scene_s_step_program_reads_as_expected(
        scene: str, overrides: list[str], expected: str) -> None:
    loaded = load_scene(SCENES / scene, overrides)
    system, _ = prepare(loaded, None, threads=1)
    assert FieldStepper(loaded, system).program.describe() == expected


def test_the_update_plan_is_built_by_the_step_program_alone() -> None:
    """`build_plan` (the update launches) is called by `build_program` only: the stepper and
    the adjoint take a step's order from the program, not from a copy of it."""
    callers = sorted(str(p.relative_to(REPO)) for p in (REPO / "simrun").rglob("*.py")
                     if re.search(r"\bbuild_plan\(", p.read_text())
                     and p.name not in ("plan.py", "program.py"))
    assert callers == []
