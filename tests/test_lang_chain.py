"""runtime/chain.py: a sequence of compiled launches repeated in one native call makes the
same launches as Python would, stops on its watch word, and reports a task's error."""

from __future__ import annotations

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.api import runtime
from simrun.lang.runtime.chain import Chain

pytestmark = pytest.mark.cpu_only("native chains post CPU tasks; a GPU runs launch by launch")


@ti.kernel
def axpy(x: ti.template(), y: ti.template(), a: float):
    for i in x:
        y[i] = a * y[i] + x[i]


@ti.kernel
def flag_above(y: ti.template(), flag: ti.template(), limit: float):
    for i in y:
        if y[i] > limit:
            flag[None] = 1


@ti.kernel
def read_at(y: ti.template(), k: ti.i32) -> ti.f64:
    return y[k]


@pytest.mark.parametrize("threads,pool", [(1, "native"), (2, "native"), (2, "python")])
def test_chain_makes_the_same_launches_as_python(threads, pool, monkeypatch):
    monkeypatch.setenv("SIMRUN_POOL", pool)  # python: the fallback pool, a loop in Python
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=threads)
    assert runtime().native == (pool == "native")
    n = 100_000  # large enough to split over the threads
    x, y = ti.field(ti.f64, shape=n), ti.field(ti.f64, shape=n)
    x.from_numpy(np.linspace(-1, 1, n))
    y.from_numpy(np.cos(np.arange(n)))
    start = y.to_numpy()
    for _ in range(25):
        axpy(x, y, 0.75)
    expected = y.to_numpy()
    y.from_numpy(start)
    compiled, flat, _ = axpy.prepare((x, y, 0.75), "primal")
    version = y.version
    assert Chain(runtime(), [(compiled, flat)]).run(25) == 25
    np.testing.assert_array_equal(y.to_numpy(), expected)
    assert y.version > version  # readers see that the field changed


def test_chain_stops_after_the_repetition_that_sets_the_watch_word():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y = ti.field(ti.f64, shape=4), ti.field(ti.f64, shape=4)
    flag = ti.field(ti.i32, shape=())
    x.fill(1.0)
    launches = [axpy.prepare((x, y, 1.0), "primal")[:2],
                flag_above.prepare((y, flag, 6.5), "primal")[:2]]
    chain = Chain(runtime(), launches, stop=flag)
    assert chain.run(100) == 7  # y = 7 after the 7th repetition
    assert y.to_numpy().tolist() == [7.0] * 4 and flag[None] == 1
    with pytest.raises(ValueError, match="0-D ti.i32"):
        Chain(runtime(), launches, stop=y)


def test_chain_raises_a_task_error_as_the_launch_would():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1, debug=True)
    y = ti.field(ti.f64, shape=4)
    compiled, flat, _ = read_at.prepare((y, 9), "primal")
    with pytest.raises(IndexError, match="out of range"):
        Chain(runtime(), [(compiled, flat)]).run(3)


@ti.kernel
def scatter(pos: ti.template(), w: ti.template(), grid: ti.template()):
    for p in pos:  # many particles add into few cells: float adds in the order threads run
        grid[ti.cast(pos[p] * 64.0, ti.i32) % 64] += w[p]


@ti.kernel
def decay(grid: ti.template()):
    for c in grid:
        grid[c] = 0.5 * grid[c]


