"""Launch-level autodiff: the Tape's snapshots, kernels with several loops, side effects, layouts.

Kernels whose loops read what other loops of the same launch wrote, state updated in place by
many launches on one tape, template kernels, no_grad, forward-over-reverse through several loops,
and the known cases where simrun is wrong (strict xfails naming the bug), all in f64 against
closed forms or central differences.
"""

import math

import numpy as np
import pytest

import simrun.lang as ti

N = 4
x = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
y = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
w = ti.field(ti.f64, N)
loss = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
WEIGHTS = np.array([1.0, -0.7, 0.4, 1.3])
H = 1e-6


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


# ---------------------------------------------------------------- several loops, one kernel
@ti.kernel
def write_then_read_across_loops():
    for i in range(N):
        y[i] = x[i] * 2.0
    for i in range(N):
        loss[None] += y[i] * x[i]


@ti.kernel
def read_then_overwrite_across_loops():
    for i in range(N):
        loss[None] += y[i] * x[i]
    for i in range(N):
        y[i] = 5.0


@ti.kernel
def top_level_write_then_loop_read():
    y[0] = x[0] * 3.0
    for i in range(N):
        loss[None] += y[0] * x[i]


def test_loop_reads_field_written_by_earlier_loop_same_kernel():
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    y.fill(100.0)  # stale pre-launch values the gradient must not see
    with ti.ad.Tape(loss=loss):
        write_then_read_across_loops()
    assert loss[None] == pytest.approx(np.sum(2 * X * X))
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * X, rtol=1e-12)
    np.testing.assert_allclose(y.to_numpy(), 2 * X, rtol=0)
    # kernel.grad() alone, straight after the launch
    y.fill(100.0)
    loss[None] = 0
    write_then_read_across_loops()
    x.grad.fill(0)
    loss.grad[None] = 1.0
    write_then_read_across_loops.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 4 * X, rtol=1e-12)


def test_loop_reads_field_overwritten_by_later_loop_same_kernel():
    X, Y = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 1.0, 2.0, 2.0])
    x.from_numpy(X)
    y.from_numpy(Y)
    with ti.ad.Tape(loss=loss):
        read_then_overwrite_across_loops()
    np.testing.assert_allclose(y.to_numpy(), np.full(N, 5.0))
    np.testing.assert_allclose(x.grad.to_numpy(), Y, rtol=1e-12)
    np.testing.assert_allclose(y.grad.to_numpy(), X, rtol=1e-12)


def test_top_level_write_read_by_following_loop():
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    y.fill(100.0)
    with ti.ad.Tape(loss=loss):
        top_level_write_then_loop_read()
    want = np.full(N, 3.0 * X[0])
    want[0] += 3.0 * X.sum()
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-12)


def test_hessian_vector_product_through_several_loops():
    """Forward-over-reverse on a kernel whose second loop reads what its first loop wrote."""
    X, s = np.array([0.3, -0.7, 1.1, 0.5]), np.array([1.0, -0.5, 0.3, 2.0])

    def gradient(at):
        x.from_numpy(at)
        y.fill(7.0)
        with ti.ad.Tape(loss=loss):
            two_loops_energy()
        return x.grad.to_numpy()

    g0 = gradient(X)
    x.from_numpy(X)
    y.fill(7.0)
    loss[None] = 0
    loss.grad[None] = 1.0
    x.grad.fill(0)
    y.grad.fill(0)
    with ti.ad.FwdMode(loss=loss, param=x, seed=s):
        two_loops_energy()
        assert loss.dual[None] == pytest.approx(g0 @ s, rel=1e-12)
        two_loops_energy.grad()
    hv = x.grad.dual.to_numpy()
    np.testing.assert_allclose(x.grad.to_numpy(), g0, rtol=1e-12)
    h = 1e-5
    fd = (gradient(X + h * s) - gradient(X - h * s)) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)


@ti.kernel
def two_loops_energy():
    for i in range(N):
        y[i] = ti.sin(x[i]) * x[i]
    for i in range(N):
        loss[None] += y[i] * y[i] * x[(i + 1) % N]


@ti.kernel
def softmax_in_place():
    for i in range(N):
        loss_norm[None] += ti.exp(x[i])
    for i in range(N):
        x[i] = ti.exp(x[i]) / loss_norm[None]


loss_norm = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)


