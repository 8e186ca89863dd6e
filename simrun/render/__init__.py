"""Matplotlib (Agg) renderers for saved runs: frames, animation and energy plots.

Why Agg only: renders happen on headless machines and in tests; no pyplot state, no display.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from simrun.render.animation import render_animation
from simrun.render.energy import render_energy
from simrun.render.frames import Box, fit_limits, render_frame

__all__ = ["render_animation", "render_energy", "render_frame", "render_run"]


def _topology(run_dir: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    path = run_dir / "topology.npz"
    if not path.exists():
        return None, None
    with np.load(path) as topo:
        return (
            topo["bonds"] if "bonds" in topo.files else None,
            topo["triangles"] if "triangles" in topo.files else None,
        )


def render_run(
    run_dir: str | os.PathLike, *, box: Box | None = None, max_frames: int = 60, fps: float = 15
) -> list[Path]:
    """Render first.png, last.png, energy.png and animation.gif into `run_dir`.

    Each image is written only when its inputs exist (frames.npz, energy.csv); returns the
    paths written. Raises FileNotFoundError when the directory holds neither.
    """
    run_dir = Path(run_dir)
    frames, energy = run_dir / "frames.npz", run_dir / "energy.csv"
    if not frames.exists() and not energy.exists():
        raise FileNotFoundError(f"{run_dir}: no frames.npz or energy.csv to render")
    written: list[Path] = []
    x = np.zeros((0, 0, 2))
    if frames.exists():
        bonds, triangles = _topology(run_dir)
        with np.load(frames) as npz:
            x = npz["x"] if npz["x"].ndim == 3 else npz["x"][..., None]  # (F, N) is 1-D
            step = npz["step"] if "step" in npz.files else np.arange(len(x))
            time = npz["time"] if "time" in npz.files else None
    if len(x):
        # Whole-run limits, so first.png, last.png and the animation are directly comparable.
        limits = fit_limits(x, box)
        still_box = box if box is not None else (limits[:, 0], limits[:, 1])
        for name, i in (("first", 0), ("last", len(x) - 1)):
            title = f"{name}: step {int(step[i])}"
            if time is not None:
                title += f", t = {float(time[i]):.4g}"
            written.append(
                render_frame(
                    x[i],
                    bonds=bonds,
                    triangles=triangles,
                    box=still_box,
                    title=title,
                    path=run_dir / f"{name}.png",
                )
            )
    if energy.exists():
        written.append(render_energy(energy, run_dir / "energy.png"))
    if len(x):
        written.append(
            render_animation(
                frames,
                run_dir / "animation.gif",
                bonds=bonds,
                triangles=triangles,
                max_frames=max_frames,
                fps=fps,
                box=box,
            )
        )
    return written
