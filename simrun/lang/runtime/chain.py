"""A fixed sequence of compiled launches, repeated many times in one native call.

A step loop whose step is a few tiny launches (an integrator update, an energy, its gradient)
spends most of its time in Python between them: a ctypes call per launch, argument
marshalling, the loop itself. ``Chain`` posts every task of every launch through the native
pool's run function, ``repeats`` times over, and stops early after a repetition when a watch
word (an i32, e.g. a 0-D field a NaN-watch kernel sets) is nonzero, or at the first task that
reports an error. ``run_program`` runs blocks of the launches in turn, each repeated its own
number of times (the adjoint's forward steps, copies and reverse steps in one call). The launches are exactly what ``CompiledKernel.launch`` would make: the same
tasks and arguments, in the same order, so the results are the same bits. A variant launched
with two different lists of scalars in one chain (two energy terms of one kernel) gives each
list its own copy of the variant's context, where the scalar arguments live (`_contexts`).

Kernels that draw random numbers or take ndarray arguments need per-launch set-up and are
refused. Under ``ti.init(deterministic=True)`` with threads, a task that scatters floats runs
on the calling thread alone, its chunks in order, as `CompiledKernel.launch` runs it. Where the native pool is unavailable, the same plan runs in a Python loop.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
from llvmlite import ir

from . import jit
from .interrupt import in_flight

CHAIN_FN = "simrun_chain_run"
_CHAIN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


def build_module() -> str:
    """i64 chain(run, state, plan, program, entries, stop, failed): returns the repetitions
    done, summed over the program's entries. ``plan`` holds (task, context, serial) per task;
    ``program`` holds (first task, task count, repeats) per entry, run in order: a plain
    chain is one entry. A serial task is called directly: its probe with one thread, then
    all its chunks on this thread (``Runtime.run_serial``)."""
    i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.PointerType()
    module = ir.Module(name="simrun_chain")
    fn = ir.Function(module, ir.FunctionType(i64, [i64, i64, ptr, ptr, i64, ptr, ptr]),
                     CHAIN_FN)
    run_addr, state, plan, program, entries, stop, failed = fn.args
    blocks = {k: fn.append_basic_block(k) for k in (
        "entry", "entries", "enter", "outer", "inner", "task", "pooled", "serial", "chunks",
        "result", "bad", "next", "watch", "check", "stopped", "done", "finished")}
    b = ir.IRBuilder(blocks["entry"])
    run = b.inttoptr(run_addr, ir.FunctionType(i64, [i64, i64, i64]).as_pointer())
    task_type = ir.FunctionType(i64, [i64, i64, i64]).as_pointer()  # (ctx, tid, nthreads)
    e_p, r_p, j_p, total_p = (b.alloca(i64) for _ in range(4))
    end_p, reps_p, first_p = (b.alloca(i64) for _ in range(3))
    zero, one = ir.Constant(i64, 0), ir.Constant(i64, 1)
    b.store(zero, e_p)
    b.store(zero, total_p)
    b.branch(blocks["entries"])
    b.position_at_end(blocks["entries"])  # while e < entries
    e = b.load(e_p, typ=i64)
    b.cbranch(b.icmp_signed("<", e, entries), blocks["enter"], blocks["finished"])
    b.position_at_end(blocks["enter"])
    three_e = b.mul(e, ir.Constant(i64, 3))
    first = b.load(b.gep(program, [three_e], source_etype=i64), typ=i64)
    count = b.load(b.gep(program, [b.add(three_e, one)], source_etype=i64), typ=i64)
    b.store(first, first_p)
    b.store(b.add(first, count), end_p)
    b.store(b.load(b.gep(program, [b.add(three_e, ir.Constant(i64, 2))], source_etype=i64),
                   typ=i64), reps_p)
    b.store(zero, r_p)
    b.branch(blocks["outer"])
    b.position_at_end(blocks["outer"])  # while r < repeats
    r = b.load(r_p, typ=i64)
    b.store(b.load(first_p, typ=i64), j_p)
    b.cbranch(b.icmp_signed("<", r, b.load(reps_p, typ=i64)), blocks["inner"], blocks["done"])
    b.position_at_end(blocks["inner"])  # while j < first + count
    j = b.load(j_p, typ=i64)
    b.cbranch(b.icmp_signed("<", j, b.load(end_p, typ=i64)), blocks["task"], blocks["watch"])
    b.position_at_end(blocks["task"])
    three_j = b.mul(j, ir.Constant(i64, 3))
    task = b.load(b.gep(plan, [three_j], source_etype=i64), typ=i64)
    ctx = b.load(b.gep(plan, [b.add(three_j, one)], source_etype=i64), typ=i64)
    serial = b.load(b.gep(plan, [b.add(three_j, ir.Constant(i64, 2))], source_etype=i64),
                    typ=i64)
    b.cbranch(b.icmp_signed("!=", serial, zero), blocks["serial"], blocks["pooled"])
    b.position_at_end(blocks["pooled"])
    pooled = b.call(run, [state, task, ctx])
    b.branch(blocks["result"])
    b.position_at_end(blocks["serial"])
    direct = b.inttoptr(task, task_type)
    probe = b.call(direct, [ctx, zero, ir.Constant(i64, -1)])
    b.cbranch(b.icmp_signed(">", probe, zero), blocks["chunks"], blocks["result"])
    b.position_at_end(blocks["chunks"])
    chunks = b.call(direct, [ctx, zero, one])
    b.branch(blocks["result"])
    b.position_at_end(blocks["result"])
    result = b.phi(i64)
    result.add_incoming(pooled, blocks["pooled"])
    result.add_incoming(probe, blocks["serial"])
    result.add_incoming(chunks, blocks["chunks"])
    b.cbranch(b.icmp_signed("<", result, zero), blocks["bad"], blocks["next"])
    b.position_at_end(blocks["bad"])
    b.store(j, failed)
    b.ret(b.load(total_p, typ=i64))
    b.position_at_end(blocks["next"])
    b.store(b.add(j, one), j_p)
    b.branch(blocks["inner"])
    b.position_at_end(blocks["watch"])
    b.store(b.add(r, one), r_p)
    total = b.add(b.load(total_p, typ=i64), one)
    b.store(total, total_p)
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(stop, i64), zero), blocks["outer"],
              blocks["check"])
    b.position_at_end(blocks["check"])
    word = b.load_atomic(stop, "acquire", 4, typ=i32)
    b.cbranch(b.icmp_signed("!=", word, ir.Constant(i32, 0)), blocks["stopped"], blocks["outer"])
    b.position_at_end(blocks["stopped"])
    b.ret(total)
    b.position_at_end(blocks["done"])
    b.store(b.add(e, one), e_p)
    b.branch(blocks["entries"])
    b.position_at_end(blocks["finished"])
    b.ret(b.load(total_p, typ=i64))
    fn.attributes.add("nounwind")  # no unwind tables: objload maps code and constants only
    return str(module)


@functools.cache
def _chain_function(settings) -> object:
    key = jit.cache_key("simrun launch chain, serial tasks, programs", settings)
    if not jit.load_cached(key, settings):
        jit.compile_module(key, build_module(), settings, "(native chain)")
    return _CHAIN(jit.function_address(CHAIN_FN))


def _address(fn) -> int:
    return int(fn) if isinstance(fn, int) else ctypes.cast(fn, ctypes.c_void_p).value


def serial_scatters(compiled) -> bool:
    """Whether a launch must run its float scatters on one thread (the deterministic mode)."""
    rt = compiled.runtime
    return bool(compiled.order_sensitive) and rt.deterministic and rt.num_threads > 1


def _own_context(ctx: np.ndarray) -> tuple:
    """A copy of a variant's context with its f64 and f32 views (set_args writes through)."""
    copy = ctx.copy()
    return copy, copy.view(np.float64), copy.view(np.float32)


