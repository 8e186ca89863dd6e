"""The forward step's force launch against the reverse step's H lambda launch, CPU time.

64 softened gravity bodies (bench/grad_cost.py's scene), one thread: the forward step's
energy launch (`EnergyTerms.value_and_gradient`: U and dU/dx in one launch) and the reverse
step's (`hessian_vector(lean=True, masses=False)`: the tangents of dU/dx along x.dual alone,
as grad_cost.py's KEYs ask), each timed
over many launches in its own fresh process, the processes interleaved round by round (and
between trees with ``--baseline``). CPU time (process_time), not wall: on a box shared with
other work a process's wall time mostly measures the others.

    python bench/hvp_cost.py [--rounds 9] [--launches 5000] [--baseline /path/to/other/tree]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from grad_cost import SCENE

REPO = Path(__file__).resolve().parents[1]
CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    from simrun.adjoint.model import DiffModel
    from simrun.scene import initial_state, load_scene
    which, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    scene = load_scene(path, allow_outside=True)
    x0, _ = initial_state(scene)
    model = DiffModel(scene, x0, {}, {}, threads=1, mass_gradient=False)
    model.system.x.dual.from_numpy(np.random.default_rng(1).normal(size=x0.shape))
    terms = model.system.energy_terms()
    launches = terms.value_and_gradient() if which == "forward" else \\
        terms.hessian_vector(lean=True, masses=False).launches(energy=False)
    for compiled, flat in launches:
        compiled.launch(flat)
    start = time.process_time()
    for _ in range(n):
        for compiled, flat in launches:
            compiled.launch(flat)
    print((time.process_time() - start) / n * 1e6)
""")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--launches", type=int, default=5000)
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args()
    trees = [("this", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
    times: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        scene = Path(tmp) / "scene.yaml"
        scene.write_text(SCENE.format(kernels=REPO / "kernels", steps=100, every=100))
        for _ in range(args.rounds):
            for name, root in trees:
                for which in ("forward", "hvp"):
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    done = subprocess.run([sys.executable, "-c", CHILD, which,
                                           str(args.launches), str(scene)], env=env,
                                          capture_output=True, text=True, check=True)
                    times.setdefault((name, which), []).append(float(done.stdout.split()[-1]))
    for (name, which), values in times.items():
        print(f"{name} {which}: median {statistics.median(values):.2f} us CPU a launch "
              f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} processes)")
    for name, _ in trees:
        ratio = statistics.median(times[(name, "hvp")]) / statistics.median(
            times[(name, "forward")])
        print(f"{name}: H lambda / forward launch {ratio:.2f}x")


if __name__ == "__main__":
    main()
