"""Run the shipped commands whose results README.md quotes and record those figures in
bench/readme_figures.json, so that the README quotes what its own commands print
(tests/test_readme_figures.py holds the README to this file without rerunning anything).

    python bench/readme_figures.py [--only NAME ...] [--out DIR]

Losses and fitted values are deterministic (the same bits at any thread count, issue 44):
the README must quote them to their printed digits. Wall times depend on the machine and
its load, so the record keeps the load average beside them and the README quotes them as
"about" with the VM named. Each command runs as a user runs it (a subprocess of the CLI,
or the script the README names), in a fresh folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).with_name("readme_figures.json")
# Iterations of the 3-D MPM scenes' training that README.md quotes: the originals run 100
# (diffmpm3d) and 501 (liquid), at 25-40 CPU seconds an iteration here; on the shared 2-core
# VM (load 13-20) the README's figures are from fewer, and it says how many.
MPM3D_ITERATIONS = {"diffmpm3d": 8, "liquid": 5}


def _command(args: list[str], cwd: Path) -> tuple[str, float]:
    """Run a command from the repository root as the README writes it; (stdout, seconds)."""
    env = dict(os.environ, MPLBACKEND="Agg")
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr, seconds  # warnings (the horizon report) on stderr


def _simrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "simrun.cli", *args]


def _losses(folder: Path) -> list[float]:
    with open(folder / "loss.csv", newline="") as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def optimize_figures(scene: str, out: Path, *options: str) -> dict:
    """`simrun optimize scenes/SCENE.yaml [OPTIONS]`: first, best and final loss,
    iterations, seconds (compiling included)."""
    folder = out / scene
    _stdout, seconds = _command(_simrun("optimize", f"scenes/{scene}.yaml", *options, "--out",
                                        str(folder), "--no-render"), REPO)
    losses = _losses(folder)
    record = json.loads((folder / "optimize.json").read_text())
    return {"first_loss": losses[0], "best_loss": min(losses), "final_loss": losses[-1],
            "iterations": record["iterations_done"], "status": record["status"],
            "seconds": round(seconds, 1)}


def run_figures(scene: str, out: Path) -> dict:
    """`simrun run scenes/SCENE.yaml` with its pictures: seconds in all, as a user waits."""
    _stdout, seconds = _command(_simrun("run", f"scenes/{scene}.yaml", "--out",
                                        str(out / f"{scene}-run")), REPO)
    return {"run_seconds": round(seconds, 1)}


def fit_spring_figures(out: Path) -> dict:
    """`python bench/fit_spring.py`: the fitted k and r0 with their errors."""
    stdout, seconds = _command([sys.executable, "bench/fit_spring.py", "--out",
                                str(out / "fit_spring")], REPO)
    found: dict = {"seconds": round(seconds, 1)}
    head = re.search(r"after (\d+) iterations", stdout)
    found["iterations"] = int(head.group(1)) if head else None
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0].startswith("energy."):
            name = parts[0].rsplit(".", 1)[-1]
            found[name] = {"value": float(parts[2]), "error": float(parts[3])}
    return found


def fit_lj_figures(out: Path) -> dict:
    """`simrun optimize scenes/fit_lj.yaml`, then `fit_lj_targets.py --check` of its best.yaml."""
    folder = out / "fit_lj"
    _stdout, seconds = _command(_simrun("optimize", "scenes/fit_lj.yaml", "--out",
                                        str(folder), "--no-render"), REPO)
    fit = json.loads((folder / "fit.json").read_text())
    with open(folder / "fit.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    adam = [row for row in rows if row["stage"] == "adam"]
    fitted = fit["fitted"]
    short = {name: name.rsplit(".", 1)[-1] for name in fitted["params"]}
    first = json.loads((folder / "trajectory-000" / "run.json").read_text())
    found = {"seconds": round(seconds, 1), "threads": first.get("threads"),
             "adam_iterations": len(adam),
             "adam_runs": len({row["trajectory"] for row in adam}),
             "polish_runs": fitted.get("polish_runs", 0),
             "adam_mean_of_last": {short[n]: v for n, v in fit["adam"]["params"].items()},
             "fitted": {short[n]: {"value": v, "error": fitted.get("errors", {}).get(n)}
                        for n, v in fitted["params"].items()}}
    stdout, check_s = _command([sys.executable, "scenes/fit_lj_targets.py", "--check",
                                str(folder / "best.yaml")], REPO)
    check: dict = {"seconds": round(check_s, 1)}
    for name in ("pressure", "potential_per_particle"):
        m = re.search(rf"^{name}: (\S+) \+- (\S+), target (\S+) \+- (\S+): (\S+) combined",
                      stdout, re.M)
        if m:
            check[name] = dict(zip(("value", "error", "target", "target_error", "z"),
                                   map(float, m.groups())))
    m = re.search(r"rdf: chi\^2 / bins (\S+) over (\d+) bins, largest \|z\| (\S+)", stdout)
    if m:
        check["rdf"] = {"chi2_per_bin": float(m.group(1)), "bins": int(m.group(2)),
                        "largest_z": float(m.group(3))}
    found["check"] = check
    return found


def fit_ka_figures(out: Path) -> dict:
    """`python bench/fit_ka.py`: fit_ka.yaml's fit from 20% off and its errors' honesty."""
    stdout, _seconds = _command([sys.executable, "bench/fit_ka.py", "--out",
                                 str(out / "fit_ka")], REPO)
    return next(json.loads(line) for line in stdout.splitlines() if '"honesty"' in line)


def lj_horizon_figures(out: Path) -> dict:
    """The forward-mode horizon report of the ensemble section's first command."""
    stdout, seconds = _command(_simrun(
        "grad", "scenes/lj_nvt.yaml", "--mode", "forward", "--wrt", "energy.0.params.epsilon",
        "--set", "steps=3000", "--set", "integrator=velocity_verlet", "--set",
        "objective={builtin: potential, at: mean}", "--set", "outputs.every=50", "--out",
        str(out / "lj_horizon")), REPO)
    rate = re.search(r"rate (\S+) per unit time", stdout)
    grad = re.search(r"dJ/denergy\.0\.params\.epsilon = (\S+)", stdout)
    return {"seconds": round(seconds, 1), "rate": float(rate.group(1)) if rate else None,
            "gradient": float(grad.group(1)) if grad else None, "time_units": 15.0}


