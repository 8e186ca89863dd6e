"""Units as LAMMPS defines them (issue 47 item 4): the constants follow from SI's, and one
argon fluid run in lj units and again in real units (the same physics in other numbers)
gives the same trajectory and thermo columns once converted, through the real CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_cli import simrun

from simrun.jobs.ensemble import ensemble_gradient
from simrun.outputs.thermo import read_thermo_csv
from simrun.scene import load_scene
from simrun.scene.units import CONSTANTS

REPO = Path(__file__).resolve().parent.parent
AVOGADRO, BOLTZMANN, ELECTRONVOLT = 6.02214076e23, 1.380649e-23, 1.602176634e-19
KCAL_PER_MOL, GRAM_PER_MOL, ANGSTROM = 4184.0 / AVOGADRO, 1e-3 / AVOGADRO, 1e-10
ATM, BAR = 101325.0, 1e5
# LAMMPS's constants date from CODATA 2006 (boltz 8.617343e-5 eV/K); today's differ by
# parts in 1e6, so they are checked to 1e-5
CODATA = 1e-5


def test_lammps_constants_follow_from_si() -> None:
    real, metal, si = CONSTANTS["real"], CONSTANTS["metal"], CONSTANTS["si"]
    # real: kcal/mol, Å, g/mol, fs, K, atm
    assert real.boltz == pytest.approx(BOLTZMANN / KCAL_PER_MOL, rel=CODATA)
    fs = 1e-15
    assert real.mvv2e == pytest.approx(GRAM_PER_MOL * (ANGSTROM / fs) ** 2 / KCAL_PER_MOL,
                                       rel=CODATA)
    assert real.nktv2p == pytest.approx(KCAL_PER_MOL / ANGSTROM ** 3 / ATM, rel=CODATA)
    # metal: eV, Å, g/mol, ps, K, bar
    ps = 1e-12
    assert metal.boltz == pytest.approx(BOLTZMANN / ELECTRONVOLT, rel=CODATA)
    assert metal.mvv2e == pytest.approx(GRAM_PER_MOL * (ANGSTROM / ps) ** 2 / ELECTRONVOLT,
                                        rel=CODATA)
    assert metal.nktv2p == pytest.approx(ELECTRONVOLT / ANGSTROM ** 3 / BAR, rel=CODATA)
    assert si.boltz == pytest.approx(BOLTZMANN, rel=CODATA) and si.mvv2e == si.nktv2p == 1
    assert CONSTANTS["lj"].unit and CONSTANTS["reduced"].unit and not real.unit
    for c in CONSTANTS.values():
        assert c.ftm2v * c.mvv2e == pytest.approx(1.0, rel=1e-15)


# argon: epsilon/k_B = 119.8 K, sigma = 3.405 Å, m = 39.948 g/mol
EPS_KCAL, SIGMA, MASS = 119.8 * CONSTANTS["real"].boltz, 3.405, 39.948
TAU_FS = SIGMA * math.sqrt(MASS * CONSTANTS["real"].mvv2e / EPS_KCAL)  # sigma sqrt(m/eps)
SPACING, CELLS, CUTOFF, SKIN = 1.1, 4, 2.0, 0.1  # lj units: density 0.75


def _argon(units: str, integrator: str, cells: int = CELLS, skin: float | None = SKIN
           ) -> str:
    """The scene in lj units (sigma = eps = m = 1) or in real units (Å, kcal/mol, g/mol,
    fs, K): every number converted by sigma, eps, m and tau (no skin: the default)."""
    length, energy, mass, time, temp = (1.0, 1.0, 1.0, 1.0, 1.0) if units == "lj" else \
        (SIGMA, EPS_KCAL, MASS, TAU_FS, EPS_KCAL / CONSTANTS["real"].boltz)
    box = SPACING * cells * length
    skin_text = "" if skin is None else f", skin: {skin * length!r}"
    integ = {"nve": "velocity_verlet",
             "langevin": f"{{type: langevin, temperature: {1.2 * temp!r}, "
                         f"friction: {1.0 / time!r}}}",
             "nose_hoover": f"{{type: nose_hoover, temperature: {1.2 * temp!r}, "
                            f"tau: {0.5 * time!r}}}"}[integrator]
    return f"""version: 2
name: argon_{units}
units: {units}
seed: 5
particles: {{count: {cells ** 3}, dim: 3, mass: {mass!r}}}
initial: {{type: lattice, shape: [{cells}, {cells}, {cells}],
          spacing: [{SPACING * length!r}, {SPACING * length!r}, {SPACING * length!r}],
          temperature: {1.5 * temp!r}}}
boundary: {{type: periodic, low: [0, 0, 0], high: [{box!r}, {box!r}, {box!r}]}}
neighbors: {{cutoff: {CUTOFF * length!r}{skin_text}}}
energy:
  - kernel: kernels/lj.py:lj
    params: {{epsilon: {energy!r}, sigma: {length!r}, cutoff: {CUTOFF * length!r}}}
