"""Runtime side of autodiff: launch recording, snapshots of overwritten fields, replay."""

from __future__ import annotations

_state = {"tapes": [], "fwd": []}


def forward_mode_active() -> bool:
    return bool(_state["fwd"])


def before_launch(kernel, args, compiled) -> None:
    for t in _state["tapes"]:
        t.record(kernel, args)


def run_grad(kernel, args) -> None:
    mode = "fwd_reverse" if forward_mode_active() else "reverse"
    compiled, flat, arrays = kernel.prepare(args, mode)
    compiled.launch(flat, arrays)