def test_softmax_in_place_two_loops():
    """A reduction loop, then an in-place loop dividing by it, then a weighted sum."""
    X = np.array([0.1, -0.3, 0.5, 1.2])

    def value(at):
        ex = np.exp(at)
        return float(WEIGHTS @ (ex / ex.sum()))

    x.from_numpy(X)
    loss_norm[None] = 0
    w.from_numpy(WEIGHTS)
    with ti.ad.Tape(loss=loss):
        softmax_in_place()
        weighted_x()
    np.testing.assert_allclose(x.to_numpy(), np.exp(X) / np.exp(X).sum(), rtol=1e-14)
    fd = np.array([(value(X + H * np.eye(N)[j]) - value(X - H * np.eye(N)[j])) / (2 * H)
                   for j in range(N)])
    g = x.grad.to_numpy()
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    x.from_numpy(X)
    loss_norm[None] = 0
    loss[None] = 0
    direction = np.array([1.0, 0.0, -2.0, 0.5])
    with ti.ad.FwdMode(loss=loss, param=x, seed=direction):
        softmax_in_place()
        weighted_x()
    assert loss.dual[None] == pytest.approx(g @ direction, rel=1e-10)


@ti.kernel
def weighted_x():
    for i in range(N):
        loss[None] += w[i] * x[i]


MS = 6
ms_x = ti.field(ti.f64, MS, needs_grad=True, needs_dual=True)
ms_v = ti.field(ti.f64, MS, needs_grad=True, needs_dual=True)
ms_f = ti.field(ti.f64, MS, needs_grad=True, needs_dual=True)
ms_k = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
ms_loss = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)


@ti.kernel
def ms_forces():
    for i in range(MS):
        left = (i + MS - 1) % MS
        right = (i + 1) % MS
        ms_f[i] = -ms_k[None] * (2 * ms_x[i] - ms_x[left] - ms_x[right]) - 0.1 * ms_x[i] ** 3


@ti.kernel
def ms_update():
    for i in range(MS):
        ms_v[i] += 0.05 * ms_f[i]
        ms_x[i] += 0.05 * ms_v[i]


@ti.kernel
def ms_measure():
    for i in range(MS):
        ms_loss[None] += ms_x[i] * ms_x[i] * (i + 1)


def _mass_spring(X0, k, steps=10):
    ms_x.from_numpy(X0)
    ms_v.fill(0)
    ms_f.fill(0)
    ms_k[None] = k
    with ti.ad.Tape(loss=ms_loss):
        for _ in range(steps):
            ms_forces()
            ms_update()
        ms_measure()
    return ms_loss[None], ms_x.grad.to_numpy(), ms_k.grad[None]


def test_in_place_state_simulation_through_tape():
    """State updated in place by 20 launches on one tape (x, v overwritten every step)."""
    X0, k = np.random.default_rng(0).standard_normal(MS), 1.3
    _, gx, gk = _mass_spring(X0, k)
    fdx = np.array([(_mass_spring(X0 + H * e_j, k)[0] - _mass_spring(X0 - H * e_j, k)[0])
                    / (2 * H) for e_j in np.eye(MS)])
    fdk = (_mass_spring(X0, k + H)[0] - _mass_spring(X0, k - H)[0]) / (2 * H)
    np.testing.assert_allclose(gx, fdx, rtol=1e-6, atol=1e-8)
    assert gk == pytest.approx(fdk, rel=1e-6)
    ms_x.from_numpy(X0)
    ms_v.fill(0)
    ms_f.fill(0)
    ms_k[None] = k
    ms_loss[None] = 0
    with ti.ad.FwdMode(loss=ms_loss, param=ms_k):
        for _ in range(10):
            ms_forces()
            ms_update()
        ms_measure()
    assert ms_loss.dual[None] == pytest.approx(gk, rel=1e-10)


# ---------------------------------------------------------------- known wrong or refused
@ti.kernel
def random_scale():
    for i in range(N):
        y[i] = x[i] * ti.random()


def test_random_numbers_are_the_forward_ones():
    X = np.array([0.3, -0.7, 1.1, 0.5])
    x.from_numpy(X)
    random_scale()
    drawn = y.to_numpy() / X
    x.grad.fill(0)
    y.grad.fill(1.0)
    random_scale.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), drawn, rtol=1e-12)


def test_random_numbers_replayed_by_the_tape():
    """Each launch on a tape draws new numbers; its gradient replays exactly its own."""
    X = np.array([0.3, -0.7, 1.1, 0.5])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        random_scale()
        first = y.to_numpy() / X
        sum_y()
        random_scale()
        second = y.to_numpy() / X
        sum_y()
    assert not np.allclose(first, second)
    np.testing.assert_allclose(x.grad.to_numpy(), first + second, rtol=1e-12)


