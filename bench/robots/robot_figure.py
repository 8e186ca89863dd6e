"""The README's picture of a trained robot: its loss curve beside snapshots of the trained
episode (a `simrun optimize` folder of a scene with bonds, e.g. scenes/mass_spring.yaml).

    python bench/robots/robot_figure.py OPT_DIR docs/mass_spring_trained.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def loss_panel(ax, rows: np.ndarray, ylabel: str, digits: int) -> None:
    """A training's loss.csv rows (iteration, loss, ...) with the best one marked."""
    ax.plot(rows[:, 0], rows[:, 1], color="tab:blue")
    best = int(np.argmin(rows[:, 1]))
    ax.plot(rows[best, 0], rows[best, 1], "o", color="tab:green",
            label=f"best {rows[best, 1]:.{digits}f} (iteration {int(rows[best, 0])})")
    ax.set(xlabel="iteration", ylabel=ylabel, title="training")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)


def main(opt_dir: Path, png: Path, snapshots: int = 6) -> None:
    rows = np.loadtxt(opt_dir / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    frames = np.load(opt_dir / "episode" / "frames.npz")
    bonds = np.load(opt_dir / "episode" / "topology.npz")["bonds"]
    fig, (ax_loss, ax_walk) = plt.subplots(1, 2, figsize=(11, 3.4),
                                           gridspec_kw={"width_ratios": [1, 2]})
    loss_panel(ax_loss, rows, "loss = -x of the head", digits=3)
    picks = np.linspace(0, len(frames["x"]) - 1, snapshots).astype(int)
    colours = plt.cm.viridis(np.linspace(0, 0.9, snapshots))
    for k, colour in zip(picks, colours):
        x = frames["x"][k]
        for a, b in bonds:
            ax_walk.plot(*x[[a, b]].T, color=colour, lw=0.8)
        ax_walk.plot(*x[0], "o", color="tab:red", ms=3)
        ax_walk.text(x[:, 0].mean(), x[:, 1].max() + 0.02, f"t={frames['time'][k]:.1f}",
                     ha="center", fontsize=7)
    ax_walk.axhline(0.1, color="k", lw=1)
    ax_walk.set(aspect="equal", xlabel="x", title="best controller's episode (head in red)")
    shown = frames["x"][picks]
    ax_walk.set_xlim(shown[..., 0].min() - 0.03, shown[..., 0].max() + 0.03)
    ax_walk.set_ylim(0.05, shown[..., 1].max() + 0.06)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
