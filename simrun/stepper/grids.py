"""A scene's grids as fields of the system (scene/load_grids.py reads the YAML).

Each grid field is a simrun.lang field of the grid's shape (a vector field where it has more
than one component) with a gradient, so a step kernel that updates it is differentiated
like an MPM grid, and it is carried as the modules' fields are: saved in state.npz, stored
in the adjoint's slab, tuned as ``state.<field>``."""

from __future__ import annotations

from typing import Any

import numpy as np

import simrun.lang as ti
from simrun.scene import Scene, SceneError
from simrun.scene.load_grids import Grid, GridField


def grid_fields(scene: Scene, fp, np_dtype, taken: dict[str, Any]) -> dict[str, Any]:
    """{field name: field} for every grid field of the scene, at its start value;
    `taken`: names a kernel module's allocate hook already made."""
    made: dict[str, Any] = {}
    for grid in scene.grids:
        for spec in grid.fields:
            if spec.name in taken:
                raise SceneError(f"{spec.where}: grid field '{spec.name}' has the name of a "
                                 "field a kernel module allocates. Rename one of them.")
            made[spec.name] = _field(grid, spec, fp, np_dtype)
    return made


def _field(grid: Grid, spec: GridField, fp, np_dtype):
    if spec.components == 1:
        f = ti.field(dtype=fp, shape=grid.shape, name=spec.name, needs_grad=True)
    else:
        f = ti.Vector.field(spec.components, dtype=fp, shape=grid.shape, name=spec.name,
                            needs_grad=True)
    f.from_numpy(start_values(grid, spec).astype(np_dtype))
    return f


def start_values(grid: Grid, spec: GridField) -> np.ndarray:
    """The field's values at step 0 in f64: its `value`, or its image's grey level."""
    shape = grid.shape + ((spec.components,) if spec.components > 1 else ())
    if spec.image is None:
        return np.full(shape, spec.value, dtype=np.float64)
    values = read_png(spec.image, spec.where)
    if spec.mean is not None:
        values = values - values.mean() + spec.mean
    return values


def read_png(path, where: str) -> np.ndarray:
    """A PNG's first channel as f64 in [0, 1] (value / 255 for 8-bit, / 65535 for 16-bit).
    A palette PNG's pixels are indices into its colours: they are looked up first, or the
    field would hold index / 255."""
    from PIL import Image, UnidentifiedImageError  # start-up: only grid scenes read images

    try:
        with Image.open(path) as img:
            raw = np.asarray(img.convert("RGBA") if img.mode in ("P", "PA") else img)
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as exc:
        raise SceneError(f"{where}: cannot read the image '{path}': {exc}. Save it as a "
                         "PNG.") from None
    if raw.ndim == 3:
        raw = raw[:, :, 0]
    top = 65535.0 if raw.dtype == np.uint16 else (1.0 if raw.dtype == bool else 255.0)
    return raw.astype(np.float64) / top


def grid_values(scene: Scene) -> dict[str, float]:
    """Scalars kernels may take by name: `dx`, the cell size, where every grid has one
    spacing on all axes and the grids agree (else none: give it in params)."""
    sizes = {s for g in scene.grids for s in g.spacing}
    return {"dx": float(sizes.pop())} if len(sizes) == 1 else {}


def saved_grid_fields(scene: Scene) -> tuple[str, ...]:
    """The grid fields frames.npz keeps (all but those with `frames: false`)."""
    return tuple(f.name for g in scene.grids for f in g.fields if f.frames)
