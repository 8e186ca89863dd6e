"""DiffTaichi's robots, side by side: each shipped scene under `simrun optimize` and the
original DiffTaichi program under Taichi 1.7.4 (read from the mirror at run time), from the
same initial weights (the scene module's seeded draw, injected into the original), with the
original's own update rule. Prints the first losses of both, their relative differences, and
the median time per training iteration (iterations 2..N: the first pays for compilation).

For mass_spring the losses after the first update depend on the gradients' rounding (contact
events, f32): the script also reruns the original from weights moved by one ulp (half the
entries of weights2 one step up), to show how far Taichi's own third loss moves under
rounding-sized changes.

    python bench/robots/bench_robots.py [--iterations 5] [--only mass_spring,billiards]
        [--ulp-runs 3] [--no-lang] [--json out.json]

Unless --no-lang, each original also runs under `import taichi` = simrun.lang (the same
driver, weights and update rule): the issue's yardstick for the scene machinery's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# scene -> (original driver, fields.<name> it takes)
ROBOTS = {
    "mass_spring": ("difftaichi_mass_spring.py", ("weights1", "bias1", "weights2", "bias2")),
    "billiards": ("difftaichi_billiards.py", ("cue_x", "cue_v")),
    "diffmpm": ("difftaichi_diffmpm.py", ("weights", "bias")),
}


def simrun_side(name: str, iterations: int, work: Path) -> dict:
    out = work / f"simrun-{name}"
    subprocess.run([sys.executable, "-m", "simrun.cli", "optimize",
                    str(REPO / "scenes" / f"{name}.yaml"), "--iterations", str(iterations - 1),
                    "--out", str(out), "--no-render"], check=True, capture_output=True)
    rows = np.loadtxt(out / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    walls = np.diff(np.concatenate([[0.0], rows[:, 4]]))
    start = np.load(out / "params.npz")
    return {"losses": rows[:, 1].tolist(), "seconds": walls.tolist(),
            "start": {k.split(".", 1)[1]: start[k][0] for k in start.files
                      if k.startswith("fields.")}}


def taichi_side(name: str, iterations: int, start: dict, work: Path, weights: Path,
                shim: Path | None = None) -> dict:
    """The original program under Taichi 1.7.4, or with `shim` (a folder whose `taichi`
    package is simrun.lang) under simrun.lang: the same driver, weights and update rule."""
    driver, _names = ROBOTS[name]
    cmd = [sys.executable, str(HERE / driver), "--iterations", str(iterations)]
    if name == "billiards":
        cmd += ["--x", *map(str, start["cue_x"]), "--v", *map(str, start["cue_v"])]
    else:
        cmd += ["--weights", str(weights)]
    env = dict(os.environ)
    if shim is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(shim), str(REPO), env.get("PYTHONPATH", "")])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def lang_shim(work: Path) -> Path:
    """A folder whose `taichi` package is simrun.lang (taichi_conformance.py's shim)."""
    sys.path.insert(0, str(HERE.parent))
    from taichi_conformance import SHIM

    (work / "shim" / "taichi").mkdir(parents=True)
    (work / "shim" / "taichi" / "__init__.py").write_text(SHIM)
    return work / "shim"


def ulp_moved(weights: Path, seed: int, work: Path) -> Path:
    data = {k: v.astype(np.float32) for k, v in np.load(weights).items()}
    w = data["weights2"]
    up = np.random.default_rng(seed).random(w.shape) < 0.5
    data["weights2"] = np.where(up, np.nextafter(w, np.float32(np.inf)), w)
    path = work / f"ulp-{seed}.npz"
    np.savez(path, **data)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--only", default=",".join(ROBOTS))
    ap.add_argument("--ulp-runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-lang", action="store_true",
                    help="skip the originals under `import simrun.lang as taichi`")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_robots_"))
    shim = None if args.no_lang else lang_shim(work)
    report = {"cpus": os.cpu_count(), "load": os.getloadavg(), "robots": {}}
    for name in args.only.split(","):
        ours = simrun_side(name, args.iterations, work)
        weights = work / f"{name}-start.npz"
        np.savez(weights, **ours["start"])
        theirs = taichi_side(name, args.iterations, ours["start"], work, weights)
        n = min(3, len(ours["losses"]), len(theirs["losses"]))
        rel = [abs(a - b) / abs(b) for a, b in zip(ours["losses"][:n], theirs["losses"][:n])]
        entry = {"simrun": ours["losses"][:n], "taichi": theirs["losses"][:n], "rel": rel,
                 "simrun_s": median(ours["seconds"][1:]), "taichi_s": median(theirs["seconds"][1:])}
        if shim is not None:
            lang = taichi_side(name, args.iterations, ours["start"], work, weights, shim)
            entry["lang"] = lang["losses"][:n]
            entry["lang_s"] = median(lang["seconds"][1:])
        if name == "mass_spring" and args.ulp_runs:
            moved = [taichi_side(name, 3, ours["start"], work, ulp_moved(weights, s, work))
                     for s in range(args.ulp_runs)]
            third = [m["losses"][2] for m in moved]
            entry["taichi_third_loss_under_ulp_moves"] = third
            entry["taichi_ulp_spread_rel"] = (max(third) - min(third)) / abs(theirs["losses"][2])
        report["robots"][name] = entry
        print(f"{name:12s} losses simrun {['%.8g' % v for v in entry['simrun']]}")
        print(f"{'':12s}        taichi {['%.8g' % v for v in entry['taichi']]}  rel "
              f"{['%.1e' % v for v in rel]}")
        if "taichi_ulp_spread_rel" in entry:
            print(f"{'':12s} taichi's third loss from 1-ulp moved weights: "
                  f"{['%.6g' % v for v in entry['taichi_third_loss_under_ulp_moves']]} "
                  f"(spread {entry['taichi_ulp_spread_rel']:.1e} relative)")
        print(f"{'':12s} s/iteration: simrun {entry['simrun_s']:.3f}  taichi "
              f"{entry['taichi_s']:.3f}  ratio {entry['simrun_s'] / entry['taichi_s']:.2f}")
        if "lang_s" in entry:
            print(f"{'':12s} the original under simrun.lang: {entry['lang_s']:.3f} s/iteration "
                  f"(simrun / it {entry['simrun_s'] / entry['lang_s']:.2f}), losses "
                  f"{['%.8g' % v for v in entry['lang']]}")
    print(f"load average {report['load']}, {report['cpus']} CPUs")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=float) + "\n")


if __name__ == "__main__":
    main()
