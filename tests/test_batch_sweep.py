"""The sweep grammar and the plan: values, functions, products, samples, sweep files, and
bad KEYs or values refused (exit 2, file:line, "did you mean") before anything is submitted."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from simrun.batch.plan import make_plan, make_points
from simrun.batch.sweep import grid, parse_sweep, sample, split_values
from simrun.cli.app import app
from simrun.scene import SceneError, load_scene
from tests.batch_helpers import scene_copy


def test_values_split_on_commas_outside_brackets():
    assert split_values("[0,0],[0.5,0.5]") == ["[0,0]", "[0.5,0.5]"]
    assert split_values("{a: 1, b: 2},'x,y',3") == ["{a: 1, b: 2}", "'x,y'", "3"]
    assert parse_sweep("initial.low=[0,0],[0.5,0.5]").values == ("[0,0]", "[0.5,0.5]")


@pytest.mark.parametrize("text, values", [
    ("x=range(3)", ("0", "1", "2")),
    ("x=range(1,10,3)", ("1", "4", "7")),
    ("x=range(0,1,0.25)", ("0", "0.25", "0.5", "0.75")),  # Hydra: floats, stop excluded
    ("x=range(0.1,0.4,0.1)", ("0.1", "0.2", "0.3")),
    ("x=range(5,1,-2)", ("5", "3")),
    ("x=linspace(1e-5,4e-5,4)", ("1e-05", "2e-05", "3e-05", "4e-05")),
    ("x=logspace(-3,-1,3)", ("0.001", "0.01", "0.1")),
])
def test_functions(text, values):
    assert parse_sweep(text).values == values


@pytest.mark.parametrize("text", ["x", "=1,2", "x=", "x=1,,2", "x=range(0,1,0)",
                                  "x=linspace(0,1)", "x=linspace(0,1,a)", "x=range(2,1)"])
def test_bad_sweeps(text):
    with pytest.raises(SceneError, match="--sweep"):
        parse_sweep(text)


def test_product_and_samples():
    axes = [parse_sweep("a=1,2"), parse_sweep("b=x,y,z")]
    points = grid(axes)
    assert len(points) == 6 and points[0] == {"a": "1", "b": "x"} and points[-1] == {"a": "2", "b": "z"}
    axes = [parse_sweep("a=linspace(0,1,3)"), parse_sweep("b=logspace(-3,-1,3)"),
            parse_sweep("c=p,q")]
    drawn = sample(axes, 50, seed=7)
    assert drawn == sample(axes, 50, seed=7) != sample(axes, 50, seed=8)
    assert all(0 <= float(p["a"]) <= 1 and 1e-3 <= float(p["b"]) <= 0.1 and p["c"] in "pq"
               for p in drawn)
    with pytest.raises(SceneError, match="swept twice"):
        grid([parse_sweep("a=1"), parse_sweep("a=2")])


def test_sweep_file(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("sweep:\n  dt: [1.0e-5, 2.0e-5]\n  energy.0.params.softening: "
                    "logspace(-3,-2,2)\n")
    points = make_points(["seed=0,1"], path, None, None)
    assert len(points) == 8 and points[0] == {"dt": "1e-05", "energy.0.params.softening":
                                              "0.001", "seed": "0"}
    path.write_text("sweep: {dt: linspace(1e-5,2e-5,2)}\nsamples: 3\nsample_seed: 1\n")
    assert len(make_points([], path, None, None)) == 3


def test_plan_validates_every_point_and_names_folders(tmp_path):
    scene = scene_copy(tmp_path)
    points = make_points(["dt=1e-5,2e-5"], None, None, None)
    plan = make_plan(scene, points, job="run", sets=[], options={}, out_dir=tmp_path / "b",
                     allow_outside=False)
    assert [r.folder for r in plan.rows] == ["run-000", "run-001"]
    assert plan.specs[0].digest != plan.specs[1].digest and not plan.skipped
    with pytest.raises(SceneError, match="dt"):
        make_plan(scene, make_points(["dt=1e-5,-1"], None, None, None), job="run", sets=[],
                  options={}, out_dir=tmp_path / "b", allow_outside=False)


@pytest.mark.parametrize("job", ["run", "grad", "optimize"])
def test_steps_option_is_every_jobs_steps(tmp_path, job):
    """`batch --steps N` sets the scene's steps of every job, whatever it runs."""
    scene = scene_copy(tmp_path)
    sets = ["objective={builtin: kinetic, at: end}", "optimize={parameters: [dt]}"]
    plan = make_plan(scene, make_points(["dt=1e-5,2e-5"], None, None, None), job=job,
                     sets=sets, options={"steps": 7, "wrt": ["dt"]}, out_dir=tmp_path / "b",
                     allow_outside=False)
    assert [load_scene(s.scene_path, list(s.overrides)).steps for s in plan.specs] == [7, 7]


