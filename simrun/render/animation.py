"""Animated GIF of a run's saved frames.

Why this shape: one figure is built and laid out once; per frame only the data artists are
redrawn over a cached background (blitting), and the axes limits are fitted over the whole run
so the view does not jump. Frames are assembled with Pillow, as matplotlib's PillowWriter does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from simrun.outputs.units import SYSTEMS, Units
from simrun.render.frames import (
    Box,
    FramePlot,
    Shapes,
    as_positions,
    as_positions_frames,
    atomic_path,
    depth_range,
    fit_limits,
    typical_spacing,
)


def subsample(n_frames: int, max_frames: int) -> np.ndarray:
    """At most `max_frames` evenly spaced frame indices, always keeping the first and last."""
    if n_frames <= 0:
        return np.zeros(0, dtype=np.int64)
    k = max(1, min(n_frames, int(max_frames)))
    return np.unique(np.linspace(0, n_frames - 1, k).round().astype(np.int64))


def quantize(rgbs: list[np.ndarray], colours: int = 255) -> list[Image.Image]:
    """Palette images sharing one palette, fitted to a few frames spread over the run.

    Why shared: per-frame palettes cost a quantization each and make Pillow write a local
    colour table per frame; a plot has few colours, so one palette fits all frames.
    """
    sample = [rgbs[i] for i in subsample(len(rgbs), 6)]
    palette = Image.fromarray(np.concatenate(sample, axis=0)).quantize(
        colours, method=Image.Quantize.FASTOCTREE)
    return [Image.fromarray(rgb).quantize(palette=palette, dither=Image.Dither.NONE)
            for rgb in rgbs]


def frame_title(data: Any, i: int, name: str = "") -> str:
    """'NAME: step S, t = T' for frame i, from whichever of `step`/`time` the archive holds."""
    parts = []
    if "step" in data:
        parts.append(f"step {int(np.asarray(data['step'])[i])}")
    if "time" in data:
        parts.append(f"t = {float(np.asarray(data['time'])[i]):.4g}")
    text = ", ".join(parts)
    return f"{name}: {text}" if name and text else name or text


def render_animation(
    frames_npz: str | os.PathLike,
    gif_path: str | os.PathLike,
    *,
    bonds: Any = None,
    triangles: Any = None,
    max_frames: int = 60,
    fps: float = 15,
    box: Box | None = None,
    size_in: float = 4.0,
    dpi: int = 80,
    shapes: Shapes | None = None,
    name: str = "",
    limits: np.ndarray | None = None,
    spacing: float | None = None,
    units: Units = SYSTEMS["reduced"],
) -> Path:
    """Write an animated GIF of `frames_npz` (arrays step, time, x (F, N, D)); returns the path.

    `limits` and `spacing` default to the whole run's (`render_run` passes the values its
    stills use, so the pictures match).
    """
    with np.load(frames_npz) as npz:
        data = {k: npz[k] for k in npz.files if k in ("step", "time", "x")}
    xs = as_positions_frames(data["x"])
    picks = subsample(len(xs), max_frames)
    plot = FramePlot(
        fit_limits(xs, box, shapes=shapes) if limits is None else limits,
        xs.shape[1],
        bonds=bonds,
        triangles=triangles,
        depth_range=depth_range(xs),
        spacing=typical_spacing(xs[0]) if spacing is None else spacing,
        shapes=shapes,
        dim=np.asarray(data["x"]).shape[-1] if np.asarray(data["x"]).ndim == 3 else 1,
        size_in=size_in,
        dpi=dpi,
        units=units,
    )
    plot.update(as_positions(xs[picks[-1]]), frame_title(data, int(picks[-1]), name))
    plot.freeze()
    rgbs = []
    for i in picks:
        plot.update(as_positions(xs[i]))
        rgbs.append(plot.blit_rgb(frame_title(data, int(i), name)))
    images = quantize(rgbs)
    gif_path = Path(gif_path)
    with atomic_path(gif_path) as tmp:
        # What matplotlib's PillowWriter does, minus its full redraw per frame.
        images[0].save(
            tmp,
            format="GIF",
            save_all=True,
            append_images=images[1:],
            duration=max(1, round(1000 / fps)),
            loop=0,
            optimize=False,  # the shared palette is already small; optimizing costs ~3 ms/frame
        )
    return gif_path
