"""scenes/kob_andersen.yaml's step 0 as `simrun run` reports it (thermo.csv's potential and
pressure) against a NumPy double loop over pairs, each cut at its own pair's cutoff (2.5
sigma_ij: issue 47's per-pair cutoffs, the list holding each pair to its own + skin) and
shifted there: P = (2 K + sum_pairs r_ij . F_ij) / (3 V), LAMMPS's instantaneous pressure.
bench/kob_andersen_ab.py holds the same two numbers against LAMMPS itself."""

from __future__ import annotations

import csv

import numpy as np

from simrun.scene import load_scene
from simrun.scene.species import type_ids
from tests.cli_helpers import simrun
from tests.test_species import EPS, KA, KA_EPSILON, KA_SIGMA, SIDE


def _energy_and_virial(x: np.ndarray, types: np.ndarray, one_cutoff: bool = False
                       ) -> tuple[float, float, float]:
    """U, the virial sum_pairs r_ij . F_ij and the rounding scale sum |terms| of both; each
    pair cut (and shifted) at 2.5 sigma_ij, or with ``one_cutoff`` all at 2.5."""
    energy, virial, scale = 0.0, 0.0, 0.0
    for i in range(len(x) - 1):
        d = x[i + 1:] - x[i]
        d -= SIDE * np.round(d / SIDE)
        r2 = (d * d).sum(1)
        eps, sig = KA_EPSILON[types[i], types[i + 1:]], KA_SIGMA[types[i], types[i + 1:]]
        rc = 2.5 if one_cutoff else 2.5 * sig
        inside = r2 < rc ** 2
        s6, c6 = (sig * sig / r2) ** 3, (sig / rc) ** 6
        terms = 4 * eps * (s6 * s6 - s6) - 4 * eps * (c6 * c6 - c6)
        pair_virial = 24 * eps * (2 * s6 * s6 - s6)  # r . F = -r dU/dr
        energy += terms[inside].sum()
        virial += pair_virial[inside].sum()
        scale += np.abs(terms[inside]).sum() + np.abs(pair_virial[inside]).sum()
    return energy, virial, scale


def test_step_zero_energy_and_pressure_equal_a_numpy_reference(tmp_path):
    sets = ["steps=1", "outputs.every=1", "initial.jitter=0.1", "integrator=velocity_verlet"]
    done = simrun("run", str(KA), "--out", str(tmp_path / "r"), "--no-render", "--thermo", "1",
                  *[a for s in sets for a in ("--set", s)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "r" / "thermo.csv") as handle:
        first = next(csv.DictReader(handle))
    with np.load(tmp_path / "r" / "frames.npz") as frames:
        assert frames["step"][0] == 0
        x, v = frames["x"][0], frames["v"][0]
    types = type_ids(load_scene(KA).particles.species)
    energy, virial, scale = _energy_and_virial(x, types)
    kinetic = 0.5 * (v * v).sum()  # masses 1
    pressure = (2 * kinetic + virial) / (3 * SIDE ** 3)
    n = len(x)
    assert abs(float(first["potential"]) - energy) <= n * EPS * scale
    assert abs(float(first["pressure"]) - pressure) <= n * EPS * (scale + kinetic) / SIDE ** 3
    # the per-pair cutoffs matter here: every pair cut at 2.5 gives another energy
    assert abs(_energy_and_virial(x, types, True)[0] - energy) > 1e3 * n * EPS * scale
