"""ti.init, @ti.kernel, @ti.func, @ti.data_oriented: specialisation and the launch fast path."""

from __future__ import annotations

import contextlib
import inspect
import numbers
import os
import sys

import numpy as np

from . import fields as fields_mod
from . import pipeline
from .autodiff import tape as _tape
from .autodiff.tape import _state as _tape_state
from .compiler import compile_kernel
from .compiler_cuda import compile_cuda_kernel
from .config import Config, config  # noqa: F401 (api.config is public)
from .enums import AutodiffMode
from .errors import CompileError, KernelArgumentError
from .frontend.context import GlobalRef
from .frontend.inline import Func
from .frontend.lower import LocalMatrix, Lowerer, lower_body
from .frontend.source import (
    _annotation_span,
    get_source,
    remember_decoration_scope,
    signature_of,
)
from .ir.emitter import Emitter, _stack
from .ir.nodes import KernelIR, Var
from .matrix import Matrix
from .runtime import cuda as cuda_runtime
from .runtime.parallel import Runtime
from .types import DType, MatrixType, defaults, f32, f64, i32, i64, ndarray_type, template, to_dtype

_runtime: list = []
cpu = x64 = arm64 = "cpu"
cuda = "cuda"
gpu = "gpu"  # Taichi's "the GPU at hand": CUDA here
vulkan, metal, opengl, gles, dx11, dx12, amdgpu = \
    "vulkan", "metal", "opengl", "gles", "dx11", "dx12", "amdgpu"


def runtime() -> Runtime:
    if not _runtime:
        _runtime.append(Runtime(None, 0))
    return _runtime[0]


def init(arch=None, default_fp=None, default_ip=None, debug: bool = False, random_seed: int = 0,
         cpu_max_num_threads: int | None = None, offline_cache: bool = True,
         fast_math: bool = True, deterministic: bool = False, **ignored) -> None:
    """Taichi's ti.init. arch=ti.cuda (or ti.gpu) runs kernels on an NVIDIA GPU through
    cuda-bindings; where there is none, or for other GPU backends, kernels run on the CPU
    with a warning on stderr, as Taichi falls back (a Taichi program keeps working; the
    CLI's --device cuda instead refuses with exit code 2).

    deterministic=True (beyond Taichi) runs the loops that add floats into shared field
    entries (p2g scatters, gradient kernels) on one thread in chunk order, so their sums
    are the same bits for any thread count and on every run; other loops stay parallel."""
    if _held:
        _held_init(default_fp)
        return
    config.arch = _resolve_arch(arch)
    reset()
    fields_mod.new_generation()
    defaults.fp = to_dtype(default_fp) if default_fp is not None else f32
    defaults.ip = to_dtype(default_ip) if default_ip is not None else i32
    config.debug, config.fast_math, config.offline_cache = bool(debug), fast_math, offline_cache
    _runtime.append(Runtime(cpu_max_num_threads, random_seed))
    _runtime[-1].deterministic = bool(deterministic)


_held: list[str] = []  # who holds ti.init (hold_init), innermost last


@contextlib.contextmanager
def hold_init(owner: str):
    """While a job imports a kernel module: the module's ``ti.init(...)`` (a line every
    Taichi program has) leaves the job's settings alone. It would reset the default float
    to f32 under an f64 scene (its `float` parameters then rounded, with no word), and drop
    the job's threads, debug mode and compiled kernels. ``owner`` names who set them."""
    _held.append(owner)
    try:
        yield
    finally:
        _held.pop()


def _held_init(default_fp) -> None:
    """A ti.init while held does nothing; one asking for another float type is named."""
    if default_fp is None or to_dtype(default_fp) == defaults.fp:
        return
    where, _ = fields_mod._user_line()
    print(f"[simrun] {where}ti.init(default_fp={to_dtype(default_fp).name}) is ignored: "
          f"{_held[-1]} sets the precision ({defaults.fp.name}) and the other ti.init "
          f"settings: remove the argument.", file=sys.stderr)


