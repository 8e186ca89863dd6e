"""From a command to a plan: the sweep points, each one's scene validated and hashed, its job
folder, and which ones an earlier invocation already finished. Nothing is submitted here, so
a bad KEY or value fails before any job runs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simrun.batch.digest import job_digest
from simrun.batch.jobs import get_job
from simrun.batch.summary import Row
from simrun.batch.sweep import Point, grid, parse_sweep, read_sweep_file, sample
from simrun.batch.task import JobSpec, read_record
from simrun.scene import Scene, SceneError, load_scene
from simrun.stepper.validate import validate_params


@dataclass
class Plan:
    out_dir: Path
    rows: list[Row]
    specs: list[JobSpec]  # one per row, same order
    keys: list[str]  # swept KEYs
    base: Scene
    skipped: list[int] = field(default_factory=list)  # rows already done


def make_points(sweeps: list[str], sweep_file: str | Path | None, samples: int | None,
                sample_seed: int | None) -> list[Point]:
    axes = [parse_sweep(s) for s in sweeps]
    if sweep_file is not None:
        file_axes, file_samples, file_seed = read_sweep_file(Path(sweep_file))
        axes = file_axes + axes
        samples = samples if samples is not None else file_samples
        sample_seed = sample_seed if sample_seed is not None else file_seed
    if not axes:
        raise SceneError("nothing to sweep: give --sweep KEY=V1,V2,... (or a sweep file)")
    if samples is not None:
        if not isinstance(samples, int) or samples < 1:
            raise SceneError(f"--samples {samples!r}: give a whole number >= 1")
        return sample(axes, samples, int(sample_seed or 0))
    return grid(axes)


def _check_job(scene: Scene, job: str, options: dict[str, Any]) -> None:
    spec = get_job(job)
    if spec.needs_objective and scene.objective is None:
        raise SceneError(f"{scene.source}: --job {job} needs the scene's 'objective:' (what "
                         "to differentiate); add one, e.g. --set \"objective={builtin: total, "
                         "at: end}\"")
    if job == "optimize" and getattr(scene, "optimize", None) is None:
        raise SceneError(f"{scene.source}: --job optimize needs the scene's 'optimize:' "
                         "section (the KEYs to tune), e.g. scenes/projectile.yaml")
    if job == "grad":
        if not options.get("wrt"):
            raise SceneError(f"--job {job} needs at least one --wrt KEY")
        # start-up: loads the compiler
        from simrun.jobs.grad_folder import grad_request

        grad_request(scene, options)  # KEYs, --mode, --method: as simrun grad checks them


def _steps_override(steps: int | None, sets: list[str], points: list[Point]) -> list[str]:
    """``--steps N`` is every job's ``steps`` (run, grad and optimize alike); with a
    ``--set steps=`` or ``--sweep steps=`` as well, which one is meant is unclear: refused."""
    if steps is None:
        return []
    given = [f"--set {item.strip()}" for item in sets if item.split("=", 1)[0].strip() == "steps"]
    if any("steps" in point for point in points):
        given.append("the sweep over steps")
    if given:
        raise SceneError(f"--steps {steps} and {given[0]} both set the steps of every job. "
                         "Give one of them.")
    return [f"steps={steps}"]


def default_out(scene: Scene, job: str, sets: list[str], points: list[Point]) -> Path:
    """outputs/<scene>/batch-<job>-<hash of the command>: the same command finds its folder
    again (and skips what is done), a different sweep gets its own."""
    text = json.dumps([str(scene.source), job, sets, points], sort_keys=True)
    return Path("outputs") / scene.name / f"batch-{job}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def _load_point(scene_path: str | Path, overrides: tuple[str, ...], point: Point,
                allow_outside: bool) -> Scene:
    """The point's scene, its kernel parameters checked (names, LIMITS, integer ranges) so
    that a bad one is refused before anything is submitted; an error names the --sweep it
    came from (the loader says --set)."""
    try:
        scene = load_scene(scene_path, overrides, allow_outside=allow_outside)
        validate_params(scene, float_widths=False)
        return scene
    except SceneError as exc:
        text = str(exc)
        for key in point:
            text = text.replace(f"--set {key}=", f"--sweep {key}=")
        raise SceneError(text) from None


def make_plan(scene_path: str | Path, points: list[Point], *, job: str, sets: list[str],
              options: dict[str, Any], out_dir: Path | None, allow_outside: bool) -> Plan:
    sets = [*sets, *_steps_override(options.get("steps"), sets, points)]
    base = load_scene(scene_path, sets, allow_outside=allow_outside)
    _check_job(base, job, options)
    out = Path(out_dir) if out_dir is not None else default_out(base, job, sets, points)
    rows, specs, skipped = [], [], []
    width = max(3, len(str(len(points) - 1)))
    for i, point in enumerate(points):
        overrides = tuple(sets) + tuple(f"{k}={v}" for k, v in point.items())
        scene = _load_point(scene_path, overrides, point, allow_outside)
        folder = out / f"{job}-{i:0{width}d}"
        spec = JobSpec(i, folder.resolve(), str(base.source), overrides, job,
                       job_digest(scene, job, options), dict(options), allow_outside)
        row = Row(i, dict(point), folder.name)
        record = read_record(spec.record_path)
        if record and record.get("digest") == spec.digest and record.get("status") == "done":
            row.status, row.results = "done", dict(record.get("results") or {})
            row.attempts, row.seconds = int(record.get("attempts", 1)), record.get("seconds")
            skipped.append(i)
        rows.append(row)
        specs.append(spec)
    keys = list(dict.fromkeys(k for p in points for k in p))
    return Plan(out, rows, specs, keys, base, skipped)
