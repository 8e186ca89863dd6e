"""Long literals and deep expressions (issue 29): a 500-entry vector literal and a 2,000-term
sum compile and give the right value and gradient, through the API and as a scene's energy
kernel through the CLI; nesting the frontend cannot follow is refused at the kernel's line
with the limit named, never a RecursionError."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_cli import simrun

import simrun.lang as ti
from simrun.lang.frontend.lower import MAX_NESTING

N_SUM, N_VECTOR = 2000, 500


def load_kernels(tmp_path: Path, source: str):
    """The module `source` defines, from a file (kernels need their source on disk)."""
    path = tmp_path / "deep_kernels.py"
    path.write_text("import simrun.lang as ti\n\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"deep_{tmp_path.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def long_sum(n: int) -> str:
    """sum_i (i + 1) x[i], written out as one expression of n terms. Compiling it takes
    seconds: kernels with split expressions are compiled without the SLP vectorizer
    (compiler.py), and LLVM's backend then schedules one long chain of scalar adds."""
    return " + ".join(f"x[{i}] * {i + 1}.0" for i in range(n))


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu, default_fp=ti.f64)


def test_two_thousand_term_sum_value_and_gradient(tmp_path: Path):
    mod, _ = load_kernels(tmp_path, f"""
        x = ti.field(ti.f64, shape={N_SUM}, needs_grad=True)
        out = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def energy():
            out[None] = {long_sum(N_SUM)}
        """)
    values = np.random.default_rng(3).uniform(0.5, 1, N_SUM)
    c = 1.0 + np.arange(N_SUM)
    mod.x.from_numpy(values)
    with ti.ad.Tape(mod.out):
        mod.energy()
    # 2,000 positive terms summed in either order: n eps of the total at most
    assert mod.out[None] == pytest.approx(float(np.sum(c * values)), rel=N_SUM * 2.3e-16)
    np.testing.assert_array_equal(mod.x.grad.to_numpy(), c)  # d/dx_i = i + 1, exactly


def test_five_hundred_entry_vector_literal_value_and_gradient(tmp_path: Path):
    mod, _ = load_kernels(tmp_path, f"""
        x = ti.field(ti.f64, shape=2, needs_grad=True)
        out = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def energy():
            v = ti.Vector([1.0] * {N_VECTOR})
            w = v * x[0]
            out[None] = w.dot(w) + v.sum() * x[1]
        """)
    mod.x.from_numpy(np.array([0.3, -1.7]))
    with ti.ad.Tape(mod.out):
        mod.energy()
    # out = N x0^2 + N x1: exact in binary for these inputs up to the sums' rounding
    assert mod.out[None] == pytest.approx(N_VECTOR * (0.09 - 1.7), rel=1e-13)
    np.testing.assert_allclose(mod.x.grad.to_numpy(), [N_VECTOR * 0.6, N_VECTOR], rtol=1e-13)


def test_deep_conditions_and_bounds_run_where_they_are_written(tmp_path: Path):
    """Deep sub-expressions go to temporaries: those of a while condition must be computed
    on every test of it, those of a loop's bound before the loop."""
    terms = " + ".join(["x[0]"] * 40)  # 40 x0: deeper than the builder's split depth
    mod, _ = load_kernels(tmp_path, f"""
        x = ti.field(ti.f64, shape=1)
        n = ti.field(ti.i32, shape=())
        total = ti.field(ti.f64, shape=())

        @ti.kernel
        def count():
            k = 0
            while {terms} < 100.0:
                x[0] += 0.5
                k += 1
            n[None] = k
            for i in range(ti.cast({terms}, ti.i32)):
                total[None] += 1.0
        """)
    mod.count()
    # x0 steps by 0.5 until 40 x0 >= 100: 5 steps (x0 = 2.5); then 100 iterations
    assert mod.n[None] == 5 and mod.x[0] == 2.5 and mod.total[None] == 100.0


def test_nesting_past_the_limit_is_refused_at_the_kernels_line(tmp_path: Path):
    mod, path = load_kernels(tmp_path, f"""
        x = ti.field(ti.f64, shape=1)

        @ti.kernel
        def nested():
            x[0] = {"-" * (MAX_NESTING + 20)}x[0]
        """)
    with pytest.raises(ti.CompileError) as err:
        mod.nested()
    msg = str(err.value)
    assert f"{path}:8: in kernel 'nested'" in msg
    assert f"more than {MAX_NESTING} levels" in msg and "local variables" in msg


ENERGY = f"""\
import simrun.lang as ti


@ti.kernel
def k(x: ti.template(), m: ti.template(), U: ti.template(), g: float):
    for p in x:
        v = ti.Vector([1.0] * {N_VECTOR})
        y = x[p][1]
        U[None] += m[p] * g * (v.sum() / {N_VECTOR}.0) * ({" + ".join(["y"] * N_SUM)}) / {N_SUM}.0
"""
SCENE = """\
version: 1
precision: f64
particles: {count: 1, dim: 2, mass: 1.0}
initial: {type: lattice, shape: [1, 1], spacing: 1.0, origin: [0, 0], velocity: [2.0, 3.0]}
energy: [{kernel: k.py:k, params: {g: 9.8}}]
integrator: velocity_verlet
dt: 0.01
steps: 50
outputs: {every: 50, xyz: false}
"""


def test_scene_kernel_with_long_literal_and_sum_through_the_cli(tmp_path: Path):
    """U = m g y written with a 500-entry literal and a 2,000-term sum: velocity Verlet is
    exact for a uniform force, so the ball ends where the closed form puts it."""
    (tmp_path / "k.py").write_text(ENERGY)
    (tmp_path / "deep.yaml").write_text(SCENE)
    done = simrun("run", "deep.yaml", "--out", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    with np.load(tmp_path / "out" / "frames.npz") as frames:
        x_end = frames["x"][-1, 0]
    t = 0.5
    np.testing.assert_allclose(x_end, [2.0 * t, 3.0 * t - 9.8 * t * t / 2], rtol=1e-12)
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "ok"


def test_scene_kernel_nested_past_the_limit_is_exit_2_at_its_line(tmp_path: Path):
    deep = "-" * (MAX_NESTING + 10) + "x[p][1]"
    (tmp_path / "k.py").write_text(ENERGY.split("    for p in x:")[0]
                                   + f"    for p in x:\n        U[None] += m[p] * g * {deep}\n")
    (tmp_path / "deep.yaml").write_text(SCENE)
    done = simrun("check", "deep.yaml", cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert f"{tmp_path / 'k.py'}:7:" in done.stderr
    assert f"more than {MAX_NESTING} levels" in done.stderr
