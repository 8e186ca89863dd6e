"""Autodiff forces of every shipped energy kernel equal finite differences of its energy."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.scene import initial_state, load_scene
from simrun.stepper.system import System

REPO = Path(__file__).resolve().parents[1]
K = REPO / "kernels"

GRAVITY = f"""
particles: {{count: 6, dim: 2, mass: [1, 2, 0.5, 1, 3, 1]}}
energy: [{{kernel: {K}/gravity.py:gravity, params: {{softening: 0.01, strength: 0.7}}}}]
"""
MOLECULE = f"""
particles: {{count: 7, dim: 3}}
initial: {{type: random_walk, angle: 100}}
topology: {{bonds: {{generate: chain}}, angles: {{generate: chain}},
           dihedrals: {{generate: chain}}}}
energy:
  - {{kernel: {K}/molecule.py:harmonic_bonds, params: {{k: 50, r0: 1.1}}}}
  - {{kernel: {K}/molecule.py:harmonic_angles, params: {{k: 20, theta0: 115}}}}
  - {{kernel: {K}/molecule.py:cosine_dihedrals, params: {{k: 2, n: 3, phase: 20}}}}
"""
FEM = f"""
particles: {{count: 12, dim: 2, mass: 0.5}}
initial: {{type: lattice, shape: [4, 3], spacing: 0.5}}
topology: {{triangles: {{generate: grid}}}}
energy:
  - {{kernel: {K}/fem.py:neo_hookean, params: {{youngs: 100, poisson: 0.3}}}}
  - {{kernel: {K}/external.py:anchor, params: {{k: 30, first: 0, count: 3}}}}
  - {{kernel: {K}/external.py:uniform_gravity, params: {{g: 9.8}}}}
"""


def build(tmp_path: Path, body: str) -> tuple[System, np.ndarray]:
    path = tmp_path / "scene.yaml"
    path.write_text("version: 1\nprecision: f64\ndt: 1e-3\nsteps: 1\n" + textwrap.dedent(body))
    scene = load_scene(path, allow_outside=True)
    x0, _v = initial_state(scene)
    system = System(scene, x0, threads=1)
    noise = np.random.default_rng(7).normal(scale=0.05, size=x0.shape)
    return system, x0 + noise  # away from rest, so every force is non-zero


def energy_at(system: System, x: np.ndarray) -> float:
    system.x.from_numpy(x)
    return system.forces()[0]


@pytest.mark.parametrize("body", [GRAVITY, MOLECULE, FEM], ids=["gravity", "molecule", "fem"])
def test_autodiff_forces_match_finite_differences(tmp_path: Path, body: str) -> None:
    system, x = build(tmp_path, body)
    system.x.from_numpy(x)
    _u, forces = system.forces()
    h = 1e-6
    numeric = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] += h
        minus[index] -= h
        numeric[index] = -(energy_at(system, plus) - energy_at(system, minus)) / (2 * h)
    scale = np.abs(numeric).max()
    assert scale > 1e-3
    np.testing.assert_allclose(forces, numeric, rtol=0, atol=1e-6 * max(scale, 1.0))


def test_gravity_energy_is_the_reference_formula(tmp_path: Path) -> None:
    system, x = build(tmp_path, GRAVITY)
    masses = np.array([1, 2, 0.5, 1, 3, 1.0])
    r = x[:, None, :] - x[None, :, :]
    expected = -0.7 * (masses[:, None] * masses[None, :] /
                       np.sqrt((r ** 2).sum(-1) + 0.01)).sum()
    assert energy_at(system, x) == pytest.approx(expected, rel=1e-12)


def test_bond_angle_and_dihedral_energies(tmp_path: Path) -> None:
    body = f"""
    particles: {{count: 4, dim: 3}}
    initial: {{type: file, path: chain.npz}}
    topology: {{bonds: [[0, 1]], angles: [[0, 1, 2]], dihedrals: [[0, 1, 2, 3]]}}
    energy:
      - {{kernel: {K}/molecule.py:harmonic_bonds, params: {{k: 2, r0: 0.5}}}}
      - {{kernel: {K}/molecule.py:harmonic_angles, params: {{k: 3, theta0: 60}}}}
      - {{kernel: {K}/molecule.py:cosine_dihedrals, params: {{k: 5, n: 1, phase: 0}}}}
    """
    # a right angle at particle 1 and a trans (phi = 180 degrees) dihedral
    x = np.array([[1.0, 0, 0], [0, 0, 0], [0, 1, 0], [-1, 1, 0]])
    np.savez(tmp_path / "chain.npz", x=x)
    system, _ = build(tmp_path, body)
    bond = 0.5 * 2 * (1 - 0.5) ** 2
    angle = 0.5 * 3 * (np.pi / 2 - np.pi / 3) ** 2
    dihedral = 5 * (1 + np.cos(np.pi))
    assert energy_at(system, x) == pytest.approx(bond + angle + dihedral, abs=1e-12)


def test_forces_leave_other_gradients_alone(tmp_path: Path) -> None:
    """A force evaluation clears the gradients its energy kernels use, not every gradient in
    the process (Tape's default): a user's other fields keep theirs, and the cost of a step
    does not grow with the fields alive elsewhere."""
    import simrun.lang as ti

    system, x = build(tmp_path, FEM)
    other = ti.field(ti.f64, shape=5, needs_grad=True)
    other.grad.fill(2.5)
    system.x.from_numpy(x)
    first = system.forces()[1]
    second = system.forces()[1]  # the energy kernels' gradients do start from zero each time
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(other.grad.to_numpy(), np.full(5, 2.5))


@pytest.mark.parametrize("body", [GRAVITY, MOLECULE, FEM], ids=["gravity", "molecule", "fem"])
def test_each_term_makes_value_and_gradient_in_one_launch(tmp_path: Path, body: str) -> None:
    """Energies that only add into U: System.forces (and so the stepper) launches each term
    once (autodiff's value_reverse), and gets the Tape's U and forces (the value launch,
    then the gradient launch) to rounding: 1e-12 of the sizes involved."""
    from simrun.stepper.energy import energy_and_reverse

    system, x = build(tmp_path, body)
    system.x.from_numpy(x)
    potential, forces = system.forces()
    assert all(g.kir.name.endswith("_value_grad") for g, _ in system.energy_terms().value_and_gradient())
    system.x.grad.fill(0)
    energy_and_reverse(system.U, system.energy)
    two_launches = -system.x.grad.to_numpy()
    assert potential == pytest.approx(float(system.U.to_numpy()), rel=1e-12)
    np.testing.assert_allclose(forces, two_launches, rtol=0,
                               atol=1e-12 * np.abs(two_launches).max())
