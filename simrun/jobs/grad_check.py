"""`simrun grad --check`: the reverse-mode gradient against central differences and a Taylor
test, with a verdict that is ok, failed or inconclusive, never ok when it cannot tell.

A check cannot tell when J's own rounding (about 1e3 eps |J| over a few thousand rounded
terms) swamps what a step h moves it by: the finite difference then carries no digit of the
gradient and every Taylor remainder is rounding. The check then tries larger steps (up to a
tenth of the KEY's size) and says "inconclusive" with the reason where none resolves it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simrun.jobs.grad import GradResult, objective_value
from simrun.jobs.horizon import adjoint_growth
from simrun.keys import Key, parse_keys, value_of, with_checked_values
from simrun.scene import Scene

RESOLVED = 0.05  # a difference resolves a gradient when its own error is under 5% of it
STEP_CAP = 0.1  # the largest step tried, as a fraction of the KEY's size (or of 1)
# a KEY at its kernel's limit: central differences step to both sides of it
CHECK_FIX = ("check {key} a little inside its limit (--set it there: the check steps up to "
             f"{STEP_CAP:g} of its size to either side), or run without --check")


def _rounding(scene: Scene, objective: float) -> float:
    """J's rounding: a few thousand rounded terms, each off by eps relative."""
    eps = np.finfo(np.float64 if scene.precision == "f64" else np.float32).eps
    return 1e3 * float(eps) * abs(objective)


def _perturbed(scene: Scene, key: Key, base, delta) -> tuple[Scene, dict]:
    """The scene with KEY moved by delta, and the start's shifts (state.x0 / state.v0)."""
    if key.spec.lives != "scene":  # the start's x or v, or an allocated field
        return scene, {key.text: np.asarray(delta, float)}
    value = np.asarray(base, float) + delta
    return with_checked_values(scene, [(key, value if np.ndim(value) else float(value))],
                               "--check's finite difference", CHECK_FIX, f"--wrt {key.text}"), {}


def _central(scene: Scene, key: Key, base, delta, steps: int, threads) -> float:
    """(J(p + delta) - J(p - delta)) / 2."""
    values = []
    for sign in (1, -1):
        moved, shifts = _perturbed(scene, key, base, sign * delta)
        values.append(objective_value(moved, steps, threads, shifts))
    return (values[0] - values[1]) / 2


def check_gradient(scene: Scene, result: GradResult, *, threads: int | None = None,
                   seed: int = 0) -> dict[str, Any]:
    """Central differences along one direction per KEY (the unit for scalars, a random unit
    vector for arrays) and a Taylor test along all KEYs at once: the first-order remainder
    |J(p + h d) - J(p) - h dJ.d| must fall as h^2.

    A KEY agrees when AD and FD differ by at most the tolerance, or by at most three times
    FD's own error (its change from h to 2h, never under J's rounding over h); it is
    inconclusive when that error is more than 5% of the gradient at every step tried.
    ``verdict`` is "ok" only when every KEY and the Taylor test concluded and agree."""
    rng = np.random.default_rng(seed)
    steps, keys = result.steps, parse_keys(scene, result.keys or list(result.gradients))
    tol = 1e-5 if scene.precision == "f64" else 3e-2
    rows, directions = [], {}
    for key in keys:
        base = result.field_values[key.text] if key.spec.lives == "fields" else \
            value_of(scene, key)
        d = rng.normal(size=np.shape(base)) if np.ndim(base) else np.array(1.0)
        d = d / max(float(np.linalg.norm(d)), 1e-300)
        directions[key.text] = (key, base, d)
        ad = float(np.sum(np.asarray(result.gradients[key.text], float) * d))
        rows.append(_row(scene, result, key, base, d, ad, tol, threads))
    taylor = _taylor(scene, result, directions, steps, threads)
    if taylor["verdict"] == "failed" and _not_smooth(rows, taylor, tol):
        taylor["verdict"] = "inconclusive"
        taylor["why"] = (
            f"its remainders fall at order {taylor['order']:.2f}, not 2, while central "
            f"differences agree with the gradient to "
            f"{max(r['rel_error'] for r in rows):.1e}: J is not smooth over the test's steps "
            f"(from {taylor['h'] / 8:g} of the KEYs' sizes; it jumps or kinks there, as where "
            "pairs cross a potential's cutoff), so the gradient, J's derivative where J has "
            "one, cannot predict J's change over such steps")
    kinked = _kinked(rows, tol)
    if taylor["verdict"] == "failed" and kinked and all(r["verdict"] == "ok" for r in rows):
        row = max(kinked, key=lambda r: r["fd_change"] / max(r["fd_rounding"], 1e-300))
        taylor["verdict"] = "inconclusive"
        taylor["why"] = (
            f"its remainders fall at order {taylor['order']:.2f}, not 2, while central "
            "differences agree with the gradient within their own error, and that error is "
            f"J's, not rounding: for {row['key']} their change from step h to 2h "
            f"({row['fd_change']:.2g}) is {row['fd_change'] / row['fd_rounding']:.2g}x what "
            "J's rounding explains. J is not smooth down to the differences' steps (pairs "
            "crossing a potential's cutoff, a wall, a branch), so neither test can tell a "
            "gradient error within that from J's own kinks")
    growth = adjoint_growth(result.adjoint_horizon, scene.dt)
    if growth is not None:  # chaos: no finite step is small enough to test the gradient
        for part in (*rows, taylor):
            if part["verdict"] == "failed":
                part["verdict"], part["ok"] = "inconclusive", False
                part["why"] = ("J(p +- h) lie on trajectories that have parted for any "
                               "step h finite differences can take (chaos, below)")
    verdicts = {r["verdict"] for r in rows} | {taylor["verdict"]}
    verdict = "failed" if "failed" in verdicts else \
        "inconclusive" if "inconclusive" in verdicts else "ok"
    out = {"rows": rows, "taylor": taylor, "tolerance": tol, "verdict": verdict,
           "ok": verdict == "ok"}
    if growth is not None:
        out["chaos"] = growth
    return out


