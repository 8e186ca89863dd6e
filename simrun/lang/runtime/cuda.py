"""The CUDA driver through NVIDIA's `cuda-bindings`: device, PTX modules, memory, launches.

A CudaKernel is a CompiledKernel whose tasks are PTX kernels (codegen/cuda) and whose
context lives in device memory. A field's values live on the host (NumPy, `Field.data`) and,
once a launch touches it, on the device too; each copy knows whether it is the newer one.
A launch uploads the fields whose host copy may have changed and marks those it writes as
newer on the device; every host access (`Field.host_values`, which `Field.data` calls) brings
a newer device copy back first, so Python always sees the device's results, as Taichi's
synchronising accessors do. An access that may write (`Field.data`, `f[i] = ...`,
`from_numpy`) counts the host copy as changed, and the next launch uploads it; a read
(`to_numpy`, `f[i]`) does not. Between launches that Python does not look at, nothing moves,
and of the context a launch brings back only its return values and error slots.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..codegen.layout import ERR_SLOTS, STACK_BYTES
from .launch import CompiledKernel, KernelRuntimeError

BLOCK = 256  # threads per block of every launch
BLOCKS_PER_SM = 8
HEAP_BYTES = 1 << 30
# SIMRUN_CUDA_ASYNC=1 (an experiment, off by default until timed on a GPU): a launch that
# returns nothing and cannot fail (no assert, no debug checks) sends its context from a
# pinned ring slot of its own and does not wait for the device; the next copy to the host
# (a field Python reads, a launch that returns) waits for everything before it, in the
# default stream's order. Every RING_SLOTS such launches the device is waited for, so that
# a slot is written again only once the launch that read it is done.
ASYNC = os.environ.get("SIMRUN_CUDA_ASYNC") == "1"
RING_SLOTS = 1024
RING_SLOT_BYTES = 4096


class Profile:
    """SIMRUN_CUDA_PROFILE=1 (or =FILE): every task launch and copy synchronised and timed,
    a table of where the time went printed to stderr (or FILE) at exit. For finding the
    launch that dominates a step; it makes every launch wait for the device."""

    def __init__(self, target: str):
        self.target = target
        self.rows: dict = defaultdict(lambda: [0, 0.0, 0])  # key -> [count, seconds, bytes]
        atexit.register(self.report)

    def add(self, key: tuple, seconds: float, nbytes: int = 0) -> None:
        row = self.rows[key]
        row[0] += 1
        row[1] += seconds
        row[2] += nbytes

    def report(self) -> None:
        total = sum(r[1] for r in self.rows.values()) or 1.0
        lines = [f"{'what':<44} {'count':>8} {'seconds':>9} {'share':>6} {'mean us':>9} MiB"]
        for key, (n, sec, nbytes) in sorted(self.rows.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{' '.join(map(str, key))[:44]:<44} {n:>8} {sec:>9.4f} "
                         f"{sec / total:>6.1%} {1e6 * sec / n:>9.1f} {nbytes / 2**20:.1f}")
        text = "\n".join(["[simrun] CUDA profile", *lines]) + "\n"
        if self.target in ("1", "stderr"):
            sys.stderr.write(text)
        else:
            with open(self.target, "a") as f:
                f.write(text)


_profile_target = os.environ.get("SIMRUN_CUDA_PROFILE")
PROFILE = Profile(_profile_target) if _profile_target else None


class CudaError(KernelRuntimeError):
    """The CUDA driver refused something (no device, out of memory, a bad PTX module)."""


def _driver():
    try:
        from cuda.bindings import driver  # optional dependency: pip install simrun[cuda]
    except ImportError:
        from cuda import cuda as driver  # optional dependency: cuda-python before 12.6
    return driver


def device_status() -> str | None:
    """None where a CUDA device can be used, else why not (one line)."""
    try:
        driver = _driver()
    except ImportError:
        return "the CUDA bindings are not installed (pip install 'simrun[cuda]')"
    try:
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return f"the CUDA driver did not start ({_error_name(driver, err)})"
        err, count = driver.cuDeviceGetCount()
    except Exception as exc:  # noqa: BLE001 - no driver library: the bindings raise
        return f"no NVIDIA driver was found ({type(exc).__name__})"
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device found"
    return None


def _error_name(driver, err) -> str:
    try:
        return driver.cuGetErrorName(err)[1].decode()
    except Exception:  # noqa: BLE001
        return str(err)


@dataclass
class _Copy:
    """A field's device copy and which side is newer."""

    field: object
    dptr: int
    array: np.ndarray  # the host array it copies (a field given a new array gets a new copy)
    host_newer: bool = True
    device_newer: bool = False


