"""The cell grid a neighbour-list build bins particles into: cell coordinates and runs
of cells around a home cell (device functions the searches share), and the binning kernels
(``_bin`` on one thread, ``_bin_parallel`` for a GPU)."""

from __future__ import annotations

import simrun.lang as ti


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
def _open_grid(x: ti.template(), grid: ti.template(), grid_low: ti.template(),
               grid_width: ti.template(), reach: float, max_cells: ti.i32, count: ti.i32,
               dim: ti.template()):
    """Cells of width >= reach over the particles' bounding box (open boxes, each build).
    ``count`` (x.shape[0]) is an argument: see _bin."""
    lo = x[0]
    hi = x[0]
    ti.loop_config(serialize=True)
    for i in range(count):
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
         fullest: ti.template(), count: ti.i32, dim: ti.template()):
    """Counting sort of the particles by cell (serial: cells hold particles in index order),
    with their wrapped positions in the same order (``cell_x``: the search reads a cell's
    positions from one contiguous run), and the most particles any cell holds.
    The serial loops run to ``count`` (x.shape[0]) passed at run time, not to the shape as
    a constant: LLVM 22's loop vectorizer, given a loop's trip count, weighs the remainder
    iterations in its two cost models, and where they disagree (a 3-D open box of 18 or 19
    particles, 2-D of 36, on AVX-512 or Zen 4) its assertion aborts the process. A run-time
    count leaves the compiled kernel the same for every particle count (tests/
    test_neighbor_compile.py compiles it for several CPUs)."""
    ncells = _cell_count(grid, dim)
    ti.loop_config(serialize=True)
    for c in range(ncells + 1):
        cell_start[c] = 0
        cell_fill[c] = 0
    ti.loop_config(serialize=True)
    for i in range(count):
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
    for i in range(count):
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
    ncells = _cell_count(grid, dim)
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
def _cell_count(grid: ti.template(), dim: ti.template()):
    ncells = 1
    for d in ti.static(range(dim)):
        ncells *= grid[None][d]
    return ncells


@ti.func
def _home_cell(home_slot, cell_start: ti.template(), ncells):
    """The cell holding slot ``home_slot``: the last whose start is at or before it."""
    lo, hi = 0, ncells
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cell_start[mid] <= home_slot:
            lo = mid
        else:
            hi = mid
    return lo


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
def _fold(c, n, side):
    """Cell coordinate ``c``, at most one box length outside a periodic side of ``n``
    cells, folded into it, and the shift that brings its positions next to home's."""
    shift = side * 0.0
    if c < 0:
        c += n
        shift = -side
    elif c >= n:
        c -= n
        shift = side
    return c, shift


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
                c[d], shift[d] = _fold(home[d] + offset - 1, n, box[d])
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
def _column(home, q, span: ti.template(), box, grid: ti.template(), periodic: ti.template(),
            dim: ti.template()):
    """The ``q``-th column of the (2 span + 1)^(dim - 1) around ``home`` (all axes but the
    last): its linear index, the shift that brings its positions next to home's, and 1
    when it exists (an open box ends). Periodic sides hold at least 2 span + 1 cells."""
    index = 0
    shift = box * 0.0
    inside = 1
    for d in ti.static(range(dim - 1)):
        n = grid[None][d]
        c = home[d] + (q // ((2 * span + 1) ** (dim - 2 - d))) % (2 * span + 1) - span
        if ti.static(periodic):
            c, shift[d] = _fold(c, n, box[d])
        elif c < 0 or c >= n:
            inside = 0
        index = index * n + ti.min(ti.max(c, 0), n - 1)
    return index, shift, inside


@ti.func
def _piece(z, own_column, span: ti.template(), piece, height, side, periodic: ti.template()):
    """Piece ``piece`` (0: wrapped below, 1: inside the box, 2: wrapped above) of a column's
    run of cells along the last axis, around home's ``z`` (above it alone in home's own
    column): its first and last cell (none when last < first) and its shift."""
    low = z + ti.select(own_column, 1, -span)
    high = z + span
    lo, hi = ti.max(low, 0), ti.min(high, height - 1)
    shift = side * 0.0
    if piece == 0:
        lo, hi = low + height, ti.min(height - 1, high + height)
        shift = -side
    elif piece == 2:
        lo, hi = ti.max(0, low - height), high - height
        shift = side
    if ti.static(not periodic):
        if piece != 1:
            hi = lo - 1
    return lo, hi, shift
