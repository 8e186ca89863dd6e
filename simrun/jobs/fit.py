"""The fit job, `simrun optimize` of a scene whose objective is ensemble targets: DiffTRe (Thaler &
Zavadlav 2021). One thermostatted run is reused across parameter updates: its frames are
reweighted by w ~ exp(-(U_theta / kT_theta - U_0 / kT_0)) to the current parameters, and the
loss (a function of the reweighted averages) and its gradient (the fluctuation formula under
the weights) come from them, while the effective sample size N_eff = (sum w)^2 / sum w^2
stays above ``threshold`` N; below it, a new run is sampled at the current parameters.

Adam's iterates dither by about its rate around the optimum, and each run's averages are
noisy: they stopped ~1% off in epsilon, ten errors of <U>/N. So the fit ends with a polish:
Gauss-Newton steps (`ensemble/gauss_newton.py`, every target weighted by its inverse
variance) from fresh, longer, independently seeded runs, until POLISH_POOL runs in a row
step no further than their own errors; the mean of where those runs land is the fit, its
covariance theirs over their number (scaled up if they spread more than that says) plus the
targets' own errors carried through. Far from the fit a step is mostly the noise of its
Jacobian and the curvature of the averages (Kob-Andersen's epsilon_AB swung 1.46, 1.36,
1.46 from 8% off), so a fit is converged only where the runs agree, never after a set
number of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simrun.ensemble.frames import FrameEvaluator
from simrun.ensemble.gauss_newton import Pooled, Step, agreement, gauss_newton, pooled
from simrun.ensemble.keys import parse_ensemble_key, require_canonical
from simrun.ensemble.targets import TargetLoss
from simrun.jobs.ensemble import sample, sampling_defaults, sampling_scene
from simrun.jobs.finish import finish
from simrun.keys import energy_params, value_of, with_checked_values, with_role, with_value
from simrun.optimize.optimizers import Adam, project
from simrun.optimize.schedules import learning_rate
from simrun.outputs import atomic_write_text
from simrun.outputs.provenance import relocate, save_sources, write_job_scene
from simrun.outputs.writer import write_scene
from simrun.scene import Scene, SceneError

THRESHOLD = 0.9  # N_eff / N below which a new trajectory is sampled
AVERAGED = 0.25  # Adam's estimate: the mean iterate over this last share of its iterations
POLISH_LENGTH = 4  # the polish's runs are this many times the scene's steps
POLISH_RUNS = 10  # fresh runs at most in the polish
POLISH_POOL = 2  # converged runs in a row that end the polish (their landing points pooled)
POLISH_SEED = 1000003  # run n of the polish is seeded scene.seed + n * this (independent)
MAX_STEP = 0.1  # a polish step moves no parameter by more than this share of its value
CONVERGED = 0.9  # a step is within its errors below this quantile of chi^2 (p dof)


def fitted(rows: list) -> np.ndarray:
    """The estimate: the mean of the last iterates (Polyak-Ruppert averaging). Each loss is
    itself a noisy average, so neither its smallest value nor the last step is better."""
    tail = rows[-max(1, int(round(AVERAGED * len(rows)))):]
    return np.mean([r.params for r in tail], axis=0)


@dataclass
class FitRow:
    iteration: int
    loss: float
    params: np.ndarray
    neff: float  # N_eff / N of the weights used at this iteration
    trajectory: int  # which sampled run the averages came from
    averages: dict[str, np.ndarray] = field(default_factory=dict)
    stale: float | None = None  # N_eff / N the previous run fell to, when it was replaced
    stage: str = "adam"  # or "gauss-newton" (the polish: a fresh run, unweighted)


@dataclass
class Fit:
    """Every iteration, the polish's steps, and the fitted parameters with their covariance
    (None without a polish)."""

    rows: list[FitRow]
    params: np.ndarray
    covariance: np.ndarray | None = None
    steps: list[Step] = field(default_factory=list)
    pool: Pooled | None = None  # the converged runs pooled (None: not converged)
    chi2s: list[float] = field(default_factory=list)  # each polish step's `agreement`

    @property
    def converged(self) -> bool:
        """POLISH_POOL polish runs in a row agreed, and were pooled."""
        return self.pool is not None

    @property
    def errors(self) -> np.ndarray | None:
        return None if self.covariance is None else np.sqrt(np.diag(self.covariance))


@dataclass
class _Reference:
    """A sampled run and what reweighting needs of it."""

    scene: Scene
    samples: object
    evaluator: FrameEvaluator
    table: object  # the frames' FrameTable at the parameters they were sampled at
    loss: TargetLoss
    number: int = 0  # trajectory-NNN

    @property
    def u0_over_kt(self) -> np.ndarray:
        return self.table.potential / self.scene.kT


def _reference(scene: Scene, keys: list, out_dir: Path, number: int, steps: int, every: int,
               equilibrate: int, threads: int | None) -> _Reference:
    folder = out_dir / f"trajectory-{number:03d}"
    samples = sample(sampling_scene(scene, steps, every), folder, equilibrate, threads)
    evaluator = FrameEvaluator(scene, list(energy_params(keys).values()), threads)
    table = evaluator.evaluate(samples.x)
    return _Reference(scene, samples, evaluator, table,
                      TargetLoss(scene, keys, samples.x), number)


def _scene_at(scene: Scene, keys: list, vector: np.ndarray, by: str | None = None) -> Scene:
    """The scene at the parameters ``vector``; with ``by`` (what moved them) refused where a
    kernel's LIMITS no longer hold (`with_checked_values`)."""
    moved = [(key, float(value)) for key, value in zip(keys, vector)]
    if by is not None:
        return with_checked_values(scene, moved, by)
    for key, value in moved:
        scene = with_value(scene, key, value)
    return scene


