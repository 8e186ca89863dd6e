"""Every differentiable op: reverse (kernel.grad, Tape) and forward (FwdMode) vs central differences.

One table drives the test.  Each row is a ti.func of three inputs (p, q, c) read from the fields
a, b, c, and a sampler that maps hypothesis-drawn numbers in [0, 1) into the op's domain (away
from kinks and poles, so central differences are accurate).  One kernel, `apply(f)`, is compiled
per op and reused across hypothesis examples: inputs are written into fields.
"""

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import simrun.lang as ti

M = 4  # points evaluated per example (one per loop iteration)
a = ti.field(ti.f64, M, needs_grad=True, needs_dual=True)
b = ti.field(ti.f64, M, needs_grad=True, needs_dual=True)
c = ti.field(ti.f64, M, needs_grad=True, needs_dual=True)
out = ti.field(ti.f64, M, needs_grad=True, needs_dual=True)
wt = ti.field(ti.f64, M)
loss = ti.field(ti.f64, (), needs_grad=True, needs_dual=True)
INPUTS = (a, b, c)
WEIGHTS = np.array([1.0, -0.5, 2.0, 0.25])


@pytest.fixture(scope="module", autouse=True)
def _f64():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


@ti.kernel
def apply(f: ti.template()):
    for i in range(M):
        out[i] = f(a[i], b[i], c[i])


@ti.kernel
def reduce_out():
    for i in range(M):
        loss[None] += wt[i] * out[i]


# ---------------------------------------------------------------- the ops, as user code writes them
@ti.func
def f_neg(p, q, r):
    return -p


@ti.func
def f_abs(p, q, r):
    return ti.abs(p)


@ti.func
def f_sin(p, q, r):
    return ti.sin(p)


@ti.func
def f_cos(p, q, r):
    return ti.cos(p)


@ti.func
def f_tan(p, q, r):
    return ti.tan(p)


@ti.func
def f_asin(p, q, r):
    return ti.asin(p)


@ti.func
def f_acos(p, q, r):
    return ti.acos(p)


@ti.func
def f_atan(p, q, r):
    return ti.atan(p)


@ti.func
def f_tanh(p, q, r):
    return ti.tanh(p)


@ti.func
def f_erf(p, q, r):
    return ti.erf(p)


@ti.func
def f_exp(p, q, r):
    return ti.exp(p)


@ti.func
def f_log(p, q, r):
    return ti.log(p)


@ti.func
def f_sqrt(p, q, r):
    return ti.sqrt(p)


@ti.func
def f_rsqrt(p, q, r):
    return ti.rsqrt(p)


@ti.func
def f_add(p, q, r):
    return p + q


@ti.func
def f_sub(p, q, r):
    return p - q


@ti.func
def f_mul(p, q, r):
    return p * q


@ti.func
def f_div(p, q, r):
    return p / q


@ti.func
def f_mod(p, q, r):
    return p % q


@ti.func
def f_pow(p, q, r):
    return p**q


@ti.func
def f_tipow(p, q, r):
    return ti.pow(p, q)


@ti.func
def f_sq(p, q, r):
    return p**2


@ti.func
def f_square_local(p, q, r):
    t = p * q + r  # a local squared: reverse mode adds 2 t g once (reverse.py's x * x case)
    return t * t + ti.sqrt(t * t + 1.0)


@ti.func
def f_cube(p, q, r):
    return p**3


@ti.func
def f_invsq(p, q, r):
    return p**-2


@ti.func
def f_pow0(p, q, r):
    return p**0 * q


@ti.func
def f_pow_half(p, q, r):
    return p**0.5


@ti.func
def f_min(p, q, r):
    return ti.min(p, q)


@ti.func
def f_max(p, q, r):
    return ti.max(p, q)


@ti.func
def f_min3(p, q, r):
    return ti.min(p, q, r)


@ti.func
def f_atan2(p, q, r):
    return ti.atan2(p, q)


@ti.func
def f_select(p, q, r):
    return ti.select(r > 0.5, p, q)


