"""YAML file -> validated ``Scene``; every error names file:line:col of the offending node.

The file is composed (not constructed) with PyYAML's SafeLoader so each value keeps its
source position; ``--set`` overrides are applied to that node tree and validated the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode

from simrun.scene import (
    limits,
    load_bodies,
    load_fields,
    load_grids,
    load_integrator,
    load_optimize,
    load_state,
    load_terms,
    ranges,
    shipped,
)
from simrun.scene import species as species_mod
from simrun.scene.errors import SceneError, error_at, shorten, shorten_path
from simrun.scene.nodes import (
    MapReader,
    as_bool,
    as_choice,
    as_float,
    as_int,
    as_seq,
    as_str,
    as_vector,
)
from simrun.scene.overrides import apply_overrides
from simrun.scene.schema import (
    BOUNDARIES,
    PRECISIONS,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    Boundary,
    Initial,
    Neighbors,
    Outputs,
    Particles,
    Scene,
)
from simrun.scene.structure import Structure
from simrun.scene.units import CONSTANTS
from simrun.scene.yamlio import read_node

MAX_NAME = 100  # characters; file systems allow 255 in a folder name

TOP_KEYS = ("version", "name", "description", "precision", "seed", "particles", "initial",
            "energy", "topology", "integrator", "step_kernels", "controller", "fields", "dt",
            "steps", "boundary", "outputs", "thermo", "objective", "optimize", "neighbors",
            "units", "bodies", "grids")


def display_path(path: Path) -> str:
    """The path as the user would write it: relative to the cwd when that is shorter."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if len(rel) < len(str(path)) else str(path)


def _folder_given(path: Path, shown: str) -> str:
    """The message for a folder where a scene file belongs; a job folder's own scene.yaml
    is named, with `simrun resume` for continuing that job."""
    where = "the current directory" if shown in (".", "") else "a folder"
    own = path / "scene.yaml"
    if own.is_file():
        scene = shorten_path(display_path(own))
        return (f"{shown}: is {where}, not a scene file. It holds a job's resolved scene: "
                f"give '{scene}' to start a new job from it, or run 'simrun resume {shown}' "
                "to continue the job in that folder.")
    found = sorted(p.name for p in path.glob("*.yaml"))[:3] if os.access(path, os.R_OK) else []
    hint = f" (it holds {', '.join(found)})" if found else ""
    return (f"{shown}: is {where}, not a scene file{hint}. Give the path of a scene .yaml "
            "file, e.g. scenes/gravity.yaml.")


def compose(path: Path) -> Node:
    """Read ``path`` into a YAML node tree (safe loader only), with marks named after it."""
    shown = shorten_path(display_path(path))
    try:
        if not path.exists():
            raise SceneError(f"{shown}: scene file not found. Check the path (it is relative "
                             f"to the current directory, {Path.cwd()})."
                             + shipped.unknown_scene_hint(path))
        if path.is_dir():
            raise SceneError(_folder_given(path, shown))
        if not path.is_file():
            raise SceneError(f"{shown}: is not a file. Give the path of a scene .yaml file.")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SceneError(f"{shown}: cannot read the scene file ({shorten(reason)}).") from None
    node = read_node(text, shown)
    if node is None:
        raise SceneError(f"{shown}: the scene file is empty. Start it with "
                         f"'version: {SCHEMA_VERSION}'.")
    return node


