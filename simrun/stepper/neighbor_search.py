"""The neighbour-list search: the rows of each home cell's particles from the cells around
it, by a half stencil of cells half the reach wide (``span`` 2) or by the 3^dim cells of side
the reach (``span`` 0: a full list, or a folded box), and its one-thread-a-particle form for
a GPU (``_search_parallel``), which makes the same rows entry for entry.
simrun/stepper/neighbors.py says why the rows look as they do."""

from __future__ import annotations

import simrun.lang as ti
from simrun.md import min_image
from simrun.stepper.neighbor_cells import (
    _around,
    _cell_count,
    _column,
    _coords,
    _home_cell,
    _piece,
)


@ti.func
def _candidate(slot, origin, fold: ti.template(), box_low: ti.template(),
               box_high: ti.template(), periodic: ti.template(), cell_particles: ti.template(),
               cell_x: ti.template()):
    """The particle in ``slot`` and its squared distance from ``origin`` (folded to the
    nearest image in a folded box)."""
    r = cell_x[slot] - origin
    if ti.static(fold):
        r = min_image(r, box_low, box_high, periodic)
    return cell_particles[slot], r.dot(r)


@ti.func
def _limits(pairs: ti.template(), i, j, reach2, cut2):
    """The squared reach and cutoff of the pair (i, j): its type pair's (``pairs``, a
    ListPairs), or ``reach2`` and ``cut2`` for every pair (``pairs`` None: the list of one
    reach compiles as it did before per-pair reaches)."""
    pair_reach2, pair_cut2 = reach2, cut2
    if ti.static(pairs is not None):
        a, b = pairs.types[i], pairs.types[j]
        pair_reach2, pair_cut2 = pairs.reach2[a, b], pairs.cut2[a, b]
    return pair_reach2, pair_cut2