def lj_melt_figures(out: Path) -> dict:
    """`simrun run scenes/lj_melt.yaml`: the rate its summary prints (a time: load-bound),
    as written and with a thermo row only every 100 steps."""
    found = {}
    for name, extra in (("default", []), ("every_100", ["--set", "outputs.every=100"])):
        stdout, _seconds = _command(_simrun("run", "scenes/lj_melt.yaml", "--no-render",
                                            "--out", str(out / f"lj_melt_{name}"), *extra), REPO)
        rate = re.search(r"then ([\d,]+) steps/s", stdout)
        found[f"steps_per_s_{name}"] = int(rate.group(1).replace(",", "")) if rate else None
    return found


JOBS = {
    "lj_horizon": lj_horizon_figures,
    "lj_melt": lj_melt_figures,
    "projectile": lambda out: optimize_figures("projectile", out),
    "mass_spring": lambda out: optimize_figures("mass_spring", out),
    "billiards": lambda out: optimize_figures("billiards", out),
    "diffmpm": lambda out: optimize_figures("diffmpm", out),
    "rigid_body": lambda out: optimize_figures("rigid_body", out),
    "rigid_body_legs": lambda out: optimize_figures("rigid_body_legs", out),
    "electric": lambda out: optimize_figures("electric", out, "--iterations", "200"),
    "wave": lambda out: optimize_figures("wave", out),
    "smoke": lambda out: optimize_figures("smoke", out),
    "diffmpm3d": lambda out: optimize_figures(
        "diffmpm3d", out, "--iterations", str(MPM3D_ITERATIONS["diffmpm3d"])),
    "liquid": lambda out: optimize_figures(
        "liquid", out, "--iterations", str(MPM3D_ITERATIONS["liquid"])),
    "diffmpm3d_run": lambda out: run_figures("diffmpm3d", out),
    "liquid_run": lambda out: run_figures("liquid", out),
    "fit_spring": fit_spring_figures,
    "fit_lj": fit_lj_figures,
    "fit_ka": fit_ka_figures,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(JOBS), default=sorted(JOBS))
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="readme-figures-"))
    for name in args.only:
        load = os.getloadavg()[0]
        figures = JOBS[name](out)
        figures["load_before"] = round(load, 2)
        figures["load_after"] = round(os.getloadavg()[0], 2)
        figures["measured"] = time.strftime("%Y-%m-%d", time.gmtime())
        figures["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs"
        # read now, not at the start: another --only run may have recorded meanwhile
        record = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
        record[name] = figures
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"{name}: {json.dumps(figures)}", flush=True)


if __name__ == "__main__":
    main()
