"""Species in a scene: each particle's type, masses per type, and energy parameters per type
pair (LAMMPS's ``pair_coeff I J`` and ``pair_modify mix geometric|arithmetic``).

``particles.species`` is one name (every particle), a list (one per particle) or counts per
species (``{A: 800, B: 200}``: the first 800 particles are A, unless ``species_order:
random`` deals the names out in an order drawn from the scene's seed, as LAMMPS's ``set type
/fraction``). Types are numbered in the names' natural order (type_order).

A pair kernel's parameter may be a mapping from pairs to values, ``epsilon: {A: 1.0, "A,B":
1.5, B: 0.5}`` (``A`` is the pair ``A,A``), which the stepper binds as a (types x types)
field of that name. Without ``mix:`` every pair must be given; with ``mix: geometric`` or
``arithmetic`` a missing unlike pair is mixed from the like ones as LAMMPS does: epsilon_ij
= sqrt(epsilon_i epsilon_j) for both, sigma_ij and cutoff_ij = sqrt(sigma_i sigma_j)
(geometric) or (sigma_i + sigma_j) / 2 (arithmetic).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from yaml.nodes import MappingNode, Node, ScalarNode

from simrun.outputs.xyz import read_xyz
from simrun.scene.errors import did_you_mean, error_at, shorten, where
from simrun.scene.nodes import MapReader, as_choice, as_float, as_int

MIX_RULES = ("geometric", "arithmetic")
ORDERS = ("blocks", "random")
# what LAMMPS's mixing defines, per parameter name: an energy or a distance
MIXED = {"epsilon": "energy", "sigma": "distance", "cutoff": "distance"}
NAME_FIX = "Use a chemical symbol such as Ar (ASE reads those) or a short tag"

Pairs = dict[str, tuple[tuple[float, ...], ...]]  # parameter -> symmetric (T, T) values
PairPlaces = dict[str, dict[tuple[int, int], tuple[str, str]]]


def type_order(species: tuple[str, ...]) -> tuple[str, ...]:
    """The species names in natural order (A < B, Ar < Kr, 2 < 10): type 0, 1, ... The
    order of first appearance would depend on a random deal's seed, and with it the spelling
    of the per-pair KEYs ([A:B] or [B:A]) and the layout of every per-pair table."""
    return tuple(sorted(set(species), key=_natural))


def _natural(name: str) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name) if part]


def type_ids(species: tuple[str, ...]) -> np.ndarray:
    """Each particle's type index (all 0 without species)."""
    order = {name: i for i, name in enumerate(type_order(species))}
    return np.array([order[s] for s in species] or [], dtype=np.int32)


def check_name(node: Node, name: str) -> str:
    if not name or not all(c.isalnum() or c in "_-+" for c in name):
        raise error_at(node, f"species name '{shorten(name)}' may only use letters, digits, "
                       "'_', '-' and '+' (it is a column of trajectory.xyz)", NAME_FIX)
    return name


def counted(node: MappingNode, count_node: Node | None, order_node: Node | None, seed: int
            ) -> tuple[str, ...]:
    """``{A: 800, B: 200}``: the names, one per particle, in blocks or dealt at random."""
    reader = MapReader(node, "particles.species")
    names: list[str] = []
    for name, (key, value) in reader.items.items():
        names += [check_name(key, name)] * as_int(value, f"particles.species.{name}", 1)
    if count_node is not None and as_int(count_node, "particles.count", 1) != len(names):
        raise error_at(count_node, f"particles.count is {count_node.value} but the species "
                       f"counts add up to {len(names)}",
                       "Remove 'count' (the counts give it) or make them agree")
    order = as_choice(order_node, "particles.species_order", ORDERS) if order_node \
        else "blocks"
    if order == "random":
        names = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    return tuple(names)


def masses_per_type(node: MappingNode, species: tuple[str, ...]) -> tuple[float, ...]:
    """``mass: {A: 1.0, B: 2.0}``: one mass per particle from its species' mass."""
    if not species:
        raise error_at(node, "'particles.mass' is given per species but the particles have "
                       "no species", "Add 'species: {A: 800, B: 200}' or give one mass")
    reader = MapReader(node, "particles.mass")
    known = type_order(species)
    for name, (key, _value) in reader.items.items():
        if name not in known:
            raise unknown_species(key, name, known, "particles.mass")
    missing = [name for name in known if name not in reader.items]
    if missing:
        raise error_at(node, f"'particles.mass' gives no mass for species "
                       f"{', '.join(missing)}", "Give every species its mass")
    per_type = {name: as_float(reader.items[name][1], f"particles.mass.{name}", positive=True)
                for name in known}
    return tuple(per_type[s] for s in species)


def unknown_species(node: Node, name: str, known: tuple[str, ...], section: str
                    ) -> Exception:
    hint = did_you_mean(name, known)
    listed = ", ".join(known) if known else "none (add particles.species)"
    return error_at(node, f"'{section}' names species '{shorten(name)}', which no particle "
                    f"has (the scene's species: {listed})",
                    hint or "Use one of the scene's species names")


def pair_of(key: Node, text: str, known: tuple[str, ...], section: str) -> tuple[int, int]:
    """``"A,B"`` (or ``A`` for ``A,A``) as a pair of type indices."""
    names = [part.strip() for part in text.split(",")] if "," in text else [text, text]
    if len(names) != 2:
        raise error_at(key, f"'{section}' has key '{shorten(text)}', which is not a species "
                       "pair", "Write a pair as \"A,B\" (quoted in a {...} mapping), or one "
                       "name A for the pair A,A")
    for name in names:
        if name not in known:
            raise unknown_species(key, name, known, section)
    i, j = known.index(names[0]), known.index(names[1])
    return (min(i, j), max(i, j))


