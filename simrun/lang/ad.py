"""ti.ad: Tape, FwdMode, grad_replaced / grad_for, no_grad, clear_all_gradients."""

from __future__ import annotations

import functools

from .autodiff.check import grad_check as _check
from .autodiff.tape import FwdMode, Tape, active_tapes, clear_all_gradients, suppress
from .ir.emitter import active, current

__all__ = ["Tape", "FwdMode", "grad_replaced", "grad_for", "no_grad", "clear_all_gradients",
           "stop_grad", "grad_check"]


class GradReplaced:
    """A Python function whose gradient is a user-supplied function (checkpointing, stable SVD)."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.backward = None

    def __call__(self, *args, **kwargs):
        tapes = active_tapes()
        if tapes and self.backward is not None:
            for t in tapes:
                t.record_custom(lambda *a: self.backward(*a, **kwargs), args)
        suppress(+1 if tapes else 0)
        try:
            return self.fn(*args, **kwargs)
        finally:
            suppress(-1 if tapes else 0)

    def grad(self, *args, **kwargs):
        if self.backward is None:
            raise RuntimeError(f"no @ti.ad.grad_for({self.fn.__name__}) gradient is registered")
        return self.backward(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        """A method of a @ti.data_oriented class: `a.forward(4)` passes `a` as self."""
        return self if obj is None else _BoundGradReplaced(self, obj)


class _BoundGradReplaced:
    def __init__(self, replaced: GradReplaced, obj):
        self.replaced, self.obj = replaced, obj

    def __call__(self, *args, **kwargs):
        return self.replaced(self.obj, *args, **kwargs)

    def grad(self, *args, **kwargs):
        return self.replaced.grad(self.obj, *args, **kwargs)


class GradForError(TypeError, RuntimeError):
    """grad_for on a function that is not @ti.ad.grad_replaced (a RuntimeError in Taichi)."""


def grad_replaced(fn):
    return GradReplaced(fn)


def grad_for(primal):
    if not isinstance(primal, GradReplaced):
        raise GradForError("ti.ad.grad_for(f) needs f decorated with @ti.ad.grad_replaced (a "
                           "kernel has its own .grad: wrap it in a @ti.ad.grad_replaced "
                           "Python function to replace that)")

    def register(backward):
        primal.backward = backward
        return backward

    return register


def no_grad(fn):
    """Run fn on the forward pass only; the tape records nothing for it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        suppress(+1)
        try:
            return fn(*args, **kwargs)
        finally:
            suppress(-1)

    wrapper.grad = lambda *a, **k: None
    return wrapper


def stop_grad(x):
    """Inside a kernel: loads of field x carry no derivative in the block of the call and the
    blocks inside it (Taichi's rule): the whole kernel at its top level, else that loop."""
    if active():
        field = getattr(x, "field", x)
        if not hasattr(field, "grad"):
            raise current().error("ti.stop_grad() takes a field (e.g. ti.stop_grad(x)), got "
                                  f"{type(x).__name__}")
        current().stop_grad(field)
    return x


def grad_check(tape, fields):
    return _check(tape, fields)