@ti.kernel
def sum_y():
    for i in range(N):
        loss[None] += y[i]


@ti.kernel
def make_y():
    for i in range(N):
        y[i] = x[i] * 2.0


@ti.kernel
def use_y_stopped():
    ti.stop_grad(y)
    for i in range(N):
        loss[None] += y[i] * x[i]


def test_stop_grad_inside_kernel():
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        make_y()
        use_y_stopped()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)


def test_stop_grad_stops_tangents_too():
    """Forward mode agrees with reverse: d(loss)/dx . s with y held constant is 2x . s."""
    X, S = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, -1.0, 2.0, 0.25])
    x.from_numpy(X)
    with ti.ad.FwdMode(loss=loss, param=x, seed=S):
        make_y()  # y.dual = 2 s, which the stopped loads must ignore
        loss[None] = 0
        use_y_stopped()
    assert loss.dual[None] == pytest.approx(float(2 * X @ S), rel=1e-14)


@ti.kernel
def square_in_place():
    for i in range(N):
        x[i] = x[i] * x[i]


def test_grad_after_forward_leaves_final_values():
    X = np.array([1.0, 2.0, 3.0, 0.5])
    x.from_numpy(X)
    square_in_place()
    x.grad.fill(1.0)
    square_in_place.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)
    np.testing.assert_allclose(x.to_numpy(), X * X, rtol=0)


@ti.kernel
def square_in_place_never_launched():
    for i in range(N):
        x[i] = x[i] * x[i]


def test_grad_without_forward_does_not_write_primal():
    X = np.array([1.0, 2.0, 3.0, 0.5])
    x.from_numpy(X)
    x.grad.fill(1.0)
    square_in_place_never_launched.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)
    np.testing.assert_allclose(x.to_numpy(), X, rtol=0)


STEPS_T = 4
traj = ti.field(ti.f64, STEPS_T + 1, needs_grad=True)


@ti.kernel
def time_step(t: ti.i32):
    traj[t + 1] = ti.sin(traj[t]) + traj[t] * 1.5


def test_backward_loop_over_time_indexed_field():
    """DiffTaichi style: step(t) forward for all t, then step.grad(t) for t reversed."""
    traj.fill(0)
    traj[0] = 0.3
    for t in range(STEPS_T):
        time_step(t)
    v, d = 0.3, 1.0
    for _ in range(STEPS_T):
        d *= math.cos(v) + 1.5
        v = math.sin(v) + 1.5 * v
    assert traj[STEPS_T] == pytest.approx(v, rel=1e-14)
    traj.grad.fill(0)
    traj.grad[STEPS_T] = 1.0
    for t in reversed(range(STEPS_T)):
        time_step.grad(t)
    assert traj.grad[0] == pytest.approx(d, rel=1e-12)


def test_backward_loop_keeps_the_final_state():
    traj.fill(0)
    traj[0] = 0.3
    for t in range(STEPS_T):
        time_step(t)
    final = traj.to_numpy()
    traj.grad.fill(0)
    traj.grad[STEPS_T] = 1.0
    for t in reversed(range(STEPS_T)):
        time_step.grad(t)
    np.testing.assert_array_equal(traj.to_numpy(), final)


# ---------------------------------------------------------------- more launches and layouts
@ti.kernel
def scale_field(f: ti.template(), k: ti.f64):
    for i in f:
        f[i] = f[i] * k


@ti.kernel
def copy_field(src: ti.template(), dst: ti.template()):
    for i in src:
        dst[i] = src[i]


@ti.kernel
def sum_squares_of(f: ti.template()):
    for i in f:
        loss[None] += f[i] * f[i]


def test_tape_with_template_kernels_and_arguments():
    """One compiled kernel per field; the tape snapshots what each launch overwrites."""
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        scale_field(x, 2.0)
        copy_field(x, y)
        scale_field(y, 3.0)
        scale_field(x, 5.0)
        sum_squares_of(y)
        sum_squares_of(x)
    np.testing.assert_allclose(x.to_numpy(), 10 * X)
    np.testing.assert_allclose(y.to_numpy(), 6 * X)
    # loss = |6X|^2 + |10X|^2
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * 136 * X, rtol=1e-14)


@ti.ad.no_grad
def make_y_without_grad():
    make_y()


@ti.kernel
def y_dot_x():
    for i in range(N):
        loss[None] += y[i] * x[i]


def test_no_grad_launch_is_a_constant():
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        make_y_without_grad()
        y_dot_x()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)


