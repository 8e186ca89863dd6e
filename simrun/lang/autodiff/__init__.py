"""Autodiff as IR transforms: reverse mode (grad kernels) and forward mode (dual numbers)."""

from __future__ import annotations

from .forward import forward_kernel
from .reverse import reverse_kernel


def transform(kir, mode: str, name: str, varied: frozenset | None = None):
    """`varied`: forward modes' fields whose tangents may be nonzero (None: every one)."""
    if mode == "primal":
        return kir
    if mode == "reverse":
        return reverse_kernel(kir)
    if mode == "value_reverse":  # the kernel's adds and its gradient in one launch
        return reverse_kernel(kir, with_value=True)
    if mode == "fwd":
        return forward_kernel(kir, varied)
    if mode == "fwd_reverse":
        return forward_kernel(reverse_kernel(kir), varied)
    raise ValueError(mode)
