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


def checkerboard(size: int, square: int) -> np.ndarray:
    """Squares of smoke (255) and none (0), `square` pixels wide: (i // s + j // s) % 2."""
    i, j = np.mgrid[0:size, 0:size]
    return (255 * ((i // square + j // square) % 2)).astype(np.uint8)


def main() -> None:
    images = {"wave_target.png": text_image("simrun", 256, 14),
              "smoke_target.png": text_image("ti", 128, 64),
              "smoke_start.png": checkerboard(128, 16)}
    for name, pixels in images.items():
        Image.fromarray(pixels, mode="L").save(SCENES / name)
        print(f"{SCENES / name}: {pixels.shape}, mean {pixels.mean() / 255:.4f}")


if __name__ == "__main__":
    main()
