"""Losses that are functions of ensemble averages (DiffTRe's): sum_j w_j (<O_j> - t_j)^2, the
mean over its bins for g(r), and their gradients by the fluctuation formula, optionally over
frames reweighted by exp(-beta dU) from the parameters they were sampled at.

g(r) is a histogram of pair distances (minimum image) per frame, over all pairs (``rdf``) or
a species pair's (``rdf[A:B]``, a mixture's partial g(r)): it depends on positions only, so
reweighting and the fluctuation formula need no derivative of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from simrun.ensemble.frames import FrameTable
from simrun.ensemble.observables import EnergyFrames, Observed, builtin, volume
from simrun.keys import Key
from simrun.scene import Scene, SceneError
from simrun.scene.rdf_csv import is_rdf, rdf_pair, read_rdf_csv
from simrun.scene.species import type_ids, type_order


def _rdf_table(path: Path) -> np.ndarray:
    """The rows of a g(r) CSV: r, g and optionally the standard error of g (checked)."""
    return read_rdf_csv(path)


def read_rdf(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(r, g) from a CSV with a header line and columns r,g (evenly spaced bin centres)."""
    data = _rdf_table(path)
    return data[:, 0], data[:, 1]


def _pair_filter(scene: Scene, pair: tuple[str, str] | None):
    """(i, j) -> which of the pairs a g(r) counts: all, or those of one A and one B (either
    order): g_AB(r) = V / (N_A N_B) <pairs at r> / shell (N_A (N_A - 1) / 2 like pairs)."""
    if pair is None:
        return None
    order = type_order(scene.particles.species)
    types = type_ids(scene.particles.species)
    a, b = (order.index(name) for name in pair)
    return lambda i, j: (((types[i] == a) & (types[j] == b))
                         | ((types[i] == b) & (types[j] == a)))


def rdf_frames(scene: Scene, frames: np.ndarray, centres: np.ndarray,
               pair: tuple[str, str] | None = None) -> np.ndarray:
    """g(r) per frame (n, bins) at the bin ``centres``, over all pairs or those of one
    species ``pair`` (minimum image)."""
    if scene.boundary.type != "periodic":
        raise SceneError(f"{scene.objective.where}: g(r) needs a periodic box")
    low = np.asarray(scene.boundary.low, float)
    length = np.asarray(scene.boundary.high, float) - low
    dr = centres[1] - centres[0]
    edges = np.append(centres - dr / 2, centres[-1] + dr / 2)
    keep = _pair_filter(scene, pair)
    i, j = np.triu_indices(frames.shape[1], 1)
    if keep is not None:
        i, j = i[keep(i, j)], j[keep(i, j)]
    shells = 4.0 / 3.0 * np.pi * np.diff(edges ** 3) if frames.shape[2] == 3 else \
        np.pi * np.diff(edges ** 2)
    ideal = len(i) * shells / volume(scene)  # pairs expected per bin in an ideal gas
    near = frames.shape[1] > NEAR_FROM
    out = np.empty((len(frames), len(centres)))
    for t, x in enumerate(frames):
        a, b = _near_pairs(x - low, length, edges[-1], keep) if near else (i, j)
        d = x[b] - x[a]
        d -= length * np.round(d / length)
        out[t] = np.histogram(np.sqrt((d * d).sum(axis=1)), bins=edges)[0] / ideal
    return out


NEAR_FROM = 300  # particles: from here a k-d tree finds the candidate pairs (1000: ~5x)


def _near_pairs(x: np.ndarray, length: np.ndarray, reach: float, keep
                ) -> tuple[np.ndarray, np.ndarray]:
    """The pairs i < j (those ``keep`` keeps) within ``reach`` of each other, as a periodic
    k-d tree finds them with a margin: a superset of those the histogram counts, whose
    distances are then taken as for all pairs, so the counts are the same."""
    from scipy.spatial import cKDTree  # start-up: scipy.spatial only for large g(r)s

    inside = np.mod(x, length)
    inside[inside >= length] = 0.0  # mod of a tiny negative number can round to length
    found = cKDTree(inside, boxsize=length).query_pairs(reach * (1 + 1e-9) + 1e-12,
                                                        output_type="ndarray")
    a, b = found[:, 0], found[:, 1]
    if keep is not None:
        mask = keep(a, b)
        a, b = a[mask], b[mask]
    return a, b


