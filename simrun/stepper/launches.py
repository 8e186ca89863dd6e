"""A reverse step's launches and how they are made: one `Chain` (a native call) where every
launch chains and the policy is native, else one by one from Python (a GPU's kernels, the
interpreted policy, a launch only the engine's Tape machinery can make: random numbers,
ndarrays, a custom gradient). Both make the same launches on the same values, so the two
policies give the same bits (a test holds them to it).

A launch is (compiled variant, flat scalar arguments), or a callable where no compiled
variant can be launched directly. The small kernels here move adjoints between a field's
precision and the f64 adjoints the sweep keeps."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import simrun.lang as ti
from simrun.lang.api import runtime
from simrun.lang.autodiff.tape import access_of, one_grad_launch, run_grad
from simrun.lang.fields import Field
from simrun.lang.runtime.chain import Chain
from simrun.stepper.binding import parameter_names
from simrun.stepper.fieldstep import direct_launch


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
def assign_two(src: ti.template(), dst: ti.template(), dtype: ti.template(),
               adds: ti.template(), src2: ti.template(), dst2: ti.template(),
               dtype2: ti.template(), adds2: ti.template()):
    """Two copies (`adds`: accumulations) over fields of one shape in one loop, element by
    element in their order: what the two launches make, in one launch (`fused_copies`)."""
    for I in ti.grouped(src):
        if ti.static(adds):
            dst[I] += ti.cast(src[I], dtype)
        else:
            dst[I] = ti.cast(src[I], dtype)
        if ti.static(adds2):
            dst2[I] += ti.cast(src2[I], dtype2)
        else:
            dst2[I] = ti.cast(src2[I], dtype2)


@ti.kernel
def adjoint_watch(ax: ti.template(), av: ti.template(), bad: ti.template()):
    """bad = 1 where ax or av is NaN or Inf: the adjoints of x and v in a reverse step, and
    x and v themselves after each forward step of a gradient's program."""
    for i in ax:
        for c in ti.static(range(ax.n)):
            if ax[i][c] - ax[i][c] != 0 or av[i][c] - av[i][c] != 0:
                bad[None] = 1


def like(f, dtype) -> Field:
    """A field of f's shape and element shape in `dtype` (a snapshot or an f64 adjoint)."""
    return Field(dtype, f.shape, name=f"{f.name}.native", elem_shape=f.elem_shape)


Launch = tuple | Callable[[], None]


class Copy(tuple):
    """An `assign` (or, `adds`, an `accumulate`) launch, (compiled, flat), that knows its
    source and destination fields."""

    src: Field
    dst: Field
    adds: bool


def _widens(src, dst) -> bool:
    """Whether a copy of src's values into dst's precision casts back to them exactly."""
    return src.dtype == dst.dtype or (src.dtype == ti.f32 and dst.dtype == ti.f64)


def without_repeated_copies(launches: list[Launch]) -> list[Launch]:
    """`launches` less each copy whose destination already holds its source's values: the
    same copy again, or a copy back into a field copied from a field at least as precise,
    with neither field written between (a Python call may write any). The same values in
    every field after each kept launch, so the same bits."""
    held: set = set()  # (id(src), id(dst)) where dst holds src's values
    out = []
    for launch in launches:
        copy = launch if isinstance(launch, Copy) and not launch.adds else None
        if copy is not None and (id(copy.src), id(copy.dst)) in held:
            continue
        if isinstance(launch, tuple):
            written = {id(f) for f in access_of(launch[0]).writes}
            held = {pair for pair in held if not written.intersection(pair)}
        else:
            held = set()
        if copy is not None:
            held.add((id(copy.src), id(copy.dst)))
            if _widens(copy.src, copy.dst):
                held.add((id(copy.dst), id(copy.src)))
        out.append(launch)
    return out


def fused_copies(launches: list[Launch]) -> list[Launch]:
    """Each two adjacent copies (or accumulations) over fields of one shape as one launch of
    `assign_two`, which makes them element by element in their order: the same values."""
    out, k = [], 0
    while k < len(launches):
        a, b = launches[k], launches[k + 1] if k + 1 < len(launches) else None
        if isinstance(a, Copy) and isinstance(b, Copy) and \
                len({f.shape for f in (a.src, a.dst, b.src, b.dst)}) == 1:
            out.append(resolve(assign_two, (a.src, a.dst, a.dst.dtype, a.adds,
                                            b.src, b.dst, b.dst.dtype, b.adds)))
            k += 2
        else:
            out.append(a)
            k += 1
    return out


def resolve(kernel, args, mode: str = "primal") -> Launch:
    """A launch of `kernel` on `args` in `mode` ("primal" or "reverse"): its compiled variant
    and flat scalar arguments, or a Python call where it has none to launch directly (the
    reverse of a kernel whose loops the Tape reverses one by one runs as `kernel.grad()` does,
    at the state the fields hold)."""
    if mode == "primal":
        found = direct_launch(kernel, args)
        if not found:
            return lambda: kernel(*args)
        if kernel in (assign, accumulate) and args[2] == args[1].dtype:  # dst (+)= src
            copy = Copy((found[0], list(found[1])))
            copy.src, copy.dst, copy.adds = args[0], args[1], kernel is accumulate
            return copy
        return found[0], list(found[1])
    if getattr(kernel, "prepare", None) is None:  # a custom gradient (grad_replaced)
        return lambda: kernel.grad(*args)
    return one_grad_launch(kernel, args, mode) or \
        (lambda: run_grad(kernel, args, snapshot={}))


