"""Every kernel of a representative set, and every kernel the shipped scenes compile, lowers
to PTX that NVIDIA's ptxas assembles for sm_80 (A100) and sm_90 (H100, H200), in each
autodiff mode. No GPU needed: ptxas comes from the `nvidia-cuda-nvcc` wheel (the `test`
extra); the test skips where it or libdevice (`nvidia-nvvm`) is missing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import simrun.lang as ti
from simrun.lang import pipeline
from simrun.lang.codegen.cuda.target import CudaToolError, assemble, find_ptxas, libdevice_bitcode
from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import kernel_text
from simrun.lang.compiler_cuda import kernel_ptx, with_fixed_point
from simrun.lang.ptx import lower_kernel

try:
    libdevice_bitcode()
    TOOLS = find_ptxas() is not None
except CudaToolError:
    TOOLS = False
pytestmark = pytest.mark.skipif(not TOOLS, reason="ptxas (nvidia-cuda-nvcc) or libdevice "
                                "(nvidia-nvvm) not installed")
ROOT = Path(__file__).resolve().parents[1]
SMS = (80, 90)
MODES = ("primal", "reverse", "fwd", "fwd_reverse")


def assembles(kir) -> None:
    """kir's PTX for each SM: one entry per task, accepted by ptxas."""
    for sm in SMS:
        ptx = kernel_ptx(kir, sm)
        assert re.findall(r"\.entry (\w+)", ptx.text) == ptx.kernels
        assert f".target sm_{sm}" in ptx.text
        assemble(ptx.text, sm)


_ASSEMBLED: set[str] = set()  # kernel texts (which make the PTX) assembled in this process


def assembles_once(kir) -> None:
    """``assembles(kir)``, skipped for a kernel whose text (hence PTX) was assembled before
    in this process: a quarter of the shipped scenes' 242 kernels repeat one (180 distinct)."""
    text = kernel_text(kir, build_layout(kir))
    if text not in _ASSEMBLED:
        assembles(kir)
        _ASSEMBLED.add(text)


@pytest.fixture(scope="module")
def kernels():
    ti.init(arch=ti.cpu)
    sys.path.insert(0, str(Path(__file__).parent))
    import ptx_kernels

    yield ptx_kernels
    sys.path.remove(str(Path(__file__).parent))


def test_representative_kernels_assemble_in_every_mode(kernels):
    for kernel, args in kernels.KERNELS:
        modes = MODES if kernel in kernels.DIFFERENTIABLE else ("primal",)
        for mode in modes:
            assembles(lower_kernel(kernel, args, mode))


def test_float_functions_call_libdevice_and_atomics_are_native(kernels):
    ptx = kernel_ptx(lower_kernel(kernels.float_ops_f32, (), "primal"), 90).text
    assert "__nv_" not in ptx and "__nvvm_reflect" not in ptx  # linked, inlined, reflected
    atomics = kernel_ptx(lower_kernel(kernels.float_atomics, (), "primal"), 90).text
    assert re.search(r"\b(atom|red)(\.\w+)*\.add\.f32", atomics)
    assert re.search(r"\batom(\.\w+)*\.cas\.b64", atomics)  # f64 min: no native atomic
    assert "%nctaid.x" in atomics  # the grid-stride loop


def test_float_to_int_is_spelled_out_where_ptx_would_saturate(kernels):
    """PTX's cvt.rzi saturates out-of-range values; the CPU's rule (INT_MIN, as x86) is a
    compare and a select around it (tests/test_codegen_float_to_int.py runs that form)."""
    ptx = kernel_ptx(lower_kernel(kernels.float_to_int, (), "primal"), 90).text
    assert re.search(r"\bcvt\.rzi\.s32\.f32", ptx)
    assert re.search(r"\bselp\.b32\s+%r\d+, %r\d+, -2147483648", ptx), ptx


def test_fixed_point_tasks_assemble_with_integer_atomics(kernels):
    """The deterministic mode's fixed-point tasks (lang/cuda_fixed_point.py) of a sum
    onto one place and, in reverse mode, a gradient scatter: PTX that ptxas assembles, the
    sums 64-bit integer adds."""
    for mode in ("primal", "reverse"):
        kir, plans = with_fixed_point(lower_kernel(kernels.stencil, (), mode))
        assert plans, mode
        assembles(kir)
        assert re.search(r"\b(atom|red)(\.\w+)*\.add\.[us]64", kernel_ptx(kir, 90).text)


