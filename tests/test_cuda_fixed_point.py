"""The GPU's reproducible scatters (lang/cuda_fixed_point.py) on the emulated device
(tests/cuda_emulator.py): on the whole grid, the same bits whatever order the contributions
arrive in and however many threads share them, within the accuracy the module states of the
exact sum, non-finite contributions made NaN, and a broken bound detected, not summed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import simrun
import simrun.lang as ti
from simrun.lang import pipeline
from simrun.lang.codegen.cuda.target import CudaToolError, libdevice_bitcode
from simrun.lang.config import on_device
from simrun.lang.runtime import cuda

try:
    libdevice_bitcode()
except CudaToolError as exc:
    pytest.skip(str(exc), allow_module_level=True)

from cuda_emulator import LJ_MELT_4000, EmulatedDevice  # noqa: E402

U = 2.0 ** -53
BINS = 7


@pytest.fixture
def device(monkeypatch):
    monkeypatch.setattr(cuda, "device_status", lambda: None)
    dev = EmulatedDevice()
    monkeypatch.setattr(cuda, "_devices", [dev])
    pipeline.checks.append(dev.capture)
    yield dev
    pipeline.checks.remove(dev.capture)
    ti.init(arch=ti.cpu)


def scatter(xs: np.ndarray, bins: np.ndarray, threads: int, dtype=ti.f64,
            deterministic: bool = True):
    """hist[b] += x, vec[b][1] -= 2x and total[None] += x on the (emulated) GPU."""
    ti.init(arch=ti.cuda, deterministic=deterministic, default_fp=ti.f64,
            cpu_max_num_threads=threads)
    cuda._devices[0].threads = threads
    x, b = ti.field(dtype, len(xs)), ti.field(ti.i32, len(xs))
    hist, total = ti.field(dtype, BINS), ti.field(dtype, ())
    vec = ti.Vector.field(3, dtype, BINS)
    x.from_numpy(xs.astype(x.dtype.np))
    b.from_numpy(bins.astype(np.int32))
    hist.from_numpy(np.full(BINS, 0.5))

    @ti.kernel
    def k():
        for i in x:
            hist[b[i]] += x[i]
            vec[b[i]][1] -= 2.0 * x[i]
            total[None] += x[i]

    k()
    return hist.to_numpy(), vec.to_numpy()[:, 1], total.to_numpy()


def wide_values(n: int, seed: int = 7):
    """Magnitudes 1e-6..1e6: every order of a float sum rounds differently."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)
    return xs, rng.integers(0, BINS, n)


def bound(vs: np.ndarray) -> float:
    """The module's promise for one entry: 2u sum|v| + c^2 m 2^-61 (before the rounding of
    the result to the field's type)."""
    a = np.abs(vs)
    return 2 * U * math.fsum(a) + len(vs) ** 2 * (a.max() if len(a) else 0.0) * 2.0 ** -61


def test_the_same_bits_in_any_order_on_the_whole_grid(device, capsys):
    xs, bins = wide_values(4000)
    perm = np.random.default_rng(1).permutation(len(xs))
    first = scatter(xs, bins, threads=2)
    launches = [serial for name, _, kind, serial in device.log if name == "k"]
    assert launches and not any(launches)  # bound, accumulate, three finishes: the grid
    assert capsys.readouterr().err == ""  # no warning of a one-thread loop
    for again in (scatter(xs[perm], bins[perm], threads=1),
                  scatter(xs[::-1], bins[::-1], threads=2)):
        for a, b in zip(first, again):
            assert np.array_equal(a, b)
    hist, vec, total = first
    for j in range(BINS):
        vs = xs[bins == j]
        assert abs(hist[j] - (0.5 + math.fsum(vs))) <= bound(vs) + U * abs(hist[j])
        assert abs(vec[j] + 2 * math.fsum(vs)) <= bound(2 * vs) + U * abs(vec[j])
    assert abs(total[()] - math.fsum(xs)) <= bound(xs) + U * abs(total[()])


