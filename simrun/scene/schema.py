"""Typed scene model (schema version 1). Built only by ``simrun.scene.load``.

Every dataclass can turn itself back into plain data (``to_dict``) so a run directory keeps
the fully resolved scene (defaults filled in, overrides applied, paths absolute).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
PRECISIONS = ("f32", "f64")
INTEGRATORS = ("symplectic_euler", "velocity_verlet")
BOUNDARIES = ("none", "reflect", "periodic")
INITIAL_TYPES = ("random", "lattice", "random_walk", "file")
TOPOLOGY_KINDS = {"bonds": 2, "angles": 3, "dihedrals": 4, "triangles": 3}


@dataclass(frozen=True)
class KernelRef:
    """``kernels/<module>.py:<kernel>``: the module file (resolved) and the kernel's name."""

    path: Path
    name: str
    where: str  # file:line:col of the reference, for errors found when the module is imported

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


@dataclass(frozen=True)
class EnergyTerm:
    kernel: KernelRef
    params: dict[str, float | int]
    where: str
    # file:line:col of each parameter's key and value, for errors found with the kernel
    param_where: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": str(self.kernel), "params": dict(self.params)}


@dataclass(frozen=True)
class StepKernels:
    """Kernels that replace the integrator (e.g. MPM p2g/grid/g2p), called in order each step."""

    kernels: tuple[KernelRef, ...]
    params: dict[str, float | int]
    param_where: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kernels": [str(k) for k in self.kernels], "params": dict(self.params)}


@dataclass(frozen=True)
class Objective:
    """What `simrun grad` differentiates: a built-in energy or a kernel accumulating into L,
    at the final state (`end`) or averaged over every step's state (`mean`)."""

    builtin: str | None  # kinetic | potential | total
    kernel: KernelRef | None
    params: dict[str, float | int]
    at: str  # end | mean
    where: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"builtin": self.builtin} if self.builtin else {
            "kernel": str(self.kernel), "params": dict(self.params)}
        data["at"] = self.at
        return data


OPTIMIZERS = ("adam", "sgd", "lbfgs")


@dataclass(frozen=True)
class Optimize:
    """What `simrun optimize` minimises the objective over, and how. `where` holds the
    file:line:col of each parameter (for errors found once the kernels are loaded)."""

    parameters: tuple[str, ...]
    optimizer: str  # adam | sgd | lbfgs
    iterations: int
    lr: float = 0.05
    clip: float | None = None  # global gradient-norm clipping (adam, sgd)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    tolerance_loss: float | None = None
    tolerance_gradient: float | None = None
    betas: tuple[float, float] = (0.9, 0.999)  # adam
    momentum: float = 0.0  # sgd
    nesterov: bool = False  # sgd
    where: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"parameters": list(self.parameters),
                                "optimizer": self.optimizer, "iterations": self.iterations}
        if self.optimizer != "lbfgs":
            data["lr"] = self.lr
        if self.clip is not None:
            data["clip"] = self.clip
        if self.bounds:
            data["bounds"] = {k: [_bound(lo), _bound(hi)] for k, (lo, hi) in self.bounds.items()}
        tol = {k: v for k, v in (("loss", self.tolerance_loss),
                                 ("gradient", self.tolerance_gradient)) if v is not None}
        if tol:
            data["tolerance"] = tol
        if self.optimizer == "adam":
            data["betas"] = list(self.betas)
        if self.optimizer == "sgd":
            data.update(momentum=self.momentum, nesterov=self.nesterov)
        return data


def _bound(value: float) -> float | None:
    return None if np.isinf(value) else value


@dataclass(frozen=True)
class Particles:
    count: int
    dim: int
    masses: tuple[float, ...]  # one per particle

    def to_dict(self) -> dict[str, Any]:
        uniform = len(set(self.masses)) == 1
        mass: Any = self.masses[0] if uniform else list(self.masses)
        return {"count": self.count, "dim": self.dim, "mass": mass}


