"""Tape(grad_check=[fields]): compare autodiff gradients with central finite differences."""

from __future__ import annotations

import numpy as np

from ..errors import AutodiffError
from ..fields import all_fields
from .tape_state import _restore, suppress

MAX_ELEMENTS = 64


def capture_state() -> dict:
    """Every field's values, in tape._restore's form {field: (index, values)}."""
    return {f: (Ellipsis, f.data.copy()) for f in all_fields() if f.data is not None}


def _replay(tape, state) -> float:
    _restore(state)
    suppress(+1)
    try:
        for rec in tape.records:
            rec.kernel(*rec.args)
    finally:
        suppress(-1)
    return float(tape.loss.data.reshape(-1)[0])


def grad_check(tape, fields, rtol: float | None = None) -> float:
    """Returns the worst relative error; raises AutodiffError when it exceeds rtol."""
    if any(r.custom is not None for r in tape.records):
        raise AutodiffError("grad_check cannot replay a grad_replaced function; check the "
                            "kernels it calls instead")
    state = tape._check_state
    final = capture_state()
    worst, report = 0.0, ""
    for f in fields:
        grads = f.grad.data.copy().reshape(-1)
        flat0 = state[f][1].reshape(-1)
        eps = 1e-6 if f.dtype.bits == 64 else 1e-2
        picks = np.linspace(0, flat0.size - 1, min(flat0.size, MAX_ELEMENTS)).astype(int)
        for e in np.unique(picks):
            h = eps * max(1.0, abs(float(flat0[e])))
            values = []
            for sign in (1, -1):
                trial = dict(state)
                arr = state[f][1].copy()
                arr.reshape(-1)[e] += sign * h
                trial[f] = (Ellipsis, arr)
                values.append(_replay(tape, trial))
            fd = (values[0] - values[1]) / (2 * h)
            err = abs(fd - grads[e]) / max(1e-8, abs(fd), abs(grads[e]))
            if err > worst:
                worst, report = err, (f"field '{f.name}' element {e}: autodiff {grads[e]:.6g}, "
                                      f"finite difference {fd:.6g}")
    _restore(final)
    tol = rtol if rtol is not None else (1e-4 if all(f.dtype.bits == 64 for f in fields)
                                         else 5e-2)
    tape.grad_check_error = worst
    print(f"[simrun] grad_check: worst relative error {worst:.3g}" +
          (f" ({report})" if report else ""))
    if worst > tol:
        raise AutodiffError(f"grad_check failed: relative error {worst:.3g} > {tol:g} at "
                            f"{report}")
    return worst
