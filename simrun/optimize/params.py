"""The tuned KEYs as one flat vector: packing, bounds, and the scene (and start state) that a
vector stands for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simrun.keys import Key, parse_key, value_of, with_checked_values, with_role
from simrun.scene import Scene, SceneError, initial_state

# (scene, field names) -> each allocated field's start value (jobs.grad.field_start_values)
FieldStarts = Callable[[Scene, list[str]], dict[str, np.ndarray]]


@dataclass
class Layout:
    """Where each KEY lives in the flat vector, and its shape (() for scalars)."""

    keys: list[Key]
    shapes: list[tuple[int, ...]]
    scene: Scene  # the scene as loaded: values not tuned come from it
    field_starts: dict[str, np.ndarray]  # fields.<name> KEY -> the allocated start value

    @classmethod
    def of(cls, scene: Scene, field_start_values: FieldStarts) -> Layout:
        """The layout of `scene.optimize.parameters`; `field_start_values` gives the start
        of any allocated field among them (passed in: it builds the scene's System)."""
        opt = scene.optimize
        keys = []
        for text in opt.parameters:
            try:
                keys.append(parse_key(scene, text))
            except SceneError as exc:
                raise SceneError(f"{opt.where.get(text, scene.source)}: optimize.parameters: "
                                 f"{exc}") from None
        names = [k.name for k in with_role(keys, "field")]
        try:
            starts = field_start_values(scene, names) if names else {}
        except SceneError as exc:
            first = with_role(keys, "field")[0].text
            raise SceneError(f"{opt.where.get(first, scene.source)}: optimize.parameters: "
                             f"{exc}") from None
        field_starts = {k.text: starts[k.name] for k in with_role(keys, "field")}
        shapes = [np.shape(cls._start_value(scene, field_starts, k)) for k in keys]
        return cls(keys, shapes, scene, field_starts)

    @staticmethod
    def _start_value(scene: Scene, field_starts: dict, key: Key):
        """The KEY's value before tuning: the scene's, or the allocated field's start."""
        return field_starts[key.text] if key.spec.lives == "fields" else value_of(scene, key)

    @property
    def sizes(self) -> list[int]:
        return [int(np.prod(s)) for s in self.shapes]

    def initial(self) -> np.ndarray:
        return self.pack({k.text: self._start_value(self.scene, self.field_starts, k)
                          for k in self.keys})

    def fields_at(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        """The tuned fields' values (by field name) that the vector stands for."""
        return {k.name: np.asarray(v) for k, v in zip(self.keys, self.unpack(vector).values())
                if k.spec.lives == "fields"}

    def pack(self, values: dict) -> np.ndarray:
        return np.concatenate([np.ravel(np.asarray(values[k.text], float)) for k in self.keys])

    def unpack(self, vector: np.ndarray) -> dict[str, np.ndarray | float]:
        out, i = {}, 0
        for key, shape, size in zip(self.keys, self.shapes, self.sizes):
            part = vector[i:i + size]
            out[key.text] = float(part[0]) if shape == () else part.reshape(shape).copy()
            i += size
        return out

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low, high = [], []
        for key, size in zip(self.keys, self.sizes):
            lo, hi = self.scene.optimize.bounds.get(key.text, (-np.inf, np.inf))
            low.append(np.full(size, lo))
            high.append(np.full(size, hi))
        return np.concatenate(low), np.concatenate(high)

    def check_start(self, vector: np.ndarray) -> None:
        """The start must satisfy the bounds (moving it silently would hide a typo)."""
        low, high = self.bounds()
        for key, part_lo, part_hi, part in self._parts(low, high, vector):
            if np.any(part < part_lo) or np.any(part > part_hi):
                where = self.scene.optimize.where.get(key.text, str(self.scene.source))
                raise SceneError(f"{where}: the starting value of '{key.text}' "
                                 f"({np.round(part, 6).tolist()}) lies outside its bounds "
                                 f"[{part_lo[0]:g}, {part_hi[0]:g}]. Change the start or the "
                                 "bounds.")

    def _parts(self, *vectors):
        i = 0
        for key, size in zip(self.keys, self.sizes):
            yield (key, *(v[i:i + size] for v in vectors))
            i += size

    def scene_at(self, vector: np.ndarray) -> tuple[Scene, tuple[np.ndarray, np.ndarray] | None]:
        """The scene with the vector's values written in (refused where a kernel's LIMITS
        no longer hold: `with_checked_values`), and the start (x0, v0) when state.x0 or
        state.v0 is tuned (else None: the scene's own start)."""
        start, moved = {}, []
        for key, value in self.unpack(vector).items():
            k = next(k for k in self.keys if k.text == key)
            if k.spec.lives in ("x0", "v0"):
                start[k.spec.lives] = value
            elif k.spec.lives == "scene":  # fields_at gives the fields
                moved.append((k, value))
        scene = with_checked_values(self.scene, moved, "the optimizer")
        if not start:
            return scene, None
        x0, v0 = initial_state(scene)
        return scene, (start.get("x0", x0), start.get("v0", v0))
