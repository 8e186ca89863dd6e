"""What a frame picture shows and how it is laid out: the scenery (``Shapes``), the view
limits, and a figure whose shape follows the view.

Why the figure follows the view: a square figure with equal axes turns a 45 x 1 lattice into
a line of dots; a figure up to ``MAX_ASPECT`` times wider (or taller) than high keeps equal
axes (bond lengths and angles true) and gives the system the room.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Box = Any  # ((xmin, ymin[, zmin]), (xmax, ymax[, zmax])): lower and upper corners
MAX_ASPECT = 4.0  # the widest (or tallest) view; beyond, the short side gets empty room
# margins of a 5-inch figure, in inches: left, bottom, right, top (labels and title)
_MARGINS_IN = (0.75, 0.55, 0.25, 0.45)


def as_positions(x: Any) -> np.ndarray:
    """Positions as float (N, D) with D >= 2 (1-D input gets y = 0)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[-1] == 1:
        x = np.concatenate([x, np.zeros_like(x)], axis=-1)
    return x


def _points(data: Any, width: int) -> list[tuple[float, ...]]:
    """Rows of ``width`` finite numbers from a list; anything malformed is left out."""
    rows = []
    for item in data if isinstance(data, list) else []:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            row = np.asarray(item, dtype=np.float64).ravel()[:width]
            if len(row) == width and np.isfinite(row).all():
                rows.append(tuple(float(v) for v in row))
    return rows


@dataclass
class Shapes:
    """Static scenery drawn behind the particles: walls (boxes), round obstacles, targets
    (an objective's goal, drawn as a cross), and the particles' physical radius when they
    have one (billiard balls: drawn at that size, not at a size that suits the spacing).

    Comes from the scene (a reflecting or periodic boundary box) and from kernel modules'
    ``render_shapes(params)`` hook (e.g. the MPM domain walls and obstacle), via run.json.
    """

    boxes: list[tuple[tuple[float, float], tuple[float, float]]] = field(default_factory=list)
    circles: list[tuple[float, float, float]] = field(default_factory=list)
    targets: list[tuple[float, float]] = field(default_factory=list)
    particle_radius: float | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Shapes:
        """Lenient reader: anything malformed is skipped (pictures must not fail a run)."""
        shapes = cls()
        if not isinstance(data, dict):
            return shapes
        boxes = data.get("boxes")
        for box in boxes if isinstance(boxes, list) else []:
            with contextlib.suppress(TypeError, ValueError, IndexError):
                b = np.asarray(box, dtype=np.float64)
                if b.ndim == 2 and np.isfinite(b[:2, :2]).all():
                    shapes.boxes.append(((float(b[0, 0]), float(b[0, 1])),
                                         (float(b[1, 0]), float(b[1, 1]))))
        shapes.circles = [(c[0], c[1], abs(c[2])) for c in _points(data.get("circles"), 3)]
        shapes.targets = [(t[0], t[1]) for t in _points(data.get("targets"), 2)]
        radius = _points([data.get("particle_radius")], 1)
        shapes.particle_radius = radius[0][0] if radius and radius[0][0] > 0 else None
        return shapes

    def extent(self) -> np.ndarray | None:
        """Corner points covering every shape (for the view limits), or None."""
        pts = [p for lo, hi in self.boxes for p in (lo, hi)]
        pts += [p for cx, cy, r in self.circles for p in ((cx - r, cy - r), (cx + r, cy + r))]
        pts += self.targets
        return np.asarray(pts, dtype=np.float64) if pts else None

    def __bool__(self) -> bool:
        return bool(self.boxes or self.circles or self.targets)


def fit_limits(x: np.ndarray, box: Box | None = None, margin: float = 0.05,
               shapes: Shapes | None = None) -> np.ndarray:
    """Axis limits [[xmin, xmax], [ymin, ymax]] around `x` (any leading shape) and the
    `shapes`, or exactly `box`; no more than MAX_ASPECT times wider than high (or higher
    than wide): the short side is widened.

    Why: fixed limits from the whole run keep an animation from jumping around.
    """
    if box is not None:
        b = np.asarray(box, dtype=np.float64)
        return np.stack([b[0, :2], b[1, :2]], axis=1)
    xy = as_positions(x)[..., :2].reshape(-1, 2)
    extent = shapes.extent() if shapes else None
    if extent is not None:
        xy = np.concatenate([xy, extent])
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) == 0:
        return np.array([[0.0, 1.0], [0.0, 1.0]])
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    centre, half = (lo + hi) / 2, (hi - lo) / 2 * (1 + margin)
    if half.max() <= 0:
        half[:] = max(1.0, np.abs(centre).max() * 0.1)
    half = np.maximum(half, half.max() / MAX_ASPECT)
    return np.stack([centre - half, centre + half], axis=1)


@dataclass(frozen=True)
class Layout:
    """A figure's size (inches) and its axes' rectangle (figure fractions)."""

    figsize: tuple[float, float]
    rect: tuple[float, float, float, float]

    @property
    def axes_in(self) -> tuple[float, float]:
        return self.figsize[0] * self.rect[2], self.figsize[1] * self.rect[3]


def layout(limits: np.ndarray, size_in: float) -> Layout:
    """Equal-aspect axes of the limits' shape and the area of a ``size_in`` square figure's
    (a square view gives exactly that figure)."""
    spans = np.maximum(limits[:, 1] - limits[:, 0], 1e-300)
    ratio = float(np.clip(spans[0] / spans[1], 1 / MAX_ASPECT, MAX_ASPECT))
    scale = size_in / 5.0
    side = 4.0 * scale  # the axes of a square view: 80% of the figure
    width, height = side * math.sqrt(ratio), side / math.sqrt(ratio)
    left, bottom, right, top = (m * scale for m in _MARGINS_IN)
    fig_w, fig_h = width + left + right, height + bottom + top
    return Layout((fig_w, fig_h), (left / fig_w, bottom / fig_h, width / fig_w,
                                   height / fig_h))
