"""Cached kernel objects are mapped by runtime/objload.py, without loading LLVM.

A fresh process with a warm cache must give the same numbers as the process that compiled
the kernels and as one that loads the same objects through MCJIT; objects the loader does not
handle raise LoadError and go to MCJIT.
"""

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang import api
from simrun.lang.runtime import jit, objload

pytestmark = pytest.mark.skipif(not objload.supported(), reason="x86-64 Linux only")

PROGRAM = """
import sys
import numpy as np
import simrun.lang as ti

ti.init(arch=ti.cpu, default_fp=ti.f64)
x = ti.field(ti.f64, shape=64, needs_grad=True)
L = ti.field(ti.f64, shape=(), needs_grad=True)
g = ti.Vector.field(2, ti.f32, shape=16)


@ti.kernel
def energy():
    for i in x:
        L[None] += ti.sin(x[i]) * ti.cos(x[i]) + ti.exp(-x[i]) + ti.atan2(x[i], 2.0)


@ti.kernel
def scatter():
    for i in range(300000):
        g[i % 16] += ti.Vector([1.0, 0.5])


@ti.kernel
def inner_loop(n: ti.i32):
    for i in x:
        s = 0.0
        for k in range(n):
            s += ti.sqrt(x[i] + k + 1)
        L[None] += s


x.from_numpy(np.linspace(0.0, 1.0, 64))
with ti.ad.Tape(loss=L):
    energy()
grad = x.grad.to_numpy()
scatter()
with ti.ad.Tape(loss=L):
    inner_loop(40)
print(repr(L[None]), repr(float(grad.sum())), repr(float(x.grad.to_numpy().sum())),
      repr(float(g.to_numpy().sum())), "llvmlite.binding" in sys.modules)
"""


def _run(tmp_path: Path, **env) -> list[str]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    full = {**os.environ, "SIMRUN_CACHE_DIR": str(tmp_path / "cache"), **env}
    full.pop("SIMRUN_NO_DISK_CACHE", None)
    full.pop("SIMRUN_MCJIT", None)
    full.update(env)
    done = subprocess.run([sys.executable, str(script)], env=full, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_warm_process_maps_objects_without_llvm(tmp_path: Path) -> None:
    first = _run(tmp_path)
    warm = _run(tmp_path)
    mcjit = _run(tmp_path, SIMRUN_MCJIT="1")
    assert first[-1] == "True" and warm[-1] == "False" and mcjit[-1] == "True"
    assert first[:-1] == warm[:-1] == mcjit[:-1]
    xs = np.linspace(0.0, 1.0, 64)
    d = np.cos(2 * xs) - np.exp(-xs) + 2.0 / (4.0 + xs**2)
    assert float(first[1]) == pytest.approx(d.sum(), rel=1e-12)
    ks = np.arange(40) + 1
    want_l = np.sqrt(xs[:, None] + ks).sum()
    want_g = (0.5 / np.sqrt(xs[:, None] + ks)).sum()
    assert float(first[0]) == pytest.approx(want_l, rel=1e-12)
    assert float(first[2]) == pytest.approx(want_g, rel=1e-12)
    assert float(first[3]) == 300000 * 1.5
    assert len(list((tmp_path / "cache" / "kernels").glob("host-*.txt"))) == 1


def _object(tmp_path: Path, monkeypatch) -> bytes:
    """The object code of a freshly compiled kernel that calls libm."""
    monkeypatch.setenv("SIMRUN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SIMRUN_NO_DISK_CACHE", raising=False)
    ti.init(arch=ti.cpu)
    y = ti.field(ti.f32, shape=8)

    @ti.kernel
    def waves(phase: ti.f32):
        for i in y:
            y[i] = ti.sin(i + phase) * ti.exp(-phase)

    waves(0.25)
    # the pool is compiled here too when not loaded yet
    pool = f"{jit.cache_key('simrun native pool', api.runtime().settings)}.o"
    (path,) = [p for p in (tmp_path / "kernels").glob("*.o") if p.name != pool]
    return path.read_bytes()


def _relocations(data: bytes) -> int:
    """File offset of the first RELA entry."""
    shoff, shnum = struct.unpack_from("<Q", data, 0x28)[0], struct.unpack_from("<H", data, 0x3C)[0]
    for k in range(shnum):
        kind, offset = struct.unpack_from("<I", data, shoff + 64 * k + 4)[0], \
            struct.unpack_from("<Q", data, shoff + 64 * k + 24)[0]
        if kind == 4:
            return offset
    raise AssertionError("no relocations")


def test_objects_the_loader_does_not_handle_raise(tmp_path: Path, monkeypatch) -> None:
    data = _object(tmp_path, monkeypatch)
    assert "waves" in " ".join(objload.load(data))
    with pytest.raises(objload.LoadError):
        objload.load(b"not an object")
    with pytest.raises(objload.LoadError):
        objload.load(data[:200])
    pc32 = bytearray(data)
    pc32[_relocations(data) + 8] = 2  # R_X86_64_PC32
    with pytest.raises(objload.LoadError, match="relocation type 2"):
        objload.load(bytes(pc32))

    def unknown(name: str) -> int:
        raise objload.LoadError(f"unresolved symbol {name}")

    with pytest.raises(objload.LoadError, match="unresolved symbol"):
        objload.load(data, unknown)


def test_fallback_to_mcjit(tmp_path: Path, monkeypatch) -> None:
    """An object objload refuses is loaded by MCJIT and runs the same."""
    def refuse(data, resolve=None):
        raise objload.LoadError("refused")

    monkeypatch.setattr(objload, "load", refuse)
    monkeypatch.setenv("SIMRUN_CACHE_DIR", str(tmp_path))
    ti.init(arch=ti.cpu)
    z = ti.field(ti.f64, shape=5)

    @ti.kernel
    def cubes(a: ti.f64):
        for i in z:
            z[i] = ti.pow(i + a, 3.0)

    cubes(0.5)
    np.testing.assert_allclose(z.to_numpy(), (np.arange(5) + 0.5) ** 3, rtol=1e-14)
    assert jit._state.get("engine") is not None


def test_corrupt_host_file_is_rewritten(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(jit, "_host", {})
    cpu, features = jit.host_cpu(tmp_path / "kernels")
    (path,) = (tmp_path / "kernels").glob("host-*.txt")
    assert path.read_text() == f"{cpu}\n{features}"
    path.write_text("")
    monkeypatch.setattr(jit, "_host", {})
    assert jit.host_cpu(tmp_path / "kernels") == (cpu, features)
    assert path.read_text() == f"{cpu}\n{features}"
