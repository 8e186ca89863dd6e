"""Runtime: thread-count independence, the on-disk compile cache, reference snippets."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


# ---------------------------------------------------------------- threads
P = 512
pos = ti.Vector.field(2, ti.f64, shape=P)
energy = ti.field(ti.f64, shape=P)
hist = ti.field(ti.i32, shape=16)
count = ti.field(ti.i32, shape=())
grid = ti.field(ti.f32, shape=(64, 48))


@ti.kernel
def thread_workload():
    for i in pos:
        e = 0.0
        for j in range(P):
            if i != j:
                e += 1.0 / (pos[i] - pos[j]).norm(1e-3)
        energy[i] = e
    for i in range(200_000):
        hist[(i * 7919) % 16] += 1
        count[None] += 1
    for i, j in grid:
        grid[i, j] = ti.sin(i * 0.1) * ti.cos(j * 0.2) + i * j


def _run_workload(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    pos.from_numpy(np.random.default_rng(0).random((P, 2)))
    hist.fill(0)
    count[None] = 0
    thread_workload()
    return energy.to_numpy(), hist.to_numpy(), count[None], grid.to_numpy()


def test_results_independent_of_thread_count():
    single = _run_workload(1)
    default = _run_workload(None)
    many = _run_workload(7)
    for got in (default, many):
        np.testing.assert_array_equal(got[0], single[0])
        np.testing.assert_array_equal(got[1], single[1])
        assert got[2] == single[2] == 200_000
        np.testing.assert_array_equal(got[3], single[3])
    i = np.arange(200_000)
    np.testing.assert_array_equal(single[1], np.bincount((i * 7919) % 16, minlength=16))


@pytest.mark.cpu_only("the fallback where no GPU is found")
def test_gpu_arch_falls_back_to_cpu(capsys):
    ti.init(arch=ti.gpu)
    captured = capsys.readouterr()
    assert "cpu" in (captured.err + captured.out).lower()
    count[None] = 0

    @ti.kernel
    def inc():
        for _ in range(10):
            count[None] += 1

    inc()
    assert count[None] == 10


# ---------------------------------------------------------------- compile cache
CACHE_SCRIPT = textwrap.dedent('''
    import sys, time
    import numpy as np
    import simrun.lang as ti
    from simrun.lang.runtime import jit

    compiles = []
    _orig = jit.compile_module
    def counting(key, text, settings, *kernel):
        compiles.append(key)
        return _orig(key, text, settings, *kernel)
    jit.compile_module = counting

    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=1000)

    @ti.kernel
    def work(a: ti.f64) -> ti.f64:
        for i in x:
            v = ti.Vector([ti.sin(i * a), ti.cos(i * a), ti.sqrt(i + a),
                           ti.exp(-i * a * 0.001)])
            m = v.outer_product(v) + ti.Matrix.identity(ti.f64, 4)
            x[i] = m.determinant() + m.inverse().trace()
        s = 0.0
        ti.loop_config(serialize=True)
        for i in range(1000):
            s += x[i]
        return s

    jit._init()  # LLVM start-up is not what this test measures
    t0 = time.perf_counter()
    r = work(0.37)
    t1 = time.perf_counter()
    print(repr(r), len(compiles), t1 - t0)
''')


def _run_cache_script(script, cache_dir):
    env = dict(os.environ, SIMRUN_CACHE_DIR=str(cache_dir))
    env.pop("SIMRUN_NO_DISK_CACHE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result, n_compiles, seconds = out.stdout.strip().splitlines()[-1].split()
    return result, int(n_compiles), float(seconds)


@pytest.mark.cpu_only("it counts the CPU's LLVM compilations")
def test_disk_cache_second_process_loads_without_compiling(tmp_path):
    script = tmp_path / "cached_kernel.py"
    script.write_text(CACHE_SCRIPT)
    cache = tmp_path / "cache"
    r1, n1, t1 = _run_cache_script(script, cache)
    assert n1 >= 1  # cold: compiled
    files = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert files, "nothing was written to SIMRUN_CACHE_DIR"
    r2, n2, t2 = _run_cache_script(script, cache)
    assert n2 == 0  # warm: loaded from disk, no LLVM compilation
    assert r2 == r1
    assert float(r1) == pytest.approx(_reference_work(0.37), rel=1e-12)
    assert t2 < t1  # the cold run also paid for LLVM O3 + codegen
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == files


def _reference_work(a):
    total = 0.0
    for i in range(1000):
        v = np.array([np.sin(i * a), np.cos(i * a), np.sqrt(i + a), np.exp(-i * a * 0.001)])
        m = np.outer(v, v) + np.eye(4)
        total += np.linalg.det(m) + np.trace(np.linalg.inv(m))
    return total


# ---------------------------------------------------------------- the reference's snippets
def test_reference_compute_y():
    x = ti.field(float, ())
    y = ti.field(float, ())

    @ti.kernel
    def compute_y():
        y[None] = ti.sin(x[None])

    x[None] = 0.7
    compute_y()
    assert y[None] == pytest.approx(np.sin(0.7), rel=1e-6)


def test_reference_gravity_init_and_advance():
    N = 8
    dt = 1e-5
    x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=N)

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v[i]

    init()
    x0 = x.to_numpy()
    assert ((x0 >= 0) & (x0 < 1)).all() and len(np.unique(x0)) == 2 * N
    g = np.random.default_rng(0).normal(size=(N, 2)).astype(np.float32)
    x.grad.from_numpy(g)
    advance()
    v_exp = np.float32(dt) * -g
    np.testing.assert_allclose(v.to_numpy(), v_exp, rtol=1e-6)
    np.testing.assert_allclose(x.to_numpy(), x0 + np.float32(dt) * v_exp, rtol=1e-6)


def test_invalid_llvm_module_is_an_internal_error_naming_the_kernel():
    """The verifier runs before LLVM's optimiser: a codegen bug must not reach the optimiser
    (where an invalid module can crash the process) and must say which kernel it was."""
    from simrun.lang.errors import InternalCompilerError
    from simrun.lang.runtime import jit
    from simrun.lang.settings import Settings

    bad = "define i64 @broken_t0() {\nentry:\n  ret i32 0\n}\n"  # returns i32 from an i64
    with pytest.raises(InternalCompilerError, match=r"(?s)kernel 'my_kernel'.*ret i32 0") as err:
        jit.compile_module("invalid-module-test", bad, Settings(), "my_kernel")
    assert "bug in simrun" in str(err.value)
