"""A neighbour list over species holds each pair within its own type pair's cutoff + skin
(issue 47 item 5, LAMMPS's multi-type list): against a brute-force NumPy list on random
configurations (3 types, periodic boxes on both sides of the cell-count thresholds, an open
box, half and full lists, the GPU's kernels on the CPU), in a scene's System, after a
write to a cutoff field (the next update rebuilds), and kept at one reach wherever a
kernel reads the list without a per-pair cutoff."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import simrun.lang as ti
from simrun.scene import initial_state, load_scene
from simrun.scene.species import type_ids
from simrun.stepper.binding import box_values
from simrun.stepper.neighbors import NeighborList
from simrun.stepper.system import System
from tests.test_neighbor_build import SIDES, random_positions

REPO = Path(__file__).resolve().parents[1]
CUTOFF, SKIN = 2.5, 0.3
# three types, every pair its own cutoff, the largest the list's
PAIR_CUTOFFS = np.array([[2.5, 2.0, 1.6], [2.0, 2.2, 1.9], [1.6, 1.9, 1.2]])


def brute_force(x: np.ndarray, side: float | None, types: np.ndarray, cutoffs: np.ndarray,
                skin: float, half: bool = True) -> list[list[int]]:
    """Row i: every j (j > i when ``half``) with |x_j - x_i| < cutoff + skin of the pair's
    types, minimum image when ``side``: those within the pair's cutoff ascending, then the
    rest ascending."""
    d = x[None, :, :] - x[:, None, :]
    if side is not None:
        d -= side * np.round(d / side)
    r2 = (d * d).sum(-1)
    pair_cutoff = cutoffs[types[:, None], types[None, :]]
    near = r2 < (pair_cutoff + skin) ** 2
    np.fill_diagonal(near, False)
    if half:
        near = np.triu(near)
    inside = r2 < pair_cutoff ** 2
    return [np.flatnonzero(row & cut).tolist() + np.flatnonzero(row & ~cut).tolist()
            for row, cut in zip(near, inside)]


def rows_of(table: np.ndarray, x: np.ndarray, side: float | None, types: np.ndarray,
            cutoffs: np.ndarray, half: bool = True) -> list[list[int]]:
    """The list's rows as brute_force gives them, each checked to hold its partners within
    their own cutoff first (a half list's pair is moved to row min(i, j))."""
    parts: list[tuple[list[int], list[int]]] = [([], []) for _ in range(len(table))]
    for i in range(len(table)):
        row = table[i, 1:table[i, 0] + 1]
        d = x[row] - x[i]
        if side is not None:
            d -= side * np.round(d / side)
        inside = (d * d).sum(1) < cutoffs[types[i], types[row]] ** 2
        assert (np.diff(inside.astype(int)) <= 0).all(), f"row {i}: a skin partner first"
        for j, near in zip(row.tolist(), inside):
            owner, partner = (min(i, j), max(i, j)) if half else (i, j)
            parts[owner][0 if near else 1].append(partner)
    return [sorted(near) + sorted(skin) for near, skin in parts]


def pair_set(rows) -> set[tuple[int, int]]:
    """The pairs (i < j) of a half list's rows: a table (count first) or brute_force's."""
    if isinstance(rows, np.ndarray):
        rows = [row[1:row[0] + 1].tolist() for row in rows]
    return {(min(i, j), max(i, j)) for i, row in enumerate(rows) for j in row}


def typed_build(x: np.ndarray, side: float | None, types: np.ndarray, half: bool = True,
                parallel: bool = False) -> NeighborList:
    """A bounds-checked (debug) build of a list over ``types`` with PAIR_CUTOFFS."""
    n, dim = x.shape
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
    high = [0.0] * dim if side is None else [side] * dim
    boundary = SimpleNamespace(type="none" if side is None else "periodic",
                               low=[0.0] * dim, high=high)
    positions = ti.Vector.field(dim, dtype=ti.f64, shape=n)
    positions.from_numpy(x)
    nl = NeighborList(CUTOFF, SKIN, x, boundary, ti.f64, box_values(ti, boundary, dim, ti.f64),
                      None if half else n - 1, half)
    cutoffs = ti.field(ti.f64, shape=PAIR_CUTOFFS.shape)
    cutoffs.from_numpy(PAIR_CUTOFFS)
    nl.by_type(types, [cutoffs])
    nl.parallel = parallel
    nl.build(positions)
    return nl


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("half", [True, False])
@pytest.mark.parametrize("sides", SIDES)
def test_list_holds_each_pair_within_its_own_cutoff_and_skin(sides, half, parallel):
    rng = np.random.default_rng(int(sides * 1e4) + 2 * half + parallel)
    side = sides * (CUTOFF + SKIN)
    x = random_positions(rng, 300, 3, side)
    types = rng.integers(0, 3, len(x))
    nl = typed_build(x, side, types, half, parallel)
    want = brute_force(x, side, types, PAIR_CUTOFFS, SKIN, half)
    assert rows_of(nl.neighbors.to_numpy(), x, side, types, PAIR_CUTOFFS, half) == want
    # not vacuous: one reach for every pair would hold more
    assert sum(map(len, want)) < sum(map(len, brute_force(x, side, types,
                                                          np.full((3, 3), CUTOFF), SKIN,
                                                          half)))


def test_open_box_list_holds_each_pair_within_its_own_cutoff_and_skin():
    rng = np.random.default_rng(7)
    x = rng.uniform(0.0, 9.0, (400, 3))
    types = rng.integers(0, 3, len(x))
    nl = typed_build(x, None, types)
    assert rows_of(nl.neighbors.to_numpy(), x, None, types, PAIR_CUTOFFS) == \
        brute_force(x, None, types, PAIR_CUTOFFS, SKIN)


@pytest.mark.parametrize("half", [True, False])
def test_parallel_build_equals_the_serial_one_entry_for_entry(half):
    rng = np.random.default_rng(11)
    side = 3.6 * (CUTOFF + SKIN)
    x = random_positions(rng, 500, 3, side)
    types = rng.integers(0, 3, len(x))
    serial, parallel = (typed_build(x, side, types, half, p).neighbors.to_numpy()
                        for p in (False, True))
    assert np.array_equal(serial, parallel)


def _mixture(tmp_path: Path, extra: str = "") -> Path:
    """64 particles of two species, each pair cut at its own cutoff (A,B shortest)."""
    path = tmp_path / "mixture.yaml"
    path.write_text(f"""version: 2
name: mixture
seed: 4
particles: {{dim: 3, species: {{A: 48, B: 16}}, species_order: random}}
initial: {{type: lattice, shape: [4, 4, 4], spacing: [1.1, 1.1, 1.1], jitter: 0.2,
           temperature: 1.0}}
boundary: {{type: periodic, low: [0, 0, 0], high: [4.4, 4.4, 4.4]}}
neighbors: {{cutoff: 1.8, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species_shifted
    params:
      epsilon: {{A: 1.0, "A,B": 1.5, B: 0.5}}
      sigma: {{A: 1.0, "A,B": 0.8, B: 0.88}}
      cutoff: {{A: 1.8, "A,B": 1.3, B: 1.6}}
integrator: velocity_verlet
dt: 0.002
steps: 20
{extra}""")
    return path


SCENE_CUTOFFS = np.array([[1.8, 1.3], [1.3, 1.6]])


def _system(path: Path, sets: list[str] | None = None) -> tuple[System, np.ndarray, np.ndarray]:
    scene = load_scene(path, sets or [], allow_outside=True)
    x, _ = initial_state(scene)
    system = System(scene, x, threads=1)
    system.forces()  # builds the list
    return system, x, type_ids(scene.particles.species)


def test_a_scenes_list_holds_each_pair_within_its_own_cutoff_and_skin(tmp_path):
    """What `simrun run` steps with: the System's list of a mixture (one reach, the
    largest cutoff + skin, for every pair before)."""
    system, x, types = _system(_mixture(tmp_path))
    want = brute_force(x, 4.4, types, SCENE_CUTOFFS, 0.2)
    assert pair_set(system.neighbor_list.neighbors.to_numpy()) == pair_set(want)
    assert rows_of(system.neighbor_list.neighbors.to_numpy(), x, 4.4, types,
                   SCENE_CUTOFFS) == want
    assert sum(map(len, want)) < sum(map(len, brute_force(x, 4.4, types,
                                                          np.full((2, 2), 1.8), 0.2)))


def test_a_write_to_a_cutoff_field_rebuilds_the_list_at_the_new_reach(tmp_path):
    """A fit by reweighting writes cutoff[A:B] into its field between frames: the next
    update rebuilds, though nothing moved, and the list holds the A,B pairs to the new
    cutoff + skin."""
    system, x, types = _system(_mixture(tmp_path))
    assert not system.refresh_neighbors()  # nothing moved, nothing written
    moved = SCENE_CUTOFFS.copy()
    moved[0, 1] = moved[1, 0] = 1.7
    system.pair_fields(0)["cutoff"].from_numpy(moved)
    assert system.refresh_neighbors()
    assert rows_of(system.neighbor_list.neighbors.to_numpy(), x, 4.4, types, moved) == \
        brute_force(x, 4.4, types, moved, 0.2)


OBJECTIVE = ("objective: {kernel: " + str(REPO) + "/kernels/observables.py:pair_fraction, "
             "params: {r: 1.8}, at: end}\n")
SECOND_TERM = ("  - kernel: " + str(REPO) + "/kernels/lj.py:lj_shifted\n"
               "    params: {epsilon: 0.1, sigma: 1.0, cutoff: 1.8}\n")


@pytest.mark.parametrize("extra,sets", [
    (OBJECTIVE, []),  # an objective over the list counts pairs to r = 1.8 of every kind
    ("", ["energy.0.params.cutoff=1.8"]),  # every pair's cutoff is the list's already
    ("", ["particles.species={A: 64}", "energy.0.params={epsilon: 1.0, sigma: 1.0, cutoff: 1.3}"]),
    # one species
])
def test_the_list_keeps_one_reach_where_a_kernel_needs_it(tmp_path, extra, sets):
    system, x, types = _system(_mixture(tmp_path, extra), sets)
    assert system.neighbor_list.pairs is None
    assert rows_of(system.neighbor_list.neighbors.to_numpy(), x, 4.4, types,
                   np.full((2, 2), 1.8)) == brute_force(x, 4.4, types, np.full((2, 2), 1.8),
                                                        0.2)


def test_a_second_term_without_per_pair_cutoffs_keeps_one_reach(tmp_path):
    path = _mixture(tmp_path)
    path.write_text(path.read_text().replace("integrator:", SECOND_TERM + "integrator:"))
    system, x, types = _system(path)
    assert system.neighbor_list.pairs is None
    assert rows_of(system.neighbor_list.neighbors.to_numpy(), x, 4.4, types,
                   np.full((2, 2), 1.8)) == brute_force(x, 4.4, types, np.full((2, 2), 1.8),
                                                        0.2)
