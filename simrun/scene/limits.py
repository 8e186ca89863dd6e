"""Sizes bounded up front from the machine's memory, so that ``count: 10**9`` is a clear
message at the scene's line, not minutes of allocation and then a ``MemoryError``.

The estimates are lower bounds of what a run holds (fields, their NumPy copies, and the saved
frames, which are kept in memory and written whole at each flush): a scene refused here would
certainly not have fit.
"""

from __future__ import annotations

import os
from pathlib import Path

from yaml.nodes import Node

from simrun.scene.errors import error_at

_CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"),
                  Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def machine_memory() -> int | None:
    """Bytes of memory this process may use: physical memory, or a lower cgroup limit (a
    container, a Slurm job); None where neither can be read."""
    found: list[int] = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            found.append(int(text))
    found = [n for n in found if n > 0]
    return min(found) if found else None


def particle_bytes(dim: int, precision: str) -> int:
    """Bytes each particle needs at least: the fields x, v, x0, x.grad and m (kernels), their
    NumPy copies (start, state, forces) and one float of Python mass."""
    fp = 4 if precision == "f32" else 8
    return 8 + fp * (dim * (4 + 4) + 1)


def frame_bytes(count: int, dim: int, precision: str, arrays: int, xyz: bool) -> int:
    """Bytes one saved frame holds at least: ``arrays`` (x, v, f) of ``count`` x ``dim``
    floats and its extended-XYZ text (three columns of ``digits`` + 1 characters per array)."""
    fp = 4 if precision == "f32" else 8
    digits = 9 if precision == "f32" else 17
    text = count * arrays * 3 * (digits + 1) if xyz else 0
    return count * dim * fp * arrays + text


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.0f} MB"


def check_memory(node: Node | None, needed: int, what: str, fix: str) -> None:
    """SceneError at ``node`` when ``needed`` bytes exceed what the machine has."""
    have = machine_memory()
    if have is None or needed <= have:
        return
    raise error_at(node, f"{what} needs at least {_gb(needed)} of memory, but this machine "
                   f"has {_gb(have)}", fix)


def check_particles(node: Node, count: int, dim: int, precision: str = "f32") -> None:
    """Bound ``particles.count`` (at f32, before the precision is known: a lower bound)."""
    per = particle_bytes(dim, precision)
    have = machine_memory()
    most = f" (at most about {have // per:,} here)" if have else ""
    check_memory(node, count * per, f"'particles.count' is {count:,}: a run of that many "
                 f"{dim}-D particles", f"Use fewer particles{most}")


def check_frames(node: Node | None, count: int, dim: int, precision: str, frames: int,
                 arrays: int, xyz: bool, grid_bytes: int = 0) -> None:
    """Bound the frames a run keeps: ``frames`` saved moments of ``arrays`` arrays each, and
    ``grid_bytes`` of grid fields each (those a grid keeps in frames)."""
    needed = count * particle_bytes(dim, precision) + frames * (frame_bytes(
        count, dim, precision, arrays, xyz) + grid_bytes)
    what = f"saving {frames:,} frames" + (f" of {count:,} particles" if count else "") + \
        (f"{' and' if count else ' of'} the grids' fields" if grid_bytes else "")
    check_memory(node, needed, what, "Save fewer frames: raise 'outputs.every' (or lower "
                 "'steps'), or turn off outputs you do not need (velocities, forces, xyz; "
                 "'frames: false' on a grid field)")


THERMO_ROW_BYTES = 280  # a tuple of 7 Python floats: what one thermo.csv row holds in memory


def check_thermo(node: Node | None, rows: int) -> None:
    """Bound the thermo.csv rows a run keeps (in memory, written whole at each flush)."""
    check_memory(node, rows * THERMO_ROW_BYTES, f"writing {rows:,} thermo.csv rows",
                 "Raise 'thermo' (or --thermo N) so that fewer rows are written")