def _not_smooth(rows: list[dict], taylor: dict, tol: float) -> bool:
    """Whether a failed Taylor test says J is not smooth rather than the gradient wrong.

    Central differences at a small step agree with the gradient to the tolerance: a gradient
    off by e would differ from them by about e, so e is at most their agreement (taken no
    smaller than a thousandth of the tolerance, what FD itself can pin). If every remainder
    keeps a first-order part (|remainder| / h) 10x beyond what such a gradient could leave,
    J's change over the Taylor steps holds more than its derivative: J jumps or kinks
    there. The Taylor test adds nothing else on the gradient: it moves along the rows'
    directions."""
    if not rows or any(r["verdict"] != "ok" or r["rel_error"] > tol for r in rows):
        return False
    allowed = max(max(r["rel_error"] for r in rows), 1e-3 * tol) * taylor["scale"]
    return all(r / (taylor["h"] / 2**k) > 10 * allowed
               for k, r in enumerate(taylor["residuals"]))


def _kinked(rows: list[dict], tol: float) -> list[dict]:
    """Rows whose central difference moved from step h to 2h by more than 10x what J's
    rounding explains and by more than the tolerance: J kinks or jumps at the differences'
    own scale (a smooth J's difference moves by h^2 times its third derivative, far below
    both)."""
    return [r for r in rows if r["fd_change"] > 10 * r["fd_rounding"]
            and r["fd_change"] > tol * r["scale"]]


