"""KEYs of parameters a species kernel reads per type pair (scene/species.py):
``energy.<i>.params.<name>[A:B]`` for one pair of a parameter given per pair, and
``energy.<i>.params.<name>`` for a single number that fills every pair. A KEY names the
pair with ':' in the scene's type order; ``[A,B]`` and ``[B:A]`` are refused naming that
spelling (a comma would split a CSV column such as horizon.csv's).

Both are a mask over the (types x types) field the kernel reads: the pair's two symmetric
entries, or every entry. dJ/dKEY is the mask's sum over the field's adjoint, and a tangent
along the KEY seeds the field's dual with the mask."""

from __future__ import annotations

import numpy as np

from simrun.scene import Scene
from simrun.scene.schema import EnergyTerm
from simrun.stepper.binding import find_kernel, load_module
from simrun.stepper.pairs import reads_pairs


def field_args(term: EnergyTerm) -> list[str]:
    """The (types x types) field arguments of a species kernel; [] for other kernels."""
    kernel = find_kernel(term.kernel, load_module(term.kernel.path))
    params = getattr(kernel, "params", None)
    if not callable(params) or not reads_pairs(kernel):
        return []
    return [a.name for a in params()[0] if a.kind == "template" and a.name != "species"]


def pair_keys(scene: Scene) -> dict[str, tuple[int, str, tuple[int, int] | None]]:
    """Every per-pair KEY of the scene: text -> (term index, parameter, pair or None for
    the number that fills every pair)."""
    found: dict[str, tuple[int, str, tuple[int, int] | None]] = {}
    for i, term in enumerate(scene.energy):
        defaults = getattr(load_module(term.kernel.path), "DEFAULTS", {}).get(
            term.kernel.name, {})
        for name in field_args(term):
            if name in term.pairs:
                types = term.types
                for a in range(len(types)):
                    for b in range(a, len(types)):
                        found[f"energy.{i}.params.{name}[{types[a]}:{types[b]}]"] = \
                            (i, name, (a, b))
            elif isinstance({**defaults, **term.params}.get(name), float):
                found[f"energy.{i}.params.{name}"] = (i, name, None)
    return found


def normalise(scene: Scene, text: str) -> str:
    """``[B,A]``, ``[A, B]`` or ``[B:A]`` as the KEY is listed (``[A:B]``, types in the
    scene's order)."""
    head, sep, rest = text.partition("[")
    if not sep or not rest.endswith("]"):
        return text
    names = [n.strip() for n in rest[:-1].replace(",", ":").split(":")]
    parts = head.split(".")
    if len(names) != 2 or len(parts) != 4 or not parts[1].isdigit() or \
            int(parts[1]) >= len(scene.energy):
        return text
    types = scene.energy[int(parts[1])].types
    if not all(n in types for n in names):
        return text
    names.sort(key=types.index)
    return f"{head}[{names[0]}:{names[1]}]"


def mask(count: int, pair: tuple[int, int] | None) -> np.ndarray:
    """Which entries of the (count x count) field the KEY's value is."""
    if pair is None:
        return np.ones((count, count))
    m = np.zeros((count, count))
    m[pair] = m[pair[::-1]] = 1.0
    return m


def pair_value(term: EnergyTerm, name: str, pair: tuple[int, int]) -> float:
    return float(term.pairs[name][pair[0]][pair[1]])


def with_pair_value(term: EnergyTerm, name: str, pair: tuple[int, int], value: float
                    ) -> EnergyTerm:
    """The term with one pair's value (both symmetric entries) replaced."""
    rows = [list(row) for row in term.pairs[name]]
    rows[pair[0]][pair[1]] = rows[pair[1]][pair[0]] = float(value)
    pairs = {**term.pairs, name: tuple(tuple(row) for row in rows)}
    return EnergyTerm(term.kernel, term.params, term.where, term.param_where, pairs,
                      term.types, term.pair_where)
