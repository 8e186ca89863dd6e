"""What DiffTaichi's examples need (issue 21), each case written once: the race prover
accepting wave's time-stepped field (p[t] written, p[t - 1] and p[t - 2] read) and
diffmpm_checkpointing's flattened index (i = p // n, j = p - n * i), gradients placed by hand
after their field (wave), smoke's struct-of-arrays placement (ti.ScalarField,
get_scalar_field), Tape snapshots of one slice however the written index is spelled, and
debug-mode IndexErrors. Gradients are checked against central differences in f64, and the
same source runs under Taichi 1.7.4 when it is installed (the `bench` extra)."""

import importlib.util
import json
import linecache
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.fields import FieldError

# The cases: each defines `run(values) -> (loss, gradient)` with `ti` in scope.
WAVE = """
n, rows, T = 6, 2, 5
p = ti.field(ti.f64)
ti.root.dense(ti.i, T).dense(ti.jk, (rows, n)).place(p)
ti.root.dense(ti.i, T).dense(ti.jk, (rows, n)).place(p.grad)  # wave.py places it apart
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.func
def get_p(t, r, i):
    return p[t, r, i] if 0 <= i < n else 0  # wave.py's guard: only one branch runs


@ti.func
def laplacian(t, r, i):
    return get_p(t, r, i + 1) - 2 * get_p(t, r, i) + get_p(t, r, i - 1)


@ti.kernel
def fdtd(t: ti.i32):
    for r in range(rows):  # wave.py's shape: parallel over rows, serial along each
        for i in range(n):
            p[t, r, i] = 2 * p[t - 1, r, i] + 0.3 * laplacian(t - 1, r, i) - p[t - 2, r, i] \\
                + 0.1 * p[t - 1, r, i] * laplacian(t - 2, r, i)


@ti.kernel
def total():
    for r, i in ti.ndrange(rows, n):
        loss[None] += p[T - 1, r, i] ** 2


def run(values):
    start = np.zeros((T, rows, n))
    start[:2] = values.reshape(2, rows, n)
    p.from_numpy(start)
    with ti.ad.Tape(loss):
        for t in range(2, T):
            fdtd(t)
        total()
    return loss[None], p.grad.to_numpy()[:2].ravel()
"""
WAVE_INPUTS = (2, 2, 6)  # p[0] and p[1] are the inputs; the rest is overwritten

FLATTENED = """
n = 4
grid_in = ti.field(ti.f64, shape=(n, n), needs_grad=True)
grid_out = ti.field(ti.f64, shape=(n, n), needs_grad=True)
grid_sq = ti.field(ti.f64, shape=(n, n), needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def grid_op():
    for p in range(n * n):
        i = p // n
        j = p - n * i
        grid_out[i, j] = ti.sin(grid_in[i, j]) * (1 + i + 2 * j)


@ti.kernel
def grid_op_mod():
    for p in range(n * n):
        grid_sq[p // n, p % n] = grid_in[p // n, p % n] ** 2 + grid_out[p // n, p % n]


@ti.kernel
def grid_op_in_place():  # reads and writes one field: the flattened pair must prove it
    for p in range(n * n):
        i = p // n
        j = p - n * i
        grid_sq[i, j] = grid_sq[i, j] * grid_out[i, j]


@ti.kernel
def total():
    for i, j in grid_out:
        loss[None] += grid_sq[i, j] * grid_in[i, j]


def run(values, in_place=False):
    grid_in.from_numpy(values.reshape(n, n))
    with ti.ad.Tape(loss):
        grid_op()
        grid_op_mod()
        if in_place:
            grid_op_in_place()
        total()
    return loss[None], grid_in.grad.to_numpy().ravel()
"""
FLATTENED_INPUTS = (16,)
# grid_op_in_place overwrites what it read, which breaks Taichi's global data access rule:
# Taichi's Tape then differentiates with the overwritten values, so it runs under simrun only
FLATTENED_IN_PLACE = FLATTENED + """
run_taichi_legal = run
run = lambda values: run_taichi_legal(values, in_place=True)
"""

CASES = {"wave": (WAVE, WAVE_INPUTS), "flattened": (FLATTENED, FLATTENED_INPUTS),
         "flattened_in_place": (FLATTENED_IN_PLACE, FLATTENED_INPUTS)}
