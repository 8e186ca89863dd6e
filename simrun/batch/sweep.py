"""The sweep grammar: ``--sweep KEY=V1,V2,...``, ``range(a,b,step)``, ``linspace(a,b,n)``,
``logspace(a,b,n)``, a sweep file, and the points they make (a grid or a random sample).

A point maps each KEY (a scene path, as ``--set`` takes it) to a YAML value *text*, so it is
applied with the scene loader's own ``--set`` machinery and validated the same way.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from simrun.scene import SceneError
from simrun.scene.errors import shorten

Point = dict[str, str]  # KEY -> YAML text of its value
_FUNC = re.compile(r"^\s*(range|linspace|logspace)\s*\((.*)\)\s*$", re.S)
_OPEN, _CLOSE = "[{(", "]})"


MAX_JOBS = 100_000  # each job is a folder, a Dask task and a summary row


@dataclass(frozen=True)
class Axis:
    """One swept KEY: its values (YAML texts) and, for a function, the interval to sample.

    A function's values are made only when asked for (``values``), after its ``size`` was
    checked, so ``logspace(0,1,100000000)`` is refused at once instead of filling memory."""

    key: str
    listed: tuple[str, ...] = ()
    interval: tuple[float, float] | None = None  # range / linspace: [a, b]
    log: bool = False  # logspace: sample 10**U(a, b)
    function: tuple[str, tuple[float | int, ...]] | None = None  # (name, its numbers)

    @property
    def size(self) -> int:
        if self.function is None:
            return len(self.listed)
        name, nums = self.function
        return _range_count(*nums) if name == "range" else int(nums[2])

    @property
    def values(self) -> tuple[str, ...]:
        if self.function is None:
            return self.listed
        check_count(self.size, f"--sweep {shorten(self.key)}")
        return tuple(yaml_text(v) for v in _expand(*self.function))


def check_count(count: int, where: str) -> None:
    """SceneError (exit 2, before anything is made) for more jobs than a batch can run."""
    if count > MAX_JOBS:
        raise SceneError(f"{where}: the sweep makes {count:,} jobs, more than a batch runs "
                         f"(at most {MAX_JOBS:,}: each is a folder, a Dask task and a summary "
                         "row). Use fewer points, or --samples N for a random sample of the "
                         "ranges.")


def split_values(text: str) -> list[str]:
    """Split on commas outside brackets and quotes: ``[0,0],[0.5,0.5]`` -> two values."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def yaml_text(value: object) -> str:
    """A Python value as one line of YAML (what ``--set`` parses back to the same value)."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else yaml.safe_dump(value).split("\n")[0]
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    return text[:-4].strip() if text.endswith("\n...") else text.removesuffix("...").strip()


def as_number(text: str) -> float | int | None:
    """A value's YAML text as a number, or None. 1e-5 counts (YAML 1.1 reads it as text,
    but the scene loader takes it as a number)."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else value


def _number(text: str, where: str) -> float | int:
    value = as_number(text)
    if value is None:
        raise SceneError(f"{where}: '{shorten(text)}' is not a number")
    return value


def _tidy(x: float) -> float | int:
    """Round away float noise (0.1 * 3 = 0.30000000000000004); keep integers integers."""
    x = float(f"{x:.15g}")
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def _range_count(start: float, stop: float, step: float) -> int:
    return max(0, math.ceil((stop - start) / step - 1e-12))


def _expand(name: str, nums: tuple) -> list[float | int]:
    if name == "range":
        start, stop, step = nums
        values = [_tidy(start + i * step) for i in range(_range_count(start, stop, step))]
        return [int(v) for v in values] if all(isinstance(v, int) for v in nums) else values
    grid = np.linspace(nums[0], nums[1], int(nums[2]))
    return [_tidy(10.0 ** v if name == "logspace" else v) for v in grid]


