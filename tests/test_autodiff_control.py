"""Gradients through control flow, loops and the global data access rules, in f64.

Each differentiable kernel is checked against central differences of the whole kernel: reverse
mode (kernel.grad and Tape) and forward mode (FwdMode), at hypothesis-drawn inputs.  Cases that
simrun must refuse raise AutodiffError; cases where simrun is known to be wrong are strict xfails
whose reason names the bug.
"""

import math

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import simrun.lang as ti

N = 4
x = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
y = ti.field(ti.f64, N, needs_grad=True, needs_dual=True)
p = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
n = ti.field(ti.i32, N)
w = ti.field(ti.f64, N)
loss = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
cnt = ti.field(ti.i32, ())
e = ti.field(ti.f64, N + 1, needs_grad=True, needs_dual=True)
WEIGHTS = np.array([1.0, -0.7, 0.4, 1.3])
TRIPS = np.array([0, 1, 3, 5], dtype=np.int32)
H = 1e-6


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


@ti.kernel
def weighted_sum():
    for i in range(N):
        loss[None] += w[i] * y[i]


# ---------------------------------------------------------------- kernels: read x, p, n; write y
@ti.kernel
def k_if_else():
    for i in range(N):
        v = x[i]
        if v > 0.5:
            v = v * v * p[None]
        elif v > -0.5:
            v = ti.sin(v) + p[None]
        else:
            v = -v * p[None]
        y[i] = v


@ti.kernel
def k_nested_loops():
    for i in range(N):
        s = 0.0
        for j in range(3):
            for k in range(2):
                s += ti.sin(x[i] * (j + 1) + p[None] * k)
        y[i] = s


@ti.kernel
def k_static_loop():
    for i in range(N):
        v = x[i]
        for k in ti.static(range(3)):
            v = v * p[None] + ti.cos(v) * k
        y[i] = v


@ti.func
def piecewise(v, q):
    if v > 0.5:
        return v * q
    if v < -0.5:
        return -v * v
    return ti.sin(v) * q


@ti.kernel
def k_func_early_return():
    for i in range(N):
        y[i] = piecewise(x[i], p[None]) + piecewise(x[i] * 0.5, 2.0)


@ti.kernel
def k_while():
    for i in range(N):
        v = x[i]
        k = 0
        while k < n[i]:
            v = ti.sin(v) * p[None] + v
            k += 1
        y[i] = v


@ti.kernel
def k_while_break():
    for i in range(N):
        v = x[i]
        while True:
            v = v * p[None] + 0.5
            if v > 5.0:
                break
        y[i] = v


@ti.kernel
def k_break_continue():
    for i in range(N):
        s = 0.0
        for j in range(8):
            if j % 3 == 1:
                continue
            s = s * p[None] + ti.sin(x[i] * j)
            if j >= n[i] + 2:
                break
        y[i] = s


@ti.kernel
def k_top_level_continue():
    for i in range(N):
        if n[i] == 0:
            continue
        y[i] = x[i] * p[None] * n[i]


@ti.kernel
def k_data_dependent_trips():
    for i in range(N):
        v = x[i]
        for _ in range(n[i]):
            v = v * p[None] + 0.3
        y[i] = v


@ti.kernel
def k_several_inner_loops():
    for i in range(N):
        s = 0.0
        for j in range(3):
            s += x[i] * p[None] * j
        t = 1.0
        for _ in range(n[i]):
            t *= x[i]
        u = 0.0
        for _ in range(2):
            u = u * 0.5 + ti.sin(t)
        y[i] = s * t + u


@ti.kernel
def k_mixed_top_level():
    y[0] = x[0] * p[None]
    for i in range(1, N):
        y[i] = x[i] * x[i - 1]
    y[0] += ti.sin(x[N - 1])
    for i in range(N):
        for j in range(2):
            y[i] += x[i] * j


@ti.kernel
def k_serial_carried_local():
    acc = p[None]
    ti.loop_config(serialize=True)
    for i in range(N):
        acc = acc * x[i] + 0.1
        y[i] = acc


