"""An inverse problem for `simrun optimize`: noisy observations of where bonded particles are
after a time ``t_obs``, to fit a bond's stiffness and rest length (scenes/fit_spring.yaml).

The observations are made here, in ``allocate``: from the scene's own start (its positions,
masses and bonds), harmonic bonds with the TRUE parameters below are integrated by velocity
Verlet with a time step REFERENCE_STEPS times smaller than any scene would use (plain NumPy,
not the kernel that is fitted), and Gaussian noise of standard deviation SIGMA (fixed seed)
is added to every coordinate. The fit therefore never sees the truth, and is not the
generator run backwards: the scene's coarser time step is a (small) model error of its own.
"""

import numpy as np

import simrun.lang as ti

TRUE = {"k": 50.0, "r0": 1.0}
SIGMA = 0.01
SEED = 2026
REFERENCE_STEPS = 20000  # per unit time: dt = 5e-5
DEFAULTS = {"misfit": {"t_obs": 0.8}}
_CACHE: dict = {}


def reference(x0: np.ndarray, masses: np.ndarray, bonds: np.ndarray, t_obs: float,
              k: float = TRUE["k"], r0: float = TRUE["r0"]) -> np.ndarray:
    """Positions at t_obs from rest at x0 under harmonic bonds, fine velocity Verlet."""
    n = max(1, int(round(REFERENCE_STEPS * t_obs)))
    h, x, v = t_obs / n, x0.astype(float).copy(), np.zeros_like(x0, dtype=float)
    m = masses.astype(float)[:, None]

    def accel(x):
        d = x[bonds[:, 1]] - x[bonds[:, 0]]
        r = np.linalg.norm(d, axis=1, keepdims=True)
        f = k * (r - r0) * d / r  # force on particle a, pulling it towards b when stretched
        a = np.zeros_like(x)
        np.add.at(a, bonds[:, 0], f)
        np.add.at(a, bonds[:, 1], -f)
        return a / m

    a = accel(x)
    for _ in range(n):
        v += 0.5 * h * a
        x += h * v
        a = accel(x)
        v += 0.5 * h * a
    return x


def observations(x0, masses, bonds, t_obs: float) -> np.ndarray:
    key = (x0.tobytes(), masses.tobytes(), bonds.tobytes(), t_obs)
    if key not in _CACHE:
        rng = np.random.default_rng(SEED)
        exact = reference(x0, masses, bonds, t_obs)
        _CACHE[key] = exact + rng.normal(scale=SIGMA, size=exact.shape)
    return _CACHE[key]


def allocate(ctx) -> dict:
    bonds = ctx.topology.get("bonds")
    if bonds is None:
        raise ValueError("fit_spring needs 'topology: {bonds: ...}'")
    t_obs = float(ctx.params.get("t_obs", DEFAULTS["misfit"]["t_obs"]))
    obs = observations(np.asarray(ctx.x0, float), np.asarray(ctx.masses, float),
                       np.asarray(bonds), t_obs)
    field = ti.Vector.field(ctx.dim, dtype=ctx.dtype, shape=ctx.n)
    field.from_numpy(obs.astype(ctx.np_dtype))
    return {"observed": field}


@ti.kernel
def misfit(x: ti.template(), observed: ti.template(), L: ti.template(), t_obs: float):
    """L += |x_p - observed_p|^2 / 2 (t_obs only says when the observations were made)."""
    for p in x:
        L[None] += 0.5 * (x[p] - observed[p]).norm_sqr()
