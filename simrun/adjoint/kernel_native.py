"""The pieces of the native reverse step (integrated_native.py puts them in order): every
launch of a step resolved to a compiled variant and its scalar arguments, the snapshots a
replay takes, the seeding of the engine's reverse launches from the f64 adjoints, and H
G-bar through the energies. No Tape, no NumPy round trip of the adjoints, no per-launch
Python: a reverse step is one `Chain` call.

    replay: each launch saving the fields it overwrites that a launch of this step reads
        (the Tape's snapshots, whole fields)
    a stage's adjoint: grads seeded from the f64 adjoints (cast to the field's precision,
        as the Tape sweep seeds them), gradient launches in reverse order, each between two
        restores of its launch's snapshot (as the Tape), the f64 adjoints read back
    the forces' adjoint: G-bar through the energies by their forward-over-reverse launches
        (`DirectHVP`'s), H G-bar and the mixed derivatives added into the f64 adjoints
The controller's `step` argument is written into its launches' scalar arguments before
each call. Gradients equal the Tape sweep's to rounding (the same kernels on the same
values; only whole-field instead of region snapshots and the order of the parameter
adjoints' sums differ).
"""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.lang.autodiff.tape import access_of
from simrun.lang.fields import Field
from simrun.stepper import updates
from simrun.stepper.fieldstep import chainable, flat_index


@ti.kernel
def assign(src: ti.template(), dst: ti.template(), dtype: ti.template()):
    """dst = src, cast to dtype (a seed in the field's precision, an adjoint read in f64)."""
    for I in ti.grouped(src):
        dst[I] = ti.cast(src[I], dtype)


@ti.kernel
def accumulate(src: ti.template(), dst: ti.template(), dtype: ti.template()):
    """dst += src, cast to dtype."""
    for I in ti.grouped(src):
        dst[I] += ti.cast(src[I], dtype)


@ti.kernel
def adjoint_watch(ax: ti.template(), av: ti.template(), bad: ti.template()):
    """bad = 1 where an adjoint of x or v is NaN or Inf."""
    for i in ax:
        for c in ti.static(range(ax.n)):
            if ax[i][c] - ax[i][c] != 0 or av[i][c] - av[i][c] != 0:
                bad[None] = 1


@ti.kernel
def clear_loss(U: ti.template()):
    """U = 0 and dU/dU = 0, as DirectHVP.run starts."""
    U[None] = 0
    U.grad[None] = 0


@ti.kernel
def seed_loss(U: ti.template()):
    """dU/dU = 1 before the gradient launches."""
    U.grad[None] = 1


def _like(f, dtype) -> Field:
    """A field of f's shape and element shape in `dtype` (a snapshot or an f64 adjoint)."""
    return Field(dtype, f.shape, name=f"{f.name}.native", elem_shape=f.elem_shape)


class _Unchainable(Exception):
    """A launch the native sweep cannot make (the Tape sweep takes the scene)."""


def _resolve(kernel, args, mode: str = "primal") -> tuple:
    """(compiled variant, flat scalar arguments) of a launch in `mode`; _Unchainable where
    a chain cannot make it, or where the Tape would reverse a primal loop by loop (several
    loops, and fields read and written: `tape._grad_task_by_task`)."""
    if mode == "primal":
        found = chainable(kernel, args)
        if found is None:
            raise _Unchainable(kernel)
        compiled, flat = found
        acc = access_of(compiled)
        if len(compiled.fns) > 1 and acc.reads & acc.writes:
            raise _Unchainable(kernel)
    else:
        compiled, flat, arrays = kernel.prepare(args, mode)
        if arrays or compiled.uses_random or compiled.ndarray_slots:
            raise _Unchainable(kernel)
    return compiled, list(flat)