@ti.kernel
def k_grid_accumulate():
    # taichi issue 8356's form: an inner loop accumulating into the output
    for i in range(N):
        for j in range(N):
            y[i] += x[j] * p[None] * (i + 1)


def span(u, lo, hi):
    return lo + (hi - lo) * np.asarray(u)


def away_from(u, lo, hi, cuts):
    """Values in [lo, hi) at least 0.05 from every cut (branch thresholds)."""
    v = span(u, lo, hi)
    for c in cuts:
        v = np.where(np.abs(v - c) < 0.05, c + 0.05 * np.sign(v - c + 1e-12), v)
    return v


CONTROL = [
    ("if/elif/else", k_if_else, lambda u: away_from(u, -2, 2, [0.5, -0.5]), (0.5, 2.0)),
    ("nested loops", k_nested_loops, lambda u: span(u, -2, 2), (-1.0, 1.0)),
    ("ti.static loop", k_static_loop, lambda u: span(u, -2, 2), (0.5, 1.5)),
    ("ti.func early return", k_func_early_return,
     lambda u: away_from(u, -2, 2, [0.5, -0.5, 1.0, -1.0]), (0.5, 2.0)),
    ("while", k_while, lambda u: span(u, -2, 2), (0.5, 1.2)),
    ("while True + break", k_while_break, lambda u: span(u, 0.1, 3), (1.2, 1.8)),
    ("break + continue", k_break_continue, lambda u: span(u, -1, 1), (0.5, 1.2)),
    ("top-level continue", k_top_level_continue, lambda u: span(u, -2, 2), (0.5, 2.0)),
    ("data-dependent trip count", k_data_dependent_trips, lambda u: span(u, -2, 2), (0.5, 1.3)),
    ("several inner loops", k_several_inner_loops, lambda u: span(u, -1.5, 1.5), (0.5, 2.0)),
    ("top-level statements + loops", k_mixed_top_level, lambda u: span(u, -2, 2), (0.5, 2.0)),
    ("serial loop-carried local", k_serial_carried_local, lambda u: span(u, -1.5, 1.5),
     (0.5, 2.0)),
    ("inner accumulation (taichi 8356)", k_grid_accumulate, lambda u: span(u, -2, 2), (0.5, 2.0)),
]


def run_primal(kernel, X, P) -> float:
    x.from_numpy(X)
    p[None] = P
    y.fill(0)
    kernel()
    return float(WEIGHTS @ y.to_numpy())


def central(kernel, X, P):
    gx = np.zeros(N)
    for j in range(N):
        d = np.zeros(N)
        d[j] = H
        gx[j] = (run_primal(kernel, X + d, P) - run_primal(kernel, X - d, P)) / (2 * H)
    gp = (run_primal(kernel, X, P + H) - run_primal(kernel, X, P - H)) / (2 * H)
    return gx, gp


def reverse(kernel, X, P):
    run_primal(kernel, X, P)
    x.grad.fill(0)
    p.grad[None] = 0
    y.grad.from_numpy(WEIGHTS)
    kernel.grad()
    return x.grad.to_numpy(), p.grad[None]


def taped(kernel, X, P):
    x.from_numpy(X)
    p[None] = P
    y.fill(0)
    w.from_numpy(WEIGHTS)
    with ti.ad.Tape(loss=loss):
        kernel()
        weighted_sum()
    return x.grad.to_numpy(), p.grad[None]


def forward(kernel, X, P, direction):
    """(d L along direction in x, d L / d p) from FwdMode."""
    x.from_numpy(X)
    p[None] = P
    y.fill(0)
    with ti.ad.FwdMode(loss=y, param=x, seed=direction):
        kernel()
    jx = float(WEIGHTS @ y.dual.to_numpy())
    y.fill(0)
    with ti.ad.FwdMode(loss=y, param=p):
        kernel()
    jp = float(WEIGHTS @ y.dual.to_numpy())
    return jx, jp


