"""Autodiff as IR transforms: reverse mode (grad kernels) and forward mode (dual numbers)."""

from __future__ import annotations


def transform(kir, mode: str, name: str):
    if mode == "primal":
        return kir
    if mode == "reverse":
        from .reverse import reverse_kernel

        return reverse_kernel(kir)
    if mode == "fwd":
        from .forward import forward_kernel

        return forward_kernel(kir)
    if mode == "fwd_reverse":
        from .forward import forward_kernel
        from .reverse import reverse_kernel

        return forward_kernel(reverse_kernel(kir))
    raise ValueError(mode)
