"""ti.init's options that the compiler and the autodiff runtime read (one object, set by
ti.init; a module of its own so that every layer can read it without importing api)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Config:
    debug: bool = False
    fast_math: bool = True
    offline_cache: bool = True
    arch: str = "cpu"


config = Config()