unit = st.floats(0.0, 1.0, exclude_max=True, allow_nan=False)
points = st.lists(unit, min_size=N, max_size=N)
FEW = settings(max_examples=4, deadline=None, derandomize=True, database=None,
               phases=(Phase.explicit, Phase.generate))


@pytest.mark.parametrize("name,kernel,sample_x,p_range", CONTROL, ids=[c[0] for c in CONTROL])
@FEW
@given(u=points, v=unit, d=points)
def test_control_flow_gradient(name, kernel, sample_x, p_range, u, v, d):
    n.from_numpy(TRIPS)
    X = sample_x(u).astype(np.float64)
    P = float(span(v, *p_range))
    direction = np.asarray(d) - 0.5
    fx, fp = central(kernel, X, P)
    rx, rp = reverse(kernel, X, P)
    np.testing.assert_allclose(rx, fx, rtol=1e-5, atol=1e-6, err_msg=f"{name}: kernel.grad dx")
    np.testing.assert_allclose(rp, fp, rtol=1e-5, atol=1e-6, err_msg=f"{name}: kernel.grad dp")
    tx, tp = taped(kernel, X, P)
    np.testing.assert_allclose(tx, fx, rtol=1e-5, atol=1e-6, err_msg=f"{name}: Tape dx")
    np.testing.assert_allclose(tp, fp, rtol=1e-5, atol=1e-6, err_msg=f"{name}: Tape dp")
    jx, jp = forward(kernel, X, P, direction)
    np.testing.assert_allclose(jx, rx @ direction, rtol=1e-9, atol=1e-9,
                               err_msg=f"{name}: FwdMode dx disagrees with reverse mode")
    np.testing.assert_allclose(jp, rp, rtol=1e-9, atol=1e-9,
                               err_msg=f"{name}: FwdMode dp disagrees with reverse mode")


# ---------------------------------------------------------------- closed forms
def test_data_dependent_trips_closed_form():
    """v <- v*a + b applied n[i] times: v = x a^n + b (a^n - 1)/(a - 1)."""
    n.from_numpy(TRIPS)
    X, a, b = np.array([0.3, -1.1, 0.7, 2.0]), 1.1, 0.3
    rx, ra = reverse(k_data_dependent_trips, X, a)
    k = TRIPS.astype(np.float64)
    dvdx = a**k
    dvda = X * k * a ** (k - 1) + b * (k * a ** (k - 1) * (a - 1) - (a**k - 1)) / (a - 1) ** 2
    np.testing.assert_allclose(rx, WEIGHTS * dvdx, rtol=1e-12)
    np.testing.assert_allclose(ra, WEIGHTS @ dvda, rtol=1e-12)


big_x = ti.field(ti.f64, 2, needs_grad=True, needs_dual=True)
big_y = ti.field(ti.f64, 2, needs_grad=True, needs_dual=True)
big_r = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
big_n = ti.field(ti.i32, 2)


@ti.kernel
def million_products():
    for i in range(2):
        v = big_x[i]
        for _ in range(big_n[i]):
            v = v * big_r[None]
        big_y[i] = v


def test_million_inner_iterations():
    """y = x r^n by 10^6 repeated multiplications: the saved-local stack must grow, not crash."""
    trips = np.array([1_000_000, 7], dtype=np.int32)
    big_n.from_numpy(trips)
    X, r = np.array([0.8, -1.5]), 1.0 + 1e-6
    big_x.from_numpy(X)
    big_r[None] = r
    million_products()
    np.testing.assert_allclose(big_y.to_numpy(), X * r**trips, rtol=1e-9)
    big_x.grad.fill(0)
    big_r.grad[None] = 0
    big_y.grad.fill(1.0)
    million_products.grad()
    np.testing.assert_allclose(big_x.grad.to_numpy(), r**trips, rtol=1e-9)
    np.testing.assert_allclose(big_r.grad[None], np.sum(X * trips * r ** (trips - 1.0)),
                               rtol=1e-8)
    with ti.ad.FwdMode(loss=big_y, param=big_r):
        million_products()
    np.testing.assert_allclose(big_y.dual.to_numpy(), X * trips * r ** (trips - 1.0), rtol=1e-8)


