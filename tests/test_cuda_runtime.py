"""ti.init(arch=ti.cuda) and --device cuda where no GPU can be used: Taichi's fallback to the
CPU with a warning for the library, exit code 2 with one paragraph for the CLI (nothing run,
nothing written). On a machine with a GPU these cases cannot arise and are skipped."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.lang.runtime.chain import Chain
from simrun.lang.runtime.cuda import device_status

ROOT = Path(__file__).resolve().parents[1]
WHY = device_status()
no_gpu = pytest.mark.skipif(WHY is None, reason="a CUDA device is present")


@no_gpu
def test_arch_cuda_falls_back_to_the_cpu_with_the_reason(capsys):
    ti.init(arch=ti.cuda)
    warned = capsys.readouterr().err
    assert "arch='cuda'" in warned and WHY in warned and "running on the CPU" in warned
    x = ti.field(ti.f64, 5)

    @ti.kernel
    def erf_in_place():
        for i in x:
            x[i] = ti.erf(x[i])

    x.from_numpy(np.linspace(0.0, 2.0, 5))
    erf_in_place()
    want = [math.erf(v) for v in np.linspace(0.0, 2.0, 5)]
    assert np.allclose(x.to_numpy(), want, rtol=4 * np.finfo(np.float64).eps, atol=0)
    ti.init(arch=ti.cpu)
    assert capsys.readouterr().err == ""


@no_gpu
@pytest.mark.parametrize("command", [
    ["run", "scenes/projectile.yaml"],
    ["grad", "scenes/fit_spring.yaml", "--wrt", "energy.0.params.k"],
    ["optimize", "scenes/fit_spring.yaml"],
    ["batch", "scenes/projectile.yaml", "--sweep", "dt=1e-3,2e-3"],
])
def test_device_cuda_without_a_gpu_is_exit_2_and_writes_nothing(command, tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "simrun.cli", *command, "--device", "cuda",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert message.startswith("error: --device cuda: ") and WHY in message
    assert "--device cpu" in message and "Traceback" not in message
    assert len(message.splitlines()) == 1 or "\n\n" not in message
    assert not out.exists()


def test_a_chain_refuses_kernels_that_are_not_cpu_tasks():
    ti.init(arch=ti.cpu)
    x = ti.field(ti.f32, 4)

    @ti.kernel
    def one():
        for i in x:
            x[i] = 1.0

    compiled, flat, _ = one.prepare((), "primal")
    gpu_like = type("GpuLike", (type(compiled),), {"chainable": False})
    compiled.__class__ = gpu_like
    with pytest.raises(ValueError, match="runs on a GPU"):
        Chain(ti.api.runtime(), [(compiled, flat)])


@no_gpu
def test_gpu_check_script_skips_cleanly_without_a_gpu(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHON": sys.executable, "GPU_CHECK_PTX": "0",
                               "SIMRUN_WHEELS": str(tmp_path / "none")})
    assert done.returncode == 0, done.stdout + done.stderr
    summary = (tmp_path / "o" / "summary.txt").read_text()
    assert f"SKIPPED: no usable GPU: {WHY}" in summary
    assert not (tmp_path / "o" / "gpu-tests.log").exists()
    assert not (tmp_path / "o" / "cpu-checks.log").exists()  # GPU_CHECK_PTX=0: none
