"""Energy-vs-time plot of a run's thermo.csv (or energy.csv, for runs before thermo.csv).

Why the drift panel: in a conservative run the total is flat on the energy scale even when the
integrator leaks; the relative drift (E - E0) / |E0| makes that leak visible. Its title gives
the real numbers (E0, the last E, the largest change and what it is relative to), never a
change scaled by the run's own largest energy, which after a blow-up always reads "+1". A
Nosé-Hoover run's panel shows its conserved extended energy; a run that conserves nothing
(damping, a thermostat without an extended energy, step kernels, a controller) has no drift
panel. A temperature panel only where a temperature means something (``EnergyPlot``), energies
per particle for a periodic many-particle system (what LAMMPS prints for its lj melt), and the
pressure when thermo.csv has it. Every axis names the scene's units.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simrun.outputs.thermo import drift_scale, measure_drift, read_thermo_csv
from simrun.outputs.units import SYSTEMS, Units
from simrun.render.frames import atomic_path

_SERIES = (("kinetic", "#1f77b4"), ("potential", "#ff7f0e"), ("total", "#2ca02c"),
           ("conserved", "#9467bd"))
BLOW_UP = 10.0  # a drift beyond it over more decades than it: the panel shows log10 |drift|
_MARGINS = {"left": 0.13, "right": 0.97, "hspace": 0.38}


@dataclass
class EnergyPlot:
    """What the energy plot of one run shows, decided from its scene and run.json.

    ``drift``: the drifting quantity's column ("total", "conserved"), None for no drift panel,
    or "auto" (no run.json to say: the total, or the conserved energy when there is one,
    unless a thermostat target is known)."""

    units: Units = SYSTEMS["reduced"]
    dim: int = 3
    count: int = 0  # particles (0: unknown)
    per_particle: bool = False
    temperature: bool = True  # a temperature panel when thermo.csv has the column
    target_temperature: float | None = None
    drift: str | None = "auto"


ENERGIES = ("kinetic", "potential", "total", "conserved")


def read_energy(csv_path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Columns of the CSV as 1-D float arrays (also for a single row or a header only)."""
    return read_thermo_csv(csv_path)


def relative_drift(total: np.ndarray, kinetic: np.ndarray | None = None,
                   potential: np.ndarray | None = None) -> np.ndarray:
    """(E - E0) / scale, the scale of ``simrun.outputs.thermo.drift_scale`` (|E0|, or
    |K0| + |U0| when E0 is nearly zero, or 1)."""
    k0 = float(kinetic[0]) if kinetic is not None else 0.0
    u0 = float(potential[0]) if potential is not None else 0.0
    scale, _ = drift_scale(float(total[0]), k0, u0)
    return (total - total[0]) / scale


def _energies(ax, t: np.ndarray, cols: dict[str, np.ndarray], style: dict,
              plot: EnergyPlot) -> None:
    per = plot.per_particle and plot.count > 1
    for name, colour in _SERIES:
        if name in cols:
            values = cols[name] / plot.count if per else cols[name]
            ax.plot(t, values, label=name, color=colour, lw=1.2, **style)
    ax.set_ylabel(plot.units.label(f"energy per particle (N = {plot.count})" if per
                                   else "energy", "total"))
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 5), useOffset=False)
    ax.grid(alpha=0.3)
    if not len(t):
        ax.text(0.5, 0.5, "no energy rows", ha="center", va="center", transform=ax.transAxes)
    elif ax.lines:
        ax.legend(loc="best", fontsize="small")


