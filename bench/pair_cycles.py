"""Cycles per pair interaction: simrun's pair kernels against a hand-written C loop.

    python bench/pair_cycles.py --cells 20 --gravity 1024 --rounds 9 [--precision f32]

(a) ``kernels/lj.py:lj`` over the LJ melt's neighbour list (LAMMPS in.lj, ``--cells`` fcc
cells a side, the list as the melt leaves it after ``--warm`` steps), and (b)
``kernels/gravity.py:gravity`` over all N x N ordered pairs (gravity_1024), each as the
forward energy alone and forward + reverse (forces by autodiff), one thread. The reference
is bench/pair_ref.c compiled here with ``cc -O3 -march=native`` three ways: as written (IEEE
order, sums serial), with ``-ffast-math``, and with ``-ffast-math -fopenmp-simd`` (its
``omp simd`` pragmas vectorise every row: the practical limit); it computes energy and
forces in one loop, and the first build is checked against simrun's U and dU/dx first.

"fwd, rev (2 launches)" is the forward launch, then the reverse kernel's (autodiff's
"reverse" mode): both recompute the pair terms. "fwd+rev (1 launch)" is autodiff's
"value_reverse" mode, U and dU/dx in one sweep: what the stepper launches (DirectForces).
"rev alone" is the reverse kernel without the forward: dU/dx without U. The C loop computes
both U and dU/dx in one pass.

A pair is a listed pair (within the cutoff or the skin; the cutoff's share is printed) or,
for gravity, an ordered pair. Cycles are ns x the clock that /proc/cpuinfo reports (this
machine's VM exposes no cycle counter; ``--ghz`` overrides). Each round times every variant
once, interleaved, each sample long enough to time; the table shows medians over rounds.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simrun.scene import load_scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.run import prepare

BENCH = Path(__file__).resolve().parent
SCENES = BENCH.parent / "scenes"
FLAGS = {"C -O3": ["-O3", "-march=native"],
         "C -O3 fast-math": ["-O3", "-march=native", "-ffast-math"],
         "C -O3 simd": ["-O3", "-march=native", "-ffast-math", "-fopenmp-simd"]}
REVERSE_ROWS = ("fwd, rev", "rev alone")  # shown with the fwd+rev rows


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                    if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def cpu_ghz() -> float:
    with open("/proc/cpuinfo") as f:
        return next(float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")) / 1e3


def compile_c(source: str, flags: list[str], out_dir: Path, name: str | None = None
              ) -> ctypes.CDLL:
    """bench/``source`` compiled with ``flags`` (``$CC`` or cc) as a shared library."""
    lib = out_dir / f"{name or Path(source).stem}.so"
    cmd = [os.environ.get("CC", "cc"), *flags, "-fPIC", "-shared", str(BENCH / source), "-o",
           str(lib), "-lm"]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(lib))


def compile_reference(real: str, flags: list[str], out_dir: Path) -> ctypes.CDLL:
    """bench/pair_ref.c as a shared library, with REAL = ``real``."""
    return compile_c("pair_ref.c", [*flags, f"-DREAL={real}"], out_dir,
                     f"pair_ref_{real}_{len(flags)}")


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def per_call_s(fn, min_sample_s: float = 0.05) -> float:
    """Seconds per call of one sample of enough calls to last ``min_sample_s``."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_sample_s:
            return elapsed / calls


class Case:
    """One pair loop: simrun's primal and reverse launches and the C reference's calls."""

    def __init__(self, name: str, scene_path: Path, overrides: list[str], warm: int) -> None:
        scene = load_scene(scene_path, overrides)
        self.name, self.scene = name, scene
        self.system, _ = prepare(scene, None, 1)
        self.stepper = FieldStepper(scene, self.system)
        self.stepper.advance(warm)
        self.fp = self.system.np_dtype
        self.x = np.ascontiguousarray(self.system.x.to_numpy(), dtype=self.fp)
        self.params = scene.energy[0].params

    def simrun_calls(self) -> dict:
        """The energy's launches by mode: U alone; U, then dU/dx (two launches, as before
        value_reverse); U and dU/dx in one (what the stepper launches now); dU/dx alone."""
        bound = self.system.energy[0]
        primal, reverse, both = (bound.kernel.prepare(bound.args, mode)[:2]
                                 for mode in ("primal", "reverse", "value_reverse"))
        return {"simrun forward": lambda: FieldStepper._make(primal),
                "simrun fwd, rev (2 launches)": lambda: (FieldStepper._make(primal),
                                                         FieldStepper._make(reverse)),
                "simrun fwd+rev (1 launch)": lambda: FieldStepper._make(both),
                "simrun rev alone": lambda: FieldStepper._make(reverse)}

    def simrun_values(self) -> tuple[float, np.ndarray]:
        """U and dU/dx from one clean forward + reverse pass."""
        for part in self.stepper.clear:
            FieldStepper._make(part)
        self.system.U.fill(0)
        self.system.x.grad.fill(0)
        for part in self.stepper.forces:
            FieldStepper._make(part)
        return float(self.system.U.to_numpy()), self.system.x.grad.to_numpy()