@pytest.mark.parametrize("pool", ["native", "python"])
def test_chain_keeps_the_deterministic_modes_serial_scatters(pool, monkeypatch):
    """ti.init(deterministic=True) with threads: a chained float scatter into a field too
    large for per-group copies (2 MiB) runs on one thread, its chunks in order, as its own
    launch does, so the sums have the same bits every time (with threads in any order they
    would differ in the last bits from run to run)."""
    monkeypatch.setenv("SIMRUN_POOL", pool)
    ti.init(arch=ti.cpu, default_fp=ti.f32, cpu_max_num_threads=2, deterministic=True)
    n = 200_000
    pos, w = ti.field(ti.f32, shape=n), ti.field(ti.f32, shape=n)
    grid = ti.field(ti.f32, shape=1 << 19)
    rng = np.random.default_rng(0)
    pos.from_numpy(rng.random(n, dtype=np.float32))
    w.from_numpy(rng.normal(size=n).astype(np.float32))
    for _ in range(10):
        scatter(pos, w, grid)
        decay(grid)
    expected = grid.to_numpy()
    launches = [scatter.prepare((pos, w, grid), "primal")[:2],
                decay.prepare((grid,), "primal")[:2]]
    chain = Chain(runtime(), launches)
    assert chain.serial[0] and not chain.serial[-1]  # the scatter alone runs serially
    for _ in range(3):
        grid.fill(0)
        assert chain.run(10) == 10
        np.testing.assert_array_equal(grid.to_numpy(), expected)


@pytest.mark.parametrize("pool", ["native", "python"])
def test_chain_program_runs_blocks_in_turn_and_stops_on_the_watch_word(pool, monkeypatch):
    """run_program: rows (first launch, launch count, repeats) run in order, each block its
    own number of times, as the same launches made one by one; the watch word ends the
    program after the repetition that set it, and the count says how far it got."""
    monkeypatch.setenv("SIMRUN_POOL", pool)
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y = ti.field(ti.f64, shape=4), ti.field(ti.f64, shape=4)
    flag = ti.field(ti.i32, shape=())
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    rows = [(0, 1, 3), (1, 1, 2), (0, 2, 1), (1, 1, 4)]  # y += x | y /= 2 | both | y /= 2
    for first, count, repeats in rows:
        for _ in range(repeats):
            for k in range(first, first + count):
                axpy(x, y, 1.0) if k == 0 else decay(y)
    expected = y.to_numpy()
    y.fill(0.0)
    launches = [axpy.prepare((x, y, 1.0), "primal")[:2], decay.prepare((y,), "primal")[:2],
                flag_above.prepare((y, flag, 1e9), "primal")[:2]]
    assert Chain(runtime(), launches, stop=flag).run_program(np.array(rows)) == 10
    np.testing.assert_array_equal(y.to_numpy(), expected)
    y.fill(0.0)  # y = x, 2x, 3x after the first row's repetitions; > 2.5 stops the second
    watched = Chain(runtime(), [launches[0], flag_above.prepare((y, flag, 2.5), "primal")[:2],
                                launches[1]], stop=flag)
    assert watched.run_program(np.array([(0, 1, 2), (0, 2, 5), (2, 1, 7)])) == 2 + 1
    assert flag[None] == 1 and y.to_numpy().tolist() == [3.0, 6.0, 9.0, 12.0]


def test_chain_without_set_args_uses_what_the_contexts_hold():
    """run(set_args=False): the caller has written the arguments it changed (e.g. a
    controller's step index) with set_args(compiled). A variant launched once in the chain
    shares its context with Python-scope launches (no copy per step): run() writes the
    chain's arguments again."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y = ti.field(ti.f64, shape=3), ti.field(ti.f64, shape=3)
    x.fill(1.0)
    compiled, flat, _ = axpy.prepare((x, y, 2.0), "primal")
    flat = list(flat)
    chain = Chain(runtime(), [(compiled, flat)])
    chain.run(1)  # y = 2 * 0 + 1
    flat[0] = 0.5
    chain.set_args(compiled)  # the context now holds a = 0.5
    chain.run(1, set_args=False)  # y = 0.5 * 1 + 1
    assert y.to_numpy().tolist() == [1.5] * 3
    axpy(x, y, 7.0)  # from Python: y = 7 * 1.5 + 1, and the context holds 7
    assert y.to_numpy().tolist() == [11.5] * 3
    flat[0] = 2.0
    chain.run(1)  # a = 2 again: y = 2 * 11.5 + 1
    assert y.to_numpy().tolist() == [24.0] * 3


def test_two_launches_of_one_variant_keep_their_own_arguments():
    """Two launches of one compiled variant with different scalars in one chain (two energy
    terms of one kernel, different params): each runs with its own, as launched one by one."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y = ti.field(ti.f64, shape=3), ti.field(ti.f64, shape=3)
    x.fill(1.0)
    first, second = axpy.prepare((x, y, 2.0), "primal")[:2], axpy.prepare((x, y, 3.0),
                                                                        "primal")[:2]
    assert first[0] is second[0]  # one variant: its scalars are launch arguments
    Chain(runtime(), [first, second]).run(2)  # y: 1, 4, 9, 28
    assert y.to_numpy().tolist() == [28.0] * 3


