"""Fuzzing the scene loader (issue 20): mutated scene files and ``--set`` overrides either load
or raise SceneError with one short line; nothing else, no hang. A few go through the real CLI
(exit 0, 1 or 2, never a traceback or a signal).

Deterministic (derandomize=True) and bounded (max_examples); each test takes a few seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import simrun

from simrun.scene import SceneError, load_scene

KERNEL = ("import simrun.lang as ti\n\n\n@ti.kernel\n"
          "def k(x: ti.template(), U: ti.template(), s: float):\n"
          "    for i in x:\n        U[None] += s * x[i].norm_sqr()\n")
BASE = """\
version: 1
name: fuzz
precision: f64
seed: 3
particles:
  count: 4
  dim: 2
  mass: [1, 2, 1, 2]
initial:
  type: random
  low: [0, 0]
  high: [1, 1]
  velocity: [0, 0]
topology:
  bonds: [[0, 1], [1, 2]]
energy:
  - kernel: k.py:k
    params: {s: 0.5}
integrator: {type: velocity_verlet, damping: 0.1}
dt: 1e-3
steps: 10
boundary: {type: reflect, low: [-1, -1], high: [2, 2]}
outputs: {every: 2, forces: true}
"""

NASTY = ["", "~", "null", "-1", "0", "1e400", "-1e400", "9" * 120, "9" * 5000, "[]", "{}",
         "[[[[", "]]", "{a: [}", "!!python/object/apply:os.system ['true']", "!!binary AAAA",
         "&a [*a]", "*a", ".nan", ".inf", "yes", "2024-13-45", "2024-01-01", "0x10", "0o7",
         "1_000", "'text'", '"\\x00"', "x" * 100_000, "\x01", "\x00", "\t", "é", "🙂",
         "<<: {a: 1}", "? [a]\n: b", "- - -", "|\n  a", "1.5", "-0", "1e-320", "true",
         "[1, 2, 3]", "[0, 0, 0]", "{type: file, path: nowhere.npz}", "{generate: grid}",
         "k.py:k", "../../x.py:k", "/etc/passwd.py:k", "k.py:nope", "[" * 200 + "]" * 200,
         "{type: lattice, shape: [99999999999, 99999999999]}", "2", "3", "100000000000"]
LIMIT = 800  # characters of a message: one short paragraph


def _check_load(path: Path, overrides: list[str] = ()) -> None:
    started = time.perf_counter()
    try:
        load_scene(path, overrides)
    except SceneError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < LIMIT, message[:2000]
        assert "Traceback" not in message
    assert time.perf_counter() - started < 5, "the loader took too long"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz")
    (path / "k.py").write_text(KERNEL)
    return path


def _mutate(text: str, kind: int, at: int, token: str) -> str:
    """One mutation at a position: replace the value on a line, insert, delete, truncate."""
    if not text:
        return token
    lines = text.splitlines(keepends=True)
    line = lines[at % len(lines)]
    if kind == 0 and ":" in line:  # replace the value after the first colon
        key = line.split(":", 1)[0]
        lines[at % len(lines)] = f"{key}: {token}\n"
    elif kind == 1:  # insert the token anywhere
        pos = at % (len(text) + 1)
        return text[:pos] + token + text[pos:]
    elif kind == 2:  # delete a run of characters
        pos = at % len(text)
        return text[:pos] + text[pos + 1 + at % 7:]
    elif kind == 3:  # truncate
        return text[: at % len(text)]
    else:  # replace a key (or the whole line) with the token
        lines[at % len(lines)] = f"{token}: 1\n" if kind == 4 else token + "\n"
    return "".join(lines)


mutations = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10_000),
                               st.sampled_from(NASTY)), min_size=1, max_size=3)
FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(mutations)
def test_mutated_scene_files_load_or_raise_one_short_scene_error(folder: Path, steps) -> None:
    text = BASE
    for kind, at, token in steps:
        text = _mutate(text, kind, at, token)
    path = folder / "s.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    _check_load(path)


KEYS = ["version", "name", "precision", "seed", "particles", "particles.count",
        "particles.dim", "particles.mass", "particles.mass.0", "initial", "initial.type",
        "initial.low", "initial.high", "initial.shape", "initial.path", "initial.frame",
        "topology", "topology.bonds", "topology.bonds.0", "topology.bonds.0.1",
        "topology.triangles", "energy", "energy.0", "energy.0.kernel", "energy.0.params",
        "energy.0.params.s", "energy.5.kernel", "integrator", "integrator.type",
        "integrator.damping", "step_kernels", "dt", "steps", "boundary", "boundary.type",
        "boundary.low", "outputs", "outputs.every", "outputs.xyz", "nope.deeper", "x" * 5000,
        "energy.-1.kernel", "energy." + "9" * 50, "", ".", "a..b"]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(NASTY)), min_size=1,
                max_size=3))
def test_fuzzed_overrides_load_or_raise_one_short_scene_error(folder: Path, sets) -> None:
    path = folder / "base.yaml"
    path.write_text(BASE)
    _check_load(path, [f"{key}={value}" for key, value in sets])


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mutations)
def test_mutated_scenes_through_the_cli_never_show_a_traceback(folder: Path, steps) -> None:
    text = BASE
    for kind, at, token in steps:
        text = _mutate(text, kind, at, token)
    (folder / "cli.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
    done = simrun("check", "cli.yaml", cwd=folder, timeout=60)
    assert done.returncode in (0, 1, 2), done.stderr[-3000:]  # not a signal (negative)
    assert "Traceback" not in done.stderr
    if done.returncode:
        assert len(done.stderr.strip().splitlines()) <= 3 and len(done.stderr) < LIMIT
