"""The ensemble gradient's folder: gradients.json (values, errors, effective sample sizes,
what was discarded as equilibration) and gradients.npz; the sampling run is DIR/sampling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from simrun.ensemble.keys import parse_ensemble_key
from simrun.jobs.ensemble import EnsembleResult
from simrun.jobs.finish import finish
from simrun.keys import value_of
from simrun.outputs import atomic_savez, atomic_write_text, versions
from simrun.outputs.provenance import write_job_scene
from simrun.outputs.resumable import mark_failed
from simrun.scene import Scene


def _plain(value: Any) -> Any:
    return np.asarray(value, float).tolist() if np.ndim(value) else float(value)


def unsampled_message(result: EnsembleResult) -> str:
    """Why the averages cannot be canonical ones (the run did not sample the ensemble)."""
    return ("the sampling run did not sample the canonical ensemble, so these averages and "
            "derivatives are not the ensemble's: " + "; ".join(result.unsampled) + ". A "
            "Nose-Hoover thermostat cannot heat a system at rest (give initial.temperature) "
            "and a short chain may not mix a stiff or harmonic system (chain: 3 or more, a "
            "smaller tau, or a Langevin thermostat); or run longer (--steps, --equilibrate)")


def write_ensemble_outputs(out_dir: Path, scene: Scene, result: EnsembleResult,
                           options: dict[str, Any] | None = None) -> list[Path]:
    """gradients.json, gradients.npz and sensitivities.png (d ln<O> / d ln KEY)."""
    from simrun.render.sensitivity import render_sensitivities  # start-up: matplotlib

    out_dir = Path(out_dir)
    sources = write_job_scene(out_dir, scene)
    s = result.samples
    record = {
        "status": "failed" if result.unsampled else "done", "method": "ensemble",
        "objective": {"value": _plain(result.objective),
                      "error": _plain(result.objective_error), **scene.objective.to_dict()},
        "gradients": {k: _plain(v) for k, v in result.gradients.items()},
        "errors": {k: _plain(v) for k, v in result.errors.items()},
        "effective_samples": result.effective,
        "frames": {"used": len(s.steps), "every": result.every, "blocks": result.blocks},
        "equilibration": {"steps": result.equilibrate, "frames_discarded": s.discarded},
        "steps": result.steps, "temperature": scene.integrator.temperature, "dof": s.dof,
        "sampling": str(s.folder.relative_to(out_dir)) if s.folder.is_relative_to(out_dir)
        else str(s.folder),
        "warnings": result.warnings,
        **({"error": unsampled_message(result)} if result.unsampled else {}),
        "timings_s": {k: round(v, 4) for k, v in result.seconds.items()},
        "versions": versions(), "sources": sources,
    }
    if options is not None:
        record["options"] = options

    def record_ok() -> None:  # only once the guards say no kernel wrote outside a field
        atomic_write_text(out_dir / "gradients.json", json.dumps(record, indent=2) + "\n")
        atomic_savez(out_dir / "gradients.npz",
                     **{k: np.asarray(g, float) for k, g in result.gradients.items()},
                     **{f"error:{k}": np.asarray(e, float) for k, e in result.errors.items()})

    finish(result.steps, record_ok, lambda why: mark_failed(out_dir / "gradients.json", why))
    scalars = {k: float(g) for k, g in result.gradients.items() if np.ndim(g) == 0}
    if not scalars or np.ndim(result.objective):
        return []
    values = {k: float(value_of(scene, parse_ensemble_key(scene, k))) for k in scalars}
    return [render_sensitivities(values, scalars, float(result.objective),
                                 out_dir / "sensitivities.png", title=scene.name,
                                 errors={k: float(result.errors[k]) for k in scalars},
                                 objective_error=float(result.objective_error))]
