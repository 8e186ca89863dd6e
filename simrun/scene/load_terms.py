"""Scene sections that name kernels: ``energy`` terms and ``step_kernels``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode

from simrun.scene import shipped
from simrun.scene.errors import SceneError, error_at, shorten, shorten_path, where
from simrun.scene.nodes import MapReader, as_choice, as_float, as_seq, as_str, scalar
from simrun.scene.rdf_csv import ERRORS, is_rdf, partial_rdf_names, read_rdf_csv
from simrun.scene.schema import EnergyTerm, KernelRef, Objective, Scene, StepKernels
from simrun.scene.species import pair_params

REF_FIX = ("Write it as <module>.py:<kernel>, a file of the scene's (e.g. "
           "kernels/gravity.py:gravity), or as simrun.kernels.<module>:<kernel>, a kernel of "
           "the library installed with simrun (e.g. simrun.kernels.lj:lj_shifted)")


def search_dirs(scene_dir: Path) -> list[Path]:
    """Where relative kernel paths are looked up: the scene's folder, its parent, the cwd."""
    dirs = [scene_dir, scene_dir.parent, Path.cwd()]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in unique:
            unique.append(d.resolve())
    return unique


def kernel_ref(node: Node, name: str, scene_dir: Path) -> KernelRef:
    """``<module>.py:<kernel>`` (a file, relative to the scene's folder, its parent or the
    cwd) or ``simrun.kernels.<module>:<kernel>`` (the installed library, from anywhere)."""
    text = as_str(node, name)
    module, sep, kernel = text.rpartition(":")
    if not sep or not kernel.isidentifier() or not (
            module.endswith(".py") or module.startswith(f"{shipped.LIBRARY}.")):
        raise error_at(node, f"'{name}' is '{shorten(text)}', which is not a kernel reference",
                       REF_FIX)
    if not module.endswith(".py"):
        path = shipped.library_module(module)
        if path is None:
            raise error_at(node, f"the kernel library has no module '{shorten(module)}' (it "
                           f"has {', '.join(shipped.library_modules())})",
                           "Check the name, or give the path of a module file of your own")
        return KernelRef(path, kernel, where(node))
    candidates = [Path(module)] if Path(module).is_absolute() else [
        d / module for d in search_dirs(scene_dir)]
    for path in candidates:
        try:
            if path.is_file():
                return KernelRef(path.resolve(), kernel, where(node))
        except OSError:  # e.g. a name too long for the file system
            continue
    searched = ", ".join(shorten_path(c.parent) for c in candidates)
    raise error_at(node, f"kernel module '{shorten_path(module)}' was not found (looked in {searched})",
                   "Check the file name, or give a path relative to the scene file")


def trusted_folders(scene_dir: Path) -> tuple[Path, Path, Path]:
    """Where a scene's kernel modules may lie without --allow-outside: the scene's folder
    tree, the ``kernels/`` folder beside it (the layout ``scenes/x.yaml`` +
    ``kernels/x.py``) and the kernel library installed with simrun."""
    scene_dir = scene_dir.resolve()
    return scene_dir, scene_dir.parent / "kernels", shipped.KERNELS


def outside_modules(scene_dir: Path, refs: Iterable[KernelRef]) -> list[KernelRef]:
    """The references (one per module) whose module lies outside ``trusted_folders``."""
    folders = trusted_folders(scene_dir)
    seen: dict[Path, KernelRef] = {}
    for ref in refs:
        if not any(ref.path.resolve().is_relative_to(f) for f in folders):
            seen.setdefault(ref.path, ref)
    return list(seen.values())


def scene_modules(scene: Scene) -> tuple[list[Path], list[Path]]:
    """The kernel modules a scene imports (each once, in order), and those of them that lie
    outside ``trusted_folders`` (allowed with --allow-outside)."""
    refs = scene.kernel_refs()
    if scene.objective is not None and scene.objective.kernel is not None:
        refs.append(scene.objective.kernel)  # imported by simrun grad
    outside = [ref.path for ref in outside_modules(scene.source.parent, refs)]
    return list(dict.fromkeys(ref.path for ref in refs)), outside


