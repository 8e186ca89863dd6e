"""A g(r) target file (``objective.targets.rdf.file``, or ``rdf[A:B]``'s for the partial g(r)
of a species pair): a header line, then one row per bin,
``r,g`` or ``r,g,error``. Read and checked when the scene loads, so that a bad row is exit 2
naming the file, its line and the fix, instead of a NaN loss blamed on the scene's params,
a NumPy traceback in the histogram or a ``chi^2 nan`` at the end of a fit.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from simrun.scene.errors import SceneError, shorten

MAX_G = 1e6  # a pair distribution is of order 1; its square difference must stay finite
ERRORS = (1e-150, 1e150)  # a nonzero error's square (what weights the fit) is a normal float
SPACING_TOLERANCE = 1e-6  # relative: bin centres written with a few digits still count as even
FORMAT = "Write a header line 'r,g' (or 'r,g,error') and one row per bin (r its centre)"


def is_rdf(name: str) -> bool:
    """A g(r) target: ``rdf`` (over all pairs) or a partial ``rdf[A:B]``."""
    return name == "rdf" or (name.startswith("rdf[") and name.endswith("]"))


def rdf_pair(name: str) -> tuple[str, str] | None:
    """The species pair of a partial g(r) target ``rdf[A:B]`` (None: all pairs)."""
    if name == "rdf":
        return None
    first, _, second = name[4:-1].partition(":")
    return first, second


def partial_rdf_names(types: tuple[str, ...]) -> list[str]:
    """The partial g(r) targets a scene with these species may name: ``rdf[A:B]`` for each
    pair, in either order (g_AB is g_BA)."""
    return [f"rdf[{a}:{b}]" for a in types for b in types]


def _number(path: Path, line: int, name: str, text: str, rule: str, ok) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SceneError(f"{path}:{line}: {name} is '{shorten(text.strip())}', not a number. "
                         f"{FORMAT}.") from None
    if not ok(value):
        raise SceneError(f"{path}:{line}: {name} = {text.strip()}, but {rule}. Fix the row.")
    return value


def _g_ok(g: float) -> bool:
    return math.isfinite(g) and 0 <= g <= MAX_G


def _error_ok(e: float) -> bool:
    return e == 0 or ERRORS[0] <= e <= ERRORS[1]


def _row(path: Path, line: int, cells: list[str]) -> list[float]:
    r = _number(path, line, "r", cells[0], "r must be a finite number (a bin's centre)",
                math.isfinite)
    g = _number(path, line, "g", cells[1], f"g must be a finite number from 0 to {MAX_G:g} "
                "(a pair distribution is of order 1)", _g_ok)
    if len(cells) == 2:
        return [r, g]
    error = _number(path, line, "error", cells[2], "the error (g's standard error, whose "
                    f"square weights the fit) must be 0 or from {ERRORS[0]:g} to "
                    f"{ERRORS[1]:g}; write 0 where it is not known", _error_ok)
    return [r, g, error]


def _check_bins(path: Path, lines: list[int], r: np.ndarray) -> None:
    """r: increasing and evenly spaced bin centres."""
    steps = np.diff(r)
    for k, step in enumerate(steps):
        if step <= 0:
            raise SceneError(f"{path}:{lines[k + 1]}: r = {r[k + 1]:g} after r = {r[k]:g}: the "
                             "r column must increase (bin centres, smallest first). Sort the "
                             "rows by r.")
    spacing = steps[0]
    for k, step in enumerate(steps):
        if abs(step - spacing) > SPACING_TOLERANCE * spacing:
            raise SceneError(f"{path}:{lines[k + 1]}: r = {r[k + 1]:g} is {step:g} after the "
                             f"row before, but the first bins are {spacing:g} apart: the r "
                             "column must be evenly spaced bin centres. Fix the row.")


def read_rdf_csv(path: Path) -> np.ndarray:
    """The rows (bins, 2 or 3) of a g(r) CSV; SceneError naming the file, line and fix."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SceneError(f"{path}: the g(r) target file cannot be read "
                         f"({shorten(str(exc))}). {FORMAT}.") from None
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(numbered) < 3:
        held = "is empty" if not numbered else \
            f"has {'no rows' if len(numbered) == 1 else 'one row'} of bins"
        raise SceneError(f"{path}: the g(r) target file {held}; it needs a header line and "
                         f"at least two bins. {FORMAT}.")
    rows, lines = [], []
    for n, line in numbered[1:]:
        cells = line.split(",")
        if len(cells) not in (2, 3):
            raise SceneError(f"{path}:{n}: {len(cells)} column{'s' * (len(cells) > 1)}. "
                             f"{FORMAT}.")
        if rows and len(cells) != len(rows[0]):
            raise SceneError(f"{path}:{n}: {len(cells)} columns, but the rows before have "
                             f"{len(rows[0])}. Give every row the same columns.")
        rows.append(_row(path, n, cells))
        lines.append(n)
    data = np.array(rows, dtype=float)
    _check_bins(path, lines, data[:, 0])
    return data
