"""`simrun grad`: trajectory gradients against closed forms and central differences of the
scene run twice, the checkpoint schedule against the brute-force optimum, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from simrun.adjoint import schedule
from simrun.jobs.grad import forward_gradient, objective_value, scene_gradient
from simrun.jobs.grad_check import check_gradient
from simrun.scene import SceneError
from simrun.scene import load_scene as _load_scene

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"


def load_scene(path, overrides=()):
    """The scenes here sit in tmp folders and use the repository's kernels (trusted)."""
    return _load_scene(path, overrides, allow_outside=True)


# ------------------------------------------------------------------ checkpoint schedule
@lru_cache(maxsize=None)
def _brute_force(n: int, s: int) -> int:
    """Fewest forward steps to reverse n steps holding the start and s more states."""
    if n <= 1:
        return 0
    if s == 0:
        return n * (n - 1) // 2
    return min(k + _brute_force(n - k, s - 1) + _brute_force(k, s) for k in range(1, n))


@pytest.mark.parametrize("snapshots", [0, 1, 2, 3, 5])
def test_schedule_is_the_optimum_and_reverses_every_step_once(snapshots):
    for n in range(1, 90):
        seen = []

        def reverse_step(state, k, seen=seen):
            assert state == k  # the state before step k
            seen.append(k)

        sched = schedule.reverse(0, n, snapshots, lambda st, k: st + 1, reverse_step)
        assert seen == list(reversed(range(n)))
        assert sched.advances == _brute_force(n, snapshots) == schedule.forward_steps(
            n, snapshots)
        assert sched.peak_stored <= snapshots


def test_schedule_for_a_million_steps_stores_twenty_states():
    sched = schedule.reverse(0, 10**6, 20, lambda st, k: st + 1, lambda st, k: None)
    assert sched.peak_stored == 20
    assert sched.advances == schedule.forward_steps(10**6, 20)
    assert 5 < sched.advances / 10**6 < 8  # binomial: a few sweeps, not 10^6 / 20


# ------------------------------------------------------------------ scenes
def _scene(tmp_path: Path, body: str, name: str = "g") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"version: 1\nname: {name}\nprecision: f64\nseed: 3\n{body}")
    return path


GRAVITY = f"""
particles: {{count: 6, dim: 2, mass: 1.0}}
initial: {{type: random, low: [0, 0], high: [1, 1], velocity: [0.1, -0.2]}}
energy:
  - kernel: {KERNELS}/gravity.py:gravity
    params: {{softening: 0.01, strength: 1.0}}
integrator: {{type: velocity_verlet, damping: 0.1}}
dt: 0.001
steps: 60
objective: {{builtin: total, at: end}}
"""


def test_free_body_matches_the_closed_form(tmp_path):
    """No force: v_n = v0 (1 - h g)^n, J = 1/2 sum m |v_n|^2 with v0 = u (all particles)."""
    free = ["particles={count: 3, dim: 2, mass: 2.0}", "initial.velocity=[0.5, -1.5]",
            "energy.0.params.strength=0.0", "integrator={type: symplectic_euler, damping: 0.3}",
            "dt=0.01", "steps=40", "objective={builtin: kinetic, at: end}"]
    scene = load_scene(_scene(tmp_path, GRAVITY), free)
    res = scene_gradient(scene, ["initial.velocity", "integrator.damping", "dt",
                                 "particles.mass"], checkpoints=4)
    m, n, h, g, u, count = 2.0, 40, 0.01, 0.3, np.array([0.5, -1.5]), 3
    c = (1 - h * g) ** n
    u2 = float(u @ u)
    assert res.objective == pytest.approx(0.5 * count * m * u2 * c**2, rel=1e-13)
    np.testing.assert_allclose(res.gradients["initial.velocity"], count * m * u * c**2,
                               rtol=1e-13)
    dc = n * (1 - h * g) ** (n - 1)  # dc / d(1 - h g)
    assert res.gradients["integrator.damping"] == pytest.approx(
        count * m * u2 * c * dc * -h, rel=1e-12)
    # x moves with v but J does not see x: dt acts through the damping factor only
    assert res.gradients["dt"] == pytest.approx(count * m * u2 * c * dc * -g, rel=1e-12)
    assert res.gradients["particles.mass"] == pytest.approx(0.5 * count * u2 * c**2, rel=1e-13)


@pytest.mark.parametrize("integrator", ["velocity_verlet", "symplectic_euler"])
@pytest.mark.parametrize("objective", ["{builtin: kinetic, at: end}",
                                       "{builtin: total, at: mean}"])
