"""A fit's g(r) targets CSV and its scalar targets are checked when the scene loads: a bad
value is one paragraph naming the CSV, the row and the fix (exit 2), never a NaN loss blamed
on the scene's params, a histogram traceback, a NumPy warning or a ``chi^2 nan``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simrun.scene import SceneError, load_scene

ROOT = Path(__file__).resolve().parent.parent
GOOD = (ROOT / "scenes" / "fit_lj_rdf.csv").read_text().splitlines()
ROW = 10  # the bin these cases spoil: line ROW + 2 of the file (after the header)


def _with(column: int, text: str) -> list[str]:
    rows = [line.split(",") for line in GOOD[1:]]
    rows[ROW][column] = text
    return [GOOD[0], *(",".join(r) for r in rows)]


CASES = {
    "g nan": (_with(1, "nan"), f":{ROW + 2}: g = nan", "g must be a finite number"),
    "g 1e308": (_with(1, "1e308"), f":{ROW + 2}: g = 1e308", "from 0 to 1e+06"),
    "g negative": (_with(1, "-0.5"), f":{ROW + 2}: g = -0.5", "from 0"),
    "error nan": (_with(2, "nan"), f":{ROW + 2}: error = nan", "must be 0 or from 1e-150"),
    "error inf": (_with(2, "inf"), f":{ROW + 2}: error = inf", "must be 0 or from 1e-150"),
    "error negative": (_with(2, "-0.01"), f":{ROW + 2}: error = -0.01", "must be 0 or"),
    "error denormal": (_with(2, "1e-320"), f":{ROW + 2}: error = 1e-320", "must be 0 or"),
    "r descending": ([GOOD[0], *GOOD[:0:-1]], ":3: r = ", "the r column must increase"),
    "r uneven": (_with(0, "1.33"), f":{ROW + 2}: r = 1.33", "evenly spaced"),
    "not a number": (_with(1, "abc"), f":{ROW + 2}: g is 'abc', not a number", "header"),
    "empty": ([], ": the g(r) target file is empty", "header line 'r,g'"),
    "header only": ([GOOD[0]], ": the g(r) target file has no rows of bins", "at least two bins"),
    "one column": ([GOOD[0], "0.8", "0.85"], ":2: 1 column.", "header line 'r,g'"),
    "ragged": ([*GOOD[:5], "1.0,0.5"], ":6: 2 columns, but the rows before have 3",
               "same columns"),
}


def _project(tmp: Path, lines: list[str], sets: str = "") -> Path:
    (tmp / "kernels").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "kernels" / "lj.py", tmp / "kernels" / "lj.py")
    (tmp / "g.csv").write_text("".join(line + "\n" for line in lines))
    text = (ROOT / "scenes" / "fit_lj.yaml").read_text().replace("fit_lj_rdf.csv", "g.csv")
    (tmp / "fit.yaml").write_text(text + sets)
    return tmp / "fit.yaml"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_row_is_named_with_its_fix(tmp_path: Path, case: str) -> None:
    lines, where, rule = CASES[case]
    scene = _project(tmp_path, lines)
    with pytest.raises(SceneError) as caught:
        load_scene(scene)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'g.csv'}{where}"), message
    assert rule in message and "\n" not in message and "params" not in message, message


def test_the_shipped_targets_load() -> None:
    targets = load_scene(ROOT / "scenes" / "fit_lj.yaml").objective.targets
    assert set(targets) == {"pressure", "potential_per_particle", "rdf"}


@pytest.mark.parametrize("key, value, words", [
    ("value", "1e308", "beyond 1e+150"),
    ("error", "1e-320", "must be 0 or from 1e-150"),
])
def test_a_scalar_target_that_would_overflow_the_fit_is_refused(tmp_path: Path, key: str,
                                                                 value: str, words: str) -> None:
    scene = _project(tmp_path, GOOD)
    with pytest.raises(SceneError) as caught:
        load_scene(scene, [f"objective.targets.pressure.{key}={value}"])
    assert f"'objective.targets.pressure.{key}' is " in str(caught.value)
    assert words in str(caught.value), str(caught.value)


@pytest.mark.parametrize("case", ["g nan", "r descending", "empty"])
def test_optimize_refuses_a_bad_csv_with_exit_2_before_any_run(tmp_path: Path, case: str
                                                                ) -> None:
    lines, where, _rule = CASES[case]
    scene = _project(tmp_path, lines)
    done = subprocess.run([sys.executable, "-W", "default", "-m", "simrun.cli", "optimize",
                           str(scene), "--out", "o"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith(f"error: {tmp_path / 'g.csv'}{where}"), done.stderr
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
