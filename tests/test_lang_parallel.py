"""Parallel range loops: the inline-vs-split decision and dynamically scheduled chunks.

Every result must be the same under 1, 2 and 3 threads (3 oversubscribes a 2-core box, which
shuffles the chunk schedule): integer work exactly, reductions bit for bit (per-chunk
partials added in chunk order), float scatters to rounding. No timing here; which way a
launch went is read from the runtime's split_launches counter.
"""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api
from simrun.lang.codegen import schedule

THREADS = [1, 2, 3]


def _init(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)


def _splits(kernel, *args):
    """Run kernel once; how many of its task calls were split into chunks."""
    rt = api.runtime()
    before = rt.split_launches
    out = kernel(*args)
    return rt.split_launches - before, out


def _split_on_cpu(split: int, want: int) -> None:
    """The CPU scheduler's choice; a GPU launch (TI_ARCH=cuda) is never split into chunks."""
    if api.config.arch == "cpu":
        assert split == want


SAME_BITS = pytest.mark.cpu_only("the same bits at any thread count without "
                                 "deterministic=True; a GPU needs it (tests/test_gpu.py)")


@pytest.fixture(autouse=True)
def _default_init():
    _init(None)
    yield


# ---------------------------------------------------------------- sizes around the threshold
NMAX = 1 << 20
xs = ti.field(ti.i32, shape=NMAX)


@ti.kernel
def affine(n: ti.i32):
    for i in range(n):
        xs[i] = 3 * i + 1


@ti.kernel
def affine_offset(lo: ti.i32, hi: ti.i32):
    for i in range(lo, hi):
        xs[i] = 7 * i - 2


SIZES = [0, 1, 2, 15, 16, 17, 1023, 8191, 8192, 8193, 16383, 16385, 65537, 300001, NMAX]


@pytest.mark.parametrize("threads", THREADS)
def test_trivial_loop_sizes(threads):
    _init(threads)
    for n in SIZES:
        xs.fill(-5)
        affine(n)
        got = xs.to_numpy()
        np.testing.assert_array_equal(got[:n], 3 * np.arange(n) + 1, err_msg=f"n={n}")
        assert (got[n:] == -5).all(), n


@pytest.mark.cpu_only("the chunk scheduler's threshold")
def test_trivial_loop_inline_below_threshold_split_above():
    """A cheap 8192-iteration loop stays on the calling thread; a million iterations split."""
    _init(2)
    assert _splits(affine, 8192)[0] == 0
    assert _splits(affine, 1)[0] == 0
    assert _splits(affine, NMAX)[0] == 1
    assert api.runtime().last_chunks <= schedule.MAX_CHUNKS


@pytest.mark.parametrize("threads", THREADS)
def test_offset_and_empty_ranges(threads):
    _init(threads)
    for lo, hi in [(5, 200_005), (100_000, 100_000), (300, 10), (-0, 1), (NMAX - 70_000, NMAX)]:
        xs.fill(0)
        affine_offset(lo, hi)
        want = np.zeros(NMAX, np.int32)
        if hi > lo:
            want[lo:hi] = 7 * np.arange(lo, hi) - 2
        np.testing.assert_array_equal(xs.to_numpy(), want, err_msg=f"{lo}..{hi}")


# ---------------------------------------------------------------- heavy bodies, few iterations
HN = 96
hx = ti.field(ti.f64, shape=HN)
hy = ti.field(ti.f64, shape=HN)
hk = ti.field(ti.i32, shape=HN)


@ti.kernel
def heavy_math():
    for i in range(HN):
        v = hx[i]
        for k in ti.static(range(200)):
            v = ti.sin(v) * 0.5 + ti.cos(v * 0.3) * 0.25 + k * 1e-3
        hy[i] = v


@ti.kernel
def inner_invariant(m: ti.i32):
    for i in range(HN):
        acc = 0.0
        for j in range(m):
            acc += ti.sin(hx[i] + j * 0.01)
        hy[i] = acc


@ti.kernel
def inner_triangular():
    for i in range(HN):
        acc = 0
        for j in range(i):
            acc += j
        hk[i] = acc


@ti.kernel
def inner_while():
    for i in range(HN):
        v = i + 1
        steps = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            steps += 1
        hk[i] = steps


