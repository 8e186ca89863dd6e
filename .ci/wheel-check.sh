#!/usr/bin/env bash
# simrun as a user installs it: builds the sdist and, from it, the wheel (python -m build),
# checks what the wheel holds (every file of simrun/scenes and simrun/kernels, no pictures
# but the scenes' own tracked images),
# installs the wheel into a fresh virtual environment outside the checkout, and from an empty
# folder runs shipped scenes by name (run, grad --check, an ensemble gradient, examples) and
# a user's own scene that names a shipped kernel by its stable name. Any failure fails CI.
# Usage: bash .ci/wheel-check.sh [PYTHON]   (PYTHON must have the 'build' package)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python}"
work="$(mktemp -d "${TMPDIR:-/tmp}/simrun-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
case "$work" in "$repo"/*) echo "wheel-check: $work lies inside the checkout" >&2; exit 1;; esac
step() { echo "wheel-check [${SECONDS} s]: $*" >&2; }

step "building the sdist and the wheel"
"$python" -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || {
    tail -30 "$work/build.log" >&2; exit 1; }
wheel=("$work"/dist/simrun-*.whl)
sdist=("$work"/dist/simrun-*.tar.gz)
[ -f "${wheel[0]}" ] && [ -f "${sdist[0]}" ]
step "wheel $(basename "${wheel[0]}"): $(du -k "${wheel[0]}" | cut -f1) KiB; sdist $(du -k "${sdist[0]}" | cut -f1) KiB"

step "checking the wheel's files against the checkout"
(cd "$repo" && git ls-files -- simrun/scenes simrun/kernels 2>/dev/null || \
    find simrun/scenes simrun/kernels -type f ! -path '*__pycache__*') >"$work/shipped.txt"
"$python" - "${wheel[0]}" "$work/shipped.txt" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
shipped = [line.strip() for line in open(sys.argv[2]) if line.strip()]
missing = [f for f in shipped if f not in names]
pictures = [n for n in names if n.lower().endswith((".png", ".gif", ".jpg", ".svg"))
            and n not in shipped]  # a tracked scene input (a target image) is shipped
outside = [n for n in names if not n.startswith(("simrun/", "simrun-"))]
assert len(shipped) > 20, shipped
assert not missing, f"the wheel lacks {missing}: add a package-data glob in pyproject.toml"
assert not pictures and not outside, (pictures, outside)
PY

step "installing the wheel into a fresh venv"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${wheel[0]}"

empty="$work/empty"
mkdir "$empty"
cd "$empty"
export PATH="$work/venv/bin:$PATH" SIMRUN_CACHE_DIR="$work/cache" MPLBACKEND=Agg
unset PYTHONPATH VIRTUAL_ENV PYTHONHOME
where="$(python -c 'import simrun; print(simrun.__file__)')"
case "$where" in "$work/venv/"*) ;; *) echo "wheel-check: simrun imported from $where" >&2; exit 1;; esac

step "simrun --version / --help"
simrun --version
simrun --help | tr -s ' \n' ' ' | grep -q "gravity, gravity_1024"

step "simrun run gravity (2000 steps)"
simrun run gravity --steps 2000 -q
grep -q '"status": "ok"' outputs/gravity/run-001/run.json
[ -f outputs/gravity/run-001/energy.png ]

step "simrun grad projectile --check"
simrun grad projectile --wrt initial.velocity --check --out grad-projectile

step "simrun grad lj_nvt --method ensemble (2000 steps)"
simrun grad lj_nvt --method ensemble --wrt energy.0.params.epsilon --set steps=2000 \
    --out grad-lj_nvt

step "a user's scene naming simrun.kernels.lj:wca"
mkdir mine
cat >mine/wca.yaml <<'YAML'
version: 2
name: wca_box
particles: {count: 32, dim: 3}
initial: {type: lattice, basis: fcc, shape: [2, 2, 2], spacing: [1.7, 1.7, 1.7], temperature: 1.0}
boundary: {type: periodic, low: [0, 0, 0], high: [3.4, 3.4, 3.4]}
neighbors: {cutoff: 1.2, skin: 0.3}
energy:
  - kernel: simrun.kernels.lj:wca
    params: {epsilon: 1.0, sigma: 1.0}
integrator: velocity_verlet
dt: 0.002
steps: 500
YAML
simrun run mine/wca.yaml --out wca -q --no-render
grep -q '"library": "simrun.kernels.lj"' wca/run.json
simrun resume wca --steps 600 -q

step "simrun examples"
simrun examples ex
(cd ex && simrun check scenes/fit_lj.yaml >/dev/null)
step "ok"
