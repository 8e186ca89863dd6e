#!/usr/bin/env bash
# The GPU check of issue 33, in one command: bench/gpu_check.sh OUTDIR
#
# Runs, on the machine's first NVIDIA GPU: the `gpu` tests (tests/test_gpu.py), the engine's
# value-comparing tests with TI_ARCH=cuda, and the LJ melt benchmark (bench/gpu_lj.py: 32,000
# and 10^6 atoms, against JAX MD where jax_md imports). Everything it finds goes to OUTDIR:
# summary.txt, one log per part, lj.json.
# The CPU-side checks (part cpu-checks: ptxas assembles the PTX of every kernel the tests
# and shipped scenes compile, tests/test_cuda_ptx.py; the driver code on an emulated
# device, tests/test_cuda_emulated.py) run where no GPU is found, and on a GPU machine
# only with GPU_CHECK_PTX=1 (device time is short); GPU_CHECK_PTX=0 skips them anywhere.
# No network: Python packages the machine lacks (nvidia-nvvm for libdevice, jax-md, ...)
# are installed from wheels in $SIMRUN_WHEELS (default: ../wheels beside the checkout), with
# pip --no-index into OUTDIR/venv (system site packages visible). Without a usable GPU it
# says why in OUTDIR/summary.txt, runs the CPU-side checks and exits with their status.
set -uo pipefail
OUT=${1:?usage: bench/gpu_check.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
WHEELS=${SIMRUN_WHEELS:-$ROOT/../wheels}
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg PIP_NO_INDEX=1
export SIMRUN_CACHE_DIR=${SIMRUN_CACHE_DIR:-$OUT/cache}
cd "$ROOT"

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
say "gpu_check $(date -u +%FT%TZ) git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# every wheel there but JAX's own (the machine's JAX has CUDA; a downloaded jaxlib may not)
wheels=$(ls "$WHEELS"/*.whl 2> /dev/null | grep -Ev '/(jax|jaxlib|jax_cuda[0-9]*_[a-z]+)-[0-9]')
if [ -n "$wheels" ]; then
    "$PY" -m venv --system-site-packages "$OUT/venv" && PY=$OUT/venv/bin/python
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" $wheels \
        > "$OUT/wheels.log" 2>&1 || say "some wheels did not install (see wheels.log)"
fi

if ! why=$("$PY" -c 'from simrun.lang.runtime.cuda import device_status
print(device_status() or "")' 2> "$OUT/import.log"); then
    say "ERROR: simrun does not import with $PY: $(tail -1 "$OUT/import.log")"
    exit 1
fi
part() {  # part NAME SECONDS COMMAND...: run with a time limit, log, record the exit status
    local name=$1 limit=$2; shift 2
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    say "$name: exit $rc ($(tail -1 "$OUT/$name.log"))"
    return $rc
}
cpu_checks() {  # no GPU needed: ptxas (nvidia-cuda-nvcc) and libdevice (nvidia-nvvm)
    part cpu-checks "$1" "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_ptx.py \
        tests/test_cuda_emulated.py --junitxml "$OUT/cpu-checks.xml"
}

if [ -n "$why" ]; then
    say "SKIPPED: no usable GPU: $why"
    if [ "${GPU_CHECK_PTX:-1}" = 0 ]; then
        exit 0
    fi
    cpu_checks 900
    exit $?
fi
say "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi not found')"

# limits add up to 11 minutes, inside a 15-minute device budget with the machine's start
part gpu-tests 180 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py \
    --junitxml "$OUT/gpu-tests.xml"
TI_ARCH=cuda part engine-on-gpu 180 "$PY" -m pytest -q -p no:cacheprovider \
    tests/test_autodiff_ops.py tests/test_lang_fields.py tests/test_lang_math_semantics.py \
    tests/test_lang_parallel.py tests/test_lang_expressions.py tests/test_autodiff_matrix.py \
    --junitxml "$OUT/engine-on-gpu.xml"
part lj-bench 300 "$PY" bench/gpu_lj.py --out "$OUT/lj.json" --repeats "${REPEATS:-1}"
if [ "${GPU_CHECK_PTX:-0}" = 1 ]; then  # CI does this without a GPU; here on request
    cpu_checks 300
fi
say "done: $OUT"