@pytest.mark.parametrize("args, expect", [
    (["--sweep", "energy.0.parms.softening=0.1,0.2"], "--sweep energy.0.parms.softening=0.1 (command line): unknown key 'parms' in 'energy[0]'. Did you mean 'params'?"),
    (["--sweep", "dtt=1e-5,2e-5"], "Did you mean 'dt'?"),
    (["--sweep", "dt=1e-5,zero"], "dt"),
    (["--sweep", "dt=1e-5", "--job", "grad", "--wrt", "dt"], "objective"),
    (["--sweep", "dt=1e-5", "--job", "nope"], "--job"),
    (["--sweep", "dt=1e-5", "--steps", "1", "--set", "steps=1500"],
     "--steps 1 and --set steps=1500 both set the steps of every job. Give one of them."),
    (["--sweep", "steps=5,10", "--steps", "1"], "--steps 1 and the sweep over steps"),
    # the kernels' own parameters: an argument the kernel lacks, a value its LIMITS refuse
    (["--sweep", "energy.0.params.X=1,2"], "--sweep energy.0.params.X=1 (command line): "
     "parameter 'X' is not an argument of kernel 'gravity' (gravity.py)."),
    (["--sweep", "energy.0.params.softening=0.1,-1"], "--sweep energy.0.params.softening=-1 "
     "(command line): parameter 'softening' of kernel 'gravity' (gravity.py) must satisfy "
     "softening > 0"),
])
def test_cli_bad_input_is_exit_2_before_submitting(tmp_path, args, expect):
    scene = scene_copy(tmp_path)
    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["batch", str(scene), *args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert expect in result.output
    assert not out.exists()  # nothing submitted, nothing written


def test_an_objective_parameter_the_kernel_lacks_is_exit_2_before_submitting(tmp_path):
    """As for the energies' parameters: an objective kernel's are checked at planning."""
    from tests.batch_helpers import ROOT

    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["batch", str(ROOT / "scenes" / "projectile.yaml"),
                                      "--job", "grad", "--wrt", "dt", "--sweep",
                                      "objective.params.X=1,2", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "parameter 'X' is not an argument of kernel 'miss' (targets.py)" in result.output
    assert not out.exists()


def test_walltime_aware_workers():
    from simrun.batch.engine import ClusterSpec, cluster_object, lifetime, seconds

    assert seconds("01:00:00") == 3600 and seconds("1-00:00:30") == 86430
    assert lifetime("01:00:00") == (3300, 180)  # leave 5 min early, staggered by 3 min
    assert lifetime("00:02:00") == (108, 6)
    with pytest.raises(SceneError, match="--walltime"):
        seconds("an hour")
    cluster = cluster_object(ClusterSpec("slurm", cores=2, memory="1GB", walltime="00:30:00",
                                         host="127.0.0.1", queue="short"))
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "--lifetime 1620s --lifetime-stagger 90s" in script
    assert "#SBATCH -t 00:30:00" in script and "#SBATCH -p short" in script
