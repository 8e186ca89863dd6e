"""`simrun grad` as one library function over a folder, called alike by the command, by
`simrun resume` and by batch's grad task: `grad_request` checks the request before any
folder is made, `grad_job` computes (reverse or forward mode, the check against finite
differences, or the ensemble method) and writes gradients.json, gradients.npz, the
horizon and the pictures."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from simrun.jobs.ensemble import EnsembleResult, check_request, ensemble_gradient
from simrun.jobs.ensemble_record import unsampled_message, write_ensemble_outputs
from simrun.jobs.finish import finish
from simrun.jobs.grad import GradResult, Progress, forward_gradient, scene_gradient
from simrun.jobs.grad_check import check_gradient
from simrun.jobs.horizon import adjoint_growth, growth_report
from simrun.jobs.options import memory_bytes, method_of, mode_of, sampling
from simrun.keys import Key, parse_key, parse_keys, value_of
from simrun.outputs import atomic_savez, atomic_write_text, versions
from simrun.outputs.provenance import write_job_scene
from simrun.outputs.resumable import mark_failed
from simrun.scene import Scene, initial_state

# a context around the sweeps (the CLI's progress bar) that yields their progress callback
ProgressScope = Callable[[], AbstractContextManager[Progress | None]]


def grad_request(scene: Scene, options: dict[str, Any]) -> list[Key]:
    """The KEYs of ``options["wrt"]``, parsed once; bad input (an unknown method, mode or
    KEY, a size that is none, too short an ensemble run) is a SceneError here, before any
    folder is made."""
    if method_of(options) == "ensemble":
        return check_request(scene, options["wrt"], **sampling(options))
    memory_bytes(options)
    mode_of(options)
    return parse_keys(scene, options["wrt"])


def grad_job(scene: Scene, target: Path, options: dict[str, Any], keys: list[Key], *,
             recorded: dict[str, Any] | None = None, progress: ProgressScope | None = None,
             announce: Callable[[int], None] | None = None) -> GradResult | EnsembleResult:
    """The gradient of ``grad_request``'s KEYs, written to the folder ``target``: first the
    scene and a 'running' gradients.json (with ``recorded``, the command's options that
    'simrun resume' reads), so that Ctrl-C leaves a folder to resume; an error marks it
    'failed'; `finish` writes 'done'. ``progress()`` is entered around the sweeps;
    ``announce(snapshots)`` hears the reverse mode's stored states."""
    start_outputs(target, scene, recorded)
    scope = progress or (lambda: nullcontext(None))
    threads = options.get("threads")
    with _failure_recorded(target / "gradients.json"):
        if method_of(options) == "ensemble":
            with scope() as report:
                result = ensemble_gradient(scene, keys, target / "sampling", threads=threads,
                                           progress=report, **sampling(options))
        else:
            steps = options.get("steps") or scene.steps
            with scope() as report:
                result = scene_gradient(scene, keys, steps=steps,
                                        checkpoints=options.get("checkpoints"),
                                        memory=memory_bytes(options), threads=threads,
                                        progress=report, announce=announce) \
                    if mode_of(options) == "reverse" else \
                    forward_gradient(scene, keys, steps=steps, threads=threads,
                                     progress=report)
            if options.get("check") and result.mode == "reverse":
                result.check = check_gradient(scene, result, threads=threads)
    if isinstance(result, EnsembleResult):
        write_ensemble_outputs(target, scene, result, recorded)
    else:
        write_outputs(target, scene, result, recorded)
    return result


def failed_verdict(result: GradResult | EnsembleResult) -> str | None:
    """Why a finished grad job is exit 1 (a failed task in a batch): its check against
    finite differences is not 'ok', or its ensemble run did not sample the thermostat's
    ensemble; None when neither."""
    if isinstance(result, EnsembleResult):
        return unsampled_message(result) if result.unsampled else None
    check = result.check
    if check is None or check["verdict"] == "ok":
        return None
    parts = [f"{row['key']} {row['verdict']} (AD {row['ad']:.10g}, FD {row['fd']:.10g}, "
             f"rel. error {row['rel_error']:.2e})" for row in check["rows"]
             if row["verdict"] != "ok"]
    if check["taylor"]["verdict"] != "ok":
        parts.append(f"the Taylor test {check['taylor']['verdict']} (order "
                     f"{check['taylor']['order']:.2f}, 2 expected)")
    return (f"the check against central differences is {check['verdict']}: "
            f"{'; '.join(parts)} (gradients.json: check)")


@contextmanager
def _failure_recorded(record: Path) -> Iterator[None]:
    """An error after the folder was made marks its gradients.json 'failed' with the error
    (it said 'running', which only Ctrl-C should leave). KeyboardInterrupt is no Exception:
    it leaves 'running', to resume."""
    try:
        yield
    except Exception as exc:  # a gradient that is not finite, an objective that fails
        mark_failed(record, str(exc) or type(exc).__name__)
        raise