def target_observables(scene: Scene, table: FrameTable, energy_keys: list[str], dof: int,
                       rdf: dict[str, np.ndarray]) -> dict[str, Observed]:
    """The per-frame observables the scene's targets name (``rdf``, ``rdf[A:B]``: from
    ``rdf_frames``, by name)."""
    return {name: Observed(rdf[name]) if is_rdf(name) else
            builtin(name, scene, table, energy_keys, dof) for name in scene.objective.targets}


def rdf_targets_frames(scene: Scene, x: np.ndarray) -> dict[str, np.ndarray]:
    """g(r) per frame for each g(r) target of the scene, at its file's bins."""
    return {name: rdf_frames(scene, x, read_rdf(t["file"])[0], rdf_pair(name))
            for name, t in scene.objective.targets.items() if is_rdf(name)}


def target_values(scene: Scene) -> dict[str, np.ndarray]:
    return {name: read_rdf(t["file"])[1] if is_rdf(name) else np.array([t["value"]])
            for name, t in scene.objective.targets.items()}


def target_errors(scene: Scene) -> dict[str, np.ndarray]:
    """The targets' own standard errors (``error:``; g(r): a third CSV column), 0 if not
    given."""
    out = {}
    for name, t in scene.objective.targets.items():
        if is_rdf(name):
            data = _rdf_table(t["file"])
            out[name] = data[:, 2] if data.shape[1] == 3 else np.zeros(len(data))
        else:
            out[name] = np.array([float(t.get("error", 0.0))])
    return out


def loss_series(observed: dict[str, Observed], keys: list[Key], table: FrameTable,
                energy_keys: list[str], kt: float, weights: np.ndarray | None = None,
                boltz: float = 1.0) -> dict[str, np.ndarray]:
    """Per-frame series (times the reweighting weights, which average to 1) whose means the
    loss and its gradient are functions of."""
    n = len(table.potential)
    w = np.ones(n) if weights is None else weights * (n / weights.sum())
    series = {"w": w}
    frames = EnergyFrames(table, kt, energy_keys, boltz)
    for key in keys:
        k, c = key.text, key.spec.density(key, frames)
        series[f"c:{k}"] = w * c
        for name, obs in observed.items():
            a = key.spec.partial(key, obs)
            series[f"a:{name}:{k}"] = w[:, None] * np.broadcast_to(np.asarray(a, float),
                                                                   obs.values.shape)
            series[f"oc:{name}:{k}"] = w[:, None] * obs.values * c[:, None]
    for name, obs in observed.items():
        series[f"o:{name}"] = w[:, None] * obs.values
    return series


def loss_estimator(targets: dict[str, np.ndarray], weights: dict[str, float],
                   keys: list[str]) -> Callable[[dict], dict]:
    """Means -> the loss, each <O_j> (``avg:<name>``) and dloss/dKEY (weighted means: every
    mean divided by that of the weights); works on means with a leading axis too."""

    def estimate(m: dict) -> dict:
        w = m["w"][..., None]
        out, loss = {}, 0.0
        grads = {k: 0.0 for k in keys}
        for name, t in targets.items():
            avg = m[f"o:{name}"] / w
            out[f"avg:{name}"] = avg
            loss = loss + weights[name] * np.mean((avg - t) ** 2, axis=-1)
            for k in keys:
                c = (m[f"c:{k}"] / m["w"])[..., None]
                d = m[f"a:{name}:{k}"] / w - (m[f"oc:{name}:{k}"] / w - avg * c)
                out[f"d:{name}:{k}"] = d
                grads[k] = grads[k] + weights[name] * np.mean(2 * (avg - t) * d, axis=-1)
        out["loss"] = loss
        out.update({f"grad:{k}": g for k, g in grads.items()})
        return out

    return estimate


class TargetLoss:
    """The scene's targets' loss over one set of frames (positions ``x``): g(r) per frame is
    taken once; ``series`` then needs the frames' energy table at the parameters wanted."""

    def __init__(self, scene: Scene, keys: list[Key], x: np.ndarray) -> None:
        targets = scene.objective.targets
        self.parsed, self.keys = keys, [k.text for k in keys]  # the KEYs, and their texts
        self.rdf = rdf_targets_frames(scene, x)
        self.names = list(targets)
        self.estimate = loss_estimator(target_values(scene),
                                       {n: t["weight"] for n, t in targets.items()}, self.keys)

    def series(self, scene: Scene, table: FrameTable, energy_keys: list[str], dof: int,
               weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
        observed = target_observables(scene, table, energy_keys, dof, self.rdf)
        return loss_series(observed, self.parsed, table, energy_keys,
                           scene.kT, weights, scene.constants.boltz)
