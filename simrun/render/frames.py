"""Still images of particle frames (2-D, or 3-D projected onto x-y with depth shading).

Why a `FramePlot` class: the still renderer and the animation draw the same artists; the
animation only updates their data per frame, which is what makes it fast.

Why these artists: rendering must not dominate a run's time. Matplotlib draws one marker
shape stamped N times (``Line2D`` markers) about 7x faster than a scatter ``PathCollection``,
and one compound path of all triangles about 5x faster than a ``PolyCollection``; the slower
artists are used only where they are needed (per-particle colours, depth-sorted 3-D faces).
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
from matplotlib.font_manager import findfont
from matplotlib.patches import Circle, PathPatch, Rectangle
from matplotlib.path import Path as MplPath
from PIL import Image, ImageDraw, ImageFont

from simrun.outputs.units import SYSTEMS, Units
from simrun.render.view import Box, Shapes, as_positions, fit_limits, layout

__all__ = ["Box", "FramePlot", "Shapes", "as_positions", "fit_limits", "render_frame"]

_CMAP, _MESH_CMAP = colormaps["viridis"], colormaps["bone"]  # particles stand out of the mesh
_PALETTE = colormaps["tab10"]  # a few free particles: one colour each, to follow them
_AXES_RECT = (0.15, 0.11, 0.80, 0.80)  # of a square view (layout: no layout engine)
PARTICLE_RED, NODE_BLUE = "#d62728", "#08306b"


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
    except OSError as exc:  # e.g. a full disk: name the picture meant, not the temporary
        exc.filename = str(path)
        raise
    finally:
        tmp.unlink(missing_ok=True)


def typical_spacing(x: Any, max_queries: int = 512) -> float | None:
    """Median nearest-neighbour distance in the x-y plane (None for fewer than 2 points)."""
    xy = as_positions(x)[:, :2]
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) < 2:
        return None
    queries = np.arange(len(xy))
    if len(xy) > max_queries:  # a deterministic sample is plenty for a median
        queries = np.linspace(0, len(xy) - 1, max_queries).round().astype(np.int64)
    nearest = np.empty(len(queries))
    for start in range(0, len(queries), 64):
        q = queries[start:start + 64]
        d2 = ((xy[q, None, :] - xy[None, :, :]) ** 2).sum(-1)
        d2[np.arange(len(q)), q] = np.inf
        nearest[start:start + len(q)] = d2.min(axis=1)
    spacing = float(np.sqrt(np.median(nearest)))
    return spacing if spacing > 0 and np.isfinite(spacing) else None


def marker_size(n: int, figsize_in: float) -> float:
    """Scatter size (points^2) that keeps n particles visible without merging into a blob."""
    side_pts = figsize_in * 72 * 0.8
    return float(np.clip((side_pts / max(np.sqrt(n), 1.0)) ** 2 * 0.25, 1.0, 120.0))


def _style(kind: str, n: int, spacing_pts: float | None, size_in: float) -> dict[str, float]:
    """Marker diameter (points) and mesh edge width for a particle system of `kind`.

    Why from the spacing: a marker should cover a fixed fraction of the distance to the next
    particle, so a dense mesh shows its triangles and sparse bodies stay visible.
    """
    if spacing_pts is None:
        return {"diameter": float(np.sqrt(marker_size(n, size_in))), "edge": 0.4}
    if kind == "mesh":  # nodes are small; the mesh is the picture
        return {"diameter": float(np.clip(0.3 * spacing_pts, 0.8, 5.0)),
                "edge": 0.4 if spacing_pts >= 6 else 0.0}
    if kind == "bonds":
        return {"diameter": float(np.clip(0.45 * spacing_pts, 2.0, 10.0)), "edge": 0.4}
    return {"diameter": float(np.clip(0.6 * spacing_pts, 2.5, 11.0)), "edge": 0.4}


def _mesh_path(verts: np.ndarray) -> MplPath:
    """All triangles (T, 3, 2) as one compound path: one fill and one stroke per draw."""
    closed = np.concatenate([verts, verts[:, :1]], axis=1).reshape(-1, 2)
    codes = np.tile(np.array([MplPath.MOVETO, MplPath.LINETO, MplPath.LINETO,
                              MplPath.CLOSEPOLY], dtype=MplPath.code_type), len(verts))
    return MplPath(closed, codes)


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
        spacing: float | None = None,
        shapes: Shapes | None = None,
        dim: int = 2,
        size_in: float = 5.0,
        dpi: int = 100,
        units: Units = SYSTEMS["reduced"],
    ) -> None:
        frame = layout(limits, size_in)
        self.fig = Figure(figsize=frame.figsize, dpi=dpi)
        FigureCanvasAgg(self.fig)
        self.ax = self.fig.add_axes(frame.rect)
        self.axes_pts = 72 * np.array(frame.axes_in)
        self.ax.set_aspect("equal", adjustable="box")
        self.ax.set_autoscale_on(False)
        self.ax.set_xlabel(units.axis_label("x", "x"))
        self.ax.set_ylabel(units.label("y", "y"))
        self.depth_range = depth_range
        self.is_3d = dim >= 3
        self.bonds = None if bonds is None else np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
        self.tris = None if triangles is None else np.asarray(triangles, np.int64).reshape(-1, 3)
        has_mesh = self.tris is not None and len(self.tris) > 0
        has_bonds = self.bonds is not None and len(self.bonds) > 0
        kind = "mesh" if has_mesh else "bonds" if has_bonds else "free"
        style = _style(kind, n, self._to_points(spacing, limits), size_in)
        if shapes is not None and shapes.particle_radius and kind == "free":
            style["diameter"] = self._to_points(2 * shapes.particle_radius, limits)
        # room for a marker's radius beyond the outermost centre: no ball cut by the frame
        marker = max(style["diameter"], 12.0 if shapes and shapes.targets else 0.0)
        pad = 0.5 * marker / self._to_points(1.0, limits)
        self.ax.set_xlim(limits[0, 0] - pad, limits[0, 1] + pad)
        self.ax.set_ylim(limits[1, 0] - pad, limits[1, 1] + pad)
        self._draw_shapes(shapes)
        self.mesh = self.lines = None
        if has_mesh:
            if self.is_3d:  # faces are depth-sorted and shaded per frame
                self.mesh = PolyCollection([], facecolors="#9ecae1", edgecolors="#3182bd",
                                           linewidths=style["edge"], alpha=0.8, zorder=1)
                self.ax.add_collection(self.mesh, autolim=False)
            else:
                # without edges (a dense mesh) a darker fill keeps the body visible
                fill = "#c6dbef" if style["edge"] else "#9ecae1"
                self.mesh = PathPatch(MplPath(np.zeros((1, 2))), facecolor=fill,
                                      edgecolor="#3182bd" if style["edge"] else "none",
                                      linewidth=style["edge"], zorder=1)
                self.ax.add_patch(self.mesh)
        if has_bonds:
            self.lines = LineCollection([], colors="#555555", linewidths=0.8, zorder=2)
            self.ax.add_collection(self.lines, autolim=False)
        colour = NODE_BLUE if has_mesh else PARTICLE_RED
        self.per_particle = self.is_3d or (kind == "free" and n <= 10)
        if self.per_particle:  # depth shading, or one colour per body to follow it
            self.points = self.ax.scatter(np.zeros(n), np.zeros(n), s=style["diameter"] ** 2,
                                          c=colour, edgecolors="none", zorder=3)
            if not self.is_3d:
                self.points.set_facecolors(_PALETTE(np.arange(n) % 10))
        else:
            (self.points,) = self.ax.plot([], [], "o", ls="none", ms=style["diameter"],
                                          color=colour, mec="none", zorder=3)
        self.title = self.ax.set_title("", fontsize="medium")
        if self.is_3d:
            self.ax.set_xlabel(units.axis_label("x", "x")
                               + "    (3-D seen along z: bright = near, large z)")

    def _to_points(self, spacing: float | None, limits: np.ndarray) -> float | None:
        """Length `spacing` in data units as typographic points on the (equal-aspect) axes."""
        if spacing is None:
            return None
        spans = np.maximum(limits[:, 1] - limits[:, 0], 1e-300)
        return float(spacing * (self.axes_pts / spans).min())

    def _draw_shapes(self, shapes: Shapes | None) -> None:
        for (x0, y0), (x1, y1) in (shapes.boxes if shapes else []):
            self.ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="0.45",
                                        lw=1.0, ls="--", zorder=0.5))
        for cx, cy, r in (shapes.circles if shapes else []):
            self.ax.add_patch(Circle((cx, cy), r, fc="0.82", ec="0.45", lw=1.0, zorder=0.5))
        if shapes and shapes.targets:
            tx, ty = np.asarray(shapes.targets).T
            self.ax.plot(tx, ty, marker="X", ms=11, color="#2ca02c", mec="white", mew=1.0,
                         ls="none", zorder=4, label="target (objective)")
            self.ax.legend(loc="best", fontsize="small", framealpha=0.8)

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
        if z is not None:  # painter's order: far first, so near particles cover them
            order = np.argsort(z, kind="stable")
            self.points.set_offsets(xy[order])
            self.points.set_facecolors(self._shade(z[order]))
        elif self.per_particle:
            self.points.set_offsets(xy)
        else:
            self.points.set_data(xy[:, 0], xy[:, 1])
        if self.lines is not None:
            self.lines.set_segments(xy[self.bonds])
        if self.mesh is not None:
            verts = xy[self.tris]
            if isinstance(self.mesh, PathPatch):
                self.mesh.set_path(_mesh_path(verts))
            else:
                if z is not None:
                    tz = z[self.tris].mean(axis=1)
                    order = np.argsort(tz, kind="stable")
                    verts = verts[order]
                    self.mesh.set_facecolors(self._shade(tz[order], _MESH_CMAP))
                self.mesh.set_verts(verts)
        self.title.set_text(title)

    def add_trails(self, xs: np.ndarray) -> None:
        """Faint paths of every particle over frames `xs` (F, N, D), behind the particles."""
        paths = np.swapaxes(as_positions_frames(xs)[..., :2], 0, 1).copy()  # (N, F, 2)
        # a jump across a quarter of the view is a periodic wrap, not a path: leave a gap
        span = np.diff(np.asarray(self.ax.get_xlim()))[0]
        jumps = np.linalg.norm(np.diff(paths, axis=1), axis=-1) > 0.25 * abs(span)
        paths[:, 1:][jumps] = np.nan
        colours = _PALETTE(np.arange(len(paths)) % 10) if self.per_particle else "0.6"
        self.ax.add_collection(LineCollection(paths, colors=colours, linewidths=0.8,
                                              alpha=0.45, zorder=1.5), autolim=False)

    def freeze(self) -> None:
        """Cache everything static, so `blit_rgb` redraws only the data.

        Why: axes, ticks and labels dominate draw time; an animation only moves the data. The
        title changes every frame, and matplotlib takes ~4 ms to lay out and draw it, more than
        the data; so it is left out of the background and stamped on by Pillow instead, with
        matplotlib's own font, where matplotlib put it (its text as set before `freeze`).
        """
        self.dynamic = [a for a in (self.mesh, self.lines, self.points) if a]
        for artist in self.dynamic:
            artist.set_animated(True)
        canvas = self.fig.canvas
        canvas.draw()  # lays out the representative title, to find where titles go
        box = self.title.get_window_extent()
        height = canvas.get_width_height()[1]
        self.title_at = ((box.x0 + box.x1) / 2, height - (box.y0 + box.y1) / 2)
        size = self.title.get_fontsize() * self.fig.dpi / 72
        self.title_font = ImageFont.truetype(findfont(self.title.get_fontproperties()),
                                             max(1, round(size)))
        self.title.set_text("")
        canvas.draw()
        self.background = canvas.copy_from_bbox(self.fig.bbox)

    def blit_rgb(self, title: str = "") -> np.ndarray:
        """The current frame as (h, w, 3) uint8 after `freeze`, redrawing only the data."""
        canvas = self.fig.canvas
        canvas.restore_region(self.background)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        rgb = np.asarray(canvas.buffer_rgba())[..., :3].copy()
        if title:
            image = Image.fromarray(rgb)
            ImageDraw.Draw(image).text(self.title_at, title, fill="black", anchor="mm",
                                       font=self.title_font)
            rgb = np.asarray(image)
        return rgb

    def save_png(self, path: Path) -> Path:
        """Write the current state atomically as PNG."""
        with atomic_path(Path(path)) as tmp:
            self.fig.savefig(tmp, format="png")
        return Path(path)


def as_positions_frames(xs: Any) -> np.ndarray:
    """Frames as float (F, N, D) with D >= 2 ((F, N) one-dimensional input gets y = 0)."""
    xs = np.asarray(xs, dtype=np.float64)
    if xs.ndim == 2:
        xs = xs[..., None]
    if xs.shape[-1] == 1:
        xs = np.concatenate([xs, np.zeros_like(xs)], axis=-1)
    return xs


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
    shapes: Shapes | None = None,
    limits: np.ndarray | None = None,
    spacing: float | None = None,
    depth: tuple[float, float] | None = None,
    trails: np.ndarray | None = None,
    units: Units = SYSTEMS["reduced"],
) -> Path:
    """Render one frame of positions `x` (N, D) to the PNG at `path`; returns the path.

    `limits`, `spacing` and `depth` default to what fits `x` alone; `render_run` passes the
    whole run's values so that both stills and the animation share one view. `trails`
    (F, N, D) draws each particle's path so far.
    """
    x = as_positions(x)
    plot = FramePlot(
        fit_limits(x, box, shapes=shapes) if limits is None else limits,
        len(x),
        bonds=bonds,
        triangles=triangles,
        depth_range=depth_range(x) if depth is None else depth,
        spacing=typical_spacing(x) if spacing is None else spacing,
        shapes=shapes,
        dim=x.shape[1],
        units=units,
    )
    if trails is not None:
        plot.add_trails(trails)
    plot.update(x, title)
    return plot.save_png(Path(path))
