"""Write `scenes/diffmpm3d_robot.npz` and `scenes/liquid_robot.npz`: the particles of
DiffTaichi's diffmpm3d.py robot (a body of three blocks on four legs of four muscles each)
and of liquid.py's (the same robot at 0.8 of its size, in a pool of fluid particles), with
Python's `random` and NumPy's generator seeded with 0 as the originals draw them.

Each block is filled at 3 particles per 1/64 grid cell each way, in (i, j, k) order; solid
particles sit at the centres of the block's sub-cells, fluid ones are uniform in the block
(`random.random()` for x, y, z in turn). Arrays: `x` (N, 3), `actuator` (-1: passive, else
the muscle), `particle_type` (0 fluid, 1 solid), `weights` (16, 4: NumPy's randn * 0.01,
drawn row by row) and `bias` (16, zeros).

Run: python bench/robots/mpm3d_geometry.py
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

DX, DENSITY, N_MUSCLES, N_SIN_WAVES = 1 / 64, 3, 16, 4


class Blocks:
    """Particles added block by block, as the originals add their rectangles."""

    def __init__(self, offset: tuple[float, float, float], rng: random.Random) -> None:
        self.offset, self.rng = offset, rng
        self.x: list[list[float]] = []
        self.actuator: list[int] = []
        self.particle_type: list[int] = []
        self.muscles = 0

    def muscle(self) -> int:
        self.muscles += 1
        return self.muscles - 1

    def add(self, corner, size, actuator: int, solid: bool = True) -> None:
        counts = [int(s / DX * DENSITY) for s in size]
        step = [s / c for s, c in zip(size, counts)]
        for i in range(counts[0]):
            for j in range(counts[1]):
                for k in range(counts[2]):
                    if solid:
                        local = [(n + 0.5) * d for n, d in zip((i, j, k), step)]
                    else:
                        local = [self.rng.random() * s for s in size]
                    self.x.append([c + p + o for c, p, o in zip(corner, local, self.offset)])
                    self.actuator.append(actuator)
                    self.particle_type.append(int(solid))


def robot(blocks: Blocks, size: float) -> None:
    """Four legs (four muscles each) under a body of three passive blocks."""
    for leg in range(4):
        x, z = leg // 2 * size * 2, leg % 2 * size * 2
        for part in range(4):
            blocks.add((x + size / 2 * (part // 2), 0.7 * size / 2 * (part % 2), z),
                       (size / 2, 0.7 * size / 2, size), blocks.muscle())
    for part in range(3):
        blocks.add((size * part, 0.0, size), (size, size * 0.7, size), -1)


def build(liquid: bool) -> dict[str, np.ndarray]:
    random.seed(0)
    np.random.seed(0)
    blocks = Blocks((0.1, 0.05, 0.3), random.Random(0))
    robot(blocks, 0.08 if liquid else 0.1)
    if liquid:
        blocks.add((0.1, 0.15, 0.1), (0.2, 0.05, 0.2), -1, solid=False)
    weights = np.array([[np.random.randn() * 0.01 for _ in range(N_SIN_WAVES)]
                        for _ in range(N_MUSCLES)])
    return {"x": np.array(blocks.x), "actuator": np.array(blocks.actuator, np.int32),
            "particle_type": np.array(blocks.particle_type, np.int32),
            "weights": weights, "bias": np.zeros(N_MUSCLES)}


def main() -> None:
    scenes = Path(__file__).resolve().parents[2] / "scenes"
    for name, liquid in (("diffmpm3d_robot", False), ("liquid_robot", True)):
        arrays = build(liquid)
        np.savez_compressed(scenes / f"{name}.npz", **arrays)
        solid = int(arrays["particle_type"].sum())
        print(f"{name}: {len(arrays['x'])} particles ({solid} solid)")


if __name__ == "__main__":
    main()
