"""On an NVIDIA GPU (marker `gpu`, skipped where none is found): fields, math against NumPy,
atomics, gradients against finite differences, and `simrun run | grad` of shipped scenes
against the CPU's numbers. bench/gpu_check.sh runs these, and the value-comparing engine
tests with TI_ARCH=cuda.

Tolerances: libdevice's float functions are within 2 ulp (CUDA C Programming Guide, "Mathematical
Functions"), the CPU's libm within 1; sums over n terms in another order differ by n eps of
the sum of magnitudes; a short MD run amplifies rounding by its Lyapunov growth (below 1e3
over the steps compared here)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.outputs import read_energy_csv

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
             "acos": np.arccos, "atan": np.arctan, "tanh": np.tanh, "exp": np.exp,
             "log": np.log, "sqrt": np.sqrt, "erf": np.vectorize(math.erf)}


@pytest.fixture(autouse=True)
def _on_gpu():
    ti.init(arch=ti.cuda)
    assert ti.api.config.arch == "cuda"
    yield
    ti.init(arch=ti.cpu)


@pytest.mark.parametrize("dtype, np_dtype", [(ti.f32, np.float32), (ti.f64, np.float64)])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_math_against_numpy(name, dtype, np_dtype):
    n = 4096
    xs = np.linspace(0.01, 0.99, n).astype(np_dtype)  # inside every function's domain
    x, y = ti.field(dtype, n), ti.field(dtype, n)
    fn = getattr(ti, name)

    @ti.kernel
    def apply():
        for i in x:
            y[i] = fn(x[i])

    x.from_numpy(xs)
    apply()
    want = FUNCTIONS[name](xs.astype(np.float64))
    eps = np.finfo(np_dtype).eps
    np.testing.assert_allclose(y.to_numpy(), want, rtol=4 * eps, atol=4 * eps)


def test_fields_round_trip_and_python_scope_sees_device_writes():
    v = ti.Vector.field(3, ti.f32, (64, 8))
    k = ti.field(ti.i64, 64)

    @ti.kernel
    def write():
        for i, j in v:
            v[i, j] = ti.Vector([i, j, i * j]) * 0.5
            k[i] = i * 3

    write()
    i, j = np.meshgrid(np.arange(64), np.arange(8), indexing="ij")
    assert np.array_equal(v.to_numpy(), np.stack([i, j, i * j], -1) * np.float32(0.5))
    assert v[3, 5][2] == 7.5 and k[10] == 30


def test_atomics_against_numpy():
    n, bins = 100_000, 37
    rng = np.random.default_rng(1)
    vals = rng.standard_normal(n)
    idx = rng.integers(0, bins, n).astype(np.int32)
    x, where = ti.field(ti.f64, n), ti.field(ti.i32, n)
    total, counts = ti.field(ti.f64, bins), ti.field(ti.i32, bins)
    hi, lo = ti.field(ti.f64, bins), ti.field(ti.i32, ())
    x.from_numpy(vals)
    where.from_numpy(idx)
    hi.fill(-np.inf)
    lo[None] = 1 << 30

    @ti.kernel
    def scatter():
        for i in x:
            total[where[i]] += x[i]
            counts[where[i]] += 1
            ti.atomic_max(hi[where[i]], x[i])
            ti.atomic_min(lo[None], where[i] * 7 + 3)

    scatter()
    assert np.array_equal(counts.to_numpy(), np.bincount(idx, minlength=bins))
    bound = n * np.finfo(np.float64).eps * np.bincount(idx, np.abs(vals), minlength=bins)
    assert np.all(np.abs(total.to_numpy() - np.bincount(idx, vals, minlength=bins)) <= bound)
    want_hi = np.full(bins, -np.inf)
    np.maximum.at(want_hi, idx, vals)
    assert np.array_equal(hi.to_numpy(), want_hi) and lo[None] == 7 * idx.min() + 3


def _sums_three_times(xs: np.ndarray, deterministic: bool) -> list:
    """(sum, 7-bin histogram) of xs by one float sum and one float scatter, three launches."""
    ti.init(arch=ti.cuda, deterministic=deterministic, default_fp=ti.f64)
    x, hist = ti.field(ti.f64, len(xs)), ti.field(ti.f64, 7)
    x.from_numpy(xs)

    @ti.kernel
    def sums() -> ti.f64:
        total = 0.0
        for i in x:
            hist[i % 7] += x[i]
            total += x[i]
        return total

    runs = []
    for _ in range(3):
        hist.fill(0.0)
        runs.append((sums(), hist.to_numpy()))
    return runs


def test_deterministic_sums_and_scatters_give_the_same_bits_on_every_run():
    """What the emulator cannot check: under deterministic=True the device's racing float
    adds run on one thread (codegen/cuda/order.py), so every launch gives the same bits;
    both modes are within n eps of the sum of magnitudes."""
    rng = np.random.default_rng(3)
    n = 100_000
    xs = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)
    bound = n * np.finfo(np.float64).eps * np.abs(xs).sum()
    want = [xs[r::7].sum() for r in range(7)]
    for deterministic in (True, False):
        runs = _sums_three_times(xs, deterministic)
        for total, h in runs:
            assert abs(total - xs.sum()) <= bound and np.all(np.abs(h - want) <= bound)
        if deterministic:
            assert all(t == runs[0][0] and np.array_equal(h, runs[0][1]) for t, h in runs)


def test_fixed_point_scatters_give_the_same_bits_on_the_whole_grid(capsys):
    """Issue 48: a racing float scatter (and a sum into one place) under deterministic=True
    runs on every thread in 64-bit fixed point (lang/cuda_fixed_point.py): no one-thread
    warning, the same bits in every launch, each entry within the module's bound of the
    exact sum (math.fsum): 2u sum|v| + c^2 m 2^-61, plus the result's own rounding."""
    rng = np.random.default_rng(5)
    n = 200_000
    xs = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)
    ti.init(arch=ti.cuda, deterministic=True, default_fp=ti.f64)
    x, hist, total = ti.field(ti.f64, n), ti.field(ti.f64, 7), ti.field(ti.f64, ())
    x.from_numpy(xs)

    @ti.kernel
    def scatter():
        for i in x:
            hist[i % 7] += x[i]
            total[None] += x[i]

    runs = []
    for _ in range(3):
        hist.fill(0.0)
        total.fill(0.0)
        scatter()
        runs.append((total[None], hist.to_numpy()))
    assert "one GPU thread" not in capsys.readouterr().err
    assert all(t == runs[0][0] and np.array_equal(h, runs[0][1]) for t, h in runs)
    u = 2.0 ** -53
    for got, vs in [(runs[0][0], xs)] + [(runs[0][1][r], xs[r::7]) for r in range(7)]:
        a = np.abs(vs)
        bound = 2 * u * math.fsum(a) + len(vs) ** 2 * a.max() * 2.0 ** -61 + u * abs(got)
        assert abs(got - math.fsum(vs)) <= bound


