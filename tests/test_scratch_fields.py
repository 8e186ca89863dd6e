"""Scratch fields (KernelContext.scratch, kernels/__init__.py): a gradient's stored states
leave out the MPM grid that each step clears before use, the gradient keeps its bits, a
field wrongly marked scratch is refused, and `simrun optimize --memory` bounds each
gradient's stored states without changing a loss."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from test_scene_mpm3d import REPO, SMALL, small_robot

from simrun.jobs.grad import STATE_OVERHEAD, scene_gradient
from simrun.scene import load_scene

KEYS = ["fields.weights", "fields.bias"]


def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_a_budget_for_the_particles_stores_states_without_the_grid_to_the_same_bits(tmp_path):
    scene = load_scene(small_robot(tmp_path, "diffmpm3d", False), [*SMALL, "steps=12"],
                       allow_outside=True)
    n, n_grid = scene.particles.count, 16
    grid_bytes = n_grid ** 3 * (3 + 1 + 3) * 8  # grid_v, grid_m, grid_out in f64
    # x, v, forces, F, C and the muscles' outputs: ~2.6x less than the grid (192 particles)
    particle_bytes = n * (3 * 3 + 2 * 9) * 8 + 16 * 8
    assert particle_bytes + STATE_OVERHEAD < grid_bytes / 2
    budget = 4 * (particle_bytes + STATE_OVERHEAD)  # 4 states of particles, < 2 grids
    stored = scene_gradient(scene, KEYS, memory=budget)
    assert stored.snapshots >= 4  # the grid counted, not one state would fit
    assert stored.stored_bytes <= budget
    recomputed = scene_gradient(scene, KEYS, checkpoints=0)  # every step from state 0
    assert stored.objective == recomputed.objective
    for key in KEYS:
        assert np.abs(stored.gradients[key]).max() > 0
        np.testing.assert_array_equal(stored.gradients[key], recomputed.gradients[key])


def test_a_field_read_before_the_step_writes_it_cannot_be_marked_scratch(tmp_path):
    """F is state (p2g reads it, then writes it): marked scratch, the gradient would restore
    a wrong F; the command refuses the scene at the kernel that reads it."""
    module = (REPO / "kernels" / "diffmpm3d.py").read_text()
    wrong = module.replace('"F": F,', '"F": ctx.scratch(F),')
    assert wrong != module
    (tmp_path / "mpm3d_wrong.py").write_text(wrong)
    scene = small_robot(tmp_path, "diffmpm3d", False)
    scene.write_text(scene.read_text().replace(str(REPO / "kernels" / "diffmpm3d.py"),
                                               str(tmp_path / "mpm3d_wrong.py")))
    done = simrun("grad", str(scene), "--allow-outside", "--steps", "4", "--wrt", KEYS[0],
                  "--out", str(tmp_path / "g"), *[a for s in SMALL for a in ("--set", s)],
                  cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "'p2g'" in done.stderr and "'F'" in done.stderr and "scratch" in done.stderr
    assert "diffmpm3d.yaml:" in done.stderr and "mpm3d_wrong.py:" in done.stderr
    assert not (tmp_path / "g" / "gradients.npz").exists()


def test_optimize_memory_gives_the_losses_of_the_default_bit_for_bit(tmp_path):
    scene = small_robot(tmp_path, "diffmpm3d", False)
    sets = [a for s in [*SMALL, "steps=10"] for a in ("--set", s)]
    losses = {}
    for name, extra in (("default", []), ("tiny", ["--memory", "1"])):
        done = simrun("optimize", str(scene), "--allow-outside", "--iterations", "3",
                      "--no-render", "--out", str(tmp_path / name), *sets, *extra,
                      cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = (tmp_path / name / "loss.csv").read_text().splitlines()[1:]
        losses[name] = [row.split(",")[1:4] for row in rows]  # loss, |grad|, step: repr
    assert len(losses["default"]) == 4  # the start and 3 iterations
    assert len({row[0] for row in losses["default"]}) > 1  # the training moved
    assert losses["tiny"] == losses["default"]
    bad = simrun("optimize", str(scene), "--allow-outside", "--memory", "lots", "--out",
                 str(tmp_path / "bad"), *sets, cwd=tmp_path)
    assert bad.returncode == 2 and "--memory 'lots'" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()


def test_each_gradient_of_a_training_gets_the_memory_option(tmp_path, monkeypatch):
    import simrun.jobs.optimize as training

    budgets = []

    def recorded(*args, **kwargs):
        budgets.append(kwargs.get("memory"))
        return scene_gradient(*args, **kwargs)

    monkeypatch.setattr(training, "scene_gradient", recorded)
    scene = load_scene(small_robot(tmp_path, "diffmpm3d", False), [*SMALL, "steps=4"],
                       allow_outside=True)
    training.optimize_scene(scene, tmp_path / "o", iterations=2, options={"memory": "3K"})
    assert budgets == [3 << 10] * 3


def test_a_scratch_field_a_step_clears_only_in_part_is_refused(tmp_path):
    """clear_grid clears half the grid: the other half carries the last step's momentum
    into this one, which no stored state would hold. One step from NaN scratch fields
    shows it (the kernels' reads and writes cannot)."""
    module = (REPO / "kernels" / "diffmpm3d.py").read_text()
    whole = "    for i, j, k in grid_m:\n        grid_v[i, j, k] = ti.Vector([0.0, 0.0, 0.0])\n"
    half = ("    for i, j, k in grid_m:\n        if i < grid_m.shape[0] // 2:\n"
            "            grid_v[i, j, k] = ti.Vector([0.0, 0.0, 0.0])\n")
    assert whole in module
    (tmp_path / "mpm3d_half.py").write_text(module.replace(whole, half).replace(
        "        grid_m[i, j, k] = 0.0\n", "            grid_m[i, j, k] = 0.0\n", 1))
    scene = small_robot(tmp_path, "diffmpm3d", False)
    scene.write_text(scene.read_text().replace(str(REPO / "kernels" / "diffmpm3d.py"),
                                               str(tmp_path / "mpm3d_half.py")))
    done = simrun("grad", str(scene), "--allow-outside", "--steps", "4", "--wrt", KEYS[0],
                  "--out", str(tmp_path / "g"), *[a for s in SMALL for a in ("--set", s)],
                  cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "grid_m, grid_out, grid_v" in done.stderr and "NaN" in done.stderr
    assert not (tmp_path / "g" / "gradients.npz").exists()


def test_the_2d_mpm_grid_is_scratch_stored_states_shrink_and_gradients_keep_their_bits(
        tmp_path):
    """kernels/mpm.py (scenes/mpm.yaml) marks its grid scratch: each stored state is the
    64^2 grid's bytes (grid_v 2 floats, grid_m 1, in f64) smaller than with the module's
    marks taken out, and J and the gradients are the same bits."""
    module = (REPO / "kernels" / "mpm.py").read_text()
    unmarked = module.replace("ctx.scratch(", "_unmarked(")
    assert unmarked.count("_unmarked(") == 2  # grid_v and grid_m
    (tmp_path / "mpm_unmarked.py").write_text(unmarked + "\n\ndef _unmarked(f):\n    return f\n")
    keys = ["step_kernels.params.gravity", "dt", "state.v0", "fields.C"]
    base = ["precision=f64", "objective={builtin: kinetic, at: end}", "steps=12"]
    steps = "[" + ", ".join(f"{tmp_path / 'mpm_unmarked.py'}:{k}" for k in
                            ("clear_grid", "p2g", "grid_op", "g2p")) + "]"
    results = {}
    for name, sets in (("marked", base), ("unmarked", [*base, f"step_kernels.kernels={steps}"])):
        scene = load_scene(REPO / "scenes" / "mpm.yaml", sets, allow_outside=True)
        results[name] = scene_gradient(scene, keys, checkpoints=4, threads=1)
    marked, unmarked_result = results["marked"], results["unmarked"]
    assert marked.snapshots == unmarked_result.snapshots == 4
    grid_bytes = 64 * 64 * (2 + 1) * 8
    per_state = (unmarked_result.stored_bytes - marked.stored_bytes) / marked.snapshots
    assert per_state == grid_bytes
    assert marked.objective == unmarked_result.objective
    for key in keys:
        assert np.abs(marked.gradients[key]).max() > 0
        np.testing.assert_array_equal(marked.gradients[key], unmarked_result.gradients[key])