def test_launches_sharing_one_argument_list_share_the_context():
    """Launches of one variant with one flat list (the same scene term twice in a step) run
    in the variant's own context, a second list gets a copy; a step's new value written with
    set_args(compiled) reaches every launch of that list, the other list keeps its own."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y = ti.field(ti.f64, shape=3), ti.field(ti.f64, shape=3)
    x.fill(1.0)
    compiled, flat, _ = axpy.prepare((x, y, 2.0), "primal")
    shared, other = list(flat), list(axpy.prepare((x, y, 3.0), "primal")[1])
    alone = Chain(runtime(), [(compiled, shared), (compiled, shared)])
    assert alone.contexts == [None, None]  # no copy: the values are the same at every step
    alone.run(1)  # y: 1, 3
    shared[0] = 0.5
    alone.set_args(compiled)
    alone.run(1, set_args=False)  # y = a * y + x: 0.5 * 3 + 1 = 2.5, then 2.25
    assert y.to_numpy().tolist() == [2.25] * 3
    mixed = Chain(runtime(), [(compiled, shared), (compiled, other), (compiled, shared)])
    assert mixed.contexts[0] is mixed.contexts[2] and mixed.contexts[1] is not None
    assert mixed.contexts[0] is not mixed.contexts[1]
    shared[0] = 2.0
    mixed.set_args(compiled)
    mixed.run(1, set_args=False)  # y: 2 * 2.25 + 1 = 5.5, 3 * 5.5 + 1 = 17.5, then 36
    assert y.to_numpy().tolist() == [36.0] * 3


@ti.kernel
def ramp(y: ti.template(), step: ti.i32, rate: float):
    for i in y:
        y[i] += rate * step + i


@ti.kernel
def count_up(step: ti.template()):
    step[None] += 1


def test_an_integer_field_argument_changes_between_a_chains_launches():
    """`with_field_args(["step"])` on an i32 parameter: the twin reads it from a 0-D i32
    field (no gradient), so a launch inside the chain can move it on between repetitions,
    which a launch's own argument cannot; a Python call writes its argument there, and the
    twin computes what the kernel computes from the same value; its reverse still runs."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    twin = ramp.with_field_args(["step"])
    step = twin.field_args["step"]
    assert step.dtype == ti.i32 and step.grad is None
    y, plain = ti.field(ti.f64, shape=8, needs_grad=True), ti.field(ti.f64, shape=8)
    for k in range(3):
        ramp(plain, k, 0.5)
    compiled, flat, _ = twin.prepare((y, 0, 0.5), "primal")
    tick, tflat, _ = count_up.prepare((step,), "primal")
    step[None] = 0
    Chain(runtime(), [(compiled, list(flat)), (tick, list(tflat))]).run(3)
    np.testing.assert_array_equal(y.to_numpy(), plain.to_numpy())
    assert step[None] == 3
    twin(y, 7, 0.5)  # a Python call writes its argument into the field
    assert step[None] == 7
    y.grad.fill(1.0)
    twin.grad(y, 7, 0.5)
    np.testing.assert_array_equal(y.grad.to_numpy(), np.ones(8))
