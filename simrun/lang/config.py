"""ti.init's options that the compiler and the autodiff runtime read (one object, set by
ti.init; a module of its own so that every layer can read it without importing api)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Config:
    debug: bool = False
    fast_math: bool = True
    offline_cache: bool = True
    arch: str = "cpu"


config = Config()


@contextmanager
def _holding(var: ContextVar, value) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


_device: ContextVar[str] = ContextVar("simrun_device", default="cpu")
_checked: ContextVar[bool] = ContextVar("simrun_bounds_checks", default=False)
_ordered: ContextVar[bool] = ContextVar("simrun_ordered_floats", default=True)


def on_device(name: str) -> AbstractContextManager[None]:
    """Run what is inside on `name` ("cpu" or "cuda"): the policy the CLI's --device sets and
    the stepper's ti.init reads (a context, not a global switch)."""
    return _holding(_device, name)


def current_device() -> str:
    return _device.get()


def bounds_checked(on: bool) -> AbstractContextManager[None]:
    """--debug on a job: every System made inside bounds-checks its kernels' field accesses
    (a context, as ``on_device``, so that grad, optimize and batch need not thread a flag)."""
    return _holding(_checked, on)


def bounds_checks() -> bool:
    return _checked.get()


def ordered_floats(on: bool) -> AbstractContextManager[None]:
    """--no-reproducible on a job (``on`` False): every System made inside lets its threads
    add floats into shared entries in the order they reach them (ti.init(deterministic=
    False)). On a GPU the scatters and sums then run on every thread instead of one; the
    last bits may change from run to run and with the thread count."""
    return _holding(_ordered, on)


def floats_ordered() -> bool:
    return _ordered.get()


@contextmanager
def job_policy(options: Mapping[str, Any]) -> Iterator[None]:
    """A job's recorded options ``debug`` (bounds_checked) and ``reproducible``
    (ordered_floats), for every System made inside: one place for run, grad, optimize
    and a batch's tasks, and their resumes."""
    with bounds_checked(bool(options.get("debug"))), \
            ordered_floats(options.get("reproducible", True)):
        yield
