"""Write `scenes/electric_start.npz`: the start of `scenes/electric.yaml` as DiffTaichi's
electric.py draws it with Python's `random` seeded with 0 (it draws no NumPy numbers).

The original draws, in this order: 10 unused tasks (4 numbers each) when it is imported,
the two weight matrices, uniform in [-0.15, 0.15) (`weight1` (8, 64) then `weight2` (64, 8),
row by row), then, for each forward pass, the three corners of the goal's path (uniform in
[0.2, 0.8)^2): the path runs from the first to the second corner in 256 steps and on to the
third in 256 more, and the particle starts at the first. The scene takes the first path;
the original draws a new one for every training iteration (the scene trains on one task).

Arrays: `x` (1, 2), `weight1`, `bias1` (64), `weight2`, `bias2` (8), `goal` and `goal_v`
(512, 2: the goal's position and its segment's direction at each step).

Run: python bench/robots/electric_start.py
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

N_HIDDEN, N_ELECTRODES, N_INPUTS = 64, 8, 8
STEPS, SEGMENT = 512, 256


def corner(rng: random.Random) -> list[float]:
    return [0.2 + rng.random() * 0.6, 0.2 + rng.random() * 0.6]


def path(corners: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """The goal's position and its segment's (unscaled) direction at each step."""
    goal, goal_v = np.zeros((STEPS, 2)), np.zeros((STEPS, 2))
    for s in range(STEPS // SEGMENT):
        a, b = np.array(corners[s]), np.array(corners[s + 1])
        for j in range(SEGMENT):
            goal[s * SEGMENT + j] = (1 - j / SEGMENT) * a + j / SEGMENT * b
            goal_v[s * SEGMENT + j] = b - a
    return goal, goal_v


def draw(seed: int = 0) -> dict[str, np.ndarray]:
    rng = random.Random(seed)
    for _ in range(10):  # the original's unused task list, drawn at import
        corner(rng), corner(rng)
    weight1 = np.array([[(rng.random() - 0.5) * 0.3 for _ in range(N_HIDDEN)]
                        for _ in range(N_INPUTS)])
    weight2 = np.array([[(rng.random() - 0.5) * 0.3 for _ in range(N_ELECTRODES)]
                        for _ in range(N_HIDDEN)])
    corners = [corner(rng) for _ in range(STEPS // SEGMENT + 1)]
    goal, goal_v = path(corners)
    return {"x": np.array([corners[0]]), "weight1": weight1, "bias1": np.zeros(N_HIDDEN),
            "weight2": weight2, "bias2": np.zeros(N_ELECTRODES), "goal": goal,
            "goal_v": goal_v}


def main() -> None:
    out = Path(__file__).resolve().parents[2] / "scenes" / "electric_start.npz"
    np.savez(out, **draw())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
