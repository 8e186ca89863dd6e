"""simrun batch on a real LocalCluster of worker processes: results, skip-done by content
hash (an edited kernel reruns its jobs), failures and retries, and Ctrl-C."""

from __future__ import annotations

import json
import re
import shlex
import signal

import numpy as np

from simrun.batch import Engine, run_batch
from tests.batch_helpers import (
    count,
    gated_scene_copy,
    run_ok,
    scene_copy,
    simrun,
    summary,
    wait_for,
)
from tests.gate_helpers import held, open_gate, wait_until_held

ENGINE = Engine(workers=2)


def test_sweep_skip_done_and_edited_kernel(tmp_path):
    scene = scene_copy(tmp_path, steps=300)
    out = tmp_path / "b"
    events = []
    result = run_batch(scene, ["dt=1e-5,2e-5", "energy.0.params.softening=0.001,0.01"],
                       out_dir=out, engine=ENGINE, options={"no_render": True},
                       on_event=lambda kind, row, _r: events.append((kind, row.folder)))
    assert result.ok and result.skipped == 0 and len(result.rows) == 4
    run_ok(out)
    rows = summary(out)
    assert [(r["dt"], r["energy.0.params.softening"]) for r in rows] == [
        ("1e-5", "0.001"), ("1e-5", "0.01"), ("2e-5", "0.001"), ("2e-5", "0.01")]
    for r in rows:  # the job folder is what simrun run writes, and the row its numbers
        info = json.loads((out / r["folder"] / "run.json").read_text())
        assert float(r["steps"]) == 300 and info["saved_step"] == 300
        drift = float(r["energy_drift_final"])
        assert abs(drift) < 1e-3 and drift == (float(r["energy_last"]) - float(
            r["energy_first"])) / abs(float(r["energy_first"]))
    assert {p.name for p in result.plots} == {"energy_drift_largest_vs_values.png", "heatmap.png"}
    for line in (out / "batch.log").read_text().splitlines():  # only what 2 workers run
        assert int(line.split(" running")[0].rsplit(" ", 1)[1]) <= 2, line
    assert sorted(k for k, _ in events).count("done") == 4
    # the same command again reruns nothing
    again = run_batch(scene, ["dt=1e-5,2e-5", "energy.0.params.softening=0.001,0.01"],
                      out_dir=out, engine=ENGINE, options={"no_render": True})
    assert again.ok and again.skipped == 4
    assert [r["attempts"] for r in summary(out)] == ["1"] * 4
    # editing the kernel's source (not just touching it) reruns its jobs
    kernel = tmp_path / "kernels" / "gravity.py"
    kernel.touch()
    assert run_batch(scene, ["dt=1e-5,2e-5", "energy.0.params.softening=0.001,0.01"],
                     out_dir=out, engine=ENGINE, options={"no_render": True}).skipped == 4
    kernel.write_text(kernel.read_text() + "\n# edited\n")
    edited = run_batch(scene, ["dt=1e-5,2e-5", "energy.0.params.softening=0.001,0.01"],
                       out_dir=out, engine=ENGINE, options={"no_render": True})
    assert edited.ok and edited.skipped == 0
    run_ok(out)


def test_failures_reported_as_they_happen_and_retried(tmp_path):
    scene = scene_copy(tmp_path, steps=200)
    out = tmp_path / "b"
    # a strength within f32's range whose forces are not (a velocity past the range is bad
    # input now, refused before submitting): a failure with its message, retried, then
    # failed for good
    seen = []
    result = run_batch(scene, ["energy.0.params.strength=1,3e38"], out_dir=out, engine=Engine(workers=1),
                       retries=1, options={"no_render": True},
                       on_event=lambda kind, row, res: seen.append(
                           (kind, row.folder, res.count("done") + res.count("running"))))
    assert not result.ok
    rows = {r["folder"]: r for r in summary(out)}
    assert rows["run-000"]["status"] == "done"
    bad = rows["run-001"]
    assert bad["status"] == "failed" and bad["attempts"] == "2"
    assert "forces became NaN or infinite" in bad["error"]
    kinds = [k for k, f, _ in seen if f == "run-001" and k != "start"]
    assert kinds == ["retry", "failed"]
    # the CLI: exit 1, the failure on stderr, fail-fast stops at the first failure
    proc = simrun("batch", str(scene), "--sweep", "energy.0.params.strength=3e38,1,2",
                  "--workers", "1",
                  "--fail-fast", "--no-render", "--out", str(tmp_path / "c"), "-q")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "job run-000 {'energy.0.params.strength': '3e38'} failed: step 0" in stderr
    assert summary(tmp_path / "c")[0]["status"] == "failed"


