"""The windowed `ti.GUI` canvas, drawn with matplotlib's Agg renderer.

Why: with a window on screen, frames are shown once per `show()` and matplotlib's antialiased
text and shapes are worth its ~0.75 s import. Headless runs never import this module (see
`pil.py`). Same interface as `pil.PilCanvas`: pixel coordinates with (0,0) at the
bottom-left, float RGB colours in [0,1], and `render()` returning (h, w, 3) uint8.
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import EllipseCollection, LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

_DPI = 72  # one point is one pixel, so line widths and font sizes are in pixels


class MplCanvas:
    """A persistent Agg figure whose data units are pixels; one artist per drawing call."""

    def __init__(self, res: tuple[int, int]) -> None:
        w, h = self.res = res
        # A hair over w/72 so that rounding never loses the last pixel column.
        self._fig = Figure(figsize=((w + 0.01) / _DPI, (h + 0.01) / _DPI), dpi=_DPI)
        self._canvas = FigureCanvasAgg(self._fig)
        self._ax = self._fig.add_axes((0, 0, 1, 1))
        self._ax.set_axis_off()
        self._ax.set_xlim(0, w)
        self._ax.set_ylim(0, h)
        self._ax.set_autoscale_on(False)
        self._artists: list = []

    def _add(self, artist) -> None:
        artist.set_zorder(len(self._artists) + 1)  # later calls draw on top, as in Taichi
        self._artists.append(artist)

    def clear(self, rgb: np.ndarray) -> None:
        for a in self._artists:
            a.remove()
        self._artists = []
        self._fig.set_facecolor(rgb)

    def set_image(self, a: np.ndarray) -> None:
        """`a` is float (w', h', 3) in [0,1], indexed [x, y]; stretched over the canvas."""
        w, h = self.res
        im = AxesImage(self._ax, origin="lower", interpolation="nearest", extent=(0, w, 0, h))
        im.set_data(a.transpose(1, 0, 2))
        self._ax.add_image(im)
        self._add(im)

    def circles(self, xy: np.ndarray, radii: np.ndarray, rgb: np.ndarray) -> None:
        d = 2.0 * radii
        coll = EllipseCollection(d, d, np.zeros(len(xy)), units="xy", offsets=xy,
                                 offset_transform=self._ax.transData,
                                 facecolors=rgb, edgecolors="none")
        self._ax.add_collection(coll, autolim=False)
        self._add(coll)

    def lines(self, segs: np.ndarray, radii: np.ndarray, rgb: np.ndarray) -> None:
        coll = LineCollection(segs, linewidths=2.0 * radii, colors=rgb,
                              capstyle="round", joinstyle="round")
        self._ax.add_collection(coll, autolim=False)
        self._add(coll)

    def triangles(self, tri: np.ndarray, rgb: np.ndarray) -> None:
        coll = PolyCollection(tri, facecolors=rgb, edgecolors=rgb, linewidths=0.5)
        self._ax.add_collection(coll, autolim=False)
        self._add(coll)

    def text(self, content: str, x: float, y: float, size: float, rgb: np.ndarray) -> None:
        t = self._ax.text(x, y, content, fontsize=size, color=rgb, ha="left", va="top",
                          clip_on=True)
        self._add(t)

    def render(self) -> np.ndarray:
        self._canvas.draw()
        buf = np.asarray(self._canvas.buffer_rgba())
        w, h = self.res
        return buf[:h, :w, :3]
