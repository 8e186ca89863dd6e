"""Write the grid scenes' images: text drawn with matplotlib, grey PNGs of the grid's shape
(row i of the image is element [i, :] of the field).

    python bench/grid_targets.py        # scenes/wave_target.png, smoke_target.png, smoke_start.png

Rerun it to redraw them; the scenes read them as they are (scenes/README.md, "Grids")."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

SCENES = Path(__file__).resolve().parent.parent / "simrun" / "scenes"


def text_image(text: str, size: int, fontsize: float) -> np.ndarray:
    """White bold `text` on black, size x size pixels, grey levels 0..255."""
    fig = plt.figure(figsize=(1, 1), dpi=size)
    fig.patch.set_facecolor("black")
    fig.text(0.5, 0.5, text, color="white", fontsize=fontsize, fontweight="bold",
             ha="center", va="center", family="DejaVu Sans")
    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    plt.close(fig)
    return rgba[:, :, 0].copy()


def disc(size: int, centre: tuple[float, float], radius: float) -> np.ndarray:
    """A soft disc of smoke (grey levels 0..255), centre and radius in pixels."""
    i, j = np.mgrid[0:size, 0:size]
    r = np.hypot(i - centre[0], j - centre[1])
    return (255 * np.clip((radius - r) / 4 + 0.5, 0, 1)).astype(np.uint8)


def main() -> None:
    images = {"wave_target.png": text_image("simrun", 256, 14),
              "smoke_target.png": text_image("ti", 128, 40),
              "smoke_start.png": disc(128, (64, 64), 28)}
    for name, pixels in images.items():
        Image.fromarray(pixels, mode="L").save(SCENES / name)
        print(f"{SCENES / name}: {pixels.shape}, mean {pixels.mean() / 255:.4f}")


if __name__ == "__main__":
    main()
