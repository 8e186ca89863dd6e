"""Build the mass-spring robot of `scenes/mass_spring.yaml` (DiffTaichi's robot 2, "C": nine
unit squares of a 0.05 lattice, four of them with actuated vertical edges) and write its
points to `scenes/mass_spring_robot.xyz` and its springs as YAML on stdout.

Points are numbered in the order the squares first use them; each square adds its two
vertical edges (actuated when the square is), then every other pair of its corners, skipping
springs that exist already. The actuated springs are then moved to the front (the scene's
`n_actuated`), keeping their order; `spring_order()` gives that permutation, so a benchmark can
line up the controller's outputs with a program that keeps the springs in creation order.

Run: python bench/robots/mass_spring_geometry.py > /tmp/springs.yaml
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPACING, ORIGIN = 0.05, 0.1
# (column, row, actuated) of each unit square, in the order they are added
SQUARES = [(2, 0, True), (0, 0, True), (0, 1, True), (0, 2, False), (1, 2, False),
           (2, 1, True), (2, 2, False), (2, 3, False), (2, 4, False)]


def build() -> tuple[np.ndarray, list[tuple[int, int, bool]]]:
    """Points (N, 2) and springs (a, b, actuated) in creation order."""
    index: dict[tuple[int, int], int] = {}
    springs: list[tuple[int, int, bool]] = []

    def point(i: int, j: int) -> int:
        return index.setdefault((i, j), len(index))

    def spring(a: int, b: int, actuated: bool) -> None:
        if not any({a, b} == {p, q} for p, q, _ in springs):
            springs.append((a, b, actuated))

    for i, j, actuated in SQUARES:
        a, b, c, d = point(i, j), point(i, j + 1), point(i + 1, j), point(i + 1, j + 1)
        spring(a, b, actuated)
        spring(c, d, actuated)
        for p in (a, b, c, d):
            for q in (a, b, c, d):
                if p != q:
                    spring(p, q, False)
    points = np.array([(ORIGIN + SPACING * i, ORIGIN + SPACING * j) for i, j in index])
    return points, springs


def spring_order(springs: list[tuple[int, int, bool]]) -> list[int]:
    """Creation indices in scene order: actuated springs first, each group in order."""
    return [k for k, s in enumerate(springs) if s[2]] + \
        [k for k, s in enumerate(springs) if not s[2]]


def main() -> None:
    points, springs = build()
    lines = [f"{len(points)}", 'Properties=species:S:1:pos:R:3 pbc="F F F"']
    lines += [f"X {float(x)!r} {float(y)!r} 0.0" for x, y in points]
    out = Path(__file__).resolve().parents[2] / "scenes" / "mass_spring_robot.xyz"
    out.write_text("\n".join(lines) + "\n")
    order = spring_order(springs)
    pairs = ", ".join(f"[{springs[k][0]}, {springs[k][1]}]" for k in order)
    print(f"# {len(points)} points, {len(springs)} springs, "
          f"{sum(s[2] for s in springs)} actuated (first)")
    print(f"bonds: [{pairs}]")


if __name__ == "__main__":
    main()