def mix_value(rule: str, kind: str, a: float, b: float) -> float:
    """LAMMPS's mix_energy / mix_distance for ``geometric`` and ``arithmetic``."""
    if kind == "energy" or rule == "geometric":
        return math.sqrt(a * b)
    return (a + b) / 2


def pair_table(node: MappingNode, name: str, section: str, known: tuple[str, ...],
               mix: str | None, mix_node: Node | None
               ) -> tuple[tuple[tuple[float, ...], ...], dict[tuple[int, int], tuple[str, str]]]:
    """One parameter given per pair: the full symmetric matrix, and where each pair's value
    was written (a mixed pair: at ``mix:``)."""
    values: dict[tuple[int, int], float] = {}
    places: dict[tuple[int, int], tuple[str, str]] = {}
    for text, (key, value) in MapReader(node, section).items.items():
        pair = pair_of(key, str(text), known, section)
        if pair in values:
            raise error_at(key, f"'{section}' gives the pair {known[pair[0]]},"
                           f"{known[pair[1]]} twice", "Keep one of them")
        values[pair] = as_float(value, f"{section}.{text}")
        places[pair] = (where(key), where(value))
    count = len(known)
    for i in range(count):
        for j in range(i, count):
            if (i, j) in values:
                continue
            label = f"{known[i]},{known[j]}"
            if mix is None or i == j:
                fix = f"Add \"{label}\": <value> to '{section}'" + (
                    "" if i == j else ", or set 'mix: geometric' or 'mix: arithmetic' on "
                    "this energy term to mix it from the like pairs")
                raise error_at(node, f"'{section}' gives no value for the species pair "
                               f"{label}", fix)
            if name not in MIXED:
                raise error_at(node, f"'{section}' gives no value for the species pair "
                               f"{label}, and mixing rules define only "
                               f"{', '.join(MIXED)}", f"Add \"{label}\": <value>")
            values[(i, j)] = mix_value(mix, MIXED[name], values[(i, i)], values[(j, j)])
            places[(i, j)] = (where(mix_node), where(mix_node))
    matrix = tuple(tuple(values[(min(i, j), max(i, j))] for j in range(count))
                   for i in range(count))
    return matrix, places


def pair_params(params_node: Node | None, mix_node: Node | None, section: str,
                known: tuple[str, ...]) -> tuple[Pairs, PairPlaces]:
    """The parameters of one energy term that are given per species pair."""
    mix = as_choice(mix_node, f"{section}.mix", MIX_RULES) if mix_node else None
    pairs: Pairs = {}
    places: PairPlaces = {}
    if params_node is None or not isinstance(params_node, MappingNode):
        return pairs, places
    for name, (_key, value) in MapReader(params_node, f"{section}.params").items.items():
        if isinstance(value, ScalarNode):
            continue
        if not isinstance(value, MappingNode):
            raise error_at(value, f"'{section}.params.{name}' must be a number or a mapping "
                           "from species pairs to numbers", "Write e.g. {A: 1.0, \"A,B\": "
                           "1.5, B: 0.5}")
        if not known:
            raise error_at(value, f"'{section}.params.{name}' is given per species pair but "
                           "the particles have no species", "Add 'particles: {species: "
                           "{A: 800, B: 200}}', or give one number")
        pairs[name], places[name] = pair_table(value, name, f"{section}.params.{name}", known,
                                               mix, mix_node)
    if mix_node is not None and not pairs:
        raise error_at(mix_node, f"'{section}.mix' has nothing to mix: no parameter is given "
                       "per species", "Remove 'mix', or give e.g. epsilon: {A: 1.0, B: 0.5}")
    return pairs, places


def pairs_to_dict(pairs: Pairs, known: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Every pair written out (``A,A``, ``A,B``, ...): reloads to the same matrices."""
    return {name: {f"{known[i]},{known[j]}": matrix[i][j] for i in range(len(known))
                   for j in range(i, len(known))} for name, matrix in pairs.items()}


def species_to_data(species: tuple[str, ...]) -> str | list[str] | dict[str, int]:
    """The shortest form that reloads to the same names: one name, counts when the names
    come in blocks in type order, else the list."""
    known = type_order(species)
    if len(known) == 1:
        return known[0]
    counts = {name: species.count(name) for name in known}
    blocks = tuple(name for name in known for _ in range(counts[name]))
    return counts if blocks == species else list(species)


def species_from_data(data: object, count: int) -> list[str]:
    """The names ``species_to_data`` wrote (a resolved scene.yaml), one per particle; "X"
    for a scene without species."""
    if data is None:
        return ["X"] * count
    if isinstance(data, dict):
        return [str(name) for name, n in data.items() for _ in range(int(n))]
    if isinstance(data, list):
        return [str(name) for name in data]
    return [str(data)] * count


def file_species(options: dict, init_node: Node | None) -> tuple[str, ...]:
    """The species column of an ``initial: {type: file}`` extended-XYZ frame; () for an
    .npz or a file whose species are all ``X`` (simrun's default name)."""
    path = Path(options["path"])
    if path.suffix == ".npz":
        return ()
    frame = read_xyz(path)[options["frame"]]
    names = tuple(frame.get("species", ()))
    if set(names) <= {"X"}:
        return ()
    at = MapReader(init_node, "initial").get("path") if init_node is not None else None
    for name in dict.fromkeys(names):
        check_name(at, name)
    return names
