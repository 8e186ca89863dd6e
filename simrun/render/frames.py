"""Still images of particle frames (2-D scatter, or 3-D projected onto x-y with depth shading).

Why a `FramePlot` class: the still renderer and the animation draw the same artists; the
animation only updates their data per frame, which is what makes it fast.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure

Box = Any  # ((xmin, ymin[, zmin]), (xmax, ymax[, zmax])): lower and upper corners
_CMAP, _MESH_CMAP = colormaps["viridis"], colormaps["bone"]  # particles stand out of the mesh


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside `path` (same suffix), moved over `path` only on success.

    Why: a crashed or concurrent render must never leave a truncated image behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def as_positions(x: Any) -> np.ndarray:
    """Positions as float (N, D) with D >= 2 (1-D input gets y = 0)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[-1] == 1:
        x = np.concatenate([x, np.zeros_like(x)], axis=-1)
    return x


def fit_limits(x: np.ndarray, box: Box | None = None, margin: float = 0.05) -> np.ndarray:
    """Axis limits [[xmin, xmax], [ymin, ymax]] fitted to `x` (any leading shape) or `box`.

    Why: fixed limits from the whole run keep an animation from jumping around.
    """
    if box is not None:
        b = np.asarray(box, dtype=np.float64)
        return np.stack([b[0, :2], b[1, :2]], axis=1)
    xy = as_positions(x)[..., :2].reshape(-1, 2)
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) == 0:
        return np.array([[0.0, 1.0], [0.0, 1.0]])
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    centre, half = (lo + hi) / 2, (hi - lo).max() / 2
    half = half * (1 + margin) if half > 0 else max(1.0, np.abs(centre).max() * 0.1)
    return np.stack([centre - half, centre + half], axis=1)


def marker_size(n: int, figsize_in: float) -> float:
    """Scatter size (points^2) that keeps n particles visible without merging into a blob."""
    side_pts = figsize_in * 72 * 0.8
    return float(np.clip((side_pts / max(np.sqrt(n), 1.0)) ** 2 * 0.25, 1.0, 120.0))


class FramePlot:
    """Persistent axes + artists for one particle system; `update(x)` redraws cheaply."""

    def __init__(
        self,
        limits: np.ndarray,
        n: int,
        *,
        bonds: Any = None,
        triangles: Any = None,
        depth_range: tuple[float, float] | None = None,
        size_in: float = 5.0,
        dpi: int = 100,
    ) -> None:
        self.fig = Figure(figsize=(size_in, size_in), dpi=dpi, layout="constrained")
        FigureCanvasAgg(self.fig)
        self.ax = self.fig.add_subplot()
        self.ax.set_xlim(*limits[0])
        self.ax.set_ylim(*limits[1])
        self.ax.set_aspect("equal", adjustable="box")
        self.ax.set_autoscale_on(False)
        self.ax.set_xlabel("x")
        self.ax.set_ylabel("y")
        self.depth_range = depth_range
        self.bonds = None if bonds is None else np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
        self.tris = None if triangles is None else np.asarray(triangles, np.int64).reshape(-1, 3)
        self.mesh = self.lines = None
        if self.tris is not None and len(self.tris):
            self.mesh = PolyCollection(
                [], facecolors="#9ecae1", edgecolors="#3182bd", linewidths=0.4, alpha=0.8, zorder=1
            )
            self.ax.add_collection(self.mesh, autolim=False)
        if self.bonds is not None and len(self.bonds):
            self.lines = LineCollection([], colors="#555555", linewidths=0.8, zorder=2)
            self.ax.add_collection(self.lines, autolim=False)
        self.points = self.ax.scatter(
            np.zeros(n),
            np.zeros(n),
            s=marker_size(n, size_in),
            c="#d62728",
            edgecolors="none",
            zorder=3,
        )
        self.title = self.ax.set_title("")

    def _shade(self, z: np.ndarray, cmap: Any = _CMAP) -> np.ndarray:
        """Depth colours: far particles dark, near (large z, facing the viewer) bright."""
        lo, hi = self.depth_range if self.depth_range is not None else (z.min(), z.max())
        t = (z - lo) / (hi - lo) if hi > lo else np.full_like(z, 0.5)
        return cmap(0.15 + 0.7 * np.clip(t, 0.0, 1.0))

    def update(self, x: Any, title: str = "") -> None:
        """Move every artist to positions `x` (N, D)."""
        x = as_positions(x)
        xy = x[:, :2]
        z = x[:, 2] if x.shape[1] >= 3 else None
        if z is None:
            self.points.set_offsets(xy)
        else:  # painter's order: far first, so near particles cover them
            order = np.argsort(z, kind="stable")
            self.points.set_offsets(xy[order])
            self.points.set_facecolors(self._shade(z[order]))
        if self.lines is not None:
            self.lines.set_segments(xy[self.bonds])
        if self.mesh is not None:
            verts = xy[self.tris]
            if z is not None:
                tz = z[self.tris].mean(axis=1)
                order = np.argsort(tz, kind="stable")
                verts = verts[order]
                self.mesh.set_facecolors(self._shade(tz[order], _MESH_CMAP))
            self.mesh.set_verts(verts)
        self.title.set_text(title)

    def freeze(self) -> None:
        """Fix the layout and cache everything static, so `blit_rgb` redraws only the data.

        Why: axes, ticks and labels dominate draw time; an animation only moves the data.
        """
        self.fig.canvas.draw()  # lays out with the current (representative) title
        self.fig.set_layout_engine("none")
        self.dynamic = [a for a in (self.mesh, self.lines, self.points, self.title) if a]
        for artist in self.dynamic:
            artist.set_animated(True)
        self.fig.canvas.draw()
        self.background = self.fig.canvas.copy_from_bbox(self.fig.bbox)

    def blit_rgb(self) -> np.ndarray:
        """The current frame as (h, w, 3) uint8 after `freeze`, redrawing only the data."""
        canvas = self.fig.canvas
        canvas.restore_region(self.background)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        return np.asarray(canvas.buffer_rgba())[..., :3].copy()

    def save_png(self, path: Path) -> Path:
        """Write the current state atomically as PNG."""
        with atomic_path(Path(path)) as tmp:
            self.fig.savefig(tmp, format="png")
        return Path(path)


def depth_range(x: np.ndarray) -> tuple[float, float] | None:
    """Global z range of positions (any leading shape), or None for 2-D data."""
    x = np.asarray(x)
    if x.shape[-1] < 3:
        return None
    z = x[..., 2][np.isfinite(x[..., 2])]
    return (float(z.min()), float(z.max())) if z.size else None


def render_frame(
    x: Any,
    *,
    bonds: Any = None,
    triangles: Any = None,
    box: Box | None = None,
    title: str = "",
    path: str | os.PathLike,
) -> Path:
    """Render one frame of positions `x` (N, D) to the PNG at `path`; returns the path."""
    x = as_positions(x)
    plot = FramePlot(
        fit_limits(x, box), len(x), bonds=bonds, triangles=triangles, depth_range=depth_range(x)
    )
    plot.update(x, title)
    return plot.save_png(Path(path))
