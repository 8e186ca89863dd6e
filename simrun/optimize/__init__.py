"""`simrun optimize`: minimise a scene's objective over its KEYs with the trajectory gradient
of `simrun.adjoint` (Adam, SGD with momentum, L-BFGS-B through SciPy), recording every
iteration so that a stopped training resumes with the same numbers."""

from simrun.optimize.loop import OptimizeError, OptimizeResult, optimize_scene

__all__ = ["OptimizeError", "OptimizeResult", "optimize_scene"]
