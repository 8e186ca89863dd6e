"""Runtime side of autodiff: launch recording, snapshots of overwritten fields, replay.

A launch that overwrites a field which it, or an earlier launch on the tape, has read gets
that field saved before it runs; the backward pass restores it around the launch's gradient,
so every gradient kernel sees the values its forward launch saw (Taichi's global data access
rules become unnecessary).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..config import config
from ..enums import AutodiffMode
from ..errors import AutodiffError
from ..fields import all_fields, grad_of
from .analysis import kernel_access
from .check import capture_state, grad_check
from .recording import Recording
from .regions import RegionSet, WriteRegions
from .tape_state import _restore, _state
from .tape_state import suppress as suppress  # ti.ad's no_grad imports it from here


def forward_mode_active() -> bool:
    return bool(_state["fwd"])


def recording() -> bool:
    """Whether a launch now would be recorded (a Tape or FwdMode is active)."""
    return bool(_state["tapes"] or _state["fwd"])


def access_of(compiled):
    acc = getattr(compiled, "access", None)
    if acc is None:
        acc = kernel_access(compiled.kir)
        compiled.access = acc
    return acc


def _is_storage(f) -> bool:
    """A placed field (not an ndarray argument); looks at no values, so a GPU's copy stays."""
    return getattr(f, "_data", None) is not None and not getattr(f, "is_ndarray_arg", False)


def regions_of(compiled):
    reg = getattr(compiled, "regions", None)
    if reg is None:
        reg = compiled.regions = WriteRegions(compiled.kir)
    return reg


def _snapshot(fields, regions=None, flat_args=()) -> dict:
    """{field: (index, saved values)}: with regions, only what the launch may overwrite."""
    snap = {}
    for f in fields:
        if _is_storage(f):
            index = regions.index(f, flat_args) if regions is not None else Ellipsis
            snap[f] = (index, f.host_values(write=False)[index].copy())
    return snap


def before_launch(kernel, args, compiled, flat_args=()):
    """Record the launch on the active tapes; returns the random key it must launch with."""
    acc = access_of(compiled)
    key = compiled.runtime.next_rng_key() if compiled.uses_random else None
    if key is not None:
        kernel.rng_keys = getattr(kernel, "rng_keys", {})
        kernel.rng_keys[_args_key(args)] = key
    clobbered = acc.reads & acc.writes
    snap = None
    for tape in _state["tapes"] if not _state["suppress"] else ():
        snap = tape.record(kernel, args, acc, key, regions_of(compiled), flat_args)
    # a launch that writes no field with a gradient has a gradient of nothing: no values
    # to keep for a later kernel.grad() (a neighbour list's build clobbers 10 MB per call)
    if clobbered and any(grad_of(f) is not None for f in acc.writes):
        snap = {f: a for f, a in snap.items() if f in clobbered} if snap is not None \
            else _snapshot(clobbered, regions_of(compiled), flat_args)
        # the state this launch will leave: its written fields' versions, one bump each
        after = {f: f.version + 1 for f in compiled.written}
        kernel.last_launch = _LastLaunch(args, snap, after)
    else:
        kernel.last_launch = None
    return key


def _args_key(args):
    try:
        key = tuple(a if not isinstance(a, np.ndarray) else id(a) for a in args)
        hash(key)
        return key
    except TypeError:
        return None


class _LastLaunch:
    """A launch's pre-launch values, valid while the fields still hold what it left."""

    def __init__(self, args, snapshot: dict, after: dict):
        self.args, self.snapshot, self.after = args, snapshot, after

    def matches(self, args) -> bool:
        return (_same_args(args, self.args)
                and all(f.version == v for f, v in self.after.items()))


