"""What a thermostat and a thermo row cost per step, against plain velocity Verlet.

    python bench/thermostats.py --rounds 3 [--steps 4000] [--baseline /path/to/main]

Each job runs ``run_scene`` in a fresh process (wall time less setup, per step) on two scenes:
the 32-bead polymer (scenes/molecule.yaml, launch-bound) and 1,024 softened-gravity bodies
(scenes/gravity_1024.yaml, force-bound), with velocity Verlet, Langevin (BAOAB), a Nosé-Hoover
chain and velocity rescaling, and velocity Verlet with a thermo row every step. The jobs of a
round alternate, so a load change on a shared machine hits them alike; medians of the rounds.
``--baseline DIR`` runs each job with that checkout's simrun too, right after this one's (a
case the baseline lacks, e.g. a new thermostat, is left out there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from simrun.scene import load_scene
    from simrun.stepper import run_scene
    scene = load_scene(sys.argv[1], json.loads(sys.argv[2]))
    r = run_scene(scene, Path(sys.argv[3]))
    print(json.dumps({"per_step_us": (r.wall_s - r.setup_s) / r.steps_done * 1e6}))
""")
CASES = {
    "velocity_verlet": ["integrator=velocity_verlet"],
    "velocity_verlet, thermo every step": ["integrator=velocity_verlet", "thermo=1"],
    "langevin": ["integrator={type: langevin, temperature: 1.0, friction: 1.0}"],
    "nose_hoover (chain 3)": ["integrator={type: nose_hoover, temperature: 1.0, tau: 0.5}"],
    "rescale (every 10)": ["integrator={type: rescale, temperature: 1.0, every: 10}"],
    "csvr": ["integrator={type: csvr, temperature: 1.0, tau: 0.1}"],
}
SCENES = {"molecule (32 beads, 3-D)": ("molecule.yaml", 1.0),
          "gravity (1,024 bodies, 2-D)": ("gravity_1024.yaml", 0.25)}


def one(scene: str, sets: list[str], steps: int, folder: Path, root: Path = REPO
        ) -> float | None:
    """us per step of one job with the simrun of checkout `root` (None: it failed there)."""
    sets = [*sets, f"steps={steps}", "outputs.every=1000000", "outputs.xyz=false"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "scenes" / scene),
                           json.dumps(sets), str(folder)], capture_output=True, text=True,
                          env=env, cwd=root, check=root == REPO)  # cwd: `-c` imports from it
    if done.returncode:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])["per_step_us"]


def _cell(t: list[float]) -> str:
    return f"{statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})" if t else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    roots = {"this": REPO} | ({"baseline": args.baseline} if args.baseline else {})
    times: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, (scene, share) in SCENES.items():
                for case, sets in CASES.items():
                    for name, root in roots.items():
                        folder = Path(tmp) / f"{r}-{scene}-{len(times)}-{name}"
                        steps = max(10, int(args.steps * share))
                        t = one(scene, sets, steps, folder, root)
                        if t is not None:
                            times.setdefault((name, label, case), []).append(t)
    print("| scene | integrator | us/step, median (min-max) | vs velocity Verlet |"
          + (" baseline us/step | this / baseline |" if args.baseline else ""))
    print("|---|---|---|---|" + ("---|---|" if args.baseline else ""))
    for label in SCENES:
        base = statistics.median(times[("this", label, "velocity_verlet")])
        for case in CASES:
            t = times[("this", label, case)]
            row = f"| {label} | {case} | {_cell(t)} | {statistics.median(t) / base:.2f} |"
            if args.baseline:
                b = times.get(("baseline", label, case), [])
                ratio = f"{statistics.median(t) / statistics.median(b):.2f}" if b else "-"
                row += f" {_cell(b)} | {ratio} |"
            print(row)


if __name__ == "__main__":
    main()
