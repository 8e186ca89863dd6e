"""The ``optimize:`` section: what `simrun optimize` tunes and with which optimiser.

Only what the YAML alone can tell is checked here (types, ranges, options that the chosen
optimiser does not take, bounds of keys that are not parameters); whether each parameter is
a differentiable KEY of the scene is checked when its kernels are loaded (`simrun check`)."""

from __future__ import annotations

import math

from yaml.nodes import MappingNode, Node, ScalarNode

from simrun.scene.errors import error_at, shorten, where
from simrun.scene.nodes import (
    MapReader,
    as_bool,
    as_choice,
    as_float,
    as_int,
    as_seq,
    as_str,
    scalar,
)
from simrun.scene.schema import OPTIMIZERS, SCHEDULES, Optimize, Schedule

KEYS = ("parameters", "optimizer", "lr", "iterations", "clip", "bounds", "tolerance", "betas",
        "momentum", "nesterov", "schedule", "weight_decay", "normalize", "clip_epsilon",
        "every")
ONLY = {"lr": ("adam", "sgd"), "clip": ("adam", "sgd"), "clip_epsilon": ("adam", "sgd"),
        "betas": ("adam",),
        "momentum": ("sgd",), "nesterov": ("sgd",), "schedule": ("adam", "sgd"),
        "weight_decay": ("adam", "sgd"), "normalize": ("sgd",)}
# what each schedule type reads besides `type` and `warmup`
SCHEDULE_KEYS = {"constant": (), "cosine": ("min_lr",), "step": ("every", "gamma"),
                 "exponential": ("gamma",)}
WHY = {"lbfgs": "L-BFGS-B chooses its steps by a line search and needs the true gradient"}


def optimize(node: Node | None, has_objective: bool) -> Optimize | None:
    if node is None:
        return None
    r = MapReader(node, "optimize")
    r.done(KEYS)
    if not has_objective:
        raise error_at(node, "'optimize' minimises the scene's 'objective', but the scene has "
                       "none", "Add e.g. 'objective: {kernel: kernels/targets.py:miss}'")
    names, places = _parameters(r.require("parameters", "Add 'parameters: [initial.velocity]'"))
    kind_node = r.get("optimizer")
    kind = as_choice(kind_node, "optimize.optimizer", OPTIMIZERS) if kind_node else "adam"
    for key, allowed in ONLY.items():
        if r.get(key) is not None and kind not in allowed:
            why = WHY.get(kind, f"'{key}' applies to {' and '.join(allowed)} only")
            raise error_at(r.key_node(key), f"'optimize.{key}' does not apply to the '{kind}' "
                           f"optimizer ({why})", f"Remove '{key}', or use {allowed[0]}")
    opts = {}
    if r.get("lr") is not None:
        opts["lr"] = as_float(r.get("lr"), "optimize.lr", positive=True)
    if r.get("clip") is not None:
        opts["clip"] = as_float(r.get("clip"), "optimize.clip", positive=True)
    if r.get("clip_epsilon") is not None:  # DiffTaichi's clip / (|g| + 1e-4)
        if "clip" not in opts:
            raise error_at(r.key_node("clip_epsilon"), "'optimize.clip_epsilon' is added to "
                           "the gradient's norm where 'clip' scales it, but there is no "
                           "'clip'", "Add 'clip', or remove 'clip_epsilon'")
        opts["clip_epsilon"] = as_float(r.get("clip_epsilon"), "optimize.clip_epsilon",
                                        nonnegative=True)
    if r.get("betas") is not None:
        opts["betas"] = _betas(r.get("betas"))
    if r.get("momentum") is not None:
        opts["momentum"] = _unit(r.get("momentum"), "optimize.momentum")
    if r.get("nesterov") is not None:
        opts["nesterov"] = as_bool(r.get("nesterov"), "optimize.nesterov")
        if opts["nesterov"] and not opts.get("momentum"):
            raise error_at(r.get("nesterov"), "Nesterov momentum needs 'momentum' > 0",
                           "Add e.g. 'momentum: 0.9'")
    if r.get("schedule") is not None:
        opts["schedule"] = _schedule(r.get("schedule"), opts.get("lr", 0.05))
    if r.get("normalize") is not None:
        opts["normalize"] = as_bool(r.get("normalize"), "optimize.normalize")
        if opts["normalize"] and "clip" in opts:
            raise error_at(r.get("normalize"), "'normalize' scales every gradient to norm 1, "
                           "so 'clip' would never act", "Remove 'clip' (lr is the step length)")
    if r.get("every") is not None:  # ensemble targets: a frame every N steps of each run
        opts["every"] = as_int(r.get("every"), "optimize.every", 1)
    if r.get("weight_decay") is not None:
        opts["weight_decay"] = as_float(r.get("weight_decay"), "optimize.weight_decay",
                                        nonnegative=True)
    loss_tol, grad_tol = _tolerance(r.get("tolerance"))
    iterations = as_int(r.get("iterations"), "optimize.iterations", 1) \
        if r.get("iterations") is not None else 100
    return Optimize(names, kind, iterations, bounds=_bounds(r.get("bounds"), names),
                    tolerance_loss=loss_tol, tolerance_gradient=grad_tol, where=places, **opts)