def test_a_sum_into_one_place_combines_each_warp_before_its_atomic(kernels):
    """A reduction's partials meet by shuffles in each warp, then one atomic a warp (the
    displacement check's maximum was a compare-and-swap loop from every thread)."""
    kir = lower_kernel(kernels.stencil, (), "primal")
    assembles(kir)
    text = kernel_ptx(kir, 90).text
    assert len(re.findall(r"\bshfl\.sync\.down\.b32", text)) == 5  # f32: 16, 8, 4, 2, 1
    wide, _ = with_fixed_point(kir)  # its i64 sums and f64 maxima: two halves a step
    assert len(re.findall(r"\bshfl\.sync\.down\.b32", kernel_ptx(wide, 90).text)) >= 5 + 20


def collected_during(run) -> list:
    """The KernelIRs that `run()` compiles, after the last pass."""
    last = pipeline.passes("primal", "")[-1][0]
    seen: list = []

    def collect(kir, pass_name):
        if pass_name == last:
            seen.append(kir)

    pipeline.checks.append(collect)
    try:
        run()
    finally:
        pipeline.checks.remove(collect)
    return seen


@pytest.mark.parametrize("scene", sorted(p.name for p in (ROOT / "scenes").glob("*.yaml")))
def test_shipped_scene_kernels_assemble(scene, tmp_path):
    """Every kernel a shipped scene compiles in two steps (its energies' gradient kernels
    included) assembles for both SMs."""
    import simrun

    kirs = collected_during(lambda: simrun.run_scene(ROOT / "scenes" / scene, tmp_path / "run",
                                                     steps=2, allow_outside=True,
                                                     render=False))  # pictures: no kernels
    kirs = list({id(k): k for k in kirs}.values())
    assert kirs
    for kir in kirs:
        assembles_once(kir)


@pytest.mark.parametrize("scene, wrt", [("diffmpm.yaml", "fields.bias")])
def test_gradient_kernels_assemble(scene, wrt):
    """Every kernel a gradient compiles, in reverse and forward mode: the schedule's program
    (its ops-table ticks, slabs of 1-D and 2-D fields), the controller's twins reading the
    step index from a field, the reverse plan's adjoint moves, H lambda's launches (diffmpm
    has them all; mass_spring's took 18 s more of the suite)."""
    from simrun.jobs.grad import forward_gradient, scene_gradient
    from simrun.scene import load_scene

    def gradients():
        sc = load_scene(ROOT / "scenes" / scene, ["steps=6"])
        scene_gradient(sc, [wrt], checkpoints=2)
        forward_gradient(sc, [wrt])

    kirs = list({id(k): k for k in collected_during(gradients)}.values())
    names = {k.name for k in kirs}
    assert {"next_slot", "next_step", "load_field", "store_field", "accumulate"} <= names
    for kir in kirs:
        assembles_once(kir)


