"""Run DiffTaichi's own diffmpm.py (the walking robot) under Taichi 1.7.4 with given weights
and print its losses and per-iteration time as JSON. The program is read at run time from the
DiffTaichi mirror (or --source DIR), never copied into this repository. It asks for a GPU;
Taichi 1.7.4 segfaults there without one, so ti.init is given arch=ti.cpu.

    python bench/robots/difftaichi_diffmpm.py --weights W.npz [--iterations 3]

W.npz holds `weights` (4, 4) and `bias` (4,); the updates are the original's (plain gradient
descent, learning rate 0.1)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from difftaichi_mass_spring import NoGUI, fetch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--weights", type=Path, required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--source", type=Path)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="difftaichi_diffmpm_"))
    fetch(args.source, workdir, ("examples/diffmpm.py",))
    sys.path.insert(0, str(workdir))
    import taichi as ti

    ti.GUI = NoGUI  # the program opens a window at import
    init = ti.init
    ti.init = lambda **kw: init(**{**kw, "arch": ti.cpu})  # arch=ti.gpu segfaults without one
    mpm = importlib.import_module("diffmpm")
    scene = mpm.Scene()
    mpm.robot(scene)
    scene.finalize()
    mpm.allocate_fields()
    w = np.load(args.weights)
    mpm.weights.from_numpy(w["weights"].astype(np.float32))
    mpm.bias.from_numpy(w["bias"].astype(np.float32))
    for i in range(scene.n_particles):
        mpm.x[0, i] = scene.x[i]
        mpm.F[0, i] = [[1, 0], [0, 1]]
        mpm.actuator_id[i] = scene.actuator_id[i]
        mpm.particle_type[i] = scene.particle_type[i]
    losses, seconds = [], []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        with ti.ad.Tape(mpm.loss):
            mpm.forward()
        for p in (mpm.weights, mpm.bias):
            p.from_numpy(p.to_numpy() - 0.1 * p.grad.to_numpy())
        ti.sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(mpm.loss[None]))
    print(json.dumps({"losses": losses, "seconds": seconds, "particles": scene.n_particles}))


if __name__ == "__main__":
    main()
