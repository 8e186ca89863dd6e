"""ti.init's options that the compiler and the autodiff runtime read (one object, set by
ti.init; a module of its own so that every layer can read it without importing api)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Config:
    debug: bool = False
    fast_math: bool = True
    offline_cache: bool = True
    arch: str = "cpu"


config = Config()


_device: ContextVar[str] = ContextVar("simrun_device", default="cpu")


@contextmanager
def on_device(name: str) -> Iterator[None]:
    """Run what is inside on `name` ("cpu" or "cuda"): the policy the CLI's --device sets and
    the stepper's ti.init reads (a context, not a global switch)."""
    token = _device.set(name)
    try:
        yield
    finally:
        _device.reset(token)


def current_device() -> str:
    return _device.get()


_checked: ContextVar[bool] = ContextVar("simrun_bounds_checks", default=False)


@contextmanager
def bounds_checked(on: bool) -> Iterator[None]:
    """--debug on a job: every System made inside bounds-checks its kernels' field accesses
    (a context, as ``on_device``, so that grad, optimize and batch need not thread a flag)."""
    token = _checked.set(on)
    try:
        yield
    finally:
        _checked.reset(token)


def bounds_checks() -> bool:
    return _checked.get()
