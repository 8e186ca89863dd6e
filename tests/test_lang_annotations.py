"""`from __future__ import annotations` in a user module: string annotations still work.

PEP 563 turns every annotation into a string ("ti.f32", "ti.template()", ...). Each test
writes a real module file with the future import to tmp_path and imports it, because the
future import applies per module and kernels must live in a file (their source is read).
"""

import importlib.util
import sys
import textwrap
import uuid

import numpy as np
import pytest

import simrun.lang as ti


@pytest.fixture(autouse=True)
def _init():
    ti.init(arch=ti.cpu)


def load_module(tmp_path, body: str):
    name = f"user_mod_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text("from __future__ import annotations\n\n" + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod


MODULE_LEVEL = """
import numpy as np
import simrun.lang as ti

x = ti.field(ti.f32, shape=4)
vec3 = ti.types.vector(3, ti.f32)


@ti.func
def to_int(v: ti.i32) -> ti.f32:
    return v * 1.0


@ti.func
def scaled(v: vec3, s: ti.f32) -> vec3:
    return v * s


@ti.kernel
def fill(a: ti.f32, f: ti.template(), arr: ti.types.ndarray(),
         v: ti.types.vector(3, ti.f32)) -> ti.f32:
    for i in f:
        f[i] = a * a + arr[i] + v[0]
    return v.sum()


@ti.kernel
def truncating(a: ti.f32) -> ti.f32:
    return to_int(a)


@ti.kernel
def vec_return(v: vec3, s: float) -> ti.types.vector(3, ti.f32):
    return scaled(v, s)


@ti.kernel
def int_args(n: int, m: ti.i64) -> ti.i64:
    return n * m


@ti.kernel
def mat_arg(m: ti.types.matrix(2, 2, ti.f32)) -> ti.f32:
    return m.determinant()
"""


def test_module_level_kernels_with_string_annotations(tmp_path):
    mod = load_module(tmp_path, MODULE_LEVEL)
    assert isinstance(mod.fill.pyfunc.__annotations__["a"], str)  # the future import is active
    total = mod.fill(2.0, mod.x, np.arange(4, dtype=np.float32), ti.Vector([1.0, 2.0, 3.0]))
    assert total == pytest.approx(6.0)
    np.testing.assert_allclose(mod.x.to_numpy(), [5.0, 6.0, 7.0, 8.0])


def test_func_parameter_annotation_casts(tmp_path):
    mod = load_module(tmp_path, MODULE_LEVEL)
    # `v: ti.i32` on a ti.func converts the argument: 2.7 -> 2
    assert mod.truncating(2.7) == 2.0


def test_vector_annotations_and_returns(tmp_path):
    mod = load_module(tmp_path, MODULE_LEVEL)
    out = mod.vec_return(ti.Vector([1.0, 2.0, 3.0]), 2.0)
    np.testing.assert_allclose(out.to_numpy(), [2.0, 4.0, 6.0])
    assert mod.mat_arg(ti.Matrix([[1.0, 2.0], [3.0, 4.0]])) == pytest.approx(-2.0)


def test_python_type_annotations(tmp_path):
    mod = load_module(tmp_path, MODULE_LEVEL)
    assert mod.int_args(3, 2**33) == 3 * 2**33


def test_kernel_built_inside_a_function(tmp_path):
    # `ti` is a parameter and `vec2` a local of the builder; with the future import neither
    # is a closure variable of `k` when used only in annotations (bench/programs.py style).
    mod = load_module(tmp_path, """
        import simrun.lang


        def build(ti):
            vec2 = ti.types.vector(2, ti.f32)
            out = ti.field(ti.f32, shape=())

            @ti.kernel
            def k(v: vec2, n: ti.i32, f: ti.template()) -> ti.f32:
                f[None] = v[0] * n
                return v[1]

            return k, out


        def call():
            k, out = build(simrun.lang)
            r = k(simrun.lang.Vector([1.5, 2.5]), 4, out)
            return r, out[None]
    """)
    assert mod.call() == (2.5, 6.0)


def test_data_oriented_class(tmp_path):
    mod = load_module(tmp_path, """
        import simrun.lang as ti


        @ti.data_oriented
        class Sim:
            scalar = ti.f32

            def __init__(self):
                self.x = ti.field(ti.f32, shape=3)

            @ti.func
            def bump(self, v: scalar) -> scalar:
                return v + 1.0

            @ti.kernel
            def run(self, a: scalar, f: ti.template()) -> ti.f32:
                for i in f:
                    f[i] = self.bump(a) + i
                return a
    """)
    sim = mod.Sim()
    assert sim.run(1.0, sim.x) == 1.0
    np.testing.assert_allclose(sim.x.to_numpy(), [2.0, 3.0, 4.0])


def test_undefined_annotation_names_the_line(tmp_path):
    mod = load_module(tmp_path, """
        import simrun.lang as ti


        @ti.kernel
        def k(a: no_such_type) -> ti.f32:
            return a
    """)
    with pytest.raises(ti.CompileError) as info:
        mod.k(1.0)
    msg = str(info.value)
    assert "no_such_type" in msg and "parameter 'a'" in msg
    assert f"{mod.__file__}:8" in msg  # the line of `def k(a: no_such_type)`


def test_unannotated_kernel_parameter_is_refused_at_its_line(tmp_path):
    """Taichi refuses a kernel parameter without an annotation; simrun took it as a template
    (a number became a compile-time constant, one compile per value)."""
    mod = load_module(tmp_path, """
        import simrun.lang as ti


        @ti.kernel
        def scale(f: ti.template(),
                  factor):
            for i in f:
                f[i] *= factor


        @ti.data_oriented
        class Box:
            @ti.kernel
            def fill(self, f: ti.template(), value: ti.f32):
                for i in f:
                    f[i] = value
    """)
    f = ti.field(ti.f32, shape=3)
    mod.Box().fill(f, 2.0)  # `self` needs no annotation
    with pytest.raises(ti.CompileError) as info:
        mod.scale(f, 2.0)
    msg = str(info.value)
    assert msg.startswith(f"{mod.__file__}:9:"), msg  # the line of `factor` itself
    assert "in kernel 'scale'" in msg and "parameter 'factor' has no type annotation" in msg
    assert "factor: float" in msg and "ti.template()" in msg
    np.testing.assert_allclose(f.to_numpy(), [2.0, 2.0, 2.0])  # nothing ran
