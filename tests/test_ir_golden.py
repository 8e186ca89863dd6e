"""Golden tests: kernel source in, printed IR out (SIMRUN_UPDATE_GOLDEN=1 rewrites them)."""


import pytest
from golden_ir import check_golden

import simrun.lang as ti
from simrun.lang.autodiff.reverse import reverse_kernel
from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import kernel_text


@pytest.fixture(autouse=True)
def _init():
    ti.init(default_fp=ti.f32)


def _ir(kernel, *args, mode="primal"):
    kir, _ = kernel.lower(args)
    if mode == "reverse":
        kir = reverse_kernel(kir)
    return kernel_text(kir, build_layout(kir))


def _gravity_energy():
    x = ti.Vector.field(2, dtype=ti.f32, shape=8, needs_grad=True)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(8, 8):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    return compute_U


def _serial_loop():
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    y = ti.field(ti.f32, shape=4, needs_grad=True)

    @ti.kernel
    def power(n: ti.i32):
        for i in x:
            acc = 1.0
            for _ in range(n):
                acc = acc * x[i]
            if acc > 1:
                acc = ti.sqrt(acc)
            y[i] = acc

    return power


def test_frontend_gravity_energy():
    check_golden("gravity_energy", _ir(_gravity_energy()))


def test_reverse_gravity_energy():
    check_golden("gravity_energy_reverse", _ir(_gravity_energy(), mode="reverse"))


def test_frontend_serial_loop_and_branch():
    check_golden("serial_loop", _ir(_serial_loop(), 3))


def test_reverse_serial_loop_pushes_loop_carried_locals():
    text = _ir(_serial_loop(), 3, mode="reverse")
    check_golden("serial_loop_reverse", text)
    assert "push" in text and "pop" in text


def _periodic_stencil():
    """DiffTaichi smoke's compute_p: neighbours wrapped by an integer local assigned twice."""
    p = ti.field(ti.f32, shape=(3, 6, 6), needs_grad=True)

    @ti.func
    def dec(i):
        j = i - 1
        if j < 0:
            j = 5
        return j

    @ti.kernel
    def relax(t: ti.i32):
        for y in range(6):
            for x in range(6):
                p[t + 1, y, x] = (p[t, dec(y), x] + p[t, y, dec(x)]) * 0.5

    return relax


def test_reverse_periodic_stencil_recomputes_its_inner_loop():
    """The reversed inner loop re-runs the cell's index arithmetic: no stack push or pop
    inside either loop (its locals are saved once around the loop)."""
    text = _ir(_periodic_stencil(), 0, mode="reverse")
    in_loops = [line for line in text.splitlines() if line.startswith("    ")]
    assert in_loops and not any("push" in line or "pop" in line for line in in_loops)
    check_golden("periodic_stencil_reverse", text)
