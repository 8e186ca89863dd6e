"""Run DiffTaichi's own billiards.py under Taichi 1.7.4 from a given cue start and print its
losses and per-iteration time as JSON. The program is read at run time from the DiffTaichi
mirror (or --source DIR), never copied into this repository.

    python bench/robots/difftaichi_billiards.py [--iterations 3] [--x 0.1 0.5] [--v 0.3 0]

The updates are the original's (plain gradient descent, learning rate 0.01)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from difftaichi_mass_spring import NoGUI, fetch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--x", type=float, nargs=2, default=[0.1, 0.5])
    ap.add_argument("--v", type=float, nargs=2, default=[0.3, 0.0])
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="difftaichi_billiards_"))
    fetch(args.source, workdir, ("examples/billiards.py",))
    sys.path.insert(0, str(workdir))
    import taichi as ti

    ti.GUI = NoGUI  # the program opens a window at import
    game = importlib.import_module("billiards")
    game.init_x[None] = args.x
    game.init_v[None] = args.v
    losses, seconds = [], []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        game.clear()
        with ti.ad.Tape(game.loss):
            game.forward(visualize=False)
        for d in range(2):
            game.init_x[None][d] -= game.learning_rate * game.init_x.grad[None][d]
            game.init_v[None][d] -= game.learning_rate * game.init_v.grad[None][d]
        ti.sync()
        seconds.append(time.perf_counter() - t0)
        losses.append(float(game.loss[None]))
    print(json.dumps({"losses": losses, "seconds": seconds}))


if __name__ == "__main__":
    main()
