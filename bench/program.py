"""The shape every benchmark builder returns, shared by programs.py and p2g.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Program:
    """Callables closed over one module's fields.

    ``run`` is the timed forward call; ``check`` reruns it from a fixed state and returns a
    scalar so the two modules' results can be compared; ``grad`` (optional) is the timed
    backward call, valid after ``run``; ``grad_check`` returns a scalar summary of gradients.
    """

    run: Callable[[], None]
    check: Callable[[], float] | None = None
    grad: Callable[[], None] | None = None
    grad_check: Callable[[], float] | None = None
