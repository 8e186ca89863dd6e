"""The temperature's degrees of freedom: dim N - dim where pair forces conserve momentum, even
when the first forces cancel to their rounding (a perfect lattice), dim N under a field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from cli_helpers import REPO, simrun

from simrun.stepper.thermo import external_forces


def test_the_lj_melt_lattice_conserves_momentum(tmp_path: Path) -> None:
    """LAMMPS's melt starts on an fcc lattice: every first force is rounding (~1e-13) and
    their sum ~2e-12, which was taken for an external field (dof 3N, not 3N - 3)."""
    done = simrun("run", str(REPO / "scenes" / "lj_melt.yaml"), "--steps", "1", "--no-render",
                  "-q", "--out", str(tmp_path / "melt"), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    thermo = json.loads((tmp_path / "melt" / "run.json").read_text())["thermo"]
    assert thermo["dof"] == 3 * 32000 - 3, thermo["dof_why"]


def _lattice(n: int) -> np.ndarray:
    side = np.arange(n, dtype=float) * 1.1
    return np.stack(np.meshgrid(side, side, side), axis=-1).reshape(-1, 3)


def test_rounding_noise_is_internal_and_fields_are_external() -> None:
    """Forces of random sign at 1e-13 (a lattice's rounding) sum like a random walk:
    internal. A field of any size on the same lattice, a weak field on a fluid whose forces
    are resolved, or a field alone on a few particles: external."""
    rng = np.random.default_rng(1)
    x = _lattice(10)
    n = len(x)
    potential = -7.0 * n
    noise = rng.normal(scale=1e-13, size=(n, 3))
    noise -= noise.mean(axis=0) - 2e-12 / n  # sums to 2e-12 per axis: well within sqrt(n)
    assert not external_forces(noise, x, potential, "f64")
    field = np.array([0.0, -1e-3, 0.0])
    assert external_forces(noise + field, x, potential, "f64")
    fluid = rng.normal(scale=5.0, size=(n, 3))
    fluid -= fluid.mean(axis=0)
    assert not external_forces(fluid, x, potential, "f64")
    assert external_forces(fluid + field, x, potential, "f64")
    few = _lattice(2)
    assert external_forces(np.tile(field, (len(few), 1)), few, 0.0, "f64")
    one = np.zeros((1, 3))  # a projectile: no size to judge rounding by
    assert external_forces(np.array([[0.0, -9.8, 0.0]]), one, -9.8, "f64")


def test_a_tether_at_its_rest_point_breaks_momentum(tmp_path: Path) -> None:
    """Traps k/2 |x - x0|^2 started at their centres: every first force is exactly zero, so
    the sum said 'momentum is conserved' (dof 3N - 3), and a Nose-Hoover thermostat then
    held the traps at (3N - 3)/3N of its temperature. Forces that change when every
    particle moves alike are no pair forces: dof 3N."""
    done = simrun("run", str(REPO / "scenes" / "oscillators.yaml"), "--steps", "2",
                  "--no-render", "-q", "--set", "particles.count=10", "--set",
                  "energy.0.params.count=10", "--set", "integrator=velocity_verlet",
                  "--out", str(tmp_path / "traps"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    thermo = json.loads((tmp_path / "traps" / "run.json").read_text())["thermo"]
    assert thermo["dof"] == 30 and "tether" in thermo["dof_why"], thermo