def chains(launch: Launch) -> bool:
    """Whether a Chain can make this launch (a CPU kernel of fields alone)."""
    if not isinstance(launch, tuple):
        return False
    compiled = launch[0]
    return compiled.chainable and not compiled.uses_random and not compiled.ndarray_slots


def make(launch: Launch) -> None:
    """One launch from Python."""
    if isinstance(launch, tuple):
        launch[0].launch(launch[1])
    else:
        launch()


class Rows:
    """Rows of launches, (first launch, launch count, repeats) each, made in order as
    `Chain.run_program` makes them: under the native policy, the launches that chain are
    one `Chain`, consecutive rows of them one native call and a run of them inside a row
    with a Python launch one call too; the rest, and every launch under the interpreted
    policy, one by one from Python. `stop` (a 0-D i32 field or None) is read after each
    repetition of a row; nonzero ends the run.

    Each run writes the chain's scalar arguments into their contexts once, at its first
    native call: a Python launch of a chained variant between two native calls must pass
    the values the chain holds (a step's calls do)."""

    def __init__(self, launches: list[Launch], native: bool, stop=None) -> None:
        self.launches, self.stop = launches, stop
        chained = [k for k, launch in enumerate(launches) if native and chains(launch)]
        self.chain = Chain(runtime(), [launches[k] for k in chained], stop=stop) \
            if chained else None
        self.place = np.full(len(launches) + 1, -1)  # launch -> its place in the chain
        self.place[chained] = np.arange(len(chained))
        # Python launches before each launch: a row [first, first + count) chains whole
        # where the count does not change over it
        self.python = np.r_[0, np.cumsum(self.place[:-1] < 0)]
        self.segments: dict = {}  # (first, count) -> the row's runs (see _segments)

    def run(self) -> None:
        """Every launch once."""
        self.run_program(np.array([0, len(self.launches), 1]))

    def _segments(self, first: int, count: int) -> list:
        """A row's launches in runs: a [[chain place, count, 1]] array for a run that
        chains, else the launch itself (made from Python); worked out once per row."""
        key = (first, count)
        if key not in self.segments:
            out, k, end = [], first, first + count
            while k < end:
                run = k
                while run < end and self.place[run] >= 0:
                    run += 1
                if run > k:
                    out.append(np.array([[self.place[k], run - k, 1]], dtype=np.int64))
                    k = run
                else:
                    out.append(self.launches[k])
                    k += 1
            self.segments[key] = out
        return self.segments[key]

    def run_program(self, program: np.ndarray) -> int:
        """Returns the repetitions done (fewer than the rows ask where `stop` was set)."""
        rows = np.asarray(program, dtype=np.int64).reshape(-1, 3)
        first, count = rows[:, 0], rows[:, 1]
        native = self.python[first + count] == self.python[first]  # no Python launch
        edges = np.flatnonzero(np.diff(native)) + 1
        done, fresh = 0, True  # fresh: the chain's arguments are not written yet
        for a, b in zip(np.r_[0, edges], np.r_[edges, len(rows)]):
            if native[a]:  # consecutive rows that chain: one call
                block = rows[a:b].copy()
                block[:, 0] = self.place[block[:, 0]]
                got = self.chain.run_program(block, set_args=fresh)
                done, fresh = done + got, False
                if got < block[:, 2].sum():
                    return done
                continue
            for first_launch, launches, repeats in rows[a:b].tolist():
                segments = self._segments(first_launch, launches)
                for _ in range(repeats):
                    for segment in segments:
                        if isinstance(segment, np.ndarray):
                            self.chain.run_program(segment, set_args=fresh)
                            fresh = False
                        else:
                            make(segment)
                    done += 1
                    if self.stop is not None and self.stop.host_values(write=False)[()]:
                        return done
        return done


def access(bound):
    """What a launch reads and writes; None where a custom gradient's kernel (grad_replaced)
    hides it: it is taken to read every field, and its reverse runs where the fields stand,
    as a Tape runs it."""
    prepare = getattr(bound.kernel, "prepare", None)
    return None if prepare is None else access_of(prepare(bound.args, "primal")[0])


class StepCall:
    """A controller launch made from Python (no compiled variant to launch directly), its
    `step` argument read from the trajectory's step field (as the compiled twins read it)."""

    def __init__(self, bound, mode: str, step) -> None:
        self.kernel, self.args, self.mode, self.step = bound.kernel, list(bound.args), mode, step
        names = parameter_names(bound.kernel)
        self.at = names.index("step") if "step" in names else None

    def __call__(self) -> None:
        if self.at is not None:
            self.args[self.at] = int(self.step[None])
        if self.mode == "primal":
            self.kernel(*self.args)
        elif getattr(self.kernel, "prepare", None) is None:
            self.kernel.grad(*self.args)
        else:
            run_grad(self.kernel, tuple(self.args), snapshot={})