def _resolve_arch(arch) -> str:
    """"cuda" where arch asks for a GPU and a CUDA device can be used, else "cpu" (warning
    on stderr unless the CPU was asked for). TI_ARCH in the environment overrides arch, as
    in Taichi (`TI_ARCH=cuda pytest ...` runs a test suite on the GPU)."""
    arch = os.environ.get("TI_ARCH") or arch
    wanted = list(arch) if isinstance(arch, (list, tuple)) else [arch]
    if any(a in (cuda, gpu) for a in wanted):
        why = cuda_runtime.device_status()
        if why is None:
            return "cuda"
        print(f"[simrun] arch={arch!r}: {why}; running on the CPU", file=sys.stderr)
    elif not any(a in (None, cpu) for a in wanted):
        print(f"[simrun] arch={arch!r} is not available; running on the CPU", file=sys.stderr)
    return "cpu"


def reset() -> None:
    """Forget every compiled kernel (fields created before stay valid numpy storage)."""
    cuda_runtime.release_fields()
    for k in list(Kernel.instances):
        k.variants.clear()
        k._sig = None  # `x: float` means the new default_fp (a kept f32 would round f64 args)
    if _runtime:
        _runtime.pop().shutdown()


def sync() -> None:
    """Wait for the GPU's launches (SIMRUN_CUDA_ASYNC lets them run on while Python goes on,
    so a timing of kernels ends here, as in Taichi); kernels on the CPU have finished."""
    cuda_runtime.synchronize_all()


def _fits(value, dt: DType) -> bool:
    """The launch's fast path: a Python int or float that its parameter's type holds."""
    if type(value) is float:
        return dt.is_float and (dt.bits == 64 or abs(value) <= _F32_MAX or value != value)
    if type(value) is int:
        lo = -(1 << (dt.bits - 1)) if dt.kind == "i" else 0
        return dt.is_float or (dt.is_int and lo <= value < lo + (1 << dt.bits))
    return False


_F32_MAX = float(np.finfo(np.float32).max)


def _checked(kernel: str, name: str, dt: DType, value):
    """A scalar argument as its parameter's type, or an error naming the argument: a value the
    type cannot hold would be wrapped or rounded to another number without a word (Taichi
    wraps k(2**40) into an i32 parameter to 0; simrun refuses it)."""
    where = f"kernel '{kernel}' argument '{name}' ({dt.name})"
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if not isinstance(value, (numbers.Real, np.bool_)):
        raise TypeError(f"{where} takes a number, got {type(value).__name__} {_short(value)}")
    if dt.is_float:
        if dt.bits == 32 and np.isfinite(value) and abs(float(value)) > _F32_MAX:
            raise KernelArgumentError(f"{where} got {_short(value)}, beyond the largest f32 "
                                f"({_F32_MAX:.4g}): declare it ti.f64")
        return float(value)
    if not np.isfinite(value):
        raise ValueError(f"{where} got {value}, which is not an integer")
    iv = int(value)
    lo = -(1 << (dt.bits - 1)) if dt.kind == "i" else 0
    if not lo <= iv < lo + (1 << dt.bits):
        raise KernelArgumentError(f"{where} got {_short(iv)}, outside its range [{lo}, "
                            f"{lo + (1 << dt.bits) - 1}]: declare it ti.i64 (or the unsigned "
                            "type it needs), or pass a value in range")
    return iv


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Param:
    def __init__(self, name: str, annotation):
        self.name = name
        if annotation is inspect.Parameter.empty or annotation is template or \
                isinstance(annotation, template):
            self.kind = "template"
        elif isinstance(annotation, ndarray_type) or annotation is ndarray_type:
            self.kind = "ndarray"
        elif isinstance(annotation, MatrixType):
            self.kind = "matrix"
        else:
            self.kind = "scalar"
            self.dtype = to_dtype(annotation)
        self.annotation = annotation


class NdarrayArg(fields_mod.ElementShape):
    """A numpy array argument seen by the compiler: field-like, storage given per launch."""

    is_ndarray_arg = True

    def __init__(self, name: str, arr: np.ndarray, position: int, element_dim: int = 0):
        self.name = name
        self.dtype = to_dtype(arr.dtype)
        cut = arr.ndim - element_dim  # ndarray(element_dim=1): (N, 3) is N 3-vectors
        self.shape, self.elem_shape = tuple(arr.shape[:cut]), tuple(arr.shape[cut:])
        self.position = position
        self.grad = self.dual = None


def _template_key(value):
    if isinstance(value, (int, float, str, bool, type(None), DType)):
        return (type(value).__name__, value)
    return ("id", id(value))


