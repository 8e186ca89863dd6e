"""Pictures of a run's grid fields (frames.npz's ``grid:<name>``): the first and last
frames side by side and an animated GIF, each an image of the field with a colour bar.

Why one colour scale per field over the whole run: frames are then comparable at a glance
(a wave that decays looks fainter). A field of both signs gets a diverging map centred on
0. Row i of the image is element [i, :] (as the scenes' target images are read), the axes
in the scene's length unit; a vector field shows its magnitude, a 3-D grid its middle slice
along the last axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simrun.outputs.units import SYSTEMS, Units
from simrun.render.animation import quantize, subsample
from simrun.render.frames import atomic_path

PREFIX = "grid:"


def grid_names(frames_npz: Path) -> list[str]:
    """The grid fields frames.npz holds."""
    with np.load(frames_npz) as npz:
        return [k[len(PREFIX):] for k in npz.files if k.startswith(PREFIX)]


def _images(values: np.ndarray, grid: dict[str, Any]) -> tuple[np.ndarray, bool, str]:
    """(frames, rows, columns) to draw, whether they are magnitudes of vectors, and which
    slice of a 3-D grid they show ('' for a 2-D grid)."""
    dim = len(grid.get("shape") or values.shape[1:3])
    vector = values.ndim == dim + 2
    if vector:
        values = np.linalg.norm(values, axis=-1)
    where = ""
    if dim == 3:
        depth = values.shape[-1]
        values = values[..., depth // 2]
        where = f" (slice [:, :, {depth // 2}] of {depth})"
    return values, vector, where


def _scale(images: np.ndarray) -> dict[str, Any]:
    low, high = float(np.nanmin(images)), float(np.nanmax(images))
    if low < 0 < high:
        top = max(-low, high)
        return {"cmap": "RdBu_r", "vmin": -top, "vmax": top}
    return {"cmap": "viridis", "vmin": low, "vmax": high if high > low else low + 1}


def _extent(grid: dict[str, Any], shape: tuple[int, int]) -> list[float]:
    spacing = list(grid.get("spacing") or [1.0, 1.0])
    return [0.0, shape[1] * float(spacing[1]), shape[0] * float(spacing[0]), 0.0]


def _axes_labels(ax, units: Units) -> None:
    """The axes are lengths (cells times the spacing): in the scene's unit, or [reduced]."""
    ax.set_xlabel(units.label("column", "length"))
    ax.set_ylabel(units.label("row", "length"))


def _title(name: str, step: np.ndarray, time: np.ndarray, i: int, units: Units) -> str:
    unit = f" {units.time}" if units.time else ""
    return f"{name}: step {int(step[i])}, t = {float(time[i]):.4g}{unit}"


class FieldImages(NamedTuple):
    """What a grid field's pictures show: one image per frame and how to label them."""

    images: np.ndarray  # (frames, rows, columns)
    step: np.ndarray
    time: np.ndarray
    title: str
    label: str  # the colour bar's: the field (|field| for a vector's magnitude) [unit]
    scale: dict[str, Any]
    extent: list[float]


def field_images(frames_npz: Path, field: str, grid: dict[str, Any], scene_name: str = ""
                 ) -> FieldImages:
    """A field's frames from frames.npz as images (`grid`: its grid in scene.yaml)."""
    with np.load(frames_npz) as npz:
        values, step, time = npz[PREFIX + field], npz["step"], npz["time"]
    images, vector, where = _images(values, grid)
    label = f"|{field}|" if vector else field
    unit = ((grid.get("fields") or {}).get(field) or {}).get("unit")
    label += f" [{unit}]" if unit else ""
    title = (f"{scene_name}: {field}" if scene_name else field) + where
    return FieldImages(images, step, time, title, label, _scale(images),
                       _extent(grid, images.shape[1:3]))


def render_grid_field(frames_npz: Path, out_dir: Path, field: str, grid: dict[str, Any],
                      units: Units = SYSTEMS["reduced"], scene_name: str = "",
                      max_frames: int = 60, fps: float = 15) -> list[Path]:
    """`<field>.png` (first and last frame) and `<field>.gif`; returns the paths."""
    shown = field_images(frames_npz, field, grid, scene_name)
    still = out_dir / f"{field}.png"
    with atomic_path(still) as tmp:
        still_figure(shown, units).savefig(tmp)
    return [still, _animation(shown, out_dir / f"{field}.gif", units, max_frames, fps)]


def still_figure(shown: FieldImages, units: Units) -> Figure:
    """The first and last images side by side, one colour bar for both."""
    images, step, time, title = shown.images, shown.step, shown.time, shown.title
    fig = Figure(figsize=(9, 4.2), dpi=90, layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, i, which in ((axes[0], 0, "first"), (axes[1], len(images) - 1, "last")):
        drawn = ax.imshow(images[i], extent=shown.extent, interpolation="nearest",
                          **shown.scale)
        ax.set_title(f"{which}: " + _title(title, step, time, i, units), fontsize=9)
        _axes_labels(ax, units)
    fig.colorbar(drawn, ax=list(axes), label=shown.label, shrink=0.85)
    return fig


def _animation(shown: FieldImages, path: Path, units: Units, max_frames: int,
               fps: float) -> Path:
    images, step, time, title = shown.images, shown.step, shown.time, shown.title
    scale, extent, label = shown.scale, shown.extent, shown.label
    fig = Figure(figsize=(5, 4.2), dpi=80, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    drawn = ax.imshow(images[0], extent=extent, interpolation="nearest", **scale)
    fig.colorbar(drawn, ax=ax, label=label, shrink=0.85)
    _axes_labels(ax, units)
    heading = ax.set_title(_title(title, step, time, len(images) - 1, units), fontsize=9)
    fig.canvas.draw()  # laid out once, with the longest title; then only redrawn
    fig.set_layout_engine("none")
    rgbs = []
    for i in subsample(len(images), max_frames):
        drawn.set_data(images[i])
        heading.set_text(_title(title, step, time, int(i), units))
        fig.canvas.draw()
        rgbs.append(np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy())
    frames = quantize(rgbs)
    with atomic_path(path) as tmp:
        frames[0].save(tmp, format="GIF", save_all=True, append_images=frames[1:],
                       duration=max(1, round(1000 / fps)), loop=0, optimize=False)
    return path


def render_grids(frames_npz: Path, out_dir: Path, scene: dict, units: Units,
                 max_frames: int = 60, fps: float = 15) -> list[Path]:
    """The pictures of every grid field in frames.npz (`scene`: the run's scene.yaml)."""
    grids = scene.get("grids") if isinstance(scene.get("grids"), dict) else {}
    of_field = {f: g for g in grids.values() if isinstance(g, dict)
                for f in (g.get("fields") or {})}
    written = []
    for field in grid_names(frames_npz):
        written += render_grid_field(frames_npz, out_dir, field, of_field.get(field, {}), units,
                                     str(scene.get("name") or ""), max_frames, fps)
    return written