# ---------------------------------------------------------------- taichi issue 8802
@ti.kernel
def recurrence_serial():
    ti.loop_config(serialize=True)
    for i in range(N):
        e[i + 1] = e[i] * 2.0 + ti.sin(e[i]) * p[None]


@ti.kernel
def recurrence_parallel():
    for i in range(N):
        e[i + 1] = e[i] * 2.0 + ti.sin(e[i]) * p[None]


def test_issue_8802_serial_recurrence():
    """A serial loop writing e[i+1] from e[i]: each step's gradient sees the value it read."""
    e0, P = 0.3, 0.7
    v, dv = e0, 1.0
    for _ in range(N):
        dv *= 2.0 + math.cos(v) * P
        v = 2.0 * v + math.sin(v) * P
    e.fill(0)
    e[0] = e0
    p[None] = P
    e.grad.fill(0)
    e.grad[N] = 1.0
    recurrence_serial()
    assert e[N] == pytest.approx(v, rel=1e-14)
    recurrence_serial.grad()
    assert e.grad[0] == pytest.approx(dv, rel=1e-12)
    # forward mode agrees
    e.fill(0)
    e[0] = e0
    seed = np.zeros(N + 1)
    seed[0] = 1.0
    with ti.ad.FwdMode(loss=e, param=e, seed=seed):
        recurrence_serial()
    assert e.dual[N] == pytest.approx(dv, rel=1e-12)


SIG_E, SIG_Y, STEPS = 1000.0, 2.0, 60
th = ti.field(ti.f64, shape=(), needs_grad=True)
plastic_acc = ti.field(ti.f64, shape=(), needs_grad=True)
epsp = ti.field(ti.f64, shape=(STEPS + 1,), needs_grad=True)


@ti.kernel
def plasticity():  # reads epsp[i], writes epsp[i+1]
    ti.loop_config(serialize=True)
    for i in range(STEPS):
        trial = SIG_E * (th[None] * ti.sin(2.0 * math.pi * i / STEPS) - epsp[i])
        d = 0.0
        if ti.abs(trial) > SIG_Y:
            d = (ti.abs(trial) - SIG_Y) / SIG_E
            plastic_acc[None] += d
        epsp[i + 1] = epsp[i] + (d if trial > 0 else -d)


def test_issue_8802_plasticity_reproducer():
    """The upstream reproducer verbatim: Taichi returns ~4.8x the true gradient 3.895472."""
    epsp.fill(0)
    th[None] = 0.0045
    with pytest.warns(UserWarning, match="Debug mode is disabled"):  # as Taichi warns
        with ti.ad.Tape(plastic_acc, validation=True):
            plasticity()
    assert th.grad[None] == pytest.approx(3.895472, abs=1e-6)

    def value(t):
        th[None] = t
        epsp.fill(0)
        plastic_acc[None] = 0
        plasticity()
        return plastic_acc[None]

    fd = (value(0.0045 + 1e-7) - value(0.0045 - 1e-7)) / 2e-7
    assert th.grad[None] == pytest.approx(fd, rel=1e-6)


def test_issue_8802_parallel_recurrence_raises():
    """Without serialize, iteration i reads what iteration i-1 writes: a clear error."""
    e.fill(0.1)
    recurrence_parallel()
    e.grad[N] = 1.0
    with pytest.raises(ti.AutodiffError, match="recurrence_parallel"):
        recurrence_parallel.grad()


# ---------------------------------------------------------------- refused: clear errors
@ti.kernel
def shift_right():
    for i in range(1, N):
        x[i] = x[i - 1] * 2.0


@ti.kernel
def shift_right_aliased():
    for i in range(1, N):
        j = i - 1
        v = x[j]
        j = i
        x[j] = v * 2.0


