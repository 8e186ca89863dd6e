"""KEYs moved by a job, checked against their kernels' LIMITS as the scene's own values are
at load.

A job that tunes a kernel parameter (an optimizer's step, a fit reweighting its frames to
new parameters) writes values no scene file held: a pair cutoff moved past the neighbour
list's cutoff would be a silently wrong energy (the list holds no pair beyond its cutoff
plus the skin), a sigma moved past the cutoff no Lennard-Jones potential. So every such
write goes through `with_checked_values`, which refuses a broken condition naming the KEY,
the value it was moved to and how to keep it in range.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from simrun.keys.kinds import Key
from simrun.scene import Scene, SceneError
from simrun.stepper.validate import BrokenLimit, broken_limit

# what a condition naming the list's cutoff guards
_LIST_REACH = ("list_cutoff is neighbors.cutoff, and the neighbour list holds no pair beyond it "
               "plus the skin: those pairs would silently drop out of the energy and forces")

# the fix for a job that tunes the KEY
BOUND_IT = ("bound the KEY in the scene's optimize.bounds to where it holds (e.g. 'bounds: "
            "{{{key}: [low, high]}}')")


def with_checked_values(scene: Scene, moved: Iterable[tuple[Key, Any]], by: str,
                        fix: str = BOUND_IT, at: str | None = None) -> Scene:
    """The scene with each KEY's new value written in (`simrun.keys.with_value`), or a
    SceneError (exit 2) where a kernel's LIMITS no longer hold: at the KEY's entry in
    ``optimize.parameters``, naming the KEY, its new value (``by``: what moved it), the
    condition and how to fix it (``fix``, with ``{key}`` for the KEY); ``at``: where the
    KEY was given, if not there."""
    moved = list(moved)
    if not moved:  # nothing moved: the scene's values were checked at load
        return scene
    new = scene
    for key, value in moved:
        new = key.spec.write(new, key, value)  # simrun.keys.with_value
    broken = broken_limit(new)
    if broken is None:
        return new
    raise SceneError(_message(scene, broken, moved, by, fix, at))


def _culprit(broken: BrokenLimit, moved: list[tuple[Key, Any]]) -> tuple[Key, Any] | None:
    """The moved KEY the broken condition names (its pair's, for a species pair)."""
    named = [(k, v) for k, v in moved if k.text.startswith(f"{broken.part}.params.")
             and k.name in broken.values]
    if broken.pair is not None:
        pair = f"[{broken.pair[0]}:{broken.pair[1]}]"
        named = [(k, v) for k, v in named if not k.text.endswith("]") or
                 k.text.endswith(pair)] or named
    return named[-1] if named else None


def _message(scene: Scene, broken: BrokenLimit, moved: list[tuple[Key, Any]], by: str,
             fix: str, at: str | None) -> str:
    found = _culprit(broken, moved)
    texts = [k.text for k, _ in moved]
    key = found[0] if found is not None else moved[-1][0]
    what = f"{key.text} to {float(found[1]):.10g}" if found is not None else \
        f"{', '.join(texts)} (to {', '.join(f'{np.ravel(v)[0]:.10g}' for _, v in moved)})"
    optimize = getattr(scene, "optimize", None)
    where = at or (optimize.where.get(key.text, scene.source) if optimize else scene.source)
    shown = ", ".join(f"{n} = {v:.10g}" for n, v in broken.values.items())
    pair = f" for the species pair {broken.pair[0]},{broken.pair[1]}" if broken.pair else ""
    reach = "list_cutoff" in broken.values
    why = f": {_LIST_REACH}" if reach else ""
    raise_list = "raise 'neighbors.cutoff' so that it holds, or " if reach else ""
    return (f"{where}: {by} moved {what}, but kernel '{broken.ref.name}' "
            f"({broken.ref.path.name}) requires {broken.condition}{pair} (here {shown}){why}. "
            f"To fix it, {raise_list}{fix.format(key=key.text)}.")
