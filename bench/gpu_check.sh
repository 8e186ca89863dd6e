#!/usr/bin/env bash
# The GPU check of issues 33 and 48, in one command: bench/gpu_check.sh OUTDIR
#
# On the machine's first NVIDIA GPU, in this order (each part under its own time limit, so
# that the whole fits a few minutes of device time): a smoke kernel; the `gpu` tests
# (tests/test_gpu.py: every shipped scene's run and gradient against the CPU's); the
# engine's value-comparing tests with TI_ARCH=cuda (engine-on-gpu), then the rest of its
# autodiff and language tests (engine-more: read, not counted); the LJ melt benchmark
# (bench/gpu_lj.py: 32,000 and 10^6 atoms, against JAX MD where jax_md imports) and the
# launch profile of a 10^6-atom melt step (SIMRUN_CUDA_PROFILE); grad/run of 64 gravity
# bodies and diffmpm's optimize iterations on the GPU and this machine's CPU; then the
# 32,000-atom LJ rows and the gravity job again with the experiment SIMRUN_CUDA_ASYNC=1.
# The LJ rows (issue 48) time both modes, the default reproducible one (fixed-point sums on
# the whole grid) and --no-reproducible, compare two reproducible runs' bits, and end
# summary.txt with a table against the issue's targets. The parts' time limits add up to
# under 600 s (one device call); `bench/gpu_check.sh --dry-run` lists them and runs
# nothing. OUTDIR gets at most 8 files (a device tool's limit): summary.txt, one log per
# part, lj.json.
#
# The CPU-side checks (part cpu-checks: ptxas assembles the PTX of every kernel the tests
# and shipped scenes compile, tests/test_cuda_ptx.py; the driver code on an emulated
# device, tests/test_cuda_emulated.py) run where no GPU is found, and on a GPU machine
# only with GPU_CHECK_PTX=1 (device time is short); GPU_CHECK_PTX=0 skips them anywhere.
# No network: Python packages the machine lacks (jax-md and the packages it imports, or
# another llvmlite) are installed with pip --no-index --no-deps --target from the wheels in
# $SIMRUN_WHEELS (default: .whl in the checkout, else ../wheels beside it) into a scratch
# folder put first on PYTHONPATH; a libdevice.10.bc under $SIMRUN_WHEELS/cuda/nvvm is used
# where simrun finds none (CUDA_HOME). Without a usable GPU it says why in
# OUTDIR/summary.txt, runs the CPU-side checks and exits with their status.
set -uo pipefail
DRY=0  # --dry-run: the parts, their time limits and the LJ rows, nothing run
if [ "${1:-}" = --dry-run ]; then DRY=1; set -- "$(mktemp -d)"; fi
OUT=${1:?usage: bench/gpu_check.sh OUTDIR | --dry-run}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
WHEELS=${SIMRUN_WHEELS:-$ROOT/.whl}
[ -d "$WHEELS" ] || WHEELS=$ROOT/../wheels
WORK=$(mktemp -d)  # installed wheels, the kernel cache, the smaller logs: scratch
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg PIP_NO_INDEX=1
export SIMRUN_CACHE_DIR=${SIMRUN_CACHE_DIR:-$WORK/cache} PYTHONUNBUFFERED=1
cd "$ROOT"

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
say "gpu_check $(date -u +%FT%TZ) git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# every wheel there but JAX's own (the machine's JAX has CUDA; a downloaded jaxlib may not)
wheels=$(ls "$WHEELS"/*.whl 2> /dev/null | grep -Ev '/(jax|jaxlib|jax_cuda[0-9]*_[a-z]+)-[0-9]')
if [ -n "$wheels" ] && [ "$DRY" = 0 ]; then
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" $wheels \
        > "$WORK/wheels.log" 2>&1 || say "some wheels did not install: $(tail -1 "$WORK/wheels.log")"
    export PYTHONPATH=$ROOT:$WORK/site${PYTHONPATH#"$ROOT"}
fi
if [ -z "$("$PY" -c 'from simrun.lang.codegen.cuda.target import libdevice_path
print(libdevice_path() or "")' 2> /dev/null)" ] && [ -d "$WHEELS/cuda/nvvm" ]; then
    export CUDA_HOME=$WHEELS/cuda
fi
say "python: $("$PY" -c 'import sys, llvmlite, numpy
from simrun.lang.codegen.cuda.target import libdevice_path
print(sys.version.split()[0], "llvmlite", llvmlite.__version__, "numpy", numpy.__version__,
      "libdevice", libdevice_path())' 2>&1 | tail -1)"
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -rfE --tb=short)
if "$PY" -c 'import xdist' 2> /dev/null && [ "$(nproc)" -ge 8 ]; then
    PYTEST+=(-n 8)  # the tests compile kernels on the CPU: spread them over its cores
fi
if "$PY" -c 'import pytest_timeout' 2> /dev/null; then
    PYTEST+=(--timeout 60)  # a test that hangs the device fails alone
fi

if ! why=$("$PY" -c 'from simrun.lang.runtime.cuda import device_status
print(device_status() or "")' 2> "$WORK/import.log"); then
    say "ERROR: simrun does not import with $PY: $(tail -1 "$WORK/import.log")"
    exit 1
fi
LIMITS=0  # the parts' time limits, summed (the whole must fit one device call: 600 s)
part() {  # part NAME SECONDS COMMAND...: run with a time limit, log, record the exit status
    local name=$1 limit=$2; shift 2
    LIMITS=$((LIMITS + limit))
    if [ "$DRY" = 1 ]; then
        say "$name: up to ${limit}s: $*"
        return 0
    fi
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    say "$name: exit $rc ($(tail -1 "$OUT/$name.log"))"
    return $rc
}
cpu_checks() {  # no GPU needed: ptxas (nvidia-cuda-nvcc) and libdevice (nvidia-nvvm)
    part cpu-checks "$1" "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_ptx.py \
        tests/test_cuda_emulated.py
}

if [ "$DRY" = 1 ]; then
    why=""
fi
if [ -n "$why" ]; then
    say "SKIPPED: no usable GPU: $why"
    if [ "${GPU_CHECK_PTX:-1}" = 0 ]; then
        exit 0
    fi
    cpu_checks 900
    exit $?
fi
say "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi not found')"

cat > "$WORK/smoke.py" <<'PY'  # a kernel's source must be in a file
import math

import numpy as np

import simrun.lang as ti

ti.init(arch=ti.cuda, default_fp=ti.f64)
assert ti.api.config.arch == "cuda", "fell back to the CPU"
x = ti.field(ti.f64, 1000, needs_grad=True)
s = ti.field(ti.f64, (), needs_grad=True)


@ti.kernel
def f():
    for i in x:
        s[None] += ti.sin(x[i]) * x[i]


x.from_numpy(np.linspace(0, 1, 1000))
with ti.ad.Tape(loss=s):
    f()
assert abs(x.grad[999] - (math.cos(1) + math.sin(1))) < 1e-12, x.grad[999]
print("smoke ok: sum", s[None])
PY
if [ "$DRY" = 1 ]; then  # its log stays in scratch: OUTDIR holds 8 files at most
    say "smoke: up to 40s: $PY $WORK/smoke.py"
else
    timeout 40 "$PY" "$WORK/smoke.py" > "$WORK/smoke.log" 2>&1
    say "smoke: exit $? ($(tail -1 "$WORK/smoke.log"))"
fi
LIMITS=$((LIMITS + 40))
part gpu-tests 100 "${PYTEST[@]}" -m gpu tests/test_gpu.py
TI_ARCH=cuda part engine-on-gpu 70 "${PYTEST[@]}" \
    tests/test_autodiff_ops.py tests/test_lang_fields.py tests/test_lang_math_semantics.py \
    tests/test_lang_parallel.py tests/test_lang_expressions.py tests/test_autodiff_matrix.py
# the rest of the engine's autodiff and language tests, on the device (not all of them
# compare values a GPU computes: their failures are read, not counted as the check's)
TI_ARCH=cuda part engine-more 40 "${PYTEST[@]}" \
    $(ls tests/test_autodiff_*.py tests/test_lang_*.py tests/test_neighbor_build.py | grep -Ev \
      'autodiff_(ops|matrix)|lang_(fields|math_semantics|parallel|expressions)\.py')
# both modes at both sizes (the default, reproducible: fixed-point sums on the whole grid),
# two reproducible runs' bits compared, JAX MD beside them; the table goes to summary.txt
part lj-bench 180 bash -c "$PY bench/gpu_lj.py --out $OUT/lj.json --repeats ${REPEATS:-1} \
    && $PY bench/gpu_lj.py --profile 63"
# jobs on the GPU and on this machine's CPU: grad/run of 64 gravity bodies
# (bench/grad_cost.py) and DiffTaichi's diffmpm optimize iterations (loss.csv's wall_s)
export PY WORK GRAD_STEPS=${GRAD_STEPS:-8000}
cat > "$WORK/jobs.sh" <<'SH'
for device in cuda cpu; do
    "$PY" bench/grad_cost.py --steps "$GRAD_STEPS" --device "$device"
done
for mode in cuda:--reproducible cuda:--no-reproducible cpu:--reproducible; do
    device=${mode%%:*} flag=${mode#*:}
    "$PY" -m simrun.cli optimize scenes/diffmpm.yaml --iterations 3 --no-render -q \
        --device "$device" "$flag" --out "$WORK/diffmpm-$device$flag" > /dev/null \
        && echo "diffmpm $device $flag: $(tr '\n' ' ' < "$WORK/diffmpm-$device$flag/loss.csv")"
done
SH
part jobs-bench 90 bash "$WORK/jobs.sh"
[ "$DRY" = 1 ] || say "$(grep -Ev '^\s*$' "$OUT/jobs-bench.log" | tail -n 12)"
# the experiment SIMRUN_CUDA_ASYNC=1 (runtime/cuda.py: launches that do not wait): the
# 32,000-atom LJ rows and the gravity job on the GPU again with it (the gpu tests with it
# too: ASYNC_TESTS=1, beyond the 600 s of one device call)
SIMRUN_CUDA_ASYNC=1 part async 60 bash -c "${ASYNC_TESTS:+${PYTEST[*]} -m gpu tests/test_gpu.py;} \
    $PY bench/gpu_lj.py --out $WORK/lj-async.json --skip-jax --sizes 20 \
    && $PY bench/grad_cost.py --steps $GRAD_STEPS --device cuda"
if [ -f "$OUT/lj.json" ]; then  # issue 48's LJ targets, to compare with the issue
    say "$("$PY" bench/gpu_lj.py --table "$OUT/lj.json")"
fi
if [ "$DRY" = 1 ]; then
    say "lj-bench rows:"
    say "$("$PY" bench/gpu_lj.py --dry-run)"
    say "time limits: ${LIMITS}s in all"
    rm -rf "$WORK" "$OUT"
    exit 0
fi
if [ "${GPU_CHECK_PTX:-0}" = 1 ]; then  # CI does this without a GPU; here on request
    cpu_checks 300
fi
say "done: $OUT"
rm -rf "$WORK"
