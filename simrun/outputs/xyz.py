"""Extended XYZ (as read by ASE and OVITO): one block per frame, 2-D padded with z = 0.

Comment line: ``Lattice="..." Origin="..." Properties=species:S:1:pos:R:3:masses:R:1
[:momenta:R:3][:forces:R:3][:Z:I:1:tags:I:1] Time=... Step=... pbc="T T F"`` (``Z`` and
``tags`` where a species is no chemical symbol; and ``energy=`` when the
potential is known). Why these names: ``ase.io.read`` turns ``momenta`` and ``masses`` into
the Atoms' own arrays (``get_velocities()`` is momenta / masses), ``forces`` and ``energy``
into its calculator's results; a ``velocities`` or ``vel`` column would only be kept as an
unnamed extra array, and ``get_velocities()`` would return zeros. A 2-D system is periodic in
x and y only: its third lattice vector (length 1) is not periodic, so no particle sees its own
image through the thin z direction. A scene without a boundary has no cell: its frames carry
no ``Lattice`` and ``pbc="F F F"`` (ASE then reads a zero cell, as ``simrun.Run.atoms``
gives), never a box made up from the particles' extent.

Units: ASE and OVITO read every extended XYZ in ASE's units (Å, eV, amu; momenta in amu Å
per ASE time unit), so a scene in ``real``, ``metal`` or ``si`` units is written converted
to them (positions, cell, masses, momenta, forces, energy), with ``scene_units=real`` (...)
in the comment line saying so; ``Time=`` stays in the scene's time unit. ``read_xyz`` turns
such a frame back into its scene's units. lj and reduced scenes are written as they are.
"""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import numpy as np

from simrun.outputs.units import ase_scale

SPECIES = "X"
# ASE makes Atoms only of chemical symbols; a species named otherwise (Kob-Andersen's A and
# B) also gets columns Z (0: ASE's "X") and tags (its type number, 1 up, as LAMMPS counts)
ELEMENTS = tuple("""X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co
Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr
Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa
U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og""".split())
_NUMBER = {symbol: z for z, symbol in enumerate(ELEMENTS)}


