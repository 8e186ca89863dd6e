"""Write the start weights of `scenes/rigid_body.yaml` and `scenes/rigid_body_legs.yaml`
(DiffTaichi rigid_body.py's robots 1 and 2) and print each robot's `bodies:` block.

The robots are read at run time from DiffTaichi's robot_config.py (the mirror, or --source
DIR), never copied here. The weights are what the original draws when Python's and NumPy's
generators are seeded with 0 before it starts (bench/difftaichi_table.py does so): weights1
row by row, N(0, 1) x sqrt(2 / (32 + inputs)) x 0.5, then weights2, x sqrt(2 / (32 +
springs)); biases zero. Stored in double precision; the scene rounds them to f32 as the
original's fields do.

    python bench/robots/rigid_body_geometry.py [--source DIR]
"""

from __future__ import annotations

import argparse
import importlib
import math
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from difftaichi_mass_spring import fetch  # noqa: E402

SCENES = Path(__file__).resolve().parents[2] / "scenes"
ROBOTS = {1: "rigid_body", 2: "rigid_body_legs"}  # the original's robot_id -> scene name
N_HIDDEN, N_SIN_WAVES = 32, 10


def robot(config_dir: Path, robot_id: int) -> tuple[list, list, int]:
    """(objects, springs, head) as the original's robots[robot_id]() builds them."""
    sys.path.insert(0, str(config_dir))
    sys.modules.pop("robot_config", None)  # its lists are module globals: a fresh import
    config = importlib.import_module("robot_config")
    return config.robots[robot_id]()


def weights(n_objects: int, n_springs: int) -> dict[str, np.ndarray]:
    """The original's draw after random.seed(0), np.random.seed(0)."""
    random.seed(0)
    np.random.seed(0)
    n_in = N_SIN_WAVES + 6 * n_objects + 2
    w1 = np.array([[np.random.randn() * math.sqrt(2 / (N_HIDDEN + n_in)) * 0.5
                    for _ in range(n_in)] for _ in range(N_HIDDEN)])
    w2 = np.array([[np.random.randn() * math.sqrt(2 / (N_HIDDEN + n_springs)) * 1
                    for _ in range(N_HIDDEN)] for _ in range(n_springs)])
    return {"weights1": w1, "bias1": np.zeros(N_HIDDEN), "weights2": w2,
            "bias2": np.zeros(n_springs)}


def bodies_yaml(objects: list, springs: list) -> str:
    lines = ["bodies:", "  boxes:"]
    for x, half, angle in objects:
        lines.append(f"    - {{position: [{x[0]!r}, {x[1]!r}], halfsize: [{half[0]!r}, "
                     f"{half[1]!r}], angle: {float(angle)!r}}}")
    lines.append("  springs:")
    for a, b, oa, ob, length, k, act in springs:
        head = (f"    - {{a: {a}, b: {b}, offset_a: [{oa[0]!r}, {oa[1]!r}], offset_b: "
                f"[{ob[0]!r}, {ob[1]!r}], stiffness: {k!r}")
        kind = "joint: true" if length == -1 else f"length: {length!r}"
        lines.append(f"{head}, {kind}" + (f", actuation: {act!r}}}" if act else "}"))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--source", type=Path, help="a folder holding robot_config.py")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rigid_body_config_"))
    fetch(args.source, work, ("examples/robot_config.py",))
    for robot_id, name in ROBOTS.items():
        objects, springs, head = robot(work, robot_id)
        np.savez(SCENES / f"{name}_weights.npz", **weights(len(objects), len(springs)))
        print(f"# {name}: robot {robot_id}, head {head}\n{bodies_yaml(objects, springs)}\n")


if __name__ == "__main__":
    main()
