"""simrun: differentiable physical simulation from the command line.

As a library (see ``simrun.api``): ``simrun.run_scene(path, ...)`` runs a scene and returns a
``Run`` (frames and energies as NumPy arrays, ``Run.atoms()`` as ASE Atoms);
``simrun.load_run(folder)`` reads a run folder the same way. They are imported on first use,
so ``import simrun`` stays light.
"""

from __future__ import annotations

from typing import Any

from simrun.version import __version__ as __version__  # re-exported: simrun.__version__

__all__ = ["Run", "load_run", "run_scene"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from simrun import api  # start-up: `import simrun` stays light until a name is used

        return getattr(api, name)
    raise AttributeError(f"module 'simrun' has no attribute {name!r}")
