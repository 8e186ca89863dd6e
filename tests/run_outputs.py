"""Shared check of a run folder: every output the issue lists exists and is valid.

Used by test_cli.py (the CLI in this environment) and test_readme.py (the README's command in
a fresh virtual environment).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from simrun.outputs import read_energy_csv, read_xyz

RUN_FILES = {"scene.yaml", "frames.npz", "trajectory.xyz", "energy.csv", "run.json", "state.npz"}
PICTURES = {"first.png", "last.png", "energy.png", "animation.gif"}
ENERGY_COLUMNS = ("step", "time", "kinetic", "potential", "total")


def check_run_dir(out: Path, *, name: str, steps: int, every: int, n: int, dim: int,
                  max_drift: float) -> dict:
    """Assert `out` holds a finished run of `steps` steps with a frame every `every` steps.

    Returns run.json. `max_drift` bounds |E_last - E_first| / |E_first| (a conservative scene).
    """
    written = {p.name for p in out.iterdir()}
    assert RUN_FILES | PICTURES <= written, f"missing: {sorted(RUN_FILES | PICTURES - written)}"
    assert not [p for p in written if ".tmp" in p], "temporary files left behind"
    frame_steps = list(range(0, steps + 1, every))

    scene = yaml.safe_load((out / "scene.yaml").read_text())
    assert scene["name"] == name and scene["steps"] == steps and scene["version"] == 1

    with np.load(out / "frames.npz") as frames:
        assert frames["step"].tolist() == frame_steps
        assert np.allclose(frames["time"], np.array(frame_steps) * scene["dt"])
        assert frames["x"].shape == (len(frame_steps), n, dim)
        assert frames["v"].shape == frames["x"].shape
        assert np.isfinite(frames["x"]).all() and np.isfinite(frames["v"]).all()
        x_last = frames["x"][-1]

    xyz = read_xyz(out / "trajectory.xyz")
    assert [int(f["info"]["Step"]) for f in xyz] == frame_steps
    assert xyz[-1]["pos"].shape == (n, 3)
    np.testing.assert_allclose(xyz[-1]["pos"][:, :dim], x_last, rtol=1e-6, atol=1e-7)

    assert (out / "energy.csv").read_text().splitlines()[0] == ",".join(ENERGY_COLUMNS)
    energy = read_energy_csv(out / "energy.csv")
    assert energy["step"].tolist() == frame_steps
    np.testing.assert_allclose(energy["total"], energy["kinetic"] + energy["potential"],
                               rtol=1e-9, atol=1e-12)
    drift = abs(energy["total"][-1] - energy["total"][0]) / abs(energy["total"][0])
    assert drift < max_drift, drift

    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "ok" and info["error"] is None
    assert info["steps_done"] == steps and info["frames"] == len(frame_steps)
    assert info["seed"] == scene["seed"]
    assert set(info["versions"]) == {"simrun", "python", "numpy", "llvmlite"}
    assert info["timings"]["wall_s"] > 0 and info["timings"]["render_s"] > 0

    for png in ("first.png", "last.png", "energy.png"):
        with Image.open(out / png) as im:
            assert im.format == "PNG" and im.width >= 300 and im.height >= 300
            pixels = np.asarray(im.convert("L"))
            assert pixels.std() > 5, f"{png} is blank"
    with Image.open(out / "animation.gif") as gif:
        assert gif.format == "GIF" and gif.n_frames == min(len(frame_steps), 60)
    return info