TAICHI_LEGAL = ["wave", "flattened"]


def case_values(name):
    shape = CASES[name][1]
    return np.random.default_rng(7).uniform(0.2, 0.9, int(np.prod(shape)))


def run_case(name, values, module=ti):
    ti_ = module
    ti_.init(arch=ti_.cpu, default_fp=ti_.f64)
    scope = {"ti": ti_, "np": np}
    filename = f"<case {name}>"  # kernels read their source through linecache
    linecache.cache[filename] = (0, None, CASES[name][0].splitlines(True), filename)
    exec(compile(CASES[name][0], filename, "exec"), scope)
    loss, grad = scope["run"](values)
    return float(loss), np.asarray(grad, dtype=float)


@pytest.mark.parametrize("name", CASES)
def test_gradient_matches_central_differences(name):
    values = case_values(name)
    loss, grad = run_case(name, values)
    h = 1e-6
    for k in range(values.size):
        up, down = values.copy(), values.copy()
        up[k] += h
        down[k] -= h
        fd = (run_case(name, up)[0] - run_case(name, down)[0]) / (2 * h)
        # FD error ~ h^2 * f''' + eps * |f| / h: 1e-9 relative to the loss's scale
        assert abs(grad[k] - fd) <= 1e-7 * max(1.0, abs(loss)), (k, grad[k], fd)


