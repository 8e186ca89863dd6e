"""Draw a 3-D MPM robot run (scenes/diffmpm3d.yaml, liquid.yaml) as a person reads it: each
frame's particles from the side (x-y, nearer z drawn on top) and from above (x-z), muscles
coloured by their actuation at that step (blue: contracting, act < 0; red: act > 0), the
passive body grey, fluid light blue. Writes OUT/frame-NNNN.png for a few frames and
OUT/animation.gif for all of them.

    python bench/robots/mpm3d_figure.py RUN_DIR OUT [--frames 0,32,63]

RUN_DIR is a `simrun run` folder (frames.npz, state.npz, scene.yaml); the actuations are
recomputed from the controller's weights in state.npz (act = tanh(sum_j w_j sin(omega t +
2 pi j / 4) + b), the scene's omega and dt).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from PIL import Image  # noqa: E402


def actuations(state, scene: dict, steps: np.ndarray) -> np.ndarray:
    """(frames, muscles): the controller's output at each frame's step."""
    w, b = state["field:weights"], state["field:bias"]
    omega = float(scene["controller"].get("params", {}).get("omega", 40.0))
    phase = omega * steps[:, None] * float(scene["dt"]) + \
        2 * np.pi / w.shape[1] * np.arange(w.shape[1])[None, :]
    return np.tanh(np.sin(phase) @ w.T + b)


def colours(act: np.ndarray, actuator: np.ndarray, kind: np.ndarray) -> np.ndarray:
    rgba = np.tile([0.55, 0.55, 0.55, 1.0], (len(actuator), 1))
    rgba[kind == 0] = [0.55, 0.75, 1.0, 0.5]
    muscle = actuator >= 0
    rgba[muscle] = colormaps["coolwarm"](0.5 + 0.5 * act[actuator[muscle]])
    return rgba


def draw(fig, x: np.ndarray, rgba: np.ndarray, title: str, floor: float) -> None:
    fig.clear()
    side, top = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1]})
    for ax, (a, b), order, label in ((side, (0, 1), np.argsort(x[:, 2]), "y"),
                                     (top, (0, 2), np.argsort(x[:, 1]), "z")):
        ax.scatter(x[order, a], x[order, b], s=1.2, c=rgba[order], linewidths=0)
        ax.set_xlim(0.0, 1.0)
        ax.set_aspect("equal")
        ax.set_xlabel("x")
        ax.set_ylabel(label)
    side.axhspan(0.0, floor, color="0.85", zorder=0)
    side.set_ylim(0.0, 0.45)
    side.set_title("side (nearer z on top)", fontsize=9)
    top.set_ylim(0.1, 0.75)
    top.set_title("from above", fontsize=9)
    fig.suptitle(title, fontsize=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--frames", default="0,-1")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    scene = yaml.safe_load((args.run / "scene.yaml").read_text())
    state, frames = np.load(args.run / "state.npz"), np.load(args.run / "frames.npz")
    steps, xs = frames["step"], frames["x"]
    act = actuations(state, scene, steps)
    actuator, kind = state["field:actuator"], state["field:particle_type"]
    params = scene["step_kernels"].get("params", {})
    floor = params.get("bound", 3) / params.get("n_grid", 64)
    fig = plt.figure(figsize=(9, 3.6), dpi=100)
    chosen = {int(i) % len(steps) for i in args.frames.split(",")}
    images = []
    for i, (step, x) in enumerate(zip(steps, xs)):
        solid = kind == 1
        title = (f"{scene.get('name', '')}: step {int(step)}, solid centre x = "
                 f"{x[solid, 0].mean():.4f}  (muscles: blue act < 0, red act > 0)")
        draw(fig, x, colours(act[i], actuator, kind), title, floor)
        fig.canvas.draw()
        image = Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3])
        images.append(image.quantize(255))
        if i in chosen:
            image.save(args.out / f"frame-{int(step):04d}.png")
    images[0].save(args.out / "animation.gif", save_all=True, append_images=images[1:],
                   duration=80, loop=0)
    print(f"wrote {len(chosen)} frames and animation.gif ({len(images)} frames) to {args.out}")


if __name__ == "__main__":
    main()
