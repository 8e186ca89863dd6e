"""One compiled variant of each kernel: a scalar a gradient differentiates (dt, a thermostat's
temperature or tau, an energy parameter) stays an argument of `run`'s own launch, so the
reverse step replays `run`'s compiled variants, not twins compiled again with the scalar
read from a 0-D field. A launch that reads the gradient slot G in x.grad's place (a kick,
BAOA, a step kernel reading x.grad) launches `run`'s compiled code too, given G's address
(`CompiledKernel.rebound`). The gradients stay checked against central differences by
test_adjoint_nvt.py; here, the launches themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_adjoint_nvt import COMMON, THERMOSTATS, _scene

import simrun.lang as ti
from simrun.adjoint.reverse_step import ReverseStep
from simrun.jobs import grad as job
from simrun.jobs.grad import scene_gradient
from simrun.keys import parse_key
from simrun.lang.autodiff.tape import touched
from simrun.stepper.program import UPDATES

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["nose_hoover", "csvr"])
def test_the_reverse_step_replays_runs_compiled_variants(tmp_path, name):
    """Each update of the step program that reads no gradient slot (the thermostat's
    launches, among them the ones reading dt, kT and tau, all differentiated) is replayed by
    the reverse step as the very compiled variant `run`'s stepper launches."""
    scene = _scene(tmp_path, name)
    keys = [parse_key(scene, k) for k in COMMON + THERMOSTATS[name][1]]
    x0, _ = job._start(scene, {})
    traj = job._trajectory(scene, keys, 1, x0)
    stepper, reverse = traj.model.stepper, ReverseStep(traj)
    replayed = dict(zip(map(id, traj.twins), [entry.launch for recording, _ in reverse.stages
                                              for entry in recording.entries]))
    shared = slot_readers = 0
    for node, run_node in zip(traj.program, stepper.program, strict=True):
        if node.kind != UPDATES:
            continue
        for bound, run_launch in zip(traj.made[id(node)], stepper.made[id(run_node)],
                                     strict=True):
            replay = replayed[id(bound)][0]
            if bound.kernel.grad_reads:  # reads G: run's code given G's address
                assert replay.code_of is run_launch[0], bound.kernel.name
                assert replay.layout.fields != run_launch[0].layout.fields
                slot_readers += 1
                continue
            assert replay is run_launch[0], bound.kernel.name
            shared += 1
    assert shared >= 4 and slot_readers >= 1  # the differentiated scalars are among them
    with_scalars = [b for b in traj.twins if b.kernel.field_args]
    assert {b.kernel.name for b in with_scalars} >= {"kick_drift"}
    assert any(not b.kernel.grad_reads for b in with_scalars)


SLOT_READERS = {  # a scene whose step reads x.grad: its KEYs, the kernels that read it
    "projectile": (["dt", "initial.velocity"], {"kick_drift", "kick"}),
    "oscillators": (["dt", "integrator.temperature", "integrator.friction"],
                    {"baoa", "kick"}),
    "mass_spring": (["dt", "fields.weights1"], {"advance"}),  # a step kernel, a controller
}


@pytest.mark.parametrize("name", SLOT_READERS)
def test_a_gradient_compiles_each_kernel_once_for_one_launch(monkeypatch, name):
    """A gradient's forward sweep is `run`'s stepper; its reverse step replays the same
    launches with the slots G, G2 in x.grad's place. No kernel is compiled twice for one
    launch (one mode, one set of template arguments): the kernels reading x.grad have one
    primal variant, the one `run` compiles, and the gradient's J is `run`'s."""
    from simrun.lang.api import Kernel
    from simrun.scene import load_scene

    compiles = []
    compile_kernel = Kernel.compile

    def counted(self, args, mode, unread=(), varied=None):
        key = self._key(self.params()[0], args, mode)
        compiles.append((self.pyfunc, key, tuple(map(id, unread)),
                         None if varied is None else tuple(map(id, varied))))
        return compile_kernel(self, args, mode, unread, varied)

    monkeypatch.setattr(Kernel, "compile", counted)
    keys, readers = SLOT_READERS[name]
    scene = load_scene(REPO / "scenes" / f"{name}.yaml", ["steps=6"])
    result = scene_gradient(scene, keys, checkpoints=2)
    twice = {f.__name__ for f in {c[0] for c in compiles} if
             len([c for c in compiles if c[0] is f]) >
             len({c for c in compiles if c[0] is f})}
    assert not twice, f"compiled twice for one launch: {sorted(twice)}"
    primal = {c[0].__name__ for c in compiles if c[1][0] == "primal"}
    assert readers <= primal  # each once, as `run` compiles it
    assert result.objective == job.objective_value(scene, 6)