class KernelNative:
    """The launches of a trajectory's step and the pieces of its native reverse step (see
    the module docstring); `_Unchainable` where a launch cannot be chained (random numbers,
    ndarrays, a kernel without simrun.lang's `prepare`, an energy the Tape must replay, a
    kernel whose loops the Tape reverses one by one): the Tape sweep is used then."""

    writes_args = True  # prepare() writes every launch's scalar arguments for the sweep

    # ------------------------------------------------------------------ resolution
    def _resolve_launches(self, traj, model, system) -> None:
        self.step_at = []  # (compiled, flat list, index) of the controller's `step` arguments
        self.ctrl, ctrl_acc = [], []
        for bound in system.controller:
            compiled, flat = _resolve(bound.kernel, bound.args)
            at = flat_index(bound.kernel, "step")
            if at is not None:
                self.step_at.append((compiled, flat, at))
            self.ctrl.append((compiled, flat))
            ctrl_acc.append((bound, access_of(compiled)))
        self.forces = self._force_launches(traj, model, system)
        self.twins, twin_acc = [], []
        for tw in traj.twins:
            with traj.compiled_as_run(tw):
                compiled, flat = _resolve(tw.kernel, tw.args)
            self.twins.append((compiled, flat))
            twin_acc.append((tw, access_of(compiled)))
        self.field_values = [(f, f.data[()].copy()) for b in traj.twins + system.controller
                             for f in getattr(b.kernel, "field_args", {}).values()]
        energy_reads = set()
        for bound in system.energy:
            energy_reads |= access_of(bound.kernel.prepare(bound.args, "primal")[0]).reads
        ctrl_reads = set().union(*(a.reads for _, a in ctrl_acc))
        self.ctrl_snaps = self._snapshots(ctrl_acc, set())
        self.twin_snaps = self._snapshots(twin_acc, energy_reads | ctrl_reads)
        self.moving = traj.moving  # the fields a step writes
        self.ctrl_grads = [_resolve(b.kernel, b.args, "reverse") for b, _ in ctrl_acc]
        for (bound, _), (compiled, flat) in zip(ctrl_acc, self.ctrl_grads):
            at = flat_index(bound.kernel, "step")
            if at is not None:
                self.step_at.append((compiled, flat, at))
        self.twin_grads = []
        for tw, _ in twin_acc:
            with traj.compiled_as_run(tw):
                self.twin_grads.append(_resolve(tw.kernel, tw.args, "reverse"))

    def _force_launches(self, traj, model, system) -> list:
        """U and G = dU/dx as `System.forces` makes them, then G's field <- x.grad."""
        if not self.energy:
            traj.G.fill(0)  # the Tape sweep's G without energies: -F = 0
            return []
        system.forces()  # resolves system._direct
        direct = system._direct
        self.hvp = model.direct_hvp(lean=True)
        if direct is None or direct.calls is None or not self.hvp.usable():
            raise _Unchainable(direct)
        clear = [g for g in system._energy_grads() if g is not system.U.grad]
        launches = [_resolve(updates.zero, (g,)) for g in clear]
        launches.append(_resolve(updates.reset_loss, (system.U,)))
        launches += [(p, pflat) for _, p, pflat, _, _ in direct.calls]
        launches += [(g, gflat) for _, _, _, g, gflat in reversed(direct.calls)]
        launches.append(_resolve(assign, (system.x.grad, traj.G, self.fp)))
        return launches

    def _snapshots(self, launches: list, also_read: set) -> list[list]:
        """Per launch, [(field, its snapshot)] of the fields it overwrites that it, an earlier
        launch of the list, or `also_read` (what runs after the list's reverse) read."""
        read, out = set(also_read), []
        for _, acc in launches:
            read |= acc.reads
            keep = [f for f in acc.writes if f in read and getattr(f, "data", None) is not None]
            out.append([(f, _like(f, f.dtype)) for f in sorted(keep, key=lambda f: f.id)])
        return out

    def _adjoint_fields(self) -> None:
        """The f64 adjoints of the state, the masses, the fields and the parameters."""
        system, traj, f64 = self.system, self.traj, ti.f64
        self.ax, self.av = _like(system.x, f64), _like(system.v, f64)
        self.am = _like(system.m, f64)
        self.af = {n: _like(f, f64) for n, f in self.floats.items()}
        # (KEY, 0-D field, its f64 adjoint, d value / d KEY)
        self.step_params = [(key, f, Field(f64, ()), factor) for key, f, factor in
                            traj.scalars + [(k, f, 1.0) for k, f in traj.control_params]]
        self.energy_params = {key: (f, Field(f64, ())) for key, f in
                              traj.model.param_fields.items()}
        self.bad = ti.field(ti.i32, shape=())

    @staticmethod
    def _replay(launches: list, snaps: list) -> list:
        """Each launch after saving the fields it overwrites (its snapshots)."""
        plan = []
        for launch, saves in zip(launches, snaps):
            plan += [_resolve(assign, (f, s, f.dtype)) for f, s in saves] + [launch]
        return plan

    def _seed_and_reverse(self, state: list, grads: list, snaps: list) -> list:
        """Seed the grads from the f64 adjoints, reverse the launches, read them back."""
        R = _resolve
        plan = [R(assign, (adj, g, g.dtype)) for g, adj in state]
        for grad, snap in zip(reversed(grads), reversed(snaps)):
            restore = [R(assign, (s, f, f.dtype)) for f, s in snap]
            plan += restore + [grad] + restore  # a gradient launch may leave its primal moved
        plan += [R(assign, (g, adj, ti.f64)) for g, adj in state]
        return plan

    def _through_forces(self, G=None) -> list:
        """DirectHVP.run with x.dual = G-bar (energy=False), its results into the adjoints;
        G: the field the forces were copied into (the trajectory's G unless named)."""
        system, hvp, f64, R = self.system, self.hvp, ti.f64, _resolve
        G = self.traj.G if G is None else G
        plan = [R(updates.zero, (f,)) for f in hvp.zero_fields]
        plan.append(R(assign, (G.grad, system.x.dual, self.fp)))
        plan.append(R(clear_loss, (system.U,)))
        if not hvp.energy_free:
            plan += [(p, pflat) for p, pflat, _, _ in hvp.calls]
        plan.append(R(seed_loss, (system.U,)))
        plan += [(g, gflat) for _, _, g, gflat in reversed(hvp.calls)]
        plan += [R(accumulate, (system.x.grad.dual, self.ax, f64)),
                 R(accumulate, (system.m.grad.dual, self.am, f64))]
        plan += [R(accumulate, (f.grad.dual, self.af[n], f64)) for n, f in self.floats.items()
                 if getattr(f.grad.dual, "data", None) is not None]
        plan += [R(accumulate, (f.grad.dual, acc, f64)) for f, acc in self.energy_params.values()]
        plan.append(R(updates.zero, (system.x.dual,)))
        return plan

    # ------------------------------------------------------------------ state
    def prepare(self) -> None:
        """Before a gradient's steps: the launches' scalar arguments into their contexts and
        the parameters read from 0-D fields into those fields. Between two steps only the
        controller's `step` changes, and nothing else launches these kernels."""
        self.backward.set_args()
        stepper = self.traj.model.stepper  # the forward steps' (`run`'s) launches too
        for chain in (stepper.chain, stepper.stepped):
            if chain is not None:
                chain.set_args()
        if stepper.direct is not None:
            stepper.direct.set_field_args()
        for f, value in self.field_values:
            f.data[()] = value
        if self.energy:
            self.hvp.set_field_args()

    def _set_step(self, k: int) -> None:
        for compiled, flat, at in self.step_at:  # flat: the list the chains launch with
            flat[at] = k
            self.backward.set_args(compiled)

    def load(self, state) -> None:
        """x, v and the fields a step writes from a stored state."""
        system = self.system
        system.set_state(state.x, state.v)
        for n, f in self.moving.items():
            f.from_numpy(state.fields[n])

    # ------------------------------------------------------------------ adjoints
    def push(self, adj) -> None:
        self.ax.from_numpy(adj.x)
        self.av.from_numpy(adj.v)
        self.am.from_numpy(adj.mass)
        for n, a in self.af.items():
            a.from_numpy(np.asarray(adj.fields[n], float))
        for acc in self._param_adjoints():
            acc.data[()] = 0.0

    def _param_adjoints(self) -> list:
        return [acc for _, _, acc, _ in self.step_params] + \
            [acc for _, acc in self.energy_params.values()]

    def pull(self, adj) -> None:
        """The fields into `adj` (parameter adjoints added to what it held at push)."""
        adj.x, adj.v, adj.mass = self.ax.to_numpy(), self.av.to_numpy(), self.am.to_numpy()
        adj.fields = {n: a.to_numpy() for n, a in self.af.items()}
        for key, _, acc, factor in self.step_params:
            value = factor * float(acc.data[()])
            if key == "dt":
                adj.dt += value
            elif key == "integrator.damping":
                adj.damping += value
            else:
                adj.add_params({key: value})
            acc.data[()] = 0.0
        for key, (_, acc) in self.energy_params.items():
            adj.add_params({key: float(acc.data[()])})
            acc.data[()] = 0.0

    def begin(self, end) -> None:
        """Before the first reverse step (its end state loaded): nothing to do here."""

    def finish(self, state0) -> bool:
        """After the last reverse step: nothing left here; False if not finite."""
        return True

    def reverse_step(self, state, k: int) -> bool:
        """adj (in the fields) from after step k to before it; False when it is not finite."""
        self.load(state)
        self._set_step(k)
        self.bad.data[()] = 0
        self.backward.run(1, set_args=False)
        return not self.bad.data[()]
