"""Initial states and topology generators (NumPy only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.outputs.xyz import format_frame
from simrun.scene import SceneError, initial_state, load_scene
from simrun.scene.initial import lattice, random_walk
from simrun.scene.topology import chain, grid_bonds, grid_triangles

REPO = Path(__file__).resolve().parents[1]


def test_random_box_is_seeded_and_inside_the_box() -> None:
    scene = load_scene(REPO / "scenes" / "gravity.yaml")
    x1, v1 = initial_state(scene)
    x2, _ = initial_state(scene)
    x3, _ = initial_state(load_scene(REPO / "scenes" / "gravity.yaml", ["seed=5"]))
    assert np.array_equal(x1, x2) and not np.array_equal(x1, x3)
    assert x1.shape == (8, 2) and (x1 >= 0).all() and (x1 < 1).all()
    assert not v1.any()


def test_lattice_is_numbered_x_major() -> None:
    x = lattice([3, 2], [0.5, 1.0], [1.0, 2.0], 0.0, np.random.default_rng(0))
    assert x.tolist() == [[1, 2], [1, 3], [1.5, 2], [1.5, 3], [2, 2], [2, 3]]


def test_random_walk_keeps_bond_length_and_angle() -> None:
    x = random_walk(np.random.default_rng(1), 20, 3, 1.5, 109.5, [0, 0, 0])
    bonds = np.diff(x, axis=0)
    assert np.allclose(np.linalg.norm(bonds, axis=1), 1.5)
    u, w = -bonds[:-1], bonds[1:]
    cos = (u * w).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(w, axis=1))
    assert np.allclose(np.degrees(np.arccos(cos)), 109.5)


def test_temperature_gives_zero_momentum_velocities() -> None:
    scene = load_scene(REPO / "scenes" / "molecule.yaml")
    _x, v = initial_state(scene)
    assert np.allclose(v.sum(axis=0), 0.0) and v.std() > 0.1


SMALL_MELT = ["particles.count=4000", "initial.shape=[10, 10, 10]",
              "boundary.high=[16.795961913825074, 16.795961913825074, 16.795961913825074]"]


@pytest.mark.parametrize("dist,kurtosis", [("uniform", 1.8), ("gaussian", 3.0)])
def test_thermal_velocity_distribution(dist: str, kurtosis: float) -> None:
    """Each component uniform in +-sqrt(3 T / m) (LAMMPS's default `velocity create`) or
    Gaussian, variance T / m either way, no net momentum. 12,000 components: the sample
    variance and kurtosis sit within a few 1 / sqrt(n) ~ 1 % of their values."""
    scene = load_scene(REPO / "scenes" / "lj_melt.yaml", [
        *SMALL_MELT, "initial.exact_temperature=false", f"initial.velocity_distribution={dist}"])
    _x, v = initial_state(scene)
    assert np.allclose(v.sum(axis=0), 0.0, atol=1e-9)
    u = v - v.mean(axis=0)
    assert u.var() == pytest.approx(1.44, rel=0.05)
    assert (u ** 4).mean() / u.var() ** 2 == pytest.approx(kurtosis, rel=0.1)
    if dist == "uniform":  # bounded, up to the momentum shift (5 sigma of a mean: 0.1)
        assert np.abs(v).max() <= np.sqrt(3 * 1.44) + 0.1


def test_unknown_velocity_distribution_is_refused_with_a_suggestion() -> None:
    with pytest.raises(SceneError) as info:
        load_scene(REPO / "scenes" / "lj_melt.yaml", ["initial.velocity_distribution=unifrom"])
    assert "velocity_distribution" in str(info.value) and "uniform" in str(info.value)


def test_chain_generators() -> None:
    assert chain(4, 2).tolist() == [[0, 1], [1, 2], [2, 3]]
    assert chain(4, 3).tolist() == [[0, 1, 2], [1, 2, 3]]
    assert chain(4, 4).tolist() == [[0, 1, 2, 3]]


def test_grid_triangles_cover_the_rectangle_counter_clockwise() -> None:
    nx, ny = 4, 3
    tris = grid_triangles(nx, ny)
    assert tris.shape == (2 * (nx - 1) * (ny - 1), 3)
    x = lattice([nx, ny], [1.0, 1.0], [0.0, 0.0], 0.0, np.random.default_rng(0))
    a, b, c = (x[tris[:, i]] for i in range(3))
    ab, ac = b - a, c - a
    signed = 0.5 * (ab[:, 0] * ac[:, 1] - ab[:, 1] * ac[:, 0])
    assert (signed > 0).all() and np.isclose(signed.sum(), (nx - 1) * (ny - 1))
    assert len(grid_bonds(nx, ny)) == (nx - 1) * ny + nx * (ny - 1) + (nx - 1) * (ny - 1)


@pytest.mark.parametrize("suffix", [".npz", ".xyz"])
def test_initial_state_from_file(tmp_path: Path, suffix: str) -> None:
    x = np.random.default_rng(0).random((8, 2))
    v = np.random.default_rng(1).random((8, 2))
    path = tmp_path / f"start{suffix}"
    if suffix == ".npz":
        np.savez(path, x=x, v=v)
    else:
        path.write_text(format_frame(x, step=0, time=0.0, cell=np.eye(3), origin=np.zeros(3),
                                     v=v))
    text = (REPO / "scenes" / "gravity.yaml").read_text()
    scene_path = tmp_path / "g.yaml"
    scene_path.write_text(text.replace("kernels/", f"{REPO}/kernels/")
                          .replace("  type: random\n  low: [0, 0]\n  high: [1, 1]\n",
                                   f"  type: file\n  path: {path.name}\n"))
    scene = load_scene(scene_path, allow_outside=True)
    x_read, v_read = initial_state(scene)
    assert np.array_equal(x_read, x) and np.array_equal(v_read, v)  # 17 digits in the XYZ
    # the same state chosen from the command line, replacing the scene's whole 'initial'
    again = load_scene(REPO / "scenes" / "gravity.yaml", [f"initial={{type: file, path: {path}}}"])
    x_cli, v_cli = initial_state(again)
    assert np.array_equal(x_cli, x) and np.array_equal(v_cli, v)
