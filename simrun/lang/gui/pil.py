"""The headless `ti.GUI` canvas, drawn with PIL's `ImageDraw`.

Why: headless runs only write PNG frames, and matplotlib's import (~0.75 s) was most of the
reference gravity program's start-up; PIL (~30 ms, already used to write the PNGs) draws
circles, segments and polygons in C. Shapes are drawn at `SCALE`x and box-filtered down, so
edges are antialiased (5 coverage levels at 2x). Same interface as `mpl.MplCanvas`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw

SCALE = 2  # supersampling factor per axis


@lru_cache(maxsize=16)
def _font(size: int):  # -> ImageFont.FreeTypeFont | ImageFont.ImageFont
    """Pillow's bundled font at `size` px (a fixed-size bitmap font without FreeType);
    imported on first use: most headless programs draw no text."""
    from PIL import ImageFont  # start-up: most headless programs draw no text

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


def _fills(rgb: np.ndarray) -> list[tuple[int, int, int]]:
    """Float RGB rows in [0,1] -> PIL fill tuples."""
    return [tuple(c) for c in np.rint(np.clip(rgb, 0.0, 1.0) * 255).astype(int).tolist()]


class PilCanvas:
    """An RGB image at SCALE x the GUI's resolution, drawn into immediately (later on top).

    Inputs are pixel coordinates of the GUI's resolution with (0,0) at the bottom-left, as
    continuous positions (pixel i spans [i, i+1]); they are flipped and scaled here.
    """

    def __init__(self, res: tuple[int, int]) -> None:
        self.res = res
        self._size = (res[0] * SCALE, res[1] * SCALE)
        self._img = Image.new("RGB", self._size)
        self._draw = ImageDraw.Draw(self._img)

    def _xy(self, p: np.ndarray) -> np.ndarray:
        """GUI pixels, y up -> supersampled pixels, y down (same continuous convention)."""
        q = np.empty_like(p, dtype=np.float64)
        q[..., 0] = p[..., 0] * SCALE
        q[..., 1] = (self.res[1] - p[..., 1]) * SCALE
        return q

    def clear(self, rgb: np.ndarray) -> None:
        self._img = Image.new("RGB", self._size, _fills(rgb.reshape(1, 3))[0])
        self._draw = ImageDraw.Draw(self._img)

    def set_image(self, a: np.ndarray) -> None:
        """`a` is float (w', h', 3) in [0,1], indexed [x, y]; stretched over the canvas."""
        u8 = np.rint(a * 255).astype(np.uint8).transpose(1, 0, 2)[::-1]
        im = Image.fromarray(np.ascontiguousarray(u8))
        self._img.paste(im.resize(self._size, Image.Resampling.NEAREST))

    def _dots(self, c: np.ndarray, r: np.ndarray, fills: list) -> None:
        """Filled discs; c, r in supersampled pixels. The box is inset by half a pixel
        because PIL's ellipse covers the pixels whose centres are on its bounding box."""
        ellipse, point = self._draw.ellipse, self._draw.point
        for (x, y), rr, fill in zip(c.tolist(), r.tolist(), fills):
            if rr >= 0.5:
                ellipse((x - rr + 0.5, y - rr + 0.5, x + rr - 0.5, y + rr - 0.5), fill=fill)
            elif rr > 0:
                point((x - 0.5, y - 0.5), fill=fill)

    def circles(self, xy: np.ndarray, radii: np.ndarray, rgb: np.ndarray) -> None:
        self._dots(self._xy(xy), radii * SCALE, _fills(rgb))

    def lines(self, segs: np.ndarray, radii: np.ndarray, rgb: np.ndarray) -> None:
        """Segments with round caps: a quad per segment plus a disc at each end."""
        p = self._xy(segs)
        a, b = p[:, 0], p[:, 1]
        hw = radii * SCALE
        d = b - a
        length = np.hypot(d[:, 0], d[:, 1])
        # the quad is inset by half a pixel: PIL fills every pixel its edges touch
        inset = np.maximum(hw - 0.5, 0.0) / np.maximum(length, 1e-12)
        n = np.stack([-d[:, 1], d[:, 0]], axis=1) * inset[:, None]
        quads = np.stack([a + n, b + n, b - n, a - n], axis=1)
        fills = _fills(rgb)
        polygon, line = self._draw.polygon, self._draw.line
        for q, w, ln, fill in zip(quads.tolist(), hw.tolist(), length.tolist(), fills):
            if ln == 0.0:
                continue
            if w < 1.0:  # thinner than two supersampled pixels: a 1-px line
                (x0, y0), (x1, y1) = q[0], q[1]
                line([(x0 - 0.5, y0 - 0.5), (x1 - 0.5, y1 - 0.5)], fill=fill, width=1)
            else:
                polygon([tuple(v) for v in q], fill=fill)
        caps = hw >= 1.0
        ends = np.concatenate([a[caps], b[caps]])
        cap_fills = [f for f, c in zip(fills, caps) if c]
        self._dots(ends, np.concatenate([hw[caps], hw[caps]]), cap_fills * 2)
        dots = (length == 0.0) & ~caps  # zero-length thin segments still leave a dot
        self._dots(a[dots], hw[dots], [f for f, c in zip(fills, dots) if c])

    def triangles(self, tri: np.ndarray, rgb: np.ndarray) -> None:
        polygon = self._draw.polygon
        for t, fill in zip(self._xy(tri).tolist(), _fills(rgb)):
            polygon([tuple(v) for v in t], fill=fill)

    def text(self, content: str, x: float, y: float, size: float, rgb: np.ndarray) -> None:
        """Top-left of the text (its first line's ascender) at (x, y)."""
        from PIL import ImageFont  # start-up: most headless programs draw no text

        font = _font(max(1, round(size * SCALE)))
        (px, py), = self._xy(np.array([[x, y]])).tolist()
        anchor = "la" if isinstance(font, ImageFont.FreeTypeFont) else None
        self._draw.text((px, py), content, fill=_fills(rgb.reshape(1, 3))[0], font=font,
                        anchor=anchor)

    def render(self) -> np.ndarray:
        img = self._img.reduce(SCALE) if SCALE > 1 else self._img
        return np.asarray(img)