def _heavy_ref(x):
    v = x.copy()
    for k in range(200):
        v = np.sin(v) * 0.5 + np.cos(v * 0.3) * 0.25 + k * 1e-3
    return v


def _collatz(v):
    steps = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        steps += 1
    return steps


@pytest.mark.parametrize("threads", THREADS)
def test_heavy_small_loops(threads):
    _init(threads)
    x = np.linspace(-2.0, 2.0, HN)
    hx.from_numpy(x)
    split, _ = _splits(heavy_math)
    np.testing.assert_allclose(hy.to_numpy(), _heavy_ref(x), rtol=1e-12, atol=1e-12)
    _split_on_cpu(split, 1)  # 96 iterations, but each costs ~20k units: worth splitting
    split, _ = _splits(inner_invariant, 2000)  # inner trip count read at launch: 96 x 2000
    ref = np.sin(x[:, None] + np.arange(2000)[None, :] * 0.01).sum(axis=1)
    np.testing.assert_allclose(hy.to_numpy(), ref, rtol=1e-5, atol=2e-3)  # f32 sums
    _split_on_cpu(split, 1)
    split, _ = _splits(inner_invariant, 2)  # 96 x 2 iterations: inline
    ref = np.sin(x[:, None] + np.arange(2)[None, :] * 0.01).sum(axis=1)
    np.testing.assert_allclose(hy.to_numpy(), ref, rtol=1e-6, atol=1e-6)
    assert split == 0
    split, _ = _splits(inner_triangular)  # range(i): at most 95 trips of a few units each
    np.testing.assert_array_equal(hk.to_numpy(), [i * (i - 1) // 2 for i in range(HN)])
    assert split == 0  # (test_codegen_triangular_cost.py: a large one splits)
    hk.fill(0)
    inner_while()
    np.testing.assert_array_equal(hk.to_numpy(), [_collatz(i + 1) for i in range(HN)])


# ---------------------------------------------------------------- atomic scatter
P = 20_000
G = 64
px = ti.Vector.field(2, ti.f32, shape=P)
pm = ti.field(ti.f32, shape=P)
grid_m = ti.field(ti.f32, shape=(G, G))
grid_v = ti.Vector.field(2, ti.f32, shape=(G, G))
grid_n = ti.field(ti.i32, shape=(G, G))


@ti.kernel
def scatter(n: ti.i32):
    for p in range(n):
        base = ti.cast(px[p] * G - 0.5, ti.i32)
        fx = px[p] * G - ti.cast(base, ti.f32)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
        for i in ti.static(range(3)):
            for j in ti.static(range(3)):
                weight = w[i][0] * w[j][1]
                grid_m[base + ti.Vector([i, j])] += weight * pm[p]
                grid_v[base + ti.Vector([i, j])] += weight * pm[p] * px[p]
                grid_n[base + ti.Vector([i, j])] += 1


def _scatter_ref(x, m, n):
    x, m = x[:n].astype(np.float64), m[:n].astype(np.float64)
    base = (x * G - 0.5).astype(np.int64)
    fx = x * G - base
    w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
    gm, gv, gn = np.zeros((G, G)), np.zeros((G, G, 2)), np.zeros((G, G), np.int64)
    for i in range(3):
        for j in range(3):
            weight = w[i][:, 0] * w[j][:, 1]
            cell = (base[:, 0] + i, base[:, 1] + j)
            np.add.at(gm, cell, weight * m)
            np.add.at(gv, cell, (weight * m)[:, None] * x)
            np.add.at(gn, cell, 1)
    return gm, gv, gn


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n", [100, 2048, 8192, P])
def test_atomic_scatter_matches_numpy(threads, n):
    _init(threads)
    rng = np.random.default_rng(11)
    x = rng.uniform(0.1, 0.9, (P, 2)).astype(np.float32)
    m = rng.uniform(0.5, 2.0, P).astype(np.float32)
    px.from_numpy(x)
    pm.from_numpy(m)
    grid_m.fill(0)
    grid_v.fill(0)
    grid_n.fill(0)
    split, _ = _splits(scatter, n)
    gm, gv, gn = _scatter_ref(x, m, n)
    np.testing.assert_array_equal(grid_n.to_numpy(), gn)
    np.testing.assert_allclose(grid_m.to_numpy(), gm, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grid_v.to_numpy(), gv, rtol=1e-4, atol=1e-4)
    if n == P:  # a p2g-like body is split well below 8192 particles' work, into groups
        _split_on_cpu(split, 1)  # fixed by the data: on one thread too (the same bits)
    if n == 100:
        _split_on_cpu(split, 0)


@SAME_BITS
def test_small_float_scatter_is_reproducible():
    """A small scatter runs inline, so float adds land in one order: bit-identical reruns."""
    _init(2)
    rng = np.random.default_rng(12)
    px.from_numpy(rng.uniform(0.1, 0.9, (P, 2)).astype(np.float32))
    pm.from_numpy(rng.uniform(0.5, 2.0, P).astype(np.float32))
    runs = []
    for _ in range(4):
        grid_m.fill(0)
        grid_v.fill(0)
        assert _splits(scatter, 1000)[0] == 0
        runs.append((grid_m.to_numpy(), grid_v.to_numpy()))
    for m, v in runs[1:]:
        np.testing.assert_array_equal(m, runs[0][0])
        np.testing.assert_array_equal(v, runs[0][1])


# ---------------------------------------------------------------- reductions
RN = 1_000_003
rv = ti.field(ti.f32, shape=RN)
U = ti.field(ti.f32, shape=())
V = ti.field(ti.f64, shape=())
cnt = ti.field(ti.i64, shape=())


@ti.kernel
def reduce_all(n: ti.i32) -> ti.f32:
    s = 0.0
    for i in range(n):
        s += rv[i]
        U[None] += rv[i] * rv[i]
        V[None] -= ti.cast(rv[i], ti.f64) * 0.5
        cnt[None] += i % 7
    return s


@ti.kernel
def two_tasks(n: ti.i32) -> ti.f32:
    total = 0.0
    for i in range(n):
        U[None] += ti.sqrt(ti.abs(rv[i]))
    for i in range(n // 2):
        total += rv[2 * i] - rv[2 * i + 1]
    return total


def _reduce(threads, n, u0=0.0):
    _init(threads)
    U[None] = u0
    V[None] = 1.0
    cnt[None] = 0
    s = reduce_all(n)
    return s, U[None], V[None], cnt[None]


@pytest.fixture(scope="module")
def rv_data():
    data = np.random.default_rng(5).uniform(-1.0, 1.0, RN).astype(np.float32)
    return data


@SAME_BITS
@pytest.mark.parametrize("n", [10, 8192, 100_000, RN])
def test_reductions_identical_for_all_thread_counts(rv_data, n):
    rv.from_numpy(rv_data)
    results = [_reduce(t, n) for t in THREADS]
    results += [_reduce(2, n) for _ in range(3)]  # and from one launch to the next
    for r in results[1:]:
        assert r == results[0]
    s, u, v, c = results[0]
    d = rv_data[:n].astype(np.float64)
    assert s == pytest.approx(d.sum(), rel=1e-4, abs=1e-3)
    assert u == pytest.approx((d * d).sum(), rel=1e-4)
    assert v == pytest.approx(1.0 - 0.5 * d.sum(), rel=1e-9, abs=1e-9)
    assert c == int((np.arange(n) % 7).sum())


@SAME_BITS
def test_reduction_onto_nonzero_start_is_deterministic(rv_data):
    rv.from_numpy(rv_data)
    results = {_reduce(t, RN, u0=12345.678) for t in THREADS + [2, 2, 3]}
    assert len(results) == 1


@pytest.mark.parametrize("threads", THREADS)
def test_reductions_in_several_tasks(rv_data, threads):
    _init(threads)
    rv.from_numpy(rv_data)
    U[None] = 0.0
    total = two_tasks(RN - 1)
    d = rv_data.astype(np.float64)
    assert total == pytest.approx((d[0:RN - 1:2] - d[1:RN - 1:2]).sum(), rel=1e-3, abs=1e-2)
    assert U[None] == pytest.approx(np.sqrt(np.abs(d[:RN - 1])).sum(), rel=1e-4)


hi = ti.field(ti.f32, shape=())
lo = ti.field(ti.f32, shape=())
top = ti.field(ti.i32, shape=())
both = ti.field(ti.f32, shape=())


@ti.kernel
def extremes(n: ti.i32):
    for i in range(n):
        ti.atomic_max(hi[None], rv[i] - 2.0)  # all negative: a partial must start below
        ti.atomic_min(lo[None], rv[i] * 2.0 + 5.0)  # all positive
        ti.atomic_max(top[None], (i * 7919) % 1000 - 2000)
        ti.atomic_max(both[None], rv[i])  # max and min on one field: plain atomics
        ti.atomic_min(both[None], rv[i] + 3.0)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n", [10, 100_000, RN])
def test_max_and_min_reductions(rv_data, threads, n):
    """ti.atomic_max / atomic_min into a 0-d field run as per-chunk partial extremes (no
    compare-and-swap per iteration), onto the field's value before the launch, at any
    thread count; a field given both kinds stays with atomics and the same answer."""
    from simrun.lang.ir.ops import Op
    from simrun.lang.ir.reductions import field_reductions
    from simrun.lang.pipeline import run

    kir = run(extremes.lower((n,))[0], "primal", "extremes")  # dead_code drops old values
    kinds = {f.name: kind for f, kind in field_reductions(kir.tasks[0]).values()}
    assert kinds == {"hi": Op.MAX, "lo": Op.MIN, "top": Op.MAX}
    _init(threads)
    rv.from_numpy(rv_data)
    hi[None], lo[None], top[None], both[None] = -10.0, 10.0, 10**6, -5.0
    extremes(n)
    d = rv_data[:n]
    assert hi[None] == (d - np.float32(2.0)).max()
    assert lo[None] == (d * np.float32(2.0) + np.float32(5.0)).min()
    assert top[None] == 10**6
    top[None] = -10**6
    extremes(n)
    assert top[None] == ((np.arange(n) * 7919) % 1000 - 2000).max()
    assert both[None] == min(max(-5.0, d.max()), (d + np.float32(3.0)).min())


# ---------------------------------------------------------------- random, serialize, autodiff
RR = 200_000
rr = ti.field(ti.f32, shape=RR)
pref = ti.field(ti.i32, shape=RR)
gx = ti.field(ti.f32, shape=RR, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def draw():
    for i in range(RR):
        rr[i] = ti.random() - 0.5 * ti.random(ti.f32)


@ti.kernel
def prefix_sum(n: ti.i32):
    ti.loop_config(serialize=True)
    for i in range(1, n):
        pref[i] = pref[i - 1] + i


@ti.kernel
def energy():
    for i in range(RR):
        loss[None] += 0.5 * gx[i] * gx[i]


def test_random_in_split_loop_independent_of_threads():
    got = []
    for t in THREADS:
        ti.init(arch=ti.cpu, cpu_max_num_threads=t, random_seed=9)
        split, _ = _splits(draw)
        _split_on_cpu(split, 1)
        got.append(rr.to_numpy())
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])


@pytest.mark.parametrize("threads", THREADS)
def test_serialized_loop(threads):
    _init(threads)
    pref.fill(0)
    split, _ = _splits(prefix_sum, RR)
    assert split == 0
    np.testing.assert_array_equal(pref.to_numpy(), np.cumsum(np.arange(RR)).astype(np.int32))


@pytest.mark.parametrize("threads", THREADS)
def test_gradient_of_split_reduction(threads):
    _init(threads)
    x = np.random.default_rng(2).uniform(-1, 1, RR).astype(np.float32)
    gx.from_numpy(x)
    with ti.ad.Tape(loss=loss):
        energy()
    np.testing.assert_allclose(gx.grad.to_numpy(), x, rtol=1e-6)
    assert loss[None] == pytest.approx(0.5 * (x.astype(np.float64) ** 2).sum(), rel=1e-4)


def test_index_error_in_split_loop():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2, debug=True)

    @ti.kernel
    def out_of_range(n: ti.i32):
        for i in range(n):
            xs[i + 1] = i

    with pytest.raises(IndexError):
        out_of_range(NMAX)
    out_of_range(10)  # the runtime is still usable
    assert xs[10] == 9
