"""Writes ar_kr.data: the LAMMPS data file (units real, atom_style atomic) that both
in.ar_kr and ar_kr.yaml read. 500 atoms on an fcc lattice (5 x 5 x 5 cells, a = 5.9 Å, a
density of 0.0195 Å^-3), one in five a krypton dealt at random, velocities drawn at 300 K
(Maxwell-Boltzmann, no net momentum) and written in the file's Velocities section, so both
programs start from the very same numbers. The lattice melts within 0.2 ps to a fluid at
about 160 K and 1100 atm (supercritical for argon, Tc = 151 K).

    python bench/ar_kr/make_data.py     (deterministic: seed 47)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

BOLTZ, MVV2E = 0.0019872067, 48.88821291 * 48.88821291  # LAMMPS real units (update.cpp)
CELLS, A, T = 5, 5.9, 300.0
MASSES = {1: 39.948, 2: 83.798}  # Ar, Kr in g/mol


def main() -> None:
    rng = np.random.default_rng(47)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    cells = np.indices((CELLS,) * 3).reshape(3, -1).T
    x = ((cells[:, None, :] + basis[None]) * A).reshape(-1, 3)
    n = len(x)
    types = np.ones(n, int)
    types[rng.permutation(n)[: n // 5]] = 2
    m = np.array([MASSES[t] for t in types])
    v = rng.normal(size=(n, 3)) * np.sqrt(BOLTZ * T / (m * MVV2E))[:, None]  # Å/fs
    v -= (m[:, None] * v).sum(axis=0) / m.sum()
    side = CELLS * A
    lines = ["LAMMPS data file: Ar/Kr fluid, 500 atoms, real units (bench/ar_kr/make_data.py)",
             "", f"{n} atoms", "2 atom types", ""]
    lines += [f"0.0 {side!r} {a}lo {a}hi" for a in "xyz"]
    lines += ["", "Masses", "", *(f"{t} {mass!r}" for t, mass in MASSES.items()), "",
              "Atoms # atomic", ""]
    lines += [f"{i + 1} {types[i]} {float(x[i, 0])!r} {float(x[i, 1])!r} {float(x[i, 2])!r}" for i in range(n)]
    lines += ["", "Velocities", ""]
    lines += [f"{i + 1} {float(v[i, 0])!r} {float(v[i, 1])!r} {float(v[i, 2])!r}" for i in range(n)]
    (Path(__file__).parent / "ar_kr.data").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
