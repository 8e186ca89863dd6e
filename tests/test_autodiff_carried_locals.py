"""Gradients of locals whose value crosses a statement boundary the reverse walk meets late:
a loop-carried local read before it is reassigned (`d = x[j] - prev; ...; prev = x[j]`),
kernel-level locals filled by a parallel reduction or reassigned between loops, and the
forward-mode tangents of a random draw and of an atomic's old value. Each gradient is checked
against central differences of the whole kernel in f64 (or a closed form)."""

import numpy as np
import pytest

import simrun.lang as ti

N = 6
H = 1e-6
x = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
d = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
loss = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
acc = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
BIG = 1 << 15
xb = ti.field(ti.f64, BIG, needs_grad=True)
X0 = np.array([0.31, -0.72, 0.55, 1.18, -0.43, 0.9])


@pytest.fixture(autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=2)
    x.from_numpy(X0)
    d[None] = 0.9


@ti.kernel
def discounted():
    for _ in range(1):
        weight = 1.0
        s = 0.0
        for j in range(N):
            s += weight * x[j]
            weight = weight * d[None]  # reassigned after its use
        loss[None] += s


@ti.kernel
def total_variation():
    for _ in range(1):
        prev = 0.0
        s = 0.0
        for j in range(N):
            step = x[j] - prev
            s += step * step
            prev = x[j]
        loss[None] += s


@ti.kernel
def swap_recurrence():
    for _ in range(1):
        a = x[0]
        b = 1.0
        for j in range(N):
            a, b = b, a + b * x[j]
        loss[None] += b


@ti.kernel
def carried_under_if():
    for _ in range(1):
        prev = 0.0
        s = 0.0
        for j in range(N):
            if x[j] > prev:
                s += (x[j] - prev) ** 2
            prev = x[j] * d[None]
        loss[None] += s


@ti.kernel
def reduce_then_square():
    s = 0.0
    for i in range(N):
        s += x[i] * x[i]
    loss[None] = ti.sqrt(s) + s * d[None]


@ti.kernel
def reassigned_between_loops():
    a = x[0] + 1.0
    for i in range(N):
        loss[None] += a * x[i]
    a = a * a
    for i in range(N):
        loss[None] += a * ti.sin(x[i])


@ti.kernel
def big_reduction():
    s = 0.0
    for i in range(BIG):
        s += xb[i]
    loss[None] = 3.0 * s * s


def _value(kernel) -> float:
    loss[None] = 0.0
    kernel()
    return loss[None]


def _fd(kernel, field, k) -> float:
    flat = field.to_numpy().reshape(-1)
    out = []
    for sign in (1, -1):
        shifted = flat.copy()
        shifted[k] += sign * H
        field.from_numpy(shifted.reshape(field.shape))
        out.append(_value(kernel))
    field.from_numpy(flat.reshape(field.shape))
    return (out[0] - out[1]) / (2 * H)


@pytest.mark.parametrize("kernel", [discounted, total_variation, swap_recurrence,
                                    carried_under_if, reduce_then_square,
                                    reassigned_between_loops])