class Device:
    """One GPU's primary context and what simrun keeps there."""

    warned_ordered = False  # warn_ordered has spoken in this process

    def __init__(self, ordinal: int = 0):
        self.driver = d = _driver()
        self._check(d.cuInit(0))
        self.dev = self._check(d.cuDeviceGet(ordinal))
        self.ctx = self._check(d.cuDevicePrimaryCtxRetain(self.dev))
        self._check(d.cuCtxSetCurrent(self.ctx))
        attr = d.CUdevice_attribute
        self.sms = self._check(d.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.dev))
        major = self._check(d.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev))
        minor = self._check(d.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev))
        self.sm = 10 * major + minor
        # the autodiff stacks grow with device malloc (codegen/cuda/emit.py): 8 MiB by default
        self._check(d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE, HEAP_BYTES))
        self.blocks = self.sms * BLOCKS_PER_SM
        self.threads = self.blocks * BLOCK
        self.stacks = self.alloc(self.threads * STACK_BYTES)
        self._check(d.cuMemsetD8(self.stacks, 0, self.threads * STACK_BYTES))
        self.copies: dict = {}  # id(field) -> _Copy
        self.ring: tuple | None = None  # (pinned host, device) address of the context ring
        self.ring_next = 0

    def _check(self, result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.driver.CUresult.CUDA_SUCCESS:
            raise CudaError(f"CUDA: {_error_name(self.driver, err)}")
        return rest[0] if len(rest) == 1 else tuple(rest) or None

    def alloc(self, nbytes: int) -> int:
        return int(self._check(self.driver.cuMemAlloc(max(8, nbytes))))

    def upload(self, dptr: int, arr: np.ndarray, what: str = "") -> None:
        if arr.nbytes:
            t0 = time.perf_counter()
            self._check(self.driver.cuMemcpyHtoD(dptr, arr.ctypes.data, arr.nbytes))
            if PROFILE:
                PROFILE.add(("copy to device", what), time.perf_counter() - t0, arr.nbytes)

    def download(self, arr: np.ndarray, dptr: int, what: str = "") -> None:
        if arr.nbytes:
            t0 = time.perf_counter()
            self._check(self.driver.cuMemcpyDtoH(arr.ctypes.data, dptr, arr.nbytes))
            if PROFILE:
                PROFILE.add(("copy to host", what), time.perf_counter() - t0, arr.nbytes)

    def free(self, dptr: int) -> None:
        self._check(self.driver.cuMemFree(dptr))

    def ring_slot(self) -> tuple[int, int]:
        """(pinned host, device) addresses of the next context slot of the ring (ASYNC)."""
        if self.ring is None:
            host = self._check(self.driver.cuMemAllocHost(RING_SLOTS * RING_SLOT_BYTES))
            self.ring = (int(host), self.alloc(RING_SLOTS * RING_SLOT_BYTES))
        if self.ring_next == RING_SLOTS:  # a launch in flight may still read any slot
            self.synchronize()
            self.ring_next = 0
        offset = self.ring_next * RING_SLOT_BYTES
        self.ring_next += 1
        return self.ring[0] + offset, self.ring[1] + offset

    def upload_async(self, dptr: int, host: int, nbytes: int) -> None:
        """Pinned host memory to the device, in the default stream's order (no wait)."""
        self._check(self.driver.cuMemcpyHtoDAsync(dptr, host, nbytes, 0))

    def field_pointer(self, f) -> int:
        """f's device copy, current: uploaded where the host's may have changed."""
        arr = f._data
        c = self.copies.get(id(f))
        if c is None or c.array is not arr:
            if c is not None:  # the field was given a new array
                self.free(c.dptr)
            c = self.copies[id(f)] = _Copy(f, self.alloc(arr.nbytes), arr)
            f._sync = self.to_host
        if c.host_newer:
            self.upload(c.dptr, arr, getattr(f, "name", "field"))
            c.host_newer = False
        return c.dptr

    def wrote(self, f) -> None:
        """A launch wrote f on the device."""
        c = self.copies.get(id(f))
        if c is not None:
            c.device_newer = True

    def to_host(self, f, write: bool) -> None:
        """Field.host_values's hook: bring a newer device copy back; with write, the host
        may change it now (the next launch uploads it)."""
        c = self.copies.get(id(f))
        if c is None:
            return
        if c.device_newer:
            self.download(c.array, c.dptr, getattr(f, "name", "field"))
            c.device_newer = False
        c.host_newer = c.host_newer or write

    def release(self) -> None:
        """Every field back on the host and its device copy freed (ti.init, ti.reset)."""
        for c in list(self.copies.values()):
            self.to_host(c.field, write=False)
            c.field._sync = None
            self.free(c.dptr)
        self.copies.clear()

    def load(self, ptx: str):
        """The driver's module of PTX text (it assembles it for this GPU)."""
        image = np.frombuffer(ptx.encode() + b"\0", dtype=np.uint8)
        return self._check(self.driver.cuModuleLoadData(image.ctypes.data))

    def function(self, module, name: str):
        return self._check(self.driver.cuModuleGetFunction(module, name.encode()))

    def warn_ordered(self, kernel: str) -> None:
        """Say once per process why a GPU launch runs on one thread, what it costs, and how
        to choose speed instead (a CLI job asks for reproducible bits, and gets them)."""
        if self.warned_ordered:
            return
        self.warned_ordered = True
        print(f"[simrun] kernel '{kernel}' runs its float sums and scatters on one GPU "
              "thread: ti.init(deterministic=True), which every simrun job sets, asks for "
              "the same bits on every run, and a GPU's atomics add floats in an order that "
              "changes from run to run. On one thread such a loop is much slower than on "
              "the whole GPU; --no-reproducible (a simrun job) or ti.init(arch=ti.cuda, "
              "deterministic=False) runs it on every thread, with last bits that may vary "
              "from run to run, as in Taichi.",
              file=sys.stderr)

    def launch(self, fn, dctx: int, serial: bool) -> None:
        arg = np.array([dctx], dtype=np.uint64)
        params = np.array([arg.ctypes.data], dtype=np.uint64)
        blocks, block = (1, 1) if serial else (self.blocks, BLOCK)
        self._check(self.driver.cuLaunchKernel(fn, blocks, 1, 1, block, 1, 1, 0, 0,
                                               params.ctypes.data, 0))

    def synchronize(self) -> None:
        self._check(self.driver.cuCtxSynchronize())


_devices: list = []


def device() -> Device:
    """The process's GPU (device 0), started on first use."""
    if not _devices:
        _devices.append(Device(0))
    return _devices[0]


def synchronize_all() -> None:
    """Wait for every launch made on a started GPU (ti.sync)."""
    for dev in _devices:
        dev.synchronize()


def release_fields() -> None:
    """Fields back on the host, device copies freed, where a GPU was started (ti.init)."""
    for dev in _devices:
        dev.release()


class CudaKernel(CompiledKernel):
    """A kernel variant on the GPU; the same interface as the CPU's CompiledKernel. Not
    chainable: a step program runs launch by launch on the device (for now). Under
    ti.init(deterministic=True) its tasks whose float atomics race (order_sensitive,
    codegen/cuda/order.py) add in 64-bit fixed point on the whole grid (fixed_point), or,
    where that cannot take them, run on one GPU thread: the same bits on every run."""

    chainable = False

    def __init__(self, name: str, layout, ptx: str, entries: list, serial: list,
                 arg_specs: list, ret_types: list, runtime, device: Device):
        super().__init__(name, layout, [], arg_specs, ret_types, runtime, {})
        self.device = device
        self.module = device.load(ptx)
        self.fns = [device.function(self.module, n) for n in entries]
        self.serial = serial
        self.dctx = device.alloc(layout.size * 8)
        self.may_fail = True  # an assert or debug checks (the compiler says otherwise)
        self.tasks_run = len(entries)  # the kernel's own tasks; fixed-point ones follow
        # the context as the device holds it after the last waited launch (None: unknown):
        # a launch whose context is the same uploads nothing; kernel-wide locals that live
        # in the context (beyond the arguments) are written there, so such kernels always do
        self.on_device: np.ndarray | None = None
        self.device_locals = len(layout.var_slot) > len(arg_specs)
        self.fixed_point: dict = {}  # task -> its fixed-point tasks (compiler_cuda.py)

    def rebound(self, fields: dict) -> None:
        """None: a twin reading another field in x.grad's place compiles its own PTX. (The
        CPU's view would need a device context of its own here; not yet run on a device.)"""
        return None

    def launch_plan(self, tasks):
        """(PTX kernel, on one thread?) in launch order for the kernel's tasks: in the
        deterministic mode a racing task runs as its fixed-point tasks on the whole grid
        (lang/cuda_fixed_point.py), or, where those cannot take it, on one thread."""
        ordered = self.order_sensitive if self.runtime.deterministic else frozenset()
        for k in tasks:
            if k in ordered and k in self.fixed_point:
                yield from ((j, False) for j in self.fixed_point[k])
                continue
            if k in ordered:  # codegen/cuda/order.py
                self.device.warn_ordered(self.name)
            yield k, self.serial[k] or k in ordered

    def launch(self, flat_args, arrays=(), tasks=None, rng_key=None):
        dev, lay = self.device, self.layout
        if flat_args:
            self.set_args(flat_args)
        if self.uses_random:
            rng_key = self.runtime.next_rng_key() if rng_key is None else rng_key
            self.ctx.view(np.uint64)[lay.rng_slot] = rng_key
            self.last_rng_key = rng_key
        for slot, f in enumerate(lay.fields):
            if not getattr(f, "is_ndarray_arg", False):
                self.ctx[slot] = dev.field_pointer(f)
        scratch = []  # ndarray arguments: device copies for this launch only
        for slot, arr in arrays:
            self.ctx[slot] = dev.alloc(arr.nbytes)
            dev.upload(int(self.ctx[slot]), arr)
            scratch.append((arr, int(self.ctx[slot])))
        self.ctx[lay.stack_slot] = dev.stacks
        nbytes = 8 * lay.sched_slot  # the CPU's scheduling slots: unused
        waits = (not ASYNC or PROFILE or self.ret_types or self.may_fail or scratch
                 or nbytes > RING_SLOT_BYTES)
        if waits:
            dctx = self.dctx
            image = self.ctx[:lay.sched_slot]
            if self.on_device is None or not np.array_equal(image, self.on_device):
                dev.upload(dctx, image)
        else:
            host, dctx = dev.ring_slot()
            ctypes.memmove(host, self.ctx.ctypes.data, nbytes)
            dev.upload_async(dctx, host, nbytes)
        for k, serial in self.launch_plan(range(self.tasks_run) if tasks is None else tasks):
            t0 = time.perf_counter()
            dev.launch(self.fns[k], dctx, serial)
            if PROFILE:
                dev.synchronize()
                PROFILE.add((self.name, f"task{k}", "serial" if serial else "grid"),
                            time.perf_counter() - t0)
        if not waits:
            for f in self.written:
                f.version += 1
                dev.wrote(f)
            return None
        dev.synchronize()
        back = self.ctx[lay.ret_slot:lay.err_slot + ERR_SLOTS]  # what Python reads of it
        dev.download(back, self.dctx + 8 * lay.ret_slot)
        for f in self.written:
            f.version += 1
            dev.wrote(f)
        for arr, dptr in scratch:
            dev.download(arr, dptr)
            dev.free(dptr)
        # the device's context now equals the host's (returns and errors came back), unless
        # the kernel keeps locals there or failed: then the next launch uploads it again
        failed = self.ctx[lay.err_slot] != 0
        self.on_device = (None if failed or self.device_locals
                          else self.ctx[:lay.sched_slot].copy())
        if failed:
            self.raise_error()
        return self.read_returns() if self.ret_types else None
