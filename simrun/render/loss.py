"""Loss curve of an optimize folder's `loss.csv` (iteration,loss,gradient_norm,step,wall_s).

Why a log scale and the gradient norm beside the loss: a training that has converged shows
both falling by orders of magnitude; one that stalls shows a flat loss with a large gradient
(too large a learning rate) or a small one (a flat region or a bound)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simrun.render.energy import read_energy
from simrun.render.frames import atomic_path


def render_loss(csv_path: str | os.PathLike, png_path: str | os.PathLike, *,
                title: str = "") -> Path:
    """Loss and gradient norm against the iteration, on log scales where they are positive."""
    fig = loss_figure(read_energy(csv_path), title)  # any CSV of numbers with a header
    with atomic_path(Path(png_path)) as tmp:
        fig.savefig(tmp, format="png")
    return Path(png_path)


def loss_figure(cols: dict[str, np.ndarray], title: str = "") -> Figure:
    """The loss plot of loss.csv's columns (axes: loss, then |gradient|)."""
    it = cols.get("iteration", np.zeros(0))
    fig = Figure(figsize=(7, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax, gax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2), gridspec_kw={
        "left": 0.13, "right": 0.97, "top": 0.93, "bottom": 0.1, "hspace": 0.12})
    ax.set_title(f"{title}: loss" if title else "loss", fontsize="medium")
    style = {"marker": "o", "markersize": 3} if len(it) < 30 else {}
    for axis, name, colour, label in ((ax, "loss", "#1f77b4", "loss"),
                                      (gax, "gradient_norm", "#d62728", "|gradient|")):
        values = cols.get(name, np.zeros(0))
        axis.plot(it, values, color=colour, lw=1.3, **style)
        if len(values) and np.all(values[np.isfinite(values)] > 0):
            axis.set_yscale("log")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3, which="both")
    if len(it):
        best = int(np.nanargmin(cols["loss"])) if np.any(np.isfinite(cols["loss"])) else None
        if best is not None:
            ax.plot(it[best], cols["loss"][best], "o", color="#2ca02c",
                    label=f"best {cols['loss'][best]:.3g} (iteration {int(it[best])})")
            ax.legend(loc="upper right", fontsize="small")
    gax.set_xlabel("iteration")
    gax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no iteration 2.5
    if len(it) > 1:  # the axis ends at the last iteration: no tick past it
        gax.set_xlim(float(it[0]), float(it[-1]))
    return fig