def test_reverse_mode_matches_finite_differences(kernel):
    with ti.ad.Tape(loss):
        kernel()
    got = np.append(x.grad.to_numpy(), d.grad[None])
    want = np.array([_fd(kernel, x, k) for k in range(N)] + [_fd(kernel, d, 0)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_discounted_sum_closed_form():
    with ti.ad.Tape(loss):
        discounted()
    powers = 0.9 ** np.arange(N)
    np.testing.assert_allclose(x.grad.to_numpy(), powers, rtol=1e-12)
    np.testing.assert_allclose(d.grad[None], np.sum(np.arange(N) * 0.9 ** (np.arange(N) - 1.0)
                                                    * X0), rtol=1e-12)


@pytest.mark.parametrize("kernel", [discounted, total_variation, swap_recurrence,
                                    reduce_then_square, reassigned_between_loops])
def test_forward_mode_matches_reverse(kernel):
    with ti.ad.Tape(loss):
        kernel()
    reverse = x.grad.to_numpy()
    for k in range(N):
        seed = [0.0] * N
        seed[k] = 1.0
        loss[None] = 0.0
        with ti.ad.FwdMode(loss=loss, param=x, seed=seed):
            kernel()
        assert loss.dual[None] == pytest.approx(reverse[k], rel=1e-9, abs=1e-12)


def test_parallel_reduction_into_a_local_is_exact_on_every_element():
    """32768 elements on 2 threads: every iteration reads the total's adjoint, none clears it
    (it used to race: entries came out 0, 1 or 2 times the right value)."""
    values = np.linspace(0.1, 1.0, BIG)
    xb.from_numpy(values)
    for _ in range(3):
        with ti.ad.Tape(loss):
            big_reduction()
        grads = xb.grad.to_numpy()
        assert np.ptp(grads) == 0.0  # one adjoint, read by every iteration
        np.testing.assert_allclose(grads, 6.0 * values.sum(), rtol=1e-12)


def test_parallel_loop_assigning_a_kernel_local_is_refused():
    @ti.kernel
    def last_writer_wins():
        a = x[0]
        b = 1.0
        for j in range(N):
            c = a + b * x[j]
            a = b
            b = c
        loss[None] += b

    with pytest.raises(ti.AutodiffError, match=r"test_autodiff_carried_locals\.py:\d+.*'a'"):
        with ti.ad.Tape(loss):
            last_writer_wins()


def test_return_inside_if_is_refused_for_gradients():
    @ti.kernel
    def early() -> ti.f64:
        loss[None] += x[0] ** 2
        if x[0] > 0:
            return 1.0
        loss[None] += x[1] * 3.0
        return 0.0

    with pytest.raises(ti.AutodiffError, match=r"test_autodiff_carried_locals\.py:\d+.*return"):
        with ti.ad.Tape(loss):
            early()


def test_forward_tangent_of_random_draw_and_atomic_old_value():
    @ti.kernel
    def noisy():
        for i in range(N):
            r = ti.random(ti.f64)
            old = ti.atomic_add(acc[None], 2.0 * x[i])
            loss[None] += x[i] * r + 0.0 * old

    @ti.kernel
    def draws(out: ti.types.ndarray()):
        for i in range(N):
            out[i] = ti.random(ti.f64)

    @ti.kernel
    def old_value():
        for _ in range(1):
            old = ti.atomic_add(acc[None], 2.0 * x[0])
            loss[None] += old * old

    acc[None] = 0.0
    loss[None] = 0.0
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] * N):
        noisy()
    assert np.isfinite(loss.dual[None])
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=2)
    x.from_numpy(X0)
    r = np.zeros(N)
    draws(r)
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=2)
    x.from_numpy(X0)
    acc[None] = 0.0
    loss[None] = 0.0
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] * N):
        noisy()
    assert loss.dual[None] == pytest.approx(r.sum(), rel=1e-12)
    acc[None] = 0.5
    loss[None] = 0.0
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] + [0.0] * (N - 1)):
        old_value()  # the old value is acc's, whose tangent comes from the first add
    old_value_twice = acc[None]
    assert loss.dual[None] == pytest.approx(0.0)
    acc[None] = 0.5
    loss[None] = 0.0
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] + [0.0] * (N - 1)):
        old_value()
        old_value()  # second launch: old = 0.5 + 2 x0, d old / d x0 = 2
    assert loss.dual[None] == pytest.approx(2 * (old_value_twice) * 2.0, rel=1e-12)


def test_tape_grad_check_accepts_a_correct_gradient():
    with ti.ad.Tape(loss, grad_check=[x, d]):
        discounted()
    np.testing.assert_allclose(x.grad.to_numpy(), 0.9 ** np.arange(N), rtol=1e-12)


idx = ti.field(ti.i32, N)
y = ti.field(ti.f64, N, needs_grad=True)


@ti.kernel
def sum_y_times_x():
    for i in range(N):
        loss[None] += y[i] * x[i]


def test_parallel_stores_that_may_collide_are_refused():
    """Two iterations storing to one element: the survivor depends on the schedule."""
    @ti.kernel
    def collide():
        for i in range(N):
            y[idx[i]] = x[i] * x[i]

    idx.from_numpy(np.array([2, 0, 2, 4, 0, 1], dtype=np.int32))
    with pytest.raises(ti.AutodiffError, match=r"test_autodiff_carried_locals\.py:\d+.*'y'"):
        with ti.ad.Tape(loss):
            collide()
            sum_y_times_x()


@ti.kernel
def serial_stores():
    for _ in range(1):  # one iteration: its stores cannot collide with another's
        for j in range(N):
            t = ti.sin(x[j]) * x[(j + 1) % N]
            y[j] = t * t


@ti.kernel
def permutation_scatter():
    for i in range(N):
        y[idx[i]] += x[i] * x[i]


@pytest.mark.parametrize("kernel", [serial_stores, permutation_scatter])
def test_stores_that_cannot_collide_differentiate(kernel):
    idx.from_numpy(np.array([3, 0, 5, 1, 4, 2], dtype=np.int32))

    def both():
        y.fill(0.0)
        kernel()
        sum_y_times_x()

    with ti.ad.Tape(loss):
        both()
    got = x.grad.to_numpy()
    want = [_fd(both, x, k) for k in range(N)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