def test_gravity_gradients_against_central_differences(tmp_path, integrator, objective):
    scene = load_scene(_scene(tmp_path, GRAVITY), [f"integrator.type={integrator}",
                                                   f"objective={objective}"])
    keys = ["initial.velocity", "dt", "integrator.damping", "energy.0.params.softening",
            "energy.0.params.strength", "particles.mass", "state.x0", "state.v0"]
    res = scene_gradient(scene, keys, checkpoints=3)
    check = check_gradient(scene, res)
    for row in check["rows"]:
        assert row["ok"], row
        # f64 central differences at a 1e-6 step are good to ~1e-8 here
        assert row["rel_error"] < 1e-5 or abs(row["ad"] - row["fd"]) < 3 * row["fd_error"]
    assert check["taylor"]["order"] > 1.9, check["taylor"]


def test_reflecting_walls_and_a_kernel_objective(tmp_path):
    """A bounce flips the adjoint's crossing components; a kernel objective's own parameter
    gets its gradient through Kernel.with_field_args."""
    loss = tmp_path / "loss.py"
    loss.write_text("import simrun.lang as ti\n\n\n@ti.kernel\n"
                    "def miss(x: ti.template(), L: ti.template(), tx: float):\n"
                    "    for i in x:\n"
                    "        L[None] += (x[i][0] - tx) ** 2 + x[i][1] ** 2\n")
    body = GRAVITY.replace("objective: {builtin: total, at: end}",
                           f"objective: {{kernel: {loss}:miss, params: {{tx: 0.7}}}}")
    body += "boundary: {type: reflect, low: [0.3, 0.3], high: [0.7, 0.7]}\n"
    scene = load_scene(_scene(tmp_path, body))
    res = scene_gradient(scene, ["objective.params.tx", "state.x0", "dt",
                                 "energy.0.params.softening"], checkpoints=2)
    check = check_gradient(scene, res)
    assert all(r["ok"] for r in check["rows"]), check["rows"]


@pytest.mark.parametrize("name, keys", [
    ("molecule", ["energy.0.params.k", "energy.1.params.theta0", "energy.2.params.k", "dt",
                  "state.v0"]),
    ("fem", ["energy.0.params.poisson", "energy.2.params.g", "integrator.damping",
             "state.x0", "particles.mass"]),
    ("gravity", ["energy.0.params.softening", "initial.velocity", "dt", "state.x0"]),
])
def test_shipped_scenes_against_central_differences(name, keys):
    """Short f64 horizons: smooth (no bounce inside the difference), so FD is a reference."""
    scene = load_scene(REPO / "scenes" / f"{name}.yaml",
                       ["steps=25", "precision=f64", "objective={builtin: total, at: mean}",
                        "integrator.damping=0.05"])
    res = scene_gradient(scene, keys, checkpoints=3)
    check = check_gradient(scene, res)
    for r in check["rows"]:
        if r["key"] == "initial.velocity":  # dJ/dV = sum m v = 0 at a start at rest on
            # average: no step tells that from a tiny gradient, so never 'ok'
            assert r["verdict"] == "inconclusive" and abs(r["ad"]) <= 3 * r["fd_error"], r
        else:
            assert r["ok"], r
    assert check["taylor"]["order"] > 1.9, check["taylor"]


def test_checkpointed_gradient_equals_store_everything_bit_for_bit(tmp_path):
    scene = load_scene(_scene(tmp_path, GRAVITY), ["steps=50"])
    keys = ["state.x0", "dt", "energy.0.params.softening"]
    few = scene_gradient(scene, keys, checkpoints=2, threads=1)
    every = scene_gradient(scene, keys, checkpoints=49, threads=1)
    assert few.advances == schedule.forward_steps(50, 2) > every.advances == 49
    assert few.stored_bytes == 2 * 3 * 6 * 2 * 8  # two states of x, v, F
    for key in keys:
        np.testing.assert_array_equal(few.gradients[key], every.gradients[key])
    assert few.objective == every.objective == objective_value(scene, 50, threads=1)


def test_bad_keys_are_refused_with_suggestions(tmp_path):
    scene = load_scene(_scene(tmp_path, GRAVITY))
    with pytest.raises(SceneError, match="Did you mean energy.0.params.softening"):
        scene_gradient(scene, ["energy.0.params.softnening"])
    with pytest.raises(SceneError, match="scenes with step_kernels or a controller only"):
        scene_gradient(scene, ["fields.grid"])
    plain = load_scene(_scene(tmp_path, GRAVITY.replace(
        "objective: {builtin: total, at: end}\n", ""), "plain"))
    with pytest.raises(SceneError, match="no 'objective'"):
        scene_gradient(plain, ["dt"])


