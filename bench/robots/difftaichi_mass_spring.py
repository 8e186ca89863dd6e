"""Run DiffTaichi's own mass_spring.py (robot 2) under Taichi 1.7.4 with given weights and
print its losses and per-iteration time as JSON. The program is read at run time from the
DiffTaichi mirror (or --source DIR holding mass_spring.py and mass_spring_robot_config.py),
never copied into this repository.

    python bench/robots/difftaichi_mass_spring.py --weights W.npz [--iterations 3] [--toi]

W.npz holds weights1, bias1, weights2, bias2 as simrun's scene has them (springs in scene
order: actuated first); they are permuted back to the original's spring order. The training
updates are the original's own (gradient scaled to norm 0.2, plain descent).
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MIRROR = Path("/work/.mirror/taichi-dev+difftaichi/repo")
FILES = ("examples/mass_spring.py", "examples/mass_spring_robot_config.py")


def fetch(source: Path | None, into: Path, files: tuple[str, ...] = FILES) -> None:
    """Write the original program's files into `into` (from `source` or the mirror)."""
    for name in files:
        target = into / Path(name).name
        if source is not None:
            target.write_text((source / Path(name).name).read_text())
        else:
            text = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{name}"],
                                  check=True, capture_output=True, text=True).stdout
            target.write_text(text)


class NoGUI:
    """Stands in for ti.GUI: the programs draw while they train."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--weights", type=Path, required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--no-toi", action="store_true", help="advance_no_toi instead of toi")
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="difftaichi_ms_"))
    fetch(args.source, workdir)
    sys.path.insert(0, str(workdir))
    import taichi as ti

    ti.GUI = NoGUI  # the program opens a window at import
    sys.argv = ["mass_spring.py", "2", "train"]
    ms = importlib.import_module("mass_spring")
    config = importlib.import_module("mass_spring_robot_config")
    sys.path.insert(0, str(Path(__file__).parent))
    from mass_spring_geometry import spring_order

    ms.setup_robot(*config.robots[2]())
    ms.use_toi = not args.no_toi
    springs = [(a, b, act != 0) for a, b, _length, _k, act in config.springs]
    order = spring_order(springs)  # scene index -> original index
    w = np.load(args.weights)
    w2 = np.empty_like(w["weights2"])
    b2 = np.empty_like(w["bias2"])
    w2[order], b2[order] = w["weights2"], w["bias2"]
    ms.weights1.from_numpy(w["weights1"].astype(np.float32))
    ms.bias1.from_numpy(w["bias1"].astype(np.float32))
    ms.weights2.from_numpy(w2.astype(np.float32))
    ms.bias2.from_numpy(b2.astype(np.float32))
    params = (ms.weights1, ms.bias1, ms.weights2, ms.bias2)
    losses, seconds = [], []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        ms.clear()
        with ti.ad.Tape(ms.loss):
            ms.forward(visualize=False)
        grads = [p.grad.to_numpy() for p in params]
        norm = float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads)))
        scale = 0.2 / (norm + 1e-6)
        for p, g in zip(params, grads):
            p.from_numpy(p.to_numpy() - scale * g)
        ti.sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(ms.loss[None]))
    print(json.dumps({"losses": losses, "seconds": seconds, "springs": len(springs),
                      "order": order}))


if __name__ == "__main__":
    main()