def _n_entries(ann) -> int:
    return ann.n * ann.m if isinstance(ann, MatrixType) else 1


def _python_scalar(value, dtype: DType):
    """A returned scalar as Taichi gives it: an int wrapped to its type (-1 for an i8), or a
    float."""
    if dtype.is_int:
        return int(np.array(int(value)).astype(dtype.np))
    return float(value)


class Kernel:
    instances: list = []
    is_kernel = True  # what the frontend checks (it does not import this module)

    def __init__(self, pyfunc, bound_self=None):
        self.pyfunc = pyfunc
        self.name = pyfunc.__name__
        self.__name__ = self.__qualname__ = pyfunc.__name__  # introspectable like a function
        self.__doc__ = pyfunc.__doc__
        self.bound_self = bound_self
        self.variants: dict = {}
        self.field_args: dict = {}  # scalar parameter name -> the 0-D field it is read from
        self.primal_of = self  # the kernel whose primal variants are this one's (a twin's)
        self.grad_reads: dict = {}  # template parameter name -> the field its .grad reads
        self.autodiff_mode = AutodiffMode.NONE  # VALIDATION while on a Tape(validation=True)
        self._sig = None
        self._ret_ann: list = []
        self._ret_decl = None
        self.grad = GradKernel(self)
        Kernel.instances.append(self)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        cache = obj.__dict__.setdefault("_simrun_bound", {})
        if self.name not in cache:
            cache[self.name] = Kernel(self.pyfunc, bound_self=obj)
        return cache[self.name]

    def with_field_args(self, names) -> Kernel:
        """A twin of this kernel whose named scalar parameters are read from 0-D fields
        (`twin.field_args[name]`): a float one gets gradients (`.grad`, summed over the
        launches a Tape or kernel.grad() reverses) and tangents (`FwdMode(param=...)`), which
        Taichi's scalar arguments lack; an integer one (e.g. a step index) can be changed
        between launches of a chain without writing the launch's arguments. The twin is
        called with the same arguments (each call writes them into the fields).

        A float one is read from its field in the derivative modes only: in a primal launch
        it stays a scalar argument, so the twin's primal launches are this kernel's own
        compiled variants (`primal_of`), e.g. `run`'s update with dt, which the reverse
        replay of a gradient then launches too."""
        params = {p.name: p for p in self.params()[0]}
        twin = Kernel(self.pyfunc, self.bound_self)
        twin.grad_reads = dict(self.grad_reads)
        twin.field_args = dict(self.field_args)  # a twin's twin keeps what it read from fields
        for name in names:
            p = params.get(name)
            if p is None or p.kind != "scalar":
                raise TypeError(f"kernel '{self.name}' has no scalar parameter '{name}' "
                                f"(its scalar parameters: "
                                f"{[q.name for q in params.values() if q.kind == 'scalar']})")
            real = p.dtype.is_float
            twin.field_args[name] = fields_mod.field(p.dtype, shape=(), name=f"{self.name}.{name}",
                                                     needs_grad=real, needs_dual=real)
        if not any(twin.reads_field(n, "primal") for n in names):
            twin.primal_of = self.primal_of  # the same primal code: the same variants
        return twin

    def reads_field(self, name: str, mode: str) -> bool:
        """Whether a launch in `mode` reads the scalar parameter `name` from its 0-D field
        (`field_args`): in every mode an integer one; a float one in the derivative modes
        only (a primal launch takes it as an argument, see `with_field_args`)."""
        f = self.field_args.get(name)
        return f is not None and (mode != "primal" or not f.dtype.is_float)

    def with_grad_reads(self, fields: dict) -> Kernel:
        """A twin of this kernel (keeping its field_args) whose reads of `<arg>.grad`, for
        each template parameter named in `fields`, read `fields[name]` instead: a step kernel
        that reads a gradient (MPM's p2g reads x.grad = dU/dx as its force) becomes
        differentiable, with the gradient as an ordinary input field that has an adjoint.

        Its primal launches are this kernel's own compiled variants (`primal_of`), each
        given the other field's address in x.grad's place (`CompiledKernel.rebound`): `run`'s
        kick reads x.grad, a gradient's replay of it reads G, and both launch one compiled
        code. Its derivatives, which read and write G's adjoint, are its own."""
        twin = Kernel(self.pyfunc, self.bound_self)
        twin.field_args = dict(self.field_args)
        twin.grad_reads = dict(self.grad_reads, **fields)
        twin.primal_of = self.primal_of
        return twin

    def _reading_slots(self, compiled, key: tuple, args, unread: tuple, varied):
        """A primal variant of `primal_of` (which reads x.grad) reading this twin's
        `grad_reads` fields in its place: the same code given their addresses, else (stored
        otherwise, or a field without .grad) a variant compiled for this twin."""
        params = self.params()[0]
        swap = {}
        for p, a in zip(params, args):
            target = self.grad_reads.get(p.name) if p.kind == "template" else None
            grad = getattr(a, "grad", None) if target is not None else None
            if grad is not None and id(grad) in compiled.layout.field_slot:
                swap[grad] = target
        if not swap:
            return compiled
        key = ("reading", key, tuple((id(f), id(g)) for f, g in swap.items()))
        view = self.variants.get(key)
        if view is None:
            acc = _tape.access_of(compiled)
            view = None if any(f in acc.writes for f in swap) else compiled.rebound(swap)
            if view is None:
                view = self.compile(args, "primal", unread, varied)
            else:
                view.access = type(acc)({swap.get(f, f) for f in acc.reads}, set(acc.writes))
            self.variants[key] = view
        return view

    @property
    def is_bound_kernel(self) -> bool:
        return self.bound_self is not None

    def params(self):
        if self._sig is None:
            sig = signature_of(self.pyfunc)
            params = [_Param(n, p.annotation) for n, p in sig.parameters.items()]
            if self.bound_self is not None:
                params = params[1:]
            self._require_annotations(sig)
            ret = self._ret_decl = sig.return_annotation
            if ret is inspect.Parameter.empty or ret is None:
                self._ret_ann = []
            else:
                self._ret_ann = self._return_types(ret)
            rets = [dt for ann, dt in self._ret_ann for _ in range(_n_entries(ann))]
            self._sig = (params, rets, any(p.kind in ("template", "ndarray") for p in params))
        return self._sig

    def _require_annotations(self, sig: inspect.Signature) -> None:
        """Every parameter of a kernel is annotated, as Taichi requires ("Taichi kernels
        parameters must be type annotated"): an unannotated one was taken as a template,
        so a Python number became a compile-time constant, one compile per value."""
        names = list(sig.parameters)[1 if self.bound_self is not None else 0:]
        for name in names:
            if sig.parameters[name].annotation is inspect.Parameter.empty:
                raise CompileError(
                    f"parameter '{name}' has no type annotation; "
                    "kernel parameters must be type annotated, as in Taichi: a field "
                    f"`{name}: ti.template()`, a number `{name}: float` or `{name}: ti.i32`, "
                    f"an array `{name}: ti.types.ndarray()`",
                    _annotation_span(self.pyfunc, name), self.name)

    def _return_types(self, ret) -> list:
        """[(annotation, dtype)] per returned item: `-> T` or Taichi's `-> (T1, T2, ...)`."""
        items = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        out = []
        for item in items:
            try:
                dt = (item.dtype or defaults.fp) if isinstance(item, MatrixType) else \
                    to_dtype(item)
            except TypeError:
                raise CompileError(
                    f"the return annotation {item!r} is not a type; "
                    "annotate a scalar dtype (`-> ti.f32`), a vector/matrix type "
                    "(`-> ti.types.vector(3, ti.f32)`) or a tuple of them "
                    "(`-> (ti.i32, ti.f32)`)", _annotation_span(self.pyfunc, None),
                    self.name) from None
            out.append((item, dt))
        return out

    def _key(self, params, args, mode):
        parts = [mode]
        for p, a in zip(params, args):
            if p.kind == "template":
                parts.append(_template_key(a))
            elif p.kind == "ndarray" and isinstance(a, fields_mod.Field):  # ti.ndarray: bound as a field
                parts.append(_template_key(a))
            elif p.kind == "ndarray":
                arr = np.asarray(a)
                parts.append((str(arr.dtype), arr.shape))
        return tuple(parts)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = self._bind_kwargs(args, kwargs)
        mode = "fwd" if _tape_state["fwd"] else "primal"
        compiled, flat, arrays, copies = self._prepare(args, mode)
        rng_key = None
        if compiled.tracked or compiled.uses_random or _tape_state["tapes"]:
            rng_key = _tape.before_launch(self, args, compiled, flat)
        try:
            result = compiled.launch(flat, arrays, rng_key=rng_key)
        finally:
            for original, contiguous in copies:  # a strided or transposed view: write back
                original[...] = contiguous
        return None if result is None else self._finish(result)

    def _finish(self, result):
        """Python values as Taichi returns them: ints and floats for scalars (wrapped to the
        declared type), a Vector/Matrix of numpy scalars of the declared dtype, a list for
        a tuple annotation."""
        self.params()
        values = iter(result)
        out = []
        for ann, dt in self._ret_ann:
            if isinstance(ann, MatrixType):
                entries = [np.array(next(values)).astype(dt.np)[()] for _ in range(ann.n * ann.m)]
                mat = Matrix.__new__(Matrix)
                mat.rows = [[e] for e in entries] if ann.is_vector else \
                    [entries[i * ann.m:(i + 1) * ann.m] for i in range(ann.n)]
                mat.is_vector = ann.is_vector
                out.append(mat)
            else:
                out.append(_python_scalar(next(values), dt))
        if len(out) == 1 and not isinstance(self._ret_decl, (tuple, list)):
            return out[0]
        return out

    def _bind_kwargs(self, args, kwargs):
        sig = inspect.signature(self.pyfunc)
        extra = (self.bound_self,) if self.bound_self is not None else ()
        bound = sig.bind(*extra, *args, **kwargs)
        return tuple(bound.arguments.values())[len(extra):]

    def prepare(self, args, mode: str, unread: tuple = (), varied: tuple | None = None):
        """(compiled variant, flat scalar arguments, [(slot, contiguous array)]); `unread`:
        fields whose writes the caller never reads, left out of the variant; `varied`: in
        forward modes, the only fields whose tangents the caller seeds nonzero."""
        return self._prepare(args, mode, tuple(unread), varied)[:3]

    def _prepare(self, args, mode: str, unread: tuple = (), varied: tuple | None = None):
        """prepare() plus [(caller's array, contiguous copy)] to write back after a launch."""
        params, rets, specialised = self.params()
        if len(args) != len(params):
            raise TypeError(f"kernel '{self.name}' takes {len(params)} argument(s), "
                            f"got {len(args)}")
        key = self._key(params, args, mode) if specialised else (mode,)
        if unread or varied is not None:
            key += (tuple(sorted(id(f) for f in unread)),
                    None if varied is None else tuple(sorted(id(f) for f in varied)))
        owner = self.primal_of if mode == "primal" else self
        compiled = owner.variants.get(key)
        if compiled is None:
            compiled = owner.compile(args, mode, unread, varied)
            owner.variants[key] = compiled
        if mode == "primal" and self.grad_reads and owner is not self:
            compiled = self._reading_slots(compiled, key, args, unread, varied)
        flat, arrays, copies = [], [], []
        for k, (p, a) in enumerate(zip(params, args)):
            if p.kind == "scalar":
                a = a if _fits(a, p.dtype) else _checked(self.name, p.name, p.dtype, a)
                if self.reads_field(p.name, mode):
                    f = self.field_args[p.name]
                    f.data[()] = a
                    f.version += 1
                else:
                    flat.append(a)
            elif p.kind == "matrix":
                dt = p.annotation.dtype or defaults.fp
                flat.extend(x if _fits(x, dt) else _checked(self.name, p.name, dt, x) for x in
                            (Matrix(a) if not isinstance(a, Matrix) else a).entries())
            elif p.kind == "ndarray" and k in compiled.ndarray_slots and \
                    not isinstance(a, fields_mod.Field):  # else: shape only, or a ti.ndarray (a field)
                arr = np.ascontiguousarray(a)
                arrays.append((compiled.ndarray_slots[k], arr))
                if arr is not a and k in compiled.ndarrays_written and \
                        isinstance(a, np.ndarray):
                    copies.append((a, arr))
        return compiled, flat, arrays, copies

    def lower(self, args, mode: str = "primal") -> tuple:
        """Frontend: Python AST -> KernelIR for these arguments, for a launch in `mode`."""
        params, rets, _ = self.params()
        em = Emitter(self.name, config.debug)
        scope: dict = {}
        arg_vars: list = []
        ndarrays: dict = {}
        if self.bound_self is not None:
            first = next(iter(inspect.signature(self.pyfunc).parameters))
            scope[first] = self.bound_self
        for k, (p, a) in enumerate(zip(params, args)):
            if p.kind == "template" or p.kind == "ndarray" and isinstance(a, fields_mod.Field):
                scope[p.name] = a
                if p.name in self.grad_reads:
                    em.grad_reads[id(a)] = self.grad_reads[p.name]
                if getattr(p.annotation, "needs_grad", None) is False:
                    em.stopped_everywhere.add(a)  # ti.types.ndarray(needs_grad=False)
            elif p.kind == "scalar" and self.reads_field(p.name, mode):
                scope[p.name] = GlobalRef(self.field_args[p.name], 0, ())
            elif p.kind == "scalar":
                var = Var(p.name, p.dtype)
                arg_vars.append(var)
                scope[p.name] = var
            elif p.kind == "matrix":
                mt = p.annotation
                dt = mt.dtype or defaults.fp
                vs = [Var(f"{p.name}_{i}", dt) for i in range(mt.n * mt.m)]
                arg_vars.extend(vs)
                tmpl = Matrix([0] * mt.n) if mt.is_vector else Matrix([[0] * mt.m] * mt.n)
                scope[p.name] = LocalMatrix(tmpl, vs)
            else:
                nd = NdarrayArg(p.name, np.asarray(a), k,
                                getattr(p.annotation, "element_dim", 0) or 0)
                ndarrays[k] = nd
                scope[p.name] = nd
        src = get_source(self.pyfunc)
        lw = Lowerer(em, src, scope)
        lw.return_type = rets
        _stack.append(em)
        try:
            tasks = lower_body(lw, src.tree.body)
            if rets and not lw.returned:
                raise CompileError(
                    "this kernel declares a return type but can reach its end without a "
                    "`return` statement; end its body with `return <value>` (or "
                    "remove the return annotation)", src.span(src.tree))
        except CompileError as exc:
            raise exc.with_context(em.span, self.name) from None
        finally:
            _stack.pop()
        kir = KernelIR(self.name, tasks, arg_vars, rets, span=src.span(src.tree),
                       extra={"top_level_vars": em.top_level_vars,
                              "stop_grad": em.stopped_everywhere,
                              "split_expressions": em.spills})
        return kir, ndarrays

    def compile(self, args, mode: str, unread: tuple = (), varied: tuple | None = None):
        kir, ndarrays = self.lower(args, mode)
        kir = pipeline.run(kir, mode, self.name, unread, varied)
        if config.arch == "cuda":
            compiled = compile_cuda_kernel(kir, runtime(), config)
        else:
            compiled = compile_kernel(kir, runtime(), config, None, None)
        compiled.ndarray_slots = {k: compiled.layout.field_slot[id(nd)]
                                  for k, nd in ndarrays.items()
                                  if id(nd) in compiled.layout.field_slot}
        compiled.kir = kir
        acc = _tape.access_of(compiled)
        compiled.ndarrays_written = frozenset(k for k, nd in ndarrays.items() if nd in acc.writes)
        compiled.tracked = bool(acc.reads & acc.writes)
        compiled.written = tuple(f for f in acc.writes if hasattr(f, "version"))
        return compiled


class GradKernel:
    """`kernel.grad(*args)`: the reverse-mode adjoint of the kernel."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel

    def __call__(self, *args, **kwargs):
        k = self.kernel
        if k.bound_self is None and self is not k.grad:
            pass
        if kwargs:
            args = k._bind_kwargs(args, kwargs)
        _tape.run_grad(k, args)


def _decorate(cls, fn):
    # the decorating scope's locals, for `from __future__ import annotations` (see source.py)
    remember_decoration_scope(fn, sys._getframe(2))
    return cls(fn)


def kernel(fn=None, **_options):
    if fn is None:
        return lambda f: _decorate(Kernel, f)
    return _decorate(Kernel, fn)


def func(fn=None, **_options):
    if fn is None:
        return lambda f: _decorate(Func, f)
    return _decorate(Func, fn)


pyfunc = real_func = func


def data_oriented(cls):
    return cls


__all__ = ["init", "reset", "kernel", "func", "data_oriented", "sync", "config", "runtime",
           "Kernel", "Func", "f32", "f64", "i64", "fields_mod"]
