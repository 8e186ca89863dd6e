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

from simrun.render.frames import Box, FramePlot, as_positions, atomic_path, depth_range, fit_limits


def subsample(n_frames: int, max_frames: int) -> np.ndarray:
    """At most `max_frames` evenly spaced frame indices, always keeping the first and last."""
    if n_frames <= 0:
        return np.zeros(0, dtype=np.int64)
    k = max(1, min(n_frames, int(max_frames)))
    return np.unique(np.linspace(0, n_frames - 1, k).round().astype(np.int64))


def frame_title(data: Any, i: int) -> str:
    """'step S  t = T' for frame i, from whichever of `step`/`time` the archive holds."""
    parts = []
    if "step" in data:
        parts.append(f"step {int(np.asarray(data['step'])[i])}")
    if "time" in data:
        parts.append(f"t = {float(np.asarray(data['time'])[i]):.4g}")
    return "  ".join(parts)


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
) -> Path:
    """Write an animated GIF of `frames_npz` (arrays step, time, x (F, N, D)); returns the path."""
    with np.load(frames_npz) as npz:
        data = {k: npz[k] for k in npz.files if k in ("step", "time", "x")}
    xs = np.asarray(data["x"], dtype=np.float64)
    if xs.ndim == 2:  # (F, N) one-dimensional positions
        xs = xs[..., None]
    picks = subsample(len(xs), max_frames)
    plot = FramePlot(
        fit_limits(xs, box),
        xs.shape[1],
        bonds=bonds,
        triangles=triangles,
        depth_range=depth_range(xs),
        size_in=size_in,
        dpi=dpi,
    )
    plot.update(as_positions(xs[picks[0]]), frame_title(data, int(picks[0])))
    plot.freeze()
    images = []
    for i in picks:
        plot.update(as_positions(xs[i]), frame_title(data, int(i)))
        # Fast octree quantization per frame: ~10x cheaper than Pillow's default median cut.
        frame = Image.fromarray(plot.blit_rgb())
        images.append(frame.quantize(255, method=Image.Quantize.FASTOCTREE))
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
        )
    return gif_path
