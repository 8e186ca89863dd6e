"""simrun as a library, for notebooks and scripts: run a scene and read a run folder back.

```python
import simrun

run = simrun.run_scene("scenes/gravity.yaml", steps=2000, sets=["dt=2e-5"])
run.x.shape, run.total[-1]          # frames (n_frames, N, dim) and total energies
atoms = run.atoms()                 # ASE Atoms per frame (needs `pip install ase`)
again = simrun.load_run("outputs/gravity/run-001")
```

The same library functions as the ``simrun run`` command (and the same folder), so what a
notebook runs can be resumed, rendered or compared with the CLI.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simrun.outputs import read_energy_csv, read_run_info
from simrun.outputs.rundir import API_WORDING, check_out_dir, choose_run_dir
from simrun.outputs.units import ase_scale
from simrun.outputs.xyz import cell_for, pbc_flags, type_columns
from simrun.scene import load_scene
from simrun.scene.bodies import particles_data
from simrun.scene.species import species_from_data

PathLike = str | os.PathLike[str]
_OUTPUT_KEYS = {"x": ("positions", "positions"), "v": ("velocities", "velocities"),
                "f": ("forces", "forces"), "energy": ("energies", "energies")}


class NotSavedError(AttributeError):
    """A Run's array that the run did not save (its scene's ``outputs:`` turned it off)."""


@dataclass(repr=False)
class Run:
    """A run folder's results as NumPy arrays (one row per saved frame); ``print(run)`` gives
    a short summary, as pandas and xarray do, not every array."""

    path: Path
    step: np.ndarray  # (F,)
    time: np.ndarray  # (F,)
    saved: dict[str, np.ndarray]  # what the run saved of x, v, f (F, N, dim) and energy
    masses: np.ndarray  # (N,)
    scene: dict[str, Any]  # the resolved scene (scene.yaml)
    info: dict[str, Any] = field(default_factory=dict)  # run.json: status, versions, sources

    @property
    def x(self) -> np.ndarray:
        """(F, N, dim) positions per saved frame."""
        return self._array("x")

    @property
    def v(self) -> np.ndarray:
        """(F, N, dim) velocities per saved frame."""
        return self._array("v")

    @property
    def f(self) -> np.ndarray:
        """(F, N, dim) forces per saved frame (outputs.forces: true)."""
        return self._array("f")

    @property
    def energy(self) -> np.ndarray:
        """Structured rows of energy.csv: step, time, kinetic, potential, total."""
        return self._array("energy")

    def _array(self, name: str) -> np.ndarray:
        """A saved array, or an error that names the scene key that would have saved it
        (an AttributeError, so ``hasattr(run, "f")`` and ``getattr(run, "f", None)`` work)."""
        if name in self.saved:
            return self.saved[name]
        raise NotSavedError(f"{self.path}: this run saved no {_OUTPUT_KEYS[name][1]} (its "
                            f"scene has outputs.{_OUTPUT_KEYS[name][0]}: false); run it again "
                            f"with --set outputs.{_OUTPUT_KEYS[name][0]}=true to have them. "
                            f"Saved: {', '.join(sorted(self.saved)) or 'nothing'}.")

    def __repr__(self) -> str:
        return "\n".join(self._summary_lines())

    def _summary_lines(self) -> list[str]:
        particles = self.scene.get("particles", {})
        shape = f"N={particles.get('count', '?')}, dim={particles.get('dim', 2)}"
        units = self.scene.get("units", "reduced")
        lines = [f"<simrun.Run {self.path}>",
                 f"  scene:  {self.scene.get('name', '?')} ({shape}, units: {units}), "
                 f"status {self.status or 'unknown'}"]
        if len(self.step):
            lines.append(f"  frames: {len(self.step)}, steps {int(self.step[0])}..."
                         f"{int(self.step[-1])}, t = {float(self.time[0]):.6g}..."
                         f"{float(self.time[-1]):.6g}")
        else:
            lines.append("  frames: 0")
        if "energy" in self.saved and len(np.atleast_1d(self.energy)):
            last = np.atleast_1d(self.energy)[-1]
            lines.append(f"  energy (last frame): kinetic {float(last['kinetic']):.6g}, "
                         f"potential {float(last['potential']):.6g}, total "
                         f"{float(last['total']):.6g}")
        drift = self.info.get("energy_drift")
        if isinstance(drift, dict) and "relative_largest" in drift:
            lines.append(f"  drift of the {drift.get('quantity', 'total')} energy: final "
                         f"{drift['relative_final']:+.3g}, largest "
                         f"{drift['relative_largest']:+.3g} (relative to "
                         f"{drift.get('relative_to', '|E0|')})")
        arrays = [n for n in ("x", "v", "f", "energy") if n in self.saved]
        lines.append(f"  arrays: step, time, {', '.join(arrays)}"
                     "; .scene, .info (run.json), .atoms()")
        return lines

    @property
    def status(self) -> str | None:
        """run.json's exit status: ok, interrupted, failed, error (or running)."""
        return self.info.get("status")

    @property
    def kinetic(self) -> np.ndarray:
        return np.asarray(self.energy["kinetic"])

    @property
    def potential(self) -> np.ndarray:
        return np.asarray(self.energy["potential"])

    @property
    def total(self) -> np.ndarray:
        return np.asarray(self.energy["total"])

    def atoms(self, frame: int | None = None) -> Any:
        """ASE ``Atoms`` of one frame (``frame`` index, negative from the end) or a list of
        all of them: positions and velocities padded to 3-D, masses, species (the scene's
        names; a name that is no chemical symbol is ASE's ``X`` with its type number as the
        tag, and every name is in ``arrays["species"]``), and the cell that trajectory.xyz
        has: the boundary box (periodic along the scene's dimensions only; a 2-D box's z
        vector has length 1), none without a boundary. In real, metal and si units the
        numbers are converted to ASE's (Å, eV, amu, ASE's velocity), as trajectory.xyz is."""
        try:
            from ase import Atoms  # optional dependency: pip install ase
        except ImportError:
            raise ImportError("Run.atoms needs ASE: pip install ase") from None
        self._array("x")  # the error that names outputs.positions when it was not saved
        frames = range(len(self.step)) if frame is None else [frame]
        made = [self._atoms(Atoms, i) for i in frames]
        return made if frame is None else made[0]

    def _atoms(self, atoms_type: Any, i: int) -> Any:
        n, dim = self.x.shape[1:]
        pad = np.zeros((n, 3))
        positions = pad.copy()
        positions[:, :dim] = self.x[i]
        box = self.scene.get("boundary", {})
        cell, pbc, origin = np.zeros((3, 3)), [False] * 3, np.zeros(3)
        if box.get("type", "none") != "none":  # the cell trajectory.xyz writes
            cell, origin = cell_for(box["low"], box["high"])
            pbc = list(pbc_flags(dim, box["type"] == "periodic"))
        names = species_from_data(self.scene["particles"].get("species"), n)
        typed = type_columns(names)  # as trajectory.xyz: Z and tags for names ASE lacks
        scale = ase_scale(str(self.scene.get("units", "reduced")))
        length, mass, speed = (1.0, 1.0, 1.0) if scale is None else \
            (scale.length, scale.mass, scale.velocity)
        made = atoms_type(names if typed is None else typed[0], positions=positions * length,
                          masses=self.masses * mass, cell=cell * length, pbc=pbc,
                          celldisp=origin * length)
        if typed is not None:
            made.set_tags(typed[1])
            made.new_array("species", np.array(names))
        if "v" in self.saved:
            velocities = pad.copy()
            velocities[:, :dim] = self.v[i]
            made.set_velocities(velocities * speed)
        made.info.update(step=int(self.step[i]), time=float(self.time[i]))
        return made


