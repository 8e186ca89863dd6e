"""Matplotlib (Agg) renderers for saved runs: frames, animation and energy plots.

Why Agg only: renders happen on headless machines and in tests; no pyplot state, no display.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

import numpy as np
import yaml

from simrun.outputs.units import units_of
from simrun.render.animation import render_animation
from simrun.render.bodies import bodies_of, render_bodies
from simrun.render.energy import EnergyPlot, render_energy
from simrun.render.frames import (
    Box,
    Shapes,
    as_positions_frames,
    depth_range,
    fit_limits,
    render_frame,
    typical_spacing,
)
from simrun.render.grids import render_grids

__all__ = ["Shapes", "render_animation", "render_energy", "render_frame", "render_run"]

TRAILS_MAX_PARTICLES = 64  # last.png draws paths of free particles up to this many


def _topology(run_dir: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    path = run_dir / "topology.npz"
    if not path.exists():
        return None, None
    with np.load(path) as topo:
        return (
            topo["bonds"] if "bonds" in topo.files else None,
            topo["triangles"] if "triangles" in topo.files else None,
        )


def scene_of(run_dir: Path) -> dict:
    """The run's scene.yaml as a dict ({} when missing or unreadable)."""
    with contextlib.suppress(OSError, ValueError, yaml.YAMLError):
        scene = yaml.safe_load((run_dir / "scene.yaml").read_text(encoding="utf-8"))
        if isinstance(scene, dict):
            return scene
    return {}


