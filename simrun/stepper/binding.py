"""Kernel modules: import by file path, find kernels, bind their arguments by name.

The convention (documented in ``kernels/__init__.py``): a kernel's parameters are matched by
name against the system's fields, the scalar ``dt``, fields from the module's ``allocate``
hook, then the scene's ``params`` and the module's ``DEFAULTS``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import math
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import simrun.lang as ti
from simrun.lang.ad import GradReplaced
from simrun.lang.api import _checked as checked_argument
from simrun.lang.api import hold_init
from simrun.lang.frontend.source import _annotation_span, get_source
from simrun.scene import SceneError
from simrun.scene.errors import did_you_mean, shorten
from simrun.scene.limits import machine_memory
from simrun.scene.schema import TOPOLOGY_KINDS, KernelRef

_MODULES: dict[tuple[str, float], ModuleType] = {}


@dataclass
class KernelContext:
    """What a module's ``allocate(ctx)`` hook may use to size and fill its fields."""

    n: int
    dim: int
    dtype: Any  # the simrun.lang float type of the scene
    np_dtype: type
    x0: np.ndarray
    masses: np.ndarray
    topology: Mapping[str, np.ndarray]
    params: Mapping[str, float | int]
    bodies: Any = None  # the scene's rigid boxes and springs (scene.bodies.Bodies), if any
    scratch_fields: list[Any] = field(default_factory=list)

    def scratch(self, f: Any) -> Any:
        """Mark `f` (a field the hook returns) as scratch and return it: each step writes it
        before reading it (an MPM grid), so it is no part of a state and a gradient's stored
        states leave it out (kernels/__init__.py states the contract; the gradient checks it)."""
        self.scratch_fields.append(f)
        return f

    def check_memory(self, nbytes: int, what: str) -> None:
        """ValueError (the scene's error at the module's kernels) when fields of `nbytes`
        cannot fit in this machine's memory: refused before they are made, not a MemoryError
        or the OOM killer part-way."""
        have = machine_memory()
        if have is not None and nbytes > have:
            raise ValueError(f"{what} needs at least {nbytes / 1e9:,.1f} GB of memory, but "
                             f"this machine has {have / 1e9:,.1f} GB")

    def scratch_names(self, fields: Mapping[str, Any]) -> set[str]:
        """The names, among the hook's `fields`, of those marked scratch."""
        return {n for n, f in fields.items() if any(f is s for s in self.scratch_fields)}


@dataclass
class BoundKernel:
    """A kernel with its arguments fixed; calling it launches the kernel."""

    ref: KernelRef
    kernel: Callable[..., Any]
    args: tuple[Any, ...]

    def __call__(self) -> None:
        self.kernel(*self.args)


def _import_error(path: Path, exc: BaseException) -> SceneError:
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        line = frames[-1].lineno if frames else None
    where = f"{path}:{line}" if line else str(path)
    return SceneError(f"{where}: the kernel module failed to load: {type(exc).__name__}: "
                      f"{shorten(str(exc), 300)}. Fix the module (it must be plain simrun.lang code that imports "
                      "'simrun.lang as ti').")


def load_module(path: Path) -> ModuleType:
    """Import a kernel module from its file (cached while the file is unchanged)."""
    key = (str(path), path.stat().st_mtime)
    if key in _MODULES:
        return _MODULES[key]
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"simrun_kernels.{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SceneError(f"{path}: cannot be imported as a Python module. Give a .py file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with hold_init("the scene (its 'precision:')"):  # a module's ti.init(): the scene wins
            spec.loader.exec_module(module)
    except SceneError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in user code is a bad scene
        sys.modules.pop(name, None)
        raise _import_error(path, exc) from None
    _MODULES[key] = module
    return module


def is_kernel(obj: Any) -> bool:
    """A ``@ti.kernel`` of simrun.lang (or Taichi, whose kernels carry ``_primal``), or a
    ``@ti.ad.grad_replaced`` function (an energy that brings its own gradient)."""
    kernel_type = getattr(ti, "Kernel", None)
    return (isinstance(kernel_type, type) and isinstance(obj, kernel_type)) or \
        hasattr(obj, "_primal") or isinstance(obj, GradReplaced)


def parameter_names(kernel: Any) -> list[str]:
    fn = getattr(kernel, "pyfunc", None) or inspect.unwrap(kernel)
    return list(inspect.signature(fn).parameters)


def module_kernels(module: ModuleType) -> list[str]:
    return [n for n, obj in vars(module).items() if not n.startswith("_") and is_kernel(obj)]


def find_kernel(ref: KernelRef, module: ModuleType) -> Any:
    obj = getattr(module, ref.name, None)
    if obj is not None and is_kernel(obj):
        return obj
    names = module_kernels(module)
    hint = did_you_mean(ref.name, names)
    listed = "It defines: " + (", ".join(names) if names else "no kernels")
    raise SceneError(f"{ref.where}: '{shorten(ref.name)}' is not a @ti.kernel in {ref.path}. "
                     f"{hint + ' ' if hint else ''}{listed}.")


