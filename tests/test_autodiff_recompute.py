"""Inner loops reversed by recomputation (autodiff/recompute.py) and hoisted atomics.

Every kernel's gradient is checked against central differences in f64.  Half of the kernels
take the recompute path (asserted on the IR: no stack push inside the loop); the other half
break one of its conditions and must fall back to the stack, with the same correct result.
"""

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.autodiff.normalize import normalize
from simrun.lang.autodiff.recompute import order_free, recomputable
from simrun.lang.autodiff.reverse import reverse_kernel
from simrun.lang.ir.nodes import For, StackPush, walk

N = 5
H = 1e-6


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


x = ti.field(ti.f64, N, needs_grad=True)
q = ti.field(ti.f64, N, needs_grad=True)
tmp = ti.field(ti.f64, N, needs_grad=True)
out = ti.field(ti.f64, (), needs_grad=True)


@ti.kernel
def pair_cutoff():  # recomputed: single assignments, accumulator, if with a cutoff
    for i in range(N):
        acc = 0.0
        for j in range(N):
            d = x[i] - x[j]
            r2 = d * d + 0.01
            if r2 < 0.6:
                acc += q[j] * ti.exp(-r2) / ti.sqrt(r2)
        out[None] += q[i] * acc


@ti.kernel
def minus_and_reversed_sum():  # recomputed: `acc = acc - e` and `acc = e + acc` forms
    for i in range(N):
        a = 1.0
        b = 0.0
        for j in range(N):
            t = ti.sin(x[j] * q[i])
            a = a - t * t
            b = ti.cos(x[i] + t) + b
        out[None] += a * b


@ti.kernel
def carried_product():  # falls back: the carried value feeds a product
    for i in range(N):
        acc = 1.0
        for j in range(N):
            acc = acc * (1.0 + 0.1 * ti.sin(x[j] + q[i]))
        out[None] += acc


@ti.kernel
def carried_read_elsewhere():  # falls back: the accumulator is read by another statement
    for i in range(N):
        acc = 0.0
        for j in range(N):
            y = acc * 0.5 + x[j]
            acc = acc + y * q[i]
        out[None] += acc


@ti.kernel
def one_branch_then_read():  # falls back: `v` set in one branch only, read after the if
    for i in range(N):
        v = 0.0
        acc = 0.0
        for j in range(N):
            if x[j] > x[i]:
                v = x[j] * q[i]
            acc += v * v
        out[None] += acc


@ti.kernel
def reads_written_field():  # falls back: the loop loads a field the kernel writes
    for i in range(N):
        tmp[i] = x[i] * x[i]
    for i in range(N):
        acc = 0.0
        for j in range(N):
            acc += tmp[j] * q[i]
        out[None] += acc


@ti.kernel
def serial_nest():  # recomputed loop inside a serial loop inside the parallel one
    for i in range(N):
        s = 0.0
        for k in range(3):
            acc = 0.0
            for j in range(N):
                acc += ti.tanh(x[j] * (k + 1) - q[i])
            s += acc * acc
        out[None] += s


@ti.func
def wrap_down(i):  # DiffTaichi smoke's dec_index: an integer local assigned twice
    j = i - 1
    if j < 0:
        j = N - 1
    return j


@ti.kernel
def periodic_neighbours():  # recomputed: smoke's advect pattern (integer locals reassigned)
    for i in range(N):
        acc = 0.0
        for j in range(N):
            left = ti.cast(ti.floor(x[j] * 2.0 + 3.0), ti.i32)
            w = x[j] * 2.0 - left  # reads left before it is wrapped; its partial needs none
            left = left % N
            if left < 0:
                left += N
            acc += w * q[wrap_down(left)] * x[left] * q[i]
        out[None] += acc


@ti.kernel
def index_reassigned_after_use():  # falls back: a load's index is reassigned after the load
    for i in range(N):
        acc = 0.0
        for j in range(N):
            k = j
            a = x[k]
            k = (k + 1) % N
            acc += a * x[k] * q[i]
        out[None] += acc


@ti.kernel
def factor_reassigned_after_use():  # falls back: a product's partial reads a reassigned int
    for i in range(N):
        acc = 0.0
        for j in range(N):
            k = j + 1
            a = x[j] * k
            k = k * 2
            acc += a * q[i] + k
        out[None] += acc


RECOMPUTED = {"pair_cutoff": pair_cutoff, "minus_and_reversed_sum": minus_and_reversed_sum,
              "serial_nest": serial_nest, "periodic_neighbours": periodic_neighbours}
FALLBACK = {"carried_product": carried_product, "carried_read_elsewhere": carried_read_elsewhere,
            "one_branch_then_read": one_branch_then_read,
            "reads_written_field": reads_written_field,
            "index_reassigned_after_use": index_reassigned_after_use,
            "factor_reassigned_after_use": factor_reassigned_after_use}


