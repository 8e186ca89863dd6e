"""No particle count, dimension or boundary makes LLVM abort while compiling the neighbour-list
kernels. llvmlite 0.50's LLVM has its assertions on, and its loop vectorizer asserted ("VPlan
cost model and legacy cost model disagreed") on _open_grid's bounding-box loop when the
trip count was compiled in: a 3-D open box of 18 or 19 particles on AVX-512 CPUs, 2-D of 36
on Zen 4, killed `simrun check|run|grad` with SIGABRT. The cost models differ by target, so
the kernels are compiled here for several CPUs, not only the one running the test; the
compiles run in subprocesses so that an abort is a failed test naming the kernel, the count
and the CPU, not a dead worker. (LLVM now runs in a child process that survives such an
abort by compiling without loop vectorisation; these kernels must not need that.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COUNTS = [*range(1, 41), 64, 100, 1000]
SEARCH_COUNTS = [1, 3, 18, 36, 100]  # _search's shapes depend on the count
# AVX-512 (Intel), Zen 4 (AVX-512 too, other costs), AVX2 only
CPUS = ["skylake-avx512", "znver4", "haswell"]

CAPTURE = textwrap.dedent("""
    import json, re, sys
    from types import SimpleNamespace
    import numpy as np
    import simrun.lang as ti
    from simrun.lang.runtime import jit
    from simrun.stepper.binding import box_values
    from simrun.stepper.neighbors import NeighborList

    counts, search_counts = json.loads(sys.argv[2]), json.loads(sys.argv[3])
    modules = {}  # kernel name and module text (its hash-derived names blanked) -> module
    where = None
    host_compile = jit.compile_module
    def capture(key, text, settings, kernel="?", slp=True):
        same = re.sub(r"field\\d+", "field", text.replace(key, "K"))  # names: creation order
        modules.setdefault(json.dumps([kernel, slp, same]), [kernel, slp, text, where])
        return host_compile(key, text, settings, kernel, slp)
    jit.compile_module = capture

    for dim in (2, 3):
        for periodic in (False, True):
            for n in sorted(set(counts) | set(search_counts)):
                where = f"{n} particles, {dim}-D, {'periodic' if periodic else 'open'}"
                print(where, flush=True)
                ti.init(arch=ti.cpu, default_fp=ti.f64, offline_cache=False)
                side = 6.0
                x = np.random.default_rng(n).random((n, dim)) * side
                boundary = SimpleNamespace(type="periodic" if periodic else "none",
                                           low=[0.0] * dim, high=[side] * dim)
                positions = ti.Vector.field(dim, dtype=ti.f64, shape=n)
                positions.from_numpy(x)
                nl = NeighborList(2.5, 0.3, x, boundary, ti.f64,
                                  box_values(ti, boundary, dim, ti.f64))
                (nl.build if n in search_counts else nl.bin)(positions)
    with open(sys.argv[1], "w") as fh:
        json.dump(list(modules.values()), fh)
""")

COMPILE = textwrap.dedent("""
    import json, sys
    from simrun.lang.runtime import jit
    cpu = sys.argv[2]
    for kernel, slp, text, where in json.load(open(sys.argv[1])):
        print(f"{kernel} ({where}) for {cpu}", flush=True)
        jit.object_code(text, kernel, slp, cpu=cpu)
""")


def _python(script: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIMRUN_NO_DISK_CACHE": "1"}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else "(nothing)"


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> Path:
    """The neighbour kernels' LLVM modules over counts, dimensions and boundaries (compiled
    for this CPU on the way)."""
    path = tmp_path_factory.mktemp("modules") / "modules.json"
    done = _python(CAPTURE, str(path), json.dumps(COUNTS), json.dumps(SEARCH_COUNTS))
    assert done.returncode == 0, (
        f"building the lists aborted (rc {done.returncode}) at {_last_line(done)}:\n"
        f"{done.stderr[-1500:]}")
    return path


def test_binning_kernels_do_not_compile_the_particle_count_in(modules):
    """_open_grid and _bin are one module per dimension and boundary whatever the count: no
    count can then meet a trip-count-dependent cost in LLVM (COUNTS are all compiled below)."""
    first_counts: dict[tuple[str, str], list[str]] = {}  # each module: the first count
    for kernel, _, _, where in json.loads(modules.read_text()):
        if kernel in ("_open_grid", "_bin"):
            count, config = where.split(" particles, ")
            first_counts.setdefault((kernel, config), []).append(count)
    assert len(first_counts) == 6, f"binning kernels captured: {sorted(first_counts)}"
    varying = {k: v for k, v in first_counts.items() if len(v) > 1}
    assert not varying, f"a binning kernel's module changes at these counts: {varying}"


@pytest.mark.parametrize("cpu", CPUS)
def test_neighbor_kernels_compile_for_every_count_on_each_cpu(modules, cpu):
    """LLVM runs in a child that survives an abort (test_compile_child.py); the list's own
    kernels must still never need that fallback, which gives up loop vectorisation."""
    done = _python(COMPILE, str(modules), cpu)
    assert done.returncode == 0, (
        f"LLVM aborted (rc {done.returncode}) compiling {_last_line(done)}:\n"
        f"{done.stderr[-1500:]}")
    assert "LLVM crashed" not in done.stderr, done.stderr[-1500:]
