"""Draw scenes/electric.yaml's training: the loss per iteration, and the goal's path with
the particle's path before and after training (electrodes grey). Writes one PNG.

    python bench/robots/electric_figure.py OPT_DIR START_RUN OUT.png

OPT_DIR is a `simrun optimize` folder (loss.csv, episode/frames.npz: the trained run),
START_RUN a `simrun run` folder of the untrained scene (frames.npz).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ELECTRODES = [[0.1, 0.1], [0.1, 0.9], [0.9, 0.9], [0.9, 0.1], [0.5, 0.9], [0.5, 0.1],
              [0.1, 0.5], [0.9, 0.5]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("opt", type=Path)
    ap.add_argument("start", type=Path)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    rows = np.loadtxt(args.opt / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    goal = np.load(REPO / "scenes" / "electric_start.npz")["goal"]
    before = np.load(args.start / "frames.npz")["x"][:, 0]
    after = np.load(args.opt / "episode" / "frames.npz")["x"][:, 0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4), dpi=100)
    left.semilogy(rows[:, 0], rows[:, 1], color="C0")
    left.set_xlabel("iteration")
    left.set_ylabel("loss: dt sum |x - goal|^2")
    left.set_title(f"loss {rows[0, 1]:.3g} -> {rows[-1, 1]:.3g} in {int(rows[-1, 0])} "
                   "iterations", fontsize=10)
    left.grid(alpha=0.3)
    for p in ELECTRODES:
        right.add_patch(plt.Circle(p, 0.02, color="0.7"))
    right.plot(goal[1:, 0], goal[1:, 1], "--", color="C2", label="goal path")
    right.plot(before[:, 0], before[:, 1], color="0.5", lw=1, label="before training")
    right.plot(after[:, 0], after[:, 1], color="C3", lw=1.5, label="after training")
    right.plot(*goal[1], "o", color="C2", ms=5)
    right.set_xlim(0, 1)
    right.set_ylim(0, 1)
    right.set_aspect("equal")
    right.legend(fontsize=8, loc="lower left")
    right.set_title("electric: the particle's path (start at the dot)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
