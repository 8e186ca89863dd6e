"""launches.Rows, the executor of the gradient's programs: rows of launches, some of them
Python calls, made in order and as often as each row says, natively where they chain
(consecutive such rows in one native call) and one by one under the interpreted policy,
with the same results and the same stop."""

from __future__ import annotations

import numpy as np
import pytest
from test_lang_chain import axpy, decay, flag_above

import simrun.lang as ti
from simrun.lang.runtime.chain import Chain
from simrun.stepper.launches import (
    Copy,
    Rows,
    accumulate,
    assign,
    fused_copies,
    make,
    resolve,
    without_repeated_copies,
)


def _launches(x, y, flag, calls: list, limit: float) -> list:
    def third_from_python() -> None:  # no compiled variant: a Python call in the rows
        y.from_numpy(y.to_numpy() / 3.0)
        calls.append(y.to_numpy()[0])

    return [axpy.prepare((x, y, 1.0), "primal")[:2], decay.prepare((y,), "primal")[:2],
            third_from_python, flag_above.prepare((y, flag, limit), "primal")[:2]]


def _by_hand(rows, x: np.ndarray) -> np.ndarray:
    y = np.zeros_like(x)
    for first, count, repeats in rows:
        for _ in range(repeats):
            for k in range(first, first + count):
                y = [y + x, 0.5 * y, y / 3.0, y][k]
    return y


@pytest.mark.parametrize("native", [True, False], ids=["native", "interpreted"])
def test_rows_make_chained_and_python_launches_in_order(native, monkeypatch):
    """Rows 0-1 chain whole (one native call), row 2 is a chained launch and a Python call
    (two calls a repetition: the Python one between), row 3 chains again. Both policies
    give the values the same launches give by hand, and count every repetition."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y, flag = ti.field(ti.f64, shape=4), ti.field(ti.f64, shape=4), ti.field(ti.i32, shape=())
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    calls, native_calls = [], []
    run_program = Chain.run_program
    monkeypatch.setattr(Chain, "run_program", lambda self, *a, **k: native_calls.append(1)
                        or run_program(self, *a, **k))
    rows = Rows(_launches(x, y, flag, calls, 1e9), native, stop=flag)
    program = [(0, 1, 3), (0, 2, 1), (1, 2, 2), (0, 1, 1)]
    assert rows.run_program(np.array(program)) == 7
    np.testing.assert_allclose(y.to_numpy(), _by_hand(program, x.to_numpy()), rtol=1e-15)
    assert len(calls) == 2
    assert len(native_calls) == (1 + 2 + 1 if native else 0)


@pytest.mark.parametrize("native", [True, False], ids=["native", "interpreted"])
def test_rows_stop_after_the_repetition_that_set_the_stop_word(native):
    """A watch launch in a row with a Python call sets the stop word: the program ends
    after that repetition, the call made (y = x, 2x by the first row; 3x, above 2.5, in the
    second row's first repetition, counted), both policies."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x, y, flag = ti.field(ti.f64, shape=4), ti.field(ti.f64, shape=4), ti.field(ti.i32, shape=())
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    calls: list = []
    launches = _launches(x, y, flag, calls, 2.5)
    rows = Rows([launches[0], launches[3], lambda: calls.append("between")], native,
                stop=flag)
    assert rows.run_program(np.array([(0, 1, 2), (0, 3, 5), (0, 1, 4)])) == 2 + 1
    assert flag[None] == 1 and y.to_numpy().tolist() == [3.0, 6.0, 9.0, 12.0]
    assert calls == ["between"]


def test_a_copy_is_dropped_only_where_its_destination_holds_the_source():
    """without_repeated_copies drops a copy that repeats one (nothing written between) and a
    copy back into an f32 field from the f64 field it was copied to; it keeps a copy after
    either field was written, after a Python call, and an f64 field's copy back from the f32
    field it was copied to (that cast rounds). The kept launches leave every field as all
    the launches do."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    rng = np.random.default_rng(3)
    a32, b32 = ti.field(ti.f32, shape=16), ti.field(ti.f32, shape=16)
    w64 = ti.field(ti.f64, shape=16)
    a32.from_numpy(rng.normal(size=16).astype(np.float32))
    w64.from_numpy(rng.normal(size=16))
    halve = resolve(decay, (b32,))  # b32 *= 0.5

    def python_call() -> None:
        b32.from_numpy(b32.to_numpy() + 1)

    kept_a = [resolve(assign, (a32, b32, ti.f32)), resolve(assign, (b32, w64, ti.f64))]
    dropped = [resolve(assign, (a32, b32, ti.f32)), resolve(assign, (w64, b32, ti.f32))]
    kept_b = [halve, resolve(assign, (a32, b32, ti.f32)), python_call,
              resolve(assign, (a32, b32, ti.f32)), resolve(assign, (w64, a32, ti.f32)),
              resolve(assign, (a32, w64, ti.f64))]
    launches = kept_a + dropped + kept_b + [resolve(assign, (w64, a32, ti.f32))]  # exact
    assert all(isinstance(x, Copy) for x in kept_a + dropped)
    assert without_repeated_copies(launches) == kept_a + kept_b
    assert without_repeated_copies(kept_b[:-1]) == kept_b[:-1]
    w64.from_numpy(rng.normal(size=16))  # f64 values an f32 copy rounds
    start = [f.to_numpy() for f in (a32, b32, w64)]
    ends = []
    for made in (launches, without_repeated_copies(launches)):
        for f, values in zip((a32, b32, w64), start):
            f.from_numpy(values)
        for launch in made:
            make(launch)
        ends.append([f.to_numpy() for f in (a32, b32, w64)])
    for one, other in zip(*ends):
        np.testing.assert_array_equal(one, other)


def test_fused_copies_make_two_copies_or_additions_as_one_launch_with_their_values():
    """Adjacent copies and accumulations over fields of one shape, also ones where the second
    reads or writes what the first wrote, fuse by twos into one launch each; a copy next to
    a field of another shape stays alone. The fields end as the launches one by one leave
    them, bit for bit (an f64 sum into an f32 field included)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    rng = np.random.default_rng(5)
    a, b = ti.Vector.field(2, ti.f32, shape=8), ti.Vector.field(2, ti.f64, shape=8)
    c, other = ti.Vector.field(2, ti.f64, shape=8), ti.field(ti.f64, shape=5)
    launches = [resolve(assign, (a, b, ti.f64)), resolve(accumulate, (b, c, ti.f64)),
                resolve(accumulate, (c, a, ti.f32)), resolve(assign, (a, c, ti.f64)),
                resolve(accumulate, (b, b, ti.f64)), resolve(assign, (other, other, ti.f64))]
    fused = fused_copies(launches)
    assert len(fused) == 4 and fused[-1] is launches[-1]
    start = [rng.normal(size=f.to_numpy().shape) for f in (a, b, c, other)]
    ends = []
    for made in (launches, fused):
        for f, values in zip((a, b, c, other), start):
            f.from_numpy(values.astype(f.to_numpy().dtype))
        for launch in made:
            make(launch)
        ends.append([f.to_numpy() for f in (a, b, c, other)])
    for one, two in zip(*ends):
        np.testing.assert_array_equal(one, two)
