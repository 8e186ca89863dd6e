"""codegen/vector_width.py: which tasks gather through a loaded index, the narrowed feature
string, and a narrowed task's numbers (the same sums up to the order fast math allows)."""

from __future__ import annotations

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.codegen import vector_width


@ti.kernel
def row_energy(x: ti.template(), nb: ti.template(), U: ti.template()):
    for i in x:
        for k in range(nb[i, 0]):
            j = nb[i, k + 1]
            d = x[i] - x[j]
            U[None] += 1.0 / (1.0 + d.dot(d))


@ti.kernel
def all_pairs(x: ti.template(), U: ti.template()):
    for i in x:
        for j in range(x.shape[0]):
            d = x[i] - x[j]
            U[None] += 1.0 / (1.0 + d.dot(d))


def _fields(n: int = 64, width: int = 12):
    rng = np.random.default_rng(4)
    x = ti.Vector.field(3, ti.f64, shape=n, needs_grad=True)
    x.from_numpy(rng.random((n, 3)))
    nb = ti.field(ti.i32, shape=(n, width + 1))
    rows = np.zeros((n, width + 1), np.int32)
    for i in range(n):
        partners = rng.choice([j for j in range(n) if j != i], size=width - i % 3, replace=False)
        rows[i, 0] = len(partners)
        rows[i, 1:1 + len(partners)] = partners
    nb.from_numpy(rows)
    U = ti.field(ti.f64, shape=(), needs_grad=True)
    return x, nb, U


def test_a_neighbour_rows_loop_gathers_and_all_pairs_does_not():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x, nb, U = _fields()
    row = row_energy.prepare((x, nb, U), "primal")[0].kir
    reverse = row_energy.prepare((x, nb, U), "reverse")[0].kir
    dense = all_pairs.prepare((x, U), "primal")[0].kir
    assert any(vector_width.gathers(t) for t in row.tasks)
    assert any(vector_width.gathers(t) for t in reverse.tasks)  # x.grad[j] += ...
    assert not any(vector_width.gathers(t) for t in dense.tasks)


def test_the_narrowed_features_turn_avx512_off_on_zen4_alone():
    host = "+avx2,+fma,+avx512f,+avx512vl,+avx512bw,-amx-tile,+evex512"
    assert vector_width.narrow_features("znver4", host) == \
        "+avx2,+fma,-avx512f,-avx512vl,-avx512bw,-amx-tile,-evex512"
    assert vector_width.narrow_features("sapphirerapids", host) is None  # not measured
    assert vector_width.narrow_features("znver4", "+avx2,+fma,-avx512f") is None
    text = 'define i64 @"k_t0"(i8* %".1")\n{\n}\ndefine i64 @"k_t1"(i8* %".1")\n{\n}'
    out = vector_width.with_features(text, ["k_t1"], "-avx512f")
    assert out.split("\n")[0] == 'define i64 @"k_t0"(i8* %".1")'
    assert out.split("\n")[3] == 'define i64 @"k_t1"(i8* %".1") "target-features"="-avx512f"'


@pytest.mark.cpu_only("the attribute is the CPU target's")
def test_a_narrowed_gathering_task_gives_the_same_energy_and_forces(tmp_path, monkeypatch):
    """Forced narrow on any host (AVX-512 off where it is on): LLVM takes the attribute, and
    U and dU/dx equal the host-width build's to fast math's reassociation (64 rows of <= 12
    terms of size <= 1: 1e-13 relative is ~500 roundings)."""
    from simrun.lang.runtime import jit

    results, texts = [], []
    compile_module = jit.compile_module
    monkeypatch.setattr(jit, "compile_module",
                        lambda key, text, *a, **k: texts.append(text) or
                        compile_module(key, text, *a, **k))
    for narrow in (False, True):
        texts.clear()
        monkeypatch.setenv("SIMRUN_CACHE_DIR", str(tmp_path / f"cache{narrow}"))
        ti.init(arch=ti.cpu, default_fp=ti.f64)
        cpu, features = jit.host_cpu(None)
        forced = ",".join(("-" + f[1:]) if f[1:].startswith("avx512") else f
                          for f in features.split(",")) if narrow else None
        monkeypatch.setattr(vector_width, "narrow_features", lambda c, f, forced=forced: forced)
        x, nb, U = _fields(48, 10)  # not the other tests' shapes: compiled here, not reused
        with ti.ad.Tape(loss=U):
            row_energy(x, nb, U)
        results.append((U[None], x.grad.to_numpy()))
        assert any('"target-features"=' in t for t in texts) == narrow
    (u0, g0), (u1, g1) = results
    assert u1 == pytest.approx(u0, rel=1e-13)
    np.testing.assert_allclose(g1, g0, rtol=0, atol=1e-13 * np.abs(g0).max())
