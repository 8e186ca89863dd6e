"""`simrun grad --method ensemble`: bad input is refused before any folder is made, at once
whatever its size, and a folder whose job stopped on an error does not claim 'running'."""

from __future__ import annotations

import json
from pathlib import Path

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
