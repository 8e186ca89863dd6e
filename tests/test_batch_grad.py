"""Batch's grad task does what `simrun grad` does (issue 45, item 6): forward mode, --check
and --method ensemble as batch options, each through a real `simrun batch` on a local Dask
worker, whose job folder and summary row hold the very numbers `simrun grad` writes for the
same scene (both call jobs.grad_folder.grad_job)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.batch_helpers import ROOT, summary

GRAVITY = str(ROOT / "scenes" / "gravity.yaml")
SMALL = ["--set", "steps=20", "--set", "particles.count=4", "--set", "precision=f64",
         "--set", "objective={builtin: total, at: end}"]
OSCILLATORS = ["--set", "particles.count=100", "--set", "energy.0.params.count=100"]
POINT = "energy.0.params.softening=0.001"  # the scene's own value: one job, the CLI's scene

CASES = {
    "forward": (GRAVITY, SMALL, ["--mode", "forward", "--wrt", "dt", "--wrt", "state.x0"],
                POINT),
    "check": (GRAVITY, SMALL, ["--check", "--wrt", "dt", "--wrt",
                               "energy.0.params.softening"], POINT),
    "ensemble": (str(ROOT / "scenes" / "oscillators.yaml"), OSCILLATORS,
                 ["--method", "ensemble", "--wrt", "energy.0.params.k", "--wrt",
                  "integrator.temperature", "--steps", "2000", "--equilibrate", "500",
                  "--sample-every", "4"], "energy.0.params.k=2.0"),
}


def _simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("case", list(CASES))
def test_a_batch_grad_option_gives_the_cli_numbers(tmp_path: Path, case: str) -> None:
    scene, sets, grad_args, point = CASES[case]
    key, value = point.split("=")
    cli = _simrun("grad", scene, *sets, "--set", point, *grad_args, "--threads", "1",
                  "--out", "g", "-q", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr[-3000:]
    batch = _simrun("batch", scene, *sets, "--sweep", point, "--job", "grad", *grad_args,
                    "--threads", "1", "--workers", "1", "--out", "b", "-q", cwd=tmp_path)
    assert batch.returncode == 0, batch.stderr[-3000:] + batch.stdout[-2000:]
    [row] = summary(tmp_path / "b")
    assert row["status"] == "done" and row[key] == value, row
    folder = tmp_path / "b" / row["folder"]
    mine, theirs = (json.loads((f / "gradients.json").read_text())
                    for f in (folder, tmp_path / "g"))
    assert mine["status"] == theirs["status"] == "done"
    with np.load(folder / "gradients.npz") as a, np.load(tmp_path / "g" / "gradients.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:  # the same bits: the same job function on the same scene
            assert np.array_equal(a[name], b[name]), name
    assert mine["objective"]["value"] == theirs["objective"]["value"]
    assert float(row["objective"]) == theirs["objective"]["value"]
    for text, gradient in theirs["gradients"].items():
        column = f"d/{text}" if np.ndim(gradient) == 0 else f"|d/{text}|"
        assert float(row[column]) == pytest.approx(np.linalg.norm(gradient), rel=1e-15) \
            if np.ndim(gradient) else float(row[column]) == gradient
    if case == "forward":
        assert mine["mode"] == theirs["mode"] == "forward"
        assert mine["directions"] == theirs["directions"]
        assert (folder / "horizon.csv").read_text() == (tmp_path / "g" / "horizon.csv").read_text()
    if case == "check":
        assert mine["check"]["verdict"] == theirs["check"]["verdict"] == "ok"
        assert mine["check"]["rows"] == theirs["check"]["rows"]
        assert float(row["check_rel_error"]) == max(r["rel_error"] for r in mine["check"]["rows"])
    if case == "ensemble":
        assert mine["method"] == theirs["method"] == "ensemble"
        assert mine["errors"] == theirs["errors"]
        assert float(row["error/objective"]) == theirs["objective"]["error"]
        assert mine["frames"] == theirs["frames"]


def test_a_batch_grad_whose_check_is_not_ok_fails_its_job(tmp_path: Path) -> None:
    """As `simrun grad --check` exits 1 where the check is not ok (here inconclusive: a
    target 1e7 away hides the gradient in J's rounding, tests/test_grad_check.py), the job
    fails with the verdict in the summary, and the batch exits 1; its folder keeps the
    gradient and the check."""
    miss = "objective={kernel: kernels/targets.py:miss, params: {tx: 1e7, ty: 1e7}}"
    batch = _simrun("batch", GRAVITY, "--set", "precision=f64", "--set", "steps=5", "--set",
                    miss, "--sweep", POINT, "--job", "grad", "--check", "--wrt",
                    "energy.0.params.strength", "--threads", "1", "--workers", "1", "--out",
                    "b", "-q", cwd=tmp_path)
    assert batch.returncode == 1, batch.stderr[-3000:]
    assert "Traceback" not in batch.stderr
    [row] = summary(tmp_path / "b")
    assert row["status"] == "failed", row
    assert row["error"].startswith("the check against central differences is inconclusive: "
                                   "energy.0.params.strength inconclusive"), row["error"]
    check = json.loads((tmp_path / "b" / row["folder"] / "gradients.json").read_text())["check"]
    assert check["verdict"] == "inconclusive"
