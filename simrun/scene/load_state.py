"""Scene sections about particles' starting state: ``initial`` and ``topology``."""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from yaml.nodes import MappingNode, Node

from simrun.scene import limits
from simrun.scene.errors import choices_text, error_at, shorten, shorten_path
from simrun.scene.initial import LATTICE_BASES, STATE_FILE_ERRORS, read_state_file
from simrun.scene.nodes import (
    MapReader,
    as_bool,
    as_choice,
    as_float,
    as_index_rows,
    as_int,
    as_seq,
    as_str,
    as_vector,
    plain,
)
from simrun.scene.npz import npz_headers
from simrun.scene.schema import (
    INITIAL_TYPES,
    TOPOLOGY_KINDS,
    VELOCITY_DISTRIBUTIONS,
    Initial,
    Particles,
    Topology,
)
from simrun.scene.structure import ATOM_STYLES, Structure, structure_at, uses_ase
from simrun.scene.topology import GENERATORS, generate

COMMON_KEYS = ("type", "velocity", "temperature", "exact_temperature", "velocity_distribution")
TYPE_KEYS = {
    "random": ("low", "high"),
    "lattice": ("shape", "spacing", "origin", "jitter", "basis"),
    "random_walk": ("bond_length", "angle", "start"),
    "file": ("path", "frame", "format", "atom_style"),
}


def _box(reader: MapReader, dim: int) -> dict[str, Any]:
    low_node, high_node = reader.get("low"), reader.get("high")
    low = as_vector(low_node, "initial.low", dim) if low_node else (0.0,) * dim
    high = as_vector(high_node, "initial.high", dim) if high_node else (1.0,) * dim
    if any(h <= lo for lo, h in zip(low, high)):
        raise error_at(high_node or reader.node, f"initial box is empty: high {list(high)} "
                       f"must exceed low {list(low)} in every coordinate")
    return {"low": list(low), "high": list(high)}


def _lattice(reader: MapReader, p: Particles) -> dict[str, Any]:
    shape_node = reader.require("shape", f"Add 'shape: [nx, ny{', nz' * (p.dim - 2)}]'")
    items = as_seq(shape_node, "initial.shape", p.dim)
    shape = [as_int(n, "initial.shape", 1) for n in items]
    basis_node = reader.get("basis")
    basis = as_choice(basis_node, "initial.basis", tuple(LATTICE_BASES)) if basis_node else None
    if basis is not None and len(LATTICE_BASES[basis][0]) != p.dim:
        raise error_at(basis_node, f"lattice basis '{basis}' is 3-D but particles.dim is "
                       f"{p.dim}", "Remove 'basis' (a simple lattice) or set particles.dim: 3")
    made = math.prod(shape) * (len(LATTICE_BASES[basis]) if basis else 1)
    if made != p.count:
        raise error_at(shape_node, f"lattice shape {shorten(str(shape))} makes "
                       f"{shorten(str(made))} particles but particles.count is {p.count}",
                       f"Set particles.count: {shorten(str(made))} or change the shape")
    spacing_node, origin_node, jitter_node = (reader.get(k) for k in ("spacing", "origin",
                                                                      "jitter"))
    spacing = as_vector(spacing_node, "initial.spacing", p.dim) if spacing_node else (1.0,) * p.dim
    if min(spacing) <= 0:
        raise error_at(spacing_node, "lattice spacing must be positive", "Use e.g. spacing: 0.1")
    origin = as_vector(origin_node, "initial.origin", p.dim) if origin_node else (0.0,) * p.dim
    jitter = as_float(jitter_node, "initial.jitter", nonnegative=True) if jitter_node else 0.0
    options = {"shape": shape, "spacing": list(spacing), "origin": list(origin),
               "jitter": jitter}
    return options if basis is None else {**options, "basis": basis}


def _random_walk(reader: MapReader, p: Particles) -> dict[str, Any]:
    bond, angle, start = (reader.get(k) for k in ("bond_length", "angle", "start"))
    angle_deg = as_float(angle, "initial.angle", positive=True) if angle else 109.5
    if angle_deg > 180:
        raise error_at(angle, f"'initial.angle' is {angle_deg:g} degrees but must be at most "
                       "180", "Give the bond angle in degrees (180 = straight)")
    return {"bond_length": as_float(bond, "initial.bond_length", positive=True) if bond else 1.0,
            "angle": angle_deg,
            "start": list(as_vector(start, "initial.start", p.dim)) if start else [0.0] * p.dim}