def _same_args(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return False
        try:
            if not bool(x == y):
                return False
        except Exception:
            return False
    return True


def run_grad(kernel, args, snapshot=None, rng_key=None) -> None:
    """Launch kernel's gradient at the state its forward launch saw; primal fields are kept.

    On a tape, `snapshot` holds the pre-launch values.  Called alone (`kernel.grad()`), the
    gradient is taken where the kernel's last launch with these arguments started, if the
    fields still hold what that launch left; otherwise at the current state (the grad kernel
    may run without its forward).  Either way the primal fields end as they were.
    """
    mode = "fwd_reverse" if forward_mode_active() else "reverse"
    if mode == "fwd_reverse":
        _ensure_grad_duals(kernel, args)
    compiled, flat, arrays = kernel.prepare(args, mode)
    primal, pflat, parrays = kernel.prepare(args, "fwd" if mode == "fwd_reverse" else "primal")
    if rng_key is None and primal.uses_random:
        rng_key = getattr(kernel, "rng_keys", {}).get(_args_key(args), primal.last_rng_key)
    acc = access_of(primal)
    keep = None
    if snapshot is None and not _state["tapes"]:
        last = getattr(kernel, "last_launch", None)
        snapshot = last.snapshot if last is not None and last.matches(args) else None
        keep = (_snapshot(acc.reads & acc.writes, regions_of(primal), pflat),
                {f: f.version for f in acc.writes})
    if loop_by_loop(primal):
        _grad_task_by_task(kernel, (compiled, flat, arrays), (primal, pflat, parrays), acc,
                           snapshot, rng_key)
    else:
        if snapshot:
            _restore(snapshot)
        compiled.launch(flat, arrays, rng_key=rng_key)
    if keep is not None:
        _restore(keep[0])
        for f, v in keep[1].items():
            f.version = v


def loop_by_loop(primal) -> bool:
    """Whether a launch's gradient runs loop by loop (`run_grad`): a later loop of the
    kernel reads a field an earlier one writes, so each loop's gradient needs the state that
    loop saw, rebuilt by replaying the loops before it."""
    acc = access_of(primal)
    return len(primal.fns) > 1 and bool(acc.reads & acc.writes)


def one_grad_launch(kernel, args, mode: str = "reverse") -> tuple | None:
    """(compiled variant, flat scalar arguments) of a launch's gradient where `run_grad`
    makes it as that one launch at the state the forward launch saw, so a caller may make
    it directly (a native chain); None where `run_grad` does more: the loops one by one,
    random numbers replayed by key, array arguments copied in and out."""
    compiled, flat, arrays = kernel.prepare(args, mode)
    primal = kernel.prepare(args, "primal")[0]
    if arrays or compiled.uses_random or compiled.ndarray_slots or loop_by_loop(primal):
        return None
    return compiled, list(flat)


def _grad_task_by_task(kernel, grad_call, primal_call, acc, snapshot, rng_key):
    """A kernel whose later loops read what earlier loops wrote: the gradient of loop k runs
    on the state loop k saw, rebuilt by replaying loops 0..k-1 from the pre-launch state."""
    compiled, flat, arrays = grad_call
    primal, pflat, parrays = primal_call
    if compiled.kir.extra.get("cross_task_locals"):
        raise AutodiffError(
            f"kernel '{kernel.name}' passes local variables between its loops and also reads "
            "fields it writes; simrun cannot rebuild each loop's state for the gradient. Split "
            "it into one kernel per loop", compiled.kir.span, kernel.name)
    post = _snapshot(acc.writes)
    pre = snapshot if snapshot else _snapshot(acc.reads & acc.writes)
    first = compiled.kir.extra.get("n_prologue", 0)
    n = len(primal.fns)
    if first:
        compiled.launch(flat, arrays, tasks=range(first), rng_key=rng_key)
    for k in reversed(range(n)):
        _restore(pre)
        if k:
            primal.launch(pflat, parrays, tasks=range(k), rng_key=rng_key)
        compiled.launch(flat, arrays, tasks=[first + (n - 1 - k)], rng_key=rng_key)
    _restore(post)


def touched(kernel, args) -> set:
    """The fields a launch of `kernel` on `args` reads or writes, its derivatives' launches
    included: its primal access and the 0-D fields a float scalar is read from in the
    derivative modes (`Kernel.with_field_args`; a primal launch takes it as an argument),
    whose gradients and tangents a derivative writes."""
    acc = access_of(kernel.prepare(args, "primal")[0])
    return acc.reads | acc.writes | set(getattr(kernel, "field_args", {}).values())


def _ensure_grad_duals(kernel, args) -> None:
    for f in touched(kernel, args):
        if getattr(f, "dual", None) is not None and grad_of(f) is not None:
            f.grad._make_dual()


class Record:
    def __init__(self, kernel, args, snapshot, custom=None, rng_key=None):
        self.kernel, self.args, self.snapshot, self.custom = kernel, args, snapshot, custom
        self.rng_key = rng_key


class GlobalDataAccessError(AutodiffError, AssertionError):
    """Tape(validation=True) found a launch Taichi would refuse (TaichiAssertionError)."""


class Tape:
    """with ti.ad.Tape(loss): record launches; on exit, set loss.grad = 1 and replay backwards."""

    def __init__(self, loss=None, clear_gradients: bool = True, validation: bool = False,
                 grad_check=None):
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.validation = validation
        self.grad_check = grad_check
        self.recording = Recording()  # the launches, each with what it must save
        self.read_regions: dict = {}  # field -> RegionSet of what launches on it read
        self.entered = False
        self.gradient_evaluated = False
        self.calls: list = []  # (kernel, args) of each recorded launch, as Taichi's Tape.calls
        self.modes: list = []  # each recorded kernel's autodiff_mode before the tape

    def __enter__(self):
        loss = self.loss
        if loss is not None:
            shape = getattr(loss, "shape", None)
            if shape is None or math.prod(shape) != 1 or loss.elem_shape:
                raise AutodiffError(
                    f"ti.ad.Tape(loss=...) needs a 0-D field (shape ()), got "
                    f"{getattr(loss, 'name', loss)!r} with shape {getattr(loss, 'shape', '?')}; "
                    "for several outputs use kernel.grad() with the output grads set by hand")
            if grad_of(loss) is None:
                raise AutodiffError(f"the loss field '{loss.name}' has no gradient: create it "
                                    "with needs_grad=True or call ti.root.lazy_grad()")
            loss.fill(0)
            if _state["fwd"] and getattr(loss, "dual", None) is not None and \
                    loss.dual.data is not None:
                loss.dual.data[...] = 0  # inside FwdMode the loss's tangent restarts with it
        if self.clear_gradients:
            clear_all_gradients()
        if self.validation:
            self._start_validation()
        _state["tapes"].append(self)
        self.entered = True
        if self.grad_check:
            self._check_state = capture_state()
        return self

    def _start_validation(self) -> None:
        """Tape(validation=True): check Taichi's global data access rule (no field written
        after it was read on the tape), in debug mode as Taichi does. simrun's gradients
        are correct either way; the check is for programs that must also run on Taichi."""
        if not config.debug:
            warnings.warn("Debug mode is disabled, autodiff valid check will not work. Please "
                          "specify `ti.init(debug=True)` to enable the check.", stacklevel=3)
            self.validation = False
            return
        for f in all_fields():
            f.adjoint_checkbit = grad_of(f) is not None and f.grad.data is not None

    def _validate(self, kernel, acc) -> None:
        self.calls.append((kernel, None))
        self.modes.append(getattr(kernel, "autodiff_mode", AutodiffMode.NONE))
        kernel.autodiff_mode = AutodiffMode.VALIDATION
        broken = sorted(f.name for f in acc.writes & (self.recording.read_so_far | acc.reads)
                        if grad_of(f) is not None)
        if broken:
            raise GlobalDataAccessError(
                f"kernel '{kernel.name}' breaks the global data access rule: field "
                f"'{broken[0]}' is written after it was read on this Tape (Taichi's "
                "validation). simrun computes this gradient correctly anyway; remove "
                "validation=True, or write the result into a new field")

    def record(self, kernel, args, acc, rng_key=None, regions=None, flat_args=()) -> dict:
        if self.validation:
            self._validate(kernel, acc)
        for f in acc.reads:
            seen = self.read_regions.get(f) or self.read_regions.setdefault(f, RegionSet())
            if seen.everything:
                continue
            for dims, value in (regions.read_pins(f, flat_args) if regions is not None
                                else [((), ())]):
                seen.add_pinned(dims, value)
        # what this launch overwrites of the parts read so far (its own reads included)
        def read_there(f) -> bool:
            return _is_storage(f) and self.read_regions[f].overlaps(
                regions.index(f, flat_args) if regions is not None else Ellipsis)
        rec = Record(kernel, args, {}, rng_key=rng_key)
        entry = self.recording.record(rec, acc, read_there)
        rec.snapshot = _snapshot(entry.fields, regions, flat_args)
        return rec.snapshot

    def record_custom(self, backward, args) -> None:
        self.recording.record(Record(None, args, {}, custom=backward), None)

    @property
    def records(self) -> list:
        """The recorded launches in order (Record each)."""
        return [entry.launch for entry in self.recording.entries]

    def __exit__(self, exc_type, exc, tb):
        _state["tapes"].remove(self)
        for (kernel, _), mode in reversed(list(zip(self.calls, self.modes))):
            kernel.autodiff_mode = mode  # the last one restored is each kernel's first
        if exc_type is not None:
            return False
        if self.loss is not None:
            self.loss.grad.fill(1)
        self.grad()
        if self.grad_check:
            grad_check(self, self.grad_check)
        return False

    def grad(self) -> None:
        if self.gradient_evaluated:
            raise RuntimeError("this Tape's gradients were already evaluated")
        final = {}
        for rec in self.records:
            for f in rec.snapshot:
                if f not in final:
                    final[f] = (Ellipsis, f.data.copy())

        def restore(entry) -> list:
            rec = entry.launch
            return [lambda: _restore(rec.snapshot)] if rec.custom is None else []

        def gradient(entry) -> list:
            rec = entry.launch
            if rec.custom is not None:
                return [lambda: rec.custom(*rec.args)]
            return [lambda: run_grad(rec.kernel, rec.args, snapshot=rec.snapshot or {},
                                     rng_key=rec.rng_key)]

        for call in self.recording.reverse(restore, gradient):
            call()
        _restore(final)
        self.gradient_evaluated = True


def clear_all_gradients(gradient_type=None) -> None:
    for f in all_fields():
        if grad_of(f) is not None and f.grad.data is not None:
            f.grad.data[...] = 0
            # inside FwdMode the gradients carry tangents (Hessian-vector products): a
            # cleared gradient has a zero tangent too. Outside it, duals are the user's.
            if _state["fwd"] and getattr(f.grad, "dual", None) is not None and \
                    f.grad.dual.data is not None:
                f.grad.dual.data[...] = 0


class FwdMode:
    """with ti.ad.FwdMode(loss, param, seed): kernels also compute d(field)/d(param) . seed."""

    def __init__(self, loss, param, seed=None, clear_gradients: bool = True):
        self.loss, self.param, self.seed = loss, param, seed
        self.clear_gradients = clear_gradients

    def __enter__(self):
        p = self.param
        if p.dual is None:
            raise AutodiffError(f"field '{p.name}' has no dual: create it with needs_dual=True "
                                "or call ti.root.lazy_dual()")
        if self.clear_gradients:
            for f in all_fields():
                if f.dual is not None:
                    f.dual.data[...] = 0
                if grad_of(f) is not None and f.grad.dual is not None:
                    f.grad.dual.data[...] = 0
        if self.seed is None:
            if p.data.size != 1:
                raise AutodiffError(f"FwdMode needs seed= for the non-scalar field '{p.name}' "
                                    f"of shape {p.data.shape}")
            p.dual.data[...] = 1
        else:
            p.dual.data[...] = np.asarray(self.seed, dtype=p.data.dtype).reshape(p.data.shape)
        self._seeded = p.dual.data != 0
        _state["fwd"].append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        """Clears the seed, as Taichi does: a seed left in param.dual would be read as a
        tangent by the next FwdMode with clear_gradients=False. Only the seeded entries: where
        param is also an output (loss=e, param=e), its other tangents are the result."""
        _state["fwd"].remove(self)
        self.param.dual.data[self._seeded] = 0
        return False


def active_tapes() -> list:
    return _state["tapes"]