def _loss(kernel, X, Q) -> float:
    x.from_numpy(X)
    q.from_numpy(Q)
    out[None] = 0.0
    kernel()
    return out[None]


def _central(kernel, X, Q):
    grads = []
    for arr in (X, Q):
        g = np.zeros(N)
        for k in range(N):
            hi, lo = arr.copy(), arr.copy()
            hi[k] += H
            lo[k] -= H
            args_hi = (hi, Q) if arr is X else (X, hi)
            args_lo = (lo, Q) if arr is X else (X, lo)
            g[k] = (_loss(kernel, *args_hi) - _loss(kernel, *args_lo)) / (2 * H)
        grads.append(g)
    return grads


def _reverse(kernel, X, Q):
    x.from_numpy(X)
    q.from_numpy(Q)
    out[None] = 0.0
    with ti.ad.Tape(loss=out):
        kernel()
    return [x.grad.to_numpy(), q.grad.to_numpy()]


def _inner_loops_recomputed(kernel) -> list[bool]:
    kir, _ = kernel.lower(())
    rev = reverse_kernel(kir)
    writes = {s.field for t in kir.tasks for s in walk(t.body) if hasattr(s, "value")
              and hasattr(s, "field")}
    flags = [recomputable(s, writes, set()) for t in kir.tasks for s in walk(normalize(t.body))
             if isinstance(s, For) and not any(isinstance(c, For) for c in walk(s.body))]
    innermost = [loop for t in rev.tasks for loop in walk(t.body) if isinstance(loop, For)
                 and not any(isinstance(c, For) for c in walk(loop.body))]
    pushes_in_loops = [s for loop in innermost for s in walk(loop.body)
                       if isinstance(s, StackPush)]
    return flags + [not pushes_in_loops]


@pytest.mark.parametrize("name", sorted(RECOMPUTED) + sorted(FALLBACK))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_central_differences(name, seed):
    kernel = {**RECOMPUTED, **FALLBACK}[name]
    rng = np.random.default_rng(seed)
    X, Q = rng.uniform(-1, 1, N), rng.uniform(0.2, 1.2, N)
    for got, want in zip(_reverse(kernel, X, Q), _central(kernel, X, Q)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(RECOMPUTED))
def test_energy_loops_take_the_recompute_path(name):
    assert all(_inner_loops_recomputed(RECOMPUTED[name]))


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_unsafe_loops_keep_the_stack(name):
    assert not all(_inner_loops_recomputed(FALLBACK[name]))


def test_a_million_recomputed_iterations():
    big = ti.field(ti.f64, 1000, needs_grad=True)
    total = ti.field(ti.f64, (), needs_grad=True)
    big.from_numpy(np.linspace(0.0, 1.0, 1000))

    @ti.kernel
    def pairs():
        for i in range(1000):
            acc = 0.0
            for j in range(1000):
                acc += big[i] * big[j]
            total[None] += acc

    with ti.ad.Tape(loss=total):
        pairs()
    # d/dx_k sum_ij x_i x_j = 2 sum_j x_j
    np.testing.assert_allclose(big.grad.to_numpy(), 2 * big.to_numpy().sum(), rtol=1e-12)


@ti.kernel
def last_store_wins():  # recomputed, but every iteration stores tmp[i]: the last one counts
    for i in range(N):
        for j in range(N):
            tmp[i] = x[j] * q[i]


@ti.kernel
def sum_of_squares():
    for i in range(N):
        out[None] += tmp[i] * tmp[i]


def _inner_loops(kernel) -> list:
    kir, _ = kernel.lower(())
    return [s for t in kir.tasks for s in walk(normalize(t.body))
            if isinstance(s, For) and not any(isinstance(c, For) for c in walk(s.body))]


def test_sums_reverse_in_forward_order_and_stores_last_first():
    """A recomputed loop that only sums runs its reverse in the forward's order (faster);
    one that stores keeps the reversed order, or the first store would take the gradient
    that belongs to the last one."""
    assert all(order_free(loop) for loop in _inner_loops(pair_cutoff))
    stores = _inner_loops(last_store_wins)
    assert all(recomputable(loop, {tmp}, set()) and not order_free(loop) for loop in stores)
    rng = np.random.default_rng(3)
    X, Q = rng.uniform(-1, 1, N), rng.uniform(0.2, 1.2, N)
    x.from_numpy(X)
    q.from_numpy(Q)
    out[None] = 0.0
    with ti.ad.Tape(loss=out):
        last_store_wins()
        sum_of_squares()
    # out = sum_i (x[N-1] q_i)^2: only x[N-1] has a gradient, 2 x[N-1] sum_i q_i^2
    want = np.zeros(N)
    want[-1] = 2 * X[-1] * (Q ** 2).sum()
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-13, atol=0)
    np.testing.assert_allclose(q.grad.to_numpy(), 2 * X[-1] ** 2 * Q, rtol=1e-13)