def _file_options(reader: MapReader, scene_dir: Path) -> dict[str, Any]:
    """path (absolute, a regular file), frame, and ASE's format and atom_style if given."""
    path_node = reader.require("path", "Add 'path: state.npz' (or an extended-XYZ, LAMMPS "
                               "data, PDB or CIF file)")
    path = (scene_dir / as_str(path_node, "initial.path")).resolve()
    frame_node, format_node, style_node = (reader.get(k) for k in ("frame", "format",
                                                                   "atom_style"))
    _check_regular_file(path_node, path)
    options: dict[str, Any] = {"path": str(path),
                               "frame": as_int(frame_node, "initial.frame") if frame_node
                               else -1}
    if format_node is not None:
        options["format"] = as_str(format_node, "initial.format")
    if style_node is not None:
        options["atom_style"] = as_choice(style_node, "initial.atom_style", ATOM_STYLES)
    return options


def structure_of(node: Node | None, scene_dir: Path, units: str) -> Structure | None:
    """The structure an ``initial: {type: file}`` names when ASE reads it (LAMMPS data,
    PDB, CIF, ``format:`` ...): it gives the particles' count, species, masses and the box,
    so it is read before them; None for any other start."""
    if not isinstance(node, MappingNode):
        return None
    reader = MapReader(node, "initial")
    type_node = reader.get("type")
    if type_node is None or as_choice(type_node, "initial.type", INITIAL_TYPES) != "file":
        return None
    options = _file_options(reader, scene_dir)
    path = Path(options["path"])
    if not uses_ase(path, options.get("format")):
        return None
    limits.check_memory(reader.get("path"), path.stat().st_size,
                        f"reading '{shorten_path(path.name)}'", "Give a smaller structure")
    return structure_at(reader.get("path"), path, options["frame"], options.get("format"),
                        options.get("atom_style"), units)


def _file(reader: MapReader, p: Particles, scene_dir: Path,
          structure: Structure | None = None) -> dict[str, Any]:
    options = _file_options(reader, scene_dir)
    path_node, frame_node = reader.get("path"), reader.get("frame")
    path, frame = Path(options["path"]), options["frame"]
    if uses_ase(path, options.get("format")):
        if structure is None:  # load.structure_of reads it first from this very node
            raise error_at(path_node, "the structure file was not read before the particles",
                           "Report this as a bug in simrun")
        if structure.count != p.count or p.dim != 3:
            raise error_at(path_node, f"'{shorten_path(path.name)}' holds {structure.count} "
                           f"atoms in 3-D but the scene has {p.count} particles in "
                           f"{p.dim}-D", "Remove particles.count and particles.dim (the "
                           "file gives them), or match them to the file")
        return options
    try:
        frames = _state_frames(path_node, path, p)
        if frames is not None:  # an .npz: its shape checked before anything is inflated
            _check_frame(frame_node, frame, frames, path)
        x, _v = read_state_file(path, frame)
    except STATE_FILE_ERRORS as exc:
        raise error_at(path_node, f"cannot read initial state from '{shorten_path(path.name)}': "
                       f"{shorten(str(exc), 200)}", "Give an .npz file with an array 'x' (N, "
                       "dim) and optionally 'v', or an extended-XYZ file") from None
    if x.ndim != 2 or x.shape[0] != p.count or x.shape[1] < p.dim:
        raise error_at(path_node, f"'{shorten_path(path.name)}' holds positions of shape {x.shape} "
                       f"but the scene needs {p.count} particles in {p.dim}-D",
                       "Match particles.count and particles.dim to the file")
    return options


def _check_regular_file(node: Node, path: Path) -> None:
    try:
        exists, regular = path.exists(), path.is_file()
    except OSError:  # e.g. a name too long for the file system
        exists = regular = False
    if not exists:
        raise error_at(node, f"initial state file '{shorten_path(path)}' does not exist",
                       "Give a path relative to the scene file")
    if not regular:
        raise error_at(node, f"initial state file '{shorten_path(path)}' is not a regular file "
                       "(a folder, a device or a pipe)", "Give an .npz or extended-XYZ file")


