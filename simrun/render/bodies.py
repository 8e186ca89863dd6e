"""Pictures of a rigid-body run (a scene with ``bodies:``): each box drawn as its rectangle
at its angle, the springs as lines between their anchor points (joints dark and thick), over
the usual frame (the centres as dots, the ground and the goal from run.json's shapes).

Why its own module: frames.npz holds the boxes' angles per frame (``angle``), and the boxes'
sizes and springs come from the run's scene.yaml; the particle renderer knows neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection

from simrun.outputs.units import SYSTEMS, Units
from simrun.render.animation import frame_title, quantize, subsample
from simrun.render.frames import FramePlot, Shapes, atomic_path, fit_limits

CORNERS = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=float)


def bodies_of(scene: dict) -> tuple[np.ndarray, list[dict]] | None:
    """(half sizes (N, 2), springs) from a run's scene.yaml; None without bodies."""
    bodies = scene.get("bodies")
    if not isinstance(bodies, dict) or not isinstance(bodies.get("boxes"), list):
        return None
    half = np.array([b["halfsize"] for b in bodies["boxes"]], dtype=float)
    return half, list(bodies.get("springs") or [])


def _rotate(angle: np.ndarray, local: np.ndarray) -> np.ndarray:
    """R(angle) local, for angles (...,) and points (..., 2)."""
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([c * local[..., 0] - s * local[..., 1],
                     s * local[..., 0] + c * local[..., 1]], axis=-1)


def box_corners(x: np.ndarray, angle: np.ndarray, half: np.ndarray) -> np.ndarray:
    """The four corners (N, 4, 2) of boxes at centres x (N, 2) and angles (N,)."""
    local = CORNERS[None, :, :] * half[:, None, :]
    return x[:, None, :] + _rotate(angle[:, None], local)


def spring_segments(x: np.ndarray, angle: np.ndarray, springs: list[dict]) -> np.ndarray:
    """(S, 2, 2): each spring's two anchor points in the world."""
    if not springs:
        return np.zeros((0, 2, 2))
    a = np.array([s["a"] for s in springs])
    b = np.array([s["b"] for s in springs])
    oa = np.array([s["offset_a"] for s in springs], dtype=float)
    ob = np.array([s["offset_b"] for s in springs], dtype=float)
    return np.stack([x[a] + _rotate(angle[a], oa), x[b] + _rotate(angle[b], ob)], axis=1)


class BodyPlot(FramePlot):
    """A frame with the boxes and springs as artists that move with every update."""

    def __init__(self, limits: np.ndarray, half: np.ndarray, springs: list[dict], *,
                 shapes: Shapes | None, units: Units, size_in: float = 5.0,
                 dpi: int = 100) -> None:
        # the centres as small dots (a third of the thinnest box), the boxes carry the shape
        super().__init__(limits, len(half), spacing=float(half.min()) / 3, shapes=shapes,
                         size_in=size_in, dpi=dpi, units=units)
        self.half, self.springs = half, springs
        joint = np.array([bool(s.get("joint")) for s in springs], dtype=bool)
        self.boxes = PolyCollection([], facecolors="#c6dbef", edgecolors="#08306b",
                                    linewidths=1.2, zorder=1.5)
        self.spring_lines = LineCollection(
            [], colors=["#222222" if j else "#d62728" for j in joint],
            linewidths=[3.5 if j else 1.8 for j in joint], capstyle="round", zorder=2.5)
        self.ax.add_collection(self.boxes, autolim=False)
        self.ax.add_collection(self.spring_lines, autolim=False)

    def show(self, x: np.ndarray, angle: np.ndarray, title: str = "") -> None:
        self.boxes.set_verts(box_corners(x, angle, self.half))
        self.spring_lines.set_segments(spring_segments(x, angle, self.springs))
        self.update(x, title)

    def freeze(self) -> None:
        for artist in (self.boxes, self.spring_lines):
            artist.set_animated(True)
        super().freeze()
        self.dynamic = [self.boxes, self.spring_lines, *self.dynamic]


def render_bodies(run_dir: Path, scene: dict, xs: np.ndarray, angles: np.ndarray,
                  frames: dict[str, Any], *, shapes: Shapes, name: str,
                  units: Units = SYSTEMS["reduced"], max_frames: int = 60,
                  fps: float = 15) -> list[Path]:
    """first.png, last.png and animation.gif of a rigid-body run; returns the paths."""
    half, springs = bodies_of(scene) or (np.zeros((xs.shape[1], 2)), [])
    xs = np.asarray(xs, dtype=float)[..., :2]
    angles = np.asarray(angles, dtype=float)
    corners = np.stack([box_corners(x, a, half) for x, a in zip(xs, angles)])
    limits = fit_limits(corners.reshape(len(xs), -1, 2), shapes=shapes)
    written = []
    for label, i in (("first", 0), ("last", len(xs) - 1)):
        plot = BodyPlot(limits, half, springs, shapes=shapes, units=units)
        plot.show(xs[i], angles[i], (f"{name}: " if name else "") + f"{label} frame, "
                  + frame_title(frames, i))
        written.append(plot.save_png(run_dir / f"{label}.png"))
    picks = subsample(len(xs), max_frames)
    plot = BodyPlot(limits, half, springs, shapes=shapes, units=units, size_in=4.0, dpi=80)
    plot.show(xs[picks[-1]], angles[picks[-1]], frame_title(frames, int(picks[-1]), name))
    plot.freeze()
    rgbs = []
    for i in picks:
        plot.show(xs[i], angles[i])
        rgbs.append(plot.blit_rgb(frame_title(frames, int(i), name)))
    images = quantize(rgbs)
    gif = run_dir / "animation.gif"
    with atomic_path(gif) as tmp:
        images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                       duration=max(1, round(1000 / fps)), loop=0, optimize=False)
    written.append(gif)
    return written
