"""Canonical-ensemble sensitivities and reweighting: derivatives of equilibrium averages from
one thermostatted run (the fluctuation formula), with no backpropagation through time, so
they stay meaningful where a trajectory's own derivative grows exponentially (chaos).

`simrun grad --method ensemble` is the job `simrun.jobs.ensemble.ensemble_gradient`."""

from simrun.ensemble.keys import require_canonical

__all__ = ["require_canonical"]
