"""Do two trees give the same bits? `simrun run` (frames.npz) and `simrun grad`
(gradients.json, gradients.npz) on every shipped scene at short horizons, tree A then tree B,
compared array by array (issue 45: "every shipped scene's run frames and gradients keep
their bits"). Scenes without a trajectory objective get `objective: total at end`.

    python bench/bits_ab.py --a /tmp/main-copy --b . --out /tmp/bits [--only projectile]

Each tree runs with its own PYTHONPATH from its own folder (its scenes and kernels); a
command's log is beside its output folder. Exit 1 where any file differs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

TOTAL = ["--set", "objective={builtin: total, at: end}"]
RUNS = ["billiards", "diffmpm", "diffmpm3d", "electric", "fem", "fit_ka", "fit_lj",
        "fit_spring", "gravity", "gravity_1024", "kob_andersen", "liquid", "lj_melt", "lj_nvt",
        "mass_spring", "molecule", "mpm", "oscillators", "projectile", "rigid_body",
        "rigid_body_legs", "smoke", "wave"]
GRADS = {  # scene: (steps, KEYs, extra options)
    "billiards": (40, ["fields.cue_x", "fields.cue_v", "dt"], []),
    "diffmpm": (30, ["fields.weights", "fields.bias", "dt"], []),
    "diffmpm3d": (5, ["dt"], []),
    "electric": (20, ["dt", "state.x0"], []),
    "fem": (20, ["dt", "state.x0"], TOTAL),
    "fit_ka": (10, ["energy.0.params.epsilon[A:B]", "dt"], TOTAL),
    "fit_lj": (10, ["energy.0.params.epsilon", "dt"], TOTAL),
    "fit_spring": (20, ["energy.0.params.k", "dt"], []),
    "gravity": (20, ["dt", "state.x0"], TOTAL),
    "gravity_1024": (10, ["dt", "state.v0"], TOTAL),
    "kob_andersen": (10, ["dt", "integrator.temperature"], TOTAL),
    "liquid": (5, ["dt"], []),
    "lj_melt": (10, ["dt", "state.x0"], TOTAL),
    "lj_nvt": (20, ["dt", "integrator.temperature", "integrator.friction"], TOTAL),
    "mass_spring": (30, ["fields.weights1", "dt"], []),
    "molecule": (20, ["dt", "state.x0"], TOTAL),
    "mpm": (20, ["dt", "state.x0"], TOTAL),
    "oscillators": (20, ["dt", "state.x0"], []),
    "projectile": (20, ["initial.velocity", "dt"], []),
    "rigid_body": (20, ["dt"], []),
    "rigid_body_legs": (20, ["dt"], []),
    "smoke": (20, ["dt"], []),
    "wave": (20, ["dt"], []),
}


def simrun(tree: Path, out: Path, args: list[str]) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree), "MPLBACKEND": "Agg"}
    with open(f"{out}.log", "w") as log:
        cli = "import sys; from simrun.cli import main; sys.exit(main())"
        return subprocess.run([sys.executable, "-c", cli, *args, "--out", str(out)], cwd=tree,
                              env=env, stdout=log, stderr=subprocess.STDOUT).returncode


def run_all(tree: Path, out: Path, only: set | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in RUNS:
        if not only or name in only:
            rc = simrun(tree, out / f"run-{name}", ["run", f"scenes/{name}.yaml", "--steps",
                                                    "20", "--set", "outputs.every=1"])
            print(f"{tree}: run {name} rc={rc}", flush=True)
    for name, (steps, keys, extra) in GRADS.items():
        if not only or name in only:
            wrt = [a for k in keys for a in ("--wrt", k)]
            rc = simrun(tree, out / f"grad-{name}", ["grad", f"scenes/{name}.yaml", "--steps",
                                                     str(steps), *extra, *wrt])
            print(f"{tree}: grad {name} rc={rc}", flush=True)


def same_npz(a: Path, b: Path) -> bool:
    za, zb = np.load(a), np.load(b)
    return set(za.files) == set(zb.files) and all(
        za[k].dtype == zb[k].dtype and np.array_equal(za[k], zb[k], equal_nan=True)
        for k in za.files)


def compare(a: Path, b: Path) -> bool:
    ok = True
    for folder in sorted(p for p in a.iterdir() if p.is_dir()):
        other = b / folder.name
        if folder.name.startswith("run-"):
            files = ["frames.npz"]
        else:
            files = ["gradients.npz"]
            ja, jb = (json.loads((f / "gradients.json").read_text()) for f in (folder, other))
            value = [j["objective"].get("value") if isinstance(j["objective"], dict)
                     else j["objective"] for j in (ja, jb)]
            same = ja["gradients"] == jb["gradients"] and value[0] == value[1]
            print(f"{folder.name}: objective and gradients.json "
                  f"{'identical' if same else 'DIFFER'}")
            ok &= same
        for name in files:
            same = same_npz(folder / name, other / name)
            print(f"{folder.name}: {name} {'identical' if same else 'DIFFER'}")
            ok &= same
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", action="append", help="a scene (repeatable)")
    args = ap.parse_args()
    only = set(args.only) if args.only else None
    for side, tree in (("a", args.a), ("b", args.b)):
        run_all(tree.resolve(), args.out / side, only)
    sys.exit(0 if compare(args.out / "a", args.out / "b") else 1)


if __name__ == "__main__":
    main()