def test_parallel_cross_iteration_read_write_raises():
    x.from_numpy(np.ones(N))
    shift_right()  # the primal runs
    x.grad.fill(1.0)
    with pytest.raises(ti.AutodiffError) as info:
        shift_right.grad()
    msg = str(info.value)
    assert "shift_right" in msg and "'x'" in msg  # names kernel and field
    assert "test_autodiff_control.py" in msg  # names the source line
    x.from_numpy(np.ones(N))
    with pytest.raises(ti.AutodiffError):
        with ti.ad.Tape(loss=loss):
            shift_right()
            weighted_sum()


def test_parallel_cross_iteration_via_reassigned_index_raises():
    x.from_numpy(np.ones(N))
    shift_right_aliased()
    x.grad.fill(1.0)
    with pytest.raises(ti.AutodiffError):
        shift_right_aliased.grad()


amax_out = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
amax_plain = ti.field(ti.f64, ())


@ti.kernel
def atomic_max_kernel():
    for i in range(N):
        ti.atomic_max(amax_out[None], x[i])


@ti.kernel
def atomic_min_kernel():
    for i in range(N):
        ti.atomic_min(amax_out[None], x[i] * 2.0)


@ti.kernel
def atomic_max_no_grad_target():
    for i in range(N):
        ti.atomic_max(amax_plain[None], x[i])
        loss[None] += x[i] * x[i]


@pytest.mark.parametrize("kernel", [atomic_max_kernel, atomic_min_kernel],
                         ids=["atomic_max", "atomic_min"])
def test_atomic_min_max_on_grad_field_raises(kernel):
    x.from_numpy(np.array([0.1, 0.5, -0.3, 0.2]))
    amax_out[None] = -10.0
    kernel()  # the primal runs
    amax_out.grad[None] = 1.0
    with pytest.raises(ti.AutodiffError, match="amax_out|atomic_m"):
        kernel.grad()


def test_atomic_max_in_forward_mode_raises():
    amax_out[None] = -10.0
    with pytest.raises(ti.AutodiffError, match="atomic_max"):
        with ti.ad.FwdMode(loss=amax_out, param=x, seed=np.ones(N)):
            atomic_max_kernel()


def test_atomic_max_into_field_without_grad_is_fine():
    X = np.array([0.1, 0.5, -0.3, 0.2])
    x.from_numpy(X)
    amax_plain[None] = -10.0
    with ti.ad.Tape(loss=loss):
        atomic_max_no_grad_target()
    assert amax_plain[None] == 0.5
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)


@ti.kernel
def counting():
    for i in range(N):
        ti.atomic_add(cnt[None], 1)
        loss[None] += x[i] * x[i]


def test_primal_side_effects_not_repeated_by_grad():
    X = np.array([0.1, 0.5, -0.3, 0.2])
    x.from_numpy(X)
    cnt[None] = 0
    loss[None] = 0
    counting()
    assert cnt[None] == N
    x.grad.fill(0)
    loss.grad[None] = 1.0
    counting.grad()
    assert cnt[None] == N, "kernel.grad() repeated the primal's counter increments"
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)
    with ti.ad.Tape(loss=loss):
        counting()
    assert cnt[None] == 2 * N, "the Tape's backward pass repeated the counter increments"
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X, rtol=1e-14)


@ti.kernel
def double_in_place():
    for i in range(N):
        x[i] = x[i] * 2.0


@ti.kernel
def sum_squares():
    for i in range(N):
        loss[None] += x[i] * x[i]


def test_tape_relaunch_overwriting_read_field():
    """x <- 2x three times on one tape, then L = sum x^2: dL/dx0 = 2 * 8 x0 * 8."""
    X = np.array([1.0, -2.0, 0.5, 3.0])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        double_in_place()
        double_in_place()
        double_in_place()
        sum_squares()
    np.testing.assert_allclose(x.to_numpy(), 8 * X, rtol=0)  # final primal values stay
    assert loss[None] == pytest.approx(np.sum((8 * X) ** 2), rel=1e-14)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * 8 * X * 8, rtol=1e-14)


