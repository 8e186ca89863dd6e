"""`simrun grad --method ensemble`: bad input is refused before any folder is made, at once
whatever its size, and a folder whose job stopped on an error does not claim 'running'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import REPO, simrun

OSCILLATORS = REPO / "scenes" / "oscillators.yaml"
SMALL = ("--set", "particles.count=20", "--set", "energy.0.params.count=20")


def _grad(tmp_path: Path, *args: str, timeout: float = 120):
    return simrun("grad", str(OSCILLATORS), "--method", "ensemble", "--wrt",
                  "energy.0.params.k", *SMALL, "--out", str(tmp_path / "g"), *args,
                  cwd=tmp_path, timeout=timeout)


def test_too_few_frames_makes_no_folder(tmp_path: Path) -> None:
    """Exit 2 with the least --steps, and no folder with a 'running' gradients.json."""
    done = _grad(tmp_path, "--steps", "20")
    assert done.returncode == 2 and "--steps 49" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "g").exists()


def test_equilibration_beyond_the_run_is_refused_at_once(tmp_path: Path) -> None:
    """--equilibrate 1e20 on a 2000-step run: the search for the least run counted down one
    step at a time (never ended) after making the folder; now exit 2, no folder."""
    for discard in ("2000", str(10 ** 20)):
        done = _grad(tmp_path, "--steps", "2000", "--equilibrate", discard, timeout=60)
        assert done.returncode == 2, done.stderr
        assert "discards the whole run of 2000 steps" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "g").exists()


def test_a_request_found_bad_during_the_job_leaves_a_failed_folder(tmp_path: Path) -> None:
    """An objective kernel that does not compile is found when the frames are evaluated,
    after the sampling run: exit 2, and gradients.json says 'failed' and why."""
    kernels = tmp_path / "broken.py"
    kernels.write_text("import simrun.lang as ti\n\n\n@ti.kernel\n"
                       "def spread(x: ti.template(), L: ti.template()):\n"
                       "    for i in x:\n"
                       "        L[None] += undefined_name\n")
    done = _grad(tmp_path, "--steps", "200", "--set",
                 f"objective={{kernel: {kernels}:spread, at: mean}}", "--allow-outside")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["status"] == "failed" and "undefined_name" in record["error"]


@pytest.mark.parametrize("integrator, start, why", [
    ("{type: nose_hoover, temperature: 0.5, tau: 0.5}", "0", "did not fluctuate at all"),
    ("{type: nose_hoover, temperature: 0.5, tau: 0.5, chain: 1}", "0.5",
     "where the canonical ensemble gives"),
])
def test_a_run_that_did_not_sample_the_ensemble_is_flagged(
        tmp_path: Path, integrator: str, start: str, why: str) -> None:
    """Traps started at their centres: a Nose-Hoover thermostat cannot heat a system at
    rest (it scales velocities), so every frame is the start ('0 +- 0'); a one-link chain
    from a thermal start does not mix the traps (its msd read 0.62 against the exact
    d kT / k = 0.75, its derivative -260 against -0.375). Both read exit 0 as fine."""
    done = _grad(tmp_path, "--steps", "4000", "--set", f"integrator={integrator}",
                 "--set", f"initial.temperature={start}", "--set", "particles.count=500",
                 "--set", "energy.0.params.count=500")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not sample the canonical ensemble" in done.stderr and why in done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["status"] == "failed" and why in record["error"]


def test_a_langevin_run_with_its_dt_bias_is_not_flagged(tmp_path: Path) -> None:
    """The shipped traps at dt 0.2 read a kinetic temperature 2% low (the integrator's
    bias, five of its errors but a fraction of one reading's canonical spread): fine."""
    done = _grad(tmp_path, "--steps", "4000", "--set", "particles.count=500",
                 "--set", "energy.0.params.count=500")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "g" / "gradients.json").read_text())["status"] == "done"


@pytest.mark.parametrize("value", ["ti.sqrt(-1.0 - x[i][0] * x[i][0])", "1.0 / (x[i][0] - x[i][0])"])
def test_a_non_finite_observable_exits_1_without_numpy_warnings(tmp_path: Path,
                                                                value: str) -> None:
    """NaN or inf per frame gave exit 0, 'nan +- nan', a 'done' folder and NumPy's
    RuntimeWarnings; now exit 1 (grad --help: not finite), the folder 'failed'."""
    kernels = tmp_path / "bad.py"
    kernels.write_text("import simrun.lang as ti\n\n\n@ti.kernel\n"
                       "def bad(x: ti.template(), L: ti.template()):\n"
                       "    for i in x:\n"
                       f"        L[None] += {value}\n")
    done = _grad(tmp_path, "--steps", "200", "--set",
                 f"objective={{kernel: {kernels}:bad, at: mean}}", "--allow-outside")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not finite" in done.stderr and "Warning" not in done.stderr, done.stderr
    assert "nan" not in done.stdout.lower()
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["status"] == "failed" and "not finite" in record["error"]


def test_trajectory_mode_marks_a_folder_failed_too(tmp_path: Path) -> None:
    """The same class in reverse mode: an objective kernel that does not compile is found
    after the folder is made; gradients.json said 'running'."""
    kernels = tmp_path / "broken.py"
    kernels.write_text("import simrun.lang as ti\n\n\n@ti.kernel\n"
                       "def spread(x: ti.template(), L: ti.template()):\n"
                       "    for i in x:\n"
                       "        L[None] += undefined_name\n")
    done = simrun("grad", str(OSCILLATORS), "--wrt", "energy.0.params.k", *SMALL, "--set",
                  "integrator=velocity_verlet", "--steps", "20", "--set",
                  f"objective={{kernel: {kernels}:spread, at: end}}", "--allow-outside",
                  "--out", str(tmp_path / "g"), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["status"] == "failed" and "undefined_name" in record["error"]
