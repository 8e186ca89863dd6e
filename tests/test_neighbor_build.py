"""The neighbour-list build (simrun/stepper/neighbors.py) against a brute-force NumPy list:
exactly the pairs within cutoff + skin, each row's partners within the cutoff first, then
the skin's (the pair loop's cutoff branch is predictable), on random configurations in
periodic boxes on both sides of every cell-count threshold, open boxes (a crowded cell
included), 2-D and 3-D, half and full lists; the overflow error's numbers and message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import simrun.lang as ti
from simrun.stepper.binding import box_values
from simrun.stepper.neighbors import NeighborList, NeighborListOverflow

CUTOFF, SKIN = 2.5, 0.3
REACH = CUTOFF + SKIN


def brute_force(x: np.ndarray, side: float | None, half: bool) -> list[list[int]]:
    """Row i: every j (j > i when ``half``) with |x_j - x_i| < REACH, minimum image when
    ``side``: those within CUTOFF ascending, then the rest ascending."""
    d = x[None, :, :] - x[:, None, :]
    if side is not None:
        d -= side * np.round(d / side)
    r2 = (d * d).sum(-1)
    near = r2 < REACH ** 2
    np.fill_diagonal(near, False)
    if half:
        near = np.triu(near)
    inside = r2 < CUTOFF ** 2
    return [np.flatnonzero(row & cut).tolist() + np.flatnonzero(row & ~cut).tolist()
            for row, cut in zip(near, inside)]


def build(x: np.ndarray, side: float | None, half: bool = True,
          capacity: int | None = None, spare: list[int] | None = None,
          parallel: bool = False) -> NeighborList:
    """A bounds-checked (debug) build of the list for positions ``x`` (``spare`` gets how
    many particles of one cell the search's scratch held before the build); ``parallel``:
    the kernels a GPU runs (_bin_parallel, _search_parallel), here on the CPU."""
    n, dim = x.shape
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
    high = [0.0] * dim if side is None else np.broadcast_to(side, dim).tolist()
    boundary = SimpleNamespace(type="none" if side is None else "periodic",
                               low=[0.0] * dim, high=high)
    positions = ti.Vector.field(dim, dtype=ti.f64, shape=n)
    positions.from_numpy(x)
    nl = NeighborList(CUTOFF, SKIN, x, boundary, ti.f64, box_values(ti, boundary, dim, ti.f64),
                      capacity, half)
    nl.parallel = parallel
    if spare is not None:
        spare.append(nl.unsorted.shape[1])
    nl.build(positions)
    return nl


def rows_of(nl: NeighborList, x: np.ndarray, side: float | None) -> list[list[int]]:
    """The list's rows, each checked to hold its partners within CUTOFF first, then sorted
    part by part (the build leaves each part in the order it gathered it). A half list
    may hold pair (i, j) in either row (the half stencil's cell order decides): its pairs
    are moved to row min(i, j) first, so a pair listed twice shows twice."""
    table = nl.neighbors.to_numpy()
    parts: list[tuple[list[int], list[int]]] = [([], []) for _ in range(len(table))]
    for i in range(len(table)):
        row = table[i, 1:table[i, 0] + 1]
        d = x[row] - x[i]
        if side is not None:
            d -= side * np.round(d / side)
        inside = (d * d).sum(1) < CUTOFF ** 2
        assert (np.diff(inside.astype(int)) <= 0).all(), f"row {i}: a skin partner first"
        for j, near in zip(row.tolist(), inside):
            owner, partner = (min(i, j), max(i, j)) if nl.half else (i, j)
            parts[owner][0 if near else 1].append(partner)
    return [sorted(near) + sorted(skin) for near, skin in parts]


def random_positions(rng: np.random.Generator, n: int, dim: int, side: float) -> np.ndarray:
    """Uniform in the box, a fifth of them an image or two away (the build wraps them)."""
    x = rng.uniform(0.0, side, (n, dim))
    moved = rng.random(n) < 0.2
    x[moved] += side * rng.integers(-2, 3, (int(moved.sum()), dim))
    return x


# box sides in units of cutoff + skin: 1 cell a side (a box narrower than 2 reaches, which
# scenes refuse; the library folds each pair to its nearest image), 2 cells, just below and
# just above 2.5 (where the search stops folding and walks the half stencil of cells half
# the reach wide, 5 a side), around 3, and more
SIDES = [1.3, 2.2, 2.4999, 2.5001, 2.9999, 3.0001, 3.6, 4.3]


def expected_grid(sides: float) -> int:
    """Cells a side: half the reach wide where 5 fit (the half stencil), else the reach."""
    return int(2 * sides) if int(2 * sides) >= 5 else max(int(sides), 1)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("sides", SIDES)
def test_periodic_list_equals_brute_force(dim, sides, parallel):
    rng = np.random.default_rng(int(sides * 1e4) + dim)
    side = sides * REACH
    n = int(0.6 * side ** dim) if dim == 3 else int(2.0 * side ** dim)
    x = random_positions(rng, max(n, 12), dim, side)
    nl = build(x, side, parallel=parallel)
    expected = brute_force(x, side, half=True)
    assert rows_of(nl, x, side) == expected
    assert nl.grid.to_numpy().tolist() == [expected_grid(sides)] * dim  # the threshold side
    table = nl.neighbors.to_numpy()
    assert int(nl.longest[None]) == table[:, 0].max()


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("sides", [(2.6, 3.3, 4.4), (4.4, 2.6, 3.3), (3.3, 4.4, 2.2),
                                   (2.6, 4.4), (4.4, 2.2)])
def test_periodic_list_in_a_box_of_unequal_sides(sides, parallel):
    """Sides of unequal length (in reaches): the half stencil where every side holds 5
    half-reach cells, else 3^dim cells folded pair by pair; the same pairs as brute force
    either way, and the GPU's rows entry for entry."""
    rng = np.random.default_rng(int(sum(sides) * 100) + len(sides))
    side = np.array(sides) * REACH
    dim = len(sides)
    x = random_positions(rng, int((0.6 if dim == 3 else 2.0) * np.prod(side)), dim, side)
    nl = build(x, side, parallel=parallel)
    assert nl.span == (2 if min(sides) >= 2.5 else 0)
    assert rows_of(nl, x, side) == brute_force(x, side, half=True)
    if parallel:
        rows = nl.neighbors.to_numpy()
        assert np.array_equal(rows, build(x, side).neighbors.to_numpy())


@pytest.mark.parametrize("dim", [2, 3])
def test_open_list_equals_brute_force_with_a_crowded_cell(dim):
    """Spread particles, a far cluster, and one cell holding more particles than the
    search's scratch has rows for at first (the build grows it)."""
    rng = np.random.default_rng(dim)
    spread = rng.uniform(-6.0, 9.0, (120, dim))
    far = rng.uniform(30.0, 34.0, (30, dim))
    crowd = rng.uniform(2.0, 2.3, (70, dim))
    x = np.concatenate([spread, crowd, far])[rng.permutation(220)]
    spare: list[int] = []
    nl = build(x, None, capacity=219, spare=spare)
    assert rows_of(nl, x, None) == brute_force(x, None, half=True)
    assert int(nl.fullest[None]) > spare[0]  # the crowded cell did not fit at first
    assert nl.unsorted.shape[1] >= int(nl.fullest[None])


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dim,side", [(2, None), (3, None), (2, 2.2 * REACH), (3, 3.6 * REACH)])
def test_full_list_equals_brute_force(dim, side, parallel):
    """half=False (bench/lj_neighbors.py's full list): every j != i, in the same order."""
    rng = np.random.default_rng(7 + dim)
    x = random_positions(rng, 150, dim, side or 9.0)
    assert rows_of(build(x, side, half=False, capacity=149, parallel=parallel), x, side) == \
        brute_force(x, side, half=False)


@pytest.mark.parametrize("half", [True, False])
@pytest.mark.parametrize("dim,side", [(2, None), (3, None), (2, 1.3 * REACH),
                                      (3, 2.2 * REACH), (3, 4.3 * REACH)])
def test_parallel_build_equals_the_serial_one_entry_for_entry(dim, side, half):
    """The GPU's kernels make the CPU's cells and rows, in the same order (so a GPU's
    forces add the same pairs in the same order), with an open crowded cell too."""
    rng = np.random.default_rng(11 + dim)
    x = random_positions(rng, 300, dim, side or 9.0)
    if side is None:
        x[:40] = rng.uniform(2.0, 2.3, (40, dim))
    names = ("cell_start", "cell_particles", "cell_x", "neighbors", "fullest", "longest",
             "x_ref")
    serial, parallel = ({name: getattr(nl, name).to_numpy() for name in names}
                        for nl in (build(x, side, half, capacity=299, parallel=p)
                                   for p in (False, True)))
    for name in names:
        assert np.array_equal(serial[name], parallel[name]), name


def test_overflow_names_the_longest_row_and_what_to_set():
    rng = np.random.default_rng(3)
    side = 3.6 * REACH
    x = random_positions(rng, 200, 3, side)
    longest = int(build(x, side, capacity=199).longest[None])  # the rows' own assignment
    with pytest.raises(NeighborListOverflow) as caught:
        build(x, side, capacity=longest - 1)
    assert str(caught.value) == (
        f"a particle has {longest} neighbours within cutoff + skin = {REACH:g} but the "
        f"neighbour list holds {longest - 1} per particle (the particles crowded together). "
        f"Set 'neighbors: {{max_neighbors: {2 * longest}}}' in the scene, or check for a "
        "collapse (dt too large, attraction too strong).")
    assert rows_of(build(x, side, capacity=longest), x, side) == brute_force(x, side, half=True)


def test_overflow_from_the_cli_is_one_paragraph_exit_2(tmp_path):
    lj = Path(__file__).resolve().parents[1] / "kernels" / "lj.py"
    scene = tmp_path / "crowded.yaml"
    scene.write_text(f"""version: 1
name: crowded
precision: f64
particles: {{count: 216, dim: 3, mass: 1.0}}
initial: {{type: lattice, shape: [6, 6, 6], spacing: [1.0, 1.0, 1.0]}}
boundary: {{type: periodic, low: [0, 0, 0], high: [6.0, 6.0, 6.0]}}
neighbors: {{cutoff: 2.5, skin: 0.3, max_neighbors: 4}}
energy:
  - kernel: {lj}:lj
integrator: velocity_verlet
dt: 0.001
steps: 2
""")
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "run", str(scene), "--allow-outside", "--out",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "neighbours within cutoff + skin = 2.8" in done.stderr
    assert "max_neighbors" in done.stderr