def start_outputs(out_dir, scene: Scene, options: dict[str, Any] | None) -> None:
    """Before the sweeps: the resolved scene.yaml, the kernel copies, and a gradients.json
    saying 'running' with the command's ``options`` ('simrun resume' reads them; batch's
    tasks record none: batch.json has them)."""
    sources = write_job_scene(Path(out_dir), scene)
    record = {"status": "running", **({} if options is None else {"options": options}),
              "sources": sources, "versions": versions()}
    atomic_write_text(Path(out_dir) / "gradients.json", json.dumps(record, indent=2) + "\n")


def write_outputs(out_dir, scene: Scene, result: GradResult,
                  options: dict[str, Any] | None = None) -> list:
    """gradients.json (objective, gradients, schedule, timings, check, the command's
    ``options`` and the kernel sources' hashes), gradients.npz (the arrays), the resolved
    scene.yaml with the kernel copies, and the pictures."""
    from simrun.render.sensitivity import draw_gradient_pictures  # start-up: matplotlib

    out_dir = Path(out_dir)
    sources = write_job_scene(out_dir, scene)
    plain = {k: (np.asarray(g).tolist() if np.ndim(g) else float(g))
             for k, g in result.gradients.items()}
    record = {
        "status": "done",
        "objective": {"value": result.objective, **scene.objective.to_dict()},
        "gradients": plain,
        "mode": result.mode, "steps": result.steps,
        "schedule": {"kind": "binomial", "snapshots": result.snapshots,
                     "forward_steps_recomputed": result.advances,
                     "recompute_factor": round(result.recompute_factor, 4),
                     "stored_bytes": result.stored_bytes},
        "threads": result.threads, "deterministic_scatters": result.deterministic,
        "timings_s": {k: round(v, 4) for k, v in
                                                  result.seconds.items()},
        "check": result.check, "versions": versions(), "sources": sources,
    }
    if options is not None:
        record["options"] = options
    growth = adjoint_growth(result.adjoint_horizon, scene.dt)
    if growth is not None:
        record["horizon_growth"] = {"state": growth}
    if result.mode == "forward":
        del record["schedule"]
        record["horizon_growth"] = growth_report(result.horizon, scene.dt)
        record["directions"] = {k: "a random unit direction (gradients.npz: "
                                   f"direction:{k}); the value is dJ along it"
                                for k in result.directions}

    def record_ok() -> None:  # only once the guards say no kernel wrote outside a field
        atomic_write_text(out_dir / "gradients.json", json.dumps(record, indent=2) + "\n")
        atomic_savez(out_dir / "gradients.npz", **{k: np.asarray(g, float)
                                                   for k, g in result.gradients.items()},
                     **{f"direction:{k}": d for k, d in result.directions.items()})

    finish(result.steps, record_ok, lambda why: mark_failed(out_dir / "gradients.json", why))
    if result.horizon:
        _write_horizon(out_dir, scene, result)
    return draw_gradient_pictures(out_dir, *picture_inputs(scene, result.gradients,
                                                           result.keys))


def picture_inputs(scene: Scene, gradients: dict[str, Any], keys: list[Key] | None = None
                   ) -> tuple[dict[str, float], np.ndarray | None]:
    """What a grad folder's pictures need beside its files: the value of each scalar KEY
    (for d ln J / d ln p) and the start positions (for -dJ/dx0); ``simrun render`` calls
    it with the folder's own scene (and no `keys`: the texts are parsed here)."""
    values, parsed = {}, {k.text: k for k in keys or []}
    for text, gradient in gradients.items():
        key = parsed.get(text) or parse_key(scene, text)
        if np.ndim(gradient) or key.spec.lives == "fields":  # a field has no scene value
            continue
        value = value_of(scene, key)
        if np.ndim(value) == 0:  # not a random direction's dJ
            values[text] = float(value)
    x0 = initial_state(scene)[0] if "state.x0" in gradients else None
    return values, x0


def _write_horizon(out_dir, scene: Scene, result: GradResult) -> None:
    """horizon.csv (step, time, J(t), dJ(t)/dKEY...), drawn as horizon.png: how the sensitivity
    grows with the horizon, which shows where a chaotic system's gradient stops meaning
    anything (it grows exponentially and central differences stop agreeing)."""
    names = list(result.horizon)
    rows = list(zip(*[result.horizon[n] for n in names]))
    lines = ["step,time,objective," + ",".join(f"d/d{n}" for n in names)]
    for row in rows:
        step, value = row[0][0], row[0][1]
        lines.append(f"{step},{step * scene.dt!r},{value!r},"
                     + ",".join(repr(r[2]) for r in row))
    atomic_write_text(out_dir / "horizon.csv", "\n".join(lines) + "\n")
