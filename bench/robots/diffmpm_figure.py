"""The README's picture of scenes/diffmpm.yaml trained: the loss per iteration beside
snapshots of the trained robot walking (a `simrun run` of the training's best.yaml), each
muscle coloured by its actuation at that step (blue: act < 0, red: act > 0; the passive body
grey), as bench/robots/mpm3d_figure.py draws the 3-D robot.

    python bench/robots/diffmpm_figure.py OPT_DIR RUN_DIR docs/diffmpm_trained.png

OPT_DIR is the `simrun optimize` folder (loss.csv), RUN_DIR the `simrun run` of its
best.yaml (frames.npz, state.npz, scene.yaml).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from mpm3d_figure import actuations, colours  # noqa: E402  (this folder: a sibling script)
from robot_figure import loss_panel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("opt", type=Path)
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--snapshots", type=int, default=2)
    args = ap.parse_args()
    rows = np.loadtxt(args.opt / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    scene = yaml.safe_load((args.run / "scene.yaml").read_text())
    state, frames = np.load(args.run / "state.npz"), np.load(args.run / "frames.npz")
    steps, xs = frames["step"], frames["x"]
    act = actuations(state, scene, steps)
    actuator = state["field:actuator"]
    params = scene["step_kernels"].get("params", {})
    floor = params.get("bound", 3) / params.get("n_grid", 128)

    fig, (ax_loss, ax_walk) = plt.subplots(1, 2, figsize=(11, 3.4),
                                           gridspec_kw={"width_ratios": [1, 2]})
    loss_panel(ax_loss, rows, "loss = -(mean x at the end)", digits=4)

    picks = np.linspace(0, len(steps) - 1, args.snapshots).astype(int)
    for k in picks:
        x = xs[k]
        ax_walk.scatter(x[:, 0], x[:, 1], s=1.5, linewidths=0,
                        c=colours(act[k], actuator, np.ones(len(x), int)))
        ax_walk.text(x[:, 0].mean(), x[:, 1].max() + 0.01,
                     f"step {int(steps[k])}\nmean x {x[:, 0].mean():.3f}", ha="center",
                     fontsize=7)
    ax_walk.axhspan(0.0, floor, color="0.85", zorder=0)
    shown = xs[picks]
    ax_walk.set_xlim(shown[..., 0].min() - 0.02, shown[..., 0].max() + 0.02)
    ax_walk.set_ylim(0.0, shown[..., 1].max() + 0.06)
    ax_walk.set(aspect="equal", xlabel="x", ylabel="y",
                title="trained episode, first and last frame (muscles: blue act < 0, red act > 0)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
