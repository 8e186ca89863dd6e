"""Typed scene model (schema version 2). Built only by ``simrun.scene.load``.

Every dataclass can turn itself back into plain data (``to_dict``) so a run directory keeps
the fully resolved scene (defaults filled in, overrides applied, paths absolute).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simrun.scene.bodies import Bodies
from simrun.scene.load_grids import Grid, grids_to_dict
from simrun.scene.species import pairs_to_dict, species_to_data
from simrun.scene.units import Constants, constants_of

SCHEMA_VERSION = 2
# Version 2 (simrun grad through step kernels): objective kernels may take the step index
# (`step`), and `--wrt` / `optimize.parameters` take `step_kernels.params.<name>` and
# `fields.<name>`; a `controller:` section (kernels run each step before the forces) and a
# `fields:` section (start values of allocated fields from .npz files, as best.yaml writes
# trained ones). Every version-1 file means the same under version 2, so both load (old run
# folders keep `version: 1` in their scene.yaml and still render and resume).
READABLE_VERSIONS = (1, 2)
PRECISIONS = ("f32", "f64")
THERMOSTATS = ("langevin", "nose_hoover", "rescale", "csvr")  # NVT: simrun/stepper/thermostats.py
INTEGRATORS = ("symplectic_euler", "velocity_verlet") + THERMOSTATS
BOUNDARIES = ("none", "reflect", "periodic")
INITIAL_TYPES = ("random", "lattice", "random_walk", "file")
VELOCITY_DISTRIBUTIONS = ("gaussian", "uniform")  # LAMMPS velocity create dist gaussian/uniform
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
    # parameters given per species pair: name -> symmetric (types x types) values, with
    # mixing applied (scene/species.py); `types` names the rows, `pair_where` where each
    # pair's value was written
    pairs: dict[str, tuple[tuple[float, ...], ...]] = field(default_factory=dict)
    types: tuple[str, ...] = ()
    pair_where: dict[str, dict[tuple[int, int], tuple[str, str]]] = field(
        default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": str(self.kernel),
                "params": {**self.params, **pairs_to_dict(self.pairs, self.types)}}


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
    # ensemble averages to match (`simrun optimize` by reweighting): name -> {"value": v,
    # "weight": w} for pressure / potential / potential_per_particle (and "error": e where
    # given), {"file": csv, "weight": w} for rdf; the loss is sum w (<O> - target)^2 (g(r):
    # the mean over its bins)
    targets: dict[str, dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.targets is not None:
            return {"targets": {k: {n: str(v) if isinstance(v, Path) else v
                                    for n, v in t.items()} for k, t in self.targets.items()},
                    "at": self.at}
        data: dict[str, Any] = {"builtin": self.builtin} if self.builtin else {
            "kernel": str(self.kernel), "params": dict(self.params)}
        data["at"] = self.at
        return data


OPTIMIZERS = ("adam", "sgd", "lbfgs")
SCHEDULES = ("constant", "cosine", "step", "exponential")


@dataclass(frozen=True)
class Schedule:
    """How the learning rate changes over a training (simrun.optimize.schedules)."""

    type: str = "constant"  # constant | cosine | step | exponential
    warmup: int = 0  # steps of linear warm-up before the decay
    min_lr: float = 0.0  # cosine: the rate it ends at
    every: int = 1  # step: decay every this many steps
    gamma: float = 0.5  # step, exponential: the decay factor

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        if self.warmup:
            data["warmup"] = self.warmup
        if self.type == "cosine":
            data["min_lr"] = self.min_lr
        if self.type == "step":
            data["every"] = self.every
        if self.type in ("step", "exponential"):
            data["gamma"] = self.gamma
        return data


@dataclass(frozen=True)
class Optimize:
    """What `simrun optimize` minimises the objective over, and how. `where` holds the
    file:line:col of each parameter (for errors found once the kernels are loaded)."""

    parameters: tuple[str, ...]
    optimizer: str  # adam | sgd | lbfgs
    iterations: int
    lr: float = 0.05
    clip: float | None = None  # global gradient-norm clipping (adam, sgd)
    clip_epsilon: float = 0.0  # the clip scales by min(1, clip / (|g| + clip_epsilon))
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    tolerance_loss: float | None = None
    tolerance_gradient: float | None = None
    betas: tuple[float, float] = (0.9, 0.999)  # adam
    momentum: float = 0.0  # sgd
    nesterov: bool = False  # sgd
    schedule: Schedule = field(default_factory=Schedule)  # adam, sgd
    weight_decay: float = 0.0  # adam: decoupled (AdamW); sgd: L2 added to the gradient
    normalize: bool = False  # sgd: step along g / |g| (DiffTaichi's mass_spring update)
    # ensemble targets: the reweighting fit's runs keep a frame every N steps (None: about
    # 2000 frames a run; a large system's g(r) needs far fewer)
    every: int | None = None
    where: dict[str, str] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"parameters": list(self.parameters),
                                "optimizer": self.optimizer, "iterations": self.iterations}
        if self.optimizer != "lbfgs":
            data.update(lr=self.lr, schedule=self.schedule.to_dict(),
                        weight_decay=self.weight_decay)
        if self.clip is not None:
            data["clip"] = self.clip
        if self.clip_epsilon:
            data["clip_epsilon"] = self.clip_epsilon
        if self.every is not None:
            data["every"] = self.every
        if self.bounds:
            data["bounds"] = {k: [_bound(lo), _bound(hi)] for k, (lo, hi) in self.bounds.items()}
        tol = {k: v for k, v in (("loss", self.tolerance_loss),
                                 ("gradient", self.tolerance_gradient)) if v is not None}
        if tol:
            data["tolerance"] = tol
        if self.optimizer == "adam":
            data["betas"] = list(self.betas)
        if self.optimizer == "sgd":
            data.update(momentum=self.momentum, nesterov=self.nesterov, normalize=self.normalize)
        return data


def _bound(value: float) -> float | None:
    return None if np.isinf(value) else value


@dataclass(frozen=True)
class Particles:
    count: int
    dim: int
    masses: tuple[float, ...]  # one per particle
    species: tuple[str, ...] = ()  # one name per particle (trajectory.xyz); (): the default

    def to_dict(self) -> dict[str, Any]:
        uniform = len(set(self.masses)) == 1
        mass: Any = self.masses[0] if uniform else list(self.masses)
        data: dict[str, Any] = {"count": self.count, "dim": self.dim, "mass": mass}
        if self.species:  # written only when given, so older run folders still resume
            data["species"] = species_to_data(self.species)
        return data


@dataclass(frozen=True)
class Initial:
    """How positions (``type`` + its options) and velocities start."""

    type: str
    options: dict[str, Any]  # type-specific, already validated (paths absolute)
    velocity: tuple[float, ...]
    temperature: float
    exact_temperature: bool = False  # scale the thermal velocities to exactly T (as LAMMPS)
    velocity_distribution: str = "gaussian"  # of each thermal component; or "uniform"

    def to_dict(self) -> dict[str, Any]:
        data = {"type": self.type, **self.options}
        data["velocity"] = list(self.velocity)
        data["temperature"] = self.temperature
        if self.exact_temperature:
            data["exact_temperature"] = True
        if self.velocity_distribution != "gaussian":
            data["velocity_distribution"] = self.velocity_distribution
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
    """How a step advances x and v; thermostats (NVT) also carry their own parameters."""

    type: str
    damping: float  # rate (1/time): dv/dt = F/m - damping * v
    temperature: float | None = None  # thermostats: target T (k_B T = Scene.kT)
    friction: float | None = None  # langevin: gamma (1/time)
    tau: float | None = None  # nose_hoover: the thermostat's period; csvr: its relaxation time
    chain: int | None = None  # nose_hoover: number of chained thermostats
    seed: int | None = None  # langevin, csvr: the noise's seed (default: the scene's seed)
    every: int | None = None  # rescale: steps between rescalings

    @property
    def thermostat(self) -> bool:
        return self.type in THERMOSTATS

    def to_dict(self) -> dict[str, Any]:
        if not self.thermostat:
            return {"type": self.type, "damping": self.damping}
        data: dict[str, Any] = {"type": self.type}
        for name in ("temperature", "friction", "tau", "chain", "seed", "every"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data


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
    # kernels called each step before the forces (a robot's controller writing actuations)
    controller: StepKernels | None = None
    # start values of fields the kernel modules allocate: field name -> .npz file
    fields: dict[str, Path] = field(default_factory=dict)
    fields_where: dict[str, str] = field(default_factory=dict, compare=False)
    version: int = SCHEMA_VERSION
    objective: Objective | None = None
    optimize: Optimize | None = None
    thermo: int | None = None  # steps between thermo.csv rows; None: the frame cadence
    units: str = "reduced"  # a name of scene.units.CONSTANTS: k_B, mvv2e, nktv2p and labels
    grids: tuple[Grid, ...] = ()  # regular grids of fields (scene/load_grids.py)

    @property
    def thermo_every(self) -> int:
        return self.thermo or self.outputs.every

    @property
    def constants(self) -> Constants:
        """LAMMPS's k_B, mvv2e and nktv2p in the scene's ``units`` (all 1 in lj, reduced)."""
        return constants_of(self.units)

    @property
    def kT(self) -> float:
        """The thermostat's k_B T in energy units."""
        return self.constants.boltz * float(self.integrator.temperature)
    neighbors: Neighbors | None = None
    bodies: Bodies | None = None  # rigid boxes and springs (their centres are the particles)

    def kernel_refs(self) -> list[KernelRef]:
        """Every kernel the scene names: energy terms, step kernels, then the controller."""
        refs = [term.kernel for term in self.energy]
        return refs + list(self.step_kernels.kernels if self.step_kernels else ()) + \
            list(self.controller.kernels if self.controller else ())

    def to_dict(self) -> dict[str, Any]:
        """The resolved scene as plain data; loading it again gives an equal scene."""
        data: dict[str, Any] = {
            "version": self.version,
            "name": self.name,
            "precision": self.precision,
            "seed": self.seed,
        }
        if self.particles.count or not self.grids:  # a grid scene may have no particles
            data.update(particles=self.particles.to_dict(), initial=self.initial.to_dict())
        data["energy"] = [term.to_dict() for term in self.energy]
        if self.grids:
            data["grids"] = grids_to_dict(self.grids)
        if self.topology.spec:
            data["topology"] = self.topology.to_dict()
        if self.step_kernels is None:
            data["integrator"] = self.integrator.to_dict()
        else:
            data["step_kernels"] = self.step_kernels.to_dict()
        if self.controller is not None:
            data["controller"] = self.controller.to_dict()
        if self.fields:
            data["fields"] = {name: str(path) for name, path in self.fields.items()}
        data.update(dt=self.dt, steps=self.steps, boundary=self.boundary.to_dict(),
                    outputs=self.outputs.to_dict())
        if self.thermo is not None:
            data["thermo"] = self.thermo
        if self.units != "reduced":
            data["units"] = self.units
        if self.neighbors is not None:
            data["neighbors"] = self.neighbors.to_dict()
        if self.objective is not None:
            data["objective"] = self.objective.to_dict()
        if self.optimize is not None:
            data["optimize"] = self.optimize.to_dict()
        if self.bodies is not None:  # they give the particles and where they start
            del data["particles"]
            data["bodies"] = self.bodies.to_dict()
            if self.initial.type == "bodies":  # at the boxes' positions: velocities only
                data["initial"] = {k: v for k, v in data["initial"].items() if k != "type"}
            if self.particles.masses != self.bodies.masses(self.precision):  # set or trained
                data["particles"] = {"mass": self.particles.to_dict()["mass"]}
        return data