def test_tape_in_place_chain_rule_only():
    """Loss = sum of x after three doublings, seen through its adjoint: exactly 2^3."""
    X = np.array([1.0, -2.0, 0.5, 3.0])
    x.from_numpy(X)
    w.from_numpy(np.ones(N))
    y.from_numpy(np.zeros(N))
    with ti.ad.Tape(loss=loss):
        double_in_place()
        double_in_place()
        double_in_place()
        copy_x_to_y()
        weighted_sum()
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 8.0))
    np.testing.assert_array_equal(x.to_numpy(), 8 * X)


@ti.kernel
def copy_x_to_y():
    for i in range(N):
        y[i] = x[i]


# ---------------------------------------------------------------- known wrong or refused
@ti.kernel
def top_level_local_used_in_loop():
    s = x[0] * 2.0
    for i in range(N):
        loss[None] += s * x[i]


def test_top_level_local_used_in_parallel_loop():
    X = np.array([1.0, 2.0, 3.0, 4.0])
    x.from_numpy(X)
    with ti.ad.Tape(loss=loss):
        top_level_local_used_in_loop()
    want = np.full(N, 2.0 * X[0])
    want[0] += 2.0 * X.sum()
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-12)


@ti.kernel
def prefix_through_accumulator():
    for i in range(N):
        acc_field[None] += x[i]
        y[i] = acc_field[None] * x[i]


acc_field = ti.field(ti.f64, (), needs_grad=True)


def test_parallel_read_of_accumulated_scalar_raises():
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    acc_field[None] = 0
    prefix_through_accumulator()
    y.grad.fill(1.0)
    with pytest.raises(ti.AutodiffError):
        prefix_through_accumulator.grad()


# ---------------------------------------------------------------- which in-place loops are owned
grid2 = ti.field(ti.f64, (N, 3), needs_grad=True)
row = ti.field(ti.f64, N, needs_grad=True)


@ti.kernel
def shift_columns_in_place():
    for i in range(N):
        for j in range(2):
            grid2[i, j + 1] = grid2[i, j + 1] + grid2[i, j] * grid2[i, j]


@ti.kernel
def offset_index_in_place():
    for i in range(N - 1):
        k = i + 1
        row[k] = row[k] * row[i + 1]


@ti.kernel
def ndrange_shared_row():
    for i, j in ti.ndrange(N, 3):
        row[i] += row[i] * grid2[i, j]


@ti.kernel
def halved_index():
    for i in range(N):
        row[i // 2] = row[i // 2] * 2.0


def test_loop_owning_its_row_differentiates():
    """x[i, j + 1] written from x[i, j] in an inner loop: iteration i owns row i."""
    rng = np.random.default_rng(3)
    G = rng.uniform(0.5, 1.5, (N, 3))
    grid2.from_numpy(G)
    shift_columns_in_place()
    grid2.grad.from_numpy(np.ones((N, 3)))
    shift_columns_in_place.grad()
    # out2 = g2 + (g1 + g0^2)^2, out1 = g1 + g0^2, out0 = g0
    g0, g1 = G[:, 0], G[:, 1]
    want = np.stack([1 + 2 * g0 + 4 * g0 * (g1 + g0 ** 2), 1 + 2 * (g1 + g0 ** 2),
                     np.ones(N)], axis=1)
    np.testing.assert_allclose(grid2.grad.to_numpy(), want, rtol=1e-12)


def test_offset_index_through_local_is_owned():
    R = np.array([1.0, 2.0, 3.0, 4.0])
    row.from_numpy(R)
    offset_index_in_place()
    row.grad.fill(1.0)
    offset_index_in_place.grad()
    want = np.where(np.arange(N) == 0, 1.0, 2 * R)
    np.testing.assert_allclose(row.grad.to_numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("kernel", [ndrange_shared_row, halved_index],
                         ids=["ndrange_row_shared_by_j", "i_floordiv_2"])
def test_iterations_sharing_elements_raise(kernel):
    row.fill(1.0)
    grid2.fill(1.0)
    kernel()
    row.grad.fill(1.0)
    with pytest.raises(ti.AutodiffError) as info:
        kernel.grad()
    assert "'row'" in str(info.value) and kernel.__name__ in str(info.value)
