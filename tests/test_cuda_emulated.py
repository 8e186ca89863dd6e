"""runtime/cuda.py's launches on an emulated device (tests/cuda_emulator.py): the same
answers as the CPU, with every field synchronised before Python reads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simrun
import simrun.lang as ti
from simrun.lang import compiler_cuda, pipeline
from simrun.lang.codegen import layout
from simrun.lang.codegen.cuda.target import CudaToolError, libdevice_bitcode
from simrun.lang.config import on_device
from simrun.lang.runtime import cuda
from simrun.lang.runtime.launch import KernelIndexError

try:
    libdevice_bitcode()
except CudaToolError as exc:
    pytest.skip(str(exc), allow_module_level=True)

from cuda_emulator import LJ_MELT_4000, EmulatedDevice  # noqa: E402


@pytest.fixture
def device(monkeypatch):
    """ti.init(arch=ti.cuda) on the emulated device."""
    monkeypatch.setattr(cuda, "device_status", lambda: None)
    ti.init(arch=ti.cuda)
    dev = EmulatedDevice()
    monkeypatch.setattr(cuda, "_devices", [dev])
    pipeline.checks.append(dev.capture)
    yield dev
    pipeline.checks.remove(dev.capture)
    ti.init(arch=ti.cpu)


def test_python_scope_sees_device_writes_and_kernels_see_host_writes(device):
    assert ti.api.config.arch == "cuda"
    v = ti.Vector.field(3, ti.f32, (16, 4))
    k = ti.field(ti.i64, 16)
    k.from_numpy(np.arange(16) * 10)

    @ti.kernel
    def write(scale: ti.f32) -> ti.i64:
        total = ti.i64(0)
        for i, j in v:
            v[i, j] = ti.Vector([i, j, i * j]) * scale
        for i in k:
            total += k[i]
            k[i] += i
        return total

    assert write(0.5) == 1200 and device.launches >= 2
    i, j = np.meshgrid(np.arange(16), np.arange(4), indexing="ij")
    assert np.array_equal(v.to_numpy(), np.stack([i, j, i * j], -1) * np.float32(0.5))
    assert np.array_equal(k.to_numpy(), np.arange(16) * 11)
    k[3] = -5  # a host write the next launch must see
    assert write(1.0) == (np.arange(16) * 11).sum() - 33 - 5


def test_fields_stay_on_the_device_until_python_looks(device):
    x = ti.field(ti.f64, 1000)
    n = x.data.nbytes

    @ti.kernel
    def step():
        for i in x:
            x[i] = x[i] * 0.5 + i

    step()
    before = dict(device.moved)
    for _ in range(5):
        step()
    down = device.moved["down"] - before["down"]
    assert down < n and device.moved["up"] - before["up"] < n  # only the context moved
    xs = x.to_numpy()
    assert device.moved["down"] - before["down"] - down == n
    want = np.zeros(1000)
    for _ in range(6):
        want = want * 0.5 + np.arange(1000)
    assert np.array_equal(xs, want)
    x[0] = 100.0  # Python's write reaches the next launch
    step()
    assert x[0] == 50.0 and x[1] == want[1] * 0.5 + 1


def test_reads_bring_a_field_back_once_and_only_writes_are_uploaded_again(device):
    x = ti.field(ti.f64, 1000)
    v = ti.Vector.field(3, ti.f64, 1000)
    n = 8000  # x's bytes (v's are 3n)

    @ti.kernel
    def step():
        for i in x:
            x[i] = x[i] * 0.5 + i
            v[i][1] += 1.0

    def copies(run) -> dict:
        """Copies of x's and v's size each way while run() runs."""
        first = len(device.transfers)
        run()
        moved = device.transfers[first:]
        return {d: sum(1 for way, size in moved if way == d and size in (n, 3 * n))
                for d in ("up", "down")}

    assert copies(step) == {"up": 2, "down": 0}  # the first launch: both go up
    reads = [x.to_numpy, lambda: x[3], lambda: v[7], lambda: v[7][1], v.to_numpy, x.to_numpy]
    assert copies(lambda: [read() for read in reads]) == {"up": 0, "down": 2}
    assert copies(step) == {"up": 0, "down": 0}  # nothing Python read goes up again
    assert copies(step) == {"up": 0, "down": 0}
    assert v[5][1] == 3.0 and x[1] == 1.75
    step()
    for write in (lambda: x.__setitem__(0, 100.0), lambda: x.from_numpy(np.ones(1000)),
                  lambda: x.data.__setitem__(1, -1.0), lambda: v[7].__setitem__(0, 9.0)):
        assert copies(write) == {"up": 0, "down": 1}  # as the last step left it, first
        assert copies(step) == {"up": 1, "down": 0}  # then the host's write, once
    want = np.ones(1000) * 0.5 + np.arange(1000)
    want[1] = -1.0
    want = want * 0.5 + np.arange(1000)
    assert np.array_equal(x.to_numpy(), want * 0.5 + np.arange(1000))
    assert v[7][0] == 9.0 and v[7][1] == 8.0 and v[6][0] == 0.0


def test_a_launch_brings_back_only_its_returns_and_error_slots(device):
    x = ti.field(ti.f64, 100)

    @ti.kernel
    def total(scale: ti.f64) -> ti.f64:
        s = 0.0
        for i in x:
            x[i] = i * scale
            s += x[i]
        return s

    assert total(1.0) == 4950.0
    lay = next(iter(total.variants.values())).layout
    first = len(device.transfers)
    assert total(2.0) == 9900.0
    down = [size for way, size in device.transfers[first:] if way == "down"]
    assert down == [8 * (lay.err_slot + layout.ERR_SLOTS - lay.ret_slot)]
    assert down[0] < 8 * lay.size / 4  # the context is larger: its scheduling slots stay


def test_atomics_and_gradients_match_the_cpu(device):
    x = ti.field(ti.f64, 1000, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)
    bins = ti.field(ti.i32, 7)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += ti.erf(x[i]) * x[i]
            bins[i % 7] += 1

    xs = np.linspace(-1, 1, 1000)
    x.from_numpy(xs)
    with ti.ad.Tape(loss=loss):
        energy()
    from scipy.special import erf

    assert loss[None] == pytest.approx((erf(xs) * xs).sum(), rel=1e-12)
    d = erf(xs) + xs * 2 / np.sqrt(np.pi) * np.exp(-xs * xs)
    np.testing.assert_allclose(x.grad.to_numpy(), d, rtol=1e-12)
    assert np.array_equal(bins.to_numpy(), np.bincount(np.arange(1000) % 7))


def sums_and_scatters(hist, total_field, counts, y, x):
    """A kernel with one loop of each kind: owned writes, a float scatter, a float sum into a
    local, integer counts and a float maximum (the same in any order)."""

    @ti.kernel
    def k() -> ti.f64:
        total = 0.0
        for i in x:
            y[i] = x[i] * 2.0
        for i in x:
            hist[i % 7] += x[i]
        for i in x:
            total += x[i] * x[i]
        for i in x:
            counts[i % 7] += 1
            ti.atomic_max(total_field[None], x[i])
        return total

    return k


@pytest.fixture
def one_thread_sums(monkeypatch):
    """The deterministic mode's racing sums on one GPU thread, as before fixed point
    (tests/test_cuda_fixed_point.py tests that): the device's launches give the CPU's bits."""
    monkeypatch.setattr(compiler_cuda.fixed_point, "extend", lambda kir, shared: {})


@pytest.mark.parametrize("deterministic", [True, False])
def test_deterministic_runs_the_racing_float_adds_on_one_gpu_thread(device, capsys,
                                                                    deterministic,
                                                                    one_thread_sums):
    rng = np.random.default_rng(7)  # magnitudes 1e-6..1e6: every order rounds differently
    xs = rng.standard_normal(5000) * 10.0 ** rng.integers(-6, 7, 5000)

    def run(arch):
        ti.init(arch=arch, deterministic=deterministic, default_fp=ti.f64)
        fields = [ti.field(ti.f64, 7), ti.field(ti.f64, ()), ti.field(ti.i32, 7),
                  ti.field(ti.f64, 5000), ti.field(ti.f64, 5000)]
        fields[-1].from_numpy(xs)
        k = sums_and_scatters(*fields)
        return [k(), k()] + [f.to_numpy() for f in fields]

    cpu = run(ti.cpu)
    assert capsys.readouterr().err == ""
    gpu = run(ti.cuda)
    ranges = [serial for name, _, kind, serial in device.log if name == "k" and kind == "range"]
    assert ranges == [False, deterministic, deterministic, False] * 2
    warned = capsys.readouterr().err
    if deterministic:  # one paragraph, once, naming the kernel, the reason and the choice
        assert warned.count("[simrun]") == 1 and "\n\n" not in warned.strip()
        assert "kernel 'k'" in warned and "one GPU thread" in warned
        assert "deterministic=True" in warned and "deterministic=False" in warned
        for a, b in zip(gpu, cpu):  # the emulator runs the CPU's tasks: the CPU's bits
            assert np.array_equal(a, b)
    else:
        assert warned == ""
    assert gpu[0] == gpu[1] == pytest.approx((xs * xs).sum(), rel=1e-12)
    np.testing.assert_allclose(gpu[2], [xs[r::7].sum() * 2 for r in range(7)], rtol=1e-12)


def test_ndarray_arguments_come_back(device):
    @ti.kernel
    def double(a: ti.types.ndarray()):
        for i in range(a.shape[0]):
            a[i] *= 2.0

    arr = np.arange(5, dtype=np.float32)
    double(arr)
    assert np.array_equal(arr, np.arange(5) * 2.0)


def test_errors_found_on_the_device_are_raised(device):
    ti.init(arch=ti.cuda, debug=True)
    x = ti.field(ti.f32, 4)

    @ti.kernel
    def out_of_range(n: ti.i32):
        for i in range(n):
            x[i] = 1.0

    with pytest.raises(KernelIndexError, match="index \\(4,\\) is out of range"):
        out_of_range(5)


def test_a_shipped_scene_gives_the_cpu_bits(device, tmp_path, one_thread_sums):
    scene = Path(__file__).resolve().parents[1] / "scenes" / "lj_melt.yaml"
    sets = ["outputs.positions=true", *LJ_MELT_4000]
    cpu = simrun.run_scene(scene, tmp_path / "cpu", steps=20, sets=sets, render=False)
    with on_device("cuda"):
        gpu = simrun.run_scene(scene, tmp_path / "gpu", steps=20, sets=sets, render=False)
    assert device.launches > 20  # launch by launch: GPU kernels are not chained
    assert {serial for *_, kind, serial in device.log if kind == "range"} == {False, True}
    assert np.array_equal(gpu.x, cpu.x) and np.array_equal(gpu.total, cpu.total)
    # x, v and the forces go up once and again only where Python wrote them (the thermo
    # rows), not after each step's reads
    state = gpu.masses.size * 3 * 8  # x, v or forces: N x 3 f64
    assert sum(1 for way, size in device.transfers if way == "up" and size == state) < 20


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("scene, wrt", [("fit_spring.yaml", "energy.0.params.k"),
                                        ("billiards.yaml", "fields.cue_v"),
                                        ("mass_spring.yaml", "fields.bias1")])
def test_a_shipped_scene_gradient_gives_the_cpu_bits(device, scene, wrt, mode,
                                                    one_thread_sums):
    """The reverse step's and forward mode's launches (reverse_step.py, tangent.py) made one
    by one on the device: the CPU's bits; the reverse sweep's states stay on the device."""
    from simrun.adjoint import policy
    from simrun.jobs.grad import forward_gradient, scene_gradient
    from simrun.scene import load_scene

    gradient = scene_gradient if mode == "reverse" else forward_gradient
    path = Path(__file__).resolve().parents[1] / "scenes" / scene
    with policy.execution(native=False):  # launch by launch, as on the device (no chains)
        cpu = gradient(load_scene(path, ["steps=40"]), [wrt])
    before, first = device.launches, len(device.transfers)
    with on_device("cuda"):
        scene_ = load_scene(path, ["steps=40"])
        gpu = gradient(scene_, [wrt])
    assert device.launches > before
    assert gpu.objective == cpu.objective
    assert np.array_equal(gpu.gradients[wrt], cpu.gradients[wrt])
    if mode == "reverse":  # the schedule's program keeps the states in slabs on the device:
        p = scene_.particles  # x, v or F of the whole system crosses a few times, not per step
        state = p.count * p.dim * (8 if scene_.precision == "f64" else 4)
        assert sum(1 for _, size in device.transfers[first:] if size == state) < 40


def test_async_launches_send_contexts_from_a_ring_and_python_sees_their_writes(
        device, monkeypatch):
    """SIMRUN_CUDA_ASYNC: a launch that returns nothing and cannot fail sends its context
    from its own ring slot and does not wait; the device is waited for each time the ring
    comes round, a launch that returns waits as before, and fields read back equal."""
    monkeypatch.setattr(cuda, "ASYNC", True)
    monkeypatch.setattr(cuda, "RING_SLOTS", 3)
    x, y = ti.field(ti.f64, 64), ti.field(ti.f64, 64)

    @ti.kernel
    def axpy(a: ti.f64):
        for i in x:
            y[i] = a * x[i] + y[i]

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for i in y:
            s += y[i]
        return s

    x.from_numpy(np.arange(64.0))
    axpy(0.5)  # compiles; its context goes to slot 0
    sent, waits = device.async_uploads, device.waits
    for a in range(2, 11):  # nine more through a ring of three: round at the 4th, 7th, 10th
        axpy(0.5 * a)
    assert device.async_uploads - sent == 9 and device.waits - waits == 3
    assert np.array_equal(y.to_numpy(), 0.5 * sum(range(1, 11)) * np.arange(64.0))
    sent = device.async_uploads
    assert total() == 0.5 * 55 * 2016.0 and device.async_uploads == sent  # it returns: waits


def test_async_mode_waits_for_a_launch_that_can_fail(device, monkeypatch):
    """Under debug (bounds checks, asserts) a launch waits, so its error is raised at once,
    naming the kernel, as without SIMRUN_CUDA_ASYNC."""
    monkeypatch.setattr(cuda, "ASYNC", True)
    ti.init(arch=ti.cuda, debug=True)
    y = ti.field(ti.f64, 8)

    @ti.kernel
    def poke(i: ti.i32):
        for k in range(1):
            y[i + k] = 1.0

    sent = device.async_uploads
    poke(3)
    with pytest.raises(KernelIndexError, match="poke"):
        poke(8)
    assert device.async_uploads == sent


def test_ti_sync_waits_for_the_device(device):
    """ti.sync() ends a timing of asynchronous launches, as in Taichi."""
    waits = device.waits
    ti.sync()
    assert device.waits == waits + 1


def test_a_context_the_device_already_holds_is_not_uploaded_again(device):
    """A launch whose context (field addresses, arguments) equals what the device holds
    after the last one sends none; a new argument, a failed launch (its error slot set on
    the device) or a kernel-wide local kept in the context sends it again."""
    ti.init(arch=ti.cuda, debug=True)
    x = ti.field(ti.f64, 100)

    @ti.kernel
    def scale(a: ti.f64, i: ti.i32):
        for k in range(1):
            x[i + k] = x[i + k] * a + 1.0

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for k in x:
            s += x[k]
        return s

    def contexts(run) -> int:
        first = len(device.named)
        run()
        return sum(1 for way, what, _ in device.named[first:] if way == "up" and what == "")

    assert contexts(lambda: scale(2.0, 0)) == 1
    assert contexts(lambda: scale(2.0, 0)) == 0 and x[0] == 3.0  # the same context: ran
    assert contexts(lambda: scale(3.0, 0)) == 1 and x[0] == 10.0
    with pytest.raises(KernelIndexError):
        scale(3.0, 100)
    assert contexts(lambda: scale(3.0, 100 - 1)) == 1  # not the failed launch's error again
    assert contexts(lambda: scale(3.0, 99)) == 0 and x[99] == 4.0  # ran twice
    assert contexts(total) == 1 and contexts(total) == 1  # its `s` lives in the context
    assert total() == 10.0 + 4.0