def _state_frames(node: Node, path: Path, p: Particles) -> int | None:
    """The number of frames an .npz state holds, from its headers alone: shapes that do
    not fit the scene (a lying header, a deflate bomb) are refused before inflating."""
    if path.suffix != ".npz" or not zipfile.is_zipfile(path):  # extended XYZ (its text is
        limits.check_memory(node, path.stat().st_size, f"reading '{shorten_path(path.name)}'",
                            "Save only the frame the scene starts from")  # a lower bound)
        return None  # or a file read_state_file explains
    headers = npz_headers(path)
    x = headers.get("x")
    if x is None:
        return None
    frames = x.shape[0] if len(x.shape) == 3 else 1
    if len(x.shape) not in (2, 3) or x.shape[-2] != p.count or x.shape[-1] < p.dim:
        raise error_at(node, f"'{shorten_path(path.name)}' holds positions of shape "
                       f"{shorten(str(x.shape))} but the scene needs {p.count} particles in "
                       f"{p.dim}-D", "Match particles.count and particles.dim to the file")
    v = headers.get("v")
    if v is not None and v.shape not in (x.shape, x.shape[-2:]):
        raise error_at(node, f"'{shorten_path(path.name)}' holds velocities 'v' of shape "
                       f"{shorten(str(v.shape))} but positions {x.shape}",
                       "Save v with the shape of x")
    limits.check_memory(node, x.nbytes + (v.nbytes if v is not None else 0),
                        f"reading '{shorten_path(path.name)}' ({frames:,} frames)",
                        "Save only the frame the scene starts from")
    return frames


def _check_frame(node: Node | None, frame: int, frames: int, path: Path) -> None:
    if not -frames <= frame < frames:
        raise error_at(node, f"'initial.frame' is {shorten(str(frame))} but "
                       f"'{shorten_path(path.name)}' holds {frames} frame{'s' * (frames != 1)}",
                       f"Use 0 to {frames - 1}, or -1 for the last" if frames > 1 else
                       "Use 0 (or -1), or remove 'frame'")


def initial(node: Node | None, p: Particles, scene_dir: Path,
            structure: Structure | None = None) -> Initial:
    if node is None:
        return Initial("random", {"low": [0.0] * p.dim, "high": [1.0] * p.dim},
                       (0.0,) * p.dim, 0.0)
    reader = MapReader(node, "initial")
    reader.done(COMMON_KEYS + tuple(k for keys in TYPE_KEYS.values() for k in keys))
    type_node = reader.get("type")
    kind = as_choice(type_node, "initial.type", INITIAL_TYPES) if type_node else "random"
    reader.done(COMMON_KEYS + TYPE_KEYS[kind], f" (it does not apply to type '{kind}')")
    if kind == "random":
        options = _box(reader, p.dim)
    elif kind == "lattice":
        options = _lattice(reader, p)
    elif kind == "random_walk":
        options = _random_walk(reader, p)
    else:
        options = _file(reader, p, scene_dir, structure)
    vel, temp, exact, dist = (reader.get(k) for k in (
        "velocity", "temperature", "exact_temperature", "velocity_distribution"))
    return Initial(kind, options,
                   as_vector(vel, "initial.velocity", p.dim) if vel else (0.0,) * p.dim,
                   as_float(temp, "initial.temperature", nonnegative=True) if temp else 0.0,
                   as_bool(exact, "initial.exact_temperature") if exact else False,
                   as_choice(dist, "initial.velocity_distribution", VELOCITY_DISTRIBUTIONS)
                   if dist else "gaussian")


def _topology_entry(kind: str, node: Node, p: Particles, init: Initial) -> np.ndarray:
    name = f"topology.{kind}"
    if not isinstance(node, MappingNode):
        rows = as_index_rows(node, name, TOPOLOGY_KINDS[kind], p.count)
        return np.asarray(rows, dtype=np.int32).reshape(-1, TOPOLOGY_KINDS[kind])
    reader = MapReader(node, name)
    reader.done(("generate",))
    gen_node = reader.require("generate", f"Add 'generate: {GENERATORS[kind][0]}'")
    gen = as_choice(gen_node, f"{name}.generate", GENERATORS[kind])
    shape = tuple(init.options["shape"]) if init.type == "lattice" else None
    if gen == "grid" and (shape is None or len(shape) != 2):
        raise error_at(gen_node, f"'{name}: generate: grid' needs a 2-D lattice initial state",
                       "Set initial.type: lattice with shape: [nx, ny]")
    return generate(kind, gen, p.count, shape)


def topology(node: Node | None, p: Particles, init: Initial) -> Topology:
    if node is None:
        return Topology()
    reader = MapReader(node, "topology")
    reader.done(TOPOLOGY_KINDS)
    arrays, spec = {}, {}
    for kind in TOPOLOGY_KINDS:
        entry = reader.get(kind)
        if entry is None:
            continue
        if kind == "dihedrals" and p.dim != 3:
            raise error_at(entry, "dihedrals need 3-D particles", "Set particles.dim: 3")
        rows = _topology_entry(kind, entry, p, init)
        if len(rows) == 0:
            raise error_at(entry, f"'topology.{kind}' is empty",
                           f"Remove it or give {choices_text([kind])} rows")
        arrays[kind], spec[kind] = rows, plain(entry)
    return Topology(arrays, spec)
