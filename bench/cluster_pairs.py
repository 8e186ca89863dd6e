"""The cluster-pair layout (GROMACS's 4x4) for in.lj, hand-written in C, against simrun's
neighbour-row kernel and the hand-written row loop, one thread:

    python bench/cluster_pairs.py --cells 20 --rounds 5

bench/cluster_ref.c builds 4-atom clusters (x-y columns ``--column`` wide, sorted by z) and
the cluster pairs whose bounding boxes come within the list's reach (cutoff + skin: a list
as valid between builds as simrun's), and, as a bound, within the cutoff alone (valid only
at the build). Its U and dU/dx are checked against bench/pair_ref.c's row loop over
simrun's list first. Prints ns per atom for one evaluation of U and dU/dx: simrun's fused
launch (what the stepper runs), the C row loop (``-O3 -march=native -ffast-math
-fopenmp-simd``), and the cluster kernel, with the share of its pair slots within the cutoff
(a row holds ~72% of its entries within the cutoff). Medians over rounds, interleaved.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
from pathlib import Path

import numpy as np
from pair_cycles import FLAGS, LJCase, compile_c, compile_reference, per_call_s, ptr

D = ctypes.c_double


def compile_cluster(out_dir: Path) -> ctypes.CDLL:
    out = compile_c("cluster_ref.c", FLAGS["C -O3"], out_dir)
    out.cluster_lj.restype = D
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--column", type=float, default=(4 / 0.8442) ** (1 / 3),
                        help="x-y column width (default: 4 atoms' cube at in.lj's density)")
    args = parser.parse_args()
    case = LJCase(args.cells, "f64", 20)
    x, box, n, cut = case.x, case.box, case.n, case.cutoff
    eps, sigma = (D(case.params[k]) for k in ("epsilon", "sigma"))
    with tempfile.TemporaryDirectory() as tmp:
        row = compile_reference("double", FLAGS["C -O3 simd"], Path(tmp))
        cluster = compile_cluster(Path(tmp))
    row.lj_energy_grad.restype = D
    want_grad = np.zeros_like(x)
    want = row.lj_energy_grad(n, case.cap, ptr(x), ptr(case.nb), ptr(box), eps, sigma, D(cut),
                              ptr(want_grad))
    reach = cut + case.system.neighbor_list.skin
    grad = np.zeros_like(x)
    calls = {"simrun fused launch (U and dU/dx)": case.simrun_calls()["simrun fwd+rev (1 launch)"],
             "C row loop, omp simd": lambda: row.lj_energy_grad(
                 n, case.cap, ptr(x), ptr(case.nb), ptr(box), eps, sigma, D(cut), ptr(grad))}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for label, within in ((f"reach {reach:g}", reach), (f"cutoff {cut:g} (a bound)", cut)):
        pairs = cluster.cluster_build(n, ptr(x), ptr(box), D(within), D(args.column))
        got_grad, slots, hits = np.zeros_like(x), ctypes.c_longlong(), ctypes.c_longlong()
        got = cluster.cluster_lj(n, ptr(x), ptr(box), eps, sigma, D(cut), ptr(got_grad),
                                 ctypes.byref(slots), ctypes.byref(hits))
        scale = np.abs(want_grad).max()
        print(f"clusters within {label}: {pairs:,} cluster pairs, {slots.value:,} slots, "
              f"{hits.value / slots.value:.1%} within the cutoff; U {got:.10g} (rows "
              f"{want:.10g}), dU/dx to {np.abs(got_grad - want_grad).max() / scale:.1e}")
        assert abs(got - want) <= 1e-9 * abs(want), (got, want)
        assert np.abs(got_grad - want_grad).max() <= 1e-10 * scale
        name = f"C 4x4 clusters within {label}"
        times[name] = []
        for _ in range(args.rounds):  # interleaved
            times[name].append(per_call_s(lambda: cluster.cluster_lj(
                n, ptr(x), ptr(box), eps, sigma, D(cut), ptr(grad), None, None)))
            for other, fn in calls.items():
                times[other].append(per_call_s(fn))
    for name, samples in times.items():
        print(f"{name:48s} {statistics.median(samples) / n * 1e9:8.1f} ns per atom")


if __name__ == "__main__":
    main()