def refuse_outside(scene_dir: Path, refs: Iterable[KernelRef]) -> None:
    """SceneError at the first reference to a module outside ``trusted_folders``, naming
    every such module: a scene runs its kernel modules' Python, so by default it may import
    only the modules that come with it (and simrun's own library)."""
    outside = outside_modules(scene_dir, refs)
    if not outside:
        return
    names = [shorten_path(ref.path) for ref in outside]
    listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    one = len(names) == 1
    folders = trusted_folders(scene_dir)
    raise SceneError(f"{outside[0].where}: kernel module{'' if one else 's'} {listed} "
                     f"lie{'s' if one else ''} outside the scene's folder ({folders[0]}) and "
                     f"the kernels folder beside it ({folders[1]}). A scene runs its kernel "
                     "modules' Python, so simrun imports only the modules that come with it "
                     f"(and {shipped.LIBRARY}.*). Move the module there, or add "
                     "--allow-outside if you trust it.")


def params(node: Node | None, name: str, per_pair: bool = False
           ) -> tuple[dict[str, float | int], dict[str, tuple[str, str]]]:
    """Parameter names -> numbers (ints stay ints, bools are refused), and where each
    parameter's key and value are written (for errors found once the kernel is loaded).
    With ``per_pair`` a mapping value is a parameter per species pair (scene/species.py),
    left out here."""
    if node is None:
        return {}, {}
    reader = MapReader(node, name)
    out: dict[str, float | int] = {}
    places: dict[str, tuple[str, str]] = {}
    for key, (key_node, value) in reader.items.items():
        if not key.isidentifier():
            raise error_at(key_node, f"parameter name '{shorten(key)}' in '{name}' is not a valid "
                           "Python identifier", "Use the kernel argument's name")
        places[key] = (where(key_node), where(value))
        if per_pair and isinstance(value, MappingNode):
            continue
        raw = scalar(value) if isinstance(value, ScalarNode) else None
        if isinstance(raw, int) and not isinstance(raw, bool):
            out[key] = raw
        else:
            out[key] = as_float(value, f"{name}.{key}")
    return out, places


def energy_terms(node: Node | None, scene_dir: Path, types: tuple[str, ...] = ()
                 ) -> tuple[EnergyTerm, ...]:
    """The ``energy`` list; ``types``: the scene's species, for parameters per pair."""
    if node is None:
        return ()
    terms = []
    for i, item in enumerate(as_seq(node, "energy")):
        section = f"energy[{i}]"
        reader = MapReader(item, section)
        reader.done(("kernel", "params", "mix"))
        ref = kernel_ref(reader.require("kernel", "Add 'kernel: kernels/<module>.py:<kernel>'"),
                         f"{section}.kernel", scene_dir)
        values, places = params(reader.get("params"), f"{section}.params", per_pair=True)
        pairs, pair_where = pair_params(reader.get("params"), reader.get("mix"), section, types)
        terms.append(EnergyTerm(ref, values, where(item), places, pairs,
                                types if pairs else (), pair_where))
    return tuple(terms)


def step_kernels(node: Node | None, scene_dir: Path, section: str = "step_kernels"
                 ) -> StepKernels | None:
    """`step_kernels` (they replace the integrator) or `controller` (called each step before
    the forces): {kernels: [module.py:kernel, ...], params: {...}}."""
    if node is None:
        return None
    reader = MapReader(node, section)
    reader.done(("kernels", "params"))
    items = as_seq(reader.require("kernels"), f"{section}.kernels")
    if not items:
        raise error_at(reader.get("kernels"), f"'{section}.kernels' is empty",
                       "List the kernels to call each step, in order")
    refs = tuple(kernel_ref(n, f"{section}.kernels[{i}]", scene_dir)
                 for i, n in enumerate(items))
    return StepKernels(refs, *params(reader.get("params"), f"{section}.params"))


OBJECTIVE_BUILTINS = ("kinetic", "potential", "total")
ENSEMBLE_BUILTINS = ("pressure", "potential_per_particle")  # averages: simrun/ensemble


def objective(node: Node | None, scene_dir: Path, types: tuple[str, ...] = ()
              ) -> Objective | None:
    """``objective: {builtin: kinetic | potential | total}`` or ``{kernel: ..., params: ...}``,
    with ``at: end | mean``; ``types``: the scene's species (partial g(r) targets)."""
    if node is None:
        return None
    reader = MapReader(node, "objective")
    reader.done(("builtin", "kernel", "params", "at", "targets"))
    if reader.get("targets") is not None:
        return _targets_objective(reader, node, scene_dir, types)
    builtin, kernel = reader.get("builtin"), reader.get("kernel")
    if (builtin is None) == (kernel is None):
        raise error_at(node, "'objective' needs exactly one of 'builtin' and 'kernel'",
                       "Write 'objective: {builtin: kinetic}' or "
                       "'objective: {kernel: kernels/loss.py:miss}'")
    at = reader.get("at")
    values, _ = params(reader.get("params"), "objective.params")
    if builtin is not None and values:
        raise error_at(reader.get("params"), "a built-in objective takes no 'params'",
                       "Remove 'params', or use a kernel objective")
    choices = OBJECTIVE_BUILTINS + ENSEMBLE_BUILTINS
    return Objective(
        builtin=as_choice(builtin, "objective.builtin", choices) if builtin else None,
        kernel=kernel_ref(kernel, "objective.kernel", scene_dir) if kernel else None,
        params=values, at=as_choice(at, "objective.at", ("end", "mean")) if at else "end",
        where=where(node))