# ------------------------------------------------------------------ the command
def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_grad_writes_checked_gradients(tmp_path):
    path = _scene(tmp_path, GRAVITY)
    done = simrun("grad", str(path), "--allow-outside", "--wrt", "dt", "--wrt",
                  "energy.0.params.softening",
                  "--wrt", "state.x0", "--check", "--checkpoints", "3", "--out", "g",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert set(record["gradients"]) == {"dt", "energy.0.params.softening", "state.x0"}
    assert record["schedule"]["snapshots"] == 3 and record["check"]["ok"]
    with np.load(tmp_path / "g" / "gradients.npz") as arrays:
        assert arrays["state.x0"].shape == (6, 2)
        np.testing.assert_array_equal(arrays["state.x0"], record["gradients"]["state.x0"])
    for picture in ("sensitivities.png", "x0_gradient.png"):
        assert (tmp_path / "g" / picture).stat().st_size > 1000
    assert "check: ok" in done.stdout and "Taylor" in done.stdout
    # the scene with an objective still runs
    ran = simrun("run", str(path), "--allow-outside", "--steps", "20", "--out", "r",
                 "--no-render", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_cli_grad_bad_key_is_exit_2_without_traceback(tmp_path):
    path = _scene(tmp_path, GRAVITY)
    done = simrun("grad", str(path), "--allow-outside", "--wrt", "dtt", cwd=tmp_path)
    assert done.returncode == 2
    assert "Did you mean dt" in done.stderr and "Traceback" not in done.stderr


def test_cli_check_fails_on_a_wrong_custom_gradient(tmp_path):
    """An energy whose reverse-mode gradient is replaced by a wrong one (grad_replaced):
    --check must catch it (exit 1), so the check can fail."""
    module = tmp_path / "wrong.py"
    module.write_text(
        "import simrun.lang as ti\n\n\n@ti.kernel\n"
        "def _springs(x: ti.template(), U: ti.template(), k: float):\n"
        "    for i in x:\n"
        "        U[None] += 0.5 * k * x[i].norm_sqr()\n\n\n"
        "@ti.kernel\n"
        "def _half_grad(x: ti.template(), U: ti.template(), k: float):\n"
        "    for i in x:\n"
        "        x.grad[i] += 0.5 * k * x[i]  # the true gradient is k x\n\n\n"
        "@ti.ad.grad_replaced\n"
        "def springs(x, U, k):\n"
        "    _springs(x, U, k)\n\n\n"
        "@ti.ad.grad_for(springs)\n"
        "def springs_grad(x, U, k):\n"
        "    _half_grad(x, U, k)\n")
    body = GRAVITY.replace(f"{KERNELS}/gravity.py:gravity", f"{module}:springs").replace(
        "params: {softening: 0.01, strength: 1.0}", "params: {k: 3.0}")
    path = _scene(tmp_path, body)
    done = simrun("grad", str(path), "--allow-outside", "--wrt", "state.x0", "--check", "--out",
                  "g", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "disagrees" in done.stdout


SPRINGS = """import simrun.lang as ti


@ti.kernel
def plain(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        U[None] += 0.5 * k * x[i].norm_sqr() * x[i][0]


@ti.kernel
def _springs(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        U[None] += 0.5 * k * x[i].norm_sqr() * x[i][0]


@ti.kernel
def _springs_grad(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        g = k * x[i] * x[i][0]
        g[0] += 0.5 * k * x[i].norm_sqr()
        x.grad[i] += U.grad[None] * g


@ti.ad.grad_replaced
def springs(x, U, k):
    _springs(x, U, k)


@ti.ad.grad_for(springs)
def springs_grad(x, U, k):
    _springs_grad(x, U, k)
"""


@pytest.mark.parametrize("native", [True, False])
def test_an_energy_with_its_own_gradient_is_differentiated(tmp_path, native):
    """An energy whose gradient is a hand-written kernel (grad_replaced): its forces and H
    lambda (forward mode through the hand-written gradient) are launched from Python inside
    the reverse step; the gradients equal those of the same energy as a plain kernel to
    rounding (60 steps, f64: 1e-11 of the scale)."""
    from simrun.adjoint.policy import execution

    (tmp_path / "springs.py").write_text(SPRINGS)
    keys = ["state.x0", "state.v0", "dt", "particles.mass"]
    found = {}
    for name in ("plain", "springs"):
        body = GRAVITY.replace(f"{KERNELS}/gravity.py:gravity", f"springs.py:{name}").replace(
            "params: {softening: 0.01, strength: 1.0}", "params: {k: 3.0}")
        with execution(native=native):
            found[name] = scene_gradient(load_scene(_scene(tmp_path, body, name)), keys,
                                         checkpoints=5, threads=1)
    assert found["plain"].objective == pytest.approx(found["springs"].objective, rel=1e-14)
    for key in keys:
        a, b = (np.asarray(found[n].gradients[key]) for n in ("plain", "springs"))
        assert np.any(a != 0), key
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-11 * np.abs(a).max(), err_msg=key)


NOISY = """import simrun.lang as ti


@ti.kernel
def advance(x: ti.template(), v: ti.template(), m: ti.template(), dt: float):
    for i in x:
        v[i] += dt * (-x.grad[i] / m[i]) + 0.3 * (ti.random() - 0.5)
        x[i] += dt * v[i]
"""


def test_a_step_kernel_drawing_random_numbers_is_refused(tmp_path):
    """Its replay in a reverse step would draw other numbers than the run did (a gradient
    measured 0.974 against central differences' 1.014 before this was refused): exit 2, one
    paragraph naming the kernel and the way out, no traceback; `simrun run` still runs it."""
    (tmp_path / "noisy.py").write_text(NOISY)
    path = _scene(tmp_path, GRAVITY.replace("integrator: {type: velocity_verlet, damping: 0.1}",
                                            "step_kernels: {kernels: [noisy.py:advance]}"))
    done = simrun("grad", str(path), "--allow-outside", "--wrt", "state.v0", "--out", "g",
                  cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'advance' draws ti.random()" in done.stderr and "Traceback" not in done.stderr
    ran = simrun("run", str(path), "--allow-outside", "--out", "r", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.mark.parametrize("integrator", ["velocity_verlet", "symplectic_euler"])
def test_forward_mode_equals_reverse_mode(tmp_path, integrator):
    """Tangents and adjoints of the same discrete steps agree to rounding, walls included."""
    body = GRAVITY + "boundary: {type: reflect, low: [0.2, 0.2], high: [0.8, 0.8]}\n"
    scene = load_scene(_scene(tmp_path, body), [f"integrator.type={integrator}",
                                                "objective={builtin: kinetic, at: mean}"])
    keys = ["initial.velocity", "dt", "integrator.damping", "energy.0.params.softening",
            "particles.mass", "state.x0"]
    rev = scene_gradient(scene, keys, checkpoints=3)
    fwd = forward_gradient(scene, keys)
    assert fwd.objective == rev.objective
    for key in keys:
        want = np.asarray(rev.gradients[key])
        if key in fwd.directions:  # an array KEY: dJ along the random direction
            want = np.sum(want * fwd.directions[key])
        scale = np.max(np.abs(want))
        np.testing.assert_allclose(fwd.gradients[key], want, rtol=0, atol=1e-12 * scale)
    assert len(fwd.horizon["dt"]) == rev.steps // scene.outputs.every


def test_cli_forward_mode_writes_the_sensitivity_horizon(tmp_path):
    path = _scene(tmp_path, GRAVITY)
    done = simrun("grad", str(path), "--allow-outside", "--mode", "forward", "--wrt", "dt",
                  "--wrt", "state.x0", "--out", "f", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "f" / "horizon.csv").read_text().splitlines()
    assert lines[0] == "step,time,objective,d/ddt,d/dstate.x0"
    assert int(lines[-1].split(",")[0]) == 60
    record = json.loads((tmp_path / "f" / "gradients.json").read_text())
    assert record["mode"] == "forward" and "state.x0" in record["directions"]
    assert (tmp_path / "f" / "horizon.png").stat().st_size > 1000


def test_cli_forward_mode_of_an_allocated_field(tmp_path):
    """A `fields.<name>` KEY in forward mode (dJ along a random direction of the field): the
    pictures skip it, as they skip every KEY without a value in the scene file (it once
    ended in an error about --sweep after writing gradients.json)."""
    done = simrun("grad", str(REPO / "scenes" / "billiards.yaml"), "--set", "steps=40",
                  "--mode", "forward", "--wrt", "fields.cue_v", "--wrt", "dt", "--out", "f",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "f" / "gradients.json").read_text())
    assert set(record["gradients"]) == {"fields.cue_v", "dt"}
    assert "fields.cue_v" in record["directions"]
    assert (tmp_path / "f" / "sensitivities.png").stat().st_size > 1000


def test_cli_check_validates_objective_and_keys(tmp_path):
    path = _scene(tmp_path, GRAVITY)
    good = simrun("check", str(path), "--allow-outside", "--wrt", "dt", cwd=tmp_path)
    assert good.returncode == 0 and "objective" in good.stdout
    bad = simrun("check", str(path), "--allow-outside", "--wrt", "energy.0.params.k",
                 cwd=tmp_path)
    assert bad.returncode == 2 and "Did you mean" in bad.stderr
