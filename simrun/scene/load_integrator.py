"""The ``integrator`` section (NVE integrators and NVT thermostats) and the ``thermo`` cadence.

A thermostat's parameters are checked here, at their line: a target temperature is required
(no default temperature is a safe guess), and so is the coupling that sets how hard the
thermostat pulls (``friction``, ``tau`` or ``every``): its right value depends on the system.
"""

from __future__ import annotations

from collections.abc import Callable

from yaml.nodes import Node

from simrun.scene import limits
from simrun.scene.errors import error_at
from simrun.scene.nodes import as_float, as_int
from simrun.scene.schema import INTEGRATORS, Integrator

# Per thermostat: (key, what it is, how to fix a missing one); None: optional.
THERMOSTAT_KEYS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "langevin": (("temperature", "Add 'temperature: 1.0' (the target kT)"),
                 ("friction", "Add 'friction: 1.0' (gamma, 1/time: how fast velocities forget)"),
                 ("seed", None)),
    "nose_hoover": (("temperature", "Add 'temperature: 1.0' (the target kT)"),
                    ("tau", "Add 'tau: 0.5' (the thermostat's period, about 100 steps of dt)"),
                    ("chain", None)),
    "csvr": (("temperature", "Add 'temperature: 1.0' (the target kT)"),
             ("tau", "Add 'tau: 0.1' (the relaxation time of the kinetic energy)"),
             ("seed", None)),
    "rescale": (("temperature", "Add 'temperature: 1.0' (the target kT)"),
                ("every", "Add 'every: 10' (steps between rescalings)")),
}
ALL_KEYS = ("damping", "temperature", "friction", "tau", "chain", "seed", "every")
DEFAULT_CHAIN = 3
MAX_CHAIN = 100  # compiles in a few seconds (1000 took minutes)


def integrator(node: Node | None, typed: Callable) -> Integrator:
    """``integrator: NAME`` or a mapping with ``type`` and the type's parameters."""
    kind, r = typed(node, "integrator", INTEGRATORS, ALL_KEYS, "symplectic_euler")
    damping_node = r.get("damping") if r else None
    damping = as_float(damping_node, "integrator.damping", nonnegative=True) if damping_node else 0.0
    if kind not in THERMOSTAT_KEYS:
        if r is not None:
            r.done(("type", "damping"), f" (the '{kind}' integrator takes only damping)")
        return Integrator(kind, damping)
    allowed = THERMOSTAT_KEYS[kind]
    if r is None:
        raise error_at(node, f"the '{kind}' thermostat needs its parameters",
                       f"Write integrator: {{type: {kind}, "
                       + ", ".join(f"{k}: ..." for k, fix in allowed if fix) + "}")
    r.done(("type",) + tuple(k for k, _ in allowed),
           f" (the keys of the '{kind}' thermostat)")
    values: dict = {}
    for key, fix in allowed:
        found = r.require(key, fix) if fix else r.get(key)
        if found is None:
            continue
        name = f"integrator.{key}"
        if key == "chain":
            values[key] = as_int(found, name, 1, MAX_CHAIN, "the chain is unrolled in the "
                                 "compiled kernel, whose compile time grows with its length; "
                                 "3 to 10 thermostats are usual")
        elif key == "every":
            values[key] = as_int(found, name, 1)
        elif key == "seed":
            values[key] = as_int(found, name, 0)
        else:
            values[key] = as_float(found, name, positive=True)
    if kind == "nose_hoover":
        values.setdefault("chain", DEFAULT_CHAIN)
    return Integrator(kind, 0.0, **values)


def thermo(node: Node | None, steps: int) -> int | None:
    """``thermo: N``: energies and temperature every N steps (None: at the frames, which
    the frames' own memory bound covers)."""
    if node is None:
        return None
    every = as_int(node, "thermo", 1)
    limits.check_thermo(node, steps // every + 2)
    return every
