"""Pair potentials over the scene's neighbour list: Lennard-Jones (cut, cut-and-shift,
smoothed), WCA, Morse and soft spheres. Forces (and the pressure) come by autodiff of U.

Each kernel loops over the half list (``neighbors: {cutoff, skin}`` in the scene; every pair
once) and folds separations with the box's minimum image. ``cutoff`` defaults to the list's
cutoff and may not exceed it. ``lj_all_pairs`` is the O(N^2) reference for small systems.
The pair energies are ``ti.func``s of r^2 (one place each), named ``pair_*``.
"""

import simrun.lang as ti
from simrun.md import min_image, neighbor, neighbor_count

DEFAULTS = {
    "lj": {"epsilon": 1.0, "sigma": 1.0},
    "lj_shifted": {"epsilon": 1.0, "sigma": 1.0},
    "lj_smooth": {"epsilon": 1.0, "sigma": 1.0},
    "lj_all_pairs": {"epsilon": 1.0, "sigma": 1.0, "cutoff": 2.5},
    "wca": {"epsilon": 1.0, "sigma": 1.0},
    "morse": {"depth": 1.0, "alpha": 1.0, "r0": 1.0},
    "soft_sphere": {"epsilon": 1.0, "sigma": 1.0, "exponent": 2.0},
}
_REACH = ["cutoff > 0", "cutoff <= list_cutoff"]  # list_cutoff: the scene's neighbors.cutoff
# sigma < cutoff: a cut inside the repulsive core is no Lennard-Jones potential at all (and
# sigma = 2**31 threw every atom into one neighbour cell)
_LJ = ["sigma > 0", "sigma < cutoff"]
LIMITS = {"lj": [*_LJ, *_REACH], "lj_shifted": [*_LJ, *_REACH],
          "lj_smooth": [*_LJ, *_REACH], "lj_all_pairs": [*_LJ, "cutoff > 0"],
          "wca": ["sigma > 0", "sigma * 2 ** (1 / 6) <= list_cutoff"],
          "morse": ["alpha > 0", *_REACH],
          "soft_sphere": ["sigma > 0", "exponent >= 2", "sigma <= list_cutoff"]}


@ti.func
def pair_lj(r2, epsilon, sigma):
    """4 eps ((sigma/r)^12 - (sigma/r)^6)."""
    s6 = (sigma * sigma / r2) ** 3
    return 4.0 * epsilon * (s6 * s6 - s6)


@ti.func
def pair_lj_force_r(r2, epsilon, sigma):
    """r dphi/dr of the LJ pair energy (for the smoothed form's linear term)."""
    s6 = (sigma * sigma / r2) ** 3
    return -24.0 * epsilon * (2.0 * s6 * s6 - s6)


@ti.func
def pair_morse(r2, depth, alpha, r0):
    """D (exp(-2 a (r - r0)) - 2 exp(-a (r - r0))), LAMMPS's morse."""
    e = ti.exp(-alpha * (ti.sqrt(r2) - r0))
    return depth * (e * e - 2.0 * e)


@ti.func
def pair_soft_sphere(r2, epsilon, sigma, exponent):
    """eps / a (1 - r / sigma)^a for r < sigma (JAX MD's soft_sphere)."""
    return epsilon / exponent * (1.0 - ti.sqrt(r2) / sigma) ** exponent


@ti.kernel
def lj(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
       box_high: ti.template(), periodic: ti.template(), U: ti.template(), epsilon: float,
       sigma: float, cutoff: float):
    """Lennard-Jones cut at ``cutoff`` (LAMMPS lj/cut, no shift, no tail correction)."""
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < cutoff * cutoff:
                U[None] += pair_lj(r2, epsilon, sigma)


@ti.kernel
def lj_shifted(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
               box_high: ti.template(), periodic: ti.template(), U: ti.template(),
               epsilon: float, sigma: float, cutoff: float):
    """Lennard-Jones cut and shifted to zero at ``cutoff`` (LAMMPS pair_modify shift yes)."""
    shift = pair_lj(cutoff * cutoff, epsilon, sigma)
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < cutoff * cutoff:
                U[None] += pair_lj(r2, epsilon, sigma) - shift


@ti.kernel
def lj_smooth(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
              box_high: ti.template(), periodic: ti.template(), U: ti.template(),
              epsilon: float, sigma: float, cutoff: float):
    """Lennard-Jones with energy and force both zero at ``cutoff`` (LAMMPS lj/smooth/linear:
    phi(r) - phi(rc) - (r - rc) phi'(rc))."""
    shift = pair_lj(cutoff * cutoff, epsilon, sigma)
    slope = pair_lj_force_r(cutoff * cutoff, epsilon, sigma) / cutoff
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < cutoff * cutoff:
                U[None] += pair_lj(r2, epsilon, sigma) - shift - (ti.sqrt(r2) - cutoff) * slope


@ti.kernel
def wca(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
        box_high: ti.template(), periodic: ti.template(), U: ti.template(), epsilon: float,
        sigma: float):
    """Weeks-Chandler-Andersen: LJ cut at 2^(1/6) sigma and shifted up by epsilon."""
    rc2 = 2.0 ** (1.0 / 3.0) * sigma * sigma
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < rc2:
                U[None] += pair_lj(r2, epsilon, sigma) + epsilon