def load_run(path: PathLike) -> Run:
    """Read a run folder (what ``simrun run`` writes) into NumPy arrays.

    Raises FileNotFoundError when the folder holds no frames.npz."""
    path = Path(path)
    if not (path / "frames.npz").is_file():
        raise FileNotFoundError(f"{path}: no frames.npz here; give a run folder, e.g. "
                                "outputs/gravity/run-001")
    with np.load(path / "frames.npz") as frames:
        arrays = {k: frames[k] for k in frames.files}
    scene = yaml.safe_load((path / "scene.yaml").read_text(encoding="utf-8"))
    if "bodies" in scene:  # rigid boxes: their centres (a trained mass may be written)
        scene["particles"] = {**particles_data(scene["bodies"], scene.get("precision", "f64")),
                              **(scene.get("particles") or {})}
    particles = scene.get("particles") or {}  # none: a grid scene
    count = int(particles.get("count", 0))
    masses = np.broadcast_to(np.asarray(particles.get("mass", 1.0), float), (count,)).copy()
    energy = read_energy_csv(path / "energy.csv") if (path / "energy.csv").is_file() else None
    try:
        info = read_run_info(path / "run.json")
    except (OSError, ValueError):
        info = {}
    saved = {name: arrays[name] for name in ("x", "v", "f") if name in arrays}
    if energy is not None:
        saved["energy"] = energy
    return Run(path, arrays["step"], arrays["time"], saved, masses, scene, info)


def run_scene(scene: PathLike, out_dir: PathLike | None = None, *, steps: int | None = None,
              sets: Iterable[str] = (), seed: int | None = None, threads: int | None = None,
              resume: bool = False, overwrite: bool = False, render: bool = True,
              allow_outside: bool = False, debug: bool = False) -> Run:
    """Run a scene file (``steps``, ``sets`` and ``seed`` as on the command line) into
    ``out_dir`` (default: ``outputs/<scene>/run-NNN``), or continue the run there with
    ``resume``; returns the folder read back by ``load_run``.

    The folder is what ``simrun run`` writes, pictures included (``render=False``: none, as
    ``--no-render``); ``overwrite`` replaces a run already in ``out_dir``.

    Errors are exceptions: ``simrun.scene.SceneError`` for bad input (one paragraph, with
    file:line:col), ``simrun.stepper.SimulationError`` when the run fails (e.g. NaN)."""
    from simrun.jobs.run import run_job  # start-up: loads the compiler

    extra = [f"steps={steps}"] if steps is not None else []
    extra += [f"seed={seed}"] if seed is not None else []
    loaded = load_scene(scene, list(sets) + extra, allow_outside=allow_outside)
    out = Path(out_dir) if out_dir is not None else None
    if resume:
        target: Any = choose_run_dir(loaded.name, out, resume=True, overwrite=False,
                                     wording=API_WORDING)
    else:  # made once the kernels compiled: a scene with a bad kernel writes nothing
        if out is not None:  # refused before anything compiles, as the CLI does
            check_out_dir(out, overwrite=overwrite, wording=API_WORDING)
        target = lambda: choose_run_dir(loaded.name, out, resume=False,  # noqa: E731
                                        overwrite=overwrite, wording=API_WORDING)
    result = run_job(loaded, target, resume=resume, render=False, threads=threads, debug=debug,
                     options={"no_render": not render, "threads": threads,
                              "debug": debug}).result
    if render:  # here, not in the job: a picture that fails to draw is an exception
        from simrun.render.record import draw_pictures  # start-up: matplotlib

        draw_pictures(result.out_dir)
    return load_run(result.out_dir)
