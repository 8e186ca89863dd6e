"""What the autodiff runtime is recording now, shared by tape.py and check.py.

The active Tapes and FwdModes, a counter that suspends recording (a replay of the tape by
grad_check, ti.ad.no_grad), and how a snapshot of fields is put back. check.py replays a
tape and tape.py runs the check, so both build on this file rather than on each other.
"""

from __future__ import annotations

_state: dict = {"tapes": [], "fwd": [], "suppress": 0}


def suppress(delta: int) -> None:
    _state["suppress"] += delta


def _restore(snap: dict) -> None:
    for f, (index, arr) in snap.items():
        f.data[index] = arr
