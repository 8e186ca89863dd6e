"""`simrun optimize`: the optimisers on convex problems with known optima, clipping, bounds,
resume equality, NaN handling, the shipped scenes, the `optimize:` section and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from gate_helpers import gated_scene, open_gate, wait_until_held
from test_cli import simrun

from simrun.jobs.optimize import OptimizeError, optimize_scene
from simrun.optimize.optimizers import SGD, Adam, clip_norm, project
from simrun.optimize.schedules import learning_rate
from simrun.scene import SceneError
from simrun.scene import load_scene as _load_scene
from simrun.scene.schema import Schedule

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
SCENES = REPO / "scenes"


def load_scene(path, overrides=()):
    return _load_scene(path, overrides, allow_outside=True)


# ------------------------------------------------------------------ the optimisers alone
A = np.array([[3.0, 1.0], [1.0, 2.0]])  # f(p) = 1/2 p.A p - b.p, optimum A^-1 b
B = np.array([1.0, -2.0])
OPTIMUM = np.linalg.solve(A, B)


@pytest.mark.parametrize("method, steps", [
    (lambda: Adam(0.05), 2000), (lambda: SGD(0.2), 300), (lambda: SGD(0.1, 0.8), 300),
    (lambda: SGD(0.1, 0.8, nesterov=True), 300)])
def test_first_order_optimisers_reach_a_quadratic_optimum(method, steps):
    opt, p = method(), np.array([2.0, 2.0])
    for _ in range(steps):
        p = opt.step(p, A @ p - B)
    np.testing.assert_allclose(p, OPTIMUM, atol=1e-6)


def test_nesterov_and_momentum_follow_pytorchs_definition():
    heavy, nest = SGD(0.1, 0.5), SGD(0.1, 0.5, nesterov=True)
    g1, g2 = np.array([1.0]), np.array([2.0])
    assert heavy.step(np.zeros(1), g1)[0] == pytest.approx(-0.1)
    assert heavy.step(np.zeros(1), g2)[0] == pytest.approx(-0.1 * (0.5 * 1 + 2))
    assert nest.step(np.zeros(1), g1)[0] == pytest.approx(-0.1 * (1 + 0.5 * 1))


def test_clipping_scales_the_global_norm_and_projection_clamps():
    g = np.array([3.0, 4.0])
    np.testing.assert_allclose(clip_norm(g, 1.0), [0.6, 0.8])
    assert clip_norm(g, 10.0) is g and clip_norm(g, None) is g
    np.testing.assert_array_equal(project(np.array([-5.0, 0.5, 9.0]), np.full(3, -1.0),
                                          np.array([1.0, 1.0, np.inf])), [-1.0, 0.5, 9.0])


def test_schedules_follow_their_closed_forms():
    lr, total = 0.1, 11
    rates = lambda schedule: [learning_rate(lr, schedule, t, total) for t in range(total)]  # noqa: E731
    assert rates(Schedule()) == [lr] * total
    cosine = rates(Schedule("cosine", warmup=1, min_lr=0.01))
    assert cosine[0] == pytest.approx(lr)  # warm-up of one step: the full rate
    assert cosine[1] == pytest.approx(lr) and cosine[6] == pytest.approx((lr + 0.01) / 2)
    assert cosine[-1] == pytest.approx(0.01 + 0.09 * (1 + np.cos(np.pi * 9 / 10)) / 2)
    assert np.all(np.diff(cosine[1:]) < 0)
    warm = rates(Schedule("step", warmup=4, every=3, gamma=0.5))
    np.testing.assert_allclose(warm[:4], [0.025, 0.05, 0.075, 0.1])
    np.testing.assert_allclose(warm[4:], [0.1] * 3 + [0.05] * 3 + [0.025])
    np.testing.assert_allclose(rates(Schedule("exponential", gamma=0.9)),
                               lr * 0.9 ** np.arange(total))


@pytest.mark.parametrize("schedule", [Schedule("cosine"), Schedule("step", 5, every=300),
                                      Schedule("exponential", 20, gamma=0.998)])
def test_adam_under_each_schedule_reaches_the_quadratic_optimum(schedule):
    """A decaying rate lets Adam settle: a constant 0.05 still wanders ~1e-7 at the end."""
    opt, p, total = Adam(0.05), np.array([2.0, 2.0]), 2000
    for t in range(total):
        p = opt.step(p, A @ p - B, learning_rate(0.05, schedule, t, total))
    np.testing.assert_allclose(p, OPTIMUM, atol=1e-6)


def test_sgd_weight_decay_is_an_l2_penalty():
    """f + wd/2 |p|^2 has its minimum at (A + wd I)^-1 b, with and without momentum."""
    wd = 0.5
    for opt in (SGD(0.2, weight_decay=wd), SGD(0.1, 0.8, True, weight_decay=wd)):
        p = np.array([2.0, 2.0])
        for _ in range(400):
            p = opt.step(p, A @ p - B)
        np.testing.assert_allclose(p, np.linalg.solve(A + wd * np.eye(2), B), atol=1e-10)


def test_adam_weight_decay_is_decoupled():
    """AdamW: with no gradient the parameters shrink by (1 - lr wd) per step exactly; with
    f = (p - 10)^2 / 2 and wd = 0.5 the fixed point is where wd p balances the unit-sized
    adaptive step, p = 1/wd = 2 (an L2 penalty would give 10 / 1.5 instead). Short
    averages (betas 0.5) let m/sqrt(v) settle at -1 within the 1000 steps; the remaining
    offset is eps / |g| ~ 1e-9 and the (1 - lr wd)^n transient."""
    opt, p = Adam(0.1, weight_decay=0.3), np.array([1.0, -4.0])
    for _ in range(5):
        p = opt.step(p, np.zeros(2))
    np.testing.assert_allclose(p, np.array([1.0, -4.0]) * (1 - 0.1 * 0.3) ** 5, rtol=1e-14)
    opt, p = Adam(0.05, (0.5, 0.5), weight_decay=0.5), np.array([0.0])
    for _ in range(1000):
        p = opt.step(p, p - 10.0)
    np.testing.assert_allclose(p, [2.0], atol=1e-7)


# ------------------------------------------------------------------ a projectile
# symplectic Euler from rest position 0: x_N = N h v0 + h^2 a N (N + 1) / 2, so the throw
# that lands on the target after N steps is v* = (target - h^2 a N (N + 1) / 2) / (N h)
N, H, G, TARGET = 10, 0.1, 9.8, np.array([4.0, 1.0])
V_STAR = (TARGET - H * H * np.array([0.0, -G]) * N * (N + 1) / 2) / (N * H)


def _projectile(tmp_path: Path, optimize: str, objective: str = "") -> Path:
    path = tmp_path / "throw.yaml"
    objective = objective or f"{{kernel: {KERNELS}/targets.py:miss, params: {{tx: 4.0, ty: 1.0}}}}"
    path.write_text(f"""version: 1
