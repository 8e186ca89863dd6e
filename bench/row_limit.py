"""The LJ list's force pass against hand-vectorised C: is simrun's row loop at this CPU's
limit? One thread, in.lj's list after 20 steps of melting:

    python bench/row_limit.py --cells 20 --rounds 7

Times U and dU/dx in one pass, ns per atom, the variants interleaved in each round, medians:
simrun's fused launch (what the stepper runs every step), bench/pair_ref.c's row loop
(``-O3 -march=native -ffast-math -fopenmp-simd``: the compiler's best), and bench/row_limit.c's
intrinsics kernels (partners' positions as one 4-double load each, transposed by shuffles;
AVX2 4 partners at a time, and AVX-512 8 at a time where the CPU has it). Each C kernel's U
and dU/dx are checked against the IEEE row loop first.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
from pathlib import Path

import numpy as np
from pair_cycles import FLAGS, LJCase, compile_c, compile_reference, cpu_name, per_call_s, ptr

D = ctypes.c_double


def has_avx512() -> bool:
    try:
        return " avx512f " in f" {Path('/proc/cpuinfo').read_text()} ".replace("\n", " ")
    except OSError:
        return False


def compile_kernels(out_dir: Path) -> ctypes.CDLL:
    out = compile_c("row_limit.c", FLAGS["C -O3"], out_dir)
    out.rowvec4_lj.restype = out.rowvec8_lj.restype = D
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    case = LJCase(args.cells, "f64", 20)
    x, box, n, cut, cap, nb = case.x, case.box, case.n, case.cutoff, case.cap, case.nb
    eps, sigma = (D(case.params[k]) for k in ("epsilon", "sigma"))
    with tempfile.TemporaryDirectory() as tmp:
        ieee = compile_reference("double", FLAGS["C -O3"], Path(tmp))
        simd = compile_reference("double", FLAGS["C -O3 simd"], Path(tmp))
        kernels = compile_kernels(Path(tmp))
    ieee.lj_energy_grad.restype = simd.lj_energy_grad.restype = D
    want_grad = np.zeros_like(x)
    want = ieee.lj_energy_grad(n, cap, ptr(x), ptr(nb), ptr(box), eps, sigma, D(cut),
                               ptr(want_grad))
    padded = np.append(x.ravel(), 0.0)  # the last partner's 4-double load
    grad, padded_grad = np.zeros_like(x), np.zeros_like(padded)
    calls = {"simrun fused launch": case.simrun_calls()["simrun fwd+rev (1 launch)"],
             "C row loop, omp simd": lambda: simd.lj_energy_grad(
                 n, cap, ptr(x), ptr(nb), ptr(box), eps, sigma, D(cut), ptr(grad))}
    widths = {"C intrinsics, AVX2 x4": kernels.rowvec4_lj}
    if has_avx512():
        widths["C intrinsics, AVX-512 x8"] = kernels.rowvec8_lj
    scale = np.abs(want_grad).max()
    for name, fn in widths.items():
        padded_grad[:] = 0
        got = fn(n, cap, ptr(padded), ptr(nb), ptr(box), eps, sigma, D(cut), ptr(padded_grad))
        err = np.abs(padded_grad[:-1] - want_grad.ravel()).max() / scale
        print(f"{name}: U {got:.12g} (row loop {want:.12g}), dU/dx to {err:.1e}")
        assert abs(got - want) <= 1e-12 * abs(want) and err <= 1e-12
        calls[name] = lambda fn=fn: fn(n, cap, ptr(padded), ptr(nb), ptr(box), eps, sigma,
                                       D(cut), ptr(padded_grad))
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, fn in calls.items():
            times[name].append(per_call_s(fn))
    print(f"{n} atoms, {int(nb[:, 0].sum()):,} listed pairs, one thread, {cpu_name()}")
    for name, samples in times.items():
        print(f"{name:28s} {statistics.median(samples) / n * 1e9:8.1f} ns per atom")


if __name__ == "__main__":
    main()