def _particles(node: Node, seed: int, structure: Structure | None = None
               ) -> tuple[Particles, Node | None]:
    """The particles, and a ``mass`` given per species (applied once the species are known:
    they may come from the initial state's file). A structure file gives the count, the
    dimension (3) and the masses the scene does not."""
    r = MapReader(node, "particles")
    r.done(("count", "dim", "mass", "species", "species_order"))
    species_node, count_node = r.get("species"), r.get("count")
    species: tuple[str, ...] = ()
    if isinstance(species_node, MappingNode):  # counts per species: they give the count
        species = species_mod.counted(species_node, count_node, r.get("species_order"), seed)
        count_node = count_node or species_node
        count = len(species)
    elif structure is not None and count_node is None:
        count_node, count = node, structure.count
    else:
        count_node = r.require("count", "Add 'count: N' (the number of particles)")
        count = as_int(count_node, "particles.count", 1)
        if r.get("species_order") is not None:
            raise error_at(r.get("species_order"), "'particles.species_order' deals out "
                           "species counts, but 'species' gives no counts",
                           "Write species: {A: 800, B: 200}, or remove 'species_order'")
    dim_node = r.get("dim")
    dim = as_int(dim_node, "particles.dim") if dim_node else 2 if structure is None else 3
    if dim not in (2, 3):
        raise error_at(dim_node, f"'particles.dim' is {shorten(str(dim))} but must be 2 or 3")
    limits.check_particles(count_node, count, dim)  # before anything of that size is made
    if species_node is not None and not species:
        species = _species(species_node, count)
    if structure is not None and species and species != structure.species:
        raise error_at(species_node, "'particles.species' names the particles' species, but "
                       "the structure file in 'initial.path' gives each atom's own, and they "
                       "differ (a LAMMPS data file's types are named by the elements of their "
                       "masses)", "Remove 'species' (the file names them)")
    mass_node = r.get("mass")
    if mass_node is None and structure is not None and structure.masses is not None \
            and len(structure.masses) == count:
        masses = structure.masses
    elif mass_node is None or isinstance(mass_node, MappingNode):
        masses = (1.0,) * count
    elif isinstance(mass_node, ScalarNode):
        masses = (as_float(mass_node, "particles.mass", positive=True),) * count
    else:
        items = as_seq(mass_node, "particles.mass", count)
        masses = tuple(as_float(n, f"particles.mass[{i}]", positive=True)
                       for i, n in enumerate(items))
    per_species = mass_node if isinstance(mass_node, MappingNode) else None
    return Particles(count, dim, masses, species), per_species


def _with_file_species(p: Particles, init: Initial, init_node: Node | None,
                       per_species_mass: Node | None, structure: Structure | None = None
                       ) -> Particles:
    """Species named by the initial state's extended-XYZ file (where the scene names none),
    then the masses given per species."""
    if not p.species and structure is not None:
        p = replace(p, species=tuple(species_mod.check_name(
            MapReader(init_node, "initial").get("path"), name) for name in structure.species))
    elif not p.species and init.type == "file":
        names = species_mod.file_species(init.options, init_node)
        if names:
            p = replace(p, species=names)
    if per_species_mass is not None:
        p = replace(p, masses=species_mod.masses_per_type(per_species_mass, p.species))
    return p


def _species(node: Node, count: int) -> tuple[str, ...]:
    """One name per particle (one name for all, or a list)."""
    items = [node] * count if isinstance(node, ScalarNode) else \
        as_seq(node, "particles.species", count)
    names = tuple(as_str(n, "particles.species") for n in items)
    for item, name in zip(items, names):
        species_mod.check_name(item, name)
    return names


def _typed(node: Node | None, section: str, choices: tuple[str, ...], extra: tuple[str, ...],
           default: str) -> tuple[str, MapReader | None]:
    """Sections written either as a bare type name or as a mapping with ``type:``."""
    if node is None:
        return default, None
    if isinstance(node, ScalarNode):
        return as_choice(node, section, choices), None
    r = MapReader(node, section)
    r.done(("type",) + extra)
    type_node = r.get("type")
    return (as_choice(type_node, f"{section}.type", choices) if type_node else default), r


def _boundary(node: Node | None, dim: int, structure: Structure | None = None) -> Boundary:
    """The scene's box; a structure file's periodic cell where the scene gives none (no
    'boundary', or 'boundary: periodic' without low and high), as LAMMPS's read_data."""
    cell = structure is not None and structure.low is not None
    if cell and node is None:
        return Boundary("periodic", structure.low, structure.high)
    kind, r = _typed(node, "boundary", BOUNDARIES, ("low", "high"), "none")
    if cell and kind == "periodic" and (r is None or r.get("low") is None
                                        and r.get("high") is None):
        return Boundary("periodic", structure.low, structure.high)
    if kind == "none":
        if r:
            r.done(("type",))
        return Boundary("none", None, None)
    if r is None:
        raise error_at(node, f"a '{kind}' boundary needs a box",
                       f"Write boundary: {{type: {kind}, low: [0, 0], high: [1, 1]}}")
    low = as_vector(r.require("low"), "boundary.low", dim)
    high = as_vector(r.require("high"), "boundary.high", dim)
    if any(h <= lo for lo, h in zip(low, high)):
        raise error_at(r.get("high"), f"boundary box is empty: high {list(high)} must exceed "
                       f"low {list(low)} in every coordinate")
    return Boundary(kind, low, high)