def check_params(ref: KernelRef, given: Iterable[str], accepted: Iterable[str], where: str,
                 places: Mapping[str, tuple[str, str]] | None = None) -> None:
    """Every scene parameter must name an argument of (one of) the kernel(s).

    The error points at the parameter's key when ``places`` knows it, else at ``where``."""
    accepted = sorted(set(accepted))
    for name in given:
        if name not in accepted:
            hint = did_you_mean(name, accepted)
            at = places[name][0] if places and name in places else where
            raise SceneError(f"{at}: parameter '{shorten(name)}' is not an argument of kernel "
                             f"'{ref.name}' ({ref.path.name}). {hint + ' ' if hint else ''}"
                             f"Its arguments are: {', '.join(accepted)}.")


def check_limits(ref: KernelRef, module: ModuleType, values: Mapping[str, Any], where: str,
                 places: Mapping[str, tuple[str, str]], context: Mapping[str, Any]) -> None:
    """The module's ``LIMITS[kernel]``: conditions on the parameters such as ``"k >= 0"`` or
    ``"first + count <= n"`` (``n``: particle count, ``dim``), checked before any launch.

    A broken condition is reported at the value of a parameter it names that the scene sets
    (preferring a --set override), else at the kernel reference."""
    broken = broken_condition(module, ref.name, values, context)
    if broken is not None:
        condition, known = broken
        given = [n for n in known if n in places]
        from_cli = [n for n in given if places[n][1].endswith("(command line)")]
        culprit = (from_cli or given or [None])[-1]  # an override, else the last one named
        at = places[culprit][1] if culprit else where
        shown = ", ".join(f"{n} = {v:g}" for n, v in known.items())
        what = f"parameter '{culprit}'" if culprit else "the parameters"
        raise SceneError(f"{at}: {what} of kernel '{ref.name}' ({ref.path.name}) must satisfy "
                         f"{condition} (here {shown}). Change the value in the scene's "
                         "params.")


def broken_condition(module: ModuleType, kernel: str, values: Mapping[str, Any],
                     context: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The first of the module's ``LIMITS[kernel]`` that ``values`` (over ``context``: n,
    dim, list_cutoff) break, with the values it names; None when every one holds. A
    condition naming an argument this binding does not have is skipped."""
    for condition in getattr(module, "LIMITS", {}).get(kernel, ()):
        names = [n.id for n in ast.walk(ast.parse(condition, mode="eval"))
                 if isinstance(n, ast.Name)]
        scope = {**context, **values}
        known = {n: scope[n] for n in dict.fromkeys(names) if n in scope}
        if len(known) < len(set(names)):
            continue
        if not eval(condition, {"__builtins__": {}}, dict(known)):  # noqa: S307 - module's own text
            return condition, known
    return None


def check_param_types(ref: KernelRef, kernel: Any, values: Mapping[str, Any], where: str,
                      places: Mapping[str, tuple[str, str]], float_widths: bool = True
                      ) -> None:
    """Each scene parameter fits its kernel argument's type (an f32 holds at most 3.4e38, an
    i32 2**31 - 1): refused at the parameter's key before any launch, instead of an
    OverflowError naming only the kernel argument in the middle of a run."""
    params = getattr(kernel, "params", None)
    if not callable(params):  # a grad_replaced energy: its own Python takes the values
        return
    for arg in params()[0]:
        if arg.kind != "scalar" or arg.name not in values or \
                (arg.dtype.is_float and not float_widths):
            continue
        value = values[arg.name]
        if not arg.dtype.is_float and isinstance(value, float) and math.isfinite(value) \
                and not value.is_integer():  # a launch would truncate it, without a word
            at = places[arg.name][1] if arg.name in places else where
            raise SceneError(f"{at}: parameter '{arg.name}' of kernel '{ref.name}' "
                             f"({ref.path.name}) is an integer ({arg.dtype.name}), but the "
                             f"scene gives {value:g}, which the kernel would take as "
                             f"{int(value)}. Write a whole number.")
        try:
            checked_argument(ref.name, arg.name, arg.dtype, value)
        except (OverflowError, ValueError, TypeError) as exc:
            at = places[arg.name][1] if arg.name in places else where
            raise SceneError(f"{at}: parameter '{arg.name}' does not fit its kernel argument: "
                             f"{shorten(str(exc), 300)}. Change the value in the scene's "
                             "params (with 'precision: f64' a float argument holds up to "
                             "1.8e308).") from None


def check_precision(ref: KernelRef, kernel: Any, fp: Any) -> None:
    """A float argument narrower than the scene's precision (``ti.f32`` in an f64 scene) is
    refused at its annotation: its value would be rounded to f32 with no word, and the
    gradient check would then fail with no hint why."""
    params = getattr(kernel, "params", None)
    if not callable(params):  # a grad_replaced energy: its own Python takes the values
        return
    for arg in params()[0]:
        dtype = arg.dtype if arg.kind == "scalar" else \
            getattr(arg.annotation, "dtype", None) if arg.kind == "matrix" else None
        if dtype is None or not dtype.is_float or dtype.bits >= fp.bits:
            continue
        span = _annotation_span(kernel.pyfunc, arg.name)
        raise SceneError(
            f"{span or ref.path}: kernel '{ref.name}' argument '{arg.name}' is annotated "
            f"{dtype.name}, but the scene ({ref.where}) computes in {fp.name}: the value would "
            f"be rounded to {dtype.name}. Annotate it `float` (the scene's precision), or set "
            f"'precision: {dtype.name}' in the scene.")


def bind(ref: KernelRef, kernel: Any, values: Mapping[str, Any], defaults: Mapping[str, Any],
         accumulator: tuple[str, str] | None = None) -> BoundKernel:
    """Fix the kernel's arguments from ``values`` (fields, dt, params) and ``defaults``.

    ``accumulator``: the kernel's role and the 0-D field it must add to (``("energy",
    "U")``, ``("objective", "L")``), which an unmatched field argument is most likely meant
    to be."""
    args = []
    names = parameter_names(kernel)
    for name in names:
        if name in values:
            args.append(values[name])
        elif name in defaults:
            args.append(defaults[name])
        elif name in TOPOLOGY_KINDS:
            raise SceneError(f"{ref.where}: kernel '{ref.name}' needs topology '{name}' but the "
                             f"scene defines none. Add 'topology: {{{name}: ...}}' to the scene.")
        elif _is_field_argument(kernel, name):  # params hold numbers, never a field
            raise SceneError(_unknown_field(ref, kernel, name, values, accumulator
                                            if accumulator and accumulator[1] not in names
                                            else None))
        else:
            raise SceneError(f"{ref.where}: kernel '{ref.name}' argument '{name}' has no value. "
                             f"Add it under this term's 'params:' (or to DEFAULTS in "
                             f"{ref.path.name}).")
    return BoundKernel(ref, kernel, tuple(args))


def _is_field_argument(kernel: Any, name: str) -> bool:
    params = getattr(kernel, "params", None)
    return callable(params) and any(p.name == name and p.kind == "template"
                                    for p in params()[0])


def argument_line(kernel: Any, name: str) -> str | None:
    """file:line of the kernel's argument ``name``."""
    try:
        source = get_source(kernel.pyfunc)
    except Exception:  # noqa: BLE001 - only a better place for the error
        return None
    line = next((a.lineno for a in source.tree.args.args if a.arg == name),
                source.tree.lineno)
    return f"{source.file}:{line}"


