"""Every command-line option README.md names exists where the README says it does (issue 44:
it named a `--lifetime` option that simrun does not have): an option of a `simrun` command,
or of the script, module or tool named in the same command line."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from simrun.cli.app import app

REPO = Path(__file__).resolve().parents[1]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# a command line: an inline code span (it may wrap), or a line of a fenced block
SPANS = re.compile(r"```.*?```|`[^`]+`", re.S)
EXTERNAL = {"dask": ("--host", "--port", "--nthreads"),  # Dask's own CLI, shown as typed
            "pytest": ("--ptx",)}


def _command_lines(text: str) -> list[str]:
    lines = []
    for span in SPANS.findall(text):
        if span.startswith("```"):
            lines += span.strip("`").splitlines()
        else:
            lines.append(" ".join(span.strip("`").split()))
    return lines


def _simrun_options() -> set[str]:
    commands = get_command(app).commands.values()
    return {"--help"} | {o for c in commands for p in c.params for o in p.opts + p.secondary_opts}


def _defined_by(line: str) -> str | None:
    """The source of the script or module a command line runs, else None."""
    script = re.search(r"python3? ((?:bench|scenes)/\S+\.py)", line)
    if script:
        return (REPO / script.group(1)).read_text(encoding="utf-8")
    module = re.search(r"python3? -m (simrun\.\S+)", line)
    if module:
        return (REPO / (module.group(1).replace(".", "/") + ".py")).read_text(encoding="utf-8")
    if re.search(r"\bpytest\b", line):
        return "".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").glob("*.py"))
    return None


def test_every_option_the_readme_names_exists() -> None:
    ours = _simrun_options()
    unknown = []
    for line in _command_lines((REPO / "README.md").read_text(encoding="utf-8")):
        tool = line.split()[0] if line.split() else ""
        source = _defined_by(line)
        for option in OPTION.findall(line):
            if tool in EXTERNAL and option in EXTERNAL[tool]:
                continue
            if source is not None:
                known = f'"{option}"' in source or f"'{option}'" in source
            else:
                known = option in ours or (tool == "pip")
            if not known:
                unknown.append(f"{option} in `{line.strip()}`")
    assert not unknown, "README options that do not exist: " + "; ".join(unknown)