def test_ptx_command_prints_the_reverse_kernel(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("import simrun.lang as ti\n"
                   "x = ti.field(ti.f32, 8, needs_grad=True)\n"
                   "y = ti.field(ti.f32, 8, needs_grad=True)\n\n\n"
                   "@ti.kernel\ndef k(y: ti.template(), s: ti.f32):\n"
                   "    for i in x:\n        y[i] = ti.erf(x[i]) * s\n\n\n"
                   "@ti.kernel\ndef bad():\n    x[0] = undefined\n")
    run = [sys.executable, "-m", "simrun.lang.ptx"]
    primal = subprocess.run(run + [f"{src}:k", "--sm", "80"], capture_output=True, text=True)
    grad = subprocess.run(run + [f"{src}:k", "--grad", "--sm", "90"], capture_output=True,
                          text=True)
    assert primal.returncode == 0 and grad.returncode == 0, primal.stderr + grad.stderr
    assert ".target sm_80" in primal.stdout and ".target sm_90" in grad.stdout
    assert "ex2.approx" in grad.stdout or "exp" in grad.stdout.lower()  # exp(-x^2) in d erf
    assemble(grad.stdout, 90)
    missing = subprocess.run(run + [f"{src}:nope"], capture_output=True, text=True)
    assert missing.returncode != 0 and "no @ti.kernel named 'nope'" in missing.stderr
    bad = subprocess.run(run + [f"{src}:bad"], capture_output=True, text=True)
    assert bad.returncode == 2 and "undefined" in bad.stderr and "k.py:" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_ptx_command_compiles_a_template_kernel_for_the_fields_given():
    """The README's `python -m simrun.lang.ptx FILE.py:KERNEL` for a shipped energy kernel,
    whose fields are template parameters: without values for them, one paragraph saying
    what to pass (exit 2); with --arg, the PTX for those fields, in the --fp precision."""
    run = [sys.executable, "-m", "simrun.lang.ptx", "kernels/gravity.py:gravity", "--sm", "90"]
    root = Path(__file__).resolve().parent.parent
    bare = subprocess.run(run, capture_output=True, text=True, cwd=root)
    assert bare.returncode == 2 and "Traceback" not in bare.stderr, bare.stderr
    assert "template argument 'x'" in bare.stderr and "--arg 'x=" in bare.stderr
    fields = ["--arg", "x=ti.Vector.field(2, ti.f64, shape=8)",
              "--arg", "m=ti.field(ti.f64, shape=8)", "--arg", "U=ti.field(ti.f64, shape=())"]
    made = subprocess.run(run + fields + ["--fp", "f64"], capture_output=True, text=True,
                          cwd=root)
    assert made.returncode == 0, made.stderr
    assert ".entry gravity" in made.stdout and ".f64" in made.stdout
    assemble(made.stdout, 90)
    typo = subprocess.run(run + fields + ["--arg", "mass=1"], capture_output=True, text=True,
                          cwd=root)
    assert typo.returncode == 2 and "no parameter of that name" in typo.stderr, typo.stderr
    broken = subprocess.run(run + ["--arg", "x=ti.nothing(2)"], capture_output=True,
                            text=True, cwd=root)
    assert broken.returncode == 2 and "cannot evaluate 'ti.nothing(2)'" in broken.stderr


def test_a_cached_ptx_module_is_used_without_building_anything(kernels, tmp_path, monkeypatch):
    from simrun.lang import compiler_cuda

    kir = lower_kernel(kernels.int_ops, (), "primal")
    first = kernel_ptx(kir, 80, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.ptx"))) == 1

    def nothing_built(*args):
        raise AssertionError("built on a cache hit")

    monkeypatch.setattr(compiler_cuda, "ptx_of", nothing_built)
    monkeypatch.setattr(compiler_cuda, "build_module", nothing_built)
    hit = kernel_ptx(kir, 80, cache_dir=tmp_path)
    assert (hit.text, hit.kernels) == (first.text, first.kernels)
    with pytest.raises(AssertionError, match="built on a cache hit"):
        kernel_ptx(kir, 90, cache_dir=tmp_path)  # another SM: another module


def test_the_ptx_cache_key_changes_with_everything_that_makes_the_ptx(tmp_path, monkeypatch,
                                                                      request):
    """Every file of codegen/cuda (target.py too), the engine version and libdevice (a new
    wheel: another size or mtime) are in the key; a change to any of them misses."""
    from simrun.lang import compiler_cuda
    from simrun.lang.codegen.cuda import target
    from simrun.lang.runtime import jit

    cuda_dir = Path(compiler_cuda.__file__).parent / "codegen" / "cuda"
    assert set(cuda_dir.glob("*.py")) <= set(compiler_cuda.cuda_sources())
    assert cuda_dir / "target.py" in compiler_cuda.cuda_sources()

    def key():
        compiler_cuda.ptx_fingerprint.cache_clear()
        return compiler_cuda.ptx_cache_key("kernel k()", 90, False, True)

    request.addfinalizer(compiler_cuda.ptx_fingerprint.cache_clear)  # not the test's files

    lib = tmp_path / "libdevice.10.bc"
    lib.write_bytes(b"BC" * 100)
    monkeypatch.setattr(target, "libdevice_path", lambda: lib)
    sources = [tmp_path / "emit.py", tmp_path / "target.py"]
    for src in sources:
        src.write_text("# v1\n")
    monkeypatch.setattr(compiler_cuda, "cuda_sources", lambda: sources)
    keys = [key()]
    assert key() == keys[0]  # the same inputs: the same key
    sources[1].write_text("# v2\n")
    keys.append(key())
    lib.write_bytes(b"BC" * 101)  # another libdevice: another size
    keys.append(key())
    os.utime(lib, ns=(0, lib.stat().st_mtime_ns + 10**9))  # same size, newer
    keys.append(key())
    monkeypatch.setattr(jit, "ENGINE_VERSION", jit.ENGINE_VERSION + "x")
    keys.append(key())
    keys.append(compiler_cuda.ptx_cache_key("kernel k()", 90, True, True))  # debug
    keys.append(compiler_cuda.ptx_cache_key("kernel k(): 1", 90, True, True))  # the IR
    assert len(set(keys)) == len(keys)