def _largest_pair_cutoff(energy: tuple) -> float | None:
    """The largest cutoff the energy terms give per species pair (LAMMPS's list reaches
    the largest pair cutoff); None when no term gives one per pair."""
    found = [max(map(max, term.pairs["cutoff"])) for term in energy if "cutoff" in term.pairs]
    return max(found) if found else None


def _neighbors(node: Node | None, boundary: Boundary, pair_cutoff: float | None = None,
               default_skin: float = 0.3) -> Neighbors | None:
    """``neighbors: {cutoff, skin, max_neighbors}``; a periodic box must hold twice the
    reach (cutoff + skin) in every direction, so each pair has one nearest image. Without
    ``cutoff`` the list reaches the largest cutoff given per species pair."""
    if node is None:
        return None
    r = MapReader(node, "neighbors")
    if r.get("cutoff") is None and pair_cutoff is not None:
        cutoff = pair_cutoff
    else:
        cutoff = as_float(r.require("cutoff", "Write neighbors: {cutoff: 2.5, skin: 0.3}"),
                          "neighbors.cutoff", positive=True)
    skin_node, most = r.get("skin"), r.get("max_neighbors")
    skin = as_float(skin_node, "neighbors.skin", nonnegative=True) if skin_node \
        else default_skin
    r.done()
    if boundary.type == "periodic":
        shortest = min(h - lo for lo, h in zip(boundary.low or (), boundary.high or ()))
        if 2 * (cutoff + skin) > shortest:
            raise error_at(node, f"cutoff + skin = {cutoff + skin:g} is more than half the "
                           f"periodic box's shortest side ({shortest:g}), so a pair could "
                           "interact through two images", "Use a larger box or a shorter "
                           "cutoff or skin")
    return Neighbors(cutoff, skin, as_int(most, "neighbors.max_neighbors", 1) if most else None)