def run_info(run_dir: Path) -> dict | None:
    """The run's run.json (None when missing or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        return info if isinstance(info, dict) else None
    return None


def run_meta(scene: dict, info: dict | None) -> tuple[str, Shapes]:
    """The scene's name and the scenery to draw, from the run's scene.yaml and run.json
    (``scene_of``, ``run_info``: either may be empty, bare frames are still drawn)."""
    name, shapes = str(scene.get("name") or ""), Shapes()
    boundary = scene.get("boundary")
    if isinstance(boundary, dict) and boundary.get("type") in ("reflect", "periodic"):
        shapes = Shapes.from_dict({"boxes": [[boundary.get("low"), boundary.get("high")]]})
    extra = Shapes.from_dict((info or {}).get("shapes"))
    extra.boxes = shapes.boxes + extra.boxes
    return name, extra


def _number(value: object, default: float) -> float:
    try:
        return float(value)  # type: ignore[arg-type]  # anything else: the default
    except (TypeError, ValueError):
        return default


def energy_plot(scene: dict, info: dict | None) -> EnergyPlot:
    """What the run's energy plot shows: a temperature panel where a temperature means
    something (a thermostat, a thermal start, or a periodic box, and more than one body),
    energies per particle for a periodic many-particle system, and the drift panel of the
    quantity the run checked (run.json's ``energy_drift``: none when it conserves nothing);
    from the run's scene.yaml and run.json (``scene_of``, ``run_info``)."""
    particles = scene.get("particles") if isinstance(scene.get("particles"), dict) else {}
    integrator = scene.get("integrator")
    integrator = integrator if isinstance(integrator, dict) else {}
    initial = scene.get("initial") if isinstance(scene.get("initial"), dict) else {}
    boundary = scene.get("boundary") if isinstance(scene.get("boundary"), dict) else {}
    count = int(_number(particles.get("count"), 0))
    periodic = boundary.get("type") == "periodic"
    target: float | None = _number(integrator.get("temperature"), math.nan)
    target = None if math.isnan(target) else target
    thermal = target is not None or _number(initial.get("temperature"), 0.0) > 0 or periodic
    drift: str | None = "auto"
    if info is not None and info.get("status") in ("ok", "failed", "interrupted"):
        checked = info.get("energy_drift")
        drift = checked.get("quantity", "total") if isinstance(checked, dict) else None
    return EnergyPlot(units=units_of(scene.get("units")),
                      dim=int(_number(particles.get("dim"), 3)), count=count,
                      per_particle=periodic and count > 1, temperature=thermal and count > 1,
                      target_temperature=target, drift=drift)


def render_run(
    run_dir: str | os.PathLike, *, box: Box | None = None, max_frames: int = 60, fps: float = 15
) -> list[Path]:
    """Render first.png, last.png, energy.png and animation.gif into `run_dir`.

    Each image is written only when its inputs exist (frames.npz, thermo.csv or energy.csv:
    the energy plot uses thermo.csv when the run has one); returns the
    paths written. Raises FileNotFoundError when the directory holds neither. The stills and
    the animation share one view (limits over the whole run, marker sizes from the first
    frame's particle spacing); last.png also shows each particle's path when there are few.
    """
    run_dir = Path(run_dir)
    frames, energy = run_dir / "frames.npz", run_dir / "thermo.csv"
    if not energy.exists():
        energy = run_dir / "energy.csv"
    if not frames.exists() and not energy.exists():
        raise FileNotFoundError(f"{run_dir}: no frames.npz or energy.csv to render")
    scene, info = scene_of(run_dir), run_info(run_dir)  # each file parsed once
    name, shapes = run_meta(scene, info)
    labels = units_of(scene.get("units"))
    written: list[Path] = []
    x = np.zeros((0, 0, 2))
    bonds = triangles = limits = spacing = angles = None
    if frames.exists():
        bonds, triangles = _topology(run_dir)
        with np.load(frames) as npz:
            if "x" in npz.files:  # a run with outputs.positions: false has none to draw
                x = as_positions_frames(npz["x"])
            step = npz["step"] if "step" in npz.files else np.arange(len(x))
            time = npz["time"] if "time" in npz.files else None
            angles = npz["angle"] if "angle" in npz.files else None
    if len(x) and angles is not None and bodies_of(scene):  # rigid boxes: their own pictures
        frame_info = {"step": step, **({"time": time} if time is not None else {})}
        written += render_bodies(run_dir, scene, x, angles, frame_info, shapes=shapes,
                                 name=name, units=labels, max_frames=max_frames, fps=fps)
        x = np.zeros((0, 0, 2))  # drawn: the particle pictures below are skipped
    if len(x) and not x.shape[1]:  # a grid scene without particles: its grids are drawn
        x = np.zeros((0, 0, 2))
    if len(x):
        # Whole-run limits, so first.png, last.png and the animation are directly comparable.
        limits = fit_limits(x, box, shapes=shapes)
        spacing = typical_spacing(x[0])
        depth = depth_range(x)
        free = bonds is None and triangles is None and x.shape[1] <= TRAILS_MAX_PARTICLES
        for label, i in (("first", 0), ("last", len(x) - 1)):
            title = f"{name}: " if name else ""
            title += f"{label} frame, step {int(step[i])}"
            if time is not None:
                title += f", t = {float(time[i]):.4g}"
            written.append(
                render_frame(
                    x[i],
                    bonds=bonds,
                    triangles=triangles,
                    title=title,
                    path=run_dir / f"{label}.png",
                    shapes=shapes,
                    limits=limits,
                    spacing=spacing,
                    depth=depth,
                    trails=x[: i + 1] if free and label == "last" and i > 0 else None,
                    units=labels,
                )
            )
    grids_only = "particles" not in scene and bool(scene.get("grids"))  # no energies to plot
    if energy.exists() and not grids_only:
        written.append(render_energy(energy, run_dir / "energy.png", title=name,
                                     plot=energy_plot(scene, info)))
    if len(x):
        written.append(
            render_animation(
                frames,
                run_dir / "animation.gif",
                bonds=bonds,
                triangles=triangles,
                max_frames=max_frames,
                fps=fps,
                shapes=shapes,
                name=name,
                limits=limits,
                spacing=spacing,
                units=labels,
            )
        )
    if frames.exists():
        written += render_grids(frames, run_dir, scene, labels, max_frames, fps)
    return written