@ti.func
def f_ifexp(p, q, r):
    return p * q if r > 0.5 else q - p


@ti.func
def f_to_f32(p, q, r):
    return ti.cast(ti.cast(p, ti.f32) * ti.cast(q, ti.f32), ti.f64)


@ti.func
def f_f32_math(p, q, r):
    s = ti.cast(p, ti.f32)
    return ti.cast(ti.sin(s) * s + ti.exp(ti.cast(q, ti.f32)), ti.f64)


@ti.func
def f_floor(p, q, r):
    return ti.floor(p) * q


@ti.func
def f_ceil(p, q, r):
    return ti.ceil(p) * q


@ti.func
def f_round(p, q, r):
    return ti.round(p) * q


@ti.func
def f_floordiv(p, q, r):
    return (p // q) * r


@ti.func
def f_to_int(p, q, r):
    return ti.cast(ti.cast(p, ti.i32), ti.f64) * q


@ti.func
def f_compare(p, q, r):
    return ti.cast(p < q, ti.f64) * r + ti.cast(p >= q, ti.f64) * 2.0 + ti.cast(p == q, ti.f64)


@ti.func
def f_compare_select(p, q, r):
    return ti.select(p > q, 1.0, -1.0) * r


@ti.func
def f_composite(p, q, r):
    return ti.exp(ti.sin(p) * q) / (1.0 + r * r) + ti.sqrt(p * p + q * q + 1.0)


# ---------------------------------------------------------------- domains
def span(u, lo, hi):
    return lo + (hi - lo) * u


def away_from_int(u, lo, hi):
    """Values in [lo, hi) whose fractional part lies in [0.1, 0.9]."""
    k = np.floor(span(u, lo, hi))
    frac = 0.1 + 0.8 * ((u * 7.31) % 1.0)
    return k + frac


def nonzero(u, lo, hi):
    """|value| in [lo, hi), either sign."""
    sign = np.where((u * 13.7) % 1.0 < 0.5, -1.0, 1.0)
    return sign * span(u, lo, hi)


def pair_apart(u, v, lo=-2.0, hi=2.0):
    """(p, q) with |p - q| >= 0.1: no ties for min/max/comparisons."""
    p = span(u, lo, hi)
    return p, p + nonzero(v, 0.1, 1.5)


def mod_domain(u, v, w):
    q = nonzero(v, 0.5, 2.0)
    k = np.floor(span(u, -3, 3))
    return (k + 0.1 + 0.8 * w) * q, q, w


def cond_val(w):
    """A condition input kept 0.1 away from the 0.5 threshold the kernels test."""
    return np.where(w < 0.5, 0.1 + 0.6 * w, 0.6 + 0.6 * (w - 0.5))


def unary(lo, hi):
    return lambda u, v, w: (span(u, lo, hi), span(v, -1, 1), w)


def binary(lo_p, hi_p, lo_q, hi_q):
    return lambda u, v, w: (span(u, lo_p, hi_p), span(v, lo_q, hi_q), w)


def apart(u, v, w):
    p, q = pair_apart(u, v)
    return p, q, span(w, -1, 1)


def min3(u, v, w):
    p = span(u, -2, 2)
    return p, p + nonzero(v, 0.1, 1.0), p + nonzero(w, 0.1, 1.0) * 1.7


# name, ti.func, sampler (u, v, w) -> (a, b, c), step h, tolerance
OPS = [
    ("neg", f_neg, unary(-3, 3), 1e-6, 1e-7),
    ("abs", f_abs, lambda u, v, w: (nonzero(u, 0.05, 3), v, w), 1e-6, 1e-7),
    ("sin", f_sin, unary(-3, 3), 1e-6, 1e-7),
    ("cos", f_cos, unary(-3, 3), 1e-6, 1e-7),
    ("tan", f_tan, unary(-1.3, 1.3), 1e-6, 1e-6),
    ("asin", f_asin, unary(-0.9, 0.9), 1e-6, 1e-7),
    ("acos", f_acos, unary(-0.9, 0.9), 1e-6, 1e-7),
    ("atan", f_atan, unary(-3, 3), 1e-6, 1e-7),
    ("tanh", f_tanh, unary(-3, 3), 1e-6, 1e-7),
    ("erf", f_erf, unary(-3, 3), 1e-6, 1e-7),
    ("exp", f_exp, unary(-3, 3), 1e-6, 1e-6),
    ("log", f_log, unary(0.1, 5), 1e-6, 1e-6),
    ("sqrt", f_sqrt, unary(0.1, 5), 1e-6, 1e-7),
    ("rsqrt", f_rsqrt, unary(0.1, 5), 1e-6, 1e-6),
    ("add", f_add, binary(-3, 3, -3, 3), 1e-6, 1e-7),
    ("sub", f_sub, binary(-3, 3, -3, 3), 1e-6, 1e-7),
    ("mul", f_mul, binary(-3, 3, -3, 3), 1e-6, 1e-7),
    ("div", f_div, lambda u, v, w: (span(u, -3, 3), nonzero(v, 0.3, 3), w), 1e-6, 1e-6),
    ("mod", f_mod, mod_domain, 1e-6, 1e-7),
    ("pow", f_pow, binary(0.2, 3, -2, 2), 1e-6, 1e-6),
    ("ti.pow", f_tipow, binary(0.2, 3, -2, 2), 1e-6, 1e-6),
    ("x**2", f_sq, unary(-3, 3), 1e-6, 1e-7),
    ("t*t of a local", f_square_local, binary(-3, 3, -3, 3), 1e-6, 1e-6),
    ("x**3", f_cube, unary(-3, 3), 1e-6, 1e-6),
    ("x**-2", f_invsq, lambda u, v, w: (nonzero(u, 0.3, 3), v, w), 1e-6, 1e-5),
    ("x**0", f_pow0, unary(-3, 3), 1e-6, 1e-7),
    ("x**0.5", f_pow_half, unary(0.1, 5), 1e-6, 1e-7),
    ("min", f_min, apart, 1e-6, 1e-7),
    ("max", f_max, apart, 1e-6, 1e-7),
    ("min3", f_min3, min3, 1e-6, 1e-7),
    ("atan2", f_atan2, lambda u, v, w: (nonzero(u, 0.2, 2), nonzero(v, 0.2, 2), w), 1e-6, 1e-6),
    ("select", f_select, lambda u, v, w: (span(u, -2, 2), span(v, -2, 2), cond_val(w)),
     1e-6, 1e-7),
    ("ifexp", f_ifexp, lambda u, v, w: (span(u, -2, 2), span(v, -2, 2), cond_val(w)),
     1e-6, 1e-7),
    ("cast f64->f32->f64", f_to_f32, binary(-3, 3, -3, 3), 1e-2, 2e-4),
    ("f32 math", f_f32_math, binary(-2, 2, -2, 2), 1e-2, 2e-4),
    ("floor", f_floor, lambda u, v, w: (away_from_int(u, -3, 3), span(v, -2, 2), w), 1e-6, 0),
    ("ceil", f_ceil, lambda u, v, w: (away_from_int(u, -3, 3), span(v, -2, 2), w), 1e-6, 0),
    ("round", f_round, lambda u, v, w: (away_from_int(u, -3, 3) + 0.5, v, w), 1e-6, 0),
    ("floordiv", f_floordiv, mod_domain, 1e-6, 0),
    ("cast to int", f_to_int, lambda u, v, w: (away_from_int(u, 0, 4), v, w), 1e-6, 0),
    ("comparisons", f_compare, apart, 1e-6, 0),
    ("select on comparison", f_compare_select, apart, 1e-6, 0),
    ("composite", f_composite, binary(-2, 2, -2, 2), 1e-6, 1e-6),
]

# op name -> reason, for ops where simrun is known to be wrong (strict xfail)
KNOWN_BUGS: dict = {}


def op_params(rows):
    for row in rows:
        marks = ([pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[row[0]])]
                 if row[0] in KNOWN_BUGS else [])
        yield pytest.param(*row, id=row[0], marks=marks)