def _contexts(launches: list) -> tuple[list, dict]:
    """Per launch, its own context (or None: the variant's), and per variant (by id) its
    writers [(compiled, flat list, own context or None)], one per distinct flat list.

    A variant's scalar arguments live in its context. Launches of one variant that share
    one flat list (the same object: the same values at every step) or take no scalars
    share the variant's context, as a Python loop of launches would; only a variant
    launched with two different flat lists (two energy terms of one kernel with different
    params) gives each list its own copy, so no copy is made or refreshed per step for the
    rest."""
    lists: dict[int, dict[int, list]] = {}  # id(variant) -> id(flat) -> flat, in order
    variant = {id(compiled): compiled for compiled, _ in launches}
    for compiled, flat in launches:
        if compiled.arg_kinds:
            lists.setdefault(id(compiled), {})[id(flat)] = flat
    owned = {(v, f): _own_context(variant[v].ctx) for v, flats in lists.items()
             if len(flats) > 1 for f in flats}
    contexts = [owned.get((id(compiled), id(flat))) for compiled, flat in launches]
    writers = {v: [(variant[v], flat, owned.get((v, f))) for f, flat in flats.items()]
               for v, flats in lists.items()}
    return contexts, writers


class Chain:
    """Launches [(compiled kernel, flat scalar arguments)] in order, ``repeats`` times.

    ``stop``: a 0-D i32 field (or None) read after each repetition; nonzero ends the run."""

    def __init__(self, runtime, launches: list, stop=None) -> None:
        for compiled, _ in launches:
            if not compiled.chainable:
                raise ValueError(f"kernel '{compiled.name}' runs on a GPU: chains post CPU "
                                 "tasks to the native pool")
            if compiled.uses_random:
                raise ValueError(f"kernel '{compiled.name}' draws random numbers: a chain "
                                 "cannot give each launch its own key")
            if compiled.ndarray_slots:
                raise ValueError(f"kernel '{compiled.name}' takes ndarrays: chain fields only")
        self.runtime, self.launches, self.stop = runtime, launches, stop
        # read after each repetition: the caller's stop field, or one of its own that only
        # a signal sets (interrupt.py), so that any long call can be cut at a step's end
        self.stop_word = stop.data if stop is not None else np.zeros((), dtype=np.int32)
        self.contexts, self.writers_of = _contexts(launches)
        self.writers = [w for ws in self.writers_of.values() for w in ws]
        self.owner = [k for k, (compiled, _) in enumerate(launches) for _ in compiled.fns]
        self.serial = [serial_scatters(compiled) and t in compiled.order_sensitive
                       for compiled, _ in launches for t in range(len(compiled.fns))]
        self.plan = np.array([(_address(fn), ctx, serial) for (ctx, fn), serial in zip(
            self._tasks(), self.serial)], dtype=np.int64).reshape(-1)
        self.failed = np.full(1, -1, dtype=np.int64)
        self.first_task = np.cumsum([0] + [len(c.fns) for c, _ in launches]).astype(np.int64)
        self.whole = np.array([0, len(self.owner), 0], dtype=np.int64)  # run(): one entry
        # each field once: a run bumps its version (readers only ask whether it changed)
        self.written = list({id(f): f for compiled, _ in launches
                             for f in compiled.written}.values())
        if stop is not None and (stop.data.dtype != np.int32 or stop.data.shape != ()):
            raise ValueError("the stop word must be a 0-D ti.i32 field")
        self._native = None  # (pool's run partial, the call's fixed arguments), once known
        self.set_args()

    def run(self, repeats: int, set_args: bool = True) -> int:
        """Make the launches ``repeats`` times; returns the repetitions done (fewer when the
        stop word was set). A task's error (e.g. an index out of range) is raised as
        ``CompiledKernel.launch`` raises it. ``set_args=False`` skips writing the scalar
        arguments into the launches' contexts: for a caller that wrote them with
        ``set_args`` since the last change of a launch's flat arguments and launched none of
        those kernels from Python since (launches of a variant with one flat list here
        use the variant's context, which a Python launch rewrites: `_contexts`)."""
        self.whole[2] = repeats
        return self._run(self.whole, set_args)

    def run_program(self, program: np.ndarray, set_args: bool = True) -> int:
        """Run blocks of the launches in turn: ``program`` rows are (first launch, launch
        count, repeats), e.g. a few forward steps, a copy, a reverse step, without returning
        to Python between them. Returns the repetitions done over all rows (fewer than their
        sum when the stop word, read after each repetition of every row, was set);
        ``set_args`` as for ``run``."""
        program = np.asarray(program, dtype=np.int64).reshape(-1, 3)
        first, count = program[:, 0], program[:, 1]
        tasks = np.empty_like(program)
        tasks[:, 0] = self.first_task[first]
        tasks[:, 1] = self.first_task[first + count] - tasks[:, 0]
        tasks[:, 2] = program[:, 2]
        return self._run(tasks.reshape(-1), set_args)

    def _run(self, program: np.ndarray, set_args: bool = True) -> int:
        if set_args:
            self.set_args()
        native = self._native_call()
        if native is None:
            done = self._run_python(program)
        else:
            call, (run, state, plan, stop, failed) = native
            word = self.stop_word
            if self.stop is None:
                word[()] = 0
            in_flight[id(word)] = word
            try:  # a signal's KeyboardInterrupt comes as the call returns
                done = call(run, state, plan, program.ctypes.data, len(program) // 3, stop,
                            failed)
            finally:
                del in_flight[id(word)]
        for f in self.written:  # as each launch does: readers see that the field changed
            f.version += 1
        if self.failed[0] >= 0:
            k = self.owner[int(self.failed[0])]
            compiled = self.launches[k][0]
            self.failed[0] = -1
            own = self.contexts[k]
            if own is not None:  # the error the task wrote, where raise_error reads it
                compiled.ctx[:] = own[0]
                own[0][compiled.layout.err_slot] = 0
            compiled.raise_error()
        return int(done)

    def _native_call(self) -> tuple | None:
        """The native chain function and its fixed arguments (addresses), worked out on the
        first run and kept while the runtime's pool function is the same; None without the
        native pool. A step calls this once: no settings hash or ctypes objects per call."""
        rt, known = self.runtime, self._native
        if known is not None and rt.run is known[0]:
            return known[1]
        address = rt.native_run_address()
        if address is None:
            return None
        stop = self.stop_word.ctypes.data
        call = (_chain_function(rt.settings), (address, rt.state.ctypes.data,
                                               self.plan.ctypes.data, stop,
                                               self.failed.ctypes.data))
        self._native = (rt.run, call)
        return call

    def set_args(self, only=None) -> None:
        """Write every launch's scalar arguments (its flat list, as it holds them now) into
        the launch's context; with `only` (a compiled kernel), just that kernel's launches."""
        writers = self.writers if only is None else self.writers_of.get(id(only), ())
        for compiled, flat, own in writers:  # a controller's step: no walk over them all
            if own is not None:
                own[0][:] = compiled.ctx  # what the variant keeps there (fields, stacks)
                own[0][compiled.layout.err_slot] = 0
            compiled.set_args(flat, own)

    def _tasks(self) -> list:
        """(context address, task function) of every task, in order."""
        return [(own[0].ctypes.data if own is not None else compiled.ctx_addr, fn)
                for (compiled, _), own in zip(self.launches, self.contexts)
                for fn in compiled.fns]

    def _run_python(self, program: np.ndarray) -> int:
        rt = self.runtime
        tasks = [(fn, ctx) for ctx, fn in self._tasks()]
        runs = [rt.run_serial if serial else rt.run for serial in self.serial]
        done = 0
        for first, count, repeats in program.reshape(-1, 3).tolist():
            for _ in range(repeats):
                for k in range(first, first + count):
                    fn, ctx = tasks[k]
                    if runs[k](fn, ctx) < 0:
                        self.failed[0] = k
                        return done
                done += 1
                if self.stop is not None and self.stop.data[()] != 0:
                    return done
        return done
