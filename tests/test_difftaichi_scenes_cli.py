"""Issue 46's six scenes through the command line as a user trains them: `simrun optimize`
logs its progress, draws loss.png and the trained episode's pictures, and a training
stopped after 2 iterations and continued by `simrun resume` gives the unbroken training's
loss.csv and params.npz bit for bit. Small versions of each scene (a 24^2 wave, a 16^2
smoke, a few hundred steps of the others, a 192-particle MPM robot on a 16^3 grid) run
the shipped kernels on a fraction of the work."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import REPO, simrun
from PIL import Image

SCENES = REPO / "simrun" / "scenes"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scene_mpm3d import small_robot  # noqa: E402


def _squares(size: int, square: int, shift: int = 0) -> np.ndarray:
    i, j = np.mgrid[0:size, 0:size]
    return (255 * (((i + shift) // square + j // square) % 2)).astype(np.uint8)


def _sets(*overrides: str) -> list[str]:
    return [a for s in overrides for a in ("--set", s)]


def _wave(tmp_path: Path) -> tuple[list[str], list[str]]:
    return [str(SCENES / "wave.yaml")], _sets(
        "grids.water.shape=[24,24]", "grids.water.fields.target={value: 0.25, frames: false}",
        "steps=10")


def _smoke(tmp_path: Path) -> tuple[list[str], list[str]]:
    """16^2 cells: a checkerboard of 4-cell squares to move onto one shifted by 2 rows."""
    Image.fromarray(_squares(16, 4), mode="L").save(tmp_path / "start.png")
    Image.fromarray(_squares(16, 4, 2), mode="L").save(tmp_path / "goal.png")
    return [str(SCENES / "smoke.yaml")], _sets(
        "grids.fluid.shape=[16,16]", f"grids.fluid.fields.smoke={{image: {tmp_path}/start.png}}",
        f"grids.fluid.fields.target={{image: {tmp_path}/goal.png, frames: false}}", "steps=6",
        "optimize.lr=4.0")


def _short(name: str, steps: int):
    def scene(tmp_path: Path) -> tuple[list[str], list[str]]:
        return [str(SCENES / f"{name}.yaml")], _sets(f"steps={steps}")
    return scene


def _mpm(name: str, fluid: bool):
    def scene(tmp_path: Path) -> tuple[list[str], list[str]]:
        path = small_robot(tmp_path, name, fluid)
        return [str(path), "--allow-outside"], _sets("step_kernels.params.n_grid=16",
                                                      "steps=20")
    return scene


# scene -> (its command-line arguments, its pictures in the trained episode)
EPISODE = ("first.png", "last.png", "animation.gif")
CASES = {
    "wave": (_wave, ("height.png", "height.gif", "height_next.png")),
    "smoke": (_smoke, ("smoke.png", "smoke.gif", "velocity.png", "velocity.gif")),
    "electric": (_short("electric", 60), EPISODE),
    "rigid_body": (_short("rigid_body", 150), EPISODE),
    "rigid_body_legs": (_short("rigid_body_legs", 150), EPISODE),
    "diffmpm3d": (_mpm("diffmpm3d", False), EPISODE),
    "liquid": (_mpm("liquid", True), EPISODE),
}


def _not_blank(path: Path) -> bool:
    """A picture with more than one colour in it (a drawn figure, not an empty canvas)."""
    with Image.open(path) as img:
        return float(np.asarray(img.convert("L"), dtype=float).std()) > 1.0


@pytest.mark.parametrize("name", list(CASES))
def test_optimize_draws_logs_and_resumes_bit_for_bit(tmp_path: Path, name: str) -> None:
    make, pictures = CASES[name]
    scene, sets = make(tmp_path)
    whole = simrun("optimize", *scene, *sets, "--iterations", "4", "--out", "whole",
                   cwd=tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    short = simrun("optimize", *scene, *sets, "--iterations", "2", "--no-render", "--out",
                   "cut", cwd=tmp_path, timeout=600)
    assert short.returncode == 0, short.stdout + short.stderr
    resumed = simrun("resume", "cut", "--iterations", "4", *scene[1:], cwd=tmp_path,
                     timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "replayed" in resumed.stdout

    rows = {d: np.loadtxt(tmp_path / d / "loss.csv", delimiter=",", skiprows=1)
            for d in ("whole", "cut")}
    assert rows["whole"].shape[0] == 5 and np.isfinite(rows["whole"][:, 1]).all()  # 0..4
    np.testing.assert_array_equal(rows["cut"][:, :3], rows["whole"][:, :3])  # it., loss, |g|
    with np.load(tmp_path / "whole" / "params.npz") as a, \
            np.load(tmp_path / "cut" / "params.npz") as b:
        assert sorted(a.files) == sorted(b.files) and len(a["iteration"]) == 5
        for key in a.files:
            assert a[key].tobytes() == b[key].tobytes(), key
        moved = [k for k in a.files if k not in ("iteration", "loss")
                 and np.abs(a[k][-1] - a[k][0]).max() > 0]
        assert moved  # the optimiser stepped

    last = (tmp_path / "whole" / "progress.log").read_text().splitlines()[-1]
    assert re.search(r"iteration 4/4, loss \S+", last), last
    for picture in ("loss.png", *(f"episode/{p}" for p in pictures)):
        assert _not_blank(tmp_path / "whole" / picture), picture


def test_a_file_named_twice_is_copied_once_and_a_resume_plans_the_same_copy(
        tmp_path: Path) -> None:
    """electric.yaml's start file gives both the initial state and the fields: the job
    folder holds one copy that scene.yaml names in both places, and the folder's own
    scene.yaml plans that same copy again (it planned a second, electric_start_2.npz,
    which a resume then planned as electric_start_2_2.npz and refused as a changed scene)."""
    from simrun.outputs.provenance import plan_sources, write_job_scene
    from simrun.scene import load_scene

    write_job_scene(tmp_path / "job", load_scene(SCENES / "electric.yaml"))
    assert sorted(p.name for p in (tmp_path / "job" / "inputs").iterdir()) == \
        ["electric_start.npz"]
    again = load_scene(tmp_path / "job" / "scene.yaml", allow_outside=True)
    assert again.initial.options["path"] == str(tmp_path / "job" / "inputs" /
                                                "electric_start.npz")
    assert {str(p) for p in again.fields.values()} == {again.initial.options["path"]}
    assert [s.copy for s in plan_sources(again)] == ["kernels/electric.py",
                                                     "inputs/electric_start.npz"]