def _unknown_field(ref: KernelRef, kernel: Any, name: str, values: Mapping[str, Any],
                   accumulator: tuple[str, str] | None) -> str:
    """A field argument that nothing provides: for an energy (objective) kernel without its
    accumulator U (L), the advice of a kernel that never adds to it; else the fields there
    are (a scene's params are numbers: adding one there would only move the error)."""
    at = argument_line(kernel, name) or ref.where
    if accumulator is not None:
        role, target = accumulator
        return (f"{at}: {role} kernel '{ref.name}' takes no argument '{target}' (the 0-D field "
                f"it adds to), and its field argument '{name}' is none the scene provides. "
                f"Name it '{target}: ti.template()', and accumulate into it with "
                f"'{target}[None] += ...' (the scene names this kernel at {ref.where}).")
    fields = sorted(n for n, v in values.items()
                    if not isinstance(v, (bool, int, float, np.generic)))
    return (f"{at}: kernel '{ref.name}' field argument '{name}' (ti.template()) matches no "
            f"field: the fields a kernel can take are {', '.join(fields)} and those its "
            f"module's allocate() makes. Rename the argument, or allocate '{name}' in "
            f"{ref.path.name}'s allocate() (the scene names this kernel at {ref.where}).")


BOX_NAMES = ("box_low", "box_high", "periodic")


def box_values(ti: Any, boundary: Any, dim: int, fp: Any, grad: bool = False
               ) -> dict[str, Any]:
    """The box a kernel binds by name: ``box_low`` / ``box_high`` (0-D vector fields) and
    ``periodic`` (a compile-time bool for ``ti.static``). An open scene (``boundary: none``)
    has a zero box and ``periodic`` False. With ``grad`` the fields carry gradients, so a
    reverse pass gives dU/d(box) (the pressure); the stepper's forces use a box without,
    as accumulating dU/dL costs a third of the pair gradient's time (bench/lj_melt.py)."""
    low = ti.Vector.field(dim, dtype=fp, shape=(), needs_grad=grad)
    high = ti.Vector.field(dim, dtype=fp, shape=(), needs_grad=grad)
    if boundary.type != "none":
        low[None] = list(boundary.low)
        high[None] = list(boundary.high)
    return {"box_low": low, "box_high": high, "periodic": boundary.type == "periodic"}
