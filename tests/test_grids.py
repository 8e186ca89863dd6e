"""Grids as state (issue 46, item 1) through wave.yaml: a scene of grid fields without
particles runs, saves its grids in frames, draws them, resumes bit for bit, differentiates
its initial field (`state.<field>`) against central differences, and refuses a bad
`grids:` block at its line with exit status 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_cli import simrun

from simrun.jobs.grad import scene_gradient
from simrun.jobs.optimize import optimize_scene
from simrun.render import render_run
from simrun.scene import SceneError, load_scene
from simrun.stepper.run import run_scene

SCENES = Path(__file__).resolve().parent.parent / "simrun" / "scenes"
SMALL = ["grids.water.shape=[24,24]",
         "grids.water.fields.target={value: 0.25, frames: false}"]


def _small(*more: str) -> list[str]:
    return [*SMALL, *more]


def test_a_grid_scene_saves_draws_and_resumes_its_grids_bit_for_bit(tmp_path: Path) -> None:
    """A raised pool whose edges fall (p = 0 outside; frames hold every saved grid field
    per frame); a run stopped at step 8 and resumed to 16 gives the unbroken run's bits."""
    bump = "grids.water.fields.height={value: 0.1}"
    whole = load_scene(SCENES / "wave.yaml", _small(bump, "steps=16", "outputs.every=4"))
    run_scene(whole, tmp_path / "whole", threads=1)
    cut = load_scene(SCENES / "wave.yaml", _small(bump, "steps=8", "outputs.every=4"))
    run_scene(cut, tmp_path / "cut", threads=1)
    run_scene(whole, tmp_path / "cut", threads=1, resume=True)
    with np.load(tmp_path / "whole" / "frames.npz") as a, \
            np.load(tmp_path / "cut" / "frames.npz") as b:
        assert sorted(k for k in a.files if k.startswith("grid:")) == \
            ["grid:height", "grid:height_next"]  # frames: false keeps the others out
        assert a["grid:height"].shape == (5, 24, 24)
        assert np.ptp(a["grid:height_next"][-1]) > 0.01  # the edges moved
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])
    drawn = {p.name for p in render_run(tmp_path / "whole")}
    assert {"height.png", "height.gif", "height_next.png", "height_next.gif"} <= drawn
    assert "first.png" not in drawn and "energy.png" not in drawn  # no particles, no energy