def type_columns(species: list[str] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(Z, tags) per particle where a species name is no chemical symbol, else None."""
    if not species or all(name in _NUMBER for name in species):
        return None
    order = {name: i + 1 for i, name in enumerate(dict.fromkeys(species))}
    return (np.array([_NUMBER.get(name, 0) for name in species]),
            np.array([order[name] for name in species]))
_PAIR = re.compile(r'(\w+)=("[^"]*"|\S+)')


def pad3(a: np.ndarray) -> np.ndarray:
    """(N, 2) -> (N, 3) with z = 0; (N, 3) unchanged."""
    a = np.asarray(a, dtype=float)
    if a.shape[1] == 3:
        return a
    return np.concatenate([a, np.zeros((a.shape[0], 3 - a.shape[1]))], axis=1)


def pbc_flags(dim: int, periodic: bool) -> tuple[bool, bool, bool]:
    """Which of the three lattice vectors are periodic: never the padding z of a 2-D system."""
    return tuple(periodic and axis < dim for axis in range(3))  # type: ignore[return-value]


def velocities_of(frame: dict) -> np.ndarray | None:
    """A read frame's velocities: ``vel`` as older simrun wrote it, or momenta / masses."""
    if "vel" in frame:
        return frame["vel"]
    if "momenta" not in frame:
        return None
    masses = frame["masses"] if "masses" in frame else np.ones((frame["n"], 1))
    return frame["momenta"] / masses.reshape(-1, 1)


def cell_for(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 3x3 diagonal cell and its origin for a box; a missing z extent becomes 1."""
    low3 = pad3(np.asarray(low, float)[None])[0]
    size = pad3(np.asarray(high, float)[None] - np.asarray(low, float)[None])[0]
    size[size <= 0] = 1.0
    return np.diag(size), low3


def _real(value: float, digits: int) -> str:
    """A float that reads back as a float (``10.0``, not ``10``)."""
    text = f"{value:.{digits}g}"
    return text if any(c in text for c in ".eninf") else text + ".0"


def format_frame(x: np.ndarray, *, step: int, time: float, cell: np.ndarray | None,
                 origin: np.ndarray | None, pbc: tuple[bool, bool, bool] = (False,) * 3,
                 masses: np.ndarray | None = None, species: list[str] | None = None,
                 v: np.ndarray | None = None, f: np.ndarray | None = None,
                 energy: float | None = None, digits: int = 17, units: str = "reduced") -> str:
    """One frame as extended-XYZ text (``digits`` significant digits: exact for f64); no
    ``Lattice`` when ``cell`` is None; numbers in ASE's units where the scene's ``units``
    have them (see the module's docstring).

    ``v`` is written as momenta (masses times v, as ASE reads them; masses default to 1)."""
    masses = np.ones(len(x)) if masses is None else np.asarray(masses, dtype=float)
    scale = ase_scale(units)
    if scale is not None:
        x, masses = pad3(x) * scale.length, masses * scale.mass
        v = None if v is None else pad3(v) * scale.velocity
        f = None if f is None else pad3(f) * scale.force
        energy = None if energy is None else energy * scale.energy
        cell = None if cell is None else np.asarray(cell, float) * scale.length
        origin = None if origin is None else np.asarray(origin, float) * scale.length
    columns = [pad3(x), masses.reshape(-1, 1)]
    props = "species:S:1:pos:R:3:masses:R:1"
    if v is not None:
        columns.append(masses.reshape(-1, 1) * pad3(v))
        props += ":momenta:R:3"
    if f is not None:
        columns.append(pad3(f))
        props += ":forces:R:3"
    typed = type_columns(species)
    if typed is not None:
        columns += [typed[0].reshape(-1, 1), typed[1].reshape(-1, 1)]
        props += ":Z:I:1:tags:I:1"
    flags = " ".join("T" if p else "F" for p in pbc)
    header = ""
    if cell is not None:
        lattice = " ".join(f"{c:.{digits}g}" for c in np.asarray(cell).ravel())
        org = " ".join(f"{c:.{digits}g}" for c in (np.zeros(3) if origin is None else origin))
        header = f'Lattice="{lattice}" Origin="{org}" '
    header += f'Properties={props} Time={_real(time, digits)} Step={step} pbc="{flags}"'

    if energy is not None:
        header += f" energy={_real(energy, digits)}"
    if scale is not None:
        header += f" scene_units={units}"
    buf = io.StringIO()
    table = np.concatenate(columns, axis=1)
    numbers = " ".join([f"%.{digits}g"] * table.shape[1])
    if species is None or len(set(species)) == 1:
        name = species[0] if species else SPECIES
        np.savetxt(buf, table, fmt=f"{name} {numbers}")
    else:
        np.savetxt(buf, table, fmt=numbers)
        buf = io.StringIO("".join(f"{s} {row}\n" for s, row in
                                  zip(species, buf.getvalue().splitlines())))
    return f"{len(x)}\n{header}\n{buf.getvalue()}"


def parse_info(line: str) -> dict[str, str]:
    """An extended-XYZ comment line's ``key=value`` pairs (quotes removed)."""
    return {k: v.strip('"') for k, v in _PAIR.findall(line)}


def _parse_properties(spec: str) -> list[tuple[str, str, int]]:
    parts = spec.split(":")
    return [(parts[i], parts[i + 1], int(parts[i + 2])) for i in range(0, len(parts), 3)]


def _read_block(lines: list[str], start: int) -> tuple[dict, int]:
    n = int(lines[start].strip())
    info = parse_info(lines[start + 1])
    props = _parse_properties(info.get("Properties", "species:S:1:pos:R:3"))
    rows = [shlex.split(line) for line in lines[start + 2: start + 2 + n]]
    if len(rows) != n:
        raise ValueError(f"frame at line {start + 1} is truncated ({len(rows)} of {n} atoms)")
    frame: dict = {"n": n, "info": info}
    col = 0
    for name, kind, count in props:
        values = [r[col: col + count] for r in rows]
        col += count
        if kind == "R":
            frame[name] = np.array(values, dtype=float).reshape(n, count)
        elif kind == "I":
            frame[name] = np.array(values, dtype=int).reshape(n, count)
        else:
            frame[name] = [" ".join(v) for v in values]
    return _in_scene_units(frame), start + 2 + n


def _in_scene_units(frame: dict) -> dict:
    """A frame written in ASE's units (``scene_units=`` in its comment line) back in its
    scene's units: positions, masses, momenta, forces and energy as the scene had them."""
    scale = ase_scale(frame["info"].get("scene_units", ""))
    if scale is None:
        return frame
    for name, factor in (("pos", scale.length), ("masses", scale.mass),
                         ("momenta", scale.mass * scale.velocity), ("forces", scale.force)):
        if name in frame:
            frame[name] = frame[name] / factor
    return frame


def read_xyz(path: str | Path) -> list[dict]:
    """All frames of an extended-XYZ file: dicts with ``info``, ``pos`` and any other columns."""
    lines = Path(path).read_text().splitlines()
    frames, i = [], 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        frame, i = _read_block(lines, i)
        frames.append(frame)
    return frames


def split_frames(text: str) -> list[str]:
    """Split extended-XYZ text into per-frame blocks (each ending in a newline)."""
    lines = text.splitlines(keepends=True)
    blocks, i = [], 0
    while i < len(lines):
        n = int(lines[i].strip())
        blocks.append("".join(lines[i: i + n + 2]))
        i += n + 2
    return blocks