def _parameters(node: Node) -> tuple[tuple[str, ...], dict[str, str]]:
    items = as_seq(node, "optimize.parameters")
    if not items:
        raise error_at(node, "'optimize.parameters' is empty",
                       "List the KEYs to tune, e.g. [initial.velocity, energy.0.params.k]")
    names: list[str] = []
    places: dict[str, str] = {}
    for i, item in enumerate(items):
        name = as_str(item, f"optimize.parameters[{i}]")
        if name in places:
            raise error_at(item, f"parameter '{shorten(name)}' is listed twice",
                           "Keep only one of them")
        names.append(name)
        places[name] = where(item)
    if "state.v0" in places and "initial.velocity" in places:
        raise error_at(node, "'state.v0' (every start velocity) already includes "
                       "'initial.velocity'", "Tune one of them")
    return tuple(names), places


def _unit(node: Node, name: str) -> float:
    value = as_float(node, name, nonnegative=True)
    if value >= 1:
        raise error_at(node, f"'{name}' is {value:g} but must be below 1", "Use e.g. 0.9")
    return value


def _betas(node: Node) -> tuple[float, float]:
    items = as_seq(node, "optimize.betas", 2)
    b1, b2 = (_unit(n, f"optimize.betas[{i}]") for i, n in enumerate(items))
    return b1, b2


def _bound(node: Node, name: str, default: float) -> float:
    if isinstance(node, ScalarNode) and scalar(node) is None:
        return default
    value = scalar(node) if isinstance(node, ScalarNode) else None
    if isinstance(value, float) and math.isinf(value):
        return value
    return as_float(node, name)


def _bounds(node: Node | None, names: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    if node is None:
        return {}
    r = MapReader(node, "optimize.bounds")
    out: dict[str, tuple[float, float]] = {}
    for key, (key_node, value) in r.items.items():
        if key not in names:
            raise error_at(key_node, f"'optimize.bounds' names '{shorten(key)}', which is not "
                           "one of 'optimize.parameters'", "Add it to 'parameters', or fix "
                           f"the name ({', '.join(names)})")
        low_node, high_node = as_seq(value, f"optimize.bounds.{key}", 2)
        low = _bound(low_node, f"optimize.bounds.{key}[0]", -math.inf)
        high = _bound(high_node, f"optimize.bounds.{key}[1]", math.inf)
        if not low <= high:
            raise error_at(value, f"the bounds of '{key}' are empty: {low:g} > {high:g}",
                           "Write [low, high] with low <= high (null for no bound)")
        out[key] = (low, high)
    return out


def _schedule(node: Node, lr: float) -> Schedule:
    """A type name (`cosine`) or a mapping {type: cosine, warmup: 10, min_lr: 1e-4}."""
    if not isinstance(node, MappingNode):
        return Schedule(as_choice(node, "optimize.schedule", SCHEDULES))
    r = MapReader(node, "optimize.schedule")
    kind = as_choice(r.require("type", "Add e.g. 'type: cosine'"), "optimize.schedule.type",
                     SCHEDULES)
    r.done(("type", "warmup", *SCHEDULE_KEYS[kind]), context=f" for a '{kind}' schedule")
    opts: dict = {}
    if r.get("warmup") is not None:
        opts["warmup"] = as_int(r.get("warmup"), "optimize.schedule.warmup", 0)
    if r.get("every") is not None:
        opts["every"] = as_int(r.get("every"), "optimize.schedule.every", 1)
    if r.get("gamma") is not None:
        opts["gamma"] = as_float(r.get("gamma"), "optimize.schedule.gamma", positive=True)
        if opts["gamma"] > 1:
            raise error_at(r.get("gamma"), f"'optimize.schedule.gamma' is {opts['gamma']:g}, "
                           "but a decay factor must be at most 1", "Use e.g. 0.5")
    if r.get("min_lr") is not None:
        opts["min_lr"] = as_float(r.get("min_lr"), "optimize.schedule.min_lr", nonnegative=True)
        if opts["min_lr"] > lr:
            raise error_at(r.get("min_lr"), f"'optimize.schedule.min_lr' ({opts['min_lr']:g}) "
                           f"is above 'lr' ({lr:g}): the cosine would climb",
                           "Use a min_lr below lr, e.g. lr / 100")
    return Schedule(kind, **opts)


def _tolerance(node: Node | None) -> tuple[float | None, float | None]:
    """A number (stop when the loss or the gradient norm falls below it) or a mapping
    {loss: a, gradient: b}."""
    if node is None:
        return None, None
    if not isinstance(node, MappingNode):
        tol = as_float(node, "optimize.tolerance", nonnegative=True)
        return tol, tol
    r = MapReader(node, "optimize.tolerance")
    r.done(("loss", "gradient"))
    return tuple(as_float(r.get(k), f"optimize.tolerance.{k}", nonnegative=True)
                 if r.get(k) is not None else None for k in ("loss", "gradient"))