unit = st.floats(0.0, 1.0, exclude_max=True, allow_nan=False)
points = st.lists(unit, min_size=M, max_size=M).map(np.array)


def evaluate(f, inputs) -> np.ndarray:
    for fld, arr in zip(INPUTS, inputs):
        fld.from_numpy(np.asarray(arr, dtype=np.float64))
    apply(f)
    return out.to_numpy()


def central_differences(f, inputs, h) -> list[np.ndarray]:
    """d out[i] / d input_k[i] for each input k (each out[i] depends on point i only)."""
    fd = []
    for k in range(3):
        plus = [np.array(x, dtype=np.float64) for x in inputs]
        minus = [np.array(x, dtype=np.float64) for x in inputs]
        plus[k] = plus[k] + h
        minus[k] = minus[k] - h
        fd.append((evaluate(f, plus) - evaluate(f, minus)) / (2 * h))
    return fd


def reverse_kernel_grad(f, inputs) -> list[np.ndarray]:
    evaluate(f, inputs)
    for fld in INPUTS:
        fld.grad.fill(0)
    out.grad.from_numpy(WEIGHTS)
    apply.grad(f)
    return [fld.grad.to_numpy() / WEIGHTS for fld in INPUTS]


def reverse_tape(f, inputs) -> list[np.ndarray]:
    for fld, arr in zip(INPUTS, inputs):
        fld.from_numpy(np.asarray(arr, dtype=np.float64))
    wt.from_numpy(WEIGHTS)
    with ti.ad.Tape(loss=loss):
        apply(f)
        reduce_out()
    return [fld.grad.to_numpy() / WEIGHTS for fld in INPUTS]


