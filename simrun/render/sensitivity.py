"""Pictures of a `simrun grad` folder: normalised sensitivities as bars, and the gradient with
respect to the start positions as arrows on the first frame."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simrun.outputs.thermo import read_thermo_csv
from simrun.outputs.units import SYSTEMS, Units, units_of
from simrun.render import scene_of
from simrun.render.frames import atomic_path


def render_sensitivities(values: dict[str, float], gradients: dict[str, float],
                         objective: float, png_path: str | os.PathLike, *, title: str = "",
                         errors: dict[str, float] | None = None,
                         objective_error: float | None = None) -> Path:
    """Bars of d ln J / d ln p = (p / J) dJ/dp: the % change of J per % change of p, which
    compares keys of different units (dt against a stiffness). ``errors`` (standard errors
    of dJ/dp, as the ensemble method estimates them) become error bars and "+- e" labels."""
    fig = sensitivities_figure(values, gradients, objective, title=title, errors=errors,
                               objective_error=objective_error)
    png_path = Path(png_path)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png")
    return png_path


def sensitivities_figure(values: dict[str, float], gradients: dict[str, float],
                         objective: float, *, title: str = "",
                         errors: dict[str, float] | None = None,
                         objective_error: float | None = None) -> Figure:
    """The figure of ``render_sensitivities``."""
    keys = list(gradients)
    scale = {k: values[k] / objective if objective else 0.0 for k in keys}
    rel = [scale[k] * gradients[k] for k in keys]
    spread = [abs(scale[k]) * errors[k] if errors and k in errors else 0.0 for k in keys]
    fig = Figure(figsize=(7, 1.3 + 0.4 * max(len(keys), 1)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colours = ["#d62728" if r < 0 else "#1f77b4" for r in rel]
    ax.barh(range(len(keys)), rel, color=colours, height=0.6,
            xerr=spread if errors else None, capsize=4, ecolor="0.2")
    # a KEY that is 0 has no relative change (gradients.json has its dJ/dp): say so
    labels = [("n/a" if not values[k] else f"{r:+.3g}" + (f" +- {e:.2g}" if errors else ""))
              for k, r, e in zip(keys, rel, spread)]
    ends = [r + (e if r >= 0 else -e) for r, e in zip(rel, spread)]  # labels past the bars
    for i, (end, label) in enumerate(zip(ends, labels)):
        ax.annotate(label, (end, i), xytext=(4 if end >= 0 else -4, 0),
                    textcoords="offset points", va="center", fontsize="small",
                    ha="left" if end >= 0 else "right")
    low, high = min(0.0, *ends), max(0.0, *ends)
    pad = 0.35 * (high - low or 1.0)  # room for the labels on the side they are drawn
    ax.set_xlim(low - (pad if low < 0 else 0.05 * pad), high + (pad if high > 0 else 0.05 * pad))
    ax.set_yticks(range(len(keys)), [k if values[k] else f"{k} (p = 0)" for k in keys],
                  fontsize="small")
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.axvline(0.0, color="0.4", lw=0.8)
    what = f"J = {objective:.6g}" + (f" +- {objective_error:.2g}" if objective_error else "")
    ax.set_title(f"{title}: sensitivities of {what}" if title else f"sensitivities of {what}",
                 fontsize="medium")
    ax.grid(axis="x", alpha=0.3)
    bars_note = ", bars: +- one standard error" if errors else ""
    ax.set_xlabel(f"d ln J / d ln p  (relative change of J per relative change of p{bars_note})",
                  fontsize="small")
    fig.canvas.draw()  # the axis' scale factor (e.g. 1e-5) goes into the label, not over it
    offset = ax.xaxis.get_offset_text().get_text()
    if offset:
        ax.xaxis.get_offset_text().set_visible(False)
        ax.set_xlabel(f"d ln J / d ln p  (x {offset}; relative change of J per relative "
                      f"change of p{bars_note})", fontsize="small")
    return fig


def render_position_gradient(x0: np.ndarray, grad: np.ndarray, png_path: str | os.PathLike,
                             *, title: str = "", units: Units = SYSTEMS["reduced"]) -> Path:
    """-dJ/dx0 as arrows at the start positions (x-y plane): where moving a particle at the
    start lowers the objective most."""
    fig = position_gradient_figure(x0, grad, title=title, units=units)
    png_path = Path(png_path)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png")
    return png_path


def position_gradient_figure(x0: np.ndarray, grad: np.ndarray, *, title: str = "",
                             units: Units = SYSTEMS["reduced"]) -> Figure:
    """The figure of ``render_position_gradient``."""
    fig = Figure(figsize=(6, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.12, 0.1, 0.83, 0.82))
    ax.scatter(x0[:, 0], x0[:, 1], s=12, color="0.3", zorder=3)
    scale = float(np.max(np.linalg.norm(grad[:, :2], axis=1))) or 1.0
    span = float(np.max(np.ptp(x0[:, :2], axis=0))) or 1.0
    ax.quiver(x0[:, 0], x0[:, 1], -grad[:, 0], -grad[:, 1], color="#d62728", angles="xy",
              scale_units="xy", scale=scale / (0.15 * span), width=0.004)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel(units.axis_label("x", "x")
                  + "    arrows: -dJ/dx0, longest scaled to 15% of the span")
    ax.set_ylabel(units.label("y", "y"))
    ax.set_title(f"{title}: -dJ/dx0 at the start (longest arrow |dJ/dx| = {scale:.3g})"
                 if title else f"-dJ/dx0 (longest |dJ/dx| = {scale:.3g})", fontsize="medium")
    ax.grid(alpha=0.3)
    return fig


def render_horizon(times: np.ndarray, series: dict[str, np.ndarray], png_path, *,
                   title: str = "", units: Units = SYSTEMS["reduced"]) -> Path:
    """|dJ(t)/dp| against the horizon t, log scale: linear growth is a regular system,
    exponential growth (a straight rising line) is chaos eating the gradient's meaning."""
    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.12, 0.12, 0.84, 0.78))
    for name, values in series.items():
        ax.plot(times, np.abs(values), lw=1.2, label=name)
    ax.set_yscale("log")
    ax.set_xlabel(units.axis_label("horizon t", "time")
                  + ": the objective taken at time t")
    ax.set_ylabel("|dJ(t) / dp|")
    ax.set_title(f"{title}: sensitivity against horizon" if title else
                 "sensitivity against horizon", fontsize="medium")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small", loc="best")
    png_path = Path(png_path)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png")
    return png_path


