"""A fit folder (`simrun optimize` of ensemble targets, scenes/fit_lj.yaml) is a job folder
like the others: Ctrl-C says what it keeps and records "interrupted" in fit.json, `simrun
resume DIR` finishes it (wherever the folder was moved: its g(r) CSV is copied in) with the
numbers of a fit never stopped, and `simrun render DIR` redraws fit.png and rdf.png."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# `simrun optimize` that sends itself SIGINT (what Ctrl-C sends) right after the fit has
# recorded its first iteration: the point is the program's, not a timer's.
CTRL_C_AFTER_THE_FIRST_ITERATION = r"""
import os, signal, sys
from simrun.jobs import fit as reweighted

recorded = reweighted._Setup.report

def report_then_interrupt(self, *args, **kwargs):
    recorded(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)

reweighted._Setup.report = report_then_interrupt
from simrun.cli import main
sys.argv = ["simrun", *sys.argv[1:]]
main()
"""


def _run(*args: str, cwd: Path, script: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "simrun.cli"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "MPLBACKEND": "Agg"})


def _project(tmp: Path) -> Path:
    """fit_lj.yaml, short (300 steps a run, 2 Adam iterations), with its kernel and CSV."""
    (tmp / "kernels").mkdir(parents=True)
    shutil.copy(ROOT / "kernels" / "lj.py", tmp / "kernels" / "lj.py")
    shutil.copy(ROOT / "scenes" / "fit_lj_rdf.csv", tmp / "g.csv")
    text = (ROOT / "scenes" / "fit_lj.yaml").read_text().replace("fit_lj_rdf.csv", "g.csv")
    text = text.replace("steps: 6000", "steps: 300").replace("iterations: 25 ", "iterations: 2 ")
    assert "steps: 300" in text and "iterations: 2 " in text
    (tmp / "fit.yaml").write_text(text)
    return tmp / "fit.yaml"


def _status(folder: Path) -> str:
    return json.loads((folder / "fit.json").read_text())["status"]


def test_a_stopped_fit_resumes_anywhere_and_renders(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _project(project)
    stopped = _run("optimize", "fit.yaml", "--out", "o", cwd=project,
                   script=CTRL_C_AFTER_THE_FIRST_ITERATION)
    assert stopped.returncode == 130, stopped.stderr[-3000:]
    assert "nothing was written" not in stopped.stderr
    assert "keeps fit.csv, fit.json (status interrupted)" in stopped.stderr
    assert "'simrun resume o'" in stopped.stderr, stopped.stderr
    assert _status(project / "o") == "interrupted"

    moved = tmp_path / "elsewhere" / "fit"  # the folder alone: no project beside it
    moved.parent.mkdir()
    shutil.move(project / "o", moved)
    done = _run("resume", str(moved), "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _status(moved) == "done"
    whole = _run("optimize", "fit.yaml", "--out", "whole", "-q", cwd=project)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert (moved / "fit.csv").read_text() == (project / "whole" / "fit.csv").read_text()

    for picture in ("fit.png", "rdf.png"):
        (moved / picture).unlink()
    shutil.rmtree(project)
    drawn = _run("render", str(moved), cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    assert drawn.stdout.split() == [str(moved / "fit.png"), str(moved / "rdf.png")]
    assert (moved / "fit.png").stat().st_size > 0 and (moved / "rdf.png").stat().st_size > 0

    again = _run("resume", str(moved), cwd=tmp_path)
    assert again.returncode == 0 and "the fit is complete" in again.stdout, again.stderr