@pytest.mark.skipif(importlib.util.find_spec("taichi") is None, reason="taichi not installed")
@pytest.mark.parametrize("name", TAICHI_LEGAL)
def test_same_source_under_taichi(name, tmp_path):
    values = case_values(name)
    loss, grad = run_case(name, values)
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        import numpy as np
        import taichi as ti
        ti.init(arch=ti.cpu, default_fp=ti.f64, log_level=ti.ERROR)
        """) + CASES[name][0] + textwrap.dedent(f"""
        loss, grad = run(np.array({values.tolist()!r}))
        print("RESULT " + json.dumps([float(loss), np.asarray(grad).tolist()]))
        """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    t_loss, t_grad = json.loads(proc.stdout.split("RESULT ", 1)[1])
    # the same f64 arithmetic in a different order: a few ulps of the largest term
    assert abs(t_loss - loss) <= 1e-12 * max(1.0, abs(loss))
    np.testing.assert_allclose(t_grad, grad, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- refusals that must remain
def _refusal(kind):
    n = 6
    x = ti.field(ti.f64, shape=(4, n), needs_grad=True)

    if kind == "neighbour_in_same_slice":  # p[t, i] written, p[t, i + 1] read: a real race
        @ti.kernel
        def k(t: ti.i32):
            for i in range(n - 1):
                x[t, i] = x[t, i + 1] * 2
    elif kind == "two_arguments":  # p[t] written, p[s] read: s may equal t
        @ti.kernel
        def k(t: ti.i32, s: ti.i32):
            for i in range(n):
                x[t, i] = x[s, (i + 1) % n] * 2
    elif kind == "loop_index_offset":  # x[.., i] written, x[.., i - 1] read: iteration i - 1's
        @ti.kernel
        def k(t: ti.i32):
            for i in range(1, n):
                x[t, i] = x[t, i - 1] * 2
    elif kind == "flattened_twice_the_quotient":  # (p // n, p // n): p = 0 and 1 collide
        @ti.kernel
        def k(t: ti.i32):
            for p in range(n):
                i = p // 2
                j = p // 2
                x[i, j] = ti.sin(p * 1.0)
    elif kind == "mod_of_another_divisor":  # (p // 2, p % 3) spells no p: p = 0 and 3 ...
        @ti.kernel
        def k(t: ti.i32):
            for p in range(n):
                x[p // 2 % 2, p % 3] = x[p // 2 % 2, p % 3] * 2
    elif kind == "index_reassigned":  # t_ assigned twice: for i < 3 it is t, a race
        @ti.kernel
        def k(t: ti.i32):
            for i in range(n):
                t_ = t - 1
                if i < 3:
                    t_ = t
                x[t, i] = x[t_, (i + 1) % n] * 2
    return k


REFUSALS = ["neighbour_in_same_slice", "two_arguments", "loop_index_offset",
            "flattened_twice_the_quotient", "mod_of_another_divisor", "index_reassigned"]


@pytest.mark.parametrize("kind", REFUSALS)
def test_real_races_are_still_refused(kind):
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    kernel = _refusal(kind)
    args = (2, 1) if kind == "two_arguments" else (2,)
    kernel(*args)
    with pytest.raises(ti.AutodiffError, match=r"test_lang_difftaichi\.py:\d+.*'x'"):
        kernel.grad(*args)


# ---------------------------------------------------------------- Tape snapshots
SPELLINGS = ["direct", "local", "func"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_snapshot_is_the_written_slice_however_the_index_is_spelled(spelling):
    """smoke's compute_p writes p[a + 1] with a = k + t * m a local: the launch's write is
    one slice, and so is each read (p[a]), however the index is spelled; the slice it
    writes was never read before, so it saves nothing (not the field, as it once did), and
    the gradient is still right."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    n, m, T = 5, 3, 3
    p = ti.field(ti.f64)
    ti.root.dense(ti.i, T * m + 1).dense(ti.jk, n).place(p, p.grad)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def dec(i):
        r = i - 1
        if r < 0:
            r = n - 1
        return r

    @ti.func
    def slot(t, k):
        return k + t * m

    @ti.kernel
    def relax(t: ti.i32, k: ti.template()):
        for y, x in ti.ndrange(n, n):
            if ti.static(spelling == "direct"):
                p[k + t * m + 1, y, x] = (p[k + t * m, dec(y), x] + p[k + t * m, y, x]) * 0.6
            elif ti.static(spelling == "local"):
                a = k + t * m
                p[a + 1, y, x] = (p[a, dec(y), x] + p[a, y, x]) * 0.6
            else:
                p[slot(t, k) + 1, y, x] = (p[slot(t, k), dec(y), x] + p[slot(t, k), y, x]) * 0.6

    @ti.kernel
    def total():
        for y, x in ti.ndrange(n, n):
            loss[None] += p[T * m, y, x] ** 2

    start = np.random.default_rng(1).uniform(0.5, 1.0, (n, n))

    def forward(first):
        values = np.zeros(p.shape)
        values[0] = first
        p.from_numpy(values)
        with ti.ad.Tape(loss) as tape:
            for t in range(T):
                for k in range(m):
                    relax(t, k)
            total()
        return tape

    tape = forward(start)
    saved = [sum(a.nbytes for _, a in r.snapshot.values()) for r in tape.records[:-1]]
    assert saved == [0] * (T * m)
    regions = tape.records[0].kernel.prepare((0, 0), "primal")[0].regions
    assert regions.index(p, [0]) == (slice(1, 2), slice(None), slice(None))
    assert regions.read_indices(p, [0]) == [(slice(0, 1), slice(None), slice(None))]
    # loss = sum((A^(T m) start)^2) for the linear map A: its gradient 2 A^T(Tm) A^(Tm) start
    A = np.zeros((n * n, n * n))
    for y in range(n):
        for x in range(n):
            A[y * n + x, ((y - 1) % n) * n + x] += 0.6
            A[y * n + x, y * n + x] += 0.6
    M = np.linalg.matrix_power(A, T * m)
    want = 2 * M.T @ (M @ start.ravel())
    np.testing.assert_allclose(p.grad.to_numpy()[0].ravel(), want, rtol=1e-12)


