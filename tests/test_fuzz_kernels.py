"""Fuzzing the kernel frontend (issue 20): generated kernels (tests/kernel_gen.py) either
compile, forward and reverse, or raise a CompileError that names their file and a line of
it; run (in a child process, with and without ``debug=True``) they finish or raise one of
simrun.lang's own errors (IndexError from debug's bounds checks): no internal exception, no
signal, no hang. The generator leaves out shifts by a variable amount: a constant shift by
the bit width or more is undefined (LLVM poison) and corrupts memory; see issue 20's report.

Deterministic (derandomize=True, fixed seeds) and bounded (max_examples, timeouts).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kernel_gen import kernel_source, long_literal_source

TESTS = Path(__file__).resolve().parent
_names = itertools.count()


@pytest.fixture(scope="module")
def ti():
    import simrun.lang as ti

    ti.init(arch=ti.cpu, cpu_max_num_threads=1)
    return ti


def load(folder: Path, source: str):
    path = folder / f"fuzz_kernel_{next(_names)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def check_compile_error(exc: Exception, path: Path, source: str) -> None:
    """A CompileError names the module and a line of it (the CLI prints file:line:col)."""
    from simrun.lang.errors import CompileError

    assert isinstance(exc, CompileError), f"{type(exc).__name__}: {exc}\n{source}"
    assert exc.span is not None, f"no source position: {exc}\n{source}"
    assert exc.span.file == str(path), (exc.span, source)
    assert 1 <= exc.span.line <= len(source.splitlines()), (exc.span, source)


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(st.integers(0, 2**32 - 1))
def test_generated_kernels_compile_or_raise_compile_error_at_their_line(ti, tmp_path_factory,
                                                                        seed: int) -> None:
    source = kernel_source(seed)
    try:
        compile(source, "generated.py", "exec")
    except SyntaxError:
        assume(False)  # Python's own error; the scene loader reports it at its line
    module, path = load(tmp_path_factory.getbasetemp(), source)
    for mode in ("primal", "reverse"):
        try:
            module.k.prepare((), mode)
        except Exception as exc:  # noqa: BLE001 - what kind is the point of the test
            check_compile_error(exc, path, source)
            return


RUNNER = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
from kernel_gen import kernel_source, long_literal_source
import simrun.lang as ti
from simrun.lang.errors import SimrunError

folder, seeds = sys.argv[2], json.loads(sys.argv[3])
for debug in (False, True):
    for seed in seeds:
        ti.init(arch=ti.cpu, debug=debug, cpu_max_num_threads=1)
        source = kernel_source(seed, bad=0.0)
        path = f"{folder}/run_{seed}_{int(debug)}.py"
        open(path, "w").write(source)
        print(json.dumps({"seed": seed, "debug": debug, "at": "start"}), flush=True)
        scope = {"__name__": f"run_{seed}"}
        try:
            exec(compile(source, path, "exec"), scope)
            scope["k"]()
            with ti.ad.Tape(loss=scope["s"]):
                scope["k"]()
            outcome = "ok"
        except SimrunError as exc:
            outcome = "SimrunError"
        except IndexError as exc:  # debug=True bounds checks (documented), at file:line
            outcome = "IndexError" if debug and path in str(exc) else repr(exc)
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc} | " + traceback.format_exc(limit=-3)
        print(json.dumps({"seed": seed, "debug": debug, "at": "end", "outcome": outcome}),
              flush=True)
"""


def test_generated_kernels_run_without_a_crash(tmp_path: Path) -> None:
    seeds = list(range(1000, 1040))
    done = subprocess.run([sys.executable, "-c", RUNNER, str(TESTS), str(tmp_path),
                           json.dumps(seeds)], capture_output=True, text=True, timeout=300)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    last = records[-1] if records else None
    assert done.returncode == 0, (f"exit {done.returncode} (a negative one is a signal) at "
                                  f"{last}: {done.stderr[-2000:]}")
    ends = [r for r in records if r["at"] == "end"]
    assert len(ends) == 2 * len(seeds)
    internal = [r for r in ends if r["outcome"] not in ("ok", "SimrunError", "IndexError")]
    assert not internal, internal[:3]
    assert sum(r["outcome"] == "ok" for r in ends) >= len(ends) // 2  # mostly valid kernels


def long_literal_numpy(spec: list, x: np.ndarray) -> tuple[float, np.ndarray, float]:
    """Value, gradient and the sum of |terms| (for the rounding bound) of a
    long_literal_source kernel, in NumPy."""
    shape, terms = spec[0], spec[1:]
    values, grads = [], []
    for kind, c, j, k in terms:
        g = np.zeros_like(x)
        if kind == "lin":
            values.append(c * x[j])
            g[j] += c
        elif kind == "prod":
            values.append(c * x[j] * x[k])
            g[j] += c * x[k]
            g[k] += c * x[j]
        else:
            values.append(np.sin(x[j]) * c)
            g[j] += c * np.cos(x[j])
        grads.append(g)
    values, grads = np.array(values), np.array(grads)
    if shape == "vector_dot":
        return float(values @ values), 2 * values @ grads, float(values @ values)
    return float(values.sum()), grads.sum(axis=0), float(np.abs(values).sum())


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_long_literals_and_sums_match_numpy(ti, tmp_path_factory, seed: int) -> None:
    """Issue 29's "long literals": sums of up to 1,000 terms and vector literals of up to
    500 entries compile (no RecursionError, no LLVM abort: see compiler.py's `slp`) and
    give NumPy's value and gradient."""
    source, spec = long_literal_source(seed)
    module, _ = load(tmp_path_factory.getbasetemp(), source)
    x = np.random.default_rng(seed).uniform(-1, 1, module.x.shape[0])
    module.x.from_numpy(x)
    with ti.ad.Tape(loss=module.out):
        module.k()
    value, grad, scale = long_literal_numpy(spec, x)
    n = len(spec) - 1
    # summed in another order than NumPy's: n eps of the sum of |terms| (plus sin's ulps)
    assert abs(module.out[None] - value) <= 4 * n * 2.3e-16 * max(scale, 1.0)
    np.testing.assert_allclose(module.x.grad.to_numpy(), grad, rtol=0,
                               atol=4 * n * 2.3e-16 * max(np.abs(grad).max(), 1.0) * 4)


LONG_RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from kernel_gen import long_literal_source
import simrun.lang as ti

ti.init(arch=ti.cpu, cpu_max_num_threads=1)
source, spec = long_literal_source(0, longest=(1500, 600))
path = sys.argv[2] + "/long_literal.py"
open(path, "w").write(source)
scope = {"__name__": "long_literal"}
exec(compile(source, path, "exec"), scope)
x = np.random.default_rng(0).uniform(-1, 1, scope["x"].shape[0])
scope["x"].from_numpy(x)
scope["k"]()
print(json.dumps({"x": x.tolist(), "value": scope["out"][None]}))
"""


def test_long_vector_literal_dotted_does_not_abort_llvm(tmp_path: Path) -> None:
    """Seed 0 of the first version of this fuzz kind: a vector literal dotted with itself, which LLVM's SLP vectorizer
    made a 256-lane reduction that aborted X86 instruction selection (a signal, in a child
    process so that it fails this test alone)."""
    done = subprocess.run([sys.executable, "-c", LONG_RUNNER, str(TESTS), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-1500:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    source, spec = long_literal_source(0, longest=(1500, 600))
    assert spec[0] == "vector_dot" and "w.dot(w)" in source
    value, _, scale = long_literal_numpy(spec, np.array(result["x"]))
    assert abs(result["value"] - value) <= 4 * (len(spec) - 1) * 2.3e-16 * scale
