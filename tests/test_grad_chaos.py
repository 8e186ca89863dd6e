"""Reverse mode on a chaotic `at: mean` objective says what forward mode says: the
sensitivity grows exponentially with the horizon, and --method ensemble is the method for
an average; --check calls finite differences inconclusive there, not a failed gradient."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import REPO, simrun

MEAN_POTENTIAL = "objective={builtin: potential, at: mean}"


def test_reverse_mode_and_its_check_name_the_chaos(tmp_path: Path) -> None:
    """lj_nvt's fluid run NVE for 15 time units: dJ/d epsilon of <U> is ~1e23 (e^(3.8 t)).
    It printed that with exit 0 and no word, and --check said FAILED."""
    done = simrun("grad", str(REPO / "scenes" / "lj_nvt.yaml"), "--wrt",
                  "energy.0.params.epsilon", "--set", "steps=3000", "--set",
                  "integrator=velocity_verlet", "--set", MEAN_POTENTIAL, "--check", "--out",
                  str(tmp_path / "g"), cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # inconclusive is not a pass
    assert "grows exponentially with the horizon" in done.stderr, done.stderr
    assert "--method ensemble" in done.stderr
    assert "FAILED" not in done.stdout and "inconclusive" in done.stdout, done.stdout
    assert "--method ensemble" in done.stdout
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    rate = record["horizon_growth"]["state"]["rate"]
    assert 2.0 < rate < 6.0  # README: e^(3.75 t) from forward mode's horizon
    assert record["check"]["verdict"] == "inconclusive"


def test_a_regular_mean_objective_reports_no_growth(tmp_path: Path) -> None:
    """Harmonic traps run NVE: the adjoint of a mean grows linearly with the horizon."""
    done = simrun("grad", str(REPO / "scenes" / "oscillators.yaml"), "--wrt",
                  "energy.0.params.k", "--set", "particles.count=20", "--set",
                  "energy.0.params.count=20", "--set", "initial.temperature=0.5", "--set",
                  "integrator=velocity_verlet", "--set", "dt=0.05", "--set", MEAN_POTENTIAL,
                  "--steps", "3000", "--out", str(tmp_path / "g"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "exponentially" not in done.stderr
    assert "horizon_growth" not in json.loads((tmp_path / "g" / "gradients.json").read_text())