def _row(scene: Scene, result: GradResult, key: Key, base, d, ad: float, tol: float,
         threads) -> dict[str, Any]:
    """One KEY's comparison; where the first step cannot resolve the gradient, the smallest
    larger step (x10 each, up to STEP_CAP of the KEY's size) that does."""
    size = (float(np.max(np.abs(base))) if np.size(base) else 0.0) or 1.0
    eps = (1e-6 if scene.precision == "f64" else 1e-3) * size
    rounding = _rounding(scene, result.objective) / 10  # over the 2h of a central difference
    pinned = max(RESOLVED, 3 * tol)  # f32's tolerance is 3%: FD cannot pin it better than 9%
    while True:
        fd, fd2 = (_central(scene, key, base, h * d, result.steps, threads) / h
                   for h in (eps, 2 * eps))
        measured, floor = abs(fd - fd2), rounding / eps
        scale, diff = max(abs(fd), abs(ad)), abs(ad - fd)
        # FD pins the gradient when its change from h to 2h (3x its own error at h, for an
        # error in h^2) is small, and either AD agrees to the tolerance (a coincidence
        # otherwise) or even J's rounding bound over h is small
        resolved = measured <= pinned * scale and (
            diff <= tol * scale or 3 * floor <= pinned * scale)
        if resolved or 10 * eps > STEP_CAP * size:
            break
        eps *= 10
    fd_error = max(measured, floor)
    agrees = diff <= max(tol * scale, 3 * fd_error)
    verdict = "failed" if not agrees else "ok" if resolved else "inconclusive"
    row = {"key": key.text, "ad": ad, "fd": fd, "step": eps, "fd_error": fd_error,
           "rel_error": diff / max(scale, 1e-300), "verdict": verdict, "ok": verdict == "ok",
           "fd_change": measured, "fd_rounding": floor, "scale": scale}
    if verdict == "inconclusive":
        rounds = floor >= measured
        why = (f"J's rounding over the step (3x {floor:.1e})" if rounds else
               f"FD's change from step h to 2h ({measured:.1e})")
        row["why"] = (f"{why} is more than {pinned:.0%} of the "
                      f"gradient at every step up to {eps:.1e}, the largest tried"
                      + (f": J is too insensitive to {key.text} for finite differences to "
                         "test it" if rounds else ": J is not smooth enough there"))
    return row


def _taylor(scene: Scene, result: GradResult, directions: dict, steps: int, threads
            ) -> dict[str, Any]:
    """pyadjoint's taylor_test: remainders at h, h/2, h/4, h/8 and their convergence orders;
    where all four are at J's rounding, again at 10x larger h (up to STEP_CAP)."""
    # each KEY moves by the same fraction of its own size (dt and positions differ by 1000x);
    # a KEY that is 0 (MPM's grid gravity, the start of fields.C) has no size: its own unit
    scaled = {t: (k, b, d * (float(np.max(np.abs(b))) or 1.0))
              for t, (k, b, d) in directions.items()}
    parts = [float(np.sum(np.asarray(result.gradients[t], float) * d))
             for t, (_k, _b, d) in scaled.items()]
    slope = sum(parts)
    floor = _rounding(scene, result.objective)
    h0 = 1e-4 if scene.precision == "f64" else 3e-2
    tried = []
    while True:
        residuals = [abs(_moved_objective(scene, scaled, h, steps, threads)
                         - result.objective - h * slope) for h in (h0, h0 / 2, h0 / 4, h0 / 8)]
        # a remainder within J's rounding is noise, not an order
        orders = [float(np.log2(a / b)) if a > 10 * floor and b > 0 else float("inf")
                  for a, b in zip(residuals, residuals[1:])]
        tried.append(h0)
        # all at rounding while h dJ.d is 20x above it: the slope predicts J's change to 5%
        linear = min(orders) == float("inf") and RESOLVED * h0 * abs(slope) >= floor
        if min(orders) < float("inf") or linear or 10 * h0 > STEP_CAP:
            break
        h0 *= 10
    order = min(orders)
    verdict = "failed" if order < 1.8 else "ok" if order < float("inf") or linear \
        else "inconclusive"
    taylor = {"h": h0, "tried": tried, "residuals": residuals, "orders": orders,
              "order": order, "rounding": floor, "verdict": verdict,
              "scale": sum(abs(p) for p in parts)}  # |dJ.d| without cancellation
    if linear:
        taylor["note"] = (f"all at J's rounding while h dJ.d is {h0 * abs(slope):.1g}: the "
                          "gradient predicts J's change to its rounding")
    if verdict == "inconclusive":
        taylor["why"] = (f"every remainder is at J's rounding ({floor:.1g}) and so is the "
                         f"first-order change h dJ.d ({h0 * abs(slope):.1g}) for h up to "
                         f"{h0:g}, the largest tried: J barely changes along these KEYs")
    return taylor


def _moved_objective(scene: Scene, scaled: dict, h: float, steps: int, threads) -> float:
    moved, shifts = scene, {}
    for _t, (key, base, d) in scaled.items():
        moved, extra = _perturbed(moved, key, base, h * d)
        shifts.update(extra)
    return objective_value(moved, steps, threads, shifts)