def _function(name: str, args: list[str], key: str, where: str) -> Axis:
    nums = [_number(a, where) for a in args if a]
    if name == "range":
        if not 1 <= len(nums) <= 3:
            raise SceneError(f"{where}: range takes (stop), (start, stop) or (start, stop, step)")
        start, stop, step = ([0] + nums + [1])[:3] if len(nums) == 1 else (nums + [1])[:3]
        if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
            raise SceneError(f"{where}: range needs a non-zero, finite step")
        interval = (float(min(start, stop)), float(max(start, stop)))
        return _checked_axis(Axis(key, (), interval, function=(name, (start, stop, step))),
                             where)
    if len(nums) != 3 or not math.isfinite(nums[2]) or not float(nums[2]).is_integer() or \
            nums[2] < 1 or not all(math.isfinite(v) for v in nums[:2]):
        raise SceneError(f"{where}: {name} takes (a, b, n) with finite a and b and n >= 1 "
                         "points")
    if name == "logspace" and max(nums[:2]) > 308:
        raise SceneError(f"{where}: logspace(a, b, n) spans 10**a to 10**b, and 10**"
                         f"{max(nums[:2]):g} is beyond the largest float (1.8e308)")
    interval = (float(min(nums[:2])), float(max(nums[:2])))  # for samples: a > b is allowed
    return Axis(key, (), interval, log=name == "logspace",
                function=(name, (nums[0], nums[1], int(nums[2]))))


def _checked_axis(axis: Axis, where: str) -> Axis:
    if axis.size == 0:
        raise SceneError(f"{where}: the sweep of '{shorten(axis.key)}' has no values")
    return axis


def _axis(key: str, values: list, where: str) -> Axis:
    return _checked_axis(Axis(key, tuple(yaml_text(v) for v in values)), where)


def parse_sweep(text: str) -> Axis:
    """``KEY=V1,V2`` or ``KEY=range(...)|linspace(...)|logspace(...)`` -> an Axis."""
    where = f"--sweep {shorten(text)}"
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key or not all(p.strip() for p in key.split(".")) or not rest.strip():
        raise SceneError(f"{where} (command line): a sweep must look like KEY=V1,V2,... or "
                         "KEY=linspace(a,b,n), e.g. --sweep dt=1e-4,2e-4 or "
                         "--sweep energy.0.params.softening=logspace(-3,-1,5).")
    match = _FUNC.match(rest)
    if match:
        return _function(match.group(1), split_values(match.group(2)), key, where)
    values = split_values(rest)
    if any(not v for v in values):
        raise SceneError(f"{where}: an empty value (two commas in a row, or a trailing comma)")
    return Axis(key, tuple(values))


def read_sweep_file(path: Path) -> tuple[list[Axis], int | None, int | None]:
    """A sweep file: ``sweep: {KEY: [v1, v2] | "linspace(a,b,n)"}`` and optionally
    ``samples: N`` and ``sample_seed: S``. Returns (axes, samples, seed)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SceneError(f"{shorten(str(path))}: cannot read the sweep file ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("sweep"), dict) or \
            set(data) - {"sweep", "samples", "sample_seed"}:
        raise SceneError(f"{shorten(str(path))}: a sweep file holds 'sweep:' (a mapping of "
                         "KEY to a list of values or a 'linspace(a,b,n)' text) and optionally "
                         "'samples:' and 'sample_seed:'")
    axes = []
    for key, spec in data["sweep"].items():
        if isinstance(spec, list):
            axes.append(_axis(str(key), spec, f"{shorten(str(path))}: {key}"))
        else:
            axes.append(parse_sweep(f"{key}={spec}"))
    return axes, data.get("samples"), data.get("sample_seed")


def check_axes(axes: list[Axis]) -> None:
    keys = [a.key for a in axes]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise SceneError(f"--sweep: '{twice[0]}' is swept twice; give all its values in one "
                         "--sweep")


def grid(axes: list[Axis]) -> list[Point]:
    """The Cartesian product of the axes, the first axis varying slowest (counted first)."""
    check_axes(axes)
    check_count(math.prod(a.size for a in axes), "--sweep")
    return [dict(zip([a.key for a in axes], combo))
            for combo in itertools.product(*(a.values for a in axes))]


def sample(axes: list[Axis], count: int, seed: int) -> list[Point]:
    """``count`` random points: uniform in a range/linspace interval, log-uniform for
    logspace, one of the listed values otherwise; the same seed gives the same points."""
    check_axes(axes)
    check_count(count, f"--samples {count}")
    rng = np.random.default_rng(seed)
    points: list[Point] = []
    for _ in range(count):
        point = {}
        for axis in axes:
            if axis.interval is None:
                point[axis.key] = axis.values[int(rng.integers(len(axis.values)))]
            else:
                u = float(rng.uniform(*axis.interval))
                point[axis.key] = yaml_text(float(f"{10.0 ** u if axis.log else u:.12g}"))
        points.append(point)
    return points
