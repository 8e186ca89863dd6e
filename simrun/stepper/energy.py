"""A scene's energy terms as launches, resolved once: value, gradient, both, and H lambda.

``System.forces`` is defined as the energy kernels run under ``ti.ad.Tape(loss=U)``, and the
adjoint's H lambda as their gradients under ``ti.ad.FwdMode``. Each of those re-derives every
launch's compiled variant from its arguments, records it and decides what to snapshot. For
terms the Tape would snapshot nothing for (``eligible``), the same launches can be made
directly: primal launches in order, ``U.grad = 1``, gradient launches in reverse order, of
the same compiled variants with the same arguments, so the bits are the Tape's (FwdMode's).
``EnergyTerms`` resolves them once, by that one rule, for every caller: the stepper's chains,
``System.forces``, the pressure, the adjoint's reverse and tangent steps.

Parameters a kernel reads from 0-D fields (`Kernel.with_field_args`, for their gradients)
are written into those fields before every evaluation (``set_field_args``), as each launch
through the kernel writes them.

Where every term only adds into fields no term reads (U), each term's value and gradient
come from one launch (autodiff's value_reverse: the pair terms, square roots and divisions
computed once for both; ``fused``). The sums then differ from the Tape's by rounding, and
every path that takes forces from ``value_and_gradient`` makes the same launches, so they
agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from simrun.lang.autodiff.tape import access_of, recording, touched
from simrun.lang.errors import AutodiffError
from simrun.lang.fields import grad_of

Launch = tuple  # (compiled variant, flat scalar arguments)


def eligible(terms: list) -> list[Launch] | None:
    """The terms' primal launches, or None where the Tape would do more than launch them:
    a term that is no simrun.lang kernel (a hand-written gradient), uses random numbers
    (replayed by key) or ndarrays (copied), or writes a field that it or an earlier term
    reads (snapshotted). The one rule for every use (value, gradient, H lambda): their
    variants take the same arguments, so they use random numbers and ndarrays alike."""
    launches, read = [], set()
    for bound in terms:
        prepare = getattr(bound.kernel, "prepare", None)
        if prepare is None:
            return None
        primal, flat, arrays = prepare(bound.args, "primal")
        acc = access_of(primal)
        read |= acc.reads
        if primal.uses_random or arrays or acc.writes & read:
            return None
        launches.append((primal, flat))
    return launches


class EnergyTerms:
    """Bound energy kernels that add into the 0-D field `loss`, resolved once (see the
    module docstring); `x` and `m` are the positions and masses H lambda is taken for,
    `owned` the fields whose gradients a force evaluation also clears."""

    def __init__(self, terms: list, loss, x, m, owned: Iterable = ()) -> None:
        self.terms, self.loss, self.x, self.m = list(terms), loss, x, m
        self._bound = [(b.kernel, b.args) for b in self.terms]
        self.primal = eligible(self.terms)
        self.direct = self.primal is not None
        self.touched_grads = self._touched_grads(owned)
        self.field_values: list = []  # (0-D field, value) of parameters bound as fields
        self.reverse: list[Launch] = []
        self.fused: list[Launch] | None = None
        if self.direct:
            self.reverse = [b.kernel.prepare(b.args, "reverse")[:2] for b in self.terms]
            # the derivative launches have written their parameters' fields (a primal
            # launch takes a float parameter as an argument: Kernel.reads_field)
            self.field_values = [(f, f.data[()].copy()) for b in self.terms
                                 for f in getattr(b.kernel, "field_args", {}).values()]
            self.fused = self._fused()
        self._hvp: dict[bool, HessianVector] = {}

    def _touched_grads(self, owned: Iterable) -> list:
        """The gradients the terms touch, cleared before each evaluation (Tape's default
        clears every gradient in the process: each step would cost as much as all the fields
        alive elsewhere). A term that is no simrun.lang kernel: those of `owned` alone."""
        fields = {self.x, self.loss, *owned}
        for bound in self.terms:
            if getattr(bound.kernel, "prepare", None) is not None:
                fields |= touched(bound.kernel, bound.args)  # field args' 0-D fields too
        return [f.grad for f in fields
                if getattr(getattr(f, "grad", None), "data", None) is not None]

    def _fused(self) -> list[Launch] | None:
        """Each term's value-and-gradient launch (value_reverse), or None where some term
        reads what a term writes."""
        launches = list(zip(self.primal, self.reverse))
        written = set().union(*(access_of(p).writes for (p, _), _ in launches))
        read = set().union(*(access_of(c).reads for pair in launches for c, _ in pair))
        if written & read:
            return None
        fused = []
        for bound in self.terms:
            try:
                both, flat, arrays = bound.kernel.prepare(bound.args, "value_reverse")
            except AutodiffError:
                return None
            fused.append((both, flat))
        return fused

    # ------------------------------------------------------------------ launches
    def value(self) -> list[Launch]:
        """U alone (the caller sets U = 0 first)."""
        return list(self.primal or ())

    def gradient(self) -> list[Launch] | None:
        """dU/d(fields) with U.grad = 1 (the caller's), U left as may be: None where a
        gradient launch reads what the value launches write."""
        if not self.direct:
            return None
        if self.fused is not None:
            return self.fused[::-1]
        written = set().union(*(access_of(p).writes for p, _ in self.primal))
        if any(access_of(g).reads & written for g, _ in self.reverse):
            return None
        return self.reverse[::-1]

    def value_and_gradient(self) -> list[Launch] | None:
        """U and dU/d(fields) after U = 0, U.grad = 1 (the caller's): what the Tape makes."""
        if not self.direct:
            return None
        if self.fused is not None:
            return self.fused[::-1]
        return self.primal + self.reverse[::-1]

    def hessian_vector(self, lean: bool = False, masses: bool = True) -> HessianVector | None:
        """H lambda's launches (resolved on first use; see HessianVector), None where the
        terms are not `direct`."""
        if not self.direct:
            return None
        if lean not in self._hvp:
            self._hvp[lean] = HessianVector(self, lean, masses)
        return self._hvp[lean]

    # ------------------------------------------------------------------ from Python
    def usable(self) -> bool:
        """True while the resolved launches are what the Tape would make now."""
        return (self.direct and not recording() and len(self._bound) == len(self.terms)
                and all(b.kernel is k and b.args is a
                        for b, (k, a) in zip(self.terms, self._bound)))

    def set_field_args(self) -> None:
        """The parameters bound as fields, as the kernels' launches write them."""
        for f, value in self.field_values:
            f.data[()] = value

    def run(self) -> None:
        """U and the gradients the terms accumulate (cleared by the caller)."""
        self.set_field_args()
        for bound in self.terms:
            bound.kernel.last_launch = None  # as the Tape's record leaves it
        self.loss.fill(0)
        self.loss.grad.fill(1)
        for compiled, flat in self.value_and_gradient():
            compiled.launch(flat)


class HessianVector:
    """The launches of `FwdMode` around the terms' gradients: clear the tangents and
    gradients these kernels touch (FwdMode clears every field's in the process), seed a
    dual, U = 0, the forward-mode variants, dU/dU = 1, the forward-over-reverse gradients in
    reverse order: the same compiled variants with the same inputs as `kernel.grad()` under
    FwdMode launches for `eligible` terms, without the per-launch variant lookup and the
    process-wide clearing (~200 us a step). `lean`: the gradient launches make only the
    tangents (dU/dx etc. left out: the native reverse reads H lambda and the mixed terms
    alone, ~25% of the launch); without `masses`, not the mixed mass term either."""

    def __init__(self, terms: EnergyTerms, lean: bool, masses: bool) -> None:
        self.terms = terms
        self.forward: list[Launch] = []
        self.reverse: list[Launch] = []
        touched: set = set()
        self.energy_free = True  # the gradients read nothing the forward launches write
        for bound in terms.terms:
            fwd, flat, _ = bound.kernel.prepare(bound.args, "fwd")
            acc = access_of(fwd)
            for f in acc.reads | acc.writes:  # as run_grad's _ensure_grad_duals
                if getattr(f, "dual", None) is not None and grad_of(f) is not None:
                    f.grad._make_dual()
            unread = [grad_of(f) for f in acc.reads if lean and grad_of(f) is not None]
            if lean and not masses:  # nobody asked for d/dm: no mixed mass term either
                unread += [terms.m.grad.dual]
            varied = (terms.x,) if lean else None  # the native reverse seeds x.dual alone
            grad, gflat, _ = bound.kernel.prepare(bound.args, "fwd_reverse", unread, varied)
            gacc = access_of(grad)
            touched |= acc.reads | acc.writes | gacc.reads | gacc.writes
            self.energy_free &= not (gacc.reads & acc.writes)
            self.forward.append((fwd, flat))
            self.reverse.append((grad, gflat))
        self.zero_fields = self._to_zero(touched, lean)

    def _to_zero(self, touched: set, lean: bool) -> list:
        """The gradients and tangents a pass clears first, each once (lean: those the
        gradient launches touch; U.grad is the caller's)."""
        terms = self.terms
        fields = list(terms.touched_grads) + [terms.m.grad]
        for p in {getattr(f, "primal", None) or f for f in touched}:
            for f in (getattr(p, "dual", None),
                      getattr(getattr(p, "grad", None), "dual", None)):
                if f is not None and getattr(f, "data", None) is not None:
                    fields.append(f)
        used = set().union(*(access_of(g).writes | access_of(g).reads
                             for g, _ in self.reverse))
        return list({id(f): f for f in fields if f is not terms.loss.grad
                     and (f in used or not lean)}.values())

    def launches(self, energy: bool = True) -> list[Launch]:
        """After the clearing, the seed and U = 0, dU/dU = 1 (the caller's): U's tangent
        (with `energy`, or where the gradients need the forward launches) and the gradients'
        tangents."""
        forward = self.forward if energy or not self.energy_free else []
        return forward + self.reverse[::-1]

    def usable(self) -> bool:
        return self.terms.usable()

    def set_field_args(self) -> None:
        self.terms.set_field_args()

    def run(self, param, seed: np.ndarray, energy: bool = True) -> None:
        """dU/d(fields) and their tangents along `seed` of the field `param`; with `energy`,
        also U and its tangent."""
        loss = self.terms.loss
        self.set_field_args()
        for f in self.zero_fields:
            f.data[...] = 0
        param.dual.data[...] = np.asarray(seed, dtype=param.data.dtype).reshape(param.data.shape)
        loss.data[()] = 0
        loss.grad.data[()] = 1
        for compiled, flat in self.launches(energy):
            compiled.launch(flat)
        param.dual.data[...] = 0  # FwdMode clears its seed on exit


def energy_and_reverse(loss, terms: list) -> None:
    """loss = the sum of the bound energy terms, then their gradient kernels in reverse order
    with d loss = 1: what a Tape replays, written out (inside a FwdMode, also the tangents)."""
    loss.fill(0)
    for bound in terms:
        bound()
    loss.grad.fill(1)
    for bound in reversed(terms):
        bound.kernel.grad(*bound.args)