# ---------------------------------------------------------------- fields
def test_struct_of_arrays_placement_of_a_vector_field():
    """smoke_taichi.py places each component of a vector field apart (soa)."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    v, s = ti.Vector.field(2, dtype=ti.f64), ti.field(ti.f64)
    block = ti.root.dense(ti.i, 3)

    def soa(x):
        if isinstance(x, ti.ScalarField):
            block.dense(ti.j, 4).place(x)
        else:
            for i in range(x.n):
                soa(x.get_scalar_field(i))

    soa(v)
    soa(s)
    ti.root.dense(ti.i, 3).dense(ti.j, 4).place(v.grad)  # (lazy_grad would reach every field)
    assert isinstance(v, ti.MatrixField) and not isinstance(v, ti.ScalarField)
    assert isinstance(s, ti.ScalarField) and not isinstance(s, ti.MatrixField)
    assert v.shape == s.shape == (3, 4) and v.grad.shape == (3, 4)

    @ti.kernel
    def fill():
        for i, j in s:
            v[i, j] = ti.Vector([i, j]) * 1.0

    fill()
    assert v[2, 3][0] == 2.0 and v[2, 3][1] == 3.0
    with pytest.raises(FieldError, match="one shape"):
        w = ti.Vector.field(2, dtype=ti.f64)
        ti.root.dense(ti.i, 3).place(w.get_scalar_field(0))
        ti.root.dense(ti.i, 4).place(w.get_scalar_field(1))


def test_fields_made_by_a_lambda_take_the_callers_name():
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    vec = lambda: ti.Vector.field(2, dtype=ti.f64)  # noqa: E731  (DiffTaichi's idiom)
    velocity = vec()
    assert velocity.name == "velocity"


# ---------------------------------------------------------------- debug-mode bounds
def test_reading_past_a_time_stepped_field_raises_index_error_in_debug_mode():
    """rigid_body_toi reads x[t, 0] past the field's last step: undefined in Taichi (it
    crashed both engines); in debug mode simrun names kernel, field, index and line, and
    the Tape (forward and reverse) stops there."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
    steps = 3
    x = ti.field(ti.f64, shape=(steps, 4), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(4):
            x[t, i] = x[t - 1, i] * 1.5

    with pytest.raises(IndexError) as info:
        with ti.ad.Tape(loss):
            for t in range(1, steps + 1):
                advance(t)
    text = str(info.value)
    assert "test_lang_difftaichi.py:" in text and "'advance'" in text
    assert "(3, 0)" in text and "'x'" in text and "x[t, i] = x[t - 1, i] * 1.5" in text


def test_conditional_expression_runs_only_the_taken_branch():
    """wave.py's `p[t, i] if 0 <= i < n else 0`: Taichi's ifte runs one branch, so the
    guarded load never reads (nor, in the gradient, adds into) p[-1]; in debug mode that
    read would be an IndexError. Gradient checked against the closed form."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, debug=True)
    n = 5
    p = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.func
    def get(i):
        return p[i] if 0 <= i < n else 0

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += (get(i - 1) + get(i + 1)) * p[i]

    values = np.arange(1.0, n + 1)
    p.from_numpy(values)
    with ti.ad.Tape(loss):
        total()
    left, right = np.r_[0, values[:-1]], np.r_[values[1:], 0]
    assert loss[None] == pytest.approx(float(((left + right) * values).sum()), rel=1e-15)
    np.testing.assert_allclose(p.grad.to_numpy(), 2 * (left + right), rtol=1e-15)


def test_a_field_read_before_a_later_launch_overwrites_it_differentiates_what_was_read():
    """electric.py's nn1(t) reads v[t] before advance(t) writes it (Taichi's global data
    access rule, broken): the forward used the old v[t], so the gradient must too. Taichi
    1.7.4's Tape uses the overwritten value (its weight1 gradient differs from central
    differences); simrun's snapshot of v[t] gives the central-difference gradient."""
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    T = 6
    v = ti.field(ti.f64, shape=T, needs_grad=True)
    h = ti.field(ti.f64, shape=T, needs_grad=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def nn(t: ti.i32):
        for _ in range(1):
            h[t] = ti.tanh(w[None] * v[t] + v[t - 1])  # v[t]: last iteration's value

    @ti.kernel
    def advance(t: ti.i32):
        for _ in range(1):
            v[t] = 0.9 * v[t - 1] + h[t]
            loss[None] += v[t] ** 2

    stale = np.random.default_rng(5).uniform(-1, 1, T)

    def run(weight, tape):
        v.from_numpy(stale)
        w[None] = weight
        loss[None] = 0
        if tape:
            with ti.ad.Tape(loss):
                for t in range(1, T):
                    nn(t)
                    advance(t)
            return w.grad[None]
        for t in range(1, T):
            nn(t)
            advance(t)
        return loss[None]

    grad = run(0.7, tape=True)
    step = 1e-6
    fd = (run(0.7 + step, False) - run(0.7 - step, False)) / (2 * step)
    assert abs(grad - fd) <= 1e-8 * max(1.0, abs(fd)), (grad, fd)