def _bounds(opt, keys: list) -> tuple[np.ndarray, np.ndarray]:
    pairs = [opt.bounds.get(k.text) or (None, None) for k in keys]
    return (np.array([-np.inf if lo is None else lo for lo, _ in pairs]),
            np.array([np.inf if hi is None else hi for _, hi in pairs]))


def _reweighted(ref: _Reference, current: Scene, keys: list, vector: np.ndarray):
    """The frames' table at the current parameters, their weights exp(-(U/kT - U0/kT0))
    (largest 1) and N_eff / N."""
    table = ref.table
    if ref.scene is not current:
        ref.evaluator.set_values({(k.index, k.term_param): v for k, v in zip(keys, vector)
                                  if k.spec.role == "energy"})
        table = ref.evaluator.evaluate(ref.samples.x)
    log_w = -(table.potential / current.kT - ref.u0_over_kt)
    w = np.exp(log_w - log_w.max())
    return table, w, float(w.sum() ** 2 / (w * w).sum()) / len(w)


@dataclass
class _Setup:
    """What every stage of one fit shares."""

    scene: Scene
    keys: list
    out_dir: Path
    low: np.ndarray
    high: np.ndarray
    threads: int | None
    progress: Callable[[int, int, float, float], None] | None
    total: int  # iterations the progress bar counts (Adam's and the polish's)
    recorded: dict = field(default_factory=dict)  # fit.json's options and sources
    t0: float = field(default_factory=time.perf_counter)

    @property
    def energy_keys(self) -> list[str]:
        return list(energy_params(self.keys))

    def report(self, rows: list[FitRow], fit: Fit | None, size: float,
               done: bool = False) -> None:
        _write(self.out_dir, self.scene, self.keys, fit or Fit(rows, fitted(rows)),
               time.perf_counter() - self.t0, done, self.recorded)
        if self.progress is not None:
            self.progress(len(rows), self.total, rows[-1].loss, size)


