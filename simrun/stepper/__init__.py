"""The stepper: builds a scene's fields and kernels, integrates, watches, records, resumes.

``run_scene(scene, out_dir, resume=..., progress=...)`` is the entry point; ``check_scene``
builds and compiles everything without running.
"""

from simrun.stepper.check import CheckReport, check_scene
from simrun.stepper.run import RunResult, SimulationError, run_scene

__all__ = ["CheckReport", "RunResult", "SimulationError", "check_scene", "run_scene"]