def forward(f, inputs) -> list[np.ndarray]:
    for fld, arr in zip(INPUTS, inputs):
        fld.from_numpy(np.asarray(arr, dtype=np.float64))
    duals = []
    for fld in INPUTS:
        with ti.ad.FwdMode(loss=out, param=fld, seed=np.ones(M)):
            apply(f)
        duals.append(out.dual.to_numpy())
    return duals


def assert_close(got, want, tol, what):
    for k, (g, w) in enumerate(zip(got, want)):
        if tol == 0:
            assert np.all(g == 0), f"{what}: d/d{'abc'[k]} should be exactly 0, got {g}"
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol,
                                       err_msg=f"{what}: d/d{'abc'[k]}")


@pytest.mark.parametrize("name,f,sampler,h,tol", list(op_params(OPS)))
@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate))
@given(u=points, v=points, w=points)
def test_op_gradient(name, f, sampler, h, tol, u, v, w):
    inputs = sampler(u, v, w)
    fd = central_differences(f, inputs, h)
    rev = reverse_kernel_grad(f, inputs)
    tape = reverse_tape(f, inputs)
    fwd = forward(f, inputs)
    fd_tol = max(tol, 1e-9)
    if tol == 0:
        # floor/ceil/round/comparisons/int casts: the derivative through them is exactly 0;
        # only the other (linear) factor carries a gradient.
        for k in range(3):
            if np.all(fd[k] == 0):
                assert np.all(rev[k] == 0) and np.all(tape[k] == 0) and np.all(fwd[k] == 0), \
                    f"{name}: d/d{'abc'[k]} must be exactly 0: {rev[k]} {tape[k]} {fwd[k]}"
        fd_tol = 1e-7
    assert_close(rev, fd, fd_tol, f"{name} kernel.grad vs central differences")
    assert_close(tape, fd, fd_tol, f"{name} Tape vs central differences")
    assert_close(fwd, fd, fd_tol, f"{name} FwdMode vs central differences")
    for k in range(3):
        np.testing.assert_allclose(fwd[k], rev[k], rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name}: forward and reverse disagree on d/d{'abc'[k]}")
