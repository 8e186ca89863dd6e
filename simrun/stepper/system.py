"""The simulated system: simrun.lang fields for one scene, its bound kernels, and forces.

Forces are never hand-written: ``forces()`` runs every energy term under
``ti.ad.Tape(loss=U)`` and returns F = -dU/dx read from ``x.grad``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import simrun.lang as ti
from simrun.lang.api import runtime
from simrun.lang.config import bounds_checks, current_device, floats_ordered
from simrun.scene import Scene, SceneError
from simrun.scene.npz import npz_headers
from simrun.scene.species import type_ids
from simrun.stepper.binding import (
    BOX_NAMES,
    BoundKernel,
    KernelContext,
    bind,
    box_values,
    find_kernel,
    load_module,
    parameter_names,
)
from simrun.stepper.energy import EnergyTerms
from simrun.stepper.grids import grid_fields, grid_values
from simrun.stepper.neighbors import NeighborList, NeighborListOverflow
from simrun.stepper.pairs import list_cutoffs, pair_fields
from simrun.stepper.roles import check_roles
from simrun.stepper.thermostats import thermostat_fields
from simrun.stepper.threads import job_threads
from simrun.stepper.validate import validate_params

# `step`: the step index, for controller (and objective) kernels; `species`: each
# particle's type index, for pair kernels over species (stepper/pairs.py)
BASE_NAMES = ("x", "v", "m", "x0", "U", "dt", "step", "bonds", "angles", "dihedrals",
              "triangles", "neighbors", "species", *BOX_NAMES)
NEIGHBORS_BUILT_AT = "neighbors:built_at"  # state.npz: where the list was last built


class System:
    """Fields and kernels of a scene, after ``ti.init`` (one System per process at a time).

    ``deterministic`` (the default, for every job: run, grad, check, optimize) is the
    engine's policy for float adds into shared field entries: in an order fixed by the data,
    so a scene and seed give the same bits on any number of threads and on every run
    (``ti.init(deterministic=True)``; bench/README.md, "Reproducible by default"). None:
    as the job asks (``simrun.lang.config.ordered_floats``: --no-reproducible)."""

    def __init__(self, scene: Scene, x0: np.ndarray, threads: int | None = None,
                 deterministic: bool | None = None, debug: bool = False) -> None:
        self.ti = ti
        self.scene = scene
        self.fp = ti.f32 if scene.precision == "f32" else ti.f64
        self.np_dtype = np.float32 if scene.precision == "f32" else np.float64
        arch = ti.cuda if current_device() == "cuda" else ti.cpu  # --device (cli/common.py)
        options: dict[str, Any] = {"arch": arch, "default_fp": self.fp,
                                   "random_seed": scene.seed,
                                   "deterministic": floats_ordered() if deterministic is None
                                   else deterministic,
                                   "debug": debug or bounds_checks()}
        if arch == ti.cpu:  # one thread for a step too small to share (threads.py)
            options["cpu_max_num_threads"] = job_threads(scene, threads)
        elif threads:
            options["cpu_max_num_threads"] = threads
        ti.init(**options)
        self.threads = options.get("cpu_max_num_threads") or runtime().num_threads
        self._make_fields(np.asarray(x0))
        self.extra: dict[str, Any] = {}
        self.scratch: set[str] = set()  # extra fields each step overwrites before reading
        validate_params(scene, fp=self.fp)
        self._allocate_module_fields()
        self.extra.update(grid_fields(scene, self.fp, self.np_dtype, self.extra))
        self.extra.update(thermostat_fields(scene))  # a thermostat's carried state
        self.load_fields({name: self._read_field(path, name, scene.fields_where.get(name))
                          for name, path in scene.fields.items()}, scene.fields_where)
        self._pair_fields = [pair_fields(self, term) for term in scene.energy]
        cutoffs = None if self.neighbor_list is None else list_cutoffs(self)
        if cutoffs is not None:  # each pair within its own cutoff + skin
            self.neighbor_list.by_type(type_ids(scene.particles.species), cutoffs)
        self.energy = [self._bind_term(i) for i in range(len(scene.energy))]
        self._terms: EnergyTerms | None = None  # self.energy resolved (energy_terms)
        self._box_grad: tuple[list[BoundKernel], dict[str, Any]] | None = None
        self._box_terms: EnergyTerms | None = None
        self.step_kernels = self._bind_step_kernels(scene.step_kernels)
        self.step_field = ti.field(ti.i32, shape=())  # the controller's step index
        self.controller = [self._reading_step(b) for b in
                           self._bind_step_kernels(scene.controller, {"step": 0})]
        self._step_at = [parameter_names(k.kernel).index("step")
                         if "step" in parameter_names(k.kernel) else None
                         for k in self.controller]
        check_roles(self, self._objective_args())

    def _objective_args(self) -> list[str]:
        obj = self.scene.objective
        if obj is None or obj.kernel is None:
            return []
        return parameter_names(find_kernel(obj.kernel, load_module(obj.kernel.path)))

    def _make_fields(self, x0: np.ndarray) -> None:
        ti, p = self.ti, self.scene.particles
        self.x = ti.Vector.field(p.dim, dtype=self.fp, shape=p.count, needs_grad=True)
        self.v = ti.Vector.field(p.dim, dtype=self.fp, shape=p.count)
        self.x0 = ti.Vector.field(p.dim, dtype=self.fp, shape=p.count)
        self.m = ti.field(dtype=self.fp, shape=p.count)
        self.U = ti.field(dtype=self.fp, shape=(), needs_grad=True)
        self.x0_np = x0.astype(self.np_dtype)
        # inertial masses m * mvv2e: F/m is then LAMMPS's ftm2v F/m (simrun.scene.units)
        self.masses = (np.asarray(p.masses, float) * self.scene.constants.mvv2e).astype(
            self.np_dtype)
        self.x0.from_numpy(self.x0_np)
        self.x.from_numpy(self.x0_np)
        self.m.from_numpy(self.masses)
        self.species = ti.field(dtype=ti.i32, shape=p.count)  # type index; all 0 without
        if p.species:
            self.species.from_numpy(type_ids(p.species))
        self.box = box_values(ti, self.scene.boundary, p.dim, self.fp)
        spec = self.scene.neighbors
        self.neighbor_list = None if spec is None else NeighborList(
            spec.cutoff, spec.skin, self.x0_np, self.scene.boundary, self.fp, self.box,
            spec.max_neighbors)
        self.topology: dict[str, Any] = {}
        for kind, rows in self.scene.topology.arrays.items():
            f = ti.field(dtype=ti.i32, shape=rows.shape)
            f.from_numpy(np.ascontiguousarray(rows, dtype=np.int32))
            self.topology[kind] = f

    def _module_params(self, path) -> dict[str, float | int]:
        merged: dict[str, float | int] = {}
        for term in self.scene.energy:
            if term.kernel.path == path:
                merged.update(term.params)
        for sk in (self.scene.step_kernels, self.scene.controller):
            if sk is not None and any(ref.path == path for ref in sk.kernels):
                merged.update(sk.params)
        return merged

    def _allocate_module_fields(self) -> None:
        named_at = {}  # each module's first reference in the scene, for its errors
        for ref in self.scene.kernel_refs():
            named_at.setdefault(ref.path, ref.where)
        for path, where in named_at.items():
            hook = getattr(load_module(path), "allocate", None)
            if hook is None:
                continue
            p = self.scene.particles
            ctx = KernelContext(p.count, p.dim, self.fp, self.np_dtype, self.x0_np, self.masses,
                                dict(self.scene.topology.arrays), self._module_params(path),
                                self.scene.bodies)
            try:
                fields = hook(ctx)
            except (ValueError, KeyError) as exc:
                raise SceneError(f"{where}: {path.name}'s allocate() rejected this scene: "
                                 f"{exc}. Check the scene's topology, parameters and bodies "
                                 "for this module.") from None
            except MemoryError:
                raise SceneError(f"{where}: {path.name}'s allocate() ran out of memory making "
                                 "its fields. Lower the sizes the scene's parameters give "
                                 "this module (a grid's cells, a count).") from None
            for name, f in fields.items():
                if name in BASE_NAMES or name in self.extra:
                    raise SceneError(f"{path}: allocate() returns a field named '{name}', which "
                                     "is already taken. Rename it in the kernel module.")
                self.extra[name] = f
            self.scratch |= ctx.scratch_names(fields)

    def load_fields(self, values: dict[str, np.ndarray], places: dict[str, str] | None = None
                    ) -> None:
        """Set allocated fields (trained weights: the scene's `fields:`, or an optimiser's
        iterate); a name no module allocates or a wrong shape is a SceneError."""
        for name, value in values.items():
            at = (places or {}).get(name, str(self.scene.source))
            f = self.extra.get(name)
            if f is None:
                raise SceneError(f"{at}: 'fields.{name}': no kernel module of this scene "
                                 f"allocates a field '{name}' (they allocate: "
                                 f"{', '.join(sorted(self.extra)) or 'none'}). Fix the name.")
            shape = f.to_numpy().shape
            if np.shape(value) != shape:
                raise SceneError(f"{at}: 'fields.{name}' has shape {np.shape(value)} but the "
                                 f"module allocates shape {shape}. Save values of that shape.")
            f.from_numpy(np.ascontiguousarray(value, dtype=f.to_numpy().dtype))

    def render_shapes(self) -> dict[str, Any]:
        """Scenery for the pictures from the modules' optional ``render_shapes(params)`` hook:
        ``{"boxes": [[low, high], ...], "circles": [[x, y, r], ...]}`` (e.g. MPM walls), and
        ``"targets": [[x, y], ...]`` (an objective's goal), ``"particle_radius": r``; the
        objective's module gets the objective's params."""
        merged: dict[str, Any] = {"boxes": [], "circles": [], "targets": []}
        objective = self.scene.objective
        refs = self.scene.kernel_refs() + ([objective.kernel] if objective and
                                           objective.kernel else [])
        for path in dict.fromkeys(ref.path for ref in refs):
            hook = getattr(load_module(path), "render_shapes", None)
            if hook is None:
                continue
            params = dict(self._module_params(path))
            if objective is not None and objective.kernel and objective.kernel.path == path:
                params.update(objective.params)  # e.g. the target an objective aims at
            try:
                found = hook(params)
                for kind in ("boxes", "circles", "targets"):
                    merged[kind] += np.asarray(found.get(kind, []), dtype=float).tolist()
                if found.get("particle_radius") is not None:
                    merged["particle_radius"] = float(found["particle_radius"])
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise SceneError(f"{path}: render_shapes() failed: {type(exc).__name__}: "
                                 f"{exc}. It must return {{'boxes': [[low, high], ...], "
                                 "'circles': [[x, y, r], ...]}.") from None
        return {kind: rows for kind, rows in merged.items() if rows}

    def values(self) -> dict[str, Any]:
        """Everything a kernel argument can be bound to, except scene params (the list's
        ``cutoff`` is the default for a pair kernel's)."""
        listed = {} if self.neighbor_list is None else {
            "neighbors": self.neighbor_list.neighbors, "cutoff": self.neighbor_list.cutoff}
        return {"x": self.x, "v": self.v, "m": self.m, "x0": self.x0, "U": self.U,
                "species": self.species,
                "dt": self.scene.dt, **grid_values(self.scene), **self.box, **listed,
                **self.topology, **self.extra}

    def refresh_neighbors(self) -> bool:
        """Rebuild the neighbour list if a particle moved more than half the skin since it
        was built (call after x changes, before the energy kernels); True when rebuilt."""
        if self.neighbor_list is None:
            return False
        try:
            return self.neighbor_list.update(self.x)
        except NeighborListOverflow as exc:
            raise SceneError(f"{self.scene.source}: neighbors: {exc}") from None

    def _bind_term(self, index: int, box: dict[str, Any] | None = None) -> BoundKernel:
        term = self.scene.energy[index]
        module = load_module(term.kernel.path)
        kernel = find_kernel(term.kernel, module)
        defaults = getattr(module, "DEFAULTS", {}).get(term.kernel.name, {})
        return bind(term.kernel, kernel, {**self.values(), **(box or {}), **term.params,
                                          **self._pair_fields[index]}, defaults,
                    accumulator=("energy", "U"))

    def energy_with_box_gradient(self) -> tuple[list[BoundKernel], dict[str, Any]]:
        """The energy terms bound to a copy of the box that carries gradients (built once,
        compiled on first use): what the pressure differentiates."""
        if self._box_grad is None:
            p = self.scene.particles
            box = box_values(self.ti, self.scene.boundary, p.dim, self.fp, grad=True)
            self._box_grad = ([self._bind_term(i, box) for i in range(len(self.scene.energy))],
                              box)
        return self._box_grad

    def box_gradient_terms(self) -> EnergyTerms:
        """`energy_with_box_gradient`'s terms, resolved once."""
        if self._box_terms is None:
            self._box_terms = EnergyTerms(self.energy_with_box_gradient()[0], self.U, self.x,
                                          self.m, self.extra.values())
        return self._box_terms

    def energy_terms(self) -> EnergyTerms:
        """The energy terms as launches (value, gradient, H lambda), resolved once."""
        if self._terms is None:
            self._terms = EnergyTerms(self.energy, self.U, self.x, self.m, self.extra.values())
        return self._terms

    def rebind_energy(self, index: int, bound: BoundKernel) -> None:
        """Replace energy term `index` (e.g. by its twin reading parameters from fields);
        the terms are resolved again on next use."""
        self.energy[index] = bound
        self.reset_energy_terms()

    def reset_energy_terms(self) -> None:
        """Resolve the energy terms again on next use: after fields they touch got
        gradients or tangents (a gradient's set-up), which each evaluation then clears."""
        self._terms = None

    def pair_fields(self, index: int) -> dict[str, Any]:
        """The (types x types) fields of energy term `index`'s species parameters."""
        return self._pair_fields[index]

    def _bind_step_kernels(self, sk, extra: dict | None = None) -> list[BoundKernel]:
        if sk is None:
            return []
        found = [(ref, load_module(ref.path)) for ref in sk.kernels]
        return [bind(ref, find_kernel(ref, module), {**self.values(), **(extra or {}),
                                                     **sk.params},
                     getattr(module, "DEFAULTS", {}).get(ref.name, {}))
                for ref, module in found]

    def _reading_step(self, bound: BoundKernel) -> BoundKernel:
        """A controller kernel whose `step: ti.i32` is read from `step_field`, so that a
        native chain of steps moves it on between launches (a Python call writes its
        argument there): `run` and a gradient's sweeps launch this one compiled variant."""
        params = getattr(bound.kernel, "params", None)  # simrun.lang kernels
        step = next((p for p in params()[0] if p.name == "step"), None) if params else None
        if step is None or step.kind != "scalar" or step.dtype != ti.i32:
            return bound
        twin = bound.kernel.with_field_args(["step"])
        twin.field_args["step"] = self.step_field
        return BoundKernel(bound.ref, twin, bound.args)

    def compile_step_kernels(self) -> None:
        """Compile the step kernels without launching them (they would advance the state)."""
        for bound in self.step_kernels + self.controller:
            compile_only = getattr(bound.kernel, "prepare", None)  # simrun.lang kernels
            if compile_only is not None:
                compile_only(bound.args, "primal")

    def control(self, step: int) -> None:
        """Run the controller kernels at step index `step` (given to an argument named
        `step: ti.i32`, as objective kernels get it)."""
        for bound, at in zip(self.controller, self._step_at):
            if at is None:
                bound()
                continue
            args = list(bound.args)
            args[at] = int(step)
            bound.kernel(*args)

    # --- state -------------------------------------------------------------------------
    def forces(self) -> tuple[float, np.ndarray]:
        """Potential energy and F = -dU/dx at the current positions (autodiff)."""
        if not self.energy:
            return 0.0, np.zeros_like(self.x0_np)
        self.refresh_neighbors()
        terms = self.energy_terms()
        for grad in terms.touched_grads:
            grad.fill(0)
        if terms.usable():
            terms.run()
            return (float(self.U.host_values(write=False)[()]),
                    np.negative(self.x.grad.host_values(write=False)))
        with self.ti.ad.Tape(loss=self.U, clear_gradients=False):
            for kernel in self.energy:
                kernel()
        return float(self.U[None]), -self.x.grad.to_numpy()

    def forces_moved(self, x: np.ndarray, shift: np.ndarray) -> np.ndarray:
        """F at x + shift (every particle moved alike); the system is left at x with its
        forces there again, the same bits (a list rebuilt for the move is rebuilt at x)."""
        at = np.ascontiguousarray(x, dtype=self.np_dtype)
        try:
            self.x.from_numpy(np.ascontiguousarray(at + shift, dtype=self.np_dtype))
            return np.array(self.forces()[1], dtype=np.float64)
        finally:
            self.x.from_numpy(at)
            self.forces()

    def set_state(self, x: np.ndarray, v: np.ndarray) -> None:
        self.x.from_numpy(np.ascontiguousarray(x, dtype=self.np_dtype))
        self.v.from_numpy(np.ascontiguousarray(v, dtype=self.np_dtype))

    def get_state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x.to_numpy(), self.v.to_numpy()

    def extra_state(self) -> dict[str, np.ndarray]:
        """Arrays a resumed run needs beyond x and v: the modules' fields, and the positions
        the neighbour list was last built at (a list rebuilt elsewhere has the same pairs,
        but fast-math sums over its rows round differently)."""
        saved = {f"field:{name}": f.to_numpy() for name, f in self.extra.items()}
        if self.neighbor_list is not None and self.neighbor_list.built:
            saved[NEIGHBORS_BUILT_AT] = self.neighbor_list.x_ref.to_numpy()
        return saved

    def load_extra_state(self, arrays: dict[str, np.ndarray]) -> None:
        """Put back what ``extra_state`` saved; the list is rebuilt at its saved positions
        (call before ``set_state``: it uses x to build)."""
        for name, f in self.extra.items():
            key = f"field:{name}"
            if key in arrays:
                shape = f.to_numpy().shape  # a 0-D field comes back from state.npz as (1,)
                f.from_numpy(np.ascontiguousarray(arrays[key]).reshape(shape))
        built_at = arrays.get(NEIGHBORS_BUILT_AT)
        if self.neighbor_list is not None and built_at is not None:
            self.x.from_numpy(np.ascontiguousarray(built_at, dtype=self.np_dtype))
            self.refresh_neighbors()

    def _read_field(self, path, name: str, at: str | None) -> np.ndarray:
        """A `fields:` array, its shape checked against the allocated field from the .npz
        header first, so a file that would inflate to more than the field is never read."""
        f, header = self.extra.get(name), npz_headers(path).get(name)
        if f is not None and header is not None and header.shape != f.to_numpy().shape:
            raise SceneError(f"{at or self.scene.source}: 'fields.{name}' has shape "
                             f"{header.shape} but the module allocates shape "
                             f"{f.to_numpy().shape}. Save values of that shape.")
        with np.load(path) as data:
            return data[name]
