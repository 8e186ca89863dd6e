"""Taichi's exception names (aliases of simrun's, see errors.py)."""

from ..errors import (
    TaichiAssertionError,
    TaichiCompilationError,
    TaichiIndexError,
    TaichiNameError,
    TaichiRuntimeError,
    TaichiSyntaxError,
    TaichiTypeError,
)

__all__ = ["TaichiAssertionError", "TaichiCompilationError", "TaichiIndexError",
           "TaichiNameError", "TaichiRuntimeError", "TaichiSyntaxError", "TaichiTypeError"]
