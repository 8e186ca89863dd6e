"""The ``grids:`` section: regular grids of fields that a scene's step kernels update (a
height field, a smoke density, a velocity field), with or without particles.

    grids:
      water:                          # a grid's name (labels its pictures)
        shape: [256, 256]             # cells per axis, 2-D or 3-D
        spacing: 0.00390625           # cell size: one number or one per axis
        fields:
          height: {}                  # a scalar field, 0 at the start
          velocity: {components: 2}   # a vector field
          target: {image: target.png, mean: 0, frames: false}

A field starts at ``value`` (default 0), or from a PNG of the grid's shape (2-D grids):
element [i, j] is row i, column j of the image's first channel, in [0, 1]; ``mean``
shifts it to that mean. ``frames: false`` keeps a field out of frames.npz (a constant
target). Kernels take a grid field by its name; ``state.<field>`` is its KEY. The engine
makes the fields (``simrun.stepper.grids``); here only the YAML is checked, with the PNG's
size read from its header."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from yaml.nodes import Node, ScalarNode

from simrun.scene import limits
from simrun.scene.errors import error_at, shorten, shorten_path
from simrun.scene.nodes import MapReader, as_bool, as_float, as_int, as_seq, as_str

MAX_COMPONENTS = 16
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# names kernels bind to something else (stepper/system.py's BASE_NAMES, the box, L), and
# state.x0 / state.v0, the particles' start
RESERVED = ("x", "v", "m", "x0", "v0", "U", "L", "dt", "dx", "step", "bonds", "angles",
            "dihedrals", "triangles", "neighbors", "species", "box_low", "box_high",
            "periodic", "cutoff")


@dataclass(frozen=True)
class GridField:
    """One field of a grid: `components` numbers per cell (1: scalar), its start value."""

    name: str
    components: int = 1
    value: float = 0.0
    image: Path | None = None
    mean: float | None = None
    frames: bool = True
    where: str = ""
    unit: str = ""  # the values' unit, for the colour bar (a label: nothing is converted)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"components": self.components}
        if self.image is not None:
            data["image"] = str(self.image)
            if self.mean is not None:
                data["mean"] = self.mean
        else:
            data["value"] = self.value
        if not self.frames:
            data["frames"] = False
        if self.unit:
            data["unit"] = self.unit
        return data


@dataclass(frozen=True)
class Grid:
    """A regular grid: `shape` cells of size `spacing` per axis, and its fields."""

    name: str
    shape: tuple[int, ...]
    spacing: tuple[float, ...]
    fields: tuple[GridField, ...]

    @property
    def dim(self) -> int:
        return len(self.shape)

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "spacing": list(self.spacing),
                "fields": {f.name: f.to_dict() for f in self.fields}}


def grids_to_dict(grids: tuple[Grid, ...]) -> dict[str, Any]:
    return {g.name: g.to_dict() for g in grids}


def frame_bytes(grids: tuple[Grid, ...], precision: str) -> int:
    """Bytes of the grid fields one saved frame keeps (those without ``frames: false``)."""
    fp = 4 if precision == "f32" else 8
    return sum(int(np.prod(g.shape, dtype=object)) * f.components * fp
               for g in grids for f in g.fields if f.frames)


def grid_field_names(grids: tuple[Grid, ...]) -> list[str]:
    return [f.name for g in grids for f in g.fields]


def grids(node: Node | None, scene_dir: Path, precision_bytes: int = 8) -> tuple[Grid, ...]:
    """The scene's grids (empty without a ``grids:`` section); SceneError at the line of a
    bad shape, spacing or field."""
    if node is None:
        return ()
    reader = MapReader(node, "grids")
    if not reader.items:
        raise error_at(node, "'grids' names no grid", "Write grids: {water: {shape: [64, 64], "
                       "spacing: 1.0, fields: {height: {}}}}, or remove 'grids'")
    found, seen = [], {}
    for name, (key_node, value) in reader.items.items():
        _check_name(key_node, name, "grid")
        grid = _grid(name, value, scene_dir, precision_bytes)
        for f in grid.fields:
            if f.name in seen:
                raise error_at(key_node, f"grid '{name}' has a field '{f.name}', and so has "
                               f"grid '{seen[f.name]}': kernels take a field by its name",
                               "Give every grid field its own name")
            seen[f.name] = name
        found.append(grid)
    return tuple(found)


def _check_name(node: Node, name: str, what: str) -> None:
    if not name.isidentifier() or name in RESERVED:
        taken = f", and '{name}' is taken (kernels bind it to the system's own)" \
            if name in RESERVED else ""
        raise error_at(node, f"'{shorten(name)}' cannot name a {what}: kernels take it as an "
                       f"argument of that name{taken}", "Use a Python name such as height")


def _grid(name: str, node: Node, scene_dir: Path, precision_bytes: int) -> Grid:
    r = MapReader(node, f"grids.{name}")
    shape_node = r.require("shape", "Write shape: [nx, ny] (2-D) or [nx, ny, nz] (3-D)")
    items = as_seq(shape_node, f"grids.{name}.shape")
    if len(items) not in (2, 3):
        raise error_at(shape_node, f"'grids.{name}.shape' has {len(items)} entries but a grid "
                       "is 2-D or 3-D", "Write shape: [nx, ny] or [nx, ny, nz]")
    shape = tuple(as_int(item, f"grids.{name}.shape[{i}]", 1) for i, item in enumerate(items))
    spacing_node = r.require("spacing", "Write spacing: 0.01 (the cell size, one number or "
                             "one per axis)")
    spacing = _spacing(spacing_node, f"grids.{name}.spacing", len(shape))
    fields_node = r.require("fields", "Write fields: {height: {}} (a scalar field at 0)")
    fr = MapReader(fields_node, f"grids.{name}.fields")
    if not fr.items:
        raise error_at(fields_node, f"grid '{name}' has no fields",
                       "Write fields: {height: {}}")
    fields = tuple(_field(name, fname, key, value, shape, scene_dir)
                   for fname, (key, value) in fr.items.items())
    r.done(("shape", "spacing", "fields"))
    cells = int(np.prod(shape, dtype=object))
    needed = cells * sum(f.components for f in fields) * precision_bytes * 3  # value, grad, frame
    limits.check_memory(shape_node, needed, f"grid '{name}' ({' x '.join(map(str, shape))} "
                        "cells)", "Use fewer cells")
    return Grid(name, shape, spacing, fields)


def _spacing(node: Node, what: str, dim: int) -> tuple[float, ...]:
    if isinstance(node, ScalarNode):
        return (as_float(node, what, positive=True),) * dim
    items = as_seq(node, what)
    if len(items) != dim:
        raise error_at(node, f"'{what}' has {len(items)} entries but the grid has {dim} axes",
                       f"Give one number, or {dim} (one per axis)")
    return tuple(as_float(item, f"{what}[{i}]", positive=True) for i, item in enumerate(items))


def _field(grid: str, name: str, key: Node, node: Node, shape: tuple[int, ...],
           scene_dir: Path) -> GridField:
    _check_name(key, name, "grid field")
    what = f"grids.{grid}.fields.{name}"
    if isinstance(node, ScalarNode) and node.value in ("", "~", "null"):
        return GridField(name, where=_where(key))
    r = MapReader(node, what)
    r.done(("components", "value", "image", "mean", "frames", "unit"))
    comp_node = r.get("components")
    components = as_int(comp_node, f"{what}.components", 1, MAX_COMPONENTS,
                        "a cell's vector is short") if comp_node else 1
    value = as_float(r.get("value"), f"{what}.value") if r.get("value") else 0.0
    frames = as_bool(r.get("frames"), f"{what}.frames") if r.get("frames") else True
    unit = as_str(r.get("unit"), f"{what}.unit") if r.get("unit") else ""
    image, mean = None, None
    if r.get("image") is not None:
        if r.get("value") is not None:
            raise error_at(r.key_node("value"), f"'{what}' gives both 'image' and 'value'",
                           "Keep one of them")
        image = _image(r.get("image"), what, shape, components, scene_dir)
        mean = as_float(r.get("mean"), f"{what}.mean") if r.get("mean") else None
    elif r.get("mean") is not None:
        raise error_at(r.key_node("mean"), f"'{what}.mean' shifts an image, but the field "
                       "has no 'image'", "Remove 'mean', or add 'image: file.png'")
    return GridField(name, components, value, image, mean, frames, _where(key), unit)


def _where(node: Node) -> str:
    mark = node.start_mark
    return f"{mark.name}:{mark.line + 1}:{mark.column + 1}"


def _image(node: Node, what: str, shape: tuple[int, ...], components: int,
           scene_dir: Path) -> Path:
    """A PNG beside the scene whose size is the grid's (rows x columns = shape)."""
    if len(shape) != 2 or components != 1:
        raise error_at(node, f"'{what}.image' starts a scalar field of a 2-D grid, but this "
                       f"field has {components} component(s) on a {len(shape)}-D grid",
                       "Use 'value', or a 'fields:' .npz file of the field's shape")
    path = (scene_dir / as_str(node, f"{what}.image")).resolve()
    size = png_size(path)
    if size is None:
        raise error_at(node, f"'{what}.image' names '{shorten_path(path)}', which is not a "
                       "PNG file", "Give a .png file relative to the scene")
    if size != shape:
        raise error_at(node, f"'{shorten_path(path.name)}' is {size[0]} x {size[1]} pixels "
                       f"(rows x columns) but the grid is {shape[0]} x {shape[1]} cells",
                       "Save the image at the grid's shape (rows = shape[0])")
    return path


def png_size(path: Path) -> tuple[int, int] | None:
    """(rows, columns) of a PNG from its header, None if the file is no PNG."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    return int(height), int(width)