@ti.func
def _gather(lane, first, last, shift, home_first, home_last, above: ti.template(),
            fold: ti.template(), box_low: ti.template(), box_high: ti.template(),
            periodic: ti.template(), cell_particles: ti.template(), cell_x: ti.template(),
            unsorted: ti.template(), neighbors: ti.template(), reach2, cut2,
            half: ti.template(), pairs: ti.template()):
    """Append to the rows of the home cell's particles (the lane's scratch rows) their
    partners in the slots [first, last) (one cell, or a run of cells along the last axis);
    ``neighbors[i, 0]`` counts each row's partners found so far (past capacity too). A
    partner beyond the cutoff (in the skin) is entered as j + N. ``above``: only j > i.
    ``pairs``: the ListPairs whose tables give each type pair's reach2 and cut2, or None
    (every pair's are ``reach2`` and ``cut2``)."""
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
            # no branch on the pair: j goes to the next free place (a row has room for
            # capacity + the fullest run), and counts when within reach
            j, r2 = _candidate(slot, origin, fold, box_low, box_high, periodic,
                               cell_particles, cell_x)
            pair_reach2, pair_cut2 = _limits(pairs, i, j, reach2, cut2)
            unsorted[lane, home_slot - home_first, count] = j + n * ti.cast(r2 >= pair_cut2,
                                                                            ti.i32)
            within = ti.cast(r2 < pair_reach2, ti.i32)
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
            half: ti.template(), fold: ti.template(), span: ti.template(),
            pairs: ti.template()):
    """Row i: its partners within sqrt(reach2), those within sqrt(cut2) first, then the
    others (with ``pairs``, a ListPairs: the pair's type pair's reach2 and cut2). Each of the ``unsorted.shape[0]`` lanes walks its own run of cells with its own
    scratch rows, one per particle of the home cell (they stay in cache from cell to cell).

    ``span`` 2 (a half list): cells at least reach / 2 wide and a half stencil, each pair
    once, in the row of the particle whose cell the stencil meets first (the same cell: the
    lower index): the home cell's particles above i, then, in the upper half of the
    5^(dim - 1) columns around home (all axes but the last), each column's run of 5 cells
    along the last axis, one loop over contiguous slots (home's own column: only the cells
    above home). A periodic side holds at least 5 cells; a run across the box is cut into
    pieces, each shifted by the box length once.

    ``span`` 0: the 3^dim cells of side at least the reach around home, every j > i (every
    j != i unless ``half``). Periodic with at least 3 cells a side, a neighbour cell across
    the box is one image away: its positions are shifted by the box length once per cell,
    not folded pair by pair (the minimum image is unique within reach: the box is at least
    twice as wide). With fewer than 3 cells on a periodic side (``fold``), each pair is
    folded instead."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = _cell_count(grid, dim)
    height = grid[None][dim - 1]
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
            if ti.static(span == 0):
                for s in range(3 ** dim):
                    cell, shift, inside = _around(home, s, box, grid, periodic, dim)
                    if inside == 1:
                        _gather(lane, cell_start[cell], cell_start[cell + 1], shift,
                                home_first, home_last, half, fold, box_low, box_high, periodic,
                                cell_particles, cell_x, unsorted, neighbors, reach2, cut2,
                                half, pairs)
            else:
                _gather(lane, home_first, home_last, box * 0.0, home_first, home_last, True,
                        False, box_low, box_high, periodic, cell_particles, cell_x, unsorted,
                        neighbors, reach2, cut2, True, pairs)
                for column in range(ti.static((2 * span + 1) ** (dim - 1) // 2 + 1)):
                    for piece in ti.static(range(3)):
                        first, last, shift = _run(column, piece, home, span, box, grid,
                                                  cell_start, height, periodic, dim)
                        if first < last:  # most columns' runs are one piece of three
                            _gather(lane, first, last, shift, home_first, home_last, False,
                                    False, box_low, box_high, periodic, cell_particles,
                                    cell_x, unsorted, neighbors, reach2, cut2, True, pairs)
            for slot in range(home_first, home_last):
                most = ti.max(most, _partition_row(cell_particles[slot], lane,
                                                   slot - home_first, unsorted, neighbors))
        ti.atomic_max(longest[None], most)


@ti.func
def _run(column, piece, home, span: ti.template(), box, grid: ti.template(),
         cell_start: ti.template(), height, periodic: ti.template(), dim: ti.template()):
    """Slots [first, last) and shift of piece ``piece`` of the half stencil's run in column
    centre + ``column`` (column 0: home's own, above home), empty when the piece is."""
    centre = ti.static((2 * span + 1) ** (dim - 1) // 2)
    index, shift, inside = _column(home, centre + column, span, box, grid, periodic, dim)
    lo, hi, shift[dim - 1] = _piece(home[dim - 1], column == 0, span, piece, height,
                                    box[dim - 1], periodic)
    first = cell_start[index * height + ti.min(lo, height - 1)]
    last = cell_start[index * height + ti.min(ti.max(hi, 0), height - 1) + 1]
    if inside == 0 or lo > hi:
        last = first
    return first, last, shift


@ti.kernel
def _search_parallel(box_low: ti.template(), box_high: ti.template(), periodic: ti.template(),
                     grid: ti.template(), cell_start: ti.template(),
                     cell_particles: ti.template(), cell_x: ti.template(),
                     neighbors: ti.template(), reach2: float, cut2: float,
                     longest: ti.template(), dim: ti.template(), half: ti.template(),
                     fold: ti.template(), span: ti.template(), pairs: ti.template()):
    """_search's rows with one thread a particle and no scratch (a GPU runs _search's 256
    lanes on 256 threads): each row walks its cells or runs twice, taking the partners
    within the cutoff, then those in the skin, each in _search's order, so the rows are
    _search's, entry for entry. Threads take the particles in cell order: neighbouring
    threads read the same cells."""
    longest[None] = 0
    box = box_high[None] - box_low[None]
    ncells = _cell_count(grid, dim)
    height = grid[None][dim - 1]
    capacity = neighbors.shape[1] - 1
    for home_slot in range(cell_particles.shape[0]):
        home_cell = _home_cell(home_slot, cell_start, ncells)
        home = _coords(home_cell, grid, dim)
        i = cell_particles[home_slot]
        found = 0
        for skin in ti.static(range(2)):
            for run in range(ti.static(3 ** dim if span == 0 else
                                       1 + 3 * ((2 * span + 1) ** (dim - 1) // 2 + 1))):
                first, last = home_slot + 1, cell_start[home_cell + 1]  # home's, above i
                shift = box * 0.0
                if ti.static(span == 0):
                    cell, shift, inside = _around(home, run, box, grid, periodic, dim)
                    first, last = 0, 0
                    if inside == 1:
                        first, last = cell_start[cell], cell_start[cell + 1]
                elif run > 0:  # then 3 pieces a column
                    first, last, shift = _run((run - 1) // 3, (run - 1) % 3, home, span, box,
                                              grid, cell_start, height, periodic, dim)
                origin = cell_x[home_slot] - shift
                for slot in range(first, last):
                    j, r2 = _candidate(slot, origin, fold, box_low, box_high, periodic,
                                       cell_particles, cell_x)
                    pair_reach2, pair_cut2 = _limits(pairs, i, j, reach2, cut2)
                    take = r2 < pair_cut2
                    if ti.static(skin):
                        take = r2 >= pair_cut2 and r2 < pair_reach2
                    if ti.static(span == 0 and half):
                        take = take and j > i
                    elif ti.static(span == 0):
                        take = take and j != i
                    if take:
                        found += 1
                        if found <= capacity:
                            neighbors[i, found] = j
        neighbors[i, 0] = ti.min(found, capacity)
        ti.atomic_max(longest[None], found)
