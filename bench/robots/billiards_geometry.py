"""Write `scenes/billiards_rack.xyz`: the cue ball at (0.1, 0.5) moving at (0.3, 0), and a triangular rack of four
rows (1 + 2 + 3 + 4 balls) of radius 0.03 whose front ball sits at (0.5, 0.5): row i, ball j
at (0.5 + 2 r i, 0.5 + 2 r j - 0.7 r i) (DiffTaichi billiards.py's layout).

Run: python bench/robots/billiards_geometry.py
"""

from __future__ import annotations

from pathlib import Path

RADIUS, ROWS = 0.03, 4
CUE_V = (0.3, 0.0)  # the cue ball's start velocity (kernels/billiards.py's cue_v starts there)


def rack() -> list[tuple[float, float]]:
    balls = [(0.1, 0.5)]
    for i in range(ROWS):
        for j in range(i + 1):
            balls.append((i * 2 * RADIUS + 0.5, j * 2 * RADIUS + 0.5 - i * RADIUS * 0.7))
    return balls


def main() -> None:
    balls = rack()
    speeds = [CUE_V] + [(0.0, 0.0)] * (len(balls) - 1)
    lines = [f"{len(balls)}", 'Properties=species:S:1:pos:R:3:vel:R:3 pbc="F F F"']
    lines += [f"X {x!r} {y!r} 0.0 {vx!r} {vy!r} 0.0" for (x, y), (vx, vy) in zip(balls, speeds)]
    out = Path(__file__).resolve().parents[2] / "scenes" / "billiards_rack.xyz"
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
