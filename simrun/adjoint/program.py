"""The whole checkpoint schedule as native programs: forward steps, stored states and reverse
steps run from machine code, a few thousand schedule actions per call.

The binomial schedule (schedule.py) still decides every action, but its states are slots of
one slab of engine fields (slab.py) and its actions are rows of launches (launches.Rows):
LOAD a slot into the system's fields, STEP n times (the stepper's own launches, then a
watch of x and v that stops the program at a NaN state), STORE the fields into a slot,
REVERSE one step (the state before it from a slot, then `reverse_step.ReverseStep`'s
launches; folded, they keep the forces after the step from the step reversed just before).
A small kernel at the start of each LOAD, STORE
and REVERSE reads that row's slot, and the step of the state it names, from the slab's ops
tables, so one native call runs a whole stretch of the schedule without Python or NumPy
between its steps (under the interpreted policy, and on a GPU, whose kernels chains cannot
post, the same rows run launch by launch from Python). A controller's twins read that step
index from a field, and a launch moves it on after each step. The schedule does not change
the gradient's bits, whatever the number of stored states.

The final state's seed, the last step and the first reverse step run from Python once.
Where a step is not all direct launches (a neighbour list's rebuild check, a launch only a
Python call makes) it is one Python call of `run`'s stepper inside the rows; an objective
over every state (at: mean) adds each state's J in the first descent and its seed after
the state's reverse step, as Python calls too. A NaN or Inf in the adjoint stops the program
after that reverse step, and the error names it.
"""

from __future__ import annotations

import numpy as np

from simrun.adjoint import policy
from simrun.adjoint.schedule import Schedule, reverse
from simrun.adjoint.slab import OPS, Slab, next_step
from simrun.stepper.fieldstep import direct_launch
from simrun.stepper.launches import Rows, adjoint_watch
from simrun.stepper.state import State

STEPS_PER_CALL = 20_000  # forward steps per call at most (progress, Ctrl-C)


def stopped_at(program: np.ndarray, done: int, reverse_first: int, first_reversed: int) -> int:
    """The step whose reverse row stopped a program after ``done`` repetitions: rows that
    start at launch ``reverse_first`` reverse the steps first_reversed, first_reversed - 1,
    ... in turn, one a repetition (the schedule reverses in order)."""
    ends = np.cumsum(program[:, 2])
    row = int(np.searchsorted(ends, done))
    reversing = program[:, 0] == reverse_first
    before = int(program[:row, 2][reversing[:row]].sum())
    within = done - (int(ends[row]) - int(program[row, 2])) - 1 if reversing[row] else 0
    return first_reversed - before - within


class Held:
    """A state of the schedule: its step and its slot (None: only in the system's fields)."""

    __slots__ = ("step", "slot")

    def __init__(self, step: int, slot: int | None) -> None:
        self.step, self.slot = step, slot


