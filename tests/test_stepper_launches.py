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
from simrun.stepper.launches import Rows


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
