"""Canonical-ensemble sensitivities and reweighting: derivatives of equilibrium averages from
one thermostatted run (the fluctuation formula), with no backpropagation through time, so
they stay meaningful where a trajectory's own derivative grows exponentially (chaos).

``ensemble_gradient(scene, wrt, folder)`` is `simrun grad --method ensemble`."""

from simrun.ensemble.job import EnsembleResult, ensemble_gradient
from simrun.ensemble.keys import require_canonical

__all__ = ["EnsembleResult", "ensemble_gradient", "require_canonical"]
