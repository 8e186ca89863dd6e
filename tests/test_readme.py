"""The README's two set-up commands, run as written, in a fresh virtual environment.

A copy of the checkout (the files git would clone) gets the README's commands through bash,
exactly as a newcomer types them: `python3 -m venv .venv && . .venv/bin/activate && pip
install ...`. The venv is a real fresh one (no system site-packages); pip may use its own
wheel and HTTP cache, so a second run costs about a minute rather than a download. With no
package index reachable (an offline sandbox) the install test is skipped, and says why.

The test command is run as written too, but on a few quick test files (PYTEST_ADDOPTS), not
the whole suite again: `.ci/run` runs that same command on the whole suite, which
`test_ci_runs_the_readme_test_command` checks.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from run_outputs import check_run_dir

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CI = REPO / ".ci" / "run"
NESTED = "SIMRUN_README_TEST_NESTED"  # set inside the nested test run: no recursion
QUICK_TESTS = "tests/test_scene_overrides.py tests/test_outputs.py"


def readme_commands() -> tuple[str, str]:
    """The quick-start commands: (install and run the main job, install and run the tests)."""
    quick = README.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", quick, re.S)]
    assert len(blocks) == 2, f"expected two commands in the README's quick start: {blocks}"
    main, tests = blocks
    assert "simrun run " in main and "pytest" in tests
    return main, tests


def split(command: str) -> list[list[str]]:
    """`a b && c d` -> [["a", "b"], ["c", "d"]]."""
    return [shlex.split(part) for part in command.split("&&")]


def test_readme_commands_set_up_a_fresh_venv() -> None:
    for command in readme_commands():
        steps = split(command)
        assert steps[0] == ["python3", "-m", "venv", ".venv"]
        assert steps[1] == [".", ".venv/bin/activate"]
        assert steps[2][:3] == ["pip", "install", "-e"]


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` = the README's test command (plus quiet flags, a pip upgrade and caches)."""
    _main, tests = readme_commands()
    venv, activate, install, pytest_cmd = split(tests)
    ci = [shlex.split(line) for line in CI.read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ["python3", *venv[1:]] in ci
    assert activate in ci
    ci_installs = [c for c in ci if c[:3] == ["python", "-m", "pip"] and "-e" in c]
    assert [c[c.index("-e"):] for c in ci_installs] == [install[install.index("-e"):]]
    ci_pytest = [c for c in ci if c[:3] == ["python", "-m", "pytest"]]
    assert len(ci_pytest) == 1 and ci_pytest[0][:len(pytest_cmd)] == pytest_cmd
    assert set(ci_pytest[0][len(pytest_cmd):]) <= {"-p", "no:cacheprovider"}


def fresh_checkout(dest: Path) -> Path:
    """The files a clone of this repository would have (tracked and unignored new files)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], cwd=REPO, capture_output=True,
                                check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        listed = None
    if listed is None:  # not a git checkout: copy all but environments and outputs
        shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(
            ".git", ".venv", "outputs", "__pycache__", "*.egg-info", ".*_cache"))
        return dest
    for name in filter(None, listed):
        source = REPO / name
        if source.is_symlink():  # scenes/ and kernels/ link into the package, as in a clone
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def clean_env(tmp: Path) -> dict[str, str]:
    """This process's environment minus what would leak its own Python setup into the child."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS",
                        "PYTEST_CURRENT_TEST", "MPLBACKEND", "SIMRUN_CACHE_DIR")}
    venv_bin = os.environ.get("VIRTUAL_ENV")
    if venv_bin:  # drop an activated venv (e.g. .ci/run's) from PATH: python3 is the system's
        parts = os.environ.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in parts if p != str(Path(venv_bin) / "bin"))
    env["SIMRUN_CACHE_DIR"] = str(tmp / "kernel-cache")  # compile from scratch, as new
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["COLUMNS"] = "100"
    return env


def package_index_reachable(tmp: Path, env: dict[str, str]) -> str | None:
    """None if pip can fetch a package, else why not (offline sandbox)."""
    python3 = shutil.which("python3", path=env.get("PATH"))
    if python3 is None:
        return "no python3 on PATH"
    probe = subprocess.run([python3, "-m", "pip", "download", "--no-deps", "--dest",
                            str(tmp / "probe"), "--quiet", "setuptools>=68"],
                           capture_output=True, text=True, env=env, timeout=300)
    if probe.returncode != 0:
        tail = (probe.stderr or probe.stdout).strip().splitlines()[-1:] or ["(no output)"]
        return f"pip cannot download packages here ({tail[0]})"
    return None


def bash(command: str, cwd: Path, env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.readme
@pytest.mark.skipif(os.environ.get(NESTED) == "1", reason="already inside the README test")
@pytest.mark.skipif(sys.platform == "win32", reason="the README's commands are for bash")
def test_readme_commands_work_in_a_fresh_venv(tmp_path: Path) -> None:
    checkout = fresh_checkout(tmp_path / "simrun")
    env = clean_env(tmp_path)
    offline = package_index_reachable(tmp_path, env)
    if offline:
        pytest.skip(f"no package index: {offline}")
    main, tests = readme_commands()

    done = bash(main, checkout, env, timeout=900)
    assert done.returncode == 0, f"{main}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    venv = checkout / ".venv"
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    assert (venv / "bin" / "simrun").is_file()
    runs = sorted((checkout / "outputs" / "gravity").iterdir())
    assert [r.name for r in runs] == ["run-001"]
    check_run_dir(runs[0], name="gravity", steps=20000, every=100, n=8, dim=2, max_drift=1e-3)
    assert f"outputs   outputs{os.sep}gravity{os.sep}run-001" in done.stdout
    assert "relative drift" in done.stdout and "Traceback" not in done.stderr

    report = tmp_path / "report.xml"
    nested = {**env, NESTED: "1",
              "PYTEST_ADDOPTS": f"-p no:cacheprovider --junitxml={shlex.quote(str(report))} "
                                f"{QUICK_TESTS}"}
    tested = bash(tests, checkout, nested, timeout=900)
    assert tested.returncode == 0, f"{tests}\n{tested.stdout[-3000:]}\n{tested.stderr[-3000:]}"
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts["tests"] - counts["skipped"] >= 10 and counts["failures"] == 0, counts
    assert counts["errors"] == 0, counts
