"""scenes/fit_spring.yaml end to end: fit the bond stiffness and rest length, then their
statistical errors from the curvature of the loss at the optimum.

For L = 1/2 sum r_i^2 with Gaussian noise of standard deviation sigma on each of the N
observed coordinates, the estimate's covariance is sigma^2 H^-1 (H the Hessian of L at the
optimum, here central differences of the exact gradient), and sigma is estimated from the
residual: sigma^2 = 2 L_min / (N - p). Prints truth, fit, error and the distance in errors.

    python bench/fit_spring.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "kernels"))

import fit_spring  # noqa: E402  (the generator's truth and noise level)

from simrun.jobs.grad import field_start_values, scene_gradient  # noqa: E402
from simrun.jobs.optimize import optimize_scene  # noqa: E402
from simrun.optimize.params import Layout  # noqa: E402
from simrun.scene import load_scene  # noqa: E402


def hessian(layout: Layout, p: np.ndarray, rel: float = 1e-4) -> np.ndarray:
    keys = [k.text for k in layout.keys]
    cols = []
    for i in range(len(p)):
        h = rel * max(abs(p[i]), 1e-3)
        grads = []
        for sign in (1, -1):
            q = p.copy()
            q[i] += sign * h
            scene, start = layout.scene_at(q)
            grads.append(layout.pack(scene_gradient(scene, keys, start=start).gradients))
        cols.append((grads[0] - grads[1]) / (2 * h))
    H = np.array(cols).T
    return (H + H.T) / 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    scene = load_scene(REPO / "scenes" / "fit_spring.yaml")
    out = args.out or Path(tempfile.mkdtemp(prefix="fit_spring-"))
    result = optimize_scene(scene, out)
    layout = Layout.of(scene, field_start_values)
    p = layout.pack(result.best)
    n_obs = scene.particles.count * scene.particles.dim
    sigma2 = 2 * result.best_loss / (n_obs - len(p))
    cov = sigma2 * np.linalg.inv(hessian(layout, p))
    print(f"{result.status} after {result.iterations} iterations ({result.seconds:.1f} s), "
          f"loss {result.best_loss:.6g}; noise sigma estimated {np.sqrt(sigma2):.4g} "
          f"(true {fit_spring.SIGMA})")
    print(f"{'parameter':24s} {'truth':>8s} {'fit':>10s} {'error':>8s} {'(fit-truth)/error':>18s}")
    for i, key in enumerate(layout.keys):
        truth = fit_spring.TRUE[key.name]
        err = float(np.sqrt(cov[i, i]))
        print(f"{key.text:24s} {truth:8.4g} {p[i]:10.6g} {err:8.2g} {(p[i] - truth) / err:18.2f}")
    print(f"correlation {cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]):.3f}; outputs in {out}")


if __name__ == "__main__":
    main()