@ti.kernel
def scaled_sum(x: ti.template(), total: ti.template(), a: float):
    for i in x:
        total[None] += a * x[i] * x[i]


def test_a_twin_s_primal_launch_is_its_kernel_s_and_its_gradient_still_reaches_the_scalar():
    """`with_field_args` on a float parameter: the twin's primal launch is the kernel's own
    compiled variant (the scalar an argument), its reverse reads the scalar from the 0-D
    field and adds d total / d a there: sum x^2, and x.grad = 2 a x."""
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x = ti.field(ti.f64, shape=5, needs_grad=True)
    total = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(5.0))
    twin = scaled_sum.with_field_args(["a"])
    assert twin.prepare((x, total, 3.0), "primal")[0] is \
        scaled_sum.prepare((x, total, 3.0), "primal")[0]
    # what its derivatives touch (their gradients cleared, tangents made) names the field
    assert twin.field_args["a"] in touched(twin, (x, total, 3.0))
    with ti.ad.Tape(loss=total):
        twin(x, total, 3.0)
    assert total[None] == 3.0 * 30.0
    assert twin.field_args["a"].grad[None] == 30.0
    np.testing.assert_array_equal(x.grad.to_numpy(), 6.0 * np.arange(5.0))


@ti.kernel
def pull(x: ti.template(), out: ti.template(), a: float):
    for i in x:
        out[i] = -a * x.grad[i]


def test_a_slot_twin_reads_its_field_through_the_kernels_own_code():
    """`with_grad_reads`: the twin's primal launch is the kernel's compiled code reading the
    twin's field where the kernel reads x.grad, one launch after another and in one chain
    (each its own context); a field stored otherwise (f32 for an f64 x.grad) gets a variant
    compiled for it, which reads it too."""
    from simrun.lang.api import runtime
    from simrun.lang.runtime.chain import Chain

    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    g, out, out2 = (ti.field(ti.f64, shape=4) for _ in range(3))
    narrow = ti.field(ti.f32, shape=4)
    x.grad.from_numpy(np.arange(1.0, 5.0))
    g.from_numpy(10 * np.arange(1.0, 5.0))
    narrow.from_numpy(np.full(4, 0.5, np.float32))
    own, twin = pull, pull.with_grad_reads({"x": g})
    view = twin.prepare((x, out, 2.0), "primal")[0]
    assert view.code_of is own.prepare((x, out, 2.0), "primal")[0]
    for kernel, expected in ((twin, -20 * np.arange(1.0, 5.0)),
                             (own, -2 * np.arange(1.0, 5.0))):
        kernel(x, out, 2.0)
        np.testing.assert_array_equal(out.to_numpy(), expected)
    chain = Chain(runtime(), [own.prepare((x, out, 3.0), "primal")[:2],
                              twin.prepare((x, out2, 3.0), "primal")[:2]])
    chain.run(1)
    np.testing.assert_array_equal(out.to_numpy(), -3 * np.arange(1.0, 5.0))
    np.testing.assert_array_equal(out2.to_numpy(), -30 * np.arange(1.0, 5.0))
    other = pull.with_grad_reads({"x": narrow})
    assert not hasattr(other.prepare((x, out, 2.0), "primal")[0], "code_of")
    other(x, out, 2.0)
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, -1.0))


def test_the_reverse_step_replays_runs_controller_variant(tmp_path):
    """The controller kernel (reading `step`, and dt, differentiated) is replayed by the
    reverse step as `run`'s stepper chains it: `step` read from the system's step field in
    both, dt an argument of the one primal variant."""
    from test_adjoint_integrated import KEYS, _scene_file
    from test_adjoint_integrated import load_scene as load_thrust

    scene = load_thrust(_scene_file(tmp_path))
    x0, _ = job._start(scene, {})
    traj = job._trajectory(scene, [parse_key(scene, k) for k in KEYS], 1, x0)
    stepper, reverse = traj.model.stepper, ReverseStep(traj)
    assert len(reverse.ctrl.entries) == len(stepper.control) == 1
    assert reverse.ctrl.entries[0].launch[0] is stepper.control[0][0][0]
    assert traj.control_params  # dt's adjoint through the controller still has its field


def test_grad_of_dt_differentiates_runs_trajectory_through_a_controller():
    """mass_spring (f32, its controller network reads dt): with dt differentiated, J of the
    gradient's own sweeps is J of `run`'s trajectory (the stepper's, objective_value), to
    the bit. A controller twin that read dt from a field was another fast-math variant,
    whose rounding moved the sweeps off `run`'s trajectory within 20 steps."""
    from simrun.scene import load_scene

    scene = load_scene(REPO / "scenes" / "mass_spring.yaml", ["steps=20"])
    assert scene_gradient(scene, ["dt"], checkpoints=3).objective == \
        job.objective_value(scene, 20)
