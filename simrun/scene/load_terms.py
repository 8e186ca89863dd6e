"""Scene sections that name kernels: ``energy`` terms and ``step_kernels``."""

from __future__ import annotations

from pathlib import Path

from yaml.nodes import Node, ScalarNode

from simrun.scene.errors import error_at, shorten, where
from simrun.scene.nodes import MapReader, as_choice, as_float, as_seq, as_str, scalar
from simrun.scene.schema import EnergyTerm, KernelRef, Objective, StepKernels

REF_FIX = "Write it as kernels/<module>.py:<kernel>, e.g. kernels/gravity.py:gravity"


def search_dirs(scene_dir: Path) -> list[Path]:
    """Where relative kernel paths are looked up: the scene's folder, its parent, the cwd."""
    dirs = [scene_dir, scene_dir.parent, Path.cwd()]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in unique:
            unique.append(d.resolve())
    return unique


def kernel_ref(node: Node, name: str, scene_dir: Path) -> KernelRef:
    text = as_str(node, name)
    module, sep, kernel = text.rpartition(":")
    if not sep or not module.endswith(".py") or not kernel.isidentifier():
        raise error_at(node, f"'{name}' is '{shorten(text)}', which is not a kernel reference",
                       REF_FIX)
    candidates = [Path(module)] if Path(module).is_absolute() else [
        d / module for d in search_dirs(scene_dir)]
    for path in candidates:
        try:
            if path.is_file():
                return KernelRef(path.resolve(), kernel, where(node))
        except OSError:  # e.g. a name too long for the file system
            continue
    searched = ", ".join(shorten(str(c.parent)) for c in candidates)
    raise error_at(node, f"kernel module '{shorten(module)}' was not found (looked in {searched})",
                   "Check the file name, or give a path relative to the scene file")


def params(node: Node | None, name: str
           ) -> tuple[dict[str, float | int], dict[str, tuple[str, str]]]:
    """Parameter names -> numbers (ints stay ints, bools are refused), and where each
    parameter's key and value are written (for errors found once the kernel is loaded)."""
    if node is None:
        return {}, {}
    reader = MapReader(node, name)
    out: dict[str, float | int] = {}
    places: dict[str, tuple[str, str]] = {}
    for key, (key_node, value) in reader.items.items():
        if not key.isidentifier():
            raise error_at(key_node, f"parameter name '{shorten(key)}' in '{name}' is not a valid "
                           "Python identifier", "Use the kernel argument's name")
        raw = scalar(value) if isinstance(value, ScalarNode) else None
        if isinstance(raw, int) and not isinstance(raw, bool):
            out[key] = raw
        else:
            out[key] = as_float(value, f"{name}.{key}")
        places[key] = (where(key_node), where(value))
    return out, places


def energy_terms(node: Node | None, scene_dir: Path) -> tuple[EnergyTerm, ...]:
    if node is None:
        return ()
    terms = []
    for i, item in enumerate(as_seq(node, "energy")):
        section = f"energy[{i}]"
        reader = MapReader(item, section)
        reader.done(("kernel", "params"))
        ref = kernel_ref(reader.require("kernel", "Add 'kernel: kernels/<module>.py:<kernel>'"),
                         f"{section}.kernel", scene_dir)
        values, places = params(reader.get("params"), f"{section}.params")
        terms.append(EnergyTerm(ref, values, where(item), places))
    return tuple(terms)


def step_kernels(node: Node | None, scene_dir: Path) -> StepKernels | None:
    if node is None:
        return None
    reader = MapReader(node, "step_kernels")
    reader.done(("kernels", "params"))
    items = as_seq(reader.require("kernels"), "step_kernels.kernels")
    if not items:
        raise error_at(reader.get("kernels"), "'step_kernels.kernels' is empty",
                       "List the kernels to call each step, in order")
    refs = tuple(kernel_ref(n, f"step_kernels.kernels[{i}]", scene_dir)
                 for i, n in enumerate(items))
    return StepKernels(refs, *params(reader.get("params"), "step_kernels.params"))


OBJECTIVE_BUILTINS = ("kinetic", "potential", "total")


def objective(node: Node | None, scene_dir: Path) -> Objective | None:
    """``objective: {builtin: kinetic | potential | total}`` or ``{kernel: ..., params: ...}``,
    with ``at: end | mean``."""
    if node is None:
        return None
    reader = MapReader(node, "objective")
    reader.done(("builtin", "kernel", "params", "at"))
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
    return Objective(
        builtin=as_choice(builtin, "objective.builtin", OBJECTIVE_BUILTINS) if builtin else None,
        kernel=kernel_ref(kernel, "objective.kernel", scene_dir) if kernel else None,
        params=values, at=as_choice(at, "objective.at", ("end", "mean")) if at else "end",
        where=where(node))
