"""Bonded molecular energies: bond stretching, bond bending (angles) and torsion (dihedrals).

The energies whose forces are tedious by hand; here only U is written and autodiff gives F.
Angles are in degrees in the scene parameters.
"""

import simrun.lang as ti

DEFAULTS = {
    "harmonic_bonds": {"k": 100.0, "r0": 1.0},
    "harmonic_angles": {"k": 10.0, "theta0": 109.5},
    "cosine_dihedrals": {"k": 1.0, "n": 3, "phase": 0.0},
}
LIMITS = {
    "harmonic_bonds": ["k >= 0", "r0 >= 0"],
    "harmonic_angles": ["k >= 0", "0 <= theta0 <= 180"],
}


@ti.kernel
def harmonic_bonds(x: ti.template(), bonds: ti.template(), U: ti.template(), k: float,
                   r0: float):
    """U += k/2 (|x_b - x_a| - r0)^2 for every bond (a, b)."""
    for b in range(bonds.shape[0]):
        r = x[bonds[b, 1]] - x[bonds[b, 0]]
        U[None] += 0.5 * k * (r.norm() - r0) ** 2


@ti.kernel
def harmonic_angles(x: ti.template(), angles: ti.template(), U: ti.template(), k: float,
                    theta0: float):
    """U += k/2 (theta - theta0)^2, theta the angle a-b-c at the middle particle b (3-D).

    theta = atan2(|u x w|, u . w) is accurate at every angle (acos of the cosine is not, and
    needs clamping).
    """
    for t in range(angles.shape[0]):
        b = angles[t, 1]
        u = x[angles[t, 0]] - x[b]
        w = x[angles[t, 2]] - x[b]
        theta = ti.atan2(u.cross(w).norm(), u.dot(w))
        U[None] += 0.5 * k * (theta - theta0 * 3.141592653589793 / 180.0) ** 2


@ti.kernel
def cosine_dihedrals(x: ti.template(), dihedrals: ti.template(), U: ti.template(), k: float,
                     n: float, phase: float):
    """U += k (1 + cos(n phi - phase)), phi the torsion angle of a-b-c-d (IUPAC sign)."""
    for t in range(dihedrals.shape[0]):
        b1 = x[dihedrals[t, 1]] - x[dihedrals[t, 0]]
        b2 = x[dihedrals[t, 2]] - x[dihedrals[t, 1]]
        b3 = x[dihedrals[t, 3]] - x[dihedrals[t, 2]]
        n1 = b1.cross(b2)
        n2 = b2.cross(b3)
        m1 = n1.cross(b2 / b2.norm())
        phi = ti.atan2(m1.dot(n2), n1.dot(n2))
        U[None] += k * (1.0 + ti.cos(n * phi - phase * 3.141592653589793 / 180.0))
