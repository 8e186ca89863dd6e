"""Every job records success one way (jobs/finish.py): the guard zones first, so a kernel
that wrote outside a field without --debug fails the job (exit 1 naming the field and
--debug, a failed task in a batch), and no record says ok or done. The write here is in
the objective kernel, which only the job runs (the stepper's own check cannot see it), and
for the fit in an energy term at parameters only reweighting visits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import simrun

SPILL_OBJECTIVE = """import simrun.lang as ti


@ti.kernel
def spill(x: ti.template(), x0: ti.template(), L: ti.template()):
    for i in x:
        L[None] += (x[i] - x0[i]).norm_sqr()
    for i in x:  # past the end from i = 6 (under an if: unguarded, it does not compile)
        if i >= 0:
            x0[i + 2] = ti.Vector([0.0, 0.0, 0.0])
"""

SCENE = """version: 2
precision: f64
seed: 1
particles: {count: 8, dim: 3}
initial: {type: random, low: [0, 0, 0], high: [4, 4, 4], temperature: 0.5}
energy:
  - kernel: simrun.kernels.external:anchor
    params: {k: 2.0, first: 0, count: 8}
dt: 0.01
steps: 20
objective: {kernel: o.py:spill, at: end}
optimize: {parameters: [energy.0.params.k], iterations: 2}
"""

NVT = ["--set", "integrator={type: langevin, temperature: 0.5, friction: 1.0}",
       "--set", "objective.at=mean", "--steps", "400", "--sample-every", "2"]
JOBS = {  # job -> (command line, its record, where the record says how it ended)
    "grad": (["grad", "s.yaml", "--wrt", "energy.0.params.k"], "gradients.json"),
    "grad forward": (["grad", "s.yaml", "--wrt", "energy.0.params.k", "--mode", "forward"],
                     "gradients.json"),
    "grad check": (["grad", "s.yaml", "--wrt", "energy.0.params.k", "--check"],
                   "gradients.json"),
    "grad ensemble": (["grad", "s.yaml", "--wrt", "energy.0.params.k", "--method",
                       "ensemble", *NVT], "gradients.json"),
    "optimize": (["optimize", "s.yaml", "--no-render"], "optimize.json"),
    "batch": (["batch", "s.yaml", "--job", "grad", "--wrt", "energy.0.params.k", "--sweep",
               "dt=0.01", "--workers", "1"], None),
}


@pytest.mark.parametrize("job", list(JOBS))
def test_a_write_outside_a_field_fails_every_job_kind_without_ok(tmp_path: Path,
                                                                 job: str) -> None:
    (tmp_path / "o.py").write_text(SPILL_OBJECTIVE)
    (tmp_path / "s.yaml").write_text(SCENE)
    command, record = JOBS[job]
    done = simrun(*command, "--out", "out", "-q", cwd=tmp_path, timeout=600)
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr
    if record is None:  # batch: the job failed, its summary row says why
        text = (tmp_path / "out" / "summary.csv").read_text()
        assert ",failed," in text and "a kernel wrote outside field 'x0'" in text, text
        return
    message = done.stderr.strip().splitlines()[-1]
    assert "a kernel wrote outside field 'x0'" in message and "--debug" in message, message
    written = json.loads((tmp_path / "out" / record).read_text())
    assert written["status"] == "failed", written["status"]
    assert "outside field 'x0'" in written.get("error", written.get("message"))


SPILL_ENERGY = """import simrun.lang as ti


@ti.kernel
def spill(x: ti.template(), v: ti.template(), x0: ti.template(), U: ti.template(),
          level: float):
    for i in x:
        U[None] += 1e-6 * level * (x[i] - x0[i]).norm_sqr()
    for i in x:  # past the end from i = 6, where level < 0.8 only
        if level < 0.8:
            v[i + 2] = ti.Vector([0.0, 0.0, 0.0])
"""


FIT_SCENE = """version: 2
precision: f64
seed: 1
particles: {count: 8, dim: 3}
initial: {type: random, low: [0, 0, 0], high: [4, 4, 4], temperature: 0.5}
energy:
  - kernel: simrun.kernels.external:anchor
    params: {k: 2.0, first: 0, count: 8}
  - kernel: e.py:spill
    params: {level: 1.0}
integrator: {type: langevin, temperature: 0.5, friction: 1.0}
dt: 0.01
steps: 400
objective: {at: mean, targets: {potential_per_particle: 0.9}}
optimize: {parameters: [energy.1.params.level], lr: 0.5, iterations: 3}
"""


def test_a_fit_whose_reweighting_writes_outside_a_field_is_not_done(tmp_path: Path) -> None:
    """The fit evaluates its energy terms at new parameters on old frames (reweighting):
    at level < 0.8, which its one sampling run (level 1) never met, the term writes past
    v. The fit recorded 'done' regardless; now it fails and fit.json says so."""
    from simrun.jobs.fit import fit_by_reweighting
    from simrun.scene import load_scene
    from simrun.stepper.run import SimulationError

    (tmp_path / "e.py").write_text(SPILL_ENERGY)
    (tmp_path / "s.yaml").write_text(FIT_SCENE)
    scene = load_scene(tmp_path / "s.yaml")
    with pytest.raises(SimulationError, match="outside field 'v'"):
        fit_by_reweighting(scene, tmp_path / "fit", every=2, polish=0)
    record = json.loads((tmp_path / "fit" / "fit.json").read_text())
    assert record["status"] == "failed" and "outside field 'v'" in record["error"]
    levels = [float(line.split(",")[5]) for line in
              (tmp_path / "fit" / "fit.csv").read_text().splitlines()[1:]]
    assert levels[0] == 1.0 and min(levels) < 0.8  # reweighting visited the spilling levels
    assert len({line.split(",")[3] for line in  # from the one run sampled at level 1
                (tmp_path / "fit" / "fit.csv").read_text().splitlines()[1:]}) == 1
