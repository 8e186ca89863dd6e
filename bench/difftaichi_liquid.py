"""scenes/liquid.yaml beside DiffTaichi's liquid.py under Taichi 1.7.4, from the same start
(scenes/liquid_robot.npz: the robot, the fluid drawn with `random` seeded 0, and the weights
NumPy's randn seeded 0 draws, as the original draws them), with the original's update (plain
descent, learning rate 10). Prints both loss curves and the median time per iteration; the
driver is bench/difftaichi_diffmpm3d.py's, which runs liquid.py's own passes.

    python bench/difftaichi_liquid.py [--iterations 3] [--record] [--from TAICHI_JSON FOLDER]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from difftaichi_diffmpm3d import compare_scene  # noqa: E402


def compare(iterations: int = 3, record: bool = False,
            runs: tuple[Path, Path] | None = None) -> dict:
    return compare_scene("liquid", iterations, record, runs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--from", dest="runs", nargs=2, type=Path)
    args = ap.parse_args()
    compare(args.iterations, args.record, args.runs)
