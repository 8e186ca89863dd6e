"""`simrun grad --check` says ok only when finite differences could test the gradient."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import REPO, simrun

MISS = "objective={kernel: kernels/targets.py:miss, params: {tx: %s, ty: %s}}"


def test_a_gradient_hidden_by_rounding_is_inconclusive_never_ok(tmp_path: Path) -> None:
    """A target 1e7 away: J ~ 1e15 rounds to ~1e2, while moving the strength by 10% moves J
    by ~1e-8: no step can see the gradient, so the check must not pass it."""
    done = simrun("grad", str(REPO / "scenes" / "gravity.yaml"), "--set", "precision=f64",
                  "--set", "steps=5", "--set", MISS % ("1e7", "1e7"),
                  "--wrt", "energy.0.params.strength", "--check", "--out", "g", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "check: ok" not in done.stdout and "check: inconclusive" in done.stdout
    assert "too insensitive to energy.0.params.strength" in done.stdout
    assert "Taylor test: every remainder is at J's rounding" in done.stdout
    check = json.loads((tmp_path / "g" / "gradients.json").read_text())["check"]
    assert check["verdict"] == "inconclusive" and not check["ok"]
    assert check["rows"][0]["step"] == 0.1  # it tried up to a tenth of the KEY


def test_a_larger_step_concludes_where_the_first_cannot(tmp_path: Path) -> None:
    """MPM's affine matrices start at 0 and move J by ~1e-8 per unit: at the first step
    (1e-6) J's rounding over h is 1e-5, 1000x the gradient; at 0.1 it resolves it and AD
    agrees with FD to the tolerance; the Taylor test too needs a larger h."""
    done = simrun("grad", str(REPO / "scenes" / "mpm.yaml"), "--set", "precision=f64",
                  "--set", "steps=20", "--set", MISS % (0.3, 0.2), "--wrt", "fields.C",
                  "--check", "--out", "g", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout
    check = json.loads((tmp_path / "g" / "gradients.json").read_text())["check"]
    row = check["rows"][0]
    assert row["verdict"] == "ok" and row["step"] > 1e-6
    assert abs(row["ad"] - row["fd"]) <= max(1e-5 * abs(row["fd"]), 3 * row["fd_error"])
    assert 3 * row["fd_error"] <= 0.05 * abs(row["fd"])
    taylor = check["taylor"]  # concluded at a larger h than the first (1e-4)
    assert taylor["verdict"] == "ok" and taylor["h"] > taylor["tried"][0] == 1e-4


def _check_of(monkeypatch, extra, error: float) -> dict:
    """check_gradient where J(p) = 3 p + 0.5 p^2 + extra(p, p0), with the gradient handed
    in as J's smooth part's derivative at p0 times (1 + error)."""
    from simrun.jobs import grad_check as check
    from simrun.jobs.grad import GradResult
    from simrun.keys import parse_key, value_of
    from simrun.scene import load_scene

    scene = load_scene(REPO / "scenes" / "gravity.yaml",
                       ["precision=f64", "objective={builtin: kinetic, at: end}"])
    key = parse_key(scene, "energy.0.params.strength")
    p0 = float(value_of(scene, key))

    def objective(moved, steps, threads=None, shifts=None) -> float:
        p = float(value_of(moved, key))
        return 3 * p + 0.5 * p * p + extra(p, p0)

    monkeypatch.setattr(check, "objective_value", objective)
    result = GradResult(objective(scene, 0), {key.text: (3 + p0) * (1 + error)}, 10, 0, 0,
                        1.0, 0, 1)
    return check.check_gradient(scene, result)


def _synthetic_check(monkeypatch, jump: float, error: float) -> dict:
    """A staircase of steps `jump` every 1e-5 of p0, centred on p0: central differences
    (steps of 1e-6 and 2e-6 of p0) do not reach a stair, the Taylor test's (1.25e-5 to 1e-4
    of p0) cross 1 to 10."""
    return _check_of(monkeypatch, lambda p, p0: jump * np.floor((p - p0) / (1e-5 * p0) + 0.5),
                     error)


@pytest.mark.parametrize("jump, error, verdict", [
    (0.0, 0.0, "ok"),              # smooth J, right gradient
    (1e-4, 0.0, "inconclusive"),   # J jumps on the Taylor test's scale: not ok, not failed
    (1e-4, 1e-3, "failed"),        # ... and a wrong gradient still fails, on the FD row
    (0.0, 1e-3, "failed"),
])
def test_a_jumping_objective_is_inconclusive_and_a_wrong_gradient_still_fails(
        monkeypatch, jump: float, error: float, verdict: str) -> None:
    """A Taylor test that fails while central differences pin the gradient far better than
    the remainders' first-order part allows says J is not smooth (a truncated potential's
    cutoff crossings in a large LJ melt do this), so the check is inconclusive, not failed:
    the gradient is J's derivative where J has one. Any row that disagrees still fails it."""
    result = _synthetic_check(monkeypatch, jump, error)
    assert result["verdict"] == verdict and result["ok"] == (verdict == "ok")
    if verdict == "inconclusive":
        assert result["taylor"]["order"] < 1.8 and result["rows"][0]["verdict"] == "ok"
        assert "not smooth" in result["taylor"]["why"]
    if error:
        assert result["rows"][0]["verdict"] == "failed"


def _kinked_check(monkeypatch, jump: float, error: float) -> dict:
    """A step of `jump` (times (3 + p0) p0) once p is 1.5e-6 of p0 past p0: between the
    central differences' steps h = 1e-6 p0 and 2h, so FD at 2h moves by jump / 4h and FD at
    h not at all, and before every Taylor step (1.25e-5 to 1e-4 of p0), whose remainders
    then all hold the jump."""
    return _check_of(monkeypatch,
                     lambda p, p0: jump * (3 + p0) * p0 if p - p0 > 1.5e-6 * p0 else 0.0, error)


def test_differences_that_agree_only_within_their_own_kinks_are_inconclusive(
        monkeypatch) -> None:
    """Issue 44 item 9: AD -51.393 against FD -51.389, within FD's error, and Taylor orders
    0.06 / 0.95 / 1.59 said FAILED (an LJ melt's sigma: FD moved 960 from h to 2h, 2e5x
    J's rounding). Where FD's own error is J's kinks, not rounding, neither test can tell a
    gradient error within it from the kinks: inconclusive, with the reason."""
    result = _kinked_check(monkeypatch, jump=1e-10, error=5e-5)
    row, taylor = result["rows"][0], result["taylor"]
    assert row["rel_error"] > result["tolerance"] and row["verdict"] == "ok"  # FD's error
    assert taylor["order"] < 1.8 and taylor["verdict"] == "inconclusive"
    assert result["verdict"] == "inconclusive" and "not smooth" in taylor["why"]