@ti.kernel
def morse(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
          box_high: ti.template(), periodic: ti.template(), U: ti.template(), depth: float,
          alpha: float, r0: float, cutoff: float):
    """Morse cut at ``cutoff`` (no shift, as LAMMPS's morse)."""
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < cutoff * cutoff:
                U[None] += pair_morse(r2, depth, alpha, r0)


@ti.kernel
def soft_sphere(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
                box_high: ti.template(), periodic: ti.template(), U: ti.template(),
                epsilon: float, sigma: float, exponent: float):
    """Purely repulsive eps / a (1 - r / sigma)^a, zero beyond sigma (the list's cutoff
    must reach sigma)."""
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        for k in range(neighbor_count(neighbors, i)):
            r = min_image(x[neighbor(neighbors, i, k)] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < sigma * sigma:
                U[None] += pair_soft_sphere(r2, epsilon, sigma, exponent)


@ti.kernel
def lj_all_pairs(x: ti.template(), box_low: ti.template(), box_high: ti.template(),
                 periodic: ti.template(), U: ti.template(), epsilon: float, sigma: float,
                 cutoff: float):
    """The same cut Lennard-Jones over all pairs i < j: O(N^2), no list needed."""
    for i in range(x.shape[0]):
        xi = x[i]
        for j in range(i + 1, x.shape[0]):
            r = min_image(x[j] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            if r2 < cutoff * cutoff:
                U[None] += pair_lj(r2, epsilon, sigma)


# --- mixtures: parameters per species pair (scene/species.py; scenes/kob_andersen.yaml) ---
# `species` is each particle's type index; epsilon, sigma and cutoff are (types x types)
# fields bound by name (a number in the scene fills every pair). The list's cutoff must
# reach the largest pair cutoff; each pair is listed within its own cutoff plus the skin,
# and its own cutoff is applied here too (the skin's pairs); LIMITS hold for each pair.
# The pair's energy is chosen by ti.select, not an `if`: parameters read inside an `if` are
# loads LLVM sinks into the branch, where the loop vectoriser cannot if-convert them (they
# are not known safe to read on every lane), so the row loop stayed scalar, 2.2-2.4x
# lj_shifted's time per force call; read on every pair it runs 4 lanes wide, 1.3-1.4x
# (bench/README.md, "Kob-Andersen against LAMMPS").
# PAIR_CUTOFF: the argument beyond whose value a pair adds nothing; the neighbour list then
# holds each pair within its own cutoff + skin (LAMMPS's multi-type list; stepper/pairs.py)
DEFAULTS.update(lj_species={}, lj_species_shifted={})
PAIR_CUTOFF = {"lj_species": "cutoff", "lj_species_shifted": "cutoff"}
LIMITS.update(lj_species=[*_LJ, *_REACH], lj_species_shifted=[*_LJ, *_REACH])


@ti.func
def _row(table: ti.template(), si):
    """Row ``si`` of a (types x types) parameter table as a local vector: read once a
    particle, then indexed by the partner's type (no gather a pair)."""
    row = ti.Vector.zero(float, table.shape[0])
    for b in ti.static(range(table.shape[0])):
        row[b] = table[si, b]
    return row


@ti.func
def _shift_row(epsilon: ti.template(), sigma: ti.template(), cutoff: ti.template(), si):
    """The energy at the cutoff of each pair (si, b): the shift, once a particle."""
    row = ti.Vector.zero(float, cutoff.shape[0])
    for b in ti.static(range(cutoff.shape[0])):
        rc = cutoff[si, b]
        row[b] = pair_lj(rc * rc, epsilon[si, b], sigma[si, b])
    return row


@ti.kernel
def lj_species(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
               box_high: ti.template(), periodic: ti.template(), U: ti.template(),
               species: ti.template(), epsilon: ti.template(), sigma: ti.template(),
               cutoff: ti.template()):
    """Lennard-Jones per species pair, cut at the pair's cutoff (LAMMPS lj/cut with
    ``pair_coeff I J epsilon sigma cutoff``; no shift)."""
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        si = species[i]
        for k in range(neighbor_count(neighbors, i)):
            j = neighbor(neighbors, i, k)
            sj = species[j]
            r = min_image(x[j] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            rc = cutoff[si, sj]
            U[None] += ti.select(r2 < rc * rc, pair_lj(r2, epsilon[si, sj], sigma[si, sj]), 0.0)


@ti.kernel
def lj_species_shifted(x: ti.template(), neighbors: ti.template(), box_low: ti.template(),
                       box_high: ti.template(), periodic: ti.template(), U: ti.template(),
                       species: ti.template(), epsilon: ti.template(), sigma: ti.template(),
                       cutoff: ti.template()):
    """Lennard-Jones per species pair, cut and shifted to zero at the pair's cutoff (LAMMPS
    lj/cut with ``pair_modify shift yes``)."""
    for i in range(x.shape[0]):
        xi = x[i]  # read once: its gradient is summed in a local, one scatter per particle
        si = species[i]
        eps_row, sig_row, rc_row = _row(epsilon, si), _row(sigma, si), _row(cutoff, si)
        shift_row = _shift_row(epsilon, sigma, cutoff, si)
        for k in range(neighbor_count(neighbors, i)):
            j = neighbor(neighbors, i, k)
            sj = species[j]
            r = min_image(x[j] - xi, box_low, box_high, periodic)
            r2 = r.dot(r)
            rc = rc_row[sj]
            U[None] += ti.select(r2 < rc * rc,
                                 pair_lj(r2, eps_row[sj], sig_row[sj]) - shift_row[sj], 0.0)
