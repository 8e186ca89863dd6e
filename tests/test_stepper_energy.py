"""EnergyTerms: which launches a scene's energy terms make, and one eligibility rule for all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.scene import initial_state, load_scene
from simrun.stepper.binding import BoundKernel
from simrun.stepper.energy import EnergyTerms, energy_and_reverse
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.system import System

SCENES = Path(__file__).resolve().parents[1] / "scenes"


def names(launches) -> list[str] | None:
    return None if launches is None else [compiled.kir.name for compiled, _ in launches]


# (scene, its energy kernels in order): value launches in order; gradients (each term's
# value and gradient in one launch, as the terms only add into U) in reverse order; H lambda
# lean (the tangents of the gradients alone) and full (U's tangent first)
GOLDEN = {
    "gravity": ["gravity"],
    "lj_nvt": ["lj_shifted"],
    "mass_spring": ["actuated_springs"],
    "kob_andersen": ["lj_species_shifted"],  # species: a (types x types) field per parameter
    "molecule": ["harmonic_bonds", "harmonic_angles", "cosine_dihedrals"],
}


@pytest.mark.parametrize("scene_name", list(GOLDEN))
def test_the_launches_of_each_shipped_scene(scene_name: str) -> None:
    scene = load_scene(SCENES / f"{scene_name}.yaml")
    system = System(scene, initial_state(scene)[0], threads=1)
    terms = system.energy_terms()
    kernels = GOLDEN[scene_name]
    back = kernels[::-1]
    assert terms.direct
    assert names(terms.value()) == kernels
    assert names(terms.value_and_gradient()) == [f"{k}_value_grad" for k in back]
    assert names(terms.gradient()) == [f"{k}_value_grad" for k in back]
    assert names(terms.hessian_vector(lean=True).launches(energy=False)) == \
        [f"{k}_grad_fwd" for k in back]
    assert names(terms.hessian_vector().launches()) == \
        [f"{k}_fwd" for k in kernels] + [f"{k}_grad_fwd" for k in back]
    # the stepper steps with exactly these launches
    assert FieldStepper(scene, system).forces == terms.value_and_gradient()


def _terms(order: str):
    """Two energy terms sharing a field w: one reads it, one writes it, in `order`."""
    import simrun.lang as ti

    ti.init(arch=ti.cpu, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=4, needs_grad=True, needs_dual=True)
    w = ti.field(ti.f64, shape=4, needs_grad=True)
    m = ti.field(ti.f64, shape=4, needs_grad=True)
    U = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    m.grad._make_dual()

    @ti.kernel
    def reads_w(x: ti.template(), w: ti.template(), U: ti.template()):
        for i in x:
            U[None] += w[i] * x[i] * x[i]

    @ti.kernel
    def writes_w(x: ti.template(), w: ti.template(), U: ti.template()):
        for i in x:
            w[i] = ti.sin(x[i])
            U[None] += x[i] * x[i] * x[i]

    kernels = {"reads": reads_w, "writes": writes_w}
    bound = [BoundKernel(None, kernels[k], (x, w, U)) for k in order.split(",")]
    x.from_numpy(np.array([0.3, -0.7, 1.1, 0.2]))
    w.from_numpy(np.array([0.5, 0.1, -0.4, 2.0]))
    return ti, bound, x, m, U


def test_a_term_writing_what_an_earlier_one_read_is_eligible_for_no_use() -> None:
    """The Tape snapshots w for the reads term's gradient: neither the forces nor H lambda
    may be launched directly (DirectHVP once took that scene directly, DirectForces not)."""
    _ti, bound, x, m, U = _terms("reads,writes")
    terms = EnergyTerms(bound, U, x, m)
    assert not terms.direct
    assert terms.value_and_gradient() is None and terms.gradient() is None
    assert terms.hessian_vector() is None and terms.hessian_vector(lean=True) is None
    assert not terms.usable()


def test_direct_launches_are_the_tapes_and_fwdmodes_bits() -> None:
    """Written then read: eligible; U, dU/dx and H lambda by the resolved launches equal
    the Tape's and FwdMode's bit for bit (no fusing: the second term reads what the first
    writes)."""
    ti, bound, x, m, U = _terms("writes,reads")
    terms = EnergyTerms(bound, U, x, m)
    assert terms.direct and terms.fused is None
    for g in terms.touched_grads:
        g.fill(0)
    terms.run()
    direct = float(U[None]), x.grad.to_numpy()
    x.grad.fill(0)
    with ti.ad.Tape(loss=U, clear_gradients=False):
        for b in bound:
            b()
    assert float(U[None]) == direct[0]
    np.testing.assert_array_equal(x.grad.to_numpy(), direct[1])

    seed = np.array([1.0, -2.0, 0.5, 3.0])
    terms.hessian_vector().run(x, seed)
    hvp = x.grad.dual.to_numpy(), float(U.dual[None])
    with ti.ad.FwdMode(loss=U, param=x, seed=seed):
        for g in terms.touched_grads:
            g.fill(0)
        energy_and_reverse(U, bound)
    np.testing.assert_array_equal(x.grad.dual.to_numpy(), hvp[0])
    assert float(U.dual[None]) == hvp[1]
    assert np.any(hvp[0] != 0)
