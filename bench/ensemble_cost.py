"""The cost of ensemble gradients (scenes/lj_nvt.yaml, d<U>/d{epsilon, sigma, T}) against
central differences of the same precision and against the trajectory's own derivative.

1. One run of STEPS gives all three derivatives with errors (`--method ensemble`).
2. Central differences: two runs of STEPS per KEY at theta +- h give each derivative with an
   error; the error falls as 1/sqrt(length), so the same precision as (1) needs
   2 STEPS (fd_error / ensemble_error)^2 steps per KEY.
3. The trajectory derivative (forward mode, the same fluid NVE) of the running average over
   the same horizon: bench/ensemble_horizon.png shows it against the ensemble value.

    python bench/ensemble_cost.py            # ~3 minutes on 2 cores
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from simrun.ensemble.keys import parse_ensemble_key
from simrun.jobs.ensemble import estimate_from, sample, sampling_scene
from simrun.jobs.grad import forward_gradient
from simrun.keys import value_of, with_value
from simrun.scene import load_scene

ROOT = Path(__file__).resolve().parent.parent
STEPS, EVERY = 10000, 5
KEYS = {"energy.0.params.epsilon": 0.05, "energy.0.params.sigma": 0.02,
        "integrator.temperature": 0.05}


def _one(a) -> float:
    return float(np.asarray(a).reshape(-1)[0])


def averages(scene, folder: Path, keys: list[str]):
    frames = sample(sampling_scene(scene, STEPS, EVERY), folder, STEPS // 5)
    return estimate_from(scene, [parse_ensemble_key(scene, k) for k in keys], frames)


def main() -> None:
    scene = load_scene(ROOT / "scenes" / "lj_nvt.yaml", ["objective.builtin=potential"])
    tmp = Path(tempfile.mkdtemp())
    t0 = time.perf_counter()
    ens = averages(scene, tmp / "base", list(KEYS))
    ens_s = time.perf_counter() - t0
    print(f"ensemble: one run of {STEPS} steps, {ens_s:.1f} s (sampling + evaluation)")
    print(f"{'KEY':26s} {'ensemble':>18s} {'central diff.':>18s} {'FD steps, same error':>22s}")
    fd_steps = 0.0
    for key, h in KEYS.items():
        parsed = parse_ensemble_key(scene, key)
        value = value_of(scene, parsed)
        plus = averages(with_value(scene, parsed, value * (1 + h)), tmp / "p", [])
        minus = averages(with_value(scene, parsed, value * (1 - h)), tmp / "m", [])
        fd = (_one(plus.values["objective"]) - _one(minus.values["objective"])) / (2 * h * value)
        fd_err = float(np.hypot(_one(plus.errors["objective"]),
                                _one(minus.errors["objective"]))) / (2 * h * value)
        needed = 2 * STEPS * (fd_err / _one(ens.errors[key])) ** 2
        fd_steps += needed
        print(f"{key:26s} {_one(ens.values[key]):9.1f} +- {_one(ens.errors[key]):5.1f} "
              f"{fd:9.1f} +- {fd_err:5.1f} {needed:22.0f}")
    print(f"central differences need {fd_steps:.0f} steps for the three, the ensemble "
          f"{STEPS} ({fd_steps / STEPS:.1f}x)")
    horizon(scene, _one(ens.values["energy.0.params.epsilon"]),
            _one(ens.errors["energy.0.params.epsilon"]))


def horizon(scene, value: float, error: float) -> None:
    """|dJ/d epsilon| of the trajectory (NVE) against the horizon, and the ensemble's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nve = replace(load_scene(ROOT / "scenes" / "lj_nvt.yaml",
                             ["integrator=velocity_verlet", "outputs.every=50",
                              "objective={builtin: potential, at: mean}"]), steps=3000)
    t0 = time.perf_counter()
    result = forward_gradient(nve, ["energy.0.params.epsilon"])
    print(f"trajectory (forward mode) over 3000 steps: {time.perf_counter() - t0:.1f} s")
    rows = result.horizon["energy.0.params.epsilon"]
    t = np.array([r[0] for r in rows]) * nve.dt
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.semilogy(t, np.abs([r[2] for r in rows]), label="--method trajectory (NVE, forward)")
    ax.axhspan(abs(value) - 3 * error, abs(value) + 3 * error, color="C1", alpha=0.4,
               label=f"--method ensemble: |d<U>/d eps| = {abs(value):.0f} +- {3 * error:.0f} (3 se)")
    ax.set(xlabel="horizon t", ylabel="|dJ/d epsilon|", title="lj_nvt.yaml: d<U>/d epsilon")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(ROOT / "bench" / "ensemble_horizon.png", dpi=110)
    print("wrote bench/ensemble_horizon.png")


if __name__ == "__main__":
    main()
