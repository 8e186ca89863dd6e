"""The reverse step of a scene's trajectory (trajectory.py): `run`'s step as launches, and the
engine's reverse of them, put in order once and made as one native call (or one by one:
stepper/launches.py, which also drops the copies that repeat what a field holds and fuses
adjacent ones). No Tape, but the Tape's derivation (lang/autodiff/recording.py), and no
NumPy round trip of the adjoints.

    replay: each launch saving the fields it overwrites that a launch of this step reads
        (the Tape's snapshots, whole fields)
    a stage's adjoint: grads seeded from the f64 adjoints (cast to the field's precision),
        gradient launches in reverse order, each between two restores of its launch's
        snapshot, the f64 adjoints read back
    the forces' adjoint: G-bar through the energies by their forward-over-reverse launches
        (`HessianVector`'s), H G-bar and the mixed derivatives added into the f64 adjoints

Without a controller (the forces at x_(k+1) that the second stage of step k reads are then
those the first stage of step k + 1 reads, bit for bit) the step is folded:
    G <- dU/dx at x_k (the stored state's -F), G2 holds dU/dx at x_(k+1) (kept from the step
        reversed just before); replay: first stage; [second stage]
    [the second stage's adjoint -> G2-bar]; (G2-bar + pending) through the forces at
        x_(k+1), one H lambda per step; the first stage's adjoint; pending <- G-bar
    the scalar parameters' adjoints (h = factor * dt); G2 <- G; NaN watch.
The pending G-bar of step 0 goes through the forces at x_0 after the sweep (`finish`).
No forces are evaluated in a folded reverse step: the stored states carry them.

With a controller each stage gets its own force evaluation and H lambda:
    replay: controller(k); forces -> G; first stage; [forces -> G2; second stage]
    [the second stage's adjoint; G2's through the forces at x_(k+1)]
    the first stage's adjoint; G's through the forces at x_k
    the controller's adjoint; the scalar parameters' adjoints; NaN watch.
The controller's `step` argument is written into its launches' arguments before each step.
The forward steps are the trajectory's own (`run`'s stepper)."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.adjoint import policy
from simrun.lang.autodiff.recording import Recording, read_by
from simrun.lang.fields import Field
from simrun.stepper import updates
from simrun.stepper.launches import (
    Rows,
    StepCall,
    access,
    accumulate,
    adjoint_watch,
    assign,
    fused_copies,
    like,
    resolve,
    without_repeated_copies,
)
from simrun.stepper.program import CONTROLLER, FORCES


class ReverseStep:
    """The launches of a trajectory's step and its reverse step (see the module docstring)."""

    def __init__(self, traj) -> None:
        self.traj = traj
        model, system = traj.model, traj.system
        self.system, self.fp, self.floats = system, system.fp, traj.floats
        self.energy = bool(system.energy)
        if self.energy:  # the forces and H lambda as `run` compiles them (fast-math)
            system.forces()
            model.hessian_vector(lean=True)
        self._resolve_launches(traj, model, system)  # each as `run` compiles it
        self.folded = self._foldable()
        native = policy.current().native
        if self.folded:  # the launches of a reverse step, made by the program (program.py)
            self.pending = like(traj.G, self.fp)
            self.backward = fused_copies(without_repeated_copies(self._folded_plan()))
            self.last = Rows(self._last_forces(), native)
        else:
            self.backward = fused_copies(without_repeated_copies(self._reverse_plan()))

    # ------------------------------------------------------------------ resolution
    def _resolve_launches(self, traj, model, system) -> None:
        """Each launch as `run` compiles it, recorded with what it saves (lang/autodiff's
        Recording, as a Tape records): the controller's; then the stages', which also save
        what the energies and the controller read (their reverses run after the stages')."""
        ctrl_acc = [access(b) for b in system.controller]
        twin_acc = []
        for tw in traj.twins:
            with traj.compiled_as_run(tw):
                twin_acc.append(access(tw))
        ctrl = [self._with_step(b, "primal") for b in system.controller]
        self.forces = self._force_launches(traj, model, system)
        twins = []
        for tw in traj.twins:
            with traj.compiled_as_run(tw):
                twins.append(resolve(tw.kernel, tw.args))
        energy = [access(b) for b in system.energy]
        self.energy_reads = read_by(energy)
        self.ctrl = Recording(set())
        self._record(self.ctrl, ctrl, ctrl_acc)
        self.stages, recording = [], Recording(read_by(energy + ctrl_acc))
        for G, stage in traj.stages:  # the stages' launches in order: twins[start:end]
            start = sum(len(r.entries) for r, _ in self.stages)
            end = start + len(stage)
            self._record(recording, twins[start:end], twin_acc[start:end])
            self.stages.append((recording, G))
            recording = recording.then()
        self.moving = traj.moving  # the fields a step writes
        for entry, bound in zip(self.ctrl.entries, system.controller):
            entry.gradient = self._with_step(bound, "reverse")
        entries = [entry for r, _ in self.stages for entry in r.entries]
        for entry, tw in zip(entries, traj.twins):
            with traj.compiled_as_run(tw):
                entry.gradient = resolve(tw.kernel, tw.args, "reverse")
        # what the reverse launches read from 0-D fields, as their resolution wrote it (a
        # primal launch takes a float one as an argument)
        self.field_values = traj.scalar_field_values()

    @staticmethod
    def _record(recording: Recording, launches: list, accesses: list) -> None:
        """The launches into `recording`, each saving into fields of its own."""
        for launch, acc in zip(launches, accesses):
            entry = recording.record(launch, acc, lambda f: getattr(f, "data", None) is not None)
            entry.saved = [(f, like(f, f.dtype)) for f in entry.fields]

    def _with_step(self, bound, mode: str):
        """A controller launch in `mode`: its twin reads `step` from the trajectory's step
        field; made from Python, it is given the field's value."""
        launch = resolve(bound.kernel, bound.args, mode)
        return launch if isinstance(launch, tuple) else StepCall(bound, mode,
                                                                  self.traj.step_field)

    def _force_launches(self, traj, model, system) -> list:
        """U and G = dU/dx as `System.forces` makes them, then G's field <- x.grad."""
        if not self.energy:
            traj.G.fill(0)  # without energies: -F = 0
            return []
        terms = system.energy_terms()
        self.hvp = model.hessian_vector(lean=True)
        if not terms.direct:
            launches = [lambda: system.forces()]
        else:
            clear = [g for g in terms.touched_grads if g is not system.U.grad]
            launches = [resolve(updates.zero, (g,)) for g in clear]
            launches.append(resolve(updates.reset_loss, (system.U,)))
            launches += terms.value_and_gradient()
        return launches + [resolve(assign, (system.x.grad, traj.G, self.fp))]

    def _foldable(self) -> bool:
        """Whether the second stage's forces are the next step's first (see the module
        docstring): no controller, and the second stage writes nothing the energies read."""
        reads = self.energy_reads
        if self.ctrl.entries or not self.energy or reads is None:
            return False
        later = [b for G, stage in self.traj.stages if G is not self.traj.G for b in stage]
        return not any(access(b).writes & reads for b in later)  # updates: known

    # ------------------------------------------------------------------ the plans
    def _adjoint_fields(self) -> None:
        """The f64 adjoints of the state, the masses, the fields and the parameters."""
        system, traj, f64 = self.system, self.traj, ti.f64
        self.ax, self.av = like(system.x, f64), like(system.v, f64)
        self.am = like(system.m, f64)
        self.af = {n: like(f, f64) for n, f in self.floats.items()}
        # (KEY, 0-D field, its f64 adjoint, d value / d KEY)
        self.step_params = [(key, f, Field(f64, ()), factor) for key, f, factor in
                            traj.scalars + [(k, f, 1.0) for k, f in traj.control_params]]
        self.energy_params = {key: (f, Field(f64, f.shape)) for key, f in
                              traj.model.param_fields.items()}  # per-pair KEYs: (T, T)
        self.bad = ti.field(ti.i32, shape=())

    def _sections(self) -> list[tuple]:
        """The step program's nodes as a reverse step sees them, in order: (CONTROLLER,
        None, None) and, per force evaluation, (FORCES, its G, the stage that reads G or
        None). Without a controller the unfolded plan still makes its empty reverse: that
        seeds the grads and reads them back (the adjoints rounded to the fields'
        precision, as the gradient's bits have them)."""
        traj, stages = self.traj, {id(G): recording for recording, G in self.stages}
        out = [] if self.ctrl.entries else [(CONTROLLER, None, None)]
        for node in traj.program:
            if node.kind == CONTROLLER:
                out.append((CONTROLLER, None, None))
            elif node.kind == FORCES:
                G = traj.slots[node.slot]
                out.append((FORCES, G, stages.get(id(G))))
        return out

    def _reverse_plan(self) -> list:
        """Replay the sections in order (the forces into each G before the stage reading
        it), then their adjoints in reverse order."""
        system, f64 = self.system, ti.f64
        self._adjoint_fields()
        sections = self._sections()
        plan = []
        for kind, G, stage in sections:
            if kind == CONTROLLER:
                plan += self._replay(self.ctrl)
            elif stage is not None:
                plan += self._forces_into(G) + self._replay(stage)
        plan += self._zero_grads()
        for kind, G, stage in reversed(sections):
            if kind == CONTROLLER:
                plan += self._seed_and_reverse(self.ctrl)
                plan.append(resolve(accumulate, (system.m.grad, self.am, f64)))  # reads m
            elif stage is not None:
                plan += self._seed_and_reverse(stage)
                plan.append(resolve(accumulate, (system.m.grad, self.am, f64)))
                if self.energy:
                    plan += self._through_forces(G)
                plan.append(resolve(updates.zero, (system.m.grad,)))  # dU/dm left there
        return plan + self._param_plan()

    def _folded_plan(self) -> list:
        """Replay the stages (the forces come from the stored state and the step reversed
        before), then in reverse order: a stage's adjoint; at the forces at x_(k+1), G2-bar
        plus the pending G-bar through them; at the forces at x_k, G-bar left pending for
        the step before."""
        system, traj, R, f64, fp = self.system, self.traj, resolve, ti.f64, self.fp
        self._adjoint_fields()
        sections = [s for s in self._sections() if s[0] == FORCES]  # folded: no controller
        plan = [R(assign, (system.x.grad, traj.G, fp))]  # load() left -F_k there
        for _, _, stage in sections:
            if stage is not None:
                plan += self._replay(stage)
        plan += self._zero_grads()
        for _, G, stage in reversed(sections):
            if stage is not None:
                plan += self._seed_and_reverse(stage)
                plan.append(R(accumulate, (system.m.grad, self.am, f64)))
            if G is traj.G2:  # G2-bar = pending (no second stage) or + pending
                plan.append(R(assign if stage is None else accumulate,
                              (self.pending, traj.G2.grad, fp)))
                plan += self._through_forces(traj.G2)  # at x_(k+1): the stages left x there
                plan.append(R(updates.zero, (system.m.grad,)))
            else:
                plan += [R(assign, (traj.G.grad, self.pending, fp)),
                         R(assign, (traj.G, traj.G2, fp))]  # the next reverse step's G2
        return plan + self._param_plan()

    def _last_forces(self) -> list:
        """The pending G-bar of step 0 through the forces at x_0."""
        traj, R, fp = self.traj, resolve, self.fp
        return [R(assign, (self.pending, traj.G2.grad, fp)), *self._through_forces(traj.G2),
                R(updates.zero, (self.pending,)), R(adjoint_watch, (self.ax, self.av, self.bad))]

    def _state(self) -> list:
        system = self.system
        return [(system.x.grad, self.ax), (system.v.grad, self.av)] + \
            [(f.grad, self.af[n]) for n, f in self.floats.items()]

    def _zero_grads(self) -> list:
        """The grads the seeds do not overwrite."""
        system, traj = self.system, self.traj
        zeroed = [system.m.grad] + [G.grad for _, G in self.stages] + \
            [f.grad for f in traj.scratch] + [f.grad for _, f, _, _ in self.step_params]
        return [resolve(updates.zero, (g,)) for g in zeroed]

    def _param_plan(self) -> list:
        """The scalar parameters' adjoints of this step, then the NaN watch."""
        plan = [resolve(accumulate, (f.grad, acc, ti.f64)) for _, f, acc, _ in
                self.step_params]
        return plan + [resolve(adjoint_watch, (self.ax, self.av, self.bad))]

    def _forces_into(self, G) -> list:
        """The force launches (U, x.grad = dU/dx), x.grad copied into G."""
        if not self.energy:
            return []
        return self.forces[:-1] + [resolve(assign, (self.system.x.grad, G, self.fp))]

    @staticmethod
    def _replay(recording: Recording) -> list:
        """Each launch after saving the fields it overwrites into its own."""
        return recording.replay(lambda entry: [resolve(assign, (f, s, f.dtype))
                                               for f, s in entry.saved],
                                lambda entry: [entry.launch])

    def _seed_and_reverse(self, recording: Recording) -> list:
        """Seed the grads from the f64 adjoints, reverse the launches, read them back."""
        state = self._state()
        plan = [resolve(assign, (adj, g, g.dtype)) for g, adj in state]
        plan += recording.reverse(lambda entry: [resolve(assign, (s, f, f.dtype))
                                                 for f, s in entry.saved],
                                  lambda entry: [entry.gradient])
        return plan + [resolve(assign, (g, adj, ti.f64)) for g, adj in state]

    def _through_forces(self, G) -> list:
        """HessianVector.run with x.dual = G-bar (energy=False), its results into the adjoints
        (a Python call of the same where the energies' launches cannot be made directly)."""
        system, hvp, f64, R = self.system, self.hvp, ti.f64, resolve
        if hvp is not None and hvp.usable():
            plan = [R(updates.zero, (f,)) for f in hvp.zero_fields]
            plan.append(R(assign, (G.grad, system.x.dual, self.fp)))
            plan.append(R(updates.reset_loss, (system.U,)))  # U = 0, dU/dU = 1
            plan += hvp.launches(energy=False)
        else:
            model = self.traj.model
            plan = [lambda: model.over_reverse(system.x, G.grad.to_numpy(), energy=False)]
        plan += [R(accumulate, (system.x.grad.dual, self.ax, f64)),
                 R(accumulate, (system.m.grad.dual, self.am, f64))]
        plan += [R(accumulate, (f.grad.dual, self.af[n], f64)) for n, f in self.floats.items()
                 if getattr(f.grad.dual, "data", None) is not None]
        plan += [R(accumulate, (f.grad.dual, acc, f64)) for f, acc in self.energy_params.values()]
        plan.append(R(updates.zero, (system.x.dual,)))
        return plan

    # ------------------------------------------------------------------ state
    def prepare(self) -> None:
        """Before a gradient's steps: the parameters read from 0-D fields into those fields
        (a Python launch writes them; direct ones do not)."""
        for f, value in self.field_values:
            f.data[()] = value

    def load(self, state) -> None:
        """x, v and the fields a step writes from a stored state; folded: G = dU/dx as `run`
        had it."""
        system = self.system
        system.set_state(state.x, state.v)
        for n, f in self.moving.items():
            f.from_numpy(state.fields[n])
        if self.folded:
            system.x.grad.from_numpy(np.negative(state.f))

    # ------------------------------------------------------------------ adjoints
    def push(self, adj) -> None:
        self.ax.from_numpy(adj.x)
        self.av.from_numpy(adj.v)
        self.am.from_numpy(adj.mass)
        for n, a in self.af.items():
            a.from_numpy(np.asarray(adj.fields[n], float))
        for acc in [a for _, _, a, _ in self.step_params] + \
                [a for _, a in self.energy_params.values()]:
            acc.data[()] = 0.0

    def pull(self, adj) -> None:
        """The fields into `adj` (parameter adjoints added to what it held at push)."""
        adj.x, adj.v, adj.mass = self.ax.to_numpy(), self.av.to_numpy(), self.am.to_numpy()
        adj.fields = {n: a.to_numpy() for n, a in self.af.items()}
        for key, _, acc, factor in self.step_params:
            adj.add_scalar(key, factor * float(acc.data[()]))
            acc.data[()] = 0.0
        for key, (_, acc) in self.energy_params.items():
            adj.add_params({key: self.traj.model.param_value(key, acc.data)})
            acc.data[()] = 0.0

    # ------------------------------------------------------------------ the sweep
    def begin(self, end) -> None:
        """Before the first reverse step: G2 = dU/dx at the end state, nothing pending."""
        if self.folded:
            self.traj.G2.from_numpy(np.negative(end.f))
            self.pending.fill(0)
            self.after = end.x

    def finish(self, state0) -> bool:
        """After the sweep: the pending G-bar through the forces at x_0."""
        if not self.folded:
            return True
        self.load(state0)
        self.system.refresh_neighbors()
        self.bad.data[()] = 0
        self.last.run()
        return not self.bad.data[()]
