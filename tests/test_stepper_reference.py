"""scenes/gravity.yaml reproduces the reference document's autodiff gravity program."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simrun.scene import initial_state, load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
STEPS = 1000


def reference_program(x_start: np.ndarray, steps: int) -> np.ndarray:
    """The reference's ad_gravity.py, verbatim except for the start positions and no GUI."""
    import simrun.lang as ti

    ti.init()
    N = 8
    dt = 1e-5
    x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=N)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(N, N):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v[i]

    def substep():
        with ti.ad.Tape(loss=U):
            compute_U()
        advance()

    x.from_numpy(x_start.astype(np.float32))
    for _ in range(steps):
        substep()
    return x.to_numpy()


def test_gravity_scene_follows_the_reference_program(tmp_path: Path) -> None:
    scene = load_scene(REPO / "scenes" / "gravity.yaml", [f"steps={STEPS}"])
    x_start, _ = initial_state(scene)
    run_scene(scene, tmp_path)
    with np.load(tmp_path / "frames.npz") as frames:
        ours = frames["x"][-1]
    expected = reference_program(x_start, STEPS)
    # same f32 arithmetic up to operation order (fused multiply-adds, sum order)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=2e-5)
