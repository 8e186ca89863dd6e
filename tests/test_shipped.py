"""What the package ships, used from a user's own folder: shipped scenes by name, the kernel
library by its stable name (simrun.kernels.<module>:<kernel>), `simrun examples`, and the
package-data globs that put them in the wheel (.ci/wheel-check.sh installs the wheel)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import REPO, simrun

from simrun.scene import load_scene
from simrun.scene.shipped import KERNELS, SCENES, scene_names

# 32 WCA atoms in a periodic box: a user's scene naming the shipped kernel by its stable name
WCA = """version: 2
name: wca_box
precision: f64
particles: {count: 32, dim: 3}
initial: {type: lattice, basis: fcc, shape: [2, 2, 2], spacing: [1.7, 1.7, 1.7], temperature: 1.0}
boundary: {type: periodic, low: [0, 0, 0], high: [3.4, 3.4, 3.4]}
neighbors: {cutoff: 1.2, skin: 0.3}
energy:
  - kernel: KERNEL
    params: {epsilon: 1.0, sigma: 1.0}
integrator: velocity_verlet
dt: 0.002
steps: 200
outputs: {every: 50}
"""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_scene_anywhere_names_a_library_kernel_by_its_stable_name(tmp_path: Path) -> None:
    """The same bits as the same module copied beside the scene; the job folder keeps a copy,
    hashed and named, and resumes and re-renders from it."""
    (tmp_path / "lib.yaml").write_text(WCA.replace("KERNEL", "simrun.kernels.lj:wca"))
    (tmp_path / "mine.py").write_bytes((KERNELS / "lj.py").read_bytes())
    (tmp_path / "own.yaml").write_text(WCA.replace("KERNEL", "mine.py:wca"))
    for name in ("lib", "own"):
        done = simrun("run", f"{name}.yaml", "--out", name, "--no-render", "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "lib" / "energy.csv").read_bytes() == \
        (tmp_path / "own" / "energy.csv").read_bytes()
    [source] = json.loads((tmp_path / "lib" / "run.json").read_text())["sources"]
    assert source["library"] == "simrun.kernels.lj" and source["copy"] == "kernels/lj.py"
    assert source["sha256"] == _sha256(KERNELS / "lj.py") == _sha256(tmp_path / "lib" /
                                                                       "kernels" / "lj.py")
    assert "kernel: kernels/lj.py:wca" in (tmp_path / "lib" / "scene.yaml").read_text()
    more = simrun("resume", "lib", "--steps", "300", "-q", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    with np.load(tmp_path / "lib" / "frames.npz") as frames:
        assert frames["step"][-1] == 300
    drawn = simrun("render", "lib", cwd=tmp_path)
    assert drawn.returncode == 0 and (tmp_path / "lib" / "energy.png").is_file(), drawn.stderr


@pytest.mark.parametrize(("reference", "expected"), [
    ("simrun.kernels.nope:wca", "the kernel library has no module 'simrun.kernels.nope' (it "
                                "has simrun.kernels.billiards,"),
    ("lj:wca", "'energy[0].kernel' is 'lj:wca', which is not a kernel reference. Write it as "
               "<module>.py:<kernel>, a file of the scene's (e.g. kernels/gravity.py:gravity), "
               "or as simrun.kernels.<module>:<kernel>"),
])
def test_a_wrong_library_name_says_what_is_allowed(tmp_path: Path, reference: str,
                                                   expected: str) -> None:
    (tmp_path / "s.yaml").write_text(WCA.replace("KERNEL", reference))
    done = simrun("check", "s.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: s.yaml:9:13: {expected}"), done.stderr


def test_the_library_is_trusted_however_it_is_named(tmp_path: Path) -> None:
    """A scene outside the repository naming kernels/lj.py from a cwd that has it (the
    repository) reaches the library: trusted. Another module of the cwd stays refused."""
    (tmp_path / "s.yaml").write_text(WCA.replace("KERNEL", "kernels/lj.py:wca"))
    done = simrun("check", str(tmp_path / "s.yaml"), cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert f"kernel code   {KERNELS / 'lj.py'}\n" in done.stdout
    (tmp_path / "s.yaml").write_text(WCA.replace("KERNEL", "tests/cli_helpers.py:wca"))
    refused = simrun("check", str(tmp_path / "s.yaml"), cwd=REPO)
    assert refused.returncode == 2 and "lies outside the scene's folder" in refused.stderr


def test_shipped_scenes_run_by_name_from_any_folder(tmp_path: Path) -> None:
    done = simrun("run", "gravity", "--steps", "200", "--no-render", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "outputs" / "gravity" / "run-001"
    assert done.stdout.strip() == str(Path("outputs") / "gravity" / "run-001")
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "ok" and info["scene"] == str(SCENES / "gravity.yaml")
    for command in (["check", "projectile.yaml"], ["check", "fit_spring"]):
        checked = simrun(*command, cwd=tmp_path)
        assert checked.returncode == 0 and checked.stdout.startswith("ok "), checked.stderr
    # a file of that name here wins over the shipped scene
    (tmp_path / "gravity").write_text((SCENES / "gravity.yaml").read_text().replace(
        "name: gravity", "name: mine"))
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "gravity.py").write_bytes((KERNELS / "gravity.py").read_bytes())
    mine = simrun("check", "gravity", cwd=tmp_path)
    assert mine.returncode == 0 and "scene 'mine'" in mine.stdout, mine.stderr


def test_an_unknown_scene_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    done = simrun("run", "gravty", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: gravty: scene file not found.")
    assert f"shipped scene: {', '.join(scene_names())} ('simrun examples'" in done.stderr
    assert list(tmp_path.iterdir()) == []
    elsewhere = simrun("run", "sub/gravity.yaml", cwd=tmp_path)  # a path: no shipped hint
    assert elsewhere.returncode == 2 and "shipped scene" not in elsewhere.stderr


def test_examples_copies_scenes_that_run_where_they_are_copied(tmp_path: Path) -> None:
    done = simrun("examples", "ex", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ex = tmp_path / "ex"
    for folder, copied in ((SCENES, ex / "scenes"), (KERNELS, ex / "kernels")):
        names = {p.name for p in folder.iterdir() if p.is_file()}
        assert names == {p.name for p in copied.iterdir()}
    for name in scene_names():  # every kernel module and data file is the folder's own
        scene = load_scene(ex / "scenes" / f"{name}.yaml")
        modules = {r.path for r in scene.kernel_refs()}
        assert modules and all(m.is_relative_to(ex.resolve()) for m in modules), name
    checked = simrun("check", "scenes/fit_lj.yaml", cwd=ex)  # a data file (g(r) CSV) too
    assert checked.returncode == 0, checked.stderr
    again = simrun("examples", "ex", cwd=tmp_path)  # never overwrites an edit
    assert again.returncode == 2 and "nothing was copied" in again.stderr


def _setuptools_config() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml (Python 3.11+)")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_data() -> list[str]:
    return _setuptools_config()["package-data"]["simrun"]


def _tracked(folder: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             str(folder.relative_to(REPO))], cwd=REPO, capture_output=True,
                            text=True)
    if listed.returncode != 0:  # not a git checkout: every file but caches
        return [str(p.relative_to(REPO)) for p in folder.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts]
    return listed.stdout.split()


def test_every_shipped_file_is_in_the_package_data() -> None:
    """A new data file beside the scenes (or kernels) that no glob covers would be missing
    from the wheel, and a scene naming it would fail only once installed."""
    globs = _package_data()
    files = _tracked(SCENES) + _tracked(KERNELS)
    assert len(files) > 20
    missed = [f for f in files if not any(
        fnmatch.fnmatchcase(str(Path(f).relative_to("simrun")), g) for g in globs)]
    assert not missed, f"add a package-data glob in pyproject.toml for {missed}"


def test_docs_pictures_stay_out_of_the_wheel() -> None:
    """The wheel holds the simrun package only: no glob reaches docs/ or a picture; the
    only images in the package are scene inputs (a grid scene's target), each named by a
    shipped scene."""
    config = _setuptools_config()
    assert config["packages"]["find"]["include"] == ["simrun*"]
    for glob in _package_data():
        assert ".." not in glob and not glob.startswith("/"), glob
        assert not fnmatch.fnmatchcase("docs/x.png", glob) and not glob.endswith(
            (".gif", "*")), glob
        assert not glob.endswith(".png") or glob == "scenes/*.png", glob
    scenes = "".join(p.read_text() for p in (REPO / "simrun" / "scenes").glob("*.yaml"))
    pictures = [p for p in (REPO / "simrun").rglob("*") if p.suffix in (".png", ".gif", ".jpg")
                and not (p.parent.name == "scenes" and p.suffix == ".png" and p.name in scenes)]
    assert not pictures, pictures


def test_ci_installs_the_wheel_and_runs_shipped_scenes_from_an_empty_folder() -> None:
    """.ci/run fails when .ci/wheel-check.sh does; the script stops at its first failure."""
    ci = (REPO / ".ci" / "run").read_text()
    assert "\nbash .ci/wheel-check.sh python || status=1\n" in ci
    script = REPO / ".ci" / "wheel-check.sh"
    text = script.read_text()
    assert "\nset -euo pipefail\n" in text and subprocess.run(["bash", "-n", str(script)]).returncode == 0
    for command in ("-m build", "-m venv", "simrun run gravity", "simrun grad projectile",
                    "--check", "simrun grad lj_nvt --method ensemble", "simrun.kernels.lj:wca",
                    "simrun examples"):
        assert command in text, command


def test_batch_takes_a_shipped_scene_by_name(tmp_path: Path, monkeypatch) -> None:
    """Each job's record names the shipped file (a worker has another cwd), not cwd/gravity."""
    from simrun.batch.plan import make_plan, make_points

    monkeypatch.chdir(tmp_path)
    plan = make_plan("gravity", make_points(["dt=1e-5,2e-5"], None, None, None), job="run",
                     sets=[], options={}, out_dir=tmp_path / "b", allow_outside=False)
    assert [s.scene_path for s in plan.specs] == [str(SCENES / "gravity.yaml")] * 2
