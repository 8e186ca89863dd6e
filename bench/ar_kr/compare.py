"""simrun against LAMMPS on the same input in real units (issue 47 item 6): ar_kr.yaml and
in.ar_kr read the one data file ar_kr.data; this runs both (one thread each), puts their
thermo columns side by side and draws ar_kr_thermo.png.

    python bench/ar_kr/compare.py [--lmp PATH] [--out DIR]

LAMMPS's columns (thermo_modify norm no, the default in real units: extensive totals, as
simrun's thermo.csv): Temp [K], Press [atm], PotEng, KinEng, TotEng [kcal/mol]. in.ar_kr
prints 15 significant digits (format float %.15g; LAMMPS's default prints 6 to 9), so the
differences are seen down to f64 rounding: equal at step 0 to about 1e-15, then growing as
a chaotic fluid amplifies the two programs' different rounding (their sums run in
different orders).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PAIRS = {"Temp": "temperature", "Press": "pressure", "PotEng": "potential",
         "KinEng": "kinetic", "TotEng": "total"}
DEFAULT_DIGITS = 0.5e-8  # half a unit in the 9th significant digit: LAMMPS's default log


def lammps_thermo(log: Path) -> dict[str, np.ndarray]:
    """The thermo block of a LAMMPS log: header 'Step ...' up to 'Loop time'."""
    rows, header = [], None
    for line in log.read_text().splitlines():
        words = line.split()
        if words[:1] == ["Step"]:
            header = words
        elif header and line.startswith("Loop time"):
            break
        elif header and len(words) == len(header):
            rows.append([float(w) for w in words])
    table = np.array(rows)
    return {name: table[:, i] for i, name in enumerate(header)}


def simrun_thermo(path: Path) -> dict[str, np.ndarray]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


def reference_potential() -> float:
    """The step-0 potential energy of ar_kr.data summed pair by pair in long double (x87's
    64-bit mantissa): the closed form both programs should round to."""
    text = (HERE / "ar_kr.data").read_text()
    rows = text.split("Atoms # atomic")[1].split("Velocities")[0].split("\n")
    atoms = np.array([[float(w) for w in r.split()] for r in rows if r.strip()])
    kinds, x = atoms[:, 1].astype(int) - 1, atoms[:, 2:5].astype(np.longdouble)
    eps = np.array([np.longdouble("0.2380674"), np.longdouble("0.3259019")])
    sigma = np.array([np.longdouble("3.405"), np.longdouble("3.636")])
    side, total = np.longdouble("29.5"), np.longdouble(0)
    for i in range(len(x) - 1):
        d = x[i] - x[i + 1:]
        d -= side * np.round(d / side)
        r2 = (d * d).sum(axis=1)
        e = np.sqrt(eps[kinds[i]] * eps[kinds[i + 1:]])
        s6 = (sigma[kinds[i]] * sigma[kinds[i + 1:]] / r2) ** 3  # (sqrt(s_i s_j)^2 / r^2)^3
        total += (4 * e * (s6 * s6 - s6))[r2 < 100].sum()
    return float(total)


def run_both(lmp: str, out: Path) -> tuple[dict, dict]:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([lmp, "-in", "in.ar_kr", "-log", str(out / "log.lammps"), "-screen",
                    "none"], cwd=HERE, env=env, check=True)
    shutil.rmtree(out / "simrun", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "simrun.cli", "run", "ar_kr.yaml", "--out",
                    str(out / "simrun"), "-q", "--no-render", "--threads", "1"], cwd=HERE,
                   env={**env, "MPLBACKEND": "Agg"}, check=True)
    return lammps_thermo(out / "log.lammps"), simrun_thermo(out / "simrun" / "thermo.csv")


def figure(lmp: dict, ours: dict, png: Path) -> None:
    import matplotlib.pyplot as plt  # optional dependency: the figure only

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    t = lmp["Time"] / 1000.0
    top.plot(t, lmp["Temp"], "k-", lw=3, alpha=0.35, label="LAMMPS Temp")
    top.plot(t, ours["temperature"], "C0--", lw=1.2, label="simrun temperature")
    top.set_ylabel("T [K]")
    twin = top.twinx()
    twin.plot(t, lmp["TotEng"], "k-", lw=3, alpha=0.2)
    twin.plot(t, ours["total"], "C3--", lw=1.2, label="simrun total (LAMMPS TotEng grey)")
    twin.set_ylabel("total energy [kcal/mol]")
    top.legend(loc="upper right", fontsize=8)
    twin.legend(loc="center right", fontsize=8)
    for name, column in PAIRS.items():
        rel = np.abs(ours[column] - lmp[name]) / np.maximum(np.abs(lmp[name]), 1e-300)
        bottom.semilogy(t, np.maximum(rel, 1e-17), ".", ms=3, label=f"{name} / {column}")
    bottom.axhline(DEFAULT_DIGITS, color="k", lw=0.8, ls=":",
                   label="digits LAMMPS's default thermo prints")
    bottom.set(xlabel="time [ps]", ylabel="|simrun - LAMMPS| / |LAMMPS|", ylim=(1e-17, 1e-2))
    bottom.legend(fontsize=7, ncol=2, loc="upper left")
    fig.suptitle("Ar/Kr LJ fluid, 500 atoms, units real, NVE, dt 2 fs: simrun vs LAMMPS "
                 "(same data file)", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lmp", default=shutil.which("lmp") or "lmp")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_ar_kr"))
    args = parser.parse_args()
    lmp, ours = run_both(args.lmp, args.out.resolve())
    assert np.array_equal(lmp["Step"], ours["step"]), "the two logs' steps differ"
    steps = lmp["Step"]
    print("| LAMMPS / simrun | LAMMPS step 0 | simrun step 0 | relative difference: step 0 "
          f"| largest, steps 0-100 | largest, steps 0-{int(steps[-1])} |")
    print("|---|---|---|---|---|---|")
    for name, column in PAIRS.items():
        rel = np.abs(ours[column] - lmp[name]) / np.abs(lmp[name])
        print(f"| {name} / {column} | {lmp[name][0]:.15g} | {ours[column][0]:.15g} | "
              f"{rel[0]:.1e} | {rel[steps <= 100].max():.1e} | {rel.max():.1e} |")
    exact = reference_potential()
    print(f"\nstep-0 potential summed in long double: {exact!r}; relative difference: simrun "
          f"{abs(ours['potential'][0] - exact) / abs(exact):.1e}, LAMMPS "
          f"{abs(lmp['PotEng'][0] - exact) / abs(exact):.1e}")
    figure(lmp, ours, HERE / "ar_kr_thermo.png")


if __name__ == "__main__":
    main()
