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
from simrun.lang.autodiff.tape import access_of, run_grad
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
def adjoint_watch(ax: ti.template(), av: ti.template(), bad: ti.template()):
    """bad = 1 where an adjoint of x or v is NaN or Inf."""
    for i in ax:
        for c in ti.static(range(ax.n)):
            if ax[i][c] - ax[i][c] != 0 or av[i][c] - av[i][c] != 0:
                bad[None] = 1


def like(f, dtype) -> Field:
    """A field of f's shape and element shape in `dtype` (a snapshot or an f64 adjoint)."""
    return Field(dtype, f.shape, name=f"{f.name}.native", elem_shape=f.elem_shape)


Launch = tuple | Callable[[], None]


def resolve(kernel, args, mode: str = "primal") -> Launch:
    """A launch of `kernel` on `args` in `mode` ("primal" or "reverse"): its compiled variant
    and flat scalar arguments, or a Python call where it has none to launch directly (the
    reverse of a kernel whose loops the Tape reverses one by one runs as `kernel.grad()` does,
    at the state the fields hold)."""
    if mode == "primal":
        found = direct_launch(kernel, args)
        return (found[0], list(found[1])) if found else (lambda: kernel(*args))
    if getattr(kernel, "prepare", None) is None:  # a custom gradient (grad_replaced)
        return lambda: kernel.grad(*args)
    compiled, flat, arrays = kernel.prepare(args, mode)
    primal = kernel.prepare(args, "primal")[0]
    acc = access_of(primal)
    if arrays or compiled.uses_random or compiled.ndarray_slots or \
            (len(primal.fns) > 1 and acc.reads & acc.writes):
        return lambda: run_grad(kernel, args, snapshot={})
    return compiled, list(flat)


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


class Launches:
    """Launches made in order: one Chain (`chain`) where `native` and every launch chains,
    else one by one."""

    def __init__(self, launches: list[Launch], native: bool) -> None:
        self.launches = launches
        self.chain = Chain(runtime(), launches) if native and all(map(chains, launches)) \
            else None

    def set_args(self, compiled=None) -> None:
        """The chain's scalar arguments into its contexts (one by one, each launch writes
        its own)."""
        if self.chain is not None:
            self.chain.set_args(compiled)

    def run(self, set_args: bool = True) -> None:
        if self.chain is not None:
            self.chain.run(1, set_args=set_args)
            return
        for launch in self.launches:
            make(launch)


class Rows:
    """A program's rows made launch by launch from Python, as `Chain.run_program` makes
    them natively (the interpreted policy; a GPU, whose kernels chains cannot post)."""

    def __init__(self, launches: list, stop) -> None:
        self.launches, self.stop = launches, stop

    def run_program(self, program: np.ndarray) -> int:
        done = 0
        for first, count, repeats in np.asarray(program).reshape(-1, 3):
            block = self.launches[first:first + count]
            for _ in range(repeats):
                for launch in block:
                    make(launch)
                done += 1
                if self.stop.host_values(write=False)[()]:
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
    `step` argument set before each step."""

    def __init__(self, bound, mode: str) -> None:
        self.kernel, self.args, self.mode = bound.kernel, list(bound.args), mode
        names = parameter_names(bound.kernel)
        self.at = names.index("step") if "step" in names else None
        self.step: int | None = None  # set before each step where the caller steps it

    def __call__(self) -> None:
        if self.at is not None and self.step is not None:
            self.args[self.at] = self.step
        if self.mode == "primal":
            self.kernel(*self.args)
        elif getattr(self.kernel, "prepare", None) is None:
            self.kernel.grad(*self.args)
        else:
            run_grad(self.kernel, tuple(self.args), snapshot={})
