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


def test_a_vector_field_given_to_a_scalar_kernel_says_so_at_the_kernels_line(
        tmp_path: Path) -> None:
    """wave's height made a 2-vector field: swap stores it into the scalar height_next. The
    error is the kernel's line and what is wrong, in words (it showed the IR's objects:
    'Matrix([[<simrun.lang.ir.nodes.VarRef object at 0x...>]...'), exit 2."""
    done = simrun("check", str(SCENES / "wave.yaml"), *[a for s in _small(
        "grids.water.fields.height={components: 2}") for a in ("--set", s)], cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert re.search(r"kernels/wave\.py:\d+:\d+: kernel 'swap' does not compile: a 2-vector "
                     r"is used where a single number is needed", done.stderr), done.stderr
    assert "object at 0x" not in done.stderr


def test_a_palette_png_starts_the_field_at_its_colours_grey_levels(tmp_path: Path) -> None:
    """A PNG saved with a palette stores, per pixel, an index into its colours; the field
    starts at the colour's first channel / 255 (as an 8-bit grey PNG of the same picture),
    not at index / 255. The palette here lists its greys in reverse (index 0 is white)."""
    from PIL import Image

    index = (np.arange(24 * 24).reshape(24, 24) // 7 % 4).astype(np.uint8)
    greys = np.array([255, 170, 85, 0], dtype=np.uint8)
    image = Image.fromarray(index, mode="P")
    image.putpalette(np.repeat(greys, 3).tolist())
    image.save(tmp_path / "palette.png")
    scene = load_scene(SCENES / "wave.yaml", _small(
        "steps=1", f"grids.water.fields.height={{image: {tmp_path / 'palette.png'}}}"))
    run_scene(scene, tmp_path / "run", threads=1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        start = frames["grid:height"][0]
    np.testing.assert_array_equal(start, (greys[index] / 255.0).astype(start.dtype))


def test_saving_more_grid_frames_than_memory_holds_is_an_error_at_its_line(
        tmp_path: Path) -> None:
    """Frames are kept in memory until written: 10^7 frames of two 4096^2 f32 fields are
    1.3e15 bytes, refused at load (where 'outputs.every' is set, exit 2) before anything is
    allocated, as a particle scene's frames are; the same grid saved twice loads."""
    big = ["grids.water.shape=[4096,4096]",
           "grids.water.fields.target={value: 0.25, frames: false}", "steps=10000000"]
    with pytest.raises(SceneError, match=r"saving 10,000,001 frames of the grids' fields "
                       r"needs at least [\d,.]+ GB") as caught:
        load_scene(SCENES / "wave.yaml", [*big, "outputs.every=1"])
    assert "'frames: false' on a grid field" in str(caught.value)
    assert str(caught.value).startswith("--set outputs.every=1 (command line): ")
    assert load_scene(SCENES / "wave.yaml", [*big, "outputs.every=10000000"]).steps == 10 ** 7
    done = simrun("check", str(SCENES / "wave.yaml"), *[a for s in [*big, "outputs.every=1"]
                                                        for a in ("--set", s)], cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "frames of the grids' fields" in done.stdout + done.stderr


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


def test_smokes_start_image_is_the_checkerboard_its_script_draws() -> None:
    """scenes/smoke_start.png, read as the scene reads it, is bench/grid_targets.py's
    checkerboard of 16-cell squares (the targets are text, drawn by the font at hand)."""
    import sys

    from simrun.stepper.grids import read_png

    sys.path.insert(0, str(SCENES.parent.parent / "bench"))
    import grid_targets

    np.testing.assert_array_equal(read_png(SCENES / "smoke_start.png", "smoke.yaml") * 255,
                                  grid_targets.checkerboard(128, 16))


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


def test_grad_memory_bounds_a_grid_scenes_stored_states_through_the_cli(
        tmp_path: Path) -> None:
    """`simrun grad --memory 1K` on a grid scene (two 24^2 fields: a state is 4.6 KB) stores
    no state and recomputes the steps; the gradient and objective are those of the run
    that stores them, bit for bit."""
    sets = [a for s in _small("grids.water.fields.height={value: 0.1}") for a in ("--set", s)]
    for out, memory in (("all", []), ("small", ["--memory", "1K"])):
        done = simrun("grad", str(SCENES / "wave.yaml"), "--wrt", "state.height", "--steps",
                      "12", *memory, "--out", out, *sets, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    records = {d: json.loads((tmp_path / d / "gradients.json").read_text())
               for d in ("all", "small")}
    assert records["small"]["schedule"]["snapshots"] == 0
    assert records["small"]["schedule"]["forward_steps_recomputed"] > 0
    assert records["all"]["schedule"]["snapshots"] > 0
    assert records["small"]["objective"]["value"] == records["all"]["objective"]["value"]
    with np.load(tmp_path / "all" / "gradients.npz") as a, \
            np.load(tmp_path / "small" / "gradients.npz") as b:
        assert a["state.height"].tobytes() == b["state.height"].tobytes()


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


def test_grid_pictures_have_a_colour_bar_and_the_scenes_units(tmp_path: Path) -> None:
    """wave (units: si, height in m): axes in m, the colour bar 'height [m]', times in s; a
    3-D vector grid in reduced units: axes '[reduced]', the colour bar its magnitude, the
    title naming the slice shown. Through the figures' artists."""
    from simrun.outputs.units import SYSTEMS
    from simrun.render.grids import field_images, still_figure

    scene = load_scene(SCENES / "wave.yaml", _small("steps=4", "outputs.every=2"))
    run_scene(scene, tmp_path / "wave", threads=1)
    water = scene.grids[0].to_dict()
    fig = still_figure(field_images(tmp_path / "wave" / "frames.npz", "height", water, "wave"),
                       SYSTEMS["si"])
    first, last, bar = fig.axes
    assert (first.get_xlabel(), first.get_ylabel()) == ("column [m]", "row [m]")
    assert bar.get_ylabel() == "height [m]"
    assert re.search(r"step 4, t = [\d.e-]+ s$", last.get_title()), last.get_title()
    assert first.get_images()[0].get_extent() == [0.0, 24 * water["spacing"][1],
                                                  24 * water["spacing"][0], 0.0]

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "drift.py").write_text(KERNEL_3D)
    (tmp_path / "box.yaml").write_text(
        "version: 2\nprecision: f64\ngrids:\n  box:\n    shape: [4, 5, 6]\n"
        "    spacing: 0.5\n    fields: {flow: {components: 3, value: 1.0}}\n"
        "step_kernels: {kernels: [kernels/drift.py:drift]}\ndt: 0.25\nsteps: 2\n")
    box = load_scene(tmp_path / "box.yaml")
    run_scene(box, tmp_path / "box", threads=1)
    fig = still_figure(field_images(tmp_path / "box" / "frames.npz", "flow",
                                    box.grids[0].to_dict()), SYSTEMS["reduced"])
    first, _, bar = fig.axes
    assert (first.get_xlabel(), first.get_ylabel()) == ("column [reduced]", "row [reduced]")
    assert bar.get_ylabel() == "|flow|" and "slice [:, :, 3] of 6" in first.get_title()


KERNEL_MIXED = '''import simrun.lang as ti


@ti.kernel
def drift(x: ti.template(), v: ti.template(), heat: ti.template(), flow: ti.template(),
          dt: float):
    for p in x:
        x[p] += dt * v[p]
    for i, j in heat:
        heat[i, j] += dt * flow[i, j][0] * flow[i, j][0]


@ti.kernel
def total(x: ti.template(), heat: ti.template(), L: ti.template()):
    for i, j in heat:
        L[None] += heat[i, j]
    for p in x:
        L[None] += x[p][0] * x[p][1]
'''


def test_particles_and_two_grids_in_one_scene_step_save_draw_and_differentiate(
        tmp_path: Path) -> None:
    """Particles beside two grids (a scalar field on one, a vector field on the other), one
    step kernel moving both and an objective reading both: after n steps heat = n dt
    flow_x^2 and x = x0 + n dt v exactly (f64, dt a power of 2); the gradients are
    dL/dflow_x = 2 n dt flow_x, dL/dflow_y = 0 and dL/dx0 = (y, x) at the end."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "mixed.py").write_text(KERNEL_MIXED)
    x0, v0 = np.array([[0.5, 1.0], [2.0, -1.0]]), np.array([[1.0, 0.0], [0.5, 2.0]])
    np.savez(tmp_path / "start.npz", x=x0, v=v0)
    (tmp_path / "mixed.yaml").write_text(
        "version: 2\nprecision: f64\nparticles: {count: 2, dim: 2}\n"
        "initial: {type: file, path: start.npz}\ngrids:\n"
        "  cells: {shape: [3, 4], spacing: 0.5, fields: {heat: {}}}\n"
        "  wind: {shape: [3, 4], spacing: 0.5, fields: {flow: {components: 2, value: 3.0}}}\n"
        "step_kernels: {kernels: [kernels/mixed.py:drift]}\n"
        "objective: {kernel: kernels/mixed.py:total}\ndt: 0.125\nsteps: 8\n"
        "outputs: {every: 4, xyz: false}\n")
    scene = load_scene(tmp_path / "mixed.yaml")
    run_scene(scene, tmp_path / "run", threads=1)
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        assert frames["grid:heat"].shape == (3, 3, 4) and frames["x"].shape == (3, 2, 2)
        np.testing.assert_array_equal(frames["grid:heat"][-1], np.full((3, 4), 9.0))
        np.testing.assert_array_equal(frames["x"][-1], x0 + v0)
        np.testing.assert_array_equal(frames["grid:flow"][-1], np.full((3, 4, 2), 3.0))
    drawn = {p.name for p in render_run(tmp_path / "run")}
    assert {"first.png", "last.png", "heat.png", "heat.gif", "flow.png"} <= drawn
    result = scene_gradient(scene, ["state.flow", "state.x0"], threads=1)
    assert result.objective == 9.0 * 12 + float(((x0 + v0)[:, 0] * (x0 + v0)[:, 1]).sum())
    flow = np.asarray(result.gradients["state.flow"])
    np.testing.assert_allclose(flow[..., 0], 2 * 1.0 * 3.0, rtol=1e-14)
    np.testing.assert_array_equal(flow[..., 1], 0.0)
    end = x0 + v0
    np.testing.assert_allclose(np.asarray(result.gradients["state.x0"]).reshape(2, 2),
                               end[:, ::-1], rtol=1e-14)
