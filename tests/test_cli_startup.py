"""A `simrun` process loads what its command needs: help and early refusals (bad options,
bad YAML, a missing scene) exit without loading the compiler, the stepper or the jobs, so the
hundreds of CLI processes a user's scripts (and this suite) start do not pay for them.

Each case runs the CLI's entry in a fresh interpreter and lists, as it exits, the modules it
loaded; the exit status and the first line of stderr are checked as well, so a start-up that
became lazy by skipping the work would fail here too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO

# a command that must load these to refuse its input loaded far too much
HEAVY = ("simrun.lang.public", "simrun.lang.api", "simrun.stepper", "simrun.jobs.run",
         "simrun.keys", "simrun.adjoint", "llvmlite")

PROBE = """
import json, sys
heavy_names = tuple(json.loads(sys.argv[2]))
sys.argv = ["simrun", *json.loads(sys.argv[1])]
from simrun.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if m.startswith(heavy_names))
sys.stdout.write("\\nPROBE " + json.dumps([code, heavy]) + "\\n")
"""


def _start(args: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """(exit status, heavy modules loaded, stderr) of `simrun ARGS` in a fresh Python."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY)],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    code, heavy = json.loads(line[len("PROBE "):])
    return code, heavy, done.stderr


@pytest.mark.parametrize("args, code, says", [
    (["run", "--help"], 0, ""),
    (["grad", "--help"], 0, ""),  # the KEY table: stepper and compiler, by design
    (["run", "{bad}", "--steps", "0"], 2, "error: --steps 0: must be at least 1"),
    (["run", "{bad}"], 2, "YAML syntax error"),
    (["check", "{bad}"], 2, "YAML syntax error"),
    (["optimize", "{bad}"], 2, "YAML syntax error"),
    (["run", "no-such-scene.yaml"], 2, "error: "),
    (["resume", "{tmp}"], 2, "holds no job record"),
    (["nosuch"], 2, "No such command 'nosuch'"),
])
def test_help_and_refusals_load_no_compiler(tmp_path: Path, args: list[str], code: int,
                                            says: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("dt: [\n")
    args = [a.format(bad=bad, tmp=tmp_path) for a in args]
    got, heavy, stderr = _start(args, tmp_path)
    assert got == code, stderr
    assert says in stderr
    if args[0] == "grad":
        assert "simrun.keys" in heavy  # grad's help lists the KEY table's forms
    else:
        assert heavy == [], f"simrun {' '.join(args)} loaded {heavy}"


def test_a_run_still_loads_what_it_runs(tmp_path: Path) -> None:
    """The probe sees a command that does its work load the compiler (it can fail)."""
    got, heavy, stderr = _start(["check", str(REPO / "scenes" / "gravity.yaml")], tmp_path)
    assert got == 0, stderr
    assert "simrun.lang.public" in heavy and "simrun.stepper" in heavy


def test_lang_names_load_on_first_use(tmp_path: Path) -> None:
    """`import simrun.lang` alone loads no compiler; the first name used loads them all, and
    `ti.types` is Taichi's namespace even where the submodule `types` was imported first."""
    code = ("import sys, simrun.lang.types, simrun.lang.fields\n"
            "import simrun.lang as ti\n"
            "before = 'simrun.lang.api' in sys.modules\n"
            "v = ti.types.vector(3, ti.f32)\n"
            "print(before, 'simrun.lang.api' in sys.modules, v.n, callable(ti.kernel),"
            " ti.math.__name__, 'kernel' in dir(ti))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "3", "True", "simrun.lang.tmath", "True"], \
        done.stderr
