"""``--set key.path=value`` overrides: applied to the YAML tree, validated like the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from simrun.scene import SceneError, load_scene

REPO = Path(__file__).resolve().parents[1]
GRAVITY = REPO / "scenes" / "gravity.yaml"


def error(overrides: list[str]) -> str:
    with pytest.raises(SceneError) as info:
        load_scene(GRAVITY, overrides)
    return str(info.value)


def test_values_are_parsed_as_yaml() -> None:
    scene = load_scene(GRAVITY, ["dt=2e-5", "steps=7", "outputs.forces=true",
                                 "energy.0.params.softening=0.01", "initial.low=[0.5, 0.5]",
                                 "integrator.type=velocity_verlet", "precision=f64"])
    assert scene.dt == 2e-5 and scene.steps == 7 and scene.outputs.forces
    assert scene.energy[0].params["softening"] == 0.01
    assert scene.initial.options["low"] == [0.5, 0.5]
    assert scene.integrator.type == "velocity_verlet" and scene.precision == "f64"


def test_later_overrides_win() -> None:
    assert load_scene(GRAVITY, ["steps=5", "steps=9"]).steps == 9


def test_new_sections_can_be_created() -> None:
    scene = load_scene(GRAVITY, ["boundary.type=reflect", "boundary.low=[0,0]",
                                 "boundary.high=[1,1]"])
    assert scene.boundary.type == "reflect" and scene.boundary.high == (1.0, 1.0)


def test_bad_value_names_the_override() -> None:
    assert error(["dt=0"]) == ("--set dt=0 (command line): 'dt' is 0 but must be greater than "
                               "0. Use a positive value.")


def test_unknown_key_suggests() -> None:
    msg = error(["stesp=10"])
    assert msg.startswith("--set stesp=10 (command line): unknown key 'stesp' in 'scene'.")
    assert "Did you mean 'steps'?" in msg


def test_malformed_override() -> None:
    assert error(["steps"]).startswith("--set 'steps' (command line): an override must look "
                                       "like key.path=value")


def test_list_index_out_of_range_points_at_the_list() -> None:
    msg = error(["energy.5.params.softening=1"])
    assert "gravity.yaml:19:3: " in msg  # the list in the file
    assert "'5' is not an index of this list of 1 entries" in msg


def test_cannot_descend_into_a_scalar() -> None:
    assert "cannot set 'x' inside a number ('1e-5')" in error(["dt.x=1"])


def test_shorthand_sections_expand() -> None:
    scene = load_scene(GRAVITY, ["integrator.damping=0.5"])
    assert scene.integrator.type == "symplectic_euler" and scene.integrator.damping == 0.5