def test_tape_loss_must_be_0d_with_grad():
    with pytest.raises(ti.AutodiffError, match="0-D"):
        with ti.ad.Tape(loss=x):
            pass
    no_grad_loss = ti.field(ti.f64, ())
    with pytest.raises(ti.AutodiffError, match="gradient"):
        with ti.ad.Tape(loss=no_grad_loss):
            pass


BIG = 4096
bx = ti.field(ti.f64, BIG, needs_grad=True)
by = ti.field(ti.f64, BIG, needs_grad=True)
bn = ti.field(ti.i32, BIG)


@ti.kernel
def many_iterations_many_threads():
    for i in range(BIG):
        v = bx[i]
        for _ in range(bn[i]):
            v = v * 0.9 + ti.sin(v) * 0.1
        by[i] = v


def test_saved_locals_are_per_thread():
    """Thousands of parallel iterations with different trip counts, on all worker threads."""
    rng = np.random.default_rng(0)
    X, T = rng.random(BIG), rng.integers(0, 40, BIG).astype(np.int32)
    bx.from_numpy(X)
    bn.from_numpy(T)
    many_iterations_many_threads()
    by.grad.fill(1.0)
    bx.grad.fill(0)
    many_iterations_many_threads.grad()
    v, d = X.copy(), np.ones(BIG)
    for k in range(T.max()):
        live = T > k
        d = np.where(live, d * (0.9 + 0.1 * np.cos(v)), d)
        v = np.where(live, v * 0.9 + np.sin(v) * 0.1, v)
    np.testing.assert_allclose(by.to_numpy(), v, rtol=1e-13)
    np.testing.assert_allclose(bx.grad.to_numpy(), d, rtol=1e-12)


g2_in = ti.field(ti.f64, (3, 4), needs_grad=True)
g2_out = ti.field(ti.f64, (3, 4), needs_grad=True)


@ti.kernel
def struct_for_2d():
    for i, j in g2_in:
        g2_out[i, j] = g2_in[i, j] ** 2 * (i + 1) + ti.sin(g2_in[i, j]) * j


def test_struct_for_over_2d_field():
    F = np.arange(12.0).reshape(3, 4) * 0.1
    g2_in.from_numpy(F)
    struct_for_2d()
    g2_out.grad.fill(1.0)
    g2_in.grad.fill(0)
    struct_for_2d.grad()
    i, j = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    np.testing.assert_allclose(g2_in.grad.to_numpy(), 2 * F * (i + 1) + np.cos(F) * j,
                               rtol=1e-14)


def test_grad_after_state_changed_uses_current_state():
    """Forward, then a Python-scope write: the old snapshot no longer describes the state."""
    X = np.array([1.0, 2.0, 3.0, 0.5])
    x.from_numpy(X)
    square_in_place()
    x.from_numpy(X + 1.0)  # the user moved on; grad is taken where x is now
    x.grad.fill(1.0)
    square_in_place.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * (X + 1.0), rtol=1e-14)
    np.testing.assert_allclose(x.to_numpy(), X + 1.0, rtol=0)


@ti.kernel
def noisy_step(t: ti.i32):
    traj[t + 1] = traj[t] * (1.0 + ti.random())


def test_backward_loop_replays_each_launchs_random_numbers():
    traj.fill(0)
    traj[0] = 1.0
    for t in range(STEPS_T):
        noisy_step(t)
    values = traj.to_numpy()
    factors = values[1:] / values[:-1]
    traj.grad.fill(0)
    traj.grad[STEPS_T] = 1.0
    for t in reversed(range(STEPS_T)):
        noisy_step.grad(t)
    assert traj.grad[0] == pytest.approx(np.prod(factors), rel=1e-12)
    np.testing.assert_array_equal(traj.to_numpy(), values)


counts = ti.field(ti.i32, 64)


@ti.kernel
def bin_counts():  # reads x (with a gradient), clobbers an integer field, writes no gradient
    ti.loop_config(serialize=True)
    for i in range(N):
        c = ti.cast(ti.abs(x[i]) * 10.0, ti.i32) % 64
        counts[c] = counts[c] + 1


def test_a_launch_that_writes_no_gradient_keeps_no_snapshot():
    """Nothing flows back from fields without gradients, so its kernel.grad() is a no-op and
    the launch keeps no copy of what it overwrites (a neighbour list's 10 MB, every build)."""
    x.from_numpy(np.array([0.1, 0.25, 0.37, 0.4]))
    counts.fill(0)
    bin_counts()
    assert bin_counts.last_launch is None
    assert counts.to_numpy().sum() == N
    x.grad.fill(0)
    bin_counts.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), 0.0)
    assert counts.to_numpy().sum() == N
