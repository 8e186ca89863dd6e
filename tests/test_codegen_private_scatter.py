"""Per-group copies of scatter targets, and plain adds at an iteration's own index.

Which fields qualify is asserted on the IR (codegen/schedule.py); what the code does is checked
against numpy's np.add.at under 1, 2 and 3 threads with integer-valued f64 addends, so every
order of the adds gives the exact same sums and any lost or doubled add shows.
"""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api
from simrun.lang.codegen import schedule

THREADS = [1, 2, 3]
M = 200_000   # addends: enough estimated work to split the launch
G = 1000      # scatter targets


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)
    yield


idx = ti.field(ti.i32, shape=M)
w = ti.field(ti.f64, shape=M)
g = ti.field(ti.f64, shape=G)
h = ti.Vector.field(2, ti.f64, shape=G)
hits = ti.field(ti.i32, shape=G)
total = ti.field(ti.f64, shape=())
big = ti.field(ti.f64, shape=1 << 18)   # 2 MiB: too large to copy per thread
WIDE = 50_000
wide = ti.field(ti.f64, shape=WIDE)     # merged in many slices
own = ti.field(ti.f64, shape=M)


@ti.kernel
def scatter(n: ti.i32):
    for i in range(n):
        c = idx[i]
        g[c] += w[i]
        h[c] -= ti.Vector([w[i], 2.0 * w[i]])
        for k in range(3):
            g[(c + k) % G] += 1.0
        hits[c] += 1           # an integer scatter stays atomic
        total[None] += w[i]    # a reduction next to the copies


@ti.kernel
def scatter_big(n: ti.i32):
    for i in range(n):
        big[(idx[i] * 263) % (1 << 18)] += w[i]


@ti.kernel
def scatter_wide(n: ti.i32):
    for i in range(n):
        wide[(idx[i] * 53 + i) % WIDE] += w[i]


@ti.kernel
def owned_update(n: ti.i32):
    for i in range(n):
        own[i] += w[i]
        own[i] *= 2.0
        own[i] -= 1.0


def _data(seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, G, M).astype(np.int32)
    v = rng.integers(-50, 50, M).astype(np.float64)
    idx.from_numpy(c)
    w.from_numpy(v)
    return c, v


def _splits(kernel, *args):
    rt = api.runtime()
    before = rt.split_launches
    kernel(*args)
    return rt.split_launches - before


def _task(kernel, *args):
    kir, _ = kernel.lower(args)
    return kir.tasks[0]


def test_which_fields_are_copied():
    copied = {f.name for f in schedule.private_scatters(_task(scatter, M))}
    assert copied == {g.name, h.name}  # not hits (integer) nor total (a reduction)
    assert schedule.private_scatters(_task(scatter_big, M)) == []
    assert [f.name for f in schedule.private_scatters(_task(scatter_wide, M))] == [wide.name]
    assert schedule.private_scatters(_task(owned_update, M)) == []
    assert id(own) in schedule.owned_fields(_task(owned_update, M))


def test_a_field_also_read_is_not_copied():
    @ti.kernel
    def read_too(n: ti.i32):
        for i in range(n):
            g[idx[i]] += g[(idx[i] + 1) % G]

    @ti.kernel
    def old_value_used(n: ti.i32):
        for i in range(n):
            w[i] = ti.atomic_add(g[idx[i]], 1.0)

    assert schedule.private_scatters(_task(read_too, M)) == []
    assert schedule.private_scatters(_task(old_value_used, M)) == []


def test_neighbour_access_is_not_owned():
    @ti.kernel
    def shift(n: ti.i32):
        for i in range(n - 1):
            own[i] += own[i + 1]

    assert id(own) not in schedule.owned_fields(_task(shift, M))


