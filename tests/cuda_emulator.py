"""A stand-in for the GPU, so that runtime/cuda.py's own logic runs in CI: its Device's
memory is host memory and its PTX kernels are the CPU's compiled tasks of the same IR (the
context layout is the same). What it checks: a field a launch reads is uploaded where Python
may have changed it, one it writes comes back when Python looks (and only then), arguments, returns, errors and the autodiff
stack go through the device context, and a step program runs launch by launch. What it
cannot check: the PTX itself (tests/test_cuda_ptx.py assembles it; tests/test_gpu.py runs it)."""

from __future__ import annotations

import ctypes

import numpy as np

from simrun.lang import api
from simrun.lang.codegen.layout import STACK_BYTES
from simrun.lang.compiler import compile_kernel
from simrun.lang.runtime.cuda import Device

# lj_melt's lattice, density and temperature at 4000 atoms (10^3 fcc cells) instead of 32,000:
# the emulator runs each GPU task on the CPU, eight times the work for nothing more to check
LJ_MELT_4000 = ["particles.count=4000", "initial.shape=[10,10,10]",
                "boundary.high=[16.795961913825074,16.795961913825074,16.795961913825074]"]


class EmulatedDevice(Device):
    def __init__(self) -> None:  # no driver: nothing of Device.__init__ applies
        self.sm, self.blocks = 90, 1
        self.buffers: dict = {}
        self.copies: dict = {}
        self.moved = {"up": 0, "down": 0}  # bytes copied each way
        self.transfers: list = []  # ("up" | "down", bytes) of every copy, in order
        self.named: list = []  # ("up" | "down", what, bytes): the field's name, where known
        self.kirs: dict = {}  # kernel name -> its IR, as the pipeline last produced it
        self.cpu: dict = {}   # id(kir) -> (kir, its CPU CompiledKernel): kir kept alive
        self.launches = 0
        self.waits = 0  # synchronize() calls
        self.async_uploads = 0  # contexts sent without waiting (SIMRUN_CUDA_ASYNC)
        self.ring, self.ring_next = None, 0
        self.tasks: dict = {}  # fn -> (kernel name, task index, task kind)
        self.log: list = []  # (kernel name, task index, task kind, serial) of every launch
        self.threads = api.runtime().num_threads
        self.stacks = self.alloc(self.threads * STACK_BYTES)

    def capture(self, kir, pass_name: str) -> None:
        """pipeline.checks hook: the IR each kernel is compiled from (after its last pass,
        which the passes a mode and unread outputs choose make the last call here)."""
        self.kirs[kir.name] = kir

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(8, nbytes), dtype=np.uint8)
        self.buffers[buf.ctypes.data] = buf
        return buf.ctypes.data

    def free(self, dptr: int) -> None:
        del self.buffers[dptr]

    def upload(self, dptr: int, arr: np.ndarray, what: str = "") -> None:
        ctypes.memmove(dptr, arr.ctypes.data, arr.nbytes)
        self.moved["up"] += arr.nbytes
        self.transfers.append(("up", arr.nbytes))
        self.named.append(("up", what, arr.nbytes))

    def download(self, arr: np.ndarray, dptr: int, what: str = "") -> None:
        ctypes.memmove(arr.ctypes.data, dptr, arr.nbytes)
        self.moved["down"] += arr.nbytes
        self.transfers.append(("down", arr.nbytes))
        self.named.append(("down", what, arr.nbytes))

    def load(self, ptx: str):
        assert ".entry" in ptx
        return ptx

    def function(self, module, name: str):
        stem, task = name.removesuffix("_kernel").rsplit("_t", 1)
        kir = self.kirs[stem.rsplit("_sm", 1)[0]]
        held = self.cpu.get(id(kir))
        if held is None or held[0] is not kir:  # an id is reused once its IR is collected
            held = self.cpu[id(kir)] = (kir, compile_kernel(kir, api.runtime(), api.config,
                                                            None, None))
        fn = held[1].fns[int(task)]
        self.tasks[fn] = (kir.name, int(task), kir.tasks[int(task)].kind)
        return fn

    def launch(self, fn, dctx: int, serial: bool) -> None:
        self.launches += 1
        self.log.append((*self.tasks[fn], serial))
        rt = api.runtime()
        (rt.run_serial if serial else rt.run)(fn, dctx)

    def synchronize(self) -> None:
        self.waits += 1

    def ring_slot(self) -> tuple[int, int]:
        """The ring as Device has it, both ends in host memory (launches run at once)."""
        if self.ring is None:
            from simrun.lang.runtime import cuda

            buf = self.alloc(cuda.RING_SLOTS * cuda.RING_SLOT_BYTES)
            self.ring = (self.alloc(cuda.RING_SLOTS * cuda.RING_SLOT_BYTES), buf)
        return super().ring_slot()

    def upload_async(self, dptr: int, host: int, nbytes: int) -> None:
        ctypes.memmove(dptr, host, nbytes)
        self.moved["up"] += nbytes
        self.async_uploads += 1
