"""Forces without the Tape's per-launch bookkeeping, when the Tape would do nothing more.

``System.forces`` runs the energy kernels under ``ti.ad.Tape(loss=U)``: each step, every
launch re-derives its compiled variant from its arguments, the Tape records it and decides what
to snapshot, then replays the gradient kernels. For energy kernels that read no field they
write (U is only accumulated) and use no random numbers and no ndarrays, the Tape snapshots
nothing and replays exactly: primal launches in order, ``U.grad = 1``, gradient launches in
reverse order. ``DirectForces`` makes those same launches of the same
compiled variants with the same arguments, so the bits are the Tape's. Parameters a kernel
reads from 0-D fields (`Kernel.with_field_args`, for their gradients) are written into those
fields before every evaluation, as each launch through the kernel writes them.

Where every term only adds into fields no term reads (U), each term's value and gradient
come from one launch instead (autodiff's value_reverse: the pair terms, square roots and
divisions computed once for both), in the gradient's place; the value's place then holds an
empty launch (``shared``), which the stepper and ``run`` skip. The sums then differ from the
Tape's by rounding, and every path that takes forces from ``calls`` (the stepper's chains,
``run``, the adjoint's replays) makes the same launches, so they agree bit for bit.
"""

from __future__ import annotations

import simrun.lang as ti
from simrun.lang.autodiff.tape import access_of, recording
from simrun.lang.errors import AutodiffError


@ti.kernel
def value_shared():
    """The value launch of a term whose gradient launch makes its value too: nothing (one
    empty iteration: a CUDA module needs an entry)."""
    for _ in range(1):
        pass


class DirectForces:
    """The launches of ``Tape(loss=U)`` over bound energy kernels, resolved once."""

    def __init__(self, energy: list, loss) -> None:
        self.energy, self.loss = energy, loss
        self.args = [bound.args for bound in energy]
        self.kernels = [bound.kernel for bound in energy]
        self.field_values: list = []  # (0-D field, value) of parameters bound as fields
        self.shared = False  # each term's value comes with its gradient (value_reverse)
        self.calls = self._resolve()

    def _resolve(self) -> list | None:
        calls, read = [], set()
        for bound in self.energy:
            kernel = bound.kernel
            prepare = getattr(kernel, "prepare", None)
            if prepare is None:
                return None
            primal, pflat, parrays = prepare(bound.args, "primal")
            acc = access_of(primal)
            read |= acc.reads
            if primal.uses_random or primal.tracked or parrays or acc.writes & read:
                return None  # the Tape would snapshot or replay random numbers
            grad, gflat, garrays = prepare(bound.args, "reverse")
            if garrays:
                return None
            calls.append((kernel, primal, pflat, grad, gflat))
            field_args = getattr(kernel, "field_args", {})
            self.field_values += [(f, f.data[()].copy()) for f in field_args.values()]
        fused = self._fused(calls)
        self.shared = fused is not None
        return fused or calls

    def _fused(self, calls: list) -> list | None:
        """calls with each term's value made by its gradient launch (value_reverse), or
        None where some term reads what a term writes or writes other than by adds."""
        written = set().union(*(access_of(p).writes for _, p, _, _, _ in calls))
        read = set().union(*(access_of(k).reads for _, p, _, g, _ in calls for k in (p, g)))
        if written & read:
            return None
        empty = value_shared.prepare((), "primal")[:2]
        fused = []
        for (kernel, _, _, _, _), bound in zip(calls, self.energy):
            try:
                both, flat, arrays = kernel.prepare(bound.args, "value_reverse")
            except AutodiffError:
                return None
            if arrays:
                return None
            fused.append((kernel, *empty, both, flat))
        return fused

    def usable(self) -> bool:
        """True while the resolved launches are what the Tape would make now."""
        return (self.calls is not None and not recording() and len(self.energy) == len(self.args)
                and all(b.args is a and b.kernel is k
                        for b, a, k in zip(self.energy, self.args, self.kernels)))

    def set_field_args(self) -> None:
        """The parameters bound as fields, as the kernels' launches write them."""
        for f, value in self.field_values:
            f.data[()] = value

    def run(self) -> None:
        """U and the gradients the energy kernels accumulate (cleared by the caller)."""
        self.set_field_args()
        self.loss.fill(0)
        for kernel, primal, flat, _, _ in self.calls:
            kernel.last_launch = None  # as the Tape's record leaves it
            if not self.shared:  # (else an empty launch)
                primal.launch(flat)
        self.loss.grad.fill(1)
        for _, _, _, grad, flat in reversed(self.calls):
            grad.launch(flat)


def energy_and_reverse(loss, terms: list) -> None:
    """loss = the sum of the bound energy terms, then their gradient kernels in reverse order
    with d loss = 1: what a Tape replays, written out (inside a FwdMode, also the tangents)."""
    loss.fill(0)
    for bound in terms:
        bound()
    loss.grad.fill(1)
    for bound in reversed(terms):
        bound.kernel.grad(*bound.args)
