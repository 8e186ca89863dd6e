"""Bad kernels and bad kernel parameters through the real CLI: exit 2, the message names the
kernel module's or the scene's file:line(:col), no traceback, and nothing is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from gate_helpers import gated_scene
from test_cli import GRAVITY, REPO, simrun

SCENE = "version: 1\nparticles: {count: 3}\ndt: 1e-3\nsteps: 5\nenergy: [{kernel: k.py:k}]\n"
HEADER = "import simrun.lang as ti\n\n\n@ti.kernel\n"
KERNELS = {
    # case: (kernel module, expected start of the message)
    "module_syntax_error": (HEADER + "def k(x: ti.template(), U: ti.template()):\n"
                            "    for i in x\n        U[None] += x[i].norm()\n",
                            "k.py:6: the kernel module failed to load: SyntaxError"),
    "module_import_error": ("import simrun.lang as ti\n\nscale = undefined_name * 2\n",
                            "k.py:3: the kernel module failed to load: NameError"),
    "kernel_compile_error": (HEADER + "def k(x: ti.template(), U: ti.template()):\n"
                             "    for i in x:\n        U[None] += x[i].nrm()\n",
                             "k.py:7:20: kernel 'k' does not compile: 'Matrix' value has no "
                             "attribute 'nrm'"),
    "kernel_argument_without_value": (HEADER + "def k(x: ti.template(), U: ti.template(), "
                                      "q: float):\n    for i in x:\n"
                                      "        U[None] += q * x[i].norm()\n",
                                      "bad.yaml:5:19: kernel 'k' argument 'q' has no value"),
}


@pytest.mark.parametrize("case", sorted(KERNELS))
def test_bad_kernel_module_exits_2_at_its_own_line(tmp_path: Path, case: str) -> None:
    module, expected = KERNELS[case]
    (tmp_path / "k.py").write_text(module)
    (tmp_path / "bad.yaml").write_text(SCENE)
    for command in (["run", "bad.yaml", "--out", "o"], ["check", "bad.yaml"]):
        done = simrun(*command, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        where = "" if expected.startswith("bad.yaml") else f"{tmp_path.resolve()}{os.sep}"
        assert done.stderr.startswith(f"error: {where}{expected}"), done.stderr
        assert "Traceback" not in done.stderr
        if case != "kernel_compile_error":  # that one adds the source line and a caret
            assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "k.py"]


@pytest.mark.parametrize(("override", "expected"), [
    ("energy.0.params.softening=-1", "parameter 'softening' of kernel 'gravity' (gravity.py) "
                                     "must satisfy softening > 0 (here softening = -1)"),
    ("energy.0.params.sofening=1", "parameter 'sofening' is not an argument of kernel "
                                   "'gravity' (gravity.py). Did you mean 'softening'?"),
])
def test_bad_kernel_parameter_from_the_command_line(tmp_path: Path, override: str,
                                                    expected: str) -> None:
    done = simrun("run", GRAVITY, "--set", override, "--out", "o", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: --set {override} (command line): {expected}")
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_kernel_parameter_out_of_range_in_the_file(tmp_path: Path) -> None:
    text = (REPO / "scenes" / "fem.yaml").read_text().replace("kernels/", f"{REPO}/kernels/")
    line = next(i for i, t in enumerate(text.splitlines()) if "poisson: 0.3" in t)
    (tmp_path / "fem.yaml").write_text(text.replace("poisson: 0.3", "poisson: 0.5"))
    done = simrun("check", "fem.yaml", "--allow-outside", cwd=tmp_path)
    col = text.splitlines()[line].index("0.3") + 1
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: fem.yaml:{line + 1}:{col}: parameter 'poisson' of "
                                  "kernel 'neo_hookean' (fem.py) must satisfy -1 < poisson "
                                  "< 0.5")


def test_non_finite_start_is_a_simulation_failure_at_step_0(tmp_path: Path) -> None:
    np.savez(tmp_path / "start.npz", x=np.zeros((2, 2)))  # both particles at one place
    (tmp_path / "s.yaml").write_text(
        "version: 1\nparticles: {count: 2}\ninitial: {type: file, path: start.npz}\ndt: 1e-3\n"
        "steps: 5\ntopology: {bonds: [[0, 1]]}\n"
        f"energy: [{{kernel: {REPO}/kernels/molecule.py:harmonic_bonds, params: {{k: .inf}}}}]\n")
    done = simrun("check", "s.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "'energy[0].params.k' must be finite" in done.stderr
    trusted = ("--allow-outside",)  # the scene uses the repository's kernels
    # a bond of length 0: its direction, and so its force, is 0/0
    (tmp_path / "s.yaml").write_text((tmp_path / "s.yaml").read_text().replace(".inf", "1"))
    for command in (["check", "s.yaml"], ["run", "s.yaml", "--out", "o"]):
        done = simrun(*command, *trusted, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("simulation failed: step 0 (t = 0): forces became NaN")
        assert "initial state is already bad" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def _wait_for_library(pid: int, name: str) -> None:
    """Until the process has mapped a shared library whose path contains ``name``."""
    maps, deadline = Path(f"/proc/{pid}/maps"), time.time() + 60
    while time.time() < deadline:
        if name in maps.read_text():
            return
        time.sleep(0.002)
    raise AssertionError(f"{name} was never loaded")


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("stage", ["numpy", "llvmlite"])  # importing; compiling kernels
def test_ctrl_c_while_starting_up_exits_130_without_a_traceback(tmp_path: Path,
                                                                 stage: str) -> None:
    # an empty kernel cache: with a warm one, LLVM is never loaded. The run waits at a
    # closed gate from its first energy evaluation (tests/gate_helpers.py), so it cannot
    # finish before the signal, however fast the machine
    scene = str(gated_scene("gravity", tmp_path, tmp_path / "gate", hold_after=0))
    env = {**os.environ, "MPLBACKEND": "Agg", "SIMRUN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "simrun.cli", "run", scene, "--out", "o"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_library(proc.pid, stage)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    state = tmp_path / "o" / "state.npz"
    if state.exists():  # it got as far as saving a frame: a valid, resumable run
        info = json.loads((state.parent / "run.json").read_text())
        assert info["status"] == "interrupted" and "simrun resume o" in err
        with np.load(state) as saved:
            assert 0 <= int(saved["step"]) <= info["steps_done"]
    else:
        assert "simrun resume" not in err


def test_broken_step_kernel_fails_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(
        HEADER + "def e(x: ti.template(), U: ti.template()):\n    for i in x:\n"
        "        U[None] += x[i].norm_sqr()\n\n\n@ti.kernel\n"
        "def s(x: ti.template(), v: ti.template(), dt: float):\n    for i in x:\n"
        "        x[i] += dt * v[i] * undefined_speed\n")
    (tmp_path / "s.yaml").write_text(SCENE.replace("k.py:k", "k.py:e")
                                     + "step_kernels: {kernels: [k.py:s]}\n")
    done = simrun("run", "s.yaml", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {tmp_path.resolve()}{os.sep}k.py:13:29: ")
    assert "kernel 's' does not compile" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()
