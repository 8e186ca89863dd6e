"""scenes/README.md's "your own energy kernel" example, run exactly as written: its code
blocks become the files their first comment names, and its commands run through the CLI."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
from cli_helpers import REPO, simrun

SECTION = "## Your own energy kernel"


def example() -> tuple[dict[str, str], list[list[str]]]:
    """({file name: text}, [command argv]) from the section's code blocks."""
    text = (REPO / "scenes" / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    files, commands = {}, []
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        if lang == "bash":
            commands += [shlex.split(line) for line in body.splitlines() if line.strip()]
        else:
            name = re.match(r"# (\S+?):", body).group(1)
            files[name] = body
    return files, commands


def test_the_morse_chain_example_runs_as_written(tmp_path: Path) -> None:
    files, commands = example()
    assert set(files) == {"morse.py", "morse.yaml"} and len(commands) == 2
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    outputs = []
    for argv in commands:
        assert argv[0] == "simrun", argv
        done = simrun(*argv[1:], cwd=tmp_path)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    run = tmp_path / "morse_run"
    assert (run / "kernels" / "morse.py").read_text() == files["morse.py"]
    # the kernel computes the Morse energy the README says (depth 5, rest 1, width 2 from
    # DEFAULTS): check's U at step 0 against NumPy on the first frame
    with np.load(run / "frames.npz") as frames:
        x = frames["x"][0]
    r = np.linalg.norm(np.diff(x, axis=0), axis=1)
    expected = np.sum(5.0 * (1 - np.exp(-2.0 * (r - 1.0))) ** 2)
    shown = float(re.search(r"potential energy at step 0 = (\S+)", outputs[0]).group(1))
    assert abs(shown - expected) <= 1e-7 * abs(expected)  # printed to 9 digits
    info = json.loads((run / "run.json").read_text())
    # velocity Verlet on a smooth U: the energy wanders by O((dt w)^2), w = width sqrt(2
    # depth / m) ~ 6, so ~1e-3 at dt = 0.005
    assert info["status"] == "ok" and abs(info["energy_drift"]["relative_largest"]) < 1e-3