integrator: {integ}
dt: {0.004 * time!r}
steps: 150
thermo: 10
outputs: {{every: 50, positions: true, velocities: true}}
"""


@pytest.mark.parametrize("integrator", ["nve", "langevin", "nose_hoover"])
def test_real_units_run_is_the_lj_run_in_other_numbers(tmp_path: Path, integrator: str
                                                       ) -> None:
    """x in Å = sigma x*, E in kcal/mol = eps E*, T in K = (eps/k_B) T*, P in atm = nktv2p
    eps/sigma^3 P*, t in fs = tau t*: LAMMPS's constants in the masses (F/m), the
    thermostat's k_B T, the start's thermal velocities, the temperature and the pressure."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())
    for units in ("lj", "real"):
        (tmp_path / f"{units}.yaml").write_text(_argon(units, integrator))
        done = simrun("run", f"{units}.yaml", "--out", units, "-q", "--no-render",
                      cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
    lj, real = (read_thermo_csv(tmp_path / u / "thermo.csv") for u in ("lj", "real"))
    boltz, nktv2p = CONSTANTS["real"].boltz, CONSTANTS["real"].nktv2p
    scales = {"time": TAU_FS, "kinetic": EPS_KCAL, "potential": EPS_KCAL, "total": EPS_KCAL,
              "temperature": EPS_KCAL / boltz, "pressure": nktv2p * EPS_KCAL / SIGMA ** 3}
    if integrator == "nose_hoover":
        scales["conserved"] = EPS_KCAL
    # 150 steps of a chaotic fluid (0.6 tau) amplify the two runs' different rounding by
    # far less than 1e-6; a wrong constant is off by a factor
    for column, scale in scales.items():
        np.testing.assert_allclose(real[column], lj[column] * scale, rtol=1e-6,
                                   atol=1e-9 * np.abs(lj[column] * scale).max(),
                                   err_msg=column)
    assert np.all(lj["temperature"] > 0.5)  # a fluid, not a frozen lattice
    x_lj, x_real = (np.load(tmp_path / u / "frames.npz")["x"] for u in ("lj", "real"))
    np.testing.assert_allclose(x_real, x_lj * SIGMA, rtol=0, atol=1e-6 * SIGMA)
    units = json.loads((tmp_path / "real" / "run.json").read_text())["units"]
    assert (units["time"], units["temperature"], units["pressure"]) == ("fs", "K", "atm")


def test_grad_check_through_a_real_units_scene(tmp_path: Path) -> None:
    """Reverse mode through a Langevin run in real units agrees with central differences
    for the temperature (kT = k_B T: d/dT carries k_B), the mass (the stepper's m * mvv2e:
    d/dm carries mvv2e), an LJ parameter and dt."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())
    text = _argon("real", "langevin").replace("steps: 150", "steps: 30")
    text = text.replace(f"temperature: {1.5 * EPS_KCAL / CONSTANTS['real'].boltz!r}}}",
                        "temperature: 0.0}")  # d/dm needs a start without a thermal draw
    text += "objective: {builtin: kinetic, at: end}\n"
    (tmp_path / "real.yaml").write_text(text)
    keys = ["integrator.temperature", "particles.mass", "energy.0.params.epsilon", "dt"]
    done = simrun("grad", "real.yaml", *[f"--wrt={k}" for k in keys], "--check", "--out", "g",
                  "-q", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    for key in keys:
        assert record["gradients"][key] != 0.0, key
    rows = {row["key"]: row for row in record["check"]["rows"]}
    assert set(rows) == set(keys) and all(row["verdict"] == "ok" for row in rows.values()), rows


def test_ensemble_gradient_with_respect_to_a_temperature_in_kelvin(tmp_path: Path) -> None:
    """Harmonic traps (k/2 |x - x0|^2, d = 3) in real units: <msd> = d k_B T / k, so
    d<msd>/dT = d k_B / k per K and d<msd>/dk = -d k_B T / k^2; the fluctuation formula's
    temperature series carry k_B (without it the derivative would be per kcal/mol, 503x
    off). The scene is scenes/oscillators.yaml's in real numbers (kT = 0.5 kcal/mol)."""
    boltz, tau = CONSTANTS["real"].boltz, math.sqrt(CONSTANTS["real"].mvv2e)  # m = 1 g/mol
    k, dim, temperature = 2.0, 3, 0.5 / boltz
    scene = load_scene(REPO / "scenes" / "oscillators.yaml", [
        "units=real", f"dt={0.2 * tau!r}", f"integrator.temperature={temperature!r}",
        f"integrator.friction={1.0 / tau!r}", "steps=4000", "particles.count=300",
        "energy.0.params.count=300"])
    r = ensemble_gradient(scene, ["energy.0.params.k", "integrator.temperature"],
                          tmp_path / "s", every=4)
    assert abs(r.objective - dim * boltz * temperature / k) <= 3 * r.objective_error
    assert abs(r.gradients["integrator.temperature"] - dim * boltz / k) <= \
        3 * r.errors["integrator.temperature"]
    assert abs(r.gradients["energy.0.params.k"] + dim * boltz * temperature / k ** 2) <= \
        3 * r.errors["energy.0.params.k"]
    assert r.errors["integrator.temperature"] < 0.2 * dim * boltz / k  # and informative


def test_neighbor_skin_defaults_to_lammps_for_the_units(tmp_path: Path) -> None:
    """LAMMPS's neighbor skin: 0.3 sigma in lj units, 2 Å in real (a box of 8 cells holds
    twice cutoff + skin in both)."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())
    for units, skin in (("lj", 0.3), ("real", 2.0)):
        (tmp_path / f"{units}.yaml").write_text(_argon(units, "nve", cells=8, skin=None))
        assert load_scene(tmp_path / f"{units}.yaml").neighbors.skin == skin