def test_ctrl_c_keeps_summary_and_finished_folders(tmp_path):
    # job run-001 waits at a closed gate (tests/gate_helpers.py) from its first step, so it
    # is provably not done at Ctrl-C on any machine; the other worker finishes the rest
    scene = gated_scene_copy(tmp_path, steps=300)
    gate = tmp_path / "gate"
    out = tmp_path / "b"
    args = ("batch", str(scene), "--sweep", "energy.1.params.hold_after=1000000000,0,1000000000",
            "--workers", "2", "--threads", "1", "--no-render", "--out", str(out))
    proc = simrun(*args)
    wait_until_held(gate, proc)
    wait_for(lambda: count(out, "done") >= 1 or proc.poll() is not None, 300, "a finished job")
    assert proc.poll() is None and held(gate)  # still waiting at the gate
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    printed = re.search(r"continue with '(simrun resume [^']+)'", stderr)
    assert printed, stderr
    rows = summary(out)
    done = [r for r in rows if r["status"] == "done"]
    assert done and rows[1]["status"] == "interrupted"
    assert {r["status"] for r in rows} <= {"done", "interrupted"}
    for r in done:
        assert json.loads((out / r["folder"] / "run.json").read_text())["status"] == "ok"
    # the printed command finishes the rest and reruns none of the finished ones
    open_gate(gate)
    proc = simrun(*shlex.split(printed.group(1))[1:])
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert f"({len(done)} already done before)" in stdout
    run_ok(out)


def test_an_interrupted_job_resumes_from_its_saved_state(tmp_path):
    """What a killed worker leaves (a record saying running, a run stopped mid-way) is
    continued from the run's last saved frame by the next attempt, not started over."""
    from simrun.batch.plan import make_plan, make_points
    from simrun.batch.task import execute, write_record

    # the run waits at a closed gate from its 1000th energy evaluation (past step 500 and
    # frames every 100 steps) until the test opens it: mid-way on any machine; the gated
    # scene steps launch by launch, so no more steps than it takes to be past that
    steps = 1200
    scene = gated_scene_copy(tmp_path, steps=steps, every=100, hold_after=1000)
    gate = tmp_path / "gate"
    plan = make_plan(scene, make_points(["dt=1e-6"], None, None, None), job="run", sets=[],
                     options={"no_render": True}, out_dir=tmp_path / "b", allow_outside=False)
    spec = plan.specs[0]
    write_record(spec.record_path, {"digest": spec.digest, "status": "running", "attempts": 1})
    proc = simrun("run", str(scene), "--set", "dt=1e-6", "--out", str(spec.folder),
                  "--no-render", "--threads", "1")
    wait_until_held(gate, proc)
    proc.send_signal(signal.SIGINT)  # the frames so far are flushed: a state past step 0
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    with np.load(spec.folder / "state.npz") as saved:
        assert 0 < int(saved["step"]) < steps
    open_gate(gate)
    record = execute(spec)
    assert record["status"] == "done" and record["resumed"] and record["attempts"] == 2
    info = json.loads((spec.folder / "run.json").read_text())
    assert info["status"] == "ok" and info["saved_step"] == steps
    assert info.get("resumed_from_step", 0) > 0


def test_optimize_sweep(tmp_path):
    """--job optimize: one simrun optimize folder per learning rate, its best loss in the
    summary."""
    from tests.batch_helpers import ROOT

    out = tmp_path / "b"
    result = run_batch(ROOT / "scenes" / "projectile.yaml", ["optimize.lr=0.05,0.5"],
                       job="optimize", options={"iterations": 5}, out_dir=out,
                       engine=Engine(workers=1))
    assert result.ok, [r.error for r in result.rows]
    rows = summary(out)
    assert [r["folder"] for r in rows] == ["optimize-000", "optimize-001"]
    for r in rows:
        assert int(r["iterations"]) == 5 and float(r["best_loss"]) <= float(r["final_loss"])
        assert {"loss.csv", "loss.png", "best.yaml", "optimize.json"} <= {
            p.name for p in (out / r["folder"]).iterdir()}
    assert [p.name for p in result.plots] == ["best_loss_vs_values.png"]
