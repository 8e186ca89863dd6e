"""`simrun grad --check` says ok only when finite differences could test the gradient."""

from __future__ import annotations

import json
from pathlib import Path

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
