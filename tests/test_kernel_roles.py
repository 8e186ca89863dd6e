"""A kernel that cannot do its role's job is refused at its own line (exit 2), never run.

An energy kernel that never adds to U would give an energy of 0 and free flight; an objective
that never adds to L a J of 0 and zero gradients; a step kernel that writes none of the
state, or a controller whose output nothing reads, changes nothing. `check` and `run` both
refuse each, naming the kernel's file:line (its `def`) and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import simrun

MODULE = '''import simrun.lang as ti


@ti.kernel
def spring(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        U[None] += 0.5 * k * x[i].norm_sqr()


@ti.kernel
def no_u(x: ti.template(), k: float):
    for i in x:
        x[i] *= k


@ti.kernel
def reads_u(x: ti.template(), U: ti.template(), k: float):
    for i in x:
        x[i] += k * U[None]


@ti.kernel
def drift(x: ti.template(), v: ti.template(), dt: float):
    for i in x:
        x[i] += dt * v[i]


@ti.kernel
def idle(x: ti.template(), U: ti.template()):
    for i in x:
        U[None] += x[i][0]


@ti.kernel
def steer(x: ti.template(), push: ti.template()):
    for i in x:
        push[i] = -x[i][0]


@ti.kernel
def no_l(x: ti.template(), L: ti.template()):
    for i in x:
        x[i][0] += 0.0 * L[None]


@ti.kernel
def miss(x: ti.template(), L: ti.template()):
    for i in x:
        L[None] += x[i][0]


@ti.kernel
def named_e(x: ti.template(), E: ti.template()):
    for i in x:
        E[None] += x[i].norm_sqr()


@ti.kernel
def named_j(x: ti.template(), J: ti.template()):
    for i in x:
        J[None] += x[i][0]


def allocate(ctx):
    return {"push": ti.field(ctx.dtype, shape=ctx.n)}
'''

BASE = """version: 2
name: roles
particles: {count: 4, dim: 2, mass: 1.0}
initial: {type: random, low: [0, 0], high: [1, 1]}
dt: 0.01
steps: 3
"""
SPRING = "energy:\n  - {kernel: k.py:spring, params: {k: 1.0}}\n"


def _def_line(name: str) -> int:
    return MODULE.splitlines().index(next(s for s in MODULE.splitlines()
                                          if s.startswith(f"def {name}("))) + 1


@pytest.mark.parametrize("body, kernel, words", [
    ("energy:\n  - {kernel: k.py:no_u, params: {k: 1.0}}\n", "no_u",
     ["energy kernel 'no_u' never adds to U", "takes no argument 'U'", "U[None] += ..."]),
    ("energy:\n  - {kernel: k.py:reads_u, params: {k: 1.0}}\n", "reads_u",
     ["energy kernel 'reads_u' never adds to U", "takes U but never writes it"]),
    (SPRING + "step_kernels: {kernels: [k.py:drift, k.py:idle]}\n", "idle",
     ["step kernel 'idle' writes only U: none of the state"]),
    (SPRING + "controller: {kernels: [k.py:steer]}\n", "steer",
     ["controller kernel 'steer' writes push, which no energy term", "steers nothing"]),
])
def test_a_kernel_that_skips_its_role_is_refused_at_its_line(tmp_path: Path, body: str,
                                                             kernel: str, words: list[str]
                                                             ) -> None:
    (tmp_path / "k.py").write_text(MODULE)
    (tmp_path / "s.yaml").write_text(BASE + body)
    done = simrun("check", "s.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"k.py:{_def_line(kernel)}: " in done.stderr, done.stderr
    for text in words:
        assert text in done.stderr, done.stderr
    assert "s.yaml:" in done.stderr  # and where the scene names it


def test_run_refuses_an_energy_without_u_before_writing_a_frame(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(MODULE)
    (tmp_path / "s.yaml").write_text(BASE + "energy:\n  - {kernel: k.py:no_u, params: {k: 1}}\n")
    done = simrun("run", "s.yaml", "--out", "o", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"k.py:{_def_line('no_u')}: energy kernel 'no_u' never adds to U" in done.stderr
    assert not (tmp_path / "o" / "frames.npz").exists()


def test_an_objective_that_never_adds_to_l_is_refused(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(MODULE)
    (tmp_path / "s.yaml").write_text(BASE + SPRING + "objective: {kernel: k.py:no_l}\n")
    for command in (["check", "s.yaml"], ["grad", "s.yaml", "--wrt", "dt", "--out", "g"]):
        done = simrun(*command, cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"k.py:{_def_line('no_l')}: objective kernel 'no_l' never adds to L" in \
            done.stderr
        assert "J would be 0" in done.stderr and "Traceback" not in done.stderr


def test_kernels_that_do_their_roles_run(tmp_path: Path) -> None:
    """The same module: a controller whose output the objective reads, a step kernel that
    moves x, an energy and an objective that accumulate (so the refusals above are not
    refusing everything)."""
    (tmp_path / "k.py").write_text(MODULE.replace("def miss(x: ti.template(), L:",
                                                  "def miss(x: ti.template(), push: "
                                                  "ti.template(), L:"))
    (tmp_path / "s.yaml").write_text(BASE + SPRING + "step_kernels: {kernels: [k.py:drift]}\n"
                                     "controller: {kernels: [k.py:steer]}\n"
                                     "objective: {kernel: k.py:miss}\n")
    done = simrun("check", "s.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("body, command, kernel, target", [
    ("energy:\n  - {kernel: k.py:named_e}\n", "check", "named_e", "U"),
    (SPRING + "objective: {kernel: k.py:named_j}\n", "grad", "named_j", "L"),
])
def test_an_accumulator_of_another_name_gets_the_accumulator_advice(
        tmp_path: Path, body: str, command: str, kernel: str, target: str) -> None:
    """E for U (J for L) is not a parameter: the advice is the one a kernel without its
    accumulator gets, and following it (renaming the argument) makes the scene work."""
    (tmp_path / "k.py").write_text(MODULE)
    (tmp_path / "s.yaml").write_text(BASE + body)
    args = [command, "s.yaml"] + (["--wrt", "dt", "--out", "g"] if command == "grad" else [])
    done = simrun(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "params:" not in done.stderr, done.stderr
    wrong = "E" if target == "U" else "J"
    line = next(n for n, s in enumerate(MODULE.splitlines(), 1)
                if s.startswith(f"def {kernel}("))
    assert f"k.py:{line}: " in done.stderr and f"'{wrong}'" in done.stderr, done.stderr
    for text in (f"takes no argument '{target}'", f"'{target}: ti.template()'",
                 f"'{target}[None] += ...'"):
        assert text in done.stderr, done.stderr
    (tmp_path / "k.py").write_text(MODULE.replace(f"{wrong}: ti.template()", f"{target}: "
                                                  "ti.template()").replace(
        f"{wrong}[None]", f"{target}[None]"))
    done = simrun(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