@dataclass(frozen=True)
class Initial:
    """How positions (``type`` + its options) and velocities start."""

    type: str
    options: dict[str, Any]  # type-specific, already validated (paths absolute)
    velocity: tuple[float, ...]
    temperature: float
    exact_temperature: bool = False  # scale the thermal velocities to exactly T (as LAMMPS)

    def to_dict(self) -> dict[str, Any]:
        data = {"type": self.type, **self.options}
        data["velocity"] = list(self.velocity)
        data["temperature"] = self.temperature
        if self.exact_temperature:
            data["exact_temperature"] = True
        return data


@dataclass(frozen=True)
class Topology:
    """Integer index arrays, one row per bond/angle/dihedral/triangle; ``spec`` as written."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)

    def get(self, kind: str) -> np.ndarray | None:
        return self.arrays.get(kind)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.spec)


@dataclass(frozen=True)
class Integrator:
    type: str
    damping: float  # rate (1/time): dv/dt = F/m - damping * v

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "damping": self.damping}


@dataclass(frozen=True)
class Boundary:
    type: str
    low: tuple[float, ...] | None
    high: tuple[float, ...] | None

    def to_dict(self) -> dict[str, Any]:
        if self.type == "none":
            return {"type": "none"}
        return {"type": self.type, "low": list(self.low or ()), "high": list(self.high or ())}


@dataclass(frozen=True)
class Neighbors:
    """A Verlet list for pair kernels: pairs within ``cutoff + skin``, rebuilt when a particle
    has moved more than ``skin / 2``; ``max_neighbors`` per particle (None: from density)."""

    cutoff: float
    skin: float
    max_neighbors: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"cutoff": self.cutoff, "skin": self.skin}
        if self.max_neighbors is not None:
            data["max_neighbors"] = self.max_neighbors
        return data


@dataclass(frozen=True)
class Outputs:
    every: int
    positions: bool = True
    velocities: bool = True
    forces: bool = False
    energies: bool = True
    xyz: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k)
                for k in ("every", "positions", "velocities", "forces", "energies", "xyz")}


@dataclass(frozen=True)
class Scene:
    """A validated scene: everything the stepper needs, nothing it must re-check."""

    source: Path
    name: str
    precision: str
    seed: int
    particles: Particles
    initial: Initial
    energy: tuple[EnergyTerm, ...]
    topology: Topology
    integrator: Integrator
    dt: float
    steps: int
    boundary: Boundary
    outputs: Outputs
    step_kernels: StepKernels | None = None
    version: int = SCHEMA_VERSION
    objective: Objective | None = None
    optimize: Optimize | None = None
    neighbors: Neighbors | None = None

    def kernel_refs(self) -> list[KernelRef]:
        """Every kernel the scene names: energy terms, then step kernels."""
        refs = [term.kernel for term in self.energy]
        return refs + list(self.step_kernels.kernels if self.step_kernels else ())

    def to_dict(self) -> dict[str, Any]:
        """The resolved scene as plain data; loading it again gives an equal scene."""
        data: dict[str, Any] = {
            "version": self.version,
            "name": self.name,
            "precision": self.precision,
            "seed": self.seed,
            "particles": self.particles.to_dict(),
            "initial": self.initial.to_dict(),
            "energy": [term.to_dict() for term in self.energy],
        }
        if self.topology.spec:
            data["topology"] = self.topology.to_dict()
        if self.step_kernels is None:
            data["integrator"] = self.integrator.to_dict()
        else:
            data["step_kernels"] = self.step_kernels.to_dict()
        data.update(dt=self.dt, steps=self.steps, boundary=self.boundary.to_dict(),
                    outputs=self.outputs.to_dict())
        if self.neighbors is not None:
            data["neighbors"] = self.neighbors.to_dict()
        if self.objective is not None:
            data["objective"] = self.objective.to_dict()
        if self.optimize is not None:
            data["optimize"] = self.optimize.to_dict()
        return data