def fit_by_reweighting(scene: Scene, out_dir: Path, *, iterations: int | None = None,
                       threshold: float = THRESHOLD, steps: int | None = None,
                       every: int | None = None, polish: int = POLISH_RUNS,
                       polish_steps: int | None = None, polish_every: int | None = None,
                       threads: int | None = None,
                       progress: Callable[[int, int, float, float], None] | None = None,
                       options: dict | None = None) -> Fit:
    """Minimise the scene's target loss over ``optimize.parameters`` (Adam at optimize.lr,
    within optimize.bounds), then polish by Gauss-Newton from at most ``polish`` fresh runs
    of ``polish_steps``, a frame every ``polish_every`` steps (0 runs: no polish; both
    ``every``s default to optimize.every, then to about 2000 frames a run); writes
    fit.csv, fit.json and best.yaml.

    fit.json is written first ("running", with ``options``, the command's, and the sources'
    hashes: what 'simrun resume' reads), and says "interrupted" or "failed" when the fit
    stops early."""
    require_canonical(scene)
    opt = scene.optimize
    keys = [parse_ensemble_key(scene, k) for k in opt.parameters]
    if with_role(keys, "objective"):
        raise SceneError(f"{scene.source}: targets have no parameters; tune the energies' "
                         "parameters or integrator.temperature")
    steps, iterations = steps or scene.steps, iterations or opt.iterations
    every, polish_every = every or opt.every, polish_every or opt.every
    out_dir.mkdir(parents=True, exist_ok=True)
    recorded = {"options": dict(options or {}), "sources": write_job_scene(out_dir, scene)}
    _write_record(out_dir, {"status": "running", "method": METHOD, **recorded})
    setup = _Setup(scene, keys, out_dir, *_bounds(opt, keys), threads, progress,
                   iterations + polish, recorded)
    try:
        rows = _adam(setup, iterations, threshold, steps, every)
        fit = Fit(rows, fitted(rows))
        if polish:
            fit = _polish(setup, fit, polish, polish_steps or POLISH_LENGTH * steps,
                          polish_every)
    except KeyboardInterrupt:
        _mark(out_dir, "interrupted", "stopped by the user; 'simrun resume' starts it again")
        raise
    except Exception as exc:
        _mark(out_dir, "failed", f"{type(exc).__name__}: {exc}")
        raise
    finish(len(fit.rows), lambda: setup.report(fit.rows, fit, 0.0, done=True),
           lambda why: _mark(out_dir, "failed", why))
    return fit


def fit_job(scene: Scene, out_dir: Path, options: dict | None = None, *,
            progress: Callable[[], AbstractContextManager] | None = None) -> Fit:
    """The fit job: `fit_by_reweighting` with ``options``' iterations and threads (and
    ``options`` recorded for 'simrun resume'), then its pictures (fit.png, rdf.png).
    ``progress()`` is entered around the fit and yields its progress callback."""
    from simrun.render.fit import draw_fit_pictures  # start-up: matplotlib

    options = dict(options or {})
    with (progress or (lambda: nullcontext(None)))() as report:
        fit = fit_by_reweighting(scene, out_dir, iterations=options.get("iterations"),
                                 threads=options.get("threads"), progress=report,
                                 options=options)
    draw_fit_pictures(out_dir)
    return fit


METHOD = "reweighting (DiffTRe)"


def _write_record(out_dir: Path, record: dict) -> None:
    atomic_write_text(out_dir / "fit.json", json.dumps(record, indent=2) + "\n")


