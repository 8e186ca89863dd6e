#!/usr/bin/env bash
# The GPU check of issue 33, in one command: bench/gpu_check.sh OUTDIR
#
# Runs, on the machine's first NVIDIA GPU: the `gpu` tests (tests/test_gpu.py), the engine's
# value-comparing tests with TI_ARCH=cuda, and the LJ melt benchmark (bench/gpu_lj.py: 32,000
# and 10^6 atoms, against JAX MD where jax_md imports); with GPU_CHECK_PTX=1 also the ptxas
# checks. Everything it finds goes to OUTDIR:
# summary.txt, one log per part, lj.json.
# No network: Python packages the machine lacks (nvidia-nvvm for libdevice, jax-md, ...)
# are installed from wheels in $SIMRUN_WHEELS (default: ../wheels beside the checkout), with
# pip --no-index into OUTDIR/venv (system site packages visible). Without a usable GPU it
# writes OUTDIR/summary.txt saying why and exits 0: nothing to check here.
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
if [ -n "$why" ]; then
    say "SKIPPED: no usable GPU: $why"
    exit 0
fi
say "device: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'nvidia-smi not found')"

part() {  # part NAME SECONDS COMMAND...: run with a time limit, log, record the exit status
    local name=$1 limit=$2; shift 2
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    say "$name: exit $rc ($(tail -1 "$OUT/$name.log"))"
}

# limits add up to 11 minutes, inside a 15-minute device budget with the machine's start
part gpu-tests 180 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py \
    --junitxml "$OUT/gpu-tests.xml"
TI_ARCH=cuda part engine-on-gpu 180 "$PY" -m pytest -q -p no:cacheprovider \
    tests/test_autodiff_ops.py tests/test_lang_fields.py tests/test_lang_math_semantics.py \
    tests/test_lang_parallel.py tests/test_lang_expressions.py tests/test_autodiff_matrix.py \
    --junitxml "$OUT/engine-on-gpu.xml"
if [ -n "${GPU_CHECK_PTX:-}" ]; then  # CI does this without a GPU; here on request
    part ptx 300 "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda_ptx.py
fi
part lj-bench 300 "$PY" bench/gpu_lj.py --out "$OUT/lj.json" --repeats "${REPEATS:-1}"
say "done: $OUT"
