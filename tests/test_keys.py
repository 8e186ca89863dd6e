"""simrun.keys: one table (KINDS) says what each kind of KEY means, and it is the only place
that dispatches on a Key's kind."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import simrun.keys as keys_mod
from simrun.keys import KEY_KINDS, KINDS, ROLES, Key, Kind, key_of
from simrun.keys.kinds import FIELD

SIMRUN = Path(keys_mod.__file__).resolve().parents[1]
KEYS_PACKAGE = Path(keys_mod.__file__).resolve().parent
# one text of each form (`grad --help`'s list, with names filled in)
EXAMPLES = {form: form.replace("<i>", "0").replace("<name>", "eps") for form in KEY_KINDS}


def test_every_form_parses_to_exactly_one_kind_and_every_kind_has_a_form():
    made = {}
    for text in EXAMPLES.values():
        matches = [kind for kind, spec in KINDS.items() if spec.match(text.split("."))]
        assert len(matches) == 1, f"{text}: matched by {matches or 'no kind'}"
        made.setdefault(matches[0], key_of(text))  # a kind's first form
    assert set(made) == set(KINDS), f"kinds no KEY form makes: {set(KINDS) - set(made)}"
    assert made["energy"] == Key("energy.0.params.eps", "energy", 0, "eps")
    # one species pair: the parameter's name; parse_key resolves the pair against a scene
    assert key_of("energy.0.params.eps[A:B]") == Key("energy.0.params.eps[A:B]", "energy", 0,
                                                     "eps")


def test_every_entry_fills_every_column():
    """A Kind has no defaults, so an entry missing a column fails at import; here: each
    column holds something of its type (a role and a place the callers know)."""
    columns = {f.name for f in dataclasses.fields(Kind)}
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(Kind)), "a Kind column with a default hides gaps"
    optional = {"step_input", "density", "partial"}  # None: no step input / not an ensemble KEY
    for kind, spec in KINDS.items():
        for column in columns - {"forms", "listed", "lives", "role"} - optional:
            assert callable(getattr(spec, column)), f"{kind}.{column}"
        assert spec.role in ROLES and spec.lives in ("scene", "x0", "v0", "fields"), kind
        assert (spec.step_input is not None) == (spec.role == "step"), kind
        assert (spec.density is None) == (spec.partial is None), kind


def test_a_kind_without_an_entry_is_an_error():
    with pytest.raises(ValueError, match="no entry in simrun.keys.KINDS"):
        Key("bodies.0.mass", "body")
    with pytest.raises(TypeError):
        Kind(forms=("x",), match=lambda parts: None)  # the other columns are required
    assert key_of("no.such.key") is None


def kind_dispatch(root: Path, skip: Path) -> list[str]:
    """file:line of each comparison of a `.kind` attribute with a KEY kind's name outside
    `skip` (other kinds, a kernel parameter's or a cluster's, are not KEYs)."""
    names = set(KINDS)
    found = []
    for path in sorted(root.rglob("*.py")):
        if skip in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                texts = {c.value for side in sides for c in ast.walk(side)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)}
                if any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides) \
                        and texts & names:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_only_the_table_dispatches_on_a_kind():
    """A new kind of KEY needs only its entry in KINDS: no other module switches on a
    Key's kind (`key.kind == "energy"`, `key.kind in ("x0", "v0")`)."""
    found = kind_dispatch(SIMRUN, KEYS_PACKAGE)
    assert not found, "KEY kinds dispatched outside simrun/keys:\n" + "\n".join(found)


def test_the_dispatch_check_can_fail(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        'def f(key, plain):\n    if key.kind == "energy":\n        return 1\n'
        '    return plain[key.kind] if key.kind in ("x0", "v0") else 0\n'
        'def g(p, spec):\n    return p.kind == "scalar" or spec.kind == "sge"\n')
    assert kind_dispatch(tmp_path / "pkg", tmp_path / "none") == ["pkg/a.py:2", "pkg/a.py:4"]


def test_field_keys_are_the_field_kind():
    assert keys_mod.field_key("C") == key_of("fields.C") == Key("fields.C", FIELD, name="C")


def test_a_grad_job_parses_each_key_once(tmp_path, monkeypatch):
    """`simrun grad --check` parses its KEYs once (it parsed them four times: the CLI's
    check, the gradient, the finite-difference check and the pictures), and the pictures and
    the check use those Keys."""
    from simrun.cli.grad_cmd import grad_job
    from simrun.scene import load_scene

    parsed = []
    real = keys_mod.key_of
    monkeypatch.setattr(keys_mod, "key_of", lambda text: parsed.append(text) or real(text))
    wrt = ["dt", "energy.0.params.softening", "state.x0"]
    scene_path = SIMRUN / "scenes" / "gravity.yaml"
    sets = ["steps=3", "precision=f64", "objective.builtin=total", "objective.at=end",
            "particles.count=4"]
    options = {"wrt": wrt, "mode": "reverse", "check": True, "checkpoints": None,
               "memory": None, "steps": None, "threads": 1, "debug": False,
               "method": "trajectory", "equilibrate": None, "sample_every": None,
               "reproducible": True, "device": "cpu"}
    try:
        grad_job(lambda: load_scene(scene_path, sets), tmp_path / "grad", options, quiet=True)
    except SystemExit as exc:  # typer.Exit: the check's verdict, not what this test asks
        assert exc.code in (0, 1)
    except Exception as exc:
        if type(exc).__name__ != "Exit":
            raise
    assert parsed == wrt
    assert (tmp_path / "grad" / "gradients.json").is_file()


def test_a_new_kind_is_one_table_entry(monkeypatch):
    """An alias of dt, `time.step`, added as one entry of KINDS and nothing else: grad
    parses and lists it, reads and writes the scene through it, and its reverse and forward
    gradients are dt's, bit for bit."""
    from simrun.jobs.grad import forward_gradient, scene_gradient
    from simrun.keys.kinds import _fixed
    from simrun.scene import SceneError, load_scene

    entry = dataclasses.replace(KINDS["dt"], forms=("time.step",), match=_fixed("time.step"),
                                offered=lambda scene: ["time.step"])
    monkeypatch.setitem(KINDS, "time_step", entry)
    scene = load_scene(SIMRUN / "scenes" / "gravity.yaml",
                       ["steps=4", "precision=f64", "objective.builtin=total",
                        "objective.at=end", "particles.count=4"])
    key = keys_mod.parse_key(scene, "time.step")
    assert key.kind == "time_step" and "time.step" in keys_mod.known_keys(scene)
    with pytest.raises(SceneError, match="time.step"):
        keys_mod.parse_key(scene, "time.stop")  # the error lists the new KEY
    assert keys_mod.value_of(scene, key) == scene.dt
    assert keys_mod.with_value(scene, key, 0.5).dt == 0.5
    reverse = scene_gradient(scene, ["time.step", "dt"], threads=1).gradients
    forward = forward_gradient(scene, ["time.step", "dt"], threads=1).gradients
    assert reverse["time.step"] == reverse["dt"] and forward["time.step"] == forward["dt"]
    assert scene_gradient(scene, ["dt"], threads=1).gradients["dt"] == reverse["dt"]
