"""Pictures of a sweep: the headline result against each swept value, and a heat map when
exactly two values were swept on a grid.

Why the heat map's scales: a signed result (an energy drift) on a linear colour scale makes
every cell but the worst look alike; it gets a diverging map centred at 0 on a symmetric log
scale (sign as colour, size as shade), a positive one spanning decades a log scale."""

from __future__ import annotations

import math
from pathlib import Path

from simrun.batch.summary import Row
from simrun.batch.sweep import as_number

# energy_drift: the final drift, as summaries before energy_drift_final named it
PREFERRED = ("objective", "best_loss", "loss", "energy_drift_largest", "energy_drift_final",
             "energy_drift")


def metric(rows: list[Row]) -> str | None:
    """What to plot: the objective (grad/optimize), else the energy drift, else the first
    result column."""
    names = list(dict.fromkeys(k for r in rows for k in r.results))
    return next((m for m in PREFERRED if m in names), names[0] if names else None)


def _axis_values(rows: list[Row], key: str) -> tuple[list, bool]:
    texts = [r.point.get(key, "") for r in rows]
    numbers = [as_number(t) for t in texts]
    if all(n is not None for n in numbers):
        return numbers, True
    order = list(dict.fromkeys(texts))
    return [order.index(t) for t in texts], False


def _log_scale(values: list[float]) -> bool:
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) and len(values) > 2 and max(positive) / min(positive) > 50


def draw_plots(out_dir: Path, rows: list[Row], keys: list[str]) -> list[Path]:
    done = [r for r in rows if r.status == "done"]
    name = metric(done)
    if not done or name is None or not keys:
        return []
    import matplotlib  # start-up: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # start-up: matplotlib

    written = [_against_each(out_dir, done, keys, name, plt)]
    if len(keys) == 2:
        heat = _heatmap(out_dir, done, keys, name, plt)
        written += [heat] if heat else []
    return written


def _against_each(out_dir: Path, rows: list[Row], keys: list[str], name: str, plt) -> Path:
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.4), squeeze=False)
    y = [r.results.get(name, math.nan) for r in rows]
    for ax, key in zip(axes[0], keys):
        x, numeric = _axis_values(rows, key)
        ax.plot(x, y, "o", ms=4, alpha=0.8)
        if numeric and _log_scale(x):
            ax.set_xscale("log")
        if not numeric:
            labels = list(dict.fromkeys(r.point.get(key, "") for r in rows))
            ax.set_xticks(range(len(labels)), labels, rotation=30, fontsize=7)
        ax.set_xlabel(key)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{name} over the sweep ({len(rows)} jobs done)", fontsize=10)
    fig.tight_layout()
    path = out_dir / f"{name.replace('/', '_')}_vs_values.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _colour_scale(values: list[float]) -> tuple[str, object | None, str]:
    """(colour map, norm, what the scale is): diverging symmetric-log around 0 for signed values, log for
    positive values spanning more than a decade, else linear."""
    from matplotlib.colors import LogNorm, SymLogNorm  # start-up: matplotlib

    finite = [v for v in values if math.isfinite(v)]
    nonzero = [abs(v) for v in finite if v != 0]
    if not nonzero:
        return "viridis", None, ""
    if min(finite) < 0:
        top = max(nonzero)
        return ("RdBu_r", SymLogNorm(linthresh=min(nonzero), vmin=-top, vmax=top, base=10),
                " (symmetric log scale, 0 white)")
    if min(finite) > 0 and max(finite) / min(finite) > 10:
        return "viridis", LogNorm(vmin=min(finite), vmax=max(finite)), " (log scale)"
    return "viridis", None, ""


def _decades(low: float, high: float) -> list[float]:
    """Ticks of a symmetric log colour bar: 0 and the powers of ten above ``low``, both signs
    (at most five each)."""
    first, last = math.floor(math.log10(low)) + 1, math.floor(math.log10(high))
    powers = [10.0 ** k for k in range(first, last + 1)][-5:] or [high]
    return [-p for p in reversed(powers)] + [0.0] + powers


def _heatmap(out_dir: Path, rows: list[Row], keys: list[str], name: str, plt) -> Path | None:
    a_vals = list(dict.fromkeys(r.point[keys[0]] for r in rows if keys[0] in r.point))
    b_vals = list(dict.fromkeys(r.point[keys[1]] for r in rows if keys[1] in r.point))
    if len(a_vals) * len(b_vals) > 10_000 or len(rows) > len(a_vals) * len(b_vals):
        return None  # not a grid (e.g. random samples)
    grid = [[math.nan] * len(b_vals) for _ in a_vals]
    for r in rows:
        grid[a_vals.index(r.point[keys[0]])][b_vals.index(r.point[keys[1]])] = \
            r.results.get(name, math.nan)
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * len(b_vals) + 2, 1.2 + 0.5 * len(a_vals) + 1))
    cmap, norm, scale = _colour_scale([v for row in grid for v in row])
    image = ax.imshow(grid, aspect="auto", cmap=cmap, norm=norm, origin="lower")
    for i, row in enumerate(grid):  # the numbers themselves: colours only rank them
        for j, value in enumerate(row):
            if math.isfinite(value):
                shade = float(image.norm(value))  # dark cells (either end) get white text
                ax.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=7,
                        color="white" if abs(shade - 0.5) > 0.3 else "black")
    ax.set_xticks(range(len(b_vals)), b_vals, rotation=30, fontsize=7)
    ax.set_yticks(range(len(a_vals)), a_vals, fontsize=7)
    ax.set_xlabel(keys[1])
    ax.set_ylabel(keys[0])
    bar = fig.colorbar(image, ax=ax, label=name)
    if norm is not None and type(norm).__name__ == "SymLogNorm":
        bar.set_ticks(_decades(norm.linthresh, norm.vmax))
    ax.set_title(f"{name}{scale}", fontsize=10)
    fig.tight_layout()
    path = out_dir / "heatmap.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
