"""Scene loading: valid scenes, and every kind of bad scene reported at file:line:col."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.scene import SceneError, load_scene

REPO = Path(__file__).resolve().parents[1]
GRAVITY = REPO / "kernels" / "gravity.py"

BASE = f"""\
version: 1
name: demo
particles:
  count: 4
  dim: 2
energy:
  - kernel: {GRAVITY}:gravity
    params: {{softening: 1e-3}}
dt: 1e-4
steps: 10
"""


@pytest.fixture()
def scene_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(directory: Path, text: str, name: str = "scene.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def error(path: Path, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(SceneError) as info:
        load_scene(path, overrides, allow_outside=True)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("name", ["gravity", "gravity_1024", "molecule", "fem", "mpm"])
def test_shipped_scenes_load(name: str) -> None:
    scene = load_scene(REPO / "scenes" / f"{name}.yaml")
    assert scene.name == name
    assert scene.energy or scene.step_kernels


def test_reference_gravity_scene_matches_the_reference() -> None:
    scene = load_scene(REPO / "scenes" / "gravity.yaml")
    assert (scene.particles.count, scene.particles.dim, scene.dt) == (8, 2, 1e-5)
    assert scene.integrator.type == "symplectic_euler" and scene.precision == "f32"
    assert scene.energy[0].params["softening"] == 1e-3
    assert scene.initial.options == {"low": [0.0, 0.0], "high": [1.0, 1.0]}


def test_defaults_and_resolved_copy_round_trip(scene_dir: Path) -> None:
    scene = load_scene(write(scene_dir, BASE), allow_outside=True)
    assert scene.precision == "f64" and scene.seed == 0
    assert scene.particles.masses == (1.0,) * 4
    assert scene.outputs.every == 1 and scene.integrator.type == "symplectic_euler"
    import yaml

    again = write(scene_dir, yaml.safe_dump(scene.to_dict()), "resolved.yaml")
    assert load_scene(again, allow_outside=True).to_dict() == scene.to_dict()


def test_unknown_top_level_key_suggests_the_right_one(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "stpes: 5\n"))
    assert msg.startswith("scene.yaml:11:1: unknown key 'stpes' in 'scene'.")
    assert "Did you mean 'steps'?" in msg


def test_unknown_nested_key(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("  dim: 2", "  dim: 2\n  mas: 2.0")))
    assert msg.startswith("scene.yaml:6:3: unknown key 'mas' in 'particles'.")
    assert "Did you mean 'mass'?" in msg


def test_wrong_type(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("steps: 10", "steps: many")))
    assert msg.startswith("scene.yaml:10:8: 'steps' must be an integer, got a string ('many')")


def test_dt_must_be_positive(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("dt: 1e-4", "dt: -0.5")))
    assert msg.startswith("scene.yaml:9:5: 'dt' is -0.5 but must be greater than 0.")


def test_count_must_be_at_least_one(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("count: 4", "count: 0")))
    assert msg.startswith("scene.yaml:4:10: 'particles.count' is 0 but must be at least 1.")


def test_dim_must_be_2_or_3(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("dim: 2", "dim: 4")))
    assert msg.startswith("scene.yaml:5:8: 'particles.dim' is 4 but must be 2 or 3")


def test_missing_required_key(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("dt: 1e-4\n", "")))
    assert msg.startswith("scene.yaml:1:1: 'scene' is missing the required key 'dt'.")
    assert "Add 'dt:" in msg


def test_version_is_required_and_checked(scene_dir: Path) -> None:
    assert error(write(scene_dir, BASE.replace("version: 1\n", ""))).startswith(
        "scene.yaml:1:1: 'scene' is missing the required key 'version'.")
    assert error(write(scene_dir, BASE.replace("version: 1", "version: 3"))).startswith(
        "scene.yaml:1:10: scene schema version 3 is not supported")


def test_bad_choice_suggests(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "integrator: {type: velocity_verlett}\n"))
    assert msg.startswith("scene.yaml:11:20: 'integrator.type' is 'velocity_verlett'")
    assert "Did you mean 'velocity_verlet'?" in msg


def test_missing_scene_file(scene_dir: Path) -> None:
    msg = error(scene_dir / "nope.yaml")
    assert msg.startswith("nope.yaml: scene file not found.")


def test_missing_kernel_module(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace(f"{GRAVITY}", "kernels/gravty.py")))
    assert msg.startswith("scene.yaml:7:13: kernel module 'kernels/gravty.py' was not found")


def test_malformed_kernel_reference(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace(f"{GRAVITY}:gravity", "gravity")))
    assert msg.startswith("scene.yaml:7:13: 'energy[0].kernel' is 'gravity', which is not a "
                          "kernel reference.")


def test_missing_initial_state_file(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "initial: {type: file, path: start.npz}\n"))
    assert msg.startswith("scene.yaml:11:29: initial state file")
    assert "does not exist" in msg


def test_initial_state_file_with_wrong_count(scene_dir: Path) -> None:
    np.savez(scene_dir / "start.npz", x=np.zeros((3, 2)))
    msg = error(write(scene_dir, BASE + "initial: {type: file, path: start.npz}\n"))
    assert msg.startswith("scene.yaml:11:29: 'start.npz' holds positions of shape (3, 2)")


def test_lattice_shape_must_match_count(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "initial: {type: lattice, shape: [3, 2]}\n"))
    assert msg.startswith("scene.yaml:11:33: lattice shape [3, 2] makes 6 particles but "
                          "particles.count is 4.")


def test_key_of_another_initial_type(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "initial: {type: lattice, shape: [2, 2], low: [0, 0]}\n"))
    assert msg.startswith("scene.yaml:11:41: unknown key 'low' in 'initial' (it does not apply "
                          "to type 'lattice').")


def test_topology_index_out_of_range(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "topology:\n  bonds: [[0, 1], [1, 7]]\n"))
    assert msg.startswith("scene.yaml:12:23: particle index 7 in 'topology.bonds' is out of range")


def test_topology_row_arity(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "topology:\n  angles: [[0, 1]]\n"))
    assert msg.startswith("scene.yaml:12:12: 'topology.angles[0]' has 2 entries but needs 3.")


def test_grid_triangles_need_a_lattice(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "topology:\n  triangles: {generate: grid}\n"))
    assert msg.startswith("scene.yaml:12:25: 'topology.triangles: generate: grid' needs a 2-D "
                          "lattice")


def test_boundary_box_must_not_be_empty(scene_dir: Path) -> None:
    text = BASE + "boundary: {type: reflect, low: [0, 0], high: [1, 0]}\n"
    assert error(write(scene_dir, text)).startswith("scene.yaml:11:46: boundary box is empty")


def test_duplicate_key(scene_dir: Path) -> None:
    assert error(write(scene_dir, BASE + "dt: 2e-4\n")).startswith(
        "scene.yaml:11:1: key 'dt' appears twice in 'scene'.")


def test_yaml_syntax_error(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE + "outputs: {every: 3\n"))
    assert msg.startswith("scene.yaml:12:1: YAML syntax error")


def test_mass_list_must_match_count(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("dim: 2", "dim: 2\n  mass: [1, 2]")))
    assert msg.startswith("scene.yaml:6:9: 'particles.mass' has 2 entries but needs 4.")


def test_non_numeric_param(scene_dir: Path) -> None:
    msg = error(write(scene_dir, BASE.replace("{softening: 1e-3}", "{softening: soft}")))
    assert msg.startswith("scene.yaml:8:25: 'energy[0].params.softening' must be a number")


def test_scene_without_dynamics(scene_dir: Path) -> None:
    text = BASE.split("energy:")[0] + "dt: 1e-4\nsteps: 10\n"
    assert "nothing moves the particles" in error(write(scene_dir, text))


def test_integrator_and_step_kernels_conflict(scene_dir: Path) -> None:
    mpm = REPO / "kernels" / "mpm.py"
    text = BASE + f"integrator: symplectic_euler\nstep_kernels: {{kernels: [{mpm}:p2g]}}\n"
    assert error(write(scene_dir, text)).startswith("scene.yaml:11:1: a scene with "
                                                    "'step_kernels' integrates itself")