def draw_gradient_pictures(folder: str | os.PathLike, values: dict[str, float],
                           x0: np.ndarray | None) -> list[Path]:
    """A grad folder's pictures from its files alone (gradients.json, gradients.npz,
    horizon.csv): sensitivities.png of the scalar KEYs (``values``: each KEY's value p),
    horizon.png, and x0_gradient.png at the start positions ``x0`` (reverse mode)."""
    folder = Path(folder)
    record = json.loads((folder / "gradients.json").read_text(encoding="utf-8"))
    scene = scene_of(folder)
    title, units = str(scene.get("name") or ""), units_of(scene.get("units"))
    objective = float(record["objective"]["value"])
    directions = record.get("directions") or {}
    scalars = {k: float(g) for k, g in record["gradients"].items()
               if not isinstance(g, list) and k not in directions}
    pictures = []
    if scalars:
        errors = {k: float(e) for k, e in (record.get("errors") or {}).items() if k in scalars}
        pictures.append(render_sensitivities({k: values[k] for k in scalars}, scalars,
                                             objective, folder / "sensitivities.png",
                                             title=title, errors=errors or None,
                                             objective_error=record["objective"].get("error")))
    if (folder / "horizon.csv").is_file():
        cols = read_thermo_csv(folder / "horizon.csv")
        series = {k[3:]: v for k, v in cols.items() if k.startswith("d/d")}
        pictures.append(render_horizon(cols["time"], series, folder / "horizon.png",
                                       title=title, units=units))
    if x0 is not None and "state.x0" in record["gradients"] and \
            record.get("mode", "reverse") == "reverse":
        with np.load(folder / "gradients.npz") as npz:
            grad = npz["state.x0"]
        pictures.append(render_position_gradient(x0, grad, folder / "x0_gradient.png",
                                                 title=title, units=units))
    return pictures
