"""Fields whose leading extent is a runtime value (Field.runtime_rows, ir/printer.py): a
kernel over one compiles once for any number of rows, and still writes the right cells;
where the code does use the extent (an atomic's copies, a debug build's bounds checks),
each extent has its own module."""

from __future__ import annotations

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.runtime import jit
from simrun.lang.runtime.launch import KernelIndexError

N = 5


@ti.kernel
def put_row(src: ti.template(), rows: ti.template(), k: ti.template()):
    for i in src:
        rows[k[None], i] = src[i] * 2.0


@ti.kernel
def add_row(src: ti.template(), rows: ti.template(), k: ti.template()):
    for i in src:
        ti.atomic_add(rows[k[None], i], src[i])


def _keys(monkeypatch) -> list:
    """The cache keys of the kernels compiled from here on (not the thread pool's)."""
    asked = []
    made = jit.cache_key

    def cache_key(text: str, settings) -> str:
        key = made(text, settings)
        if text.startswith("kernel "):
            asked.append(key)
        return key

    monkeypatch.setattr(jit, "cache_key", cache_key)
    return asked


def _fields(counts):
    src = ti.Vector.field(2, ti.f64, shape=N)
    src.from_numpy(np.arange(2.0 * N).reshape(N, 2))
    k = ti.field(ti.i32, shape=())
    slabs = [ti.Vector.field(2, ti.f64, shape=(c, N)) for c in counts]
    for slab in slabs:
        slab.runtime_rows = True
    return src, k, slabs


@pytest.mark.cpu_only("counts the CPU JIT's modules")
@pytest.mark.parametrize("kernel, shared", [(put_row, True), (add_row, False)],
                         ids=["stores-share-one-module", "atomics-do-not"])
def test_one_module_for_any_number_of_rows(monkeypatch, kernel, shared):
    ti.init(arch=ti.cpu)
    src, k, slabs = _fields([3, 7])
    asked = _keys(monkeypatch)
    for row, slab in zip((2, 6), slabs):
        k[None] = row
        kernel(src, slab, k)
        want = np.zeros(slab.shape + (2,))
        want[row] = src.to_numpy() * (2.0 if kernel is put_row else 1.0)
        np.testing.assert_array_equal(slab.to_numpy(), want)
    assert (asked[0] == asked[1]) is shared


@pytest.mark.cpu_only("bounds checks of the CPU backend")
def test_debug_bounds_checks_see_each_fields_own_rows():
    """Compiled first for 7 rows, row 5 of a 3-row field is still out of range."""
    ti.init(arch=ti.cpu, debug=True)
    src, k, (seven, three) = _fields([7, 3])
    k[None] = 5
    put_row(src, seven, k)
    with pytest.raises(KernelIndexError):
        put_row(src, three, k)