TARGETS = ("pressure", "potential", "potential_per_particle", "rdf")
TARGET_MAX = 1e150  # a target average: its squared miss stays finite


def _target_value(node: Node, name: str) -> float:
    """A target average: finite, and small enough that its squared miss stays finite."""
    value = as_float(node, name)
    if abs(value) > TARGET_MAX:
        raise error_at(node, f"'{name}' is {value:g}, beyond {TARGET_MAX:g}: the squared "
                       "difference from it would overflow", "Give the average in units where "
                       "it is a moderate number")
    return value


def _target_error(node: Node, name: str) -> float:
    """A target's standard error: 0 (not known) or a number whose square is a normal float
    (it weights the polish by 1 / error^2)."""
    value = as_float(node, name, nonnegative=True)
    if value != 0 and not ERRORS[0] <= value <= ERRORS[1]:
        raise error_at(node, f"'{name}' is {value:g}: a target's error must be 0 or from "
                       f"{ERRORS[0]:g} to {ERRORS[1]:g} (its square weights the fit)",
                       "Give its standard error, or 0 where it is not known")
    return value


def _targets_objective(reader: MapReader, node: Node, scene_dir: Path,
                       types: tuple[str, ...]) -> Objective:
    """``objective: {at: mean, targets: {pressure: 1.2, rdf: {file: g.csv, weight: 1}}}``;
    a mixture's partial g(r)s as ``rdf[A:B]: {file: ...}`` (species pairs in type order)."""
    if reader.get("builtin") is not None or reader.get("kernel") is not None:
        raise error_at(node, "'objective' has 'targets' and a 'builtin' or 'kernel'",
                       "Keep 'targets' (averages to match) or the other, not both")
    at = reader.get("at")
    if at is None or as_choice(at, "objective.at", ("end", "mean")) != "mean":
        raise error_at(at or node, "'targets' are ensemble averages: the objective needs "
                       "'at: mean'", "Add 'at: mean'")
    targets = MapReader(reader.get("targets"), "objective.targets")
    names = (*TARGETS, *(partial_rdf_names(types) if len(types) > 1 else ()))
    targets.done(names)
    found: dict[str, dict] = {}
    for name in names:
        item = targets.get(name)
        if item is None:
            continue
        if is_rdf(name):
            r = MapReader(item, f"objective.targets.{name}")
            r.done(("file", "weight"))
            path = scene_dir / as_str(r.require("file", "Add 'file: rdf_target.csv'"),
                                      f"objective.targets.{name}.file")
            if not path.is_file():
                raise error_at(r.get("file"), f"the g(r) target file {shorten_path(path)} "
                               "does not exist", "Give a CSV with columns r,g beside the scene")
            read_rdf_csv(path)  # a bad row: exit 2 now, naming its line
            weight = r.get("weight")
            found[name] = {"file": path.resolve(), "weight": as_float(weight, "weight",
                                                                     nonnegative=True)
                           if weight is not None else 1.0}
            continue
        if isinstance(item, ScalarNode):
            found[name] = {"value": _target_value(item, f"objective.targets.{name}"),
                           "weight": 1.0}
            continue
        r = MapReader(item, f"objective.targets.{name}")
        r.done(("value", "weight", "error"))
        weight, error = r.get("weight"), r.get("error")
        found[name] = {"value": _target_value(r.require("value", "Add 'value: <target>'"),
                                              f"objective.targets.{name}.value"),
                       "weight": as_float(weight, "weight", nonnegative=True)
                       if weight is not None else 1.0}
        if error is not None:  # the target's standard error: weights the polish, and its error
            found[name]["error"] = _target_error(error, f"objective.targets.{name}.error")
    if not found:
        raise error_at(reader.get("targets"), "'objective.targets' names no target",
                       f"Give some of {', '.join(TARGETS)}")
    return Objective(builtin=None, kernel=None, params={}, at="mean", where=where(node),
                     targets=found)