@pytest.mark.parametrize("threads", THREADS)
def test_scatter_exact(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    c, v = _data()
    g.fill(0.5)  # the copies add onto what the field holds
    h.fill(0.0)
    hits.fill(0)
    total[None] = 0.0
    for _ in range(3):  # repeated launches: copies freed, merge counters reset
        split = _splits(scatter, M)
        assert split == (1 if threads > 1 else split)
    want_g = np.full(G, 0.5)
    want_h = np.zeros((G, 2))
    want_hits = np.zeros(G, np.int64)
    for _ in range(3):
        np.add.at(want_g, c, v)
        for k in range(3):
            np.add.at(want_g, (c + k) % G, 1.0)
        np.add.at(want_h, c, -np.stack([v, 2 * v], axis=1))
        np.add.at(want_hits, c, 1)
    np.testing.assert_array_equal(g.to_numpy(), want_g)
    np.testing.assert_array_equal(h.to_numpy(), want_h)
    np.testing.assert_array_equal(hits.to_numpy(), want_hits)
    assert total[None] == 3 * v.sum()


@pytest.mark.parametrize("threads", [1, 2])
def test_small_launch_inline(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    c, v = _data(1)
    g.fill(0.0)
    assert _splits(scatter, 100) == 0
    want = np.zeros(G)
    np.add.at(want, c[:100], v[:100])
    for k in range(3):
        np.add.at(want, (c[:100] + k) % G, 1.0)
    np.testing.assert_array_equal(g.to_numpy(), want)


def test_nan_reaches_the_field():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2)
    c, v = _data(2)
    v[12345] = np.nan
    w.from_numpy(v)
    g.fill(0.0)
    assert _splits(scatter, M) == 1
    out = g.to_numpy()
    assert np.isnan(out[c[12345]])
    assert np.isnan(out).sum() == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_too_large_to_copy_stays_atomic(threads):
    """No copy: atomic adds on two threads, plain adds on the path a launch takes alone
    (statements.atomic_update); both exact."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    c, v = _data(3)
    big.fill(0.0)
    scatter_big(M)
    want = np.zeros(1 << 18)
    np.add.at(want, (c.astype(np.int64) * 263) % (1 << 18), v)
    np.testing.assert_array_equal(big.to_numpy(), want)


@pytest.mark.parametrize("threads", THREADS)
def test_owned_updates(threads):
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    _, v = _data(4)
    start = np.arange(M, dtype=np.float64)
    own.from_numpy(start)
    owned_update(M)
    np.testing.assert_array_equal(own.to_numpy(), (start + v) * 2.0 - 1.0)


def test_debug_mode_scatter_still_checks_indices():
    ti.init(arch=ti.cpu, cpu_max_num_threads=2, debug=True)
    c, _ = _data(5)
    c[M - 7] = G + 3
    idx.from_numpy(c)
    with pytest.raises(IndexError, match="scatter"):
        scatter(M)


@pytest.mark.parametrize("threads", [2, 3])
def test_many_split_launches_stay_exact(threads):
    """Many launches, so that the threads finish their chunks in every order and take the
    merge's slices in every order: any lost or doubled add shows."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    c, v = _data(4)
    g.fill(0.0)
    h.fill(0.0)
    wide.fill(0.0)
    launches = 40
    for _ in range(launches):
        assert _splits(scatter, M) == 1
        assert _splits(scatter_wide, M) == 1
    want_wide = np.zeros(WIDE)
    np.add.at(want_wide, (c.astype(np.int64) * 53 + np.arange(M)) % WIDE, v)
    np.testing.assert_array_equal(wide.to_numpy(), launches * want_wide)
    want_g = np.zeros(G)
    np.add.at(want_g, c, v)
    for k in range(3):
        np.add.at(want_g, (c + k) % G, 1.0)
    np.testing.assert_array_equal(g.to_numpy(), launches * want_g)


def _float_sums(threads: int, launches: int) -> list:
    """g, h and wide after `launches` split launches of non-integer addends (their sums
    depend on the order of the adds) on `threads` threads."""
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    _data(8)
    w.from_numpy(np.random.default_rng(9).standard_normal(M) * 1e3)
    for f in (g, h, wide):
        f.fill(0.1)
    for _ in range(launches):
        assert _splits(scatter, M) == 1
        assert _splits(scatter_wide, M) == 1
    return [f.to_numpy() for f in (g, h, wide)]


def test_copies_sum_in_an_order_fixed_by_the_data():
    """Float sums whose bits depend on the order of the adds: every launch on 1, 2 and 3
    threads gives the same bits (a fixed partition into groups, merged in group order),
    also where the copies are large enough that there are fewer groups than threads
    (`scatter_wide`: the third thread only merges)."""
    launches = 8
    reference = _float_sums(1, launches)
    assert not np.array_equal(reference[0], np.round(reference[0]))  # rounding is at stake
    for threads in (2, 3, 2):
        for got, want in zip(_float_sums(threads, launches), reference):
            np.testing.assert_array_equal(got, want)


PARTICLES = 1 << 18  # a per-particle field of 2 MiB: past PRIVATE_BYTES
partners = ti.field(ti.i32, shape=(PARTICLES, 4))
per_particle = ti.field(ti.f64, shape=PARTICLES)


@ti.kernel
def pair_scatter():
    """The shape of a pair gradient over a neighbour list: x.grad[j] for listed partners."""
    for i in range(per_particle.shape[0]):
        for k in range(4):
            j = partners[i, k]
            per_particle[j] += ti.cast(j % 7, ti.f64) - 3.0
        per_particle[i] -= 1.0


@pytest.mark.parametrize("threads", THREADS)
def test_per_particle_field_of_a_pair_loop_is_copied_at_any_size(threads):
    """A field no larger than the loop's trip count, scattered into from an inner loop, is
    copied per group past PRIVATE_BYTES (its merge costs one pass of the loop's size); the
    sums stay exact (integer-valued addends)."""
    assert schedule.field_bytes(per_particle) > schedule.PRIVATE_BYTES
    assert [f.name for f in schedule.private_scatters(_task(pair_scatter))] == \
        [per_particle.name]
    assert schedule.private_scatters(_task(scatter_big, M)) == []  # no inner loop
    ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
    rng = np.random.default_rng(7)
    j = rng.integers(0, PARTICLES, (PARTICLES, 4)).astype(np.int32)
    partners.from_numpy(j)
    per_particle.fill(0.5)
    pair_scatter()
    want = np.full(PARTICLES, 0.5) - 1.0
    np.add.at(want, j.ravel(), (j.ravel() % 7).astype(np.float64) - 3.0)
    np.testing.assert_array_equal(per_particle.to_numpy(), want)