class NativeProgram:
    """The gradient sweep of a `Trajectory` (trajectory.py) as native programs (see the module
    docstring)."""

    def __init__(self, traj, native, snapshots: int) -> None:
        system, stepper = traj.system, traj.model.stepper
        self.traj, self.native, self.stepper, self.system = traj, native, stepper, system
        self.scratch = snapshots + 1  # slot 0: the start; 1 .. snapshots: the stored states
        self.slab = slab = Slab(system, native.moving, snapshots + 2, traj.step_field)
        blocks = {"load": slab.load, "store": slab.store, "reverse": list(slab.load)}
        if native.folded and system.neighbor_list is not None:
            blocks["reverse"].insert(0, self._list_after)  # before x_k is loaded
        blocks["reverse"] += native.backward
        if traj.at_mean:  # each state's share of J, seeded as the sweep passes it
            blocks["reverse"].append(self._seed_state)
        # recomputed steps never need U (only the final state's, which _first_reverse makes):
        # the gradients alone where they read nothing the energies' forward launches write
        # each forward step ends with a watch of its state: a NaN position would give the next
        # step's kernels indices far outside their fields (an MPM cell cast from NaN), a crash
        watch = direct_launch(adjoint_watch, (system.x, system.v, native.bad))
        blocks["step"] = self._step(potential=False) + [watch]
        blocks["first"] = blocks["step"]  # the first descent's steps: each state's J (mean)
        if traj.at_mean:
            blocks["first"] = self._step(traj.model.objective.uses_potential) + [
                watch, self._accumulate]
        blocks["first_store"] = blocks["first"] + blocks["store"]
        launches, rows = [], {}
        for name, block in blocks.items():
            rows[name] = [len(launches), len(block), 1]
            launches += block
        self.rows = Rows(launches, policy.current().native, stop=native.bad)
        self.load_row, self.store_row, self.reverse_row = rows["load"], rows["store"], \
            rows["reverse"]
        self.step_rows = ([*rows["step"][:2], 0], [*rows["first"][:2], 0])  # + repeats
        self.first_store_row = rows["first_store"]
        self.program: list[int] = []  # (first launch, launch count, repeats) per row, flat
        self.args: list[int] = []  # the slot of each load, store and reverse row, in order
        self.arg_steps: list[int] = []  # ... and the step of the state it names
        self.step_end = -1  # len(program) after the last step row (more steps extend it)
        self.first_reversed = -1  # the step the first reverse row of this call reverses
        self.live: Held | None = None  # the state the system's fields hold
        self.pending_steps = 0
        self.used: list[int] = []  # slots of stored states, in the order stored (LIFO)

    def _step(self, potential: bool) -> list:
        """A step's launches (a controller's twins read the step index from the
        trajectory's field, moved on after the step), or one Python call of `run`'s
        stepper where a step is not all direct launches (a neighbour list's rebuild check,
        a launch only a Python call makes)."""
        control = [direct_launch(b.kernel, b.args) for b in self.system.controller]
        launches = self.stepper.step_launches(potential=potential, control=control)
        if launches is None:
            return [lambda: self._python_step(potential)]
        if control:
            launches.append(direct_launch(next_step, (self.traj.step_field,)))
        return launches

    def _python_step(self, potential: bool) -> None:
        field = self.traj.step_field
        self.stepper.step_index = int(field[None])
        # flush() wrote the energies' field arguments (and such a stepper has no chain)
        self.stepper.advance(1, potential, set_args=False, forces_after=potential)
        field[None] = self.stepper.step_index

    def _accumulate(self) -> None:
        """The first descent's new state into J (at: mean)."""
        self.reached += 1
        state = State(self.reached, None, None, None, 0.0)
        self.stepper.store(state)
        self.traj._accumulate(self.total, state, self.steps)

    def _seed_state(self) -> None:
        """After step k's reverse: the objective's seed at the state before it (at: mean)."""
        traj, k = self.traj, int(self.traj.step_field[None])
        w = traj._weight(k, self.steps)
        if w:
            self.native.pull(self.adj)
            state = self.slab.get(int(self.slab.slot.data[()]), k, self.still)
            traj._seed(self.adj, state, w)
            traj._check_finite(self.adj, k)
            traj.record_adjoint(self.adj, k, self.steps)
            self.native.push(self.adj)

    def _list_after(self) -> None:
        """A folded reverse step's H lambda is taken at x_(k+1): the neighbour list as
        `run` would have it there (the x of the step reversed before, or the end's)."""
        system, native = self.system, self.native
        system.x.from_numpy(native.after)
        system.refresh_neighbors()
        native.after = self.slab.sx.data[self.slab.next_slot()].copy()  # this row's

    # ------------------------------------------------------------------ the program
    def flush(self) -> None:
        """Run the rows emitted so far in one native call; a reverse step whose adjoint
        became NaN or Inf is raised with its step (as `Trajectory._check_finite` words it)."""
        if not self.program:
            return
        self.slab.set_rows(self.args, self.arg_steps)
        self.native.bad.data[()] = 0
        for bound in self.system.energy:
            bound.kernel.last_launch = None
        if self.stepper.direct is not None:
            self.stepper.direct.set_field_args()
        if self.native.energy:
            self.system.energy_terms().set_field_args()
        program = np.array(self.program, dtype=np.int64).reshape(-1, 3)
        done = self.rows.run_program(program)  # writes the launches' arguments first
        if self.native.bad.data[()]:
            self.traj.check_state(self.system)  # a forward step's watch stopped it
            self.native.pull(self.adj)
            self.traj._check_finite(self.adj, stopped_at(program, done, self.reverse_row[0],
                                                         self.first_reversed))
        self.program, self.args, self.arg_steps = [], [], []
        self.pending_steps, self.step_end, self.first_reversed = 0, -1, -1

    def _emit_repeated(self, row: list[int], slots: range) -> None:
        """One row repeated once per slot (its tick reads them in turn); slot k holds the
        state at step k."""
        if len(self.args) + len(slots) > OPS:
            self.flush()
        self.args += slots
        self.arg_steps += slots
        self.program += [row[0], row[1], len(slots)]

    def _emit(self, row: list[int], slot: int, step: int) -> None:
        if len(self.args) >= OPS:
            self.flush()
        self.args.append(slot)
        self.arg_steps.append(step)
        self.program += row

    # ------------------------------------------------------------------ schedule callbacks
    def advance_many(self, held: Held, a: int, b: int) -> Held:
        if self.live is not held:
            self._emit(self.load_row, held.slot, held.step)
        left = b - a
        while left:
            take = min(left, STEPS_PER_CALL - self.pending_steps)
            row = self.step_rows[self.first_descent]
            if len(self.program) != self.step_end or self.program[-3] != row[0]:
                self.program += row
                self.step_end = len(self.program)
            self.program[-1] += take
            self.pending_steps += take
            left -= take
            if self.pending_steps >= STEPS_PER_CALL:
                self.flush()
                self._progress(b - left)
        self.live = Held(b, None)
        return self.live

    def advance(self, held: Held, k: int) -> Held:
        return self.advance_many(held, k, k + 1)

    def copy(self, held: Held) -> Held:
        held.slot = len(self.used) + 1
        self.used.append(held.slot)
        self._emit(self.store_row, held.slot, held.step)
        return held

    def release(self, held: Held) -> None:
        if self.used.pop() != held.slot:
            raise AssertionError("stored states freed out of order")

    def reverse_step(self, held: Held, k: int) -> None:
        if k == self.steps - 1:
            self._first_reverse(held)
        slot = held.slot
        if slot is None:  # advanced to, not stored: through the scratch slot
            slot = self.scratch
            self._emit(self.store_row, slot, k)
        self._emit(self.reverse_row, slot, k)
        if self.first_reversed < 0:
            self.first_reversed = k
        self.reversed_to = k
        self.live = None
        if len(self.args) >= OPS - 2:
            self.flush()
            self._progress(k)

    def _progress(self, step: int) -> None:
        """Forward steps reached in the first descent, then steps reversed (the last step
        the program has reversed, ``reversed_to``, not the recomputations' steps); called
        after each native call, so that it never reports steps still to be made."""
        if self.first_descent:
            self.traj.progress("forward", step, self.steps)
        else:
            self.traj.progress("reverse", self.steps - self.reversed_to, self.steps)

    def _first_reverse(self, held: Held) -> None:
        """The last step from Python: its end state's objective and seed, the adjoint into
        the native step's fields, the forces after the step into its G2."""
        traj, native = self.traj, self.native
        if self.live is not held:
            self._emit(self.load_row, held.slot, held.step)
        if held.slot is None:
            self._emit(self.store_row, self.scratch, held.step)
            held.slot = self.scratch
        self.flush()
        self.first_descent = False
        potential, done = traj.model.objective.uses_potential, 0
        self.stepper.step_index = self.steps - 1  # a controller's step index
        while done < 1:
            done += self.stepper.advance(1, potential)
        end = State(self.steps, None, None, None, 0.0)
        self.stepper.store(end)
        if not potential and self.stepper.gradients is not None:  # U was not taken
            end.potential = float("nan")
        end.fields = traj._fields()
        traj._accumulate(self.total, end, self.steps)
        traj._seed(self.adj, end, traj._weight(self.steps, self.steps))
        native.push(self.adj)
        native.begin(end)
        self.live = None
        self._progress(self.steps - 1)

    # ------------------------------------------------------------------ the sweep
    def gradient(self, state0: State, steps: int, snapshots: int, adj
                 ) -> tuple[float, Schedule]:
        """J (at: end) and the adjoint (in ``adj``) after the whole reverse sweep."""
        self.steps, self.adj, self.total, self.reached = steps, adj, [0.0], 0
        # the fields no step writes: every state's are the start's (the slab holds the rest)
        self.still = {n: v for n, v in state0.fields.items() if n not in self.slab.fields}
        self.first_descent, self.reversed_to = True, steps
        self.slab.put(0, state0)
        start = Held(0, 0)
        self.traj.step_field[None] = 0  # the fields hold the start (`_every_state` steps it)
        if 1 < steps <= snapshots + 1:
            sched = self._every_state(steps)
        else:
            sched = reverse(start, steps, snapshots, self.advance, self.reverse_step,
                            self.copy, self.advance_many, self.release)
        self.flush()
        if steps:
            self.traj.progress("reverse", steps, steps)
            if not self.native.finish(state0):
                self.native.pull(adj)
                self.traj._check_finite(adj, 0)
        self.native.pull(adj)
        return self.total[0], sched

    def _every_state(self, steps: int) -> Schedule:
        """The schedule when every state fits (the binomial one's, without a call from
        Python per step): step and store as one row repeated OPS times a native call, the
        last step from Python, then the reverse steps as one repeated row."""
        for first in range(1, steps, OPS):  # slot k: the state before step k
            slots = range(first, min(first + OPS, steps))
            self._emit_repeated(self.first_store_row, slots)
            self.flush()
            self._progress(slots[-1])
        self.live = held = Held(steps - 1, steps - 1)
        self._first_reverse(held)
        for top in range(steps - 1, -1, -OPS):
            self._emit_repeated(self.reverse_row, range(top, max(top - OPS, -1), -1))
            self.first_reversed, self.reversed_to = top, max(top - OPS + 1, 0)
            self.flush()
            self._progress(self.reversed_to)
        return Schedule(steps, steps - 1, advances=steps - 1, peak_stored=steps - 1)