def test_gradient_against_finite_differences():
    n = 256
    x = ti.field(ti.f64, n, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += ti.sin(x[i]) * ti.erf(x[i]) + x[i] ** 3 / (1.0 + x[i] ** 2)

    xs = np.linspace(-2, 2, n)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        energy()
    grad = x.grad.to_numpy()
    h = 1e-6
    for i in (0, 17, 128, 255):
        def at(v, i=i):
            ys = xs.copy()
            ys[i] = v
            x.from_numpy(ys)
            loss[None] = 0.0
            energy()
            return loss[None]
        fd = (at(xs[i] + h) - at(xs[i] - h)) / (2 * h)
        assert abs(grad[i] - fd) <= 1e-6 * (1 + abs(fd))


def _cli(*args, cwd=ROOT):
    done = subprocess.run([sys.executable, "-m", "simrun.cli", *args], capture_output=True,
                          text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done


SCENES = sorted(p.name for p in (ROOT / "scenes").glob("*.yaml"))
SHORT = 20  # steps: short enough that rounding differences stay near their own size


def _tolerance(scene: dict, factor: float) -> float:
    """factor x particles x eps: each step's sums of n terms differ by n eps (another order,
    libdevice within 2 ulp); a short run amplifies that by its Lyapunov growth, well below
    factor / SHORT over these steps (100 for a run, 1000 for a gradient)."""
    eps = float(np.finfo(np.float32 if scene.get("precision") == "f32" else np.float64).eps)
    return factor * scene["particles"]["count"] * eps


def _scene(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / "scenes" / name).read_text())


@pytest.mark.parametrize("name", SCENES)
def test_run_of_a_shipped_scene_matches_the_cpu(tmp_path, name):
    scene = _scene(name)
    for device in ("cpu", "cuda"):
        _cli("run", f"scenes/{name}", "--steps", str(SHORT), "--no-render", "-q",
             "--out", str(tmp_path / device), "--device", device)
    cpu, gpu = (read_energy_csv(tmp_path / d / "energy.csv") for d in ("cpu", "cuda"))
    tol = _tolerance(scene, 1e2)
    for column in ("kinetic", "potential", "total"):
        if column in cpu.dtype.names:
            scale = np.abs(cpu[column]).max() or 1.0
            np.testing.assert_allclose(gpu[column], cpu[column], rtol=tol,
                                       atol=tol * scale, err_msg=column)


@pytest.mark.parametrize("name", [n for n in SCENES if "optimize" in _scene(n)])
def test_grad_of_a_shipped_scene_matches_the_cpu(tmp_path, name):
    scene = _scene(name)
    wrt = [a for key in scene["optimize"]["parameters"] for a in ("--wrt", key)]
    if "targets" in scene["objective"]:  # ensemble averages: 40 frames at least
        wrt += ["--method", "ensemble", "--steps", "60"]
    for device in ("cpu", "cuda"):
        _cli("grad", f"scenes/{name}", "--steps", str(SHORT), *wrt, "-q",
             "--out", str(tmp_path / device), "--device", device)
    cpu, gpu = (json.loads((tmp_path / d / "gradients.json").read_text())
                for d in ("cpu", "cuda"))
    tol = _tolerance(scene, 1e3)  # a reverse sweep: twice the steps, and their products
    assert gpu["objective"]["value"] == pytest.approx(cpu["objective"]["value"], rel=tol,
                                                      abs=tol)
    # norm-wise over all KEYs: a component that cancels to rounding noise (diffmpm's
    # weights: 1e-11 against a gradient norm of 0.27, in f32) has no relative accuracy
    keys = sorted(cpu["gradients"])
    want, got = (np.concatenate([np.ravel(d["gradients"][k]) for k in keys]) for d in (cpu, gpu))
    assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want), (keys, got, want)