def _mark(out_dir: Path, status: str, error: str) -> None:
    """fit.json says how the fit stopped (its other entries: as of the last iteration)."""
    try:
        record = json.loads((out_dir / "fit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(record, dict):
        _write_record(out_dir, {**record, "status": status, "error": error})


def _adam(setup: _Setup, iterations: int, threshold: float, steps: int, every: int | None
          ) -> list[FitRow]:
    """Adam over reweighted runs; a new run wherever N_eff / N falls below ``threshold``."""
    scene, keys, opt = setup.scene, setup.keys, setup.scene.optimize
    every, equilibrate = sampling_defaults(steps, every, None)
    vector = np.array([float(value_of(scene, k)) for k in keys])
    adam, rows, ref = Adam(opt.lr, opt.betas), [], None
    for it in range(iterations):
        current, stale = _scene_at(scene, keys, vector, f"the fit (Adam, iteration {it})"), None
        for attempt in range(2):
            if ref is None or attempt:
                ref = _reference(current, keys, setup.out_dir,
                                 0 if ref is None else ref.number + 1, steps, every,
                                 equilibrate, setup.threads)
            table, w, neff = _reweighted(ref, current, keys, vector)
            if neff >= threshold or ref.scene is current:
                break
            stale = neff
        series = ref.loss.series(current, table, setup.energy_keys, ref.samples.dof, w)
        out = ref.loss.estimate({name: s.mean(axis=0) for name, s in series.items()})
        grad = np.array([float(out[f"grad:{k.text}"]) for k in keys])
        rows.append(FitRow(it, float(out["loss"]), vector.copy(), neff, ref.number,
                           {n: np.asarray(out[f"avg:{n}"]) for n in ref.loss.names}, stale))
        setup.report(rows, None, float(np.linalg.norm(grad)))
        rate = learning_rate(opt.lr, opt.schedule, it, iterations)
        vector = project(adam.step(vector, grad, rate), setup.low, setup.high)
    return rows


def _clipped(step: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The step shortened (direction kept) so that no parameter moves by more than MAX_STEP
    of its value: the linearised averages hold near where they were sampled."""
    limit = MAX_STEP * np.maximum(np.abs(at), 1e-12)
    return step / max(1.0, float(np.max(np.abs(step) / limit)))


def _independent(scene: Scene, number: int) -> Scene:
    """The scene seeded for run ``number``: its own start velocities and thermostat noise, so
    that the polish's runs are independent samples (their spread is then their error)."""
    seed = (scene.seed + POLISH_SEED * number) % 2 ** 32
    integrator = scene.integrator
    if getattr(integrator, "seed", None) is not None:
        integrator = replace(integrator, seed=(integrator.seed + POLISH_SEED * number) % 2 ** 32)
    return replace(scene, seed=seed, integrator=integrator)


def _polish(setup: _Setup, fit: Fit, runs: int, steps: int, every: int | None) -> Fit:
    """Gauss-Newton steps from fresh, independently seeded runs at the current parameters.
    A run agrees when its step is within the errors of where it started and its own
    (`agreement` below the CONVERGED quantile of chi^2); the polish ends after POLISH_POOL
    runs in a row agree, or after ``runs`` runs, and the fitted parameters are the mean of
    those runs' landing points (`pooled`)."""
    from scipy.stats import chi2  # start-up: scipy.stats only for the polish

    scene, keys, rows = setup.scene, setup.keys, list(fit.rows)
    every, equilibrate = sampling_defaults(steps, every, None)
    vector, done, pool, chi2s, whole = fit.params.copy(), [], [], [], False
    for _ in range(runs):
        current = _scene_at(scene, keys, vector, "the fit (a Gauss-Newton step)")
        number = rows[-1].trajectory + 1
        ref = _reference(_independent(current, number), keys, setup.out_dir, number, steps,
                         every, equilibrate, setup.threads)
        series = ref.loss.series(current, ref.table, setup.energy_keys, ref.samples.dof)
        out = ref.loss.estimate({name: s.mean(axis=0) for name, s in series.items()})
        done.append(gauss_newton(current, ref.loss, series))
        rows.append(FitRow(len(rows), float(out["loss"]), vector.copy(), 1.0, ref.number,
                           {n: np.asarray(out[f"avg:{n}"]) for n in ref.loss.names},
                           stage="gauss-newton"))
        chi2s.append(agreement(done[-1], done[-2] if whole else None))
        pool = pool + [vector + done[-1].step] if chi2s[-1] <= chi2.ppf(CONVERGED, len(keys)) \
            else []
        landing = project(vector + _clipped(done[-1].step, vector), setup.low, setup.high)
        whole = bool(np.all(landing == vector + done[-1].step))
        result = _pooled_fit(rows, done, pool, landing, chi2s)
        setup.report(rows, result, float(np.linalg.norm(done[-1].step)))
        if result.converged:
            return result
        vector = landing
    return result


def _pooled_fit(rows: list[FitRow], done: list[Step], pool: list[np.ndarray],
                vector: np.ndarray, chi2s: list[float]) -> Fit:
    """The fit so far: converged (its runs pooled) once POLISH_POOL runs in a row agreed;
    else the last step applied, with that run's covariance."""
    if len(pool) < POLISH_POOL:
        return Fit(rows, vector, done[-1].covariance, done, chi2s=chi2s)
    together = pooled(pool[-POLISH_POOL:], done[-POLISH_POOL:])
    return Fit(rows, together.estimate, together.covariance, done, together, chi2s)


def _write(out_dir: Path, scene: Scene, keys: list, fit: Fit, wall: float,
           done: bool = False, recorded: dict | None = None) -> None:
    """fit.csv (iteration, loss, N_eff/N, trajectory, the N_eff/N of a run just replaced,
    parameters, stage), fit.json and best.yaml (the scene at the fitted parameters)."""
    names, rows = [k.text for k in keys], fit.rows
    lines = ["iteration,loss,neff,trajectory,replaced_neff," + ",".join(names) + ",stage"]
    lines += [f"{r.iteration},{r.loss!r},{r.neff:.4f},{r.trajectory},"
              f"{'' if r.stale is None else f'{r.stale:.4f}'},"
              + ",".join(repr(float(v)) for v in r.params) + f",{r.stage}" for r in rows]
    atomic_write_text(out_dir / "fit.csv", "\n".join(lines) + "\n")
    adam = [r for r in rows if r.stage == "adam"]
    best = min(adam, key=lambda r: r.loss)
    record = {"status": "done" if done else "running", "method": METHOD, "wall_s": round(wall, 2),
              "trajectories": len({r.trajectory for r in rows}),
              "fitted": _fitted_record(names, fit),
              "adam": {"params": dict(zip(names, map(float, fitted(adam)))),
                       "averaged_iterations": max(1, int(round(AVERAGED * len(adam))))},
              "lowest_loss": {"iteration": best.iteration, "loss": best.loss,
                       "params": dict(zip(names, map(float, best.params))),
                       "averages": {n: a.tolist() for n, a in best.averages.items()}},
              "targets": {n: (t.get("value") if "value" in t else str(t["file"]))
                          for n, t in scene.objective.targets.items()},
              "averages": {"first": {n: a.tolist() for n, a in rows[0].averages.items()},
                           "last": {n: a.tolist() for n, a in rows[-1].averages.items()}},
              **(recorded or {})}
    _write_record(out_dir, record)
    best_scene = _scene_at(scene, keys, fit.params)
    write_scene(out_dir / "best.yaml", relocate(best_scene.to_dict(),
                                                save_sources(out_dir, best_scene)))


def _fitted_record(names: list[str], fit: Fit) -> dict:
    """The fitted parameters, with (after a polish) their errors and the last fresh run's
    averages against the targets in units of their errors."""
    out: dict = {"params": dict(zip(names, map(float, fit.params))),
                 "from": "gauss-newton polish" if fit.steps else "mean of Adam's last iterates"}
    if not fit.steps:
        return out
    last, at = fit.steps[-1], [r for r in fit.rows if r.stage == "gauss-newton"][-1]
    out.update({"errors": dict(zip(names, map(float, fit.errors))),
                "covariance": fit.covariance.tolist(),
                "errors_gauss_newton": dict(zip(  # (J^T W J)^-1: bins independent
                    names, map(float, np.sqrt(np.diag(last.independent))))),
                "converged": bool(fit.converged), "last_step_chi2": fit.chi2s[-1],
                "polish_runs": len(fit.steps),
                "pooled": None if fit.pool is None else {  # the converged runs' landing points
                    "runs": fit.pool.runs, "spread_chi2": fit.pool.spread_chi2,
                    "spread_dof": (fit.pool.runs - 1) * len(names), "scale": fit.pool.scale},
                "last_run": {"trajectory": at.trajectory,
                             "params": dict(zip(names, map(float, at.params))),
                             "z": {n: (r / np.where(last.sigma[n] > 0, last.sigma[n],
                                                     np.inf)).tolist()
                                   for n, r in last.residuals.items()}}})
    return out
