"""`simrun grad --method ensemble` as a library function: sensitivities of a canonical
average from one thermostatted run, by the fluctuation formula (no backpropagation in time).

    d<O>/dtheta = <dO/dtheta> - beta (<O dU/dtheta> - <O><dU/dtheta>)
    d<O>/dT     = <dO/dT> + (<O U> - <O><U>) / (k T^2)          (k = 1)

The run is the scene's own (`stepper.run_scene` into DIR/sampling, positions every few
steps); the first frames are discarded as equilibration, and every quantity per frame comes
from the engine's autodiff (`frames.py`). Errors: block jackknife (`stats.py`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from simrun.ensemble.frames import FrameEvaluator
from simrun.ensemble.keys import parse_ensemble_key, require_canonical
from simrun.ensemble.observables import EnergyFrames, KernelObservable, Observed, builtin
from simrun.ensemble.sampled import sampling_problems
from simrun.ensemble.stats import Estimate, jackknife
from simrun.ensemble.targets import TargetLoss
from simrun.keys import Key, energy_params, objective_params, with_role
from simrun.outputs.thermo import read_thermo_csv
from simrun.scene import Scene, SceneError
from simrun.stepper.run import run_scene

Progress = Callable[[str, int, int], None]
EQUILIBRATION = 0.2  # default share of the steps discarded before averaging
FRAMES = 2000  # default number of frames sampled (the run is long; frames cost an evaluation)


def sampling_defaults(steps: int, every: int | None, equilibrate: int | None
                      ) -> tuple[int, int]:
    """(every, equilibrate) where not given: about FRAMES frames, the first EQUILIBRATION of
    the steps discarded (the ensemble gradient and the reweighted fit sample alike)."""
    every = every or max(1, steps // FRAMES)
    return every, int(EQUILIBRATION * steps) if equilibrate is None else equilibrate
MIN_BLOCK_TAUS = 3.0  # blocks shorter than this many correlation times: errors too small


def require_frames(steps: int, every: int | None, equilibrate: int | None,
                   blocks: int) -> None:
    """SceneError before the run where it cannot sample the two frames a block that the
    jackknife's errors need (``every`` and ``equilibrate`` as given: None for defaults).
    Fast for any sizes: the least run that would do is found by bisection."""
    def frames(n: int) -> int:
        e, q = sampling_defaults(n, every, equilibrate)
        return n // e - q // e

    if frames(steps) >= 2 * blocks:
        return
    e, q = sampling_defaults(steps, every, equilibrate)
    if equilibrate is not None and equilibrate >= steps:
        raise SceneError(
            f"--equilibrate {equilibrate} discards the whole run of {steps} steps: nothing "
            f"is left to average. Discard fewer steps (the default is the first "
            f"{EQUILIBRATION:.0%}, {int(EQUILIBRATION * steps)}), or run longer (--steps).")
    low, high = steps, 2 * steps
    while frames(high) < 2 * blocks:  # doubling: a few dozen at most
        low, high = high, 2 * high
    while high - low > 1:  # frames(low) is too few, frames(high) enough
        middle = (low + high) // 2
        low, high = (middle, high) if frames(middle) < 2 * blocks else (low, middle)
    raise SceneError(
        f"--method ensemble: {steps} steps, sampled every {e} after the first {q}, give "
        f"{max(frames(steps), 0)} frames, and its error estimate needs at least {2 * blocks} "
        f"({blocks} blocks of two): run at least {high} steps (--steps {high}), or "
        "sample more often (--sample-every) or discard fewer (--equilibrate).")


def check_request(scene: Scene, wrt: list[str | Key], steps: int | None = None,
                  every: int | None = None, equilibrate: int | None = None,
                  blocks: int = 20) -> list[Key]:
    """The KEYs of ``wrt`` (texts, or Keys already parsed); SceneError for anything the run could not do (a scene that does
    not sample the canonical ensemble, an unknown KEY, too few frames), before any folder
    is made or any step taken."""
    require_canonical(scene)
    keys = [k if isinstance(k, Key) else parse_ensemble_key(scene, k) for k in wrt]
    require_frames(steps or scene.steps, every, equilibrate, blocks)
    return keys


@dataclass
class Samples:
    """Frames of a thermostatted run after equilibration, and what the run decided."""

    steps: np.ndarray  # (n,)
    x: np.ndarray  # (n, N, dim)
    dof: int  # the kinetic temperature's degrees of freedom (run.json)
    discarded: int  # frames dropped as equilibration
    folder: Path
    temperatures: np.ndarray = field(default_factory=lambda: np.zeros(0))  # thermo rows kept


@dataclass
class EnsembleResult:
    objective: Any  # <O>: a float, or an array for a vector observable
    objective_error: Any
    gradients: dict[str, Any]
    errors: dict[str, Any]
    effective: dict[str, float]  # n / tau per output ("objective" and each KEY)
    steps: int
    every: int
    equilibrate: int
    samples: Samples
    blocks: int
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    mode: str = "ensemble"
    unsampled: list[str] = field(default_factory=list)  # why the run is not canonical


def sampling_scene(scene: Scene, steps: int, every: int) -> Scene:
    """The scene as the sampling run makes it: positions every ``every`` steps, nothing else
    per frame, thermo rows (each costs a pressure pass in a periodic box) ~100 times."""
    outputs = replace(scene.outputs, every=every, positions=True, velocities=False,
                      forces=False, energies=True, xyz=False)
    return replace(scene, steps=steps, outputs=outputs, thermo=max(every, steps // 100))


def sample(scene: Scene, folder: Path, equilibrate: int, threads: int | None = None,
           progress: Progress | None = None) -> Samples:
    """Run the (sampling) scene into ``folder`` and keep the frames after ``equilibrate``."""
    report = (lambda done, total: progress("sample", done, total)) if progress else None
    result = run_scene(scene, folder, threads=threads, progress=report,
                       options={"no_render": True, "threads": threads, "sampling": True})
    with np.load(result.out_dir / "frames.npz") as frames:
        steps, x = frames["step"], frames["x"]
    info = json.loads((result.out_dir / "run.json").read_text(encoding="utf-8"))
    keep = steps > equilibrate
    thermo = read_thermo_csv(result.out_dir / "thermo.csv")
    return Samples(steps[keep], x[keep], int(info["thermo"]["dof"]), int((~keep).sum()),
                   result.out_dir, thermo["temperature"][thermo["step"] > equilibrate])


def _series(keys: list[Key], obs: Observed, table, kt: float, boltz: float = 1.0
            ) -> dict[str, np.ndarray]:
    """Per-frame series whose means the gradient is a function of (``boltz``: k_B, so
    that the temperature's derivative is per K outside lj units)."""
    frames = EnergyFrames(table, kt, list(energy_params(keys)), boltz)
    o = obs.values
    series = {"o": o}
    for key in keys:
        a, c = key.spec.partial(key, obs), key.spec.density(key, frames)
        series[f"a:{key.text}"] = np.broadcast_to(np.asarray(a, float), o.shape)
        series[f"c:{key.text}"] = c
        series[f"oc:{key.text}"] = o * c[:, None]
    return series


def gradient_estimator(keys: list[str]) -> Callable[[dict], dict]:
    """Means -> <O> and d<O>/dKEY = <a> - (<O c> - <O><c>) (c = beta dU/dtheta, or -U/T^2
    for the temperature); works on means with a leading axis (the jackknife's rows)."""
    def estimate(m: dict) -> dict:
        out = {"objective": m["o"]}
        for k in keys:
            c = m[f"c:{k}"][..., None]
            out[k] = m[f"a:{k}"] - (m[f"oc:{k}"] - m["o"] * c)
        return out

    return estimate


def _plain(value: np.ndarray) -> Any:
    value = np.asarray(value, float)
    return float(value.reshape(-1)[0]) if value.size == 1 else value


def observe(scene: Scene, keys: list[Key], samples: Samples, threads: int | None,
            progress: Progress | None = None) -> tuple[Observed, Any]:
    """The observable and the energy table over the samples' frames."""
    evaluator = FrameEvaluator(scene, list(energy_params(keys).values()), threads)
    report = (lambda done, total: progress("evaluate", done, total)) if progress else None
    table = evaluator.evaluate(samples.x, report)
    obj = scene.objective
    if obj.kernel is None:
        return builtin(obj.builtin, scene, table, list(energy_params(keys)), samples.dof), table
    names = objective_params(keys)
    return KernelObservable(scene, evaluator.system, names).evaluate(samples.x, samples.steps), \
        table


def estimate_from(scene: Scene, keys: list[Key], samples: Samples, blocks: int = 20,
                  threads: int | None = None, progress: Progress | None = None) -> Estimate:
    """<O> (``objective``) and d<O>/dKEY with errors over frames already sampled (for an
    objective of targets: the loss and its gradient)."""
    kt = scene.kT  # k_B T in energy units (scene.units)
    if scene.objective.targets is not None:
        return _loss_estimate(scene, keys, samples, blocks, threads, progress)
    obs, table = observe(scene, keys, samples, threads, progress)
    return finite_jackknife(_series(keys, obs, table, kt, scene.constants.boltz),
                            gradient_estimator([k.text for k in keys]), blocks, samples)


def _loss_estimate(scene: Scene, keys: list[Key], samples: Samples, blocks: int,
                   threads: int | None, progress: Progress | None) -> Estimate:
    """The targets' loss sum w (<O> - t)^2 and its gradient, with block-jackknife errors."""
    if with_role(keys, "objective"):
        raise SceneError(f"{scene.objective.where}: targets have no parameters; use the "
                         "energies' parameters or integrator.temperature")
    energy = list(energy_params(keys))
    evaluator = FrameEvaluator(scene, list(energy_params(keys).values()), threads)
    report = (lambda done, total: progress("evaluate", done, total)) if progress else None
    table = evaluator.evaluate(samples.x, report)
    loss = TargetLoss(scene, keys, samples.x)

    def estimate(means: dict) -> dict:
        out = loss.estimate(means)
        return {"objective": np.asarray(out["loss"])[..., None],
                **{k.text: np.asarray(out[f"grad:{k.text}"])[..., None] for k in keys}}

    return finite_jackknife(loss.series(scene, table, energy, samples.dof), estimate, blocks,
                            samples)


def _what_series(name: str) -> str:
    kind, _, key = name.partition(":")
    return {"o": "the observable", "c": f"the energy's derivative for {key}",
            "a": f"the observable's own derivative for {key}",
            "oc": f"the observable times the energy's derivative for {key}"}.get(
                kind, f"the per-frame series {name!r}")


def finite_jackknife(series: dict[str, np.ndarray], estimator, blocks: int,
                     samples: Samples) -> Estimate:
    """``jackknife`` of series and results that must be finite: FloatingPointError naming
    the first series that is not (and the frame's step), never 'nan +- nan'."""
    for name, values in series.items():
        bad = ~np.isfinite(np.asarray(values, float).reshape(len(values), -1)).all(axis=1)
        if bad.any():
            raise FloatingPointError(
                f"{_what_series(name)} is not finite at {int(bad.sum())} of {len(bad)} frames "
                f"(the first at step {int(samples.steps[np.argmax(bad)])}): an average of it "
                "has no value. Check the objective kernel (a log or sqrt of a negative, a "
                "division by zero) or the energy at those frames "
                f"({samples.folder / 'frames.npz'})")
    with np.errstate(all="ignore"):
        estimate = jackknife(series, estimator, blocks)
    for name in estimate.values:
        if not (np.all(np.isfinite(estimate.values[name]))
                and np.all(np.isfinite(estimate.errors[name]))):
            raise FloatingPointError(
                f"{'<O>' if name == 'objective' else 'd<O>/d' + name} or its error overflowed "
                "(finite frames, a non-finite average): the observable or the energy's "
                "derivatives are too large for the precision; rescale the objective")
    return estimate


def ensemble_gradient(scene: Scene, wrt: list[str | Key], folder: Path, *, steps: int | None = None,
                      equilibrate: int | None = None, every: int | None = None,
                      blocks: int = 20, threads: int | None = None,
                      progress: Progress | None = None) -> EnsembleResult:
    """d<O>/dKEY for each KEY of ``wrt`` with standard errors, from one run of the scene
    (``steps`` long, frames every ``every`` steps after the first ``equilibrate``) written to
    ``folder`` (SceneError for a scene that does not sample the canonical ensemble)."""
    keys = check_request(scene, wrt, steps, every, equilibrate, blocks)
    texts = [k.text for k in keys]
    steps = steps or scene.steps
    every, equilibrate = sampling_defaults(steps, every, equilibrate)
    t0 = time.perf_counter()
    samples = sample(sampling_scene(scene, steps, every), folder, equilibrate, threads,
                     progress)
    t1 = time.perf_counter()
    estimate = estimate_from(scene, keys, samples, blocks, threads, progress)
    t2 = time.perf_counter()
    return EnsembleResult(
        _plain(estimate.values["objective"]), _plain(estimate.errors["objective"]),
        {k: _plain(estimate.values[k]) for k in texts}, {k: _plain(estimate.errors[k])
                                                         for k in texts},
        {k: round(v, 1) for k, v in estimate.effective.items()}, steps, every, equilibrate,
        samples, blocks, {"sample": t1 - t0, "evaluate": t2 - t1},
        _warnings(estimate, every),
        unsampled=sampling_problems(samples.temperatures, float(scene.integrator.temperature),
                                    samples.dof))


def _warnings(estimate: Estimate, every: int) -> list[str]:
    """Outputs whose correlation time is not much shorter than a block."""
    block = estimate.frames / estimate.blocks
    out = []
    for name, n_eff in estimate.effective.items():
        tau = estimate.frames / n_eff
        if block < MIN_BLOCK_TAUS * tau:
            out.append(f"{name}: correlation time ~{tau * every:.0f} steps, a block "
                       f"{block * every:.0f} steps: its error may be underestimated; run "
                       "longer (--steps)")
    return out