def _outputs(node: Node | None, steps_node: Node, steps: int, p: Particles,
             precision: str, grids: tuple[load_grids.Grid, ...] = ()) -> Outputs:
    default_every = max(1, steps // 100)
    every_node, values = None, {}
    if node is not None:
        r = MapReader(node, "outputs")
        flags = ("positions", "velocities", "forces", "energies", "xyz")
        r.done(("every",) + flags)
        every_node = r.get("every")
        values = {f: as_bool(r.get(f), f"outputs.{f}") for f in flags if r.get(f) is not None}
    every = as_int(every_node, "outputs.every", 1) if every_node else default_every
    outputs = Outputs(every, **values)
    frames = steps // every + 1 + (steps % every != 0)  # the last step is always saved
    limits.check_frames(every_node or steps_node, p.count, p.dim, precision, frames,
                        1 + outputs.velocities + outputs.forces,
                        outputs.xyz and outputs.positions, load_grids.frame_bytes(grids, precision))
    return outputs


def _name(node: Node | None, path: Path) -> str:
    name = as_str(node, "name") if node else path.stem
    if len(name) > MAX_NAME:
        raise error_at(node, f"the scene name has {len(name):,} characters, but it names the "
                       f"output folder, so at most {MAX_NAME} are allowed", "Shorten it")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise error_at(node, f"scene name '{shorten(name)}' may only use letters, digits, "
                       "'-', '_' and '.', because it names the output folder",
                       "Rename it, e.g. my_scene")
    return name


def _version(r: MapReader) -> int:
    node = r.require("version", f"Add 'version: {SCHEMA_VERSION}' as the first line")
    version = as_int(node, "version")
    if version not in READABLE_VERSIONS:
        raise error_at(node, f"scene schema version {version} is not supported (this simrun "
                       f"reads versions {', '.join(map(str, READABLE_VERSIONS))})",
                       f"Set version: {SCHEMA_VERSION}")
    return version


def _build(root: Node, path: Path, allow_outside: bool) -> Scene:
    r = MapReader(root, "scene")
    r.done(TOP_KEYS)
    version = _version(r)
    name_node, prec_node, seed_node = r.get("name"), r.get("precision"), r.get("seed")
    if r.get("description") is not None:
        as_str(r.get("description"), "description")
    seed = as_int(seed_node, "seed", 0) if seed_node else 0
    units = as_choice(r.get("units"), "units", tuple(CONSTANTS)) if r.get("units") \
        else "reduced"
    precision = as_choice(prec_node, "precision", PRECISIONS) if prec_node else "f64"
    bodies = load_bodies.bodies(r.get("bodies"), r, precision, path.parent)  # rigid boxes: they are the particles
    grids = load_grids.grids(r.get("grids"), path.parent, 4 if precision == "f32" else 8)
    structure = load_state.structure_of(r.get("initial"), path.parent, units)
    if bodies:
        particles, per_species_mass = bodies[1], None
    elif grids and r.get("particles") is None:  # a grid scene without particles
        particles, per_species_mass = Particles(0, grids[0].dim, ()), None
        if r.get("initial") is not None:
            raise error_at(r.key_node("initial"), "'initial' places particles, but the scene "
                           "has none", "Remove 'initial', or add 'particles:'")
    else:
        particles, per_species_mass = _particles(
            r.require("particles", "Add 'particles: {count: N, dim: 2}'"), seed, structure)
    dt = as_float(r.require("dt", "Add 'dt: 1e-4' (the time step)"), "dt", positive=True)
    steps_node = r.require("steps", "Add 'steps: 1000'")
    steps = as_int(steps_node, "steps", 1)
    init = bodies[2] if bodies else load_state.initial(r.get("initial"), particles, path.parent,
                                                       structure)
    particles = _with_file_species(particles, init, r.get("initial"), per_species_mass,
                                   structure)
    energy = load_terms.energy_terms(r.get("energy"), path.parent,
                                     species_mod.type_order(particles.species))
    stepk = load_terms.step_kernels(r.get("step_kernels"), path.parent)
    control = load_terms.step_kernels(r.get("controller"), path.parent, "controller")
    field_files, field_where = load_fields.fields(r.get("fields"), path.parent)
    objective = load_terms.objective(r.get("objective"), path.parent,
                                     species_mod.type_order(particles.species))
    if not allow_outside:
        load_terms.refuse_outside(path.parent, [t.kernel for t in energy]
                                  + list(stepk.kernels if stepk else ())
                                  + list(control.kernels if control else ())
                                  + ([objective.kernel] if objective and objective.kernel
                                     else []))
    if stepk is not None and r.get("integrator") is not None:
        raise error_at(r.key_node("integrator"), "a scene with 'step_kernels' integrates "
                       "itself, so 'integrator' has no effect", "Remove 'integrator'")
    if not energy and stepk is None:
        raise error_at(root, "the scene has no 'energy' terms and no 'step_kernels', so "
                       "nothing moves the particles",
                       "Add 'energy: [{kernel: kernels/gravity.py:gravity}]'")
    boundary = _boundary(r.get("boundary"), particles.dim, structure)
    scene = Scene(
        source=path.resolve(), version=version,
        name=_name(name_node, path),
        precision=precision,
        seed=seed,
        particles=particles, initial=init, energy=energy,
        topology=load_state.topology(r.get("topology"), particles, init),
        integrator=load_integrator.integrator(r.get("integrator"), _typed), dt=dt,
        steps=steps, thermo=load_integrator.thermo(r.get("thermo"), steps),
        boundary=boundary, neighbors=_neighbors(r.get("neighbors"), boundary,
                                                  _largest_pair_cutoff(energy),
                                                  CONSTANTS[units].skin),
        outputs=_outputs(r.get("outputs"), steps_node, steps, particles, precision, grids),
        step_kernels=stepk, controller=control, fields=field_files, fields_where=field_where,
        objective=objective, bodies=bodies[0] if bodies else None, grids=grids,
        optimize=load_optimize.optimize(r.get("optimize"), objective is not None),
        units=units)
    ranges.check_ranges(scene, root)  # every kernel-bound number fits the precision
    return scene


def load_scene(path: str | os.PathLike[str], overrides: Iterable[str] = (), *,
               allow_outside: bool = False) -> Scene:
    """Load and validate a scene file, applying ``key.path=value`` overrides first.

    A scene runs the Python of its kernel modules (when the stepper imports them), so a
    module outside the scene's folder and the ``kernels/`` folder beside it is refused unless
    ``allow_outside``. Nothing is imported here. Raises SceneError (one paragraph with
    file:line:col) for anything wrong in the scene. A bare name that is no file here, such
    as ``gravity``, names a shipped scene (``simrun/scenes/gravity.yaml``).
    """
    path = shipped.find_scene(path)
    root = apply_overrides(compose(path), overrides)
    return _build(root, path.resolve(), allow_outside)
