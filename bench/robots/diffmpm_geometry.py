"""Write `scenes/diffmpm_robot.npz`: the particles of DiffTaichi diffmpm.py's walking robot
(a 0.3 x 0.1 body on four 0.05 x 0.1 legs, offset (0.1, 0.03), two particles per grid cell of
1/128 each way) as `x`, and each particle's muscle as `actuator` (-1: the body; legs 0-3).

Run: python bench/robots/diffmpm_geometry.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

DX, OFFSET = 1 / 128, (0.1, 0.03)
# (x, y, width, height, muscle) of each block, in the order they are added
BLOCKS = [(0.0, 0.1, 0.3, 0.1, -1), (0.0, 0.0, 0.05, 0.1, 0), (0.05, 0.0, 0.05, 0.1, 1),
          (0.2, 0.0, 0.05, 0.1, 2), (0.25, 0.0, 0.05, 0.1, 3)]


def build() -> tuple[np.ndarray, np.ndarray]:
    points, muscles = [], []
    for x, y, w, h, muscle in BLOCKS:
        nw, nh = int(w / DX) * 2, int(h / DX) * 2
        for i in range(nw):
            for j in range(nh):
                points.append((x + (i + 0.5) * (w / nw) + OFFSET[0],
                               y + (j + 0.5) * (h / nh) + OFFSET[1]))
                muscles.append(muscle)
    return np.array(points), np.array(muscles, dtype=np.int32)


def main() -> None:
    x, actuator = build()
    out = Path(__file__).resolve().parents[2] / "scenes" / "diffmpm_robot.npz"
    np.savez(out, x=x, actuator=actuator)
    print(f"{len(x)} particles, muscles {np.bincount(actuator + 1).tolist()}")


if __name__ == "__main__":
    main()
