"""Snapshots of time-indexed fields copy one time slice per launch, not the whole trajectory.

A DiffTaichi-style step writes x[t + 1, :] from x[t, :]; saving all of x before each of T
launches would make a trajectory cost O(T^2).  The gradients must stay exact either way.
"""

import numpy as np
import pytest

import simrun.lang as ti

T, P = 12, 5
pos = ti.field(ti.f64, (T + 1, P), needs_grad=True)
vel = ti.Vector.field(2, ti.f64, (T + 1, P), needs_grad=True)
gain = ti.field(ti.f64, P, needs_grad=True)
total = ti.field(ti.f64, (), needs_grad=True)


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


@ti.kernel
def step(t: ti.i32):
    for p in range(P):
        nxt = t + 1
        vel[nxt, p] = vel[t, p] * 0.9 + ti.Vector([ti.sin(pos[t, p]), 1.0]) * gain[p]
        pos[nxt, p] = pos[t, p] + 0.1 * vel[nxt, p][0]


@ti.kernel
def smooth_in_place(t: ti.i32):
    for p in range(P):
        pos[t, p] = pos[t, p] * pos[t, p] * 0.5 + gain[p]


@ti.kernel
def final_cost():
    for p in range(P):
        total[None] += pos[T, p] ** 2 + vel[T, p].norm_sqr()


def run(G, X0, record=False):
    gain.from_numpy(G)
    pos.fill(0)
    vel.fill(0)
    pos.from_numpy(np.vstack([X0, np.zeros((T, P))]))
    with ti.ad.Tape(loss=total) as tape:
        for t in range(T):
            step(t)
            smooth_in_place(t + 1)
        final_cost()
    return total[None], tape



def _matches_central_differences(run, grad_g, G, X0, h=1e-6):
    """d loss / d gain against central differences of run(gain, x0)[0] (f64, h = 1e-6)."""
    for k in range(P):
        d = np.zeros(P)
        d[k] = h
        fd = (run(G + d, X0)[0] - run(G - d, X0)[0]) / (2 * h)
        assert grad_g[k] == pytest.approx(fd, rel=1e-6, abs=1e-9)

def test_time_slice_snapshots_and_exact_gradient():
    rng = np.random.default_rng(0)
    G, X0 = rng.uniform(-0.5, 0.5, P), rng.uniform(-1, 1, P)
    value, tape = run(G, X0)
    grad_g = gain.grad.to_numpy()
    # each launch saved the slice it overwrote: (1, P) of pos, never the (T + 1, P) field,
    # and only slices read before they are overwritten: step's pos[t + 1] is fresh (nothing
    # read it), its vel[t + 1] the launch reads back itself, smooth_in_place works in place
    saved = {(rec.kernel.name, f.name) for rec in tape.records for f in rec.snapshot}
    assert saved == {("step", "vel"), ("smooth_in_place", "pos")}
    assert sum(len(rec.snapshot) for rec in tape.records) == 2 * T
    for rec in tape.records:
        for f, (_index, saved) in rec.snapshot.items():
            assert saved.shape[:2] == (1, P), (rec.kernel.name, f.name, saved.shape)
    _matches_central_differences(run, grad_g, G, X0)


@ti.kernel
def scatter_two_slices(t: ti.i32):
    for p in range(P):
        pos[t + 1, p] = pos[t, p] * 2.0
        pos[t + 2, p] = pos[t + 1, p] + 1.0


def test_writes_to_two_slices_save_the_whole_field():
    pos.fill(1.0)
    with ti.ad.Tape(loss=total) as tape:
        scatter_two_slices(0)
        final_cost()
    _index, saved = tape.records[0].snapshot[pos]
    assert saved.shape == (T + 1, P)


@ti.kernel
def overwrite_start(t: ti.i32):
    for p in range(P):
        pos[0, p] = pos[t, p] * gain[p]


@ti.kernel
def cost_at(t: ti.i32):
    for p in range(P):
        total[None] += pos[t, p] ** 2 + vel[t, p][0] * pos[0, p]


def test_a_slice_read_before_it_is_overwritten_is_saved():
    """step(0) reads pos[0], which overwrite_start writes later; the second step(0)
    overwrites pos[1] and vel[1], which earlier launches read: all three are saved, and the
    gradient matches central differences."""

    def run_twice(G, X0):
        gain.from_numpy(G)
        pos.fill(0)
        vel.fill(0)
        pos.from_numpy(np.vstack([X0, np.zeros((T, P))]))
        with ti.ad.Tape(loss=total) as tape:
            step(0)
            overwrite_start(1)
            step(0)
            cost_at(1)
        return total[None], tape

    rng = np.random.default_rng(1)
    G, X0 = rng.uniform(-0.5, 0.5, P), rng.uniform(-1, 1, P)
    _, tape = run_twice(G, X0)
    grad_g = gain.grad.to_numpy()
    saved = [sorted(f.name for f in rec.snapshot) for rec in tape.records]
    assert saved == [["vel"], ["pos"], ["pos", "vel"], []]
    _matches_central_differences(run_twice, grad_g, G, X0)


def test_region_set_answers_overlaps_of_partly_pinned_regions():
    """What a Tape's launches read, as a union of slices: a write overlaps it where every
    dimension both pin agrees. Thousands of launches make thousands of slices (DiffTaichi's
    mass_spring: a scan per launch once made an iteration 6 s), so lookups are set lookups."""
    from simrun.lang.autodiff.regions import RegionSet

    every = slice(None)
    assert not RegionSet().overlaps(Ellipsis)
    reads = RegionSet()
    reads.add((slice(3, 4), every))  # row 3
    reads.add((every, slice(5, 6)))  # column 5
    assert reads.overlaps((slice(3, 4), slice(7, 8)))
    assert reads.overlaps((slice(1, 2), slice(5, 6)))
    assert not reads.overlaps((slice(1, 2), slice(7, 8)))
    assert reads.overlaps((slice(1, 2), every))  # row 1 crosses column 5
    assert reads.overlaps(Ellipsis)
    cells = RegionSet()
    for k in range(20000):
        cells.add((slice(k, k + 1), slice(k + 1, k + 2)))
    assert cells.overlaps((slice(7000, 7001), every))
    assert cells.overlaps((every, slice(7001, 7002)))
    assert not cells.overlaps((every, slice(0, 1)))
    assert not cells.overlaps((slice(7000, 7001), slice(7000, 7001)))
    cells.add((slice(0, 1), every))
    assert cells.overlaps((slice(0, 1), slice(9, 10)))
    cells.add(Ellipsis)
    assert cells.overlaps((slice(50000, 50001), slice(3, 4)))
