"""Energy-vs-time plot of a run's `energy.csv` (step,time,kinetic,potential,total).

Why the drift panel: in a conservative run the total is flat on the energy scale even when the
integrator leaks; the relative drift (E - E0) / |E0| makes that leak visible.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simrun.render.frames import atomic_path

_SERIES = (("kinetic", "#1f77b4"), ("potential", "#ff7f0e"), ("total", "#2ca02c"))


def read_energy(csv_path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Columns of the CSV as 1-D float arrays (also for a single row or a header only)."""
    with open(csv_path, encoding="utf-8") as f:
        header = f.readline().strip().split(",")
        with warnings.catch_warnings():  # a header-only file is a valid, empty run
            warnings.simplefilter("ignore", UserWarning)
            rows = np.loadtxt(f, delimiter=",", ndmin=2, dtype=np.float64)
    rows = rows.reshape(-1, len(header))
    return {name.strip(): rows[:, j] for j, name in enumerate(header)}


def relative_drift(total: np.ndarray) -> np.ndarray:
    """(E - E0) / |E0|; scaled by the largest |E| instead when E0 is (near) zero."""
    scale = abs(total[0])
    if scale < 1e-12 * max(1.0, float(np.nanmax(np.abs(total)))):
        scale = float(np.nanmax(np.abs(total))) or 1.0
    return (total - total[0]) / scale


def render_energy(csv_path: str | os.PathLike, png_path: str | os.PathLike, *,
                  title: str = "") -> Path:
    """Plot kinetic, potential and total energy vs time, and the total's relative drift."""
    cols = read_energy(csv_path)
    n = len(next(iter(cols.values()), []))
    xkey = "time" if "time" in cols else "step"
    t = cols.get(xkey, np.arange(n, dtype=np.float64))
    fig = Figure(figsize=(7, 5), dpi=100)  # fixed margins: a layout engine costs ~0.2 s
    FigureCanvasAgg(fig)
    ax, drift_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1), gridspec_kw={
        "left": 0.13, "right": 0.97, "top": 0.93, "bottom": 0.09, "hspace": 0.28})
    ax.set_title(f"{title}: energy" if title else "energy", fontsize="medium")
    style = {"marker": "o", "markersize": 4} if n < 3 else {}
    for name, colour in _SERIES:
        if name in cols:
            ax.plot(t, cols[name], label=name, color=colour, lw=1.2, **style)
    ax.set_ylabel("energy")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 5), useOffset=False)
    ax.grid(alpha=0.3)
    if n == 0:
        ax.text(0.5, 0.5, "no energy rows", ha="center", va="center", transform=ax.transAxes)
    elif ax.lines:
        ax.legend(loc="best", fontsize="small")
    if "total" in cols and n:
        drift = relative_drift(cols["total"])
        drift_ax.plot(t, drift, color="#2ca02c", lw=1.0, **style)
        drift_ax.set_title(f"total energy, relative change (E - E0) / |E0|: final "
                           f"{drift[-1]:+.3g}, largest {drift[np.argmax(np.abs(drift))]:+.3g}",
                           fontsize="small")
    drift_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))  # short tick labels
    drift_ax.axhline(0.0, color="0.6", lw=0.6)
    drift_ax.set_ylabel("rel. drift")
    drift_ax.set_xlabel(xkey)
    drift_ax.grid(alpha=0.3)
    png_path = Path(png_path)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png")
    return png_path
