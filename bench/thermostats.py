"""What a thermostat and a thermo row cost per step, against plain velocity Verlet.

    python bench/thermostats.py --rounds 3 [--steps 4000]

Each job runs ``run_scene`` in a fresh process (wall time less setup, per step) on two scenes:
the 32-bead polymer (scenes/molecule.yaml, launch-bound) and 1,024 softened-gravity bodies
(scenes/gravity_1024.yaml, force-bound), with velocity Verlet, Langevin (BAOAB), a Nosé-Hoover
chain and velocity rescaling, and velocity Verlet with a thermo row every step. The jobs of a
round alternate, so a load change on a shared machine hits them alike; medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
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


def one(scene: str, sets: list[str], steps: int, folder: Path) -> float:
    sets = [*sets, f"steps={steps}", "outputs.every=1000000", "outputs.xyz=false"]
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "scenes" / scene),
                           json.dumps(sets), str(folder)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["per_step_us"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4000)
    args = parser.parse_args()
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, (scene, share) in SCENES.items():
                for case, sets in CASES.items():
                    folder = Path(tmp) / f"{r}-{scene}-{len(times)}"
                    steps = max(10, int(args.steps * share))
                    times.setdefault((label, case), []).append(one(scene, sets, steps, folder))
    print("| scene | integrator | us/step, median (min-max) | vs velocity Verlet |")
    print("|---|---|---|---|")
    for label in SCENES:
        base = statistics.median(times[(label, "velocity_verlet")])
        for case in CASES:
            t = times[(label, case)]
            print(f"| {label} | {case} | {statistics.median(t):.1f} ({min(t):.1f}-{max(t):.1f})"
                  f" | {statistics.median(t) / base:.2f} |")


if __name__ == "__main__":
    main()
