"""Rigid boxes and the springs between them, as a scene's ``bodies:`` section gives them
(read and checked by ``simrun.scene.load_bodies``; the dynamics are kernels,
``simrun.kernels.rigid_body``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_ACTUATION = 0.05  # DiffTaichi's default_actuation


@dataclass(frozen=True)
class Box:
    position: tuple[float, float]
    halfsize: tuple[float, float]
    angle: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"position": list(self.position), "halfsize": list(self.halfsize),
                "angle": self.angle}


@dataclass(frozen=True)
class Spring:
    a: int
    b: int
    offset_a: tuple[float, float]
    offset_b: tuple[float, float]
    stiffness: float
    length: float = -1.0  # -1 for a joint, as DiffTaichi marks them
    actuation: float = DEFAULT_ACTUATION
    joint: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"a": self.a, "b": self.b, "offset_a": list(self.offset_a),
                                "offset_b": list(self.offset_b), "stiffness": self.stiffness,
                                "actuation": self.actuation}
        if self.joint:
            data["joint"] = True
        else:
            data["length"] = self.length
        return data


@dataclass(frozen=True)
class Bodies:
    boxes: tuple[Box, ...]
    springs: tuple[Spring, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"boxes": [b.to_dict() for b in self.boxes],
                "springs": [s.to_dict() for s in self.springs]}

    def masses(self, precision: str) -> tuple[float, ...]:
        """Each box's area 4 hx hy, computed in the scene's precision (as a kernel would)."""
        fp = np.float32 if precision == "f32" else np.float64
        with np.errstate(over="ignore"):  # an inf mass is refused at its box, with no warning
            return tuple(float(fp(4) * fp(b.halfsize[0]) * fp(b.halfsize[1]))
                         for b in self.boxes)




def particles_data(bodies: dict[str, Any], precision: str = "f64") -> dict[str, Any]:
    """The ``particles`` a resolved scene's ``bodies`` (as scene.yaml holds them) stand for:
    their count, dimension 2 and masses (for readers of run folders)."""
    boxes = tuple(Box(tuple(b["position"]), tuple(b["halfsize"]), float(b.get("angle", 0.0)))
                  for b in bodies["boxes"])
    return {"count": len(boxes), "dim": 2, "mass": list(Bodies(boxes).masses(precision))}
