"""Instructions per launch of a scene's energy gradient, or per `simrun optimize` evaluation
of a DiffTaichi robot, one thread, two trees: a count the load on a shared machine does not
move (backs up bench/reproducible_ab.py's timings).

    python bench/launch_instructions.py --a /path/to/main --b . [--scene lj_4000]
    python bench/launch_instructions.py --a /path/to/main --b . --scene opt_billiards

Each tree runs the gradient 25 and 65 times under `valgrind --tool=callgrind` (kernels
cached beforehand, outside valgrind); the difference / 40 is one launch. An `opt_` scene
runs `scene_gradient` as optimize's evaluations call it (its trajectory cache kept, two
evaluations first to build it) 1 and 3 more times: the difference / 2 is one evaluation
(the Python between the launches included). valgrind 3.19
cannot decode AVX-512, so both trees compile their kernels for Haswell's features (a
sitecustomize in a temporary folder sets llvmlite's host CPU), their own kernel cache each.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENES = {"lj_4000": ["lj_melt", "particles.count=4000", "initial.shape=[10,10,10]",
                      "boundary.high=[16.795961913825074,16.795961913825074,"
                      "16.795961913825074]"],
          "gravity_1024": ["gravity_1024"],
          "opt_mass_spring": ["mass_spring"], "opt_billiards": ["billiards"]}
HASWELL = '''import llvmlite.binding as _llvm
_llvm.get_host_cpu_name = lambda: "haswell"
class _F:
    def flatten(self):
        return ("+avx,+avx2,+fma,+sse4.2,+popcnt,+bmi,+bmi2,+f16c,+lzcnt,+movbe,+cx16,+sse4.1,"
                "+ssse3,+sse3,+sse2,+sse,+mmx,+fxsr,+xsave")
_llvm.get_host_cpu_features = lambda: _F()
'''
LAUNCHES = '''import sys
from simrun.scene import load_scene, initial_state
from simrun.stepper.system import System
scene = load_scene(sys.argv[1], sys.argv[3:])
x0, v0 = initial_state(scene)
system = System(scene, x0, 1)
system.set_state(x0, v0)
system.forces()
terms = system.energy_terms()
grad, flat = (terms.fused or terms.reverse)[0]  # term 0's gradient launch
for _ in range(int(sys.argv[2])):
    grad.launch(flat)
'''
EVALUATIONS = '''import sys
from simrun.jobs.grad import field_start_values, scene_gradient
from simrun.jobs.reuse import TrajectoryCache
from simrun.optimize.params import Layout
from simrun.scene import load_scene
layout = Layout.of(load_scene(sys.argv[1], sys.argv[3:]), field_start_values)
vector, cache = layout.initial(), TrajectoryCache()
for _ in range(2 + int(sys.argv[2])):
    scene, start = layout.scene_at(vector)
    scene_gradient(scene, [k.text for k in layout.keys], threads=1, start=start,
                   fields=layout.fields_at(vector), cache=cache)
'''


def count(tree: Path, tmp: Path, scene: list[str], launches: int, valgrind: bool,
          script: str = "launches.py") -> int:
    env = {**os.environ, "PYTHONPATH": f"{tmp}:{tree}", "SIMRUN_CACHE_DIR": str(tmp / tree.name)}
    cmd = [sys.executable, str(tmp / script), str(tree / "scenes" / f"{scene[0]}.yaml"),
           str(launches), *scene[1:]]
    if valgrind:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.out", *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    return int(found.group(1)) if found else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True)
    ap.add_argument("--b", type=Path, default=REPO)
    ap.add_argument("--scene", choices=sorted(SCENES), default="lj_4000")
    args = ap.parse_args()
    scene = SCENES[args.scene]
    evaluations = args.scene.startswith("opt_")
    script, counts, what = (("evaluations.py", (1, 3), "evaluation") if evaluations
                            else ("launches.py", (25, 65), "launch"))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "sitecustomize.py").write_text(HASWELL)
        (tmp / "launches.py").write_text(LAUNCHES)
        (tmp / "evaluations.py").write_text(EVALUATIONS)
        per = {}
        for side, tree in (("A", args.a.resolve()), ("B", args.b.resolve())):
            count(tree, tmp, scene, 1, False, script)  # compiles, outside valgrind
            few, many = (count(tree, tmp, scene, n, True, script) for n in counts)
            per[side] = (many - few) / (counts[1] - counts[0])
            print(f"{side} {tree}: {per[side] / 1e6:.3f} M instructions per {what}",
                  flush=True)
        print(f"B / A = {per['B'] / per['A']:.3f}")


if __name__ == "__main__":
    main()
