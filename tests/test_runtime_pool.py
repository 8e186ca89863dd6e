"""The worker pools (runtime/parallel.py, runtime/pool.py): the native one and the Python one
give the same results, bit for bit, as one thread; workers stop on ti.init; a second Python
thread launching at the same time, a fork, and thousands of tiny split launches (the race
between a worker taking its job and the caller taking it back) all stay exact.
"""

import math
import os
import threading
import warnings

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api
from simrun.lang.runtime import objload

N = 1 << 20
G = 4096
vals = ti.field(ti.f64, shape=N)
cells = ti.field(ti.i32, shape=N)
grid = ti.field(ti.f64, shape=G)
total = ti.field(ti.f64, shape=())
steps = ti.field(ti.i32, shape=64)
other = ti.field(ti.i32, shape=N)


@ti.kernel
def reduce_and_scatter():
    for i in range(N):
        total[None] += ti.sin(vals[i]) * vals[i]
        grid[cells[i]] += vals[i]


@ti.kernel
def isqrt(m: ti.i32):
    """A `while` body: split whenever m > 1, however small m is."""
    for i in range(m):
        n = i * i + 5
        root = 0
        while (root + 1) * (root + 1) <= n:
            root += 1
        steps[i] = root


@ti.kernel
def fill_other(c: ti.i32):
    for i in range(N):
        other[i] = i * 3 + c


def _isqrt_ref(m):
    return np.array([math.isqrt(i * i + 5) for i in range(m)])


def _init(monkeypatch, pool, threads):
    monkeypatch.setenv("SIMRUN_POOL", pool)
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    return api.runtime()


def _data():
    rng = np.random.default_rng(3)
    vals.from_numpy(rng.integers(-64, 64, N).astype(np.float64) / 8)
    cells.from_numpy(rng.integers(0, G, N).astype(np.int32))


def _reduce_and_scatter():
    total[None] = 0.0
    grid.fill(0.0)
    reduce_and_scatter()
    return total[None], grid.to_numpy()


@pytest.fixture(autouse=True)
def _default_init():
    yield
    ti.init(arch=ti.cpu)


native_only = pytest.mark.skipif(not objload.supported(), reason="the native pool is Linux x86-64")


@native_only
def test_native_pool_is_the_default_here(monkeypatch):
    monkeypatch.delenv("SIMRUN_POOL", raising=False)
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    rt = api.runtime()
    fill_other(5)
    assert rt.native and rt.split_launches == 1
    assert [t.name for t in rt._threads] == ["simrun-worker-1"] and rt._threads[0].is_alive()
    np.testing.assert_array_equal(other.to_numpy(), np.arange(N) * 3 + 5)


def test_pools_and_thread_counts_agree_bit_for_bit(monkeypatch):
    _data()
    _init(monkeypatch, "python", 1)
    want_total, want_grid = _reduce_and_scatter()
    ref = np.zeros(G)
    np.add.at(ref, cells.to_numpy(), vals.to_numpy())
    np.testing.assert_array_equal(want_grid, ref)  # eighths: every order sums exactly
    v = vals.to_numpy()
    assert want_total == pytest.approx(float(np.sum(np.sin(v) * v)), rel=1e-12)
    pools = ["python", "native"] if objload.supported() else ["python"]
    for pool in pools:
        for threads in (2, 3):
            rt = _init(monkeypatch, pool, threads)
            got_total, got_grid = _reduce_and_scatter()
            assert rt.split_launches == 1 and rt.native == (pool == "native")
            assert got_total == want_total, (pool, threads)
            np.testing.assert_array_equal(got_grid, want_grid, err_msg=f"{pool} {threads}")


@pytest.mark.parametrize("pool", ["native", "python"])
def test_reinit_stops_the_workers(monkeypatch, pool):
    rt = _init(monkeypatch, pool, 3)
    fill_other(1)
    workers = list(rt._threads)
    assert len(workers) == 2 and all(t.is_alive() for t in workers)
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    assert not any(t.is_alive() for t in workers)
    fill_other(2)
    np.testing.assert_array_equal(other.to_numpy(), np.arange(N) * 3 + 2)


@pytest.mark.parametrize("pool", ["native", "python"])
def test_thousands_of_tiny_split_launches(monkeypatch, pool):
    """Each launch is over in microseconds, so the worker often wakes after the caller took
    its job back, and sometimes takes it first: either way every iteration runs once."""
    rt = _init(monkeypatch, pool, 2)
    want = _isqrt_ref(64)
    before = rt.split_launches
    for k in range(2000):
        m = 2 + k % 63
        steps.fill(-1)
        isqrt(m)
        got = steps.to_numpy()
        np.testing.assert_array_equal(got[:m], want[:m], err_msg=f"launch {k}")
        assert (got[m:] == -1).all()
    assert rt.split_launches - before == 2000


@pytest.mark.parametrize("pool", ["native", "python"])
def test_two_python_threads_launching_at_once(monkeypatch, pool):
    """A launch that finds the workers busy with another thread's runs on its own thread."""
    _init(monkeypatch, pool, 2)
    want = _isqrt_ref(64)
    fill_other(0)
    errors = []

    def launcher():
        try:
            for _ in range(300):
                isqrt(64)
                if not (steps.to_numpy() == want).all():
                    errors.append("isqrt")
        except Exception as exc:  # reported below, with the main thread's view
            errors.append(repr(exc))

    t = threading.Thread(target=launcher)
    t.start()
    for c in range(20):
        fill_other(c)
        if not (other.to_numpy() == np.arange(N) * 3 + c).all():
            errors.append(f"fill {c}")
    t.join(timeout=120)
    assert not t.is_alive() and errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.parametrize("pool", ["native", "python"])
def test_forked_child_starts_its_own_workers(monkeypatch, pool):
    _init(monkeypatch, pool, 2)
    fill_other(1)  # the parent's workers are running
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: exit status 0 when its split launch ran and is right
        ok = False
        try:
            rt = api.runtime()
            before = rt.split_launches
            fill_other(7)
            ok = (other.to_numpy() == np.arange(N) * 3 + 7).all() and \
                rt.split_launches == before + 1 and len(rt._threads) == 1
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    fill_other(2)
    np.testing.assert_array_equal(other.to_numpy(), np.arange(N) * 3 + 2)


@native_only
def test_a_native_pool_that_fails_to_load_falls_back_to_threads(monkeypatch, capsys):
    from simrun.lang.runtime import parallel

    def broken(settings):
        raise OSError("no syscall() in this libc")

    monkeypatch.delenv("SIMRUN_POOL", raising=False)
    monkeypatch.setattr(parallel, "_native_functions", broken)
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    fill_other(4)  # compiled for the native pool: the fallback takes its raw addresses
    rt = api.runtime()
    assert not rt.native and rt.split_launches == 1 and len(rt._threads) == 1
    assert "native worker pool unavailable (no syscall() in this libc)" in capsys.readouterr().err
    np.testing.assert_array_equal(other.to_numpy(), np.arange(N) * 3 + 4)


def test_workers_do_not_spin_when_threads_outnumber_cpus():
    from simrun.lang.runtime import parallel, pool_state

    ti.init(arch=ti.cpu, cpu_max_num_threads=1)
    assert api.runtime().state[pool_state.SPIN] == pool_state.WORKER_SPIN
    ti.init(arch=ti.cpu, cpu_max_num_threads=parallel._cpus() + 1)
    assert api.runtime().state[pool_state.SPIN] == 0
    fill_other(3)
    np.testing.assert_array_equal(other.to_numpy(), np.arange(N) * 3 + 3)
