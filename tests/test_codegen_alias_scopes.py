"""Field accesses carry LLVM alias scopes (emit.TaskEmitter.scoped): every field owns its
array, so LLVM may vectorise a loop that gathers from one field and stores to another
(p2g's gradient). Ndarray arguments get no scope: the same array may be passed twice.
"""

import re

import numpy as np

import simrun.lang as ti
from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import build_module

N = 64
src = ti.field(ti.f32, shape=N)
dst = ti.Vector.field(2, ti.f32, shape=N)


@ti.kernel
def gather_scale(k: ti.i32):
    for i in range(N):
        dst[i] += ti.Vector([src[(i * k) % N], 1.0])


@ti.kernel
def shift_serial(a: ti.types.ndarray(), b: ti.types.ndarray()):
    ti.loop_config(serialize=True)
    for i in range(1, a.shape[0]):
        b[i] = a[i - 1] + 1.0


def _llvm(kernel, args) -> str:
    kir, _ = kernel.lower(args)
    text, _ = build_module(kir, build_layout(kir), "k", False, True)
    return text


def test_field_accesses_are_scoped_per_field():
    ti.init(arch=ti.cpu)
    text = _llvm(gather_scale, (3,))
    accesses = [line for line in text.splitlines()
                if re.search(r"= load float|store float", line)]
    scoped = [line for line in accesses if "!alias.scope" in line and "!noalias" in line]
    assert len(scoped) >= 3  # the gather, and dst's load and store
    scopes = {re.search(r"!alias.scope (!\d+)", line).group(1) for line in scoped}
    assert len(scopes) == 2  # src and dst


def test_ndarray_arguments_may_alias():
    ti.init(arch=ti.cpu)
    a = np.zeros(40, np.float32)
    assert "!alias.scope" not in _llvm(shift_serial, (a, a))
    shift_serial(a, a)  # the same array twice: each b[i] reads the a[i - 1] just written
    np.testing.assert_array_equal(a, np.arange(40, dtype=np.float32))


def test_gather_results():
    for threads in (1, 2):
        ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
        src.from_numpy(np.arange(N, dtype=np.float32))
        dst.fill(0.5)
        gather_scale(5)
        want = np.stack([0.5 + (np.arange(N) * 5) % N, np.full(N, 1.5)], axis=1)
        np.testing.assert_array_equal(dst.to_numpy(), want)
