"""The neighbour-list searches: the rows of each home cell's particles from the cells
around it (``_search_runs``: the half stencil; ``_search``: 3^dim cells of side the reach, a
full list or a folded box) and their one-thread-a-particle forms for a GPU
(``_search_runs_parallel``, ``_search_parallel``), which make the same rows entry for entry.
simrun/stepper/neighbors.py says why the rows look as they do."""

from __future__ import annotations

import simrun.lang as ti
from simrun.md import min_image
from simrun.stepper.neighbor_cells import _around, _column, _coords, _piece


@ti.func
def _gather(lane, first, last, shift, home_first, home_last, above: ti.template(),
            fold: ti.template(), box_low: ti.template(), box_high: ti.template(),
            periodic: ti.template(), cell_particles: ti.template(), cell_x: ti.template(),
            unsorted: ti.template(), neighbors: ti.template(), reach2, cut2,
            half: ti.template()):
    """Append to the rows of the home cell's particles (the lane's scratch rows) their
    partners in the slots [first, last) (one cell, or a run of cells along the last axis);
    ``neighbors[i, 0]`` counts each row's partners found so far (past capacity too). A
    partner beyond the cutoff (in the skin) is entered as j + N. ``above``: only j > i."""
    capacity = neighbors.shape[1] - 1
    top = cell_particles.shape[0] - 1
    n = cell_particles.shape[0]
    for home_slot in range(home_first, home_last):
        i = cell_particles[home_slot]
        origin = cell_x[home_slot] - shift
        if ti.static(above):  # both runs list their particles in index order: the j > i
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
    sqrt(cut2) first, then the others (a full list, or a folded box: _search_runs takes
    the half list of a box with 5 half-reach cells a side).

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
                    _gather(lane, cell_start[cell], cell_start[cell + 1], shift, home_first,
                            home_last, half, fold, box_low, box_high, periodic, cell_particles,
                            cell_x, unsorted, neighbors, reach2, cut2, half)
            for slot in range(home_first, home_last):
                most = ti.max(most, _partition_row(cell_particles[slot], lane,
                                                   slot - home_first, unsorted, neighbors))
        ti.atomic_max(longest[None], most)


@ti.kernel
def _search_runs(box_low: ti.template(), box_high: ti.template(), periodic: ti.template(),
                 grid: ti.template(), cell_start: ti.template(), cell_particles: ti.template(),
                 cell_x: ti.template(), unsorted: ti.template(), neighbors: ti.template(),
                 reach2: float, cut2: float, longest: ti.template(), dim: ti.template(),
                 span: ti.template()):
    """_search's half list from a half stencil: each pair once, in the row of the particle
    whose cell comes first in the stencil's order (the same cell: the lower index). Cells are
    at least reach / span wide; the stencil is the home cell's particles above i, then runs
    of cells along the last axis (contiguous slots: one loop each) in the columns of the
    upper half of the (2 span + 1)^(dim - 1) around home, its own column's run only above
    home. With span 2 a particle visits ~(5/3)^3 / 2 fewer candidates than the 27 cells of
    side reach, in about as many runs (13 in 3-D)."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    height = grid[None][dim - 1]
    columns = ti.static((2 * span + 1) ** (dim - 1))
    centre = ti.static((2 * span + 1) ** (dim - 1) // 2)
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
            _gather(lane, home_first, home_last, box * 0.0, home_first, home_last, True, False,
                    box_low, box_high, periodic, cell_particles, cell_x, unsorted, neighbors,
                    reach2, cut2, True)
            for q in range(centre, columns):
                column, shift, inside = _column(home, q, span, box, grid, periodic, dim)
                for piece in range(3):
                    lo, hi, shift[dim - 1] = _piece(home[dim - 1], q == centre, span, piece,
                                                    height, box[dim - 1], periodic)
                    if inside == 1 and lo <= hi:
                        _gather(lane, cell_start[column * height + lo],
                                cell_start[column * height + hi + 1], shift, home_first,
                                home_last, False, False, box_low, box_high, periodic,
                                cell_particles, cell_x, unsorted, neighbors, reach2, cut2,
                                True)
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


@ti.kernel
def _search_runs_parallel(box_low: ti.template(), box_high: ti.template(),
                          periodic: ti.template(), grid: ti.template(),
                          cell_start: ti.template(), cell_particles: ti.template(),
                          cell_x: ti.template(), neighbors: ti.template(), reach2: float,
                          cut2: float, longest: ti.template(), dim: ti.template(),
                          span: ti.template()):
    """_search_runs' rows with one thread a particle and no scratch, as _search_parallel
    does _search's: each row walks its stencil twice (within the cutoff, then the skin), in
    _search_runs' order, so the rows are _search_runs', entry for entry."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    height = grid[None][dim - 1]
    columns = ti.static((2 * span + 1) ** (dim - 1))
    centre = ti.static((2 * span + 1) ** (dim - 1) // 2)
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
            for run in range(1 + 3 * (columns - centre)):  # home's cell, then the pieces
                first, last = home_slot + 1, cell_start[lo + 1]
                shift = box * 0.0
                if run > 0:
                    column, shift, inside = _column(home, centre + (run - 1) // 3, span, box,
                                                    grid, periodic, dim)
                    a, b, shift[dim - 1] = _piece(home[dim - 1], (run - 1) // 3 == 0, span,
                                                  (run - 1) % 3, height, box[dim - 1],
                                                  periodic)
                    first = cell_start[column * height + ti.min(a, height - 1)]
                    last = cell_start[column * height + ti.min(ti.max(b, 0), height - 1) + 1]
                    if inside == 0 or a > b:
                        last = first
                origin = cell_x[home_slot] - shift
                for slot in range(first, last):
                    j = cell_particles[slot]
                    r = cell_x[slot] - origin
                    r2 = r.dot(r)
                    take = r2 < cut2
                    if ti.static(skin):
                        take = r2 >= cut2 and r2 < reach2
                    if take:
                        found += 1
                        if found <= capacity:
                            neighbors[i, found] = j
        neighbors[i, 0] = ti.min(found, capacity)
        ti.atomic_max(longest[None], found)