particles: {{count: 1, dim: 2}}
initial: {{type: lattice, shape: [1, 1], spacing: 1.0, velocity: [2.0, 2.0]}}
energy: [{{kernel: {KERNELS}/external.py:uniform_gravity, params: {{g: {G}}}}}]
dt: {H}
steps: {N}
objective: {objective}
optimize: {optimize}
""")
    return path


@pytest.mark.parametrize("optimize", [
    "{parameters: [initial.velocity], optimizer: sgd, lr: 0.5, momentum: 0.3, iterations: 60}",
    "{parameters: [initial.velocity], optimizer: lbfgs, iterations: 20}"])
def test_sgd_and_lbfgs_find_the_throw_that_hits(tmp_path, optimize):
    scene = load_scene(_projectile(tmp_path, optimize + ""))
    result = optimize_scene(scene, tmp_path / "o")
    np.testing.assert_allclose(result.best["initial.velocity"], V_STAR, atol=1e-6)
    assert result.best_loss < 1e-12
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    assert rows[0, 1] > 1 and rows[:, 0].tolist() == list(range(len(rows)))
    saved = np.load(tmp_path / "o" / "params.npz")
    assert saved["initial.velocity"].shape == (len(rows), 2)


@pytest.mark.parametrize("kind", ["adam, lr: 0.5", "sgd, lr: 0.5", "lbfgs"])
def test_every_optimiser_honours_the_bounds(tmp_path, kind):
    """With v <= 5 the best throw has vy on the bound (6.39 free); vx (4) is still exact."""
    scene = load_scene(_projectile(tmp_path, f"{{parameters: [initial.velocity], optimizer: "
                                   f"{kind}, iterations: 80, bounds: {{initial.velocity: "
                                   "[-20, 5]}}"))
    result = optimize_scene(scene, tmp_path / "o")
    vel = np.load(tmp_path / "o" / "params.npz")["initial.velocity"]
    assert vel.max() <= 5.0
    assert result.best["initial.velocity"][1] == pytest.approx(5.0, abs=1e-9)
    assert result.best["initial.velocity"][0] == pytest.approx(V_STAR[0], abs=1e-3)


def test_clip_epsilon_scales_as_difftaichi_rigid_body_does(tmp_path):
    """DiffTaichi's rigid_body.py steps by lr min(1, 0.2 / (|g| + 1e-4)) g: with
    clip_epsilon each clipped step is 0.2 |g| / (|g| + 1e-4) long, and it survives the
    resolved scene."""
    g = np.array([3.0, 4.0])
    np.testing.assert_allclose(clip_norm(g, 1.0, 1e-4), g / 5.0001, rtol=1e-15)
    assert clip_norm(np.array([0.6, 0.8]), 1.0, 0.0)[0] == 0.6  # |g| = clip: kept
    scene = load_scene(_projectile(tmp_path, "{parameters: [initial.velocity], optimizer: sgd, "
                                   "lr: 1.0, clip: 0.1, clip_epsilon: 1e-4, iterations: 3}"))
    assert load_scene_dict(scene).optimize.clip_epsilon == 1e-4
    optimize_scene(scene, tmp_path / "o")
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1)
    assert (rows[:, 2] > 0.1).all()
    np.testing.assert_allclose(rows[1:, 3], 0.1 * rows[:-1, 2] / (rows[:-1, 2] + 1e-4),
                               rtol=1e-12)


def load_scene_dict(scene):
    """The scene after a round trip through its resolved dict (what scene.yaml holds)."""
    path = scene.source.parent / "resolved.yaml"
    path.write_text(yaml.safe_dump(scene.to_dict()))
    return load_scene(path)


def test_clip_limits_the_step_of_sgd(tmp_path):
    scene = load_scene(_projectile(tmp_path, "{parameters: [initial.velocity], optimizer: sgd, "
                                   "lr: 1.0, clip: 0.1, iterations: 3}"))
    optimize_scene(scene, tmp_path / "o")
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1)
    assert (rows[:, 2] > 0.1).all()  # the raw gradient norm is recorded ...
    np.testing.assert_allclose(rows[1:, 3], 0.1, rtol=1e-12)  # ... the step is clipped


def test_tuned_start_state_goes_to_a_file_that_best_yaml_loads(tmp_path):
    scene = load_scene(_projectile(tmp_path, "{parameters: [state.x0, state.v0], optimizer: "
                                   "lbfgs, iterations: 5}"))
    result = optimize_scene(scene, tmp_path / "o")
    best = _load_scene(tmp_path / "o" / "best.yaml")  # trusted: the modules were copied
    from simrun.scene import initial_state
    x0, v0 = initial_state(best)
    np.testing.assert_allclose(x0, result.best["state.x0"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(v0, result.best["state.v0"], rtol=0, atol=1e-15)
    assert result.best_loss < 1e-10


# ------------------------------------------------------------------ resume, NaN
class _Stop(Exception):
    pass


@pytest.mark.parametrize("optimizer, cut", [
    ("adam, lr: 0.3, betas: [0.8, 0.99]", 3),
    ("adam, lr: 0.3, weight_decay: 0.01, schedule: {type: cosine, warmup: 2, min_lr: 0.01}", 4),
    ("sgd, lr: 0.2, momentum: 0.9, nesterov: true", 3),
    ("sgd, lr: 0.2, weight_decay: 0.1, schedule: {type: step, every: 2, gamma: 0.7}", 3),
    ("lbfgs", 1)])
def test_resume_after_an_interrupt_gives_the_numbers_of_an_unbroken_run(tmp_path, optimizer,
                                                                         cut):
    path = _projectile(tmp_path, f"{{parameters: [initial.velocity], optimizer: {optimizer}, "
                       "iterations: 8, bounds: {initial.velocity: [-20, 5.5]}}")
    whole = optimize_scene(load_scene(path), tmp_path / "whole")

    def interrupt(it, *_):
        if it == cut:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(load_scene(path), tmp_path / "cut", progress=interrupt)
    info = json.loads((tmp_path / "cut" / "optimize.json").read_text())
    assert info["status"] == "interrupted" and info["iterations_done"] == cut
    resumed = optimize_scene(load_scene(path), tmp_path / "cut", resume=True)
    assert whole.iterations > cut and resumed.replayed >= cut + 1
    assert resumed.losses == whole.losses
    for name in ("initial.velocity", "loss"):
        np.testing.assert_array_equal(np.load(tmp_path / "cut" / "params.npz")[name],
                                      np.load(tmp_path / "whole" / "params.npz")[name])


NAN_LOSS = """import simrun.lang as ti


