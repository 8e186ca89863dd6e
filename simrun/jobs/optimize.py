"""The optimize job's training loop: `optimize_scene(scene, out_dir)` minimises the scene's objective over
`optimize.parameters`, one exact trajectory gradient (`scene_gradient`) per evaluation.

Resume replays: every evaluation (parameters, loss, gradient) is journaled in state.npz, and
--resume runs the optimiser again from the start, answering each evaluation whose parameters
are bit for bit the journaled ones from the journal. The optimisers are deterministic, so the
replay retraces the same iterates (L-BFGS-B's line searches included) and then goes on
computing: the numbers are those of a run never stopped, for every optimiser alike."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simrun.jobs.finish import finish
from simrun.jobs.grad import field_start_values, scene_gradient
from simrun.jobs.options import memory_bytes
from simrun.jobs.reuse import TrajectoryCache
from simrun.jobs.run import run_job
from simrun.optimize.optimizers import SGD, Adam, clip_norm, normalized, project
from simrun.optimize.params import Layout
from simrun.optimize.record import Journal, Paced, Record
from simrun.optimize.schedules import learning_rate
from simrun.outputs.provenance import refuse_changed
from simrun.scene import Scene, SceneError, load_scene

# (iteration, iterations, loss, gradient norm) after each iteration
Progress = Callable[[int, int, float, float], None]
# a context around the training (the CLI's progress bar) that yields its progress callback
ProgressScope = Callable[[], AbstractContextManager[Progress | None]]


class OptimizeError(Exception):
    """A NaN or infinite loss or gradient: the training stops, the best so far is kept."""

    def __init__(self, message: str, result: OptimizeResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class OptimizeResult:
    status: str  # done (all iterations) | converged (tolerance) | failed | interrupted
    out_dir: Path
    iterations: int  # the last completed iteration
    losses: list[float]
    grad_norms: list[float]
    best_iteration: int
    best_loss: float
    best: dict[str, np.ndarray | float] = field(default_factory=dict)
    evaluations: int = 0
    replayed: int = 0
    seconds: float = 0.0


class _NonFinite(Exception):
    pass


class _Evaluator:
    """J and dJ/dp at a parameter vector: from the journal while replaying, else computed."""

    def __init__(self, layout: Layout, journal: Journal, path: Path, threads: int | None,
                 memory: int | None = None):
        self.layout, self.journal, self.path, self.threads = layout, journal, path, threads
        self.memory = memory  # bytes for each gradient's stored states (None: grad's default)
        self.count = self.replayed = 0
        self.offset = journal.wall[-1] if journal.wall else 0.0
        self.t0 = time.perf_counter()
        self.cache = TrajectoryCache()  # one System for all evaluations of the same scene
        self.saves = Paced()

    def __call__(self, vector: np.ndarray) -> tuple[float, np.ndarray, float]:
        j = self.journal
        i, self.count = self.count, self.count + 1
        if i < len(j.x):
            if np.array_equal(j.x[i], vector):
                self.replayed += 1
                return j.loss[i], j.grad[i], j.wall[i]
            j.truncate(i)  # the record diverged (another SciPy?): compute from here on
        loss, grad = self._compute(vector)
        wall = self.offset + time.perf_counter() - self.t0
        j.x.append(vector.copy())
        j.loss.append(loss)
        j.grad.append(grad)
        j.wall.append(wall)
        self.saves(j.saver(self.path))
        return loss, grad, wall

    def _compute(self, vector: np.ndarray) -> tuple[float, np.ndarray]:
        scene, start = self.layout.scene_at(vector)
        try:
            result = scene_gradient(scene, self.layout.keys,
                                    threads=self.threads, memory=self.memory, start=start,
                                    fields=self.layout.fields_at(vector), cache=self.cache)
        except FloatingPointError:
            return float("nan"), np.full_like(vector, np.nan)
        grad = self.layout.pack(result.gradients)
        return float(result.objective), grad


def optimize_scene(scene: Scene, out_dir: str | Path, *, iterations: int | None = None,
                   resume: bool = False, threads: int | None = None,
                   progress: Progress | None = None, allow_changed: bool = False,
                   options: dict | None = None) -> OptimizeResult:
    """Minimise `scene.objective` over `scene.optimize.parameters`, writing `out_dir`.

    A resume replays evaluations made with the recorded kernel sources, so it is refused
    (SceneError naming the change) when they were edited since, unless `allow_changed`;
    `options` (the command's) go to optimize.json for 'simrun resume'; their `memory`
    (--memory: text such as 64M, or bytes) bounds each gradient's stored states.

    Raises SceneError for a bad parameter or bounds (before anything is computed),
    OptimizeError for a NaN loss or gradient (the folder keeps the best parameters), and
    lets KeyboardInterrupt through after marking the folder interrupted."""
    if scene.optimize is None:
        raise SceneError(f"{scene.source}: the scene has no 'optimize' section. Add e.g. "
                         "'optimize: {parameters: [initial.velocity], iterations: 100}'.")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    layout = Layout.of(scene, field_start_values)
    start = layout.initial()
    layout.check_start(start)
    n_iter = scene.optimize.iterations if iterations is None else iterations
    state = out_dir / "state.npz"
    if resume:
        refuse_changed(out_dir, _recorded_sources(out_dir), scene, allow_changed)
    journal = Journal.load(state) if resume and state.is_file() else Journal()
    evaluate = _Evaluator(layout, journal, state, threads, memory_bytes(options or {}))
    record = Record(out_dir, layout, options)
    run = _Run(layout, record, evaluate, n_iter, progress or (lambda *_: None))
    record.write_json("running")
    t0 = time.perf_counter()
    try:
        status = run.lbfgs(start) if scene.optimize.optimizer == "lbfgs" else run.first_order(start)
    except _NonFinite as exc:
        result = run.result("failed", t0)
        record.write_json("failed", str(exc))
        raise OptimizeError(str(exc), result) from None
    except KeyboardInterrupt:
        record.write_json("interrupted", "stopped by the user; --resume continues")
        raise
    except Exception as exc:  # a KEY moved past its LIMITS, a kernel that does not compile,
        record.write_json("failed", str(exc) or type(exc).__name__)  # never left 'running'
        raise
    finally:  # the paced files (state.npz, params.npz) as of the last iteration
        evaluate.saves.flush()
        record.flush()
    finish(len(record.rows), lambda: record.write_json(status),
           lambda why: record.write_json("failed", why))
    return run.result(status, t0)


def optimize_job(scene: Scene, out_dir: Path, *, iterations: int | None = None,
                 resume: bool = False, threads: int | None = None,
                 options: dict | None = None, progress: ProgressScope | None = None,
                 allow_changed: bool = False, episode: bool = False
                 ) -> tuple[OptimizeResult, str | None]:
    """The optimize job: `optimize_scene` (``options``, the command's, recorded for
    'simrun resume'), loss.png (also when it fails), and with ``episode`` best.yaml run
    into DIR/episode with its pictures. Returns the result and why the episode's pictures
    were not drawn (None: they were, or no episode)."""
    from simrun.render.loss import render_loss  # start-up: matplotlib

    try:
        with (progress or (lambda: nullcontext(None)))() as report:
            result = optimize_scene(scene, out_dir, iterations=iterations, resume=resume,
                                    threads=threads, progress=report,
                                    allow_changed=allow_changed, options=options)
    except OptimizeError:
        render_loss(out_dir / "loss.csv", out_dir / "loss.png", title=scene.name)
        raise
    render_loss(out_dir / "loss.csv", out_dir / "loss.png", title=scene.name)
    if not episode:
        return result, None
    best = load_scene(out_dir / "best.yaml")
    return result, run_job(best, out_dir / "episode", threads=threads).render_error


def _recorded_sources(out_dir: Path) -> list | None:
    try:
        return json.loads((out_dir / "optimize.json").read_text(encoding="utf-8")).get("sources")
    except (OSError, ValueError, AttributeError):
        return None


class _Run:
    def __init__(self, layout: Layout, record: Record, evaluate: _Evaluator, iterations: int,
                 progress: Progress) -> None:
        self.layout, self.record, self.evaluate = layout, record, evaluate
        self.iterations, self.progress = iterations, progress
        self.opt = layout.scene.optimize

    def _accept(self, it: int, vector: np.ndarray, loss: float, grad: np.ndarray,
                wall: float) -> bool:
        """Record iteration `it`; True when the tolerance is met."""
        row = self.record.add(it, vector, loss, grad, wall)
        self.progress(it, self.iterations, loss, row.grad_norm)
        if not (np.isfinite(loss) and np.all(np.isfinite(grad))):
            what = "loss" if not np.isfinite(loss) else "gradient"
            best = self.record.best
            kept = (f"; the best parameters so far (iteration {best.iteration}, loss "
                    f"{best.loss:.6g}) are in best.yaml" if best else "")
            raise _NonFinite(f"iteration {it}: the {what} is not finite ({loss=}, gradient "
                             f"norm {row.grad_norm}){kept}. Lower lr, add clip or bounds, or "
                             "shorten the horizon")
        tl, tg = self.opt.tolerance_loss, self.opt.tolerance_gradient
        return bool((tl is not None and loss <= tl) or (tg is not None and row.grad_norm <= tg))

    def first_order(self, vector: np.ndarray) -> str:
        opt = self.opt
        method = Adam(opt.lr, opt.betas, opt.weight_decay) if opt.optimizer == "adam" else \
            SGD(opt.lr, opt.momentum, opt.nesterov, opt.weight_decay)
        low, high = self.layout.bounds()
        for it in range(self.iterations + 1):
            loss, grad, wall = self.evaluate(vector)
            if self._accept(it, vector, loss, grad, wall):
                return "converged"
            if it < self.iterations:
                lr = learning_rate(opt.lr, opt.schedule, it, self.iterations)
                used = normalized(grad) if opt.normalize else \
                    clip_norm(grad, opt.clip, opt.clip_epsilon)
                vector = project(method.step(vector, used, lr), low, high)
        return "done"

    def lbfgs(self, vector: np.ndarray) -> str:
        from scipy.optimize import Bounds, minimize  # start-up: scipy only for L-BFGS

        seen: dict[bytes, tuple[float, np.ndarray, float]] = {}
        state = {"it": 0, "converged": False}

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            loss, grad, wall = self.evaluate(x)
            first = not seen
            seen[x.tobytes()] = (loss, grad, wall)
            if first and self._accept(0, x, loss, grad, wall):
                state["converged"] = True
                raise StopIteration
            if not (np.isfinite(loss) and np.all(np.isfinite(grad))):
                self._accept(state["it"] + 1, x, loss, grad, wall)  # raises _NonFinite
            return loss, grad

        def callback(intermediate_result) -> None:
            x = intermediate_result.x
            state["it"] += 1
            # SciPy hands back the point it evaluated last; evaluate again should it not
            values = seen.get(x.tobytes()) or self.evaluate(x)
            if self._accept(state["it"], x, *values):
                state["converged"] = True
                raise StopIteration

        low, high = self.layout.bounds()
        try:
            found = minimize(fun, vector, jac=True, method="L-BFGS-B", bounds=Bounds(low, high),
                             callback=callback, options={
                                 "maxiter": self.iterations,
                                 "gtol": self.opt.tolerance_gradient or 0.0,
                                 "ftol": 1e-15 if self.opt.tolerance_loss else 2.2e-9})
        except StopIteration:
            return "converged"
        # SciPy's own tests (relative reduction, projected gradient) also mean converged
        return "converged" if state["converged"] or (found.success and found.nit <
                                                     self.iterations) else "done"

    def result(self, status: str, t0: float) -> OptimizeResult:
        rows, best = self.record.rows, self.record.best
        return OptimizeResult(
            status, self.record.dir, rows[-1].iteration if rows else -1,
            [r.loss for r in rows], [r.grad_norm for r in rows],
            best.iteration if best else -1, best.loss if best else float("nan"),
            self.layout.unpack(best.params) if best else {}, self.evaluate.count,
            self.evaluate.replayed, time.perf_counter() - t0)
