"""Several energy terms of ONE kernel with different params (anchor springs over particles
first..first+count-1, split into 2 or 20 terms) are the same physics as one term over all
particles. Their launches share one compiled variant, whose scalar arguments (first, count)
must still be each launch's own in the chained step (lang/runtime/chain.py): a step once ran
every launch with the last term's, the springs went slack and nothing but the drift warning
said so. Checked: trajectories bit for bit against one term (each particle's force comes
from one term alone, so its bits are the one term's), NVE energy conservation, and the
adjoint's gradient against one term and central differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.jobs import grad as job
from simrun.keys import parse_key, value_of, with_value
from simrun.scene import load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
N = 40
INTEGRATORS = {"velocity_verlet": "{type: velocity_verlet}",
               "symplectic_euler": "{type: symplectic_euler}",
               "langevin": "{type: langevin, temperature: 0.5, friction: 1.0}"}


def _scene(tmp_path: Path, terms: int, integrator: str, steps: int = 60,
           extra: str = "", objective: str = ""):
    """N 3-D particles pinned by `terms` anchor terms of equal size, plus `extra` terms."""
    size = N // terms
    lines = "\n".join(f"  - {{kernel: {REPO}/kernels/external.py:anchor, params: "
                      f"{{k: 2.0, first: {i * size}, count: {size}}}}}" for i in range(terms))
    path = tmp_path / f"s{terms}.yaml"
    path.write_text(f"""version: 2
precision: f64
seed: 1
particles: {{count: {N}, dim: 3}}
initial: {{type: random, low: [0, 0, 0], high: [10, 10, 10], velocity: 1.0}}
energy:
{lines}
{extra}
integrator: {integrator}
dt: 0.05
steps: {steps}
outputs: {{every: {steps}, xyz: false}}
{objective}
""")
    return load_scene(path, allow_outside=True)


def _run(scene, out: Path) -> tuple[dict, np.ndarray]:
    run_scene(scene, out, threads=1)
    with np.load(out / "state.npz") as end:
        state = {k: end[k] for k in ("x", "v")}
    return state, np.loadtxt(out / "energy.csv", delimiter=",", skiprows=1, ndmin=2)


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_split_terms_of_one_kernel_are_one_term_bit_for_bit(tmp_path, integrator):
    """2 and 20 terms: the final x and v are one term's to the bit; U sums the same terms in
    another order (rtol 1e-13 ~ N roundings)."""
    one, e_one = _run(_scene(tmp_path, 1, INTEGRATORS[integrator]), tmp_path / "one")
    for terms in (2, 20):
        split, e_split = _run(_scene(tmp_path, terms, INTEGRATORS[integrator]),
                              tmp_path / f"split{terms}")
        np.testing.assert_array_equal(split["x"], one["x"], err_msg=f"{terms} terms")
        np.testing.assert_array_equal(split["v"], one["v"], err_msg=f"{terms} terms")
        np.testing.assert_allclose(e_split[:, 2:], e_one[:, 2:], rtol=1e-13)


def test_split_terms_conserve_energy_in_nve(tmp_path):
    """Velocity Verlet on harmonic pins (omega = sqrt(2), omega dt = 0.07): the total energy
    wanders by ~(omega dt)^2 / 8 ~ 6e-4 of itself; slack springs gain |v t|^2 (x 100)."""
    _, energy = _run(_scene(tmp_path, 20, INTEGRATORS["velocity_verlet"], steps=300),
                     tmp_path / "nve")
    total = energy[:, 4]
    assert np.max(np.abs(total - total[0])) < 2e-3 * total[0]
    kinetic0 = 0.5 * N * 3 * 1.0**2  # velocity 1.0 per component, unit masses
    assert energy[0, 2] == pytest.approx(kinetic0, rel=1e-12) and energy[0, 3] == 0.0


GRAVITY = f"  - {{kernel: {REPO}/kernels/external.py:uniform_gravity, params: {{g: 0.4}}}}"
KEYS = ["dt", "particles.mass", "energy.{last}.params.g"]


def test_gradient_of_split_terms_is_one_terms_and_central_differences(tmp_path):
    """dJ/dKEY (J: the mean kinetic energy) with 20 anchor terms sharing one variant, on the
    native chains (their launches are the shared ones; the terms stay untwinned: no anchor
    param is differentiated): equal to one term's to rounding (rtol 1e-11: 20 steps of
    sums reordered), and to (J(p + e) - J(p - e)) / 2e (f64, e = 1e-6: truncation e^2 J'''
    and rounding 1e-16 J / e below rtol 1e-6)."""
    common = dict(integrator=INTEGRATORS["velocity_verlet"], steps=20, extra=GRAVITY,
                  objective="objective: {builtin: kinetic, at: mean}")
    one = _scene(tmp_path, 1, **common)
    split = _scene(tmp_path, 20, **common)
    g_one = job.scene_gradient(one, [k.format(last=1) for k in KEYS], threads=1)
    keys = [k.format(last=20) for k in KEYS]
    g_split = job.scene_gradient(split, keys, threads=1)
    assert g_split.objective == pytest.approx(g_one.objective, rel=1e-13)
    eps = 1e-6
    for text, text_one in zip(keys, (k.format(last=1) for k in KEYS)):
        grad = float(np.sum(g_split.gradients[text]))
        assert grad == pytest.approx(float(np.sum(g_one.gradients[text_one])), rel=1e-11)
        key = parse_key(split, text)
        base = value_of(split, key)
        up = job.objective_value(with_value(split, key, base + eps), split.steps, 1)
        down = job.objective_value(with_value(split, key, base - eps), split.steps, 1)
        assert grad == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8), text
        assert abs(grad) > 1e-4, text  # the key matters: the comparison can fail