class LJCase(Case):
    def __init__(self, cells: int, precision: str, warm: int) -> None:
        side = cells * (4 / 0.8442) ** (1 / 3)
        super().__init__(f"LJ list, {4 * cells ** 3} atoms", SCENES / "lj_melt.yaml", [
            f"particles.count={4 * cells ** 3}", f"initial.shape=[{cells}, {cells}, {cells}]",
            f"boundary.high=[{side!r}, {side!r}, {side!r}]", f"precision={precision}"], warm)
        nl = self.system.neighbor_list
        self.nb = np.ascontiguousarray(nl.neighbors.to_numpy(), dtype=np.int32)
        self.n, self.cap = self.nb.shape[0], self.nb.shape[1] - 1
        self.box = np.full(3, side, dtype=self.fp)
        self.pairs = int(self.nb[:, 0].sum())
        self.cutoff = float(self.params.get("cutoff", nl.cutoff))

    def within_cutoff(self) -> float:
        i = np.repeat(np.arange(self.n), self.nb[:, 0])
        j = np.concatenate([row[1:1 + row[0]] for row in self.nb])
        d = self.x[j] - self.x[i]
        d -= self.box * np.floor(d / self.box + 0.5)
        return float(((d * d).sum(1) < self.cutoff ** 2).mean())

    def c_calls(self, lib: ctypes.CDLL, real) -> tuple:
        p = self.params
        args = (self.n, self.cap, ptr(self.x), ptr(self.nb), ptr(self.box),
                real(p["epsilon"]), real(p["sigma"]), real(self.cutoff))
        grad = np.zeros_like(self.x)
        lib.lj_energy.restype = lib.lj_energy_grad.restype = real
        return (lambda: lib.lj_energy(*args), lambda: lib.lj_energy_grad(*args, ptr(grad)),
                grad)


class GravityCase(Case):
    def __init__(self, n: int, precision: str, warm: int) -> None:
        super().__init__(f"gravity, {n} bodies", SCENES / "gravity_1024.yaml",
                         [f"particles.count={n}", f"precision={precision}"], warm)
        self.n, self.pairs = n, n * n
        self.m = np.ascontiguousarray(self.system.m.to_numpy(), dtype=self.fp)

    def within_cutoff(self) -> float:
        return 1.0

    def c_calls(self, lib: ctypes.CDLL, real) -> tuple:
        p = self.params
        args = (self.n, ptr(self.x), ptr(self.m), real(p["softening"]), real(p["strength"]))
        grad = np.zeros_like(self.x)
        lib.gravity_energy.restype = lib.gravity_energy_grad.restype = real
        return (lambda: lib.gravity_energy(*args),
                lambda: lib.gravity_energy_grad(*args, ptr(grad)), grad)


def c_real(case: Case):
    return ctypes.c_float if case.fp == np.float32 else ctypes.c_double


def agreement(case: Case, lib: ctypes.CDLL) -> tuple[float, float, float]:
    """simrun's U, the C loop's U, and max |dU/dx difference| / max |dU/dx|: autodiff
    against the hand-derived forces, at the case's configuration."""
    u_sim, g_sim = case.simrun_values()
    _, energy_grad, grad = case.c_calls(lib, c_real(case))
    grad[:] = 0
    u_ref = energy_grad()
    return u_sim, u_ref, float(np.abs(g_sim - grad).max() / np.abs(grad).max())


def reference_calls(case: Case, libs: dict[str, ctypes.CDLL]) -> dict:
    """The C variants' calls, after checking the IEEE build against simrun's U and dU/dx."""
    u_sim, u_ref, err = agreement(case, libs["C -O3"])
    print(f"  check: U simrun {u_sim:.10g} vs C {u_ref:.10g}; max |dU/dx difference| / "
          f"max |dU/dx| = {err:.2e}")
    calls = {}
    for label, lib in libs.items():
        energy, energy_grad, _ = case.c_calls(lib, c_real(case))
        calls[f"{label} forward"], calls[f"{label} fwd+rev"] = energy, energy_grad
    return calls


def time_rounds(calls: dict, rounds: int) -> dict[str, float]:
    """Median seconds per call of each variant, the variants interleaved in every round."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(rounds):
        for name, fn in calls.items():
            samples[name].append(per_call_s(fn))
    return {name: statistics.median(s) for name, s in samples.items()}


def report(case: Case, calls: dict, rounds: int, ghz: float) -> None:
    times = time_rounds(calls, rounds)
    print(f"\n{case.name}: {case.pairs} pairs ({case.within_cutoff():.0%} within the cutoff), "
          f"{case.scene.precision}, load average {os.getloadavg()[0]:.1f}")
    print(f"  {'variant':<30}{'ms':>9}{'ns/pair':>10}{'cycles/pair':>13}{'x best C':>10}")
    for mode in ("forward", "fwd+rev"):
        best = min(t for name, t in times.items() if name.startswith("C") and mode in name)
        for name, t in times.items():
            if mode in name or (mode == "fwd+rev" and any(r in name for r in REVERSE_ROWS)):
                ns = t * 1e9 / case.pairs
                print(f"  {name:<30}{t * 1e3:9.3f}{ns:10.3f}{ns * ghz:13.2f}{t / best:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="*", default=[20])
    parser.add_argument("--gravity", type=int, nargs="*", default=[1024])
    parser.add_argument("--precision", choices=["f32", "f64"], default="f64")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--ghz", type=float, default=None)
    args = parser.parse_args()
    ghz = args.ghz or cpu_ghz()
    real = "float" if args.precision == "f32" else "double"
    print(f"{cpu_name()}, {ghz:.3f} GHz (cycles = ns x GHz), 1 thread, "
          f"{args.rounds} rounds, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        libs = {label: compile_reference(real, flags, Path(tmp))
                for label, flags in FLAGS.items()}
        cases = [LJCase(c, args.precision, args.warm) for c in args.cells]
        cases += [GravityCase(n, args.precision, 0) for n in args.gravity]
        for case in cases:
            print(f"\n{case.name}:", flush=True)
            calls = {**case.simrun_calls(), **reference_calls(case, libs)}
            report(case, calls, args.rounds, ghz)


if __name__ == "__main__":
    main()