def test_the_wave_step_matches_the_leapfrog_formula(tmp_path: Path) -> None:
    """One step from a random field: p2 = 2 p1 + c^2 dt^2 lap(p1) - p0, p = 0 outside (f64,
    so the two sums agree to rounding)."""
    scene = load_scene(SCENES / "wave.yaml", _small("precision=f64", "steps=1"))
    rng = np.random.default_rng(3)
    p0, p1 = rng.normal(size=(2, 24, 24))
    np.savez(tmp_path / "start.npz", height=p0, height_next=p1)
    scene = load_scene(SCENES / "wave.yaml", _small(
        "precision=f64", "steps=1", f"fields={{height: {tmp_path / 'start.npz'}, "
        f"height_next: {tmp_path / 'start.npz'}}}"), allow_outside=True)
    run_scene(scene, tmp_path / "run", threads=1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        height, after = frames["grid:height"][-1], frames["grid:height_next"][-1]
    padded = np.pad(p1, 1)
    dx = scene.grids[0].spacing[0]
    lap = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
           - 4 * p1) / dx ** 2
    expected = 2 * p1 + 340.0 ** 2 * scene.dt ** 2 * lap - p0
    np.testing.assert_array_equal(height, p1)
    np.testing.assert_allclose(after, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_grad_check_of_the_initial_height_field_passes(tmp_path: Path) -> None:
    """`simrun grad --check` of wave's optimised KEY over a short horizon in f64: the
    gradient against central differences and the Taylor test."""
    sets = [a for s in _small("precision=f64", "grids.water.fields.height={value: 0.1}")
            for a in ("--set", s)]
    done = simrun("grad", str(SCENES / "wave.yaml"), "--wrt", "state.height", "--steps", "6",
                  "--check", "--out", str(tmp_path / "g"), *sets, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["check"]["verdict"] == "ok" and record["check"]["taylor"]["verdict"] == "ok"
    assert np.load(tmp_path / "g" / "gradients.npz")["state.height"].shape == (24, 24)


def test_a_misspelt_grid_key_is_exit_2_with_the_spelling(tmp_path: Path) -> None:
    done = simrun("grad", str(SCENES / "wave.yaml"), "--wrt", "state.heigth", "--steps", "2",
                  *[a for s in SMALL for a in ("--set", s)], cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Did you mean state.height" in done.stdout + done.stderr


PARTICLE_KEYS = ("state.x0", "state.v0", "initial.velocity", "particles.mass")


@pytest.mark.parametrize("scene, particle_key, grid_key", [
    ("wave.yaml", "state.x0", "state.height"),
    ("smoke.yaml", "initial.velocity", "state.velocity")])
def test_a_grid_scene_without_particles_offers_no_particle_keys(
        tmp_path: Path, scene: str, particle_key: str, grid_key: str) -> None:
    """A particle KEY does nothing where there are no particles: it is refused, and the
    keys the error lists are the scene's own."""
    done = simrun("grad", str(SCENES / scene), "--wrt", particle_key, "--steps", "2",
                  cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in said, said
    listed = re.search(r"Its keys: (.*?)\.\s*$", said, re.S)
    assert listed, said
    keys = [k.strip() for k in listed.group(1).split(",")]
    assert grid_key in keys and "dt" in keys, keys
    assert not set(PARTICLE_KEYS) & set(keys), keys


GRID = """version: 2
precision: f32
grids:
  water:
    shape: {shape}
    spacing: {spacing}
    fields:
      {fields}
step_kernels: {{kernels: [kernels/wave.py:leap, kernels/wave.py:swap]}}
dt: 1.0e-6
steps: 2
"""
FIELDS = "{height: {}, height_next: {}}"


@pytest.mark.parametrize("shape, spacing, fields, line, message", [
    ("[8]", "0.1", FIELDS, 5, "a grid is 2-D or 3-D"),
    ("[8, 0]", "0.1", FIELDS, 5, "'grids.water.shape[1]' is 0 but must be at least 1"),
    ("[8, 8]", "-0.1", FIELDS, 6, "'grids.water.spacing' is -0.1 but must be greater than 0"),
    ("[8, 8]", "[0.1, 0.1, 0.1]", FIELDS, 6, "has 3 entries but the grid has 2 axes"),
    ("[8, 8]", "0.1", "{height: {colour: 1}, height_next: {}}", 8,
     "unknown key 'colour'"),
    ("[8, 8]", "0.1", "{x: {}, height_next: {}}", 8, "cannot name a grid"),
    ("[8, 8]", "0.1", "{height: {image: wave_target.png}, height_next: {}}",
     8, "is 256 x 256 pixels (rows x columns) but the grid is 8 x 8 cells"),
])
def test_a_bad_grids_block_is_an_error_at_its_line(tmp_path: Path, shape, spacing, fields,
                                                   line, message) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "wave.py").write_text((SCENES.parent / "kernels" / "wave.py")
                                                  .read_text())
    (tmp_path / "wave_target.png").write_bytes((SCENES / "wave_target.png").read_bytes())
    path = tmp_path / "bad.yaml"
    path.write_text(GRID.format(shape=shape, spacing=spacing, fields=fields))
    with pytest.raises(SceneError, match=re.escape(message)) as caught:
        load_scene(path)
    assert f"bad.yaml:{line}:" in str(caught.value)
    if line == 5:  # and through the CLI: one paragraph, exit 2
        done = simrun("check", str(path), cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"bad.yaml:{line}:" in done.stdout + done.stderr


def test_smoke_moved_by_a_uniform_flow_is_the_start_shifted(tmp_path: Path) -> None:
    """A uniform velocity of one cell per step is divergence-free (the projection leaves it)
    and carries the smoke one cell down and right each step, wrapping around: exactly."""
    scene = load_scene(SCENES / "smoke.yaml", [
        "steps=5", "outputs.every=5", "grids.fluid.fields.velocity={components: 2, value: 1.0}"])
    run_scene(scene, tmp_path / "run", threads=1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        smoke, velocity = frames["grid:smoke"], frames["grid:velocity"]
    np.testing.assert_array_equal(smoke[-1], np.roll(smoke[0], (5, 5), axis=(0, 1)))
    np.testing.assert_array_equal(velocity[-1], np.ones((128, 128, 2)))
    assert smoke[0].min() == 0 and smoke[0].max() == 1  # the checkerboard image


def test_grad_check_of_the_initial_velocity_field_passes(tmp_path: Path) -> None:
    """smoke's optimised KEY, a vector grid field, over 3 steps in f64 (from 0.3 cells per
    step, away from the bilinear sampling's kinks at whole cells)."""
    done = simrun("grad", str(SCENES / "smoke.yaml"), "--wrt", "state.velocity", "--steps",
                  "3", "--check", "--out", str(tmp_path / "g"), "--set", "precision=f64",
                  "--set", "grids.fluid.fields.velocity={components: 2, value: 0.3}",
                  cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["check"]["verdict"] == "ok" and record["check"]["taylor"]["verdict"] == "ok"


def test_checkpointed_gradient_of_a_grid_is_the_stored_ones_bits(tmp_path: Path) -> None:
    """--memory / --checkpoints: with 2 stored states the grids are recomputed from them and
    the gradient is the one with every state stored, bit for bit."""
    scene = load_scene(SCENES / "wave.yaml", _small("steps=12",
                                                    "grids.water.fields.height={value: 0.1}"))
    stored = scene_gradient(scene, ["state.height"], threads=1)
    recomputed = scene_gradient(scene, ["state.height"], threads=1, checkpoints=2)
    assert recomputed.snapshots == 2 and stored.snapshots > 2
    assert recomputed.objective == stored.objective
    np.testing.assert_array_equal(recomputed.gradients["state.height"],
                                  stored.gradients["state.height"])


def test_an_interrupted_grid_training_resumes_bit_for_bit(tmp_path: Path) -> None:
    """state.<field> parameters are journaled like any other; best.yaml starts the grid
    field from the trained values (fields: best_fields.npz)."""
    scene = load_scene(SCENES / "wave.yaml", _small("steps=10"))
    whole = optimize_scene(scene, tmp_path / "whole", iterations=4)

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(scene, tmp_path / "cut", iterations=4, progress=interrupt)
    resumed = optimize_scene(scene, tmp_path / "cut", iterations=4, resume=True)
    assert resumed.replayed >= 3 and resumed.losses == whole.losses
    assert whole.losses[-1] < whole.losses[0]
    trained = np.load(tmp_path / "whole" / "best_fields.npz")["height"]
    np.testing.assert_array_equal(np.load(tmp_path / "cut" / "params.npz")["state.height"],
                                  np.load(tmp_path / "whole" / "params.npz")["state.height"])
    best = load_scene(tmp_path / "whole" / "best.yaml")
    assert best.fields["height"].name == "best_fields.npz" and trained.shape == (24, 24)


KERNEL_3D = '''import simrun.lang as ti


@ti.kernel
def drift(flow: ti.template(), dt: float, dx: float):
    for i, j, k in flow:
        flow[i, j, k] += ti.Vector([dt, 2 * dt, i * dx])
'''


def test_a_3d_vector_grid_steps_saves_and_draws(tmp_path: Path) -> None:
    """A 3-D grid of 3-vectors: the kernel gets the field and `dx`; frames keep
    (frames, 4, 5, 6, 3); its picture is the magnitude's middle slice."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "drift.py").write_text(KERNEL_3D)
    (tmp_path / "box.yaml").write_text(
        "version: 2\nprecision: f64\ngrids:\n  box:\n    shape: [4, 5, 6]\n"
        "    spacing: 0.5\n    fields: {flow: {components: 3, value: 1.0}}\n"
        "step_kernels: {kernels: [kernels/drift.py:drift]}\ndt: 0.25\nsteps: 3\n"
        "outputs: {every: 1}\n")
    run_scene(load_scene(tmp_path / "box.yaml"), tmp_path / "run", threads=1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        flow = frames["grid:flow"]
    assert flow.shape == (4, 4, 5, 6, 3)
    i = np.arange(4)[:, None, None]
    np.testing.assert_allclose(flow[-1][..., 0], 1 + 3 * 0.25)
    np.testing.assert_allclose(flow[-1][..., 1], 1 + 3 * 0.5)
    np.testing.assert_allclose(flow[-1][..., 2], np.broadcast_to(1 + 3 * i * 0.5, (4, 5, 6)))
    assert {"flow.png", "flow.gif"} <= {p.name for p in render_run(tmp_path / "run")}
