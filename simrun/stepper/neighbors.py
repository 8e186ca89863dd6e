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

A build bins the particles into cells at least ``cutoff + skin`` wide (a counting sort, each
cell's particles in index order), then walks the cells: the rows of a cell's particles are
filled together from the 3^dim cells around it, so a neighbour cell's bounds and periodic
shift are worked out once per pair of cells rather than once per particle, and (half list)
where j > i starts in a neighbour cell only moves on as i rises through the home cell. Each
row is gathered into a scratch row (one store per candidate, no branch on the pair, a skin
partner marked) and copied out in two branch-free passes, the partners within the cutoff
then the skin's (it was sorted by rank before: ~100 ns per atom more a build; rows need no
order beyond the partition, and a build from the same positions repeats its order). Cells
of half the reach with a stencil (LAMMPS's bins) visit fewer candidates but cost more per
particle here: bench/README.md, "The list build, round 2".

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
from simrun.scene.limits import machine_memory

HEADROOM = 1.5  # row capacity over the mean count in the densest expected state
LANES = 256  # the search's parallel tasks, each walking a run of cells with its own scratch


@ti.func
def _wrapped(p, box_low: ti.template(), box_high: ti.template(), periodic: ti.template()):
    q = p
    if ti.static(periodic):
        box = box_high[None] - box_low[None]
        q = p - box * ti.floor((p - box_low[None]) / box)
    return q


@ti.func
def _cell_coords(p, grid: ti.template(), grid_low: ti.template(), grid_width: ti.template()):
    c = ti.cast(ti.floor((p - grid_low[None]) / grid_width[None]), ti.i32)
    return ti.min(ti.max(c, 0), grid[None] - 1)


@ti.func
def _linear(c, grid: ti.template(), dim: ti.template()):
    index = 0
    for d in ti.static(range(dim)):
        index = index * grid[None][d] + c[d]
    return index


@ti.kernel
def _max_displacement(x: ti.template(), x_ref: ti.template(), box_low: ti.template(),
                      box_high: ti.template(), periodic: ti.template(), out: ti.template()):
    out[None] = 0.0
    for i in range(x.shape[0]):
        d = min_image(x[i] - x_ref[i], box_low, box_high, periodic)
        ti.atomic_max(out[None], d.dot(d))


@ti.kernel
def _open_grid(x: ti.template(), grid: ti.template(), grid_low: ti.template(),
               grid_width: ti.template(), reach: float, max_cells: ti.i32, dim: ti.template()):
    """Cells of width >= reach over the particles' bounding box (open boxes, each build)."""
    lo = x[0]
    hi = x[0]
    ti.loop_config(serialize=True)
    for i in range(x.shape[0]):
        lo = ti.min(lo, x[i])
        hi = ti.max(hi, x[i])
    ti.loop_config(serialize=True)
    for _ in range(1):
        for d in ti.static(range(dim)):
            cells = ti.min(ti.max(ti.cast(ti.floor((hi[d] - lo[d]) / reach), ti.i32), 1),
                           max_cells)
            grid[None][d] = cells
            grid_low[None][d] = lo[d]
            grid_width[None][d] = ti.max((hi[d] - lo[d]) / cells, reach)


@ti.kernel
def _bin(x: ti.template(), x_ref: ti.template(), box_low: ti.template(),
         box_high: ti.template(), periodic: ti.template(), grid: ti.template(),
         grid_low: ti.template(), grid_width: ti.template(), cell_start: ti.template(),
         cell_fill: ti.template(), cell_particles: ti.template(), cell_x: ti.template(),
         fullest: ti.template(), dim: ti.template()):
    """Counting sort of the particles by cell (serial: cells hold particles in index order),
    with their wrapped positions in the same order (``cell_x``: the search reads a cell's
    positions from one contiguous run), and the most particles any cell holds."""
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    ti.loop_config(serialize=True)
    for c in range(ncells + 1):
        cell_start[c] = 0
        cell_fill[c] = 0
    ti.loop_config(serialize=True)
    for i in range(x.shape[0]):
        p = _wrapped(x[i], box_low, box_high, periodic)
        x_ref[i] = x[i]
        c = _linear(_cell_coords(p, grid, grid_low, grid_width), grid, dim)
        cell_start[c + 1] += 1
    fullest[None] = 0
    ti.loop_config(serialize=True)
    for c in range(ncells):
        fullest[None] = ti.max(fullest[None], cell_start[c + 1])
        cell_start[c + 1] += cell_start[c]
    ti.loop_config(serialize=True)
    for i in range(x.shape[0]):
        p = _wrapped(x[i], box_low, box_high, periodic)
        c = _linear(_cell_coords(p, grid, grid_low, grid_width), grid, dim)
        slot = cell_start[c] + cell_fill[c]
        cell_particles[slot] = i
        cell_x[slot] = p
        cell_fill[c] += 1


@ti.kernel
def _bin_parallel(x: ti.template(), x_ref: ti.template(), box_low: ti.template(),
                  box_high: ti.template(), periodic: ti.template(), grid: ti.template(),
                  grid_low: ti.template(), grid_width: ti.template(),
                  cell_start: ti.template(), cell_fill: ti.template(),
                  cell_particles: ti.template(), cell_x: ti.template(), fullest: ti.template(),
                  dim: ti.template()):
    """_bin's cells from parallel loops (a GPU runs _bin's on one thread): counts and
    places by integer atomics, one running sum over the cells, then each cell's particles
    sorted by index, so every cell holds what _bin puts there, in the same order."""
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    for c in range(ncells + 1):
        cell_start[c] = 0
        cell_fill[c] = 0
    for i in range(x.shape[0]):
        x_ref[i] = x[i]
        c = _linear(_cell_coords(_wrapped(x[i], box_low, box_high, periodic), grid, grid_low,
                                 grid_width), grid, dim)
        ti.atomic_add(cell_start[c + 1], 1)
    ti.loop_config(serialize=True)
    for _ in range(1):
        running = 0
        most = 0
        for c in range(ncells):
            count = cell_start[c + 1]
            most = ti.max(most, count)
            running += count
            cell_start[c + 1] = running
        fullest[None] = most
    for i in range(x.shape[0]):
        c = _linear(_cell_coords(_wrapped(x[i], box_low, box_high, periodic), grid, grid_low,
                                 grid_width), grid, dim)
        cell_particles[cell_start[c] + ti.atomic_add(cell_fill[c], 1)] = i
    for c in range(ncells):  # insertion sort: a cell holds a few dozen at most
        first, last = cell_start[c], cell_start[c + 1]
        for a in range(first + 1, last):
            moving = cell_particles[a]
            b = a - 1
            while b >= first and cell_particles[ti.max(b, 0)] > moving:
                cell_particles[b + 1] = cell_particles[b]
                b -= 1
            cell_particles[b + 1] = moving
    for slot in range(x.shape[0]):
        cell_x[slot] = _wrapped(x[cell_particles[slot]], box_low, box_high, periodic)


@ti.func
def _coords(cell, grid: ti.template(), dim: ti.template()):
    """Grid coordinates of a linear cell index (the inverse of ``_linear``)."""
    c = grid[None] * 0
    rest = cell
    for e in ti.static(range(dim)):
        c[dim - 1 - e] = rest % grid[None][dim - 1 - e]
        rest = rest // grid[None][dim - 1 - e]
    return c


@ti.func
def _around(home, s, box, grid: ti.template(), periodic: ti.template(), dim: ti.template()):
    """The ``s``-th of the 3^dim cells around ``home``: its linear index, the shift that
    brings its positions next to home's, and 1 when it exists (an open box ends)."""
    c = home
    shift = box * 0.0
    inside = 1
    for d in ti.static(range(dim)):
        offset = (s // (3 ** (dim - 1 - d))) % 3
        n = grid[None][d]
        if ti.static(periodic):
            if n >= 3:
                c[d] = home[d] + offset - 1
                if c[d] < 0:
                    c[d] += n
                    shift[d] = -box[d]
                elif c[d] >= n:
                    c[d] -= n
                    shift[d] = box[d]
            else:  # fewer than 3 cells: visit each cell once, by absolute index
                c[d] = offset
                if offset >= n:
                    inside = 0
        else:
            c[d] = home[d] + offset - 1
            if c[d] < 0 or c[d] >= n:
                inside = 0
    return _linear(c, grid, dim), shift, inside


@ti.func
def _gather(lane, cell, shift, home_first, home_last, fold: ti.template(),
            box_low: ti.template(), box_high: ti.template(), periodic: ti.template(),
            cell_start: ti.template(), cell_particles: ti.template(), cell_x: ti.template(),
            unsorted: ti.template(), neighbors: ti.template(), reach2, cut2,
            half: ti.template()):
    """Append to the rows of the home cell's particles (the lane's scratch rows) their
    partners in ``cell``; ``neighbors[i, 0]`` counts each row's partners found so far (past
    capacity too). A partner beyond the cutoff (in the skin) is entered as j + N."""
    capacity = neighbors.shape[1] - 1
    top = cell_particles.shape[0] - 1
    n = cell_particles.shape[0]
    first, last = cell_start[cell], cell_start[cell + 1]
    for home_slot in range(home_first, home_last):
        i = cell_particles[home_slot]
        origin = cell_x[home_slot] - shift
        if ti.static(half):  # both cells list their particles in index order: the j > i
            # start only moves on (both sides of `and` are evaluated: the index stays valid)
            while first < last and cell_particles[ti.min(first, top)] <= i:
                first += 1
        found = neighbors[i, 0]
        base = ti.min(found, capacity)
        count = base
        for slot in range(first, last):
            j = cell_particles[slot]
            r = cell_x[slot] - origin
            if ti.static(fold):
                r = min_image(r, box_low, box_high, periodic)
            # no branch on the pair: j goes to the next free place (a row has room for
            # capacity + the fullest cell), and counts when within reach
            r2 = r.dot(r)
            unsorted[lane, home_slot - home_first, count] = j + n * ti.cast(r2 >= cut2, ti.i32)
            within = ti.cast(r2 < reach2, ti.i32)
            if ti.static(not half):
                within = within & ti.cast(j != i, ti.i32)
            count += within
        neighbors[i, 0] = found + count - base


@ti.func
def _partition_row(i, lane, row, unsorted: ti.template(), neighbors: ti.template()):
    """Row i from the lane's scratch row ``row``: the partners within the cutoff (key j),
    then those in the skin (key j + N), each in gathered order. Returns how many partners
    i has (past capacity too)."""
    found = neighbors[i, 0]
    filled = ti.min(found, neighbors.shape[1] - 1)
    neighbors[i, 0] = filled
    n = neighbors.shape[0]
    at = 1
    for a in range(filled):  # within the cutoff (key j), in gathered order; the others'
        key = unsorted[lane, row, a]  # writes land where the next entry goes
        neighbors[i, at] = key
        at += ti.cast(key < n, ti.i32)
    for a in range(filled):  # then the skin's (key j + N); a write past the row's end
        key = unsorted[lane, row, a]  # goes to the count, set again below
        neighbors[i, at * ti.cast(at <= filled, ti.i32)] = key - n
        at += ti.cast(key >= n, ti.i32)
    neighbors[i, 0] = filled
    return found


@ti.kernel
def _search(box_low: ti.template(), box_high: ti.template(), periodic: ti.template(),
            grid: ti.template(), cell_start: ti.template(), cell_particles: ti.template(),
            cell_x: ti.template(), unsorted: ti.template(), neighbors: ti.template(),
            reach2: float, cut2: float, longest: ti.template(), dim: ti.template(),
            half: ti.template(),
            fold: ti.template()):
    """Row i: every j > i (every j != i unless ``half``) within sqrt(reach2): those within
    sqrt(cut2) first, then the others.

    Periodic with at least 3 cells a side, a neighbour cell across the box is one image
    away: its positions are shifted by the box length once per cell, not folded pair by
    pair (the minimum image is unique within reach: the box is at least twice as wide).
    With fewer than 3 cells on a periodic side (``fold``), each pair is folded instead.
    Each of the ``unsorted.shape[0]`` lanes walks its own run of cells with its own scratch
    rows, one per particle of the home cell (they stay in cache from cell to cell)."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    lanes = unsorted.shape[0]
    for lane in range(lanes):
        most = 0  # the lane's longest row: one atomic a lane, not one a particle
        start = lane * (ncells // lanes) + ti.min(lane, ncells % lanes)  # no i32 overflow
        for home_cell in range(start, start + ncells // lanes + ti.cast(lane < ncells % lanes,
                                                                          ti.i32)):
            home = _coords(home_cell, grid, dim)
            home_first, home_last = cell_start[home_cell], cell_start[home_cell + 1]
            for slot in range(home_first, home_last):
                neighbors[cell_particles[slot], 0] = 0
            for s in range(3 ** dim):
                cell, shift, inside = _around(home, s, box, grid, periodic, dim)
                if inside == 1:
                    _gather(lane, cell, shift, home_first, home_last, fold, box_low, box_high,
                            periodic, cell_start, cell_particles, cell_x, unsorted, neighbors,
                            reach2, cut2, half)
            for slot in range(home_first, home_last):
                most = ti.max(most, _partition_row(cell_particles[slot], lane,
                                                   slot - home_first, unsorted, neighbors))
        ti.atomic_max(longest[None], most)


@ti.kernel
def _search_parallel(box_low: ti.template(), box_high: ti.template(), periodic: ti.template(),
                     grid: ti.template(), cell_start: ti.template(),
                     cell_particles: ti.template(), cell_x: ti.template(),
                     neighbors: ti.template(), reach2: float, cut2: float,
                     longest: ti.template(), dim: ti.template(), half: ti.template(),
                     fold: ti.template()):
    """_search's rows with one thread a particle and no scratch (a GPU runs _search's 256
    lanes on 256 threads): each row walks the 3^dim cells twice, taking the partners
    within the cutoff, then those in the skin, each in the cells' order, so the rows are
    _search's, entry for entry. Threads take the particles in cell order: neighbouring
    threads read the same cells."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    capacity = neighbors.shape[1] - 1
    for home_slot in range(cell_particles.shape[0]):
        lo, hi = 0, ncells  # the home cell: the last whose start is at or before home_slot
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cell_start[mid] <= home_slot:
                lo = mid
            else:
                hi = mid
        home = _coords(lo, grid, dim)
        i = cell_particles[home_slot]
        found = 0
        for skin in ti.static(range(2)):
            for s in range(3 ** dim):
                cell, shift, inside = _around(home, s, box, grid, periodic, dim)
                if inside == 1:
                    origin = cell_x[home_slot] - shift
                    for slot in range(cell_start[cell], cell_start[cell + 1]):
                        j = cell_particles[slot]
                        r = cell_x[slot] - origin
                        if ti.static(fold):
                            r = min_image(r, box_low, box_high, periodic)
                        r2 = r.dot(r)
                        take = j != i
                        if ti.static(half):
                            take = j > i
                        if ti.static(skin):
                            take = take and r2 >= cut2 and r2 < reach2
                        else:
                            take = take and r2 < cut2
                        if take:
                            found += 1
                            if found <= capacity:
                                neighbors[i, found] = j
        neighbors[i, 0] = ti.min(found, capacity)
        ti.atomic_max(longest[None], found)


class NeighborListOverflow(Exception):
    """A row needed more room than the list holds (the message says what to set)."""


class NeighborList:
    """The scene's Verlet list and the cell grid it is built from."""

    def __init__(self, cutoff: float, skin: float, x0: np.ndarray, boundary: Any, fp: Any,
                 box: dict[str, Any], capacity: int | None = None, half: bool = True) -> None:
        """``half``: each pair once (the engine's list; a full list, each pair in both
        rows, is kept for bench/lj_neighbors.py, which measured it slower)."""
        self.cutoff, self.skin, self.box, self.half = cutoff, skin, box, half
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
        if self.periodic:
            cells = np.maximum(np.floor(extent / self.reach).astype(int), 1)
            ncells = int(np.prod(cells))
            self.fold = bool((cells < 3).any())
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
        # a GPU runs _bin's serial loops and _search's 256 lanes on that many threads
        self.parallel = ti.api.config.arch == "cuda"

    def update(self, x: Any) -> bool:
        """Rebuild the list if any particle moved more than half the skin since the last
        build (or none was built); True when it rebuilt."""
        b = self.box
        if self.built:
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
            _open_grid(x, self.grid, self.grid_low, self.grid_width, self.reach,
                       self.max_cells, self.dim)
        (_bin_parallel if self.parallel else _bin)(
            x, self.x_ref, b["box_low"], b["box_high"], b["periodic"], self.grid,
            self.grid_low, self.grid_width, self.cell_start, self.cell_fill,
            self.cell_particles, self.cell_x, self.fullest, self.dim)

    def _scratch(self, fullest: int) -> Any:
        """Each lane's rows for gathering a home cell's rows unsorted: one per particle of
        a cell holding up to ``fullest``, with room for the capacity plus one more cell."""
        return ti.field(ti.i32, shape=(self.lanes, fullest, self.capacity + fullest))

    def search(self) -> None:
        """Fill the rows from the cells ``bin`` made (the second half of a build)."""
        b = self.box
        if self.parallel:
            _search_parallel(b["box_low"], b["box_high"], b["periodic"], self.grid,
                             self.cell_start, self.cell_particles, self.cell_x,
                             self.neighbors, self.reach ** 2, self.cutoff ** 2, self.longest,
                             self.dim, self.half, self.fold)
            return
        fullest = int(self.fullest[None])
        needed = 4 * self.lanes * 2 * fullest * (self.capacity + 2 * fullest)
        if self.unsorted.shape[1] < fullest and needed > (machine_memory() or needed):
            raise NeighborListOverflow(
                f"{fullest:,} of the particles crowded into one cell of side about "
                f"cutoff + skin = {self.reach:g} (sorting it needs {needed / 1e9:,.0f} GB): "
                "check the initial state (particles outside a periodic box, or on top of "
                "each other) and whether the scene collapses (dt too large, attraction too "
                "strong).")
        if self.unsorted.shape[1] < fullest:
            self.unsorted = self._scratch(2 * fullest)
        _search(b["box_low"], b["box_high"], b["periodic"], self.grid, self.cell_start,
                self.cell_particles, self.cell_x, self.unsorted, self.neighbors,
                self.reach ** 2, self.cutoff ** 2, self.longest, self.dim, self.half,
                self.fold)

    def build(self, x: Any) -> None:
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
