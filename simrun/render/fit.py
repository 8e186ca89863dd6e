"""Pictures of a fit to ensemble targets: the loss, N_eff / N and the parameters per
iteration (fit.png), and g(r) of the target against the fit (rdf.png)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from simrun.outputs.units import SYSTEMS, Units, units_of
from simrun.render.frames import atomic_path
from simrun.scene.rdf_csv import is_rdf, rdf_pair, read_rdf_csv


def render_fit(rows: list, names: list[str], png: Path, title: str = "",
               fitted: tuple[np.ndarray, np.ndarray | None] | None = None) -> Path:
    """Three panels over the iterations; ``rows`` have loss, neff, trajectory, params and
    stage (the Gauss-Newton polish is shaded); ``fitted``: the result and its errors."""
    import matplotlib.pyplot as plt  # start-up: pyplot only to draw

    it = np.array([r.iteration for r in rows])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    polish = it[[r.stage != "adam" for r in rows]]
    for ax in axes if len(polish) else ():
        ax.axvspan(polish[0] - 0.5, polish[-1] + 1.5, color="0.92", zorder=0,
                   label="Gauss-Newton polish (fresh runs)" if ax is axes[0] else None)
    axes[0].semilogy(it, [r.loss for r in rows], "o-", ms=3)
    axes[0].set(xlabel="iteration", ylabel="loss  (sum of w (<O> - target)^2)", title="loss")
    if len(polish):
        axes[0].legend(fontsize="small")
    neff = np.array([r.neff for r in rows])
    fresh = np.r_[True, np.diff([r.trajectory for r in rows]) != 0]
    axes[1].plot(it, neff, "o-", ms=3, label="reused trajectory (reweighted)")
    axes[1].plot(it[fresh], neff[fresh], "s", color="C3", ms=5, label="new trajectory")
    stale = [(r.iteration, r.stale) for r in rows if r.stale is not None]
    if stale:
        axes[1].plot(*zip(*stale), "v", color="C3", mfc="none", ms=6,
                     label="the old one had fallen to")
    axes[1].set(xlabel="iteration", ylabel="N_eff / N", ylim=(0, 1.05),
                title="effective sample size")
    axes[1].legend(fontsize="small")
    params = np.array([r.params for r in rows])
    for j, name in enumerate(names):
        line, = axes[2].plot(it, params[:, j], "o-", ms=3, label=name.split(".")[-1])
        if fitted is not None:
            error = None if fitted[1] is None else fitted[1][j]
            axes[2].errorbar([it[-1] + 1], [fitted[0][j]], yerr=error, fmt="*", ms=9,
                             capsize=4, color=line.get_color(),
                             label="fitted +- its error" if j == 0 else None)
    axes[2].set(xlabel="iteration", ylabel="parameter value  (the scene's units)",
                title="parameters")
    axes[2].legend(fontsize="small")
    fig.suptitle(title, fontsize="medium")
    return _save(fig, png)


def render_rdf(r: np.ndarray, target: np.ndarray, curves: dict[str, np.ndarray], png: Path,
               title: str = "", errors: np.ndarray | None = None,
               units: Units = SYSTEMS["reduced"]) -> Path:
    """g(r) of the target (points, with their standard errors where the CSV gives them)
    against the averages of the start and the fit (lines)."""
    return _save(rdf_figure(r, target, curves, title, errors, units), png)


def rdf_figure(r: np.ndarray, target: np.ndarray, curves: dict[str, np.ndarray],
               title: str = "", errors: np.ndarray | None = None,
               units: Units = SYSTEMS["reduced"]):
    """The figure of ``render_rdf`` (a pyplot figure: ``_save`` closes it)."""
    import matplotlib.pyplot as plt  # start-up: pyplot only to draw

    fig, ax = plt.subplots(figsize=(6, 4))
    shown = errors is not None and np.any(np.asarray(errors) > 0)
    ax.errorbar(r, target, yerr=errors if shown else None, fmt="ko", ms=4, capsize=2,
                elinewidth=0.8, label="target +- its error" if shown else "target", zorder=3)
    for label, g in curves.items():
        ax.plot(r, g, "-", label=label)
    ax.axhline(1.0, color="0.7", lw=0.8)
    ax.set(xlabel=units.label("r", "length"), ylabel="g(r)  (dimensionless)",
           title=title or "radial distribution")
    ax.legend(fontsize="small")
    return fig


@dataclass
class _Row:
    """One line of fit.csv, as render_fit reads it."""

    iteration: int
    loss: float
    neff: float
    trajectory: int
    stale: float | None
    params: list[float]
    stage: str


def _fit_rows(path: Path) -> tuple[list[str], list[_Row]]:
    """(parameter names, rows) of a fit.csv."""
    with open(path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header, names = table[0], table[0][5:-1]
    if header[:5] != ["iteration", "loss", "neff", "trajectory", "replaced_neff"]:
        raise ValueError(f"{path.name} has the columns {header}, not those of a fit")
    return names, [_Row(int(r[0]), float(r[1]), float(r[2]), int(r[3]),
                        float(r[4]) if r[4] else None, [float(v) for v in r[5:-1]], r[-1])
                   for r in table[1:]]


def draw_fit_pictures(folder: Path) -> list[Path]:
    """fit.png and (with a g(r) target) rdf.png of a fit folder, from its fit.csv, fit.json
    and scene.yaml alone: what the fit draws when it ends, and 'simrun render' again."""
    folder = Path(folder)
    names, rows = _fit_rows(folder / "fit.csv")
    if not rows:
        return []
    record = json.loads((folder / "fit.json").read_text(encoding="utf-8"))
    scene = yaml.safe_load((folder / "scene.yaml").read_text(encoding="utf-8"))
    title = str(scene.get("name", folder.parent.name))
    fitted = record.get("fitted") or {}
    params = fitted.get("params") or {}
    errors = fitted.get("errors")
    result = (np.array([params[n] for n in names]),
              None if errors is None else np.array([errors[n] for n in names])) \
        if params else None
    written = [render_fit(rows, names, folder / "fit.png", title=title, fitted=result)]
    curves = record.get("averages") or {}
    for name, rdf in ((scene.get("objective") or {}).get("targets") or {}).items():
        if not is_rdf(name) or name not in curves.get("first", {}):
            continue
        data = read_rdf_csv(folder / rdf["file"])  # relative to the folder: its copy
        pair = rdf_pair(name)  # a partial g(r): rdf_A_B.png, titled with its pair
        written.append(render_rdf(data[:, 0], data[:, 1], {
            "start": np.array(curves["first"][name]),
            "fitted (last fresh run)": np.array(curves["last"][name])},
            folder / ("rdf.png" if pair is None else f"rdf_{pair[0]}_{pair[1]}.png"),
            title=title if pair is None else f"{title}: g_{pair[0]}{pair[1]}(r)",
            errors=data[:, 2] if data.shape[1] == 3 else None,
            units=units_of(scene.get("units"))))
    return written


def _save(fig, png: Path) -> Path:
    """Through a temporary file, as every picture: a full disk or an interrupted save
    leaves the previous picture (or none), never a broken one; the figure is closed."""
    import matplotlib.pyplot as plt  # start-up: pyplot only to draw

    try:
        fig.tight_layout()
        with atomic_path(png) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return Path(png)
