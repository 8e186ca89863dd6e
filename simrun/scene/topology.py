"""Topology generators: chains (polymers) and triangulated grids (FEM / MPM meshes).

Lattice particles are numbered ``index(i, j) = i * ny + j`` (x-major), the numbering used by
Taichi's mpm_lagrangian_forces example; the grid generators follow it.
"""

from __future__ import annotations

import numpy as np

GENERATORS = {"bonds": ("chain", "grid"), "angles": ("chain",), "dihedrals": ("chain",),
              "triangles": ("grid",)}


def chain(count: int, arity: int) -> np.ndarray:
    """Consecutive runs along one chain: bonds (i, i+1), angles (i..i+2), dihedrals (i..i+3)."""
    rows = max(count - arity + 1, 0)
    base = np.arange(rows, dtype=np.int32)[:, None]
    return base + np.arange(arity, dtype=np.int32)[None, :]


def grid_triangles(nx: int, ny: int) -> np.ndarray:
    """Two counter-clockwise triangles per lattice cell of an ``nx`` x ``ny`` particle grid."""
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()          # (i, j)
    b = ((i + 1) * ny + j).ravel()    # (i+1, j)
    c = (i * ny + j + 1).ravel()      # (i, j+1)
    d = ((i + 1) * ny + j + 1).ravel()  # (i+1, j+1)
    lower = np.stack([a, b, c], axis=1)
    upper = np.stack([c, b, d], axis=1)
    tris = np.empty((2 * len(a), 3), dtype=np.int32)
    tris[0::2] = lower
    tris[1::2] = upper
    return tris


def grid_bonds(nx: int, ny: int) -> np.ndarray:
    """The unique edges of ``grid_triangles`` (a mass-spring mesh)."""
    tris = grid_triangles(nx, ny)
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    edges = np.sort(edges, axis=1)
    return np.unique(edges, axis=0).astype(np.int32)


def generate(kind: str, generator: str, count: int, lattice_shape: tuple[int, ...] | None
             ) -> np.ndarray:
    """Build ``kind`` rows with ``generator``; grid generators need a 2-D lattice shape."""
    if generator == "chain":
        return chain(count, {"bonds": 2, "angles": 3, "dihedrals": 4}[kind])
    if lattice_shape is None or len(lattice_shape) != 2:
        raise ValueError("grid topology needs a 2-D lattice")
    nx, ny = lattice_shape
    return grid_triangles(nx, ny) if kind == "triangles" else grid_bonds(nx, ny)