def test_f32_fields_get_the_exact_sum_rounded_once(device):
    xs, bins = wide_values(3000, seed=3)
    xs = xs.astype(np.float32).astype(np.float64)  # the values an f32 field holds
    hist, _, total = scatter(xs, bins, threads=2, dtype=ti.f32)
    for j in range(BINS):
        exact = 0.5 + math.fsum(xs[bins == j])
        # one rounding to f32, and the fixed point's error (far below an f32 ulp)
        slack = bound(xs[bins == j]) * (1 + 2.0 ** -20)
        assert abs(float(hist[j]) - exact) <= np.spacing(np.float32(abs(exact))) / 2 + slack
    assert abs(float(total[()]) - math.fsum(xs)) <= (np.spacing(np.float32(abs(total[()])))
                                                     / 2 + bound(xs) * 1.01)


def test_a_contribution_that_is_not_finite_makes_its_entry_nan(device):
    xs = np.arange(1.0, 15.0)
    bins = np.arange(14) % BINS
    xs[3] = np.inf
    hist, vec, total = scatter(xs, bins, threads=2)
    assert np.isnan(hist[3]) and np.isnan(vec[3]) and np.isnan(total[()])
    others = [j for j in range(BINS) if j != 3]
    assert np.array_equal(hist[others], 0.5 + xs[others] + xs[[j + 7 for j in others]])


def test_without_deterministic_the_scatter_runs_as_before(device):
    xs, bins = wide_values(500)
    hist, _, _ = scatter(xs, bins, threads=2, deterministic=False)
    tasks = {task for name, task, kind, _ in device.log if name == "k"}
    assert tasks == {0}  # the plain atomics, no fixed-point tasks
    np.testing.assert_allclose(hist, [0.5 + math.fsum(xs[bins == j]) for j in range(BINS)],
                               rtol=1e-9)


def test_a_contribution_beyond_the_measured_bound_fails_the_launch(device, monkeypatch):
    """Overflow cannot happen where the bound pass saw the values the accumulation adds;
    where it did not (here: the bound pass left out, as if the body had changed its
    values), the launch fails with the reason instead of adding a wrapped integer."""
    xs, bins = wide_values(100)
    xs *= 2.0 ** 62  # the scale a missing bound gives (1) lets c |x| pass 2**62
    scatter(xs, bins, threads=2)  # its PTX now in the cache: the message must survive a hit
    original = cuda.CudaKernel.launch_plan

    def without_bound(self, tasks):
        plan = list(original(self, tasks))
        bound_tasks = {steps[0] for steps in self.fixed_point.values()}
        return [(k, serial) for k, serial in plan if k not in bound_tasks]

    monkeypatch.setattr(cuda.CudaKernel, "launch_plan", without_bound)
    with pytest.raises(AssertionError, match="fixed-point sum .* larger than its bound"):
        scatter(xs, bins, threads=2)


def test_a_shipped_scene_runs_its_sums_on_the_grid_with_the_same_bits_twice(device,
                                                                          tmp_path):
    """lj_melt (its force and energy scatters): no loop on one GPU thread, the same bits in
    two runs, and the CPU's trajectory to the precision 20 steps of a melt keep. At 4000
    atoms (tests/cuda_emulator.py: the emulator pays for every one)."""
    scene = Path(__file__).resolve().parents[1] / "scenes" / "lj_melt.yaml"
    cpu = simrun.run_scene(scene, tmp_path / "cpu", steps=20, sets=LJ_MELT_4000, render=False)
    with on_device("cuda"):
        gpu = [simrun.run_scene(scene, tmp_path / f"gpu{k}", steps=20, sets=LJ_MELT_4000,
                                render=False) for k in range(2)]
    assert not any(serial for *_, kind, serial in device.log if kind == "range")
    energy = [run.energy for run in (cpu, *gpu)]
    assert len(energy[0]) > 1 and np.array_equal(energy[1], energy[2])
    for column in ("kinetic", "potential"):  # 20 steps of a melt: last bits stay small
        np.testing.assert_allclose(energy[1][column], energy[0][column], rtol=1e-9)
