"""Verlet neighbour lists with a skin, built by kernels from a cell list.

A scene with ``neighbors: {cutoff, skin}`` gets one list, bound to energy kernels by the name
``neighbors``: an i32 field of shape (N, capacity + 1), row i = [count, j_1, j_2, ...], each
pair within ``cutoff + skin`` listed once (half list: Newton's third law is the reverse pass's
scatter to x[j]): first the partners within ``cutoff`` at the build, then those in the skin,
each part in the order the search met them. A pair loop's `if r2 < cutoff^2` then goes one
way for most of a row and the other way for the rest, which the CPU predicts: in ascending
order (~30% of a row in the skin, scattered) the mispredictions made LJ's reverse pass 274
ns per atom instead of 152 (32,000 atoms, one thread). Before each force evaluation
``update`` measures how far any particle moved since the last build (one reduction kernel)
and rebuilds only when that exceeds half the skin.

A build bins the particles into cells (a counting sort, each cell's particles in index
order), then walks the cells: the rows of a cell's particles are filled together, so a
neighbour run's bounds and periodic shift are worked out once per home cell rather than
once per particle. The half list (``_search`` with ``span`` 2) uses cells half the reach
wide and a half stencil: the home cell's particles above i, then, in the upper half of the
5^(dim-1) columns around home (its own column only above home), each column's run of 5
cells along the last axis, one contiguous run of slots (13 runs in 3-D). Each pair is listed
once, in the row of the particle whose cell the stencil meets first (the same cell: the
lower index), so a row is not only j > i. Against 27 cells of side the reach, a particle
visits half the candidates (in.lj: 164 against 324) in as many runs: bench/README.md, "A
half stencil of half-reach cells". A full list, or a periodic box too small for 5 cells a
side (each pair then folded to its nearest image), takes ``_search``'s 3^dim cells of side
the reach (``span`` 0), with j > i in a half list. Each row is gathered into a scratch row
(one store per candidate, no branch on the pair, a skin partner marked) and copied out in
two branch-free passes, the partners within the cutoff then the skin's (rows need no order
beyond the partition, and a build from the same positions repeats its order).

A list over species whose pair kernels cut each type pair at its own cutoff (``ListPairs``,
set by ``by_type``) holds each pair within its own type pair's cutoff + skin, as LAMMPS's
multi-type list does (``cutneighsq[itype][jtype]``), and partitions each row at the pair's
own cutoff: Kob-Andersen's AB pairs reach 2.3, not 2.8. The half-skin rule is the same
(a pair within its cutoff now was within its cutoff + skin at the build). Without it the
search compiles as it did before (one reach, ``pairs`` None).

Every valid list holds the same pairs within the cutoff, so forces do not depend on when the
list was last built, to rounding: a pair that moved into the cutoff since the build comes
after the others, and its term is added in another order (so do fast math's lanes); that is
what lets the adjoint recompute a trajectory from a checkpoint without replaying the
forward's rebuild steps.
A resumed run rebuilds its list at the positions saved with the checkpoint (``x_ref``), so
it continues bit for bit, on any number of threads (the gradient's scatters add in an order
fixed by the data: codegen/schedule.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import simrun.lang as ti
from simrun.md import min_image
from simrun.scene import SceneError
from simrun.scene.limits import machine_memory
from simrun.stepper.neighbor_cells import _bin, _bin_parallel, _open_grid
from simrun.stepper.neighbor_search import _search, _search_parallel

HEADROOM = 1.5  # row capacity over the mean count in the densest expected state
LANES = 256  # the search's parallel tasks, each walking a run of cells with its own scratch


@ti.kernel
def _max_displacement(x: ti.template(), x_ref: ti.template(), box_low: ti.template(),
                      box_high: ti.template(), periodic: ti.template(), out: ti.template()):
    out[None] = 0.0
    for i in range(x.shape[0]):
        d = min_image(x[i] - x_ref[i], box_low, box_high, periodic)
        ti.atomic_max(out[None], d.dot(d))


class ListPairs:
    """Each type pair's reach for a list over species: the tables the search reads
    (``reach2``, ``cut2``: squared cutoff + skin and cutoff per type pair, and ``types``,
    each particle's type index). The cutoffs are the pair kernels' own (types x types)
    fields, elementwise largest over them, read again at each build; a write to one of
    them (a fit moving ``cutoff[A:B]``) makes the next update rebuild, so the list never
    misses a pair a new cutoff takes in. One past the list's cutoff is refused: the cells
    are sized for that reach, so its pairs could not be found (the kernels' LIMITS refuse
    it before, at load and wherever a job moves a KEY: simrun/keys/limits.py)."""

    def __init__(self, types: np.ndarray, cutoffs: list[Any], cutoff: float, skin: float,
                 fp: Any) -> None:
        count = cutoffs[0].shape[0]
        self.types = ti.field(ti.i32, shape=len(types))
        self.types.from_numpy(np.ascontiguousarray(types, dtype=np.int32))
        self.reach2 = ti.field(fp, shape=(count, count))
        self.cut2 = ti.field(fp, shape=(count, count))
        self.cutoffs, self.cutoff, self.skin = list(cutoffs), cutoff, skin
        self.versions: list[int] | None = None

    def stale(self) -> bool:
        """A cutoff field was written since the tables were read."""
        return self.versions != [f.version for f in self.cutoffs]

    def refresh(self) -> None:
        """Read the tables from the cutoff fields."""
        cut = np.maximum.reduce([f.to_numpy().astype(float) for f in self.cutoffs])
        if (cut > self.cutoff).any():
            a, b = np.argwhere(cut > self.cutoff)[0]
            raise SceneError(
                f"the per-pair cutoff of the type pair {a},{b} is {cut[a, b]:g}, past the "
                f"neighbour list's cutoff {self.cutoff:g}: the list holds no pair beyond "
                "its cutoff plus the skin, so the pairs in between would be left out of the "
                "energy and forces. Raise 'neighbors.cutoff' in the scene, or keep the "
                "pair's cutoff within it (a kernel module's LIMITS can require 'cutoff <= "
                "list_cutoff', as kernels/lj.py's do).")
        self.cut2.from_numpy(cut * cut)
        self.reach2.from_numpy((cut + self.skin) ** 2)
        self.versions = [f.version for f in self.cutoffs]


class NeighborListOverflow(Exception):
    """A row needed more room than the list holds (the message says what to set)."""


class NeighborList:
    """The scene's Verlet list and the cell grid it is built from."""

    def __init__(self, cutoff: float, skin: float, x0: np.ndarray, boundary: Any, fp: Any,
                 box: dict[str, Any], capacity: int | None = None, half: bool = True) -> None:
        """``half``: each pair once (the engine's list; a full list, each pair in both
        rows, is kept for bench/lj_neighbors.py, which measured it slower)."""
        self.cutoff, self.skin, self.box, self.half, self.fp = cutoff, skin, box, half, fp
        self.reach = cutoff + skin
        n, self.dim = x0.shape
        self.periodic = boundary.type == "periodic"
        extent = (np.asarray(boundary.high) - np.asarray(boundary.low) if self.periodic
                  else np.ptp(x0, axis=0))
        if capacity is None:
            volume = float(np.prod(np.maximum(extent, self.reach)))
            ball = math.pi * self.reach ** 2 if self.dim == 2 else \
                4.0 / 3.0 * math.pi * self.reach ** 3
            capacity = int(math.ceil(HEADROOM * n / volume * ball)) + 8
        self.capacity = max(1, min(capacity, n - 1))
        self.max_cells = max(1, int(math.ceil(n ** (1.0 / self.dim))) + 2)
        ncells = self.max_cells ** self.dim
        self.fold = False  # a periodic side of fewer than 3 cells: the search folds each pair
        # cells of reach / span and _search's half stencil (span 0: its 3^dim
        # cells of side reach, for a full list or a folded box)
        self.span = 2 if half else 0
        if self.periodic:
            for span in (self.span, 0):  # span 0 fits any box
                cells = np.maximum(np.floor(extent * max(span, 1) / self.reach).astype(int), 1)
                if (cells >= 2 * span + 1).all():
                    break
            self.span, self.fold = span, bool((cells < 3).any())
            ncells = int(np.prod(cells))
        self.neighbors = ti.field(ti.i32, shape=(n, self.capacity + 1))
        self.neighbors.distinct_rows = True  # row i's 1..count are distinct: codegen/parallel.py
        self.x_ref = ti.Vector.field(self.dim, dtype=fp, shape=n)
        self.grid = ti.Vector.field(self.dim, dtype=ti.i32, shape=())
        self.grid_low = ti.Vector.field(self.dim, dtype=fp, shape=())
        self.grid_width = ti.Vector.field(self.dim, dtype=fp, shape=())
        self.cell_start = ti.field(ti.i32, shape=ncells + 1)
        self.cell_fill = ti.field(ti.i32, shape=ncells + 1)
        self.cell_particles = ti.field(ti.i32, shape=n)
        self.cell_x = ti.Vector.field(self.dim, dtype=fp, shape=n)
        self.fullest = ti.field(ti.i32, shape=())
        self.lanes = max(1, min(LANES, ncells))
        self.unsorted = self._scratch(max(16, 2 * -(-n // ncells)))
        self.moved = ti.field(fp, shape=())
        self.longest = ti.field(ti.i32, shape=())
        if self.periodic:
            self.grid[None] = cells.tolist()
            self.grid_low[None] = list(boundary.low)
            self.grid_width[None] = (extent / cells).tolist()
        self.built = False
        self.rebuilds = 0
        self.pairs: ListPairs | None = None  # one reach for every pair (by_type sets one each)
        # a GPU runs _bin's serial loops and _search's 256 lanes on that many threads
        self.parallel = ti.api.config.arch == "cuda"

    def by_type(self, types: np.ndarray, cutoffs: list[Any]) -> None:
        """Hold each pair within its own type pair's cutoff + skin: ``types`` is each
        particle's type index, ``cutoffs`` the (types x types) fields of the pair kernels
        that read the list (a pair beyond its value in every one of them adds nothing)."""
        self.pairs = ListPairs(types, cutoffs, self.cutoff, self.skin, self.fp)
        self.built = False

    def update(self, x: Any) -> bool:
        """Rebuild the list if any particle moved more than half the skin since the last
        build (or none was built, or a pair's cutoff changed); True when it rebuilt."""
        b = self.box
        if self.built and (self.pairs is None or not self.pairs.stale()):
            _max_displacement(x, self.x_ref, b["box_low"], b["box_high"], b["periodic"],
                              self.moved)
            if float(self.moved[None]) <= (0.5 * self.skin) ** 2:
                return False
        self.build(x)
        return True

    def bin(self, x: Any) -> None:
        """Sort the particles into cells (the first half of a build)."""
        b = self.box
        if not self.periodic:
            _open_grid(x, self.grid, self.grid_low, self.grid_width,
                       self.reach / max(self.span, 1), self.max_cells, x.shape[0], self.dim)
        cells = (x, self.x_ref, b["box_low"], b["box_high"], b["periodic"], self.grid,
                 self.grid_low, self.grid_width, self.cell_start, self.cell_fill,
                 self.cell_particles, self.cell_x, self.fullest)
        if self.parallel:
            _bin_parallel(*cells, self.dim)
        else:  # the count at run time: see _bin
            _bin(*cells, x.shape[0], self.dim)

    def _scratch_shape(self, fullest: int) -> tuple[int, int, int]:
        """Each lane's rows for gathering a home cell's rows unsorted: one per particle of
        a cell holding up to ``fullest``, with room for the capacity plus one more run of
        cells (2 span + 1 of them)."""
        return self.lanes, fullest, self.capacity + (2 * self.span + 1) * fullest

    def _scratch(self, fullest: int) -> Any:
        return ti.field(ti.i32, shape=self._scratch_shape(fullest))

    def search(self) -> None:
        """Fill the rows from the cells ``bin`` made (the second half of a build)."""
        b = self.box
        if self.parallel:
            _search_parallel(b["box_low"], b["box_high"], b["periodic"], self.grid,
                             self.cell_start, self.cell_particles, self.cell_x,
                             self.neighbors, self.reach ** 2, self.cutoff ** 2, self.longest,
                             self.dim, self.half, self.fold, self.span, self.pairs)
            return
        fullest = int(self.fullest[None])
        needed = 4 * math.prod(self._scratch_shape(2 * fullest))  # i32s, the grown scratch
        if self.unsorted.shape[1] < fullest and needed > (machine_memory() or needed):
            raise NeighborListOverflow(
                f"{fullest:,} of the particles crowded into one cell of side about "
                f"{self.reach / max(self.span, 1):g} (cutoff + skin = {self.reach:g}; sorting "
                f"it needs {needed / 1e9:,.0f} GB): "
                "check the initial state (particles outside a periodic box, or on top of "
                "each other) and whether the scene collapses (dt too large, attraction too "
                "strong).")
        if self.unsorted.shape[1] < fullest:
            self.unsorted = self._scratch(2 * fullest)
        _search(b["box_low"], b["box_high"], b["periodic"], self.grid, self.cell_start,
                self.cell_particles, self.cell_x, self.unsorted, self.neighbors,
                self.reach ** 2, self.cutoff ** 2, self.longest, self.dim, self.half,
                self.fold, self.span, self.pairs)

    def build(self, x: Any) -> None:
        if self.pairs is not None:
            self.pairs.refresh()
        self.bin(x)
        self.search()
        self.built = True
        self.rebuilds += 1
        longest = int(self.longest[None])
        if longest > self.capacity:
            raise NeighborListOverflow(
                f"a particle has {longest} neighbours within cutoff + skin = {self.reach:g} "
                f"but the neighbour list holds {self.capacity} per particle (the particles "
                f"crowded together). Set 'neighbors: {{max_neighbors: {2 * longest}}}' in the "
                "scene, or check for a collapse (dt too large, attraction too strong).")
