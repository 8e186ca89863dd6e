"""Initial positions and velocities of a scene, in NumPy (float64; the stepper casts)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from simrun.outputs.xyz import read_xyz, velocities_of
from simrun.scene.schema import Scene
from simrun.scene.structure import read_structure, uses_ase


def random_box(rng: np.random.Generator, count: int, low, high) -> np.ndarray:
    """Uniform positions in the box ``[low, high)`` (one row per particle)."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    return low + (high - low) * rng.random((count, len(low)))


LATTICE_BASES = {  # fractional offsets in a unit cell (LAMMPS's lattice fcc / bcc)
    "fcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5)),
    "bcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.5)),
}


def lattice(shape, spacing, origin, jitter: float, rng: np.random.Generator,
            basis: str | None = None) -> np.ndarray:
    """A regular grid numbered x-major (``i * ny + j``), optionally with a basis of several
    particles per cell (cell by cell) and jittered."""
    idx = np.indices(tuple(shape)).reshape(len(shape), -1).T.astype(float)
    if basis is not None:
        offsets = np.asarray(LATTICE_BASES[basis], float)
        idx = (idx[:, None, :] + offsets[None, :, :]).reshape(-1, len(shape))
    x = np.asarray(origin, float) + idx * np.asarray(spacing, float)
    if jitter > 0:
        x += rng.uniform(-jitter, jitter, size=x.shape)
    return x


def _perpendicular(rng: np.random.Generator, d: np.ndarray) -> np.ndarray:
    while True:
        r = rng.normal(size=3)
        p = r - r.dot(d) * d
        norm = np.linalg.norm(p)
        if norm > 1e-6:
            return p / norm


def random_walk(rng: np.random.Generator, count: int, dim: int, bond_length: float,
                angle_deg: float, start) -> np.ndarray:
    """A freely rotating chain: fixed bond length and bond angle, random torsions."""
    deflect = np.pi - np.radians(angle_deg)
    x = np.zeros((count, dim))
    x[0] = start
    d = rng.normal(size=dim)
    d /= np.linalg.norm(d)
    sign = 1.0
    for i in range(1, count):
        if i > 1:
            if dim == 3:
                p = _perpendicular(rng, d)
                d = np.cos(deflect) * d + np.sin(deflect) * p
            else:
                sign = -sign if rng.random() < 0.5 else sign
                c, s = np.cos(sign * deflect), np.sin(sign * deflect)
                d = np.array([c * d[0] - s * d[1], s * d[0] + c * d[1]])
            d /= np.linalg.norm(d)
        x[i] = x[i - 1] + bond_length * d
    return x


STATE_FILE_ERRORS = (ValueError, KeyError, IndexError, OSError, EOFError, zipfile.BadZipFile)
"""What reading a broken, truncated or foreign state file raises (never a pickle: no code)."""


def _real(data: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    array = data[key]
    if array.dtype.kind not in "iuf":
        raise ValueError(f"its array '{key}' holds {array.dtype} values, not real numbers")
    return np.asarray(array, float)


def read_state_file(path: Path, frame: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Positions (and velocities if present) from a ``.npz`` or extended-XYZ file.

    Raises one of ``STATE_FILE_ERRORS`` for a file that is not such a state."""
    if path.suffix == ".npz":
        data = np.load(path)  # allow_pickle=False: a state file cannot run code
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("it is a single .npy array, not an .npz archive of 'x' (and 'v')")
        with data:
            if "x" not in data:
                raise ValueError(f"it has no array 'x' (it has {', '.join(data.files)[:200]})")
            x = _real(data, "x")
            v = _real(data, "v") if "v" in data else None
        if x.ndim == 3:
            x = x[frame]
            v = v[frame] if v is not None and v.ndim == 3 else v
        if v is not None and v.shape != x.shape:
            raise ValueError(f"its velocities 'v' have shape {v.shape} but the positions "
                             f"{x.shape}")
        return x, v

    frames = read_xyz(path)
    if not frames:
        raise ValueError("it holds no frames")
    if not -len(frames) <= frame < len(frames):
        raise ValueError(f"it holds {len(frames)} frame{'s' * (len(frames) != 1)}, so "
                         f"'initial.frame' must be 0 to {len(frames) - 1} (or -1 for the "
                         f"last), not {frame}")
    chosen = frames[frame]
    return chosen["pos"], velocities_of(chosen)  # read_xyz gives both the same number of rows


def _positions(scene: Scene, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    init, p = scene.initial, scene.particles
    opts = init.options
    if init.type == "random":
        return random_box(rng, p.count, opts["low"], opts["high"]), None
    if init.type == "lattice":
        return lattice(opts["shape"], opts["spacing"], opts["origin"], opts["jitter"], rng,
                       opts.get("basis")), None
    if init.type == "bodies":  # the centres of a scene's rigid boxes
        return np.asarray([b.position for b in scene.bodies.boxes], dtype=float), None
    if init.type == "random_walk":
        return random_walk(rng, p.count, p.dim, opts["bond_length"], opts["angle"],
                           opts["start"]), None
    path = Path(opts["path"])
    if uses_ase(path, opts.get("format")):  # read (and checked) as the scene loaded
        s = read_structure(path, opts["frame"], opts.get("format"), opts.get("atom_style"),
                           scene.units)
        x, v = s.positions, s.velocities
    else:
        x, v = read_state_file(path, opts["frame"])
    return x[:, : p.dim], None if v is None else v[:, : p.dim]


def initial_state(scene: Scene) -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities at step 0 (deterministic given the scene's seed)."""
    rng = np.random.default_rng(scene.seed)
    x, v_file = _positions(scene, rng)
    # inertial masses and k_B T in energy units (simrun.scene.units): v in length per time
    masses = np.asarray(scene.particles.masses, float)[:, None] * scene.constants.mvv2e
    v = np.tile(np.asarray(scene.initial.velocity, float), (len(x), 1))
    if v_file is not None:
        v = v + v_file
    temperature = scene.initial.temperature * scene.constants.boltz
    if temperature > 0:
        if scene.initial.velocity_distribution == "uniform":  # LAMMPS's default `dist`
            unit = rng.uniform(-1.0, 1.0, size=x.shape) * np.sqrt(3.0)  # variance 1
        else:
            unit = rng.normal(size=x.shape)
        thermal = unit * np.sqrt(temperature / masses)
        thermal -= (masses * thermal).sum(axis=0) / masses.sum()  # no centre-of-mass drift
        if scene.initial.exact_temperature:  # as LAMMPS's velocity create: dof = dim (N - 1)
            dof = thermal.size - thermal.shape[1]
            thermal *= np.sqrt(temperature * dof / np.sum(masses * thermal * thermal))
        v = v + thermal
    return x, v