@ti.kernel
def miss(x: ti.template(), L: ti.template()):
    for p in x:
        L[None] += (x[p][0] + 5.0) ** 2 + ti.sqrt(x[p][0])
"""


def _nan_scene(tmp_path: Path) -> Path:
    (tmp_path / "loss.py").write_text(NAN_LOSS)
    path = _projectile(tmp_path, "{parameters: [initial.velocity], optimizer: sgd, lr: 0.05, "
                       "iterations: 50}", objective="{kernel: loss.py:miss}")
    return path


def test_a_nan_loss_stops_naming_the_iteration_and_keeps_the_best(tmp_path):
    """sqrt(x) is NaN once the throw lands at x < 0, where the descent towards -5 goes."""
    with pytest.raises(OptimizeError, match=r"iteration \d+: the (loss|gradient) is not "
                       "finite") as caught:
        optimize_scene(load_scene(_nan_scene(tmp_path)), tmp_path / "o")
    result = caught.value.result
    assert result.status == "failed" and np.isfinite(result.best_loss)
    assert result.best_iteration == result.iterations - 1
    info = json.loads((tmp_path / "o" / "optimize.json").read_text())
    assert info["status"] == "failed" and info["best"]["iteration"] == result.best_iteration
    best = yaml.safe_load((tmp_path / "o" / "best.yaml").read_text())
    assert best["initial"]["velocity"] == pytest.approx(result.best["initial.velocity"].tolist())


# ------------------------------------------------------------------ the scene section
@pytest.mark.parametrize("optimize, message", [
    ("{optimizer: adam}", "missing the required key 'parameters'"),
    ("{parameters: []}", "'optimize.parameters' is empty"),
    ("{parameters: [dt, dt]}", "listed twice"),
    ("{parameters: [dt], optimizer: newton}", "not one of 'adam', 'sgd' or 'lbfgs'"),
    ("{parameters: [dt], optimizer: lbfgs, lr: 0.1}", "does not apply to the 'lbfgs'"),
    ("{parameters: [dt], nesterov: true}", "does not apply to the 'adam'"),
    ("{parameters: [dt], optimizer: sgd, nesterov: true}", "needs 'momentum' > 0"),
    ("{parameters: [dt], bounds: {dtt: [0, 1]}}", "not one of 'optimize.parameters'"),
    ("{parameters: [dt], bounds: {dt: [1, 0]}}", "are empty"),
    ("{parameters: [dt], betas: [0.9, 1.0]}", "must be below 1"),
    ("{parameters: [dt], lr: -1}", "must be greater than 0"),
    ("{parameters: [dt], tolerance: {los: 1}}", "unknown key 'los'"),
    ("{parameters: [dt], iteration: 3}", "unknown key 'iteration'"),
    ("{parameters: [dt], schedule: cosin}", "not one of 'constant', 'cosine'"),
    ("{parameters: [dt], schedule: {warmup: 3}}", "missing the required key 'type'"),
    ("{parameters: [dt], schedule: {type: cosine, gamma: 0.5}}",
     "unknown key 'gamma' in 'optimize.schedule' for a 'cosine' schedule"),
    ("{parameters: [dt], schedule: {type: step, gamma: 1.5}}", "must be at most 1"),
    ("{parameters: [dt], schedule: {type: step, every: 0}}", "at least 1"),
    ("{parameters: [dt], lr: 0.1, schedule: {type: cosine, min_lr: 0.2}}", "above 'lr'"),
    ("{parameters: [dt], weight_decay: -1}", "weight_decay"),
    ("{parameters: [dt], optimizer: lbfgs, weight_decay: 0.1}", "does not apply to the 'lbfgs'"),
    ("{parameters: [dt], optimizer: lbfgs, schedule: cosine}", "does not apply to the 'lbfgs'"),
    ("{parameters: [dt], clip_epsilon: 1e-4}", "there is no 'clip'"),
    ("{parameters: [dt], clip: 1, clip_epsilon: -1}", "must not be negative"),
    ("{parameters: [dt], optimizer: lbfgs, clip_epsilon: 1e-4}", "does not apply to the 'lbfgs'"),
])
def test_bad_optimize_sections_are_reported_at_their_line(tmp_path, optimize, message):
    path = _projectile(tmp_path, optimize)
    with pytest.raises(SceneError, match=message) as caught:
        load_scene(path)
    assert f"{path.name}:8:" in str(caught.value)


def test_unknown_parameter_keys_and_a_start_outside_the_bounds(tmp_path):
    scene = load_scene(_projectile(tmp_path, "{parameters: [energy.0.params.gg]}"))
    with pytest.raises(SceneError, match=r":8:\d+: optimize.parameters: --wrt energy.0.params."
                       "gg: .*Did you mean energy.0.params.g"):
        optimize_scene(scene, tmp_path / "o")
    scene = load_scene(_projectile(tmp_path, "{parameters: [dt], bounds: {dt: [0.2, null]}}"))
    with pytest.raises(SceneError, match="starting value of 'dt' .* outside its bounds"):
        optimize_scene(scene, tmp_path / "o")


def test_the_section_survives_the_resolved_scene(tmp_path):
    scene = load_scene(_projectile(tmp_path, "{parameters: [initial.velocity], optimizer: sgd, "
                                   "lr: 0.1, momentum: 0.5, bounds: {initial.velocity: "
                                   "[null, 3]}, tolerance: 1e-9, weight_decay: 1e-3, "
                                   "schedule: {type: step, warmup: 2, every: 5, gamma: 0.3}}"))
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(scene.to_dict()))
    assert load_scene(again).optimize == scene.optimize


# ------------------------------------------------------------------ shipped scenes
@pytest.mark.parametrize("name, iterations", [("projectile", 4), ("fit_spring", 3)])
def test_shipped_scenes_lower_their_loss_in_a_few_iterations(tmp_path, name, iterations):
    scene = _load_scene(SCENES / f"{name}.yaml")
    result = optimize_scene(scene, tmp_path / name, iterations=iterations)
    assert result.losses[-1] < 0.8 * result.losses[0], result.losses


# ------------------------------------------------------------------ the CLI
def test_cli_projectile_hits_the_target_and_best_yaml_lands_there(tmp_path):
    # stopping at the loss this test asserts (132 iterations, not the scene's 205 to 1e-9)
    done = simrun("optimize", str(SCENES / "projectile.yaml"), "--set",
                  "optimize.tolerance.loss=1e-6", "--out", "o", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "converged" in done.stdout
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1)
    assert rows[:, 1].min() < 1e-6
    assert {"loss.png", "best.yaml", "params.npz", "scene.yaml", "optimize.json",
            "state.npz"} <= {p.name for p in (tmp_path / "o").iterdir()}
    assert (tmp_path / "o" / "episode" / "animation.gif").is_file()  # best.yaml, run
    redrawn = simrun("render", "o", cwd=tmp_path)
    assert redrawn.returncode == 0 and "loss.png" in redrawn.stdout, redrawn.stderr
    ran = simrun("run", "o/best.yaml", "--out", "r", "-q", "--no-render", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    x_end = np.load(tmp_path / "r" / "frames.npz")["x"][-1, 0]
    assert np.linalg.norm(x_end - [4.0, 1.0]) < np.sqrt(2e-6)


def test_cli_exit_codes_bad_key_and_nan(tmp_path):
    bad = simrun("optimize", str(SCENES / "projectile.yaml"), "--set",
                 "optimize={parameters: [initial.velocit]}", "--out", "o", cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean initial.velocity" in bad.stderr.lower()
    assert "Traceback" not in bad.stderr
    checked = simrun("check", str(SCENES / "projectile.yaml"), cwd=tmp_path)
    assert checked.returncode == 0 and "optimize      initial.velocity (adam" in checked.stdout
    refused = simrun("check", str(SCENES / "fit_spring.yaml"), "--set", "optimize.parameters="
                     "[energy.0.params.k, energy.0.params.r0, fields.w]", cwd=tmp_path)
    assert refused.returncode == 2 and "fields are differentiated in scenes with " \
        "step_kernels or a controller only" in refused.stderr, refused.stderr
    nan = simrun("optimize", str(_nan_scene(tmp_path)), "--allow-outside", "--out", "n",
                 cwd=tmp_path)
    assert nan.returncode == 1 and "optimize failed: iteration" in nan.stderr
    assert (tmp_path / "n" / "best.yaml").is_file() and (tmp_path / "n" / "loss.png").is_file()


def test_cli_interrupt_exits_130_and_resume_finishes(tmp_path):
    # the optimisation waits at a closed gate from its 3000th energy evaluation (about 500
    # an iteration: 100 steps forward, their recomputation and reverse; tests/gate_helpers.py):
    # mid-way at Ctrl-C on any machine
    gate = tmp_path / "gate"
    scene = str(gated_scene("projectile", tmp_path, gate, hold_after=3000))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.Popen([sys.executable, "-m", "simrun.cli", "optimize", scene, "--out",
                             "o", "--iterations", "400", "--set", "optimize.tolerance=0"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    wait_until_held(gate, proc)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    info = json.loads((tmp_path / "o" / "optimize.json").read_text())
    assert info["status"] == "interrupted"
    done = info["iterations_done"]
    assert 0 < done < 400
    open_gate(gate)
    resumed = simrun("optimize", scene, "--out", "o", "--resume", "--iterations", str(done + 3),
                     "--set", "optimize.tolerance=0", "--no-render", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "replayed" in resumed.stdout
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1)
    assert rows[-1, 0] == done + 3
    other = simrun("optimize", scene, "--out", "o", "--resume", "--set", "dt=0.02", cwd=tmp_path)
    assert other.returncode == 2 and "differs from the one recorded" in other.stderr


def test_paced_writes_hold_back_a_slow_file_and_flush_writes_the_last_state(tmp_path):
    """params.npz and state.npz grow each iteration: a rewrite waits until PACE times its
    last duration has passed, and `flush` (end, interrupt, failure) writes the newest. On a
    clock of the test's own (a write takes 1 s of it), not the machine's speed."""
    from simrun.optimize.record import PACE, Paced

    now, written = [0.0], []

    def writer(value):
        def write():
            now[0] += 1.0
            written.append(value)
        return write

    paced = Paced(clock=lambda: now[0])
    for value in range(5):
        paced(writer(value))
    assert written == [0]  # the first at once, the next four held back
    now[0] += PACE - 0.5
    paced(writer(5))
    assert written == [0]  # just before PACE x 1 s after the first write ended
    now[0] += 0.5
    paced(writer(6))
    assert written == [0, 6]  # then the newest, not the ones in between
    paced(writer(7))
    paced.flush()
    assert written == [0, 6, 7]
    paced.flush()
    assert written == [0, 6, 7]  # nothing pending
