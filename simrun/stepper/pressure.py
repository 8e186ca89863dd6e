"""Pressure by autodiff of U with respect to a box scale.

Scaling the periodic box and every position about ``box_low`` by s changes U at the rate
dU/ds = sum_i (x_i - low) . dU/dx_i + L . dU/dL, both read from one reverse pass of the
energy terms bound to a box with gradients (the kernels fold separations with ``min_image``,
which is differentiable in the box; the stepper's own force pass skips dU/dL, which costs).
The pass makes the launches `EnergyTerms` resolves (a pair term's value and gradients in
one launch: 8.3 against 11.7 ms through the Tape for in.lj's 32,000 atoms), else the Tape's.
The L term is what a virial sum over wrapped positions misses. Then
P = (2 K - dU/ds) / (dim V), the instantaneous pressure LAMMPS reports (dof k T = 2 K).

The pass leaves the run as it found it: the stepper keeps F = -x.grad and U in the fields
between chunks, so every value and gradient the pass writes is saved before and put back
after (a run with thermo rows steps bit for bit as one without, and resumes the same).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from simrun.lang.autodiff.tape import access_of, touched
from simrun.stepper.integrators import kinetic_energy
from simrun.stepper.system import System


def measurable(system: System) -> bool:
    """Whether the scene has a pressure: a periodic box and energy terms."""
    return system.scene.boundary.type == "periodic" and bool(system.scene.energy)


def _touched(system: System, terms: list, box: dict[str, Any]) -> tuple[list, list]:
    """(fields the pressure pass may overwrite, fields whose gradients it may write)."""
    written, accessed = {system.U}, {system.x, system.U, box["box_low"], box["box_high"]}
    for bound in terms:
        prepare = getattr(bound.kernel, "prepare", None)
        if prepare is not None:
            written |= access_of(prepare(bound.args, "primal")[0]).writes
            accessed |= touched(bound.kernel, bound.args)
    grads = [getattr(f, "grad", None) for f in accessed]
    return ([f for f in written if getattr(f, "data", None) is not None],
            [g for g in grads if getattr(g, "data", None) is not None])


@contextmanager
def _preserved(written: list, grads: list) -> Iterator[None]:
    """Save the fields and gradients, zero the gradients, put everything back after."""
    saved = [(f, f.data.copy()) for f in [*written, *grads]]
    for g in grads:
        g.data[...] = 0
    try:
        yield
    finally:
        for f, value in saved:
            f.data[...] = value


def box_derivative(system: System) -> float:
    """dU/ds at the current x (one primal and reverse pass of the energy terms, bound to a
    box with gradients); the fields are left as they were."""
    if system.scene.boundary.type != "periodic":
        raise ValueError("the pressure needs a periodic box (boundary: {type: periodic})")
    terms, box = system.energy_with_box_gradient()
    system.refresh_neighbors()
    direct = system.box_gradient_terms()
    with _preserved(*_touched(system, terms, box)):
        if direct.usable():
            direct.run()  # each pair term's U and gradients in one launch, where it can be
        else:
            with system.ti.ad.Tape(loss=system.U, clear_gradients=False):
                for kernel in terms:
                    kernel()
        low = np.asarray(system.scene.boundary.low, float)
        length = np.asarray(system.scene.boundary.high, float) - low
        x = system.x.to_numpy().astype(float)
        dudx = system.x.grad.to_numpy().astype(float)
        dudl = box["box_high"].grad.to_numpy().astype(float)
    for bound in terms:
        bound.kernel.last_launch = None  # the Tape's record is gone with the values it saw
    return float(np.sum((x - low) * dudx) + np.dot(length, dudl))


def pressure(system: System, v: np.ndarray) -> float:
    """Instantaneous pressure (kinetic + configurational) at the system's x and velocities v."""
    bounds = system.scene.boundary
    volume = float(np.prod(np.asarray(bounds.high, float) - np.asarray(bounds.low, float)))
    dim = system.scene.particles.dim
    nktv2p = system.scene.constants.nktv2p  # energy / volume -> atm (real), bar (metal)
    return nktv2p * (2.0 * kinetic_energy(v, system.masses) - box_derivative(system)) / (
        dim * volume)