def _temperature(ax, t: np.ndarray, cols: dict[str, np.ndarray], style: dict,
                 target: float | None, units: Units) -> None:
    ax.plot(t, cols["temperature"], color="#d62728", lw=1.0, label="kinetic T", **style)
    if target is not None:
        ax.axhline(target, color="0.3", lw=0.8, ls="--", label=f"target {target:g}")
        ax.legend(loc="best", fontsize="small")
    if len(t):
        mean = float(np.mean(cols["temperature"][len(t) // 5:]))
        ax.set_title(f"kinetic temperature k_B T = 2K / dof: mean {mean:.4g} over the last 80% "
                     "of rows", fontsize="small")
    ax.set_ylabel(units.label("k_B T", "temperature"))
    ax.grid(alpha=0.3)


def _pressure(ax, t: np.ndarray, cols: dict[str, np.ndarray], style: dict, units: Units,
              dim: int) -> None:
    values = cols["pressure"]
    ax.plot(t, values, color="#8c564b", lw=1.0, **style)
    finite = values[np.isfinite(values)]
    if len(finite):
        ax.set_title(f"pressure (virial): mean {float(np.mean(finite[len(finite) // 5:])):.4g} "
                     "over the last 80% of rows", fontsize="small")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)
    ax.set_ylabel(units.label("P", "pressure", dim))
    ax.grid(alpha=0.3)


def _spans_decades(relative: np.ndarray) -> bool:
    """A drift beyond BLOW_UP whose nonzero sizes span more than BLOW_UP decades."""
    size = np.abs(relative[np.isfinite(relative) & (relative != 0)])
    return bool(len(size)) and size.max() > BLOW_UP and \
        np.log10(size.max() / size.min()) > BLOW_UP


def _drift(ax, t: np.ndarray, cols: dict[str, np.ndarray], style: dict, quantity: str) -> None:
    drift = measure_drift(cols, quantity)
    ax.grid(alpha=0.3)
    if drift is None:
        return
    relative = (cols[quantity] - drift.first) / drift.scale
    what = "total" if quantity == "total" else "conserved"
    ax.set_title(f"{what} (E - E0) / {drift.scale_name}: final {drift.final:+.3g}, "
                 f"largest {drift.worst:+.3g}; E0 {drift.first:.6g}", fontsize="small",
                 loc="right")
    if _spans_decades(relative):  # a blow-up: its start and its end both visible
        with np.errstate(divide="ignore"):
            ax.plot(t, np.log10(np.abs(relative)), color="#2ca02c", lw=1.0, **style)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.set_ylabel("log10 |rel. drift|", fontsize="small")
        return
    ax.plot(t, relative, color="#2ca02c", lw=1.0, **style)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))  # short tick labels
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_ylabel("rel. drift")


def render_energy(csv_path: str | os.PathLike, png_path: str | os.PathLike, *,
                  title: str = "", target_temperature: float | None = None,
                  plot: EnergyPlot | None = None) -> Path:
    """Plot kinetic, potential and total energy vs time, the temperature and pressure when
    the CSV has them, and the relative drift of the conserved energy when there is one."""
    fig = energy_figure(read_energy(csv_path), title, target_temperature, plot=plot)
    png_path = Path(png_path)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png")
    return png_path


def _drift_quantity(cols: dict[str, np.ndarray], plot: EnergyPlot) -> str | None:
    if plot.drift != "auto":
        return plot.drift if plot.drift in cols else None
    if "conserved" in cols:
        return "conserved"
    # a Langevin or rescaling run conserves nothing: no drift panel
    return "total" if plot.target_temperature is None else None


def energy_figure(cols: dict[str, np.ndarray], title: str = "",
                  target_temperature: float | None = None, *,
                  plot: EnergyPlot | None = None) -> Figure:
    """The energy plot of thermo.csv's columns (its last axes is the drift panel, when the
    run should conserve an energy)."""
    plot = plot or EnergyPlot(target_temperature=target_temperature)
    n = len(next(iter(cols.values()), []))
    xkey = "time" if "time" in cols else "step"
    t = cols.get(xkey, np.arange(n, dtype=np.float64))
    drift = _drift_quantity(cols, plot)
    temperature = "temperature" in cols and plot.temperature
    pressure = "pressure" in cols and bool(np.any(np.isfinite(cols["pressure"])))
    panels = 1 + temperature + pressure + (drift is not None)
    height = 3.4 + 1.6 * (panels - 1)
    fig = Figure(figsize=(7, height), dpi=100)  # fixed margins (in inches): fast
    FigureCanvasAgg(fig)
    margins = {**_MARGINS, "bottom": 0.55 / height, "top": 1 - 0.3 / height}
    axes = fig.subplots(panels, 1, sharex=True, height_ratios=(3,) + (1,) * (panels - 1),
                        gridspec_kw=margins, squeeze=False)[:, 0]
    axes[0].set_title(f"{title}: energy" if title else "energy", fontsize="medium")
    style = {"marker": "o", "markersize": 4} if n < 3 else {}
    _energies(axes[0], t, cols, style, plot)
    if temperature:
        _temperature(axes[1], t, cols, style, plot.target_temperature, plot.units)
    if pressure:
        _pressure(axes[1 + temperature], t, cols, style, plot.units, plot.dim)
    if drift is not None:
        _drift(axes[-1], t, cols, style, drift)
    if xkey == "step":
        axes[-1].set_xlabel("step")
    else:
        axes[-1].set_xlabel(plot.units.axis_label("time", "time"))
    return fig
