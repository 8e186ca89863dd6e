"""The native worker pool: a launch posted and joined in machine code, workers asleep on a futex.

A split launch through Python threads pays for the GIL three times (the worker takes it to
leave its queue and again to report back, the caller to join) plus a queue and two locks:
~30 us of a 0.2 ms launch on a 2-vCPU VM (bench/README). Here the caller's ctypes call does
the probe, posts the job, runs its own share and joins, and each worker is a thread that
stays in one ctypes call for its life, so no step of a launch needs the GIL.

A worker that finished a job spins (with `pause`) for ~0.2 ms before it sleeps, so that the
next launch of a step loop finds it awake; then it sleeps on the generation word, and a
process between launches burns no CPU. With more threads than CPUs the runtime sets the
spin to zero: a spinning worker would hold a CPU that another thread's chunks need. The caller spins a little on a worker's done word
before sleeping on it: a worker that got its job is nearly done by the time the caller runs
out of chunks (the task itself spins on the last chunks).

The state is an int64 array (runtime/parallel.py owns it); futex words are the low 32 bits
of a slot. A job's `claim` word holds its generation until the worker or the caller takes it
with a compare-and-swap, so a worker that wakes after the caller finished the job never runs
it (the chunks it would have taken are gone: codegen/schedule.py).
"""

from __future__ import annotations

from llvmlite import ir

from ..codegen.llvm_types import I32, I64, PTR
from .pool_state import (
    BUSY,
    CLAIM,
    CTX,
    DONE,
    FN,
    GEN,
    LAST_CHUNKS,
    LINE,
    NTHREADS,
    RESULT,
    RUN_FN,
    SPIN,
    SPLIT_LAUNCHES,
    STOP,
    STOP_FN,
    THREADS,
    WORKER,
    WORKER_FN,
)

SYS_FUTEX = 202    # x86-64 Linux
FUTEX_WAIT, FUTEX_WAKE = 128, 129   # the _PRIVATE variants
DONE_SPIN = 1 << 11    # pause rounds the caller waits on a worker before sleeping (~0.1 ms)


class _Pool:
    """Emits the pool's three functions into one module."""

    def __init__(self, module: ir.Module):
        self.module = module
        self.task_type = ir.FunctionType(I64, [I64, I64, I64])
        self.syscall = ir.Function(module, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.pause = ir.Function(module, ir.FunctionType(ir.VoidType(), []),
                                 "llvm.x86.sse2.pause")

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def slot(b, state, index):
        index = index if isinstance(index, ir.Value) else ir.Constant(I64, index)
        return b.gep(state, [index], source_etype=I64)

    def futex(self, b, word, op: int, value):
        """futex(word, op, value, NULL): every argument a full register, as syscall() reads."""
        b.call(self.syscall, [ir.Constant(I64, SYS_FUTEX), word, ir.Constant(I64, op),
                              b.zext(value, I64), ir.Constant(PTR, None)])

    def call_task(self, b, fn_addr, ctx, tid, nthreads):
        fn = b.inttoptr(fn_addr, self.task_type.as_pointer())
        return b.call(fn, [ctx, tid, nthreads])

    def worker_line(self, b, state, k):
        base = b.add(ir.Constant(I64, WORKER - LINE), b.mul(k, ir.Constant(I64, LINE)))
        return [self.slot(b, state, b.add(base, ir.Constant(I64, x)))
                for x in (CLAIM, DONE, RESULT)]

    # ------------------------------------------------------------------ worker
    def worker(self) -> None:
        """Worker k: sleep until the generation moves, take the job if its claim is still
        posted, run it, publish result and done, wake the caller; until STOP."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I64]), WORKER_FN)
        state, k = fn.args
        entry, wait, nap, woke, run, leave = (fn.append_basic_block(n) for n in
                                              ("entry", "wait", "nap", "woke", "run", "exit"))
        b = ir.IRBuilder(entry)
        gen_p, stop_p = self.slot(b, state, GEN), self.slot(b, state, STOP)
        claim_p, done_p, result_p = self.worker_line(b, state, k)
        seen_p = b.alloca(I32, name="seen")
        b.store(ir.Constant(I32, 0), seen_p)
        spun_p = b.alloca(I64, name="spun")
        b.store(ir.Constant(I64, 0), spun_p)
        b.branch(wait)

        b.position_at_end(wait)
        g = b.load_atomic(gen_p, "acquire", 4, typ=I32)
        seen = b.load(seen_p, typ=I32)
        b.cbranch(b.icmp_unsigned("==", g, seen), nap, woke)

        b.position_at_end(nap)
        stop = b.load_atomic(stop_p, "acquire", 8, typ=I64)
        sleep = fn.append_basic_block("sleep")
        b.cbranch(b.icmp_signed("!=", stop, ir.Constant(I64, 0)), leave, sleep)
        b.position_at_end(sleep)
        spun = b.load(spun_p, typ=I64)
        spin_more = b.icmp_signed("<", spun, b.load(self.slot(b, state, SPIN), typ=I64))
        with b.if_else(spin_more) as (then, otherwise):
            with then:
                b.call(self.pause, [])
                b.store(b.add(spun, ir.Constant(I64, 1)), spun_p)
            with otherwise:
                self.futex(b, gen_p, FUTEX_WAIT, seen)
        b.branch(wait)

        b.position_at_end(woke)
        b.store(g, seen_p)
        b.store(ir.Constant(I64, 0), spun_p)
        got = b.extract_value(b.cmpxchg(claim_p, g, ir.Constant(I32, 0), "acq_rel", "acquire"),
                              1)
        b.cbranch(got, run, wait)

        b.position_at_end(run)
        job = [b.load(self.slot(b, state, s), typ=I64) for s in (FN, CTX, NTHREADS)]
        b.store(self.call_task(b, job[0], job[1], k, job[2]), result_p)
        b.atomic_rmw("xchg", done_p, g, "release")
        self.futex(b, done_p, FUTEX_WAKE, ir.Constant(I32, 1))
        b.branch(wait)

        b.position_at_end(leave)
        b.ret_void()

    # ------------------------------------------------------------------ caller
    def run(self) -> None:
        """A launch: probe; inline or alone (one thread, or another caller has the workers):
        run; else post, run thread 0's share, take back or await each worker's job."""
        fn = ir.Function(self.module, ir.FunctionType(I64, [PTR, I64, I64]), RUN_FN)
        state, task, ctx = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        k_p, r_p, spin_p = (b.alloca(I64, name=n) for n in ("k", "result", "spin"))
        zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
        threads = b.load(self.slot(b, state, THREADS), typ=I64)
        chunks = self.call_task(b, task, ctx, zero, b.neg(threads))
        with b.if_then(b.icmp_signed("<=", chunks, zero), likely=False):
            b.ret(chunks)
        b.atomic_rmw("add", self.slot(b, state, SPLIT_LAUNCHES), one, "monotonic")
        b.atomic_rmw("xchg", self.slot(b, state, LAST_CHUNKS), chunks, "monotonic")
        t = b.select(b.icmp_signed("<", chunks, threads), chunks, threads)
        busy_p = self.slot(b, state, BUSY)
        with b.if_then(b.icmp_signed("<=", t, one)):
            b.ret(self.call_task(b, task, ctx, zero, one))
        owned = b.extract_value(b.cmpxchg(busy_p, zero, one, "acquire", "monotonic"), 1)
        with b.if_then(b.not_(owned), likely=False):
            b.ret(self.call_task(b, task, ctx, zero, one))

        gen_p = self.slot(b, state, GEN)
        g = b.add(b.load_atomic(gen_p, "monotonic", 4, typ=I32), ir.Constant(I32, 1))
        g = b.select(b.icmp_unsigned("==", g, ir.Constant(I32, 0)), ir.Constant(I32, 1), g)
        for_workers = self._for_workers(fn, b, k_p, t)
        for_workers(lambda claim_p, done_p, result_p:
                    b.atomic_rmw("xchg", claim_p, g, "monotonic"))
        for s, v in ((FN, task), (CTX, ctx), (NTHREADS, t)):
            b.store(v, self.slot(b, state, s))
        b.atomic_rmw("xchg", gen_p, g, "seq_cst")
        self.futex(b, gen_p, FUTEX_WAKE, ir.Constant(I32, 0x7FFFFFFF))
        b.store(self.call_task(b, task, ctx, zero, t), r_p)

        def join(claim_p, done_p, result_p):
            taken = b.extract_value(b.cmpxchg(claim_p, g, ir.Constant(I32, 0), "acq_rel",
                                              "monotonic"), 1)
            with b.if_then(b.not_(taken)):
                self._await_done(fn, b, done_p, g, spin_p)
                r, w = b.load(r_p, typ=I64), b.load(result_p, typ=I64)
                b.store(b.select(b.icmp_signed("<", w, r), w, r), r_p)

        for_workers(join)
        b.atomic_rmw("xchg", busy_p, zero, "release")
        b.ret(b.load(r_p, typ=I64))

    def _for_workers(self, fn, b, k_p, t):
        """A function that emits `body(claim, done, result)` for workers 1 .. t-1 in a loop."""
        def emit(body):
            head, loop, after = (fn.append_basic_block(n) for n in ("w_head", "w_body", "w_end"))
            b.store(ir.Constant(I64, 1), k_p)
            b.branch(head)
            b.position_at_end(head)
            k = b.load(k_p, typ=I64)
            b.cbranch(b.icmp_signed("<", k, t), loop, after)
            b.position_at_end(loop)
            body(*self.worker_line(b, fn.args[0], k))
            b.store(b.add(b.load(k_p, typ=I64), ir.Constant(I64, 1)), k_p)
            b.branch(head)
            b.position_at_end(after)
        return emit

    def _await_done(self, fn, b, done_p, g, spin_p) -> None:
        """Spin DONE_SPIN rounds on the worker's done word, then sleep on it until it is g."""
        head, count, spin, sleep_head, sleep, after = (
            fn.append_basic_block(n) for n in ("d_head", "d_count", "d_spin", "d_sleep_head",
                                               "d_sleep", "d_end"))
        b.store(ir.Constant(I64, 0), spin_p)
        b.branch(head)
        b.position_at_end(head)
        d = b.load_atomic(done_p, "acquire", 4, typ=I32)
        b.cbranch(b.icmp_unsigned("==", d, g), after, count)
        b.position_at_end(count)
        short = b.icmp_signed("<", b.load(spin_p, typ=I64), ir.Constant(I64, DONE_SPIN))
        b.cbranch(short, spin, sleep_head)
        b.position_at_end(spin)
        b.call(self.pause, [])
        b.store(b.add(b.load(spin_p, typ=I64), ir.Constant(I64, 1)), spin_p)
        b.branch(head)
        b.position_at_end(sleep_head)
        d = b.load_atomic(done_p, "acquire", 4, typ=I32)
        b.cbranch(b.icmp_unsigned("==", d, g), after, sleep)
        b.position_at_end(sleep)
        self.futex(b, done_p, FUTEX_WAIT, d)
        b.branch(sleep_head)
        b.position_at_end(after)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Set STOP, move the generation and wake every worker, so each returns."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR]), STOP_FN)
        (state,) = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.atomic_rmw("xchg", self.slot(b, state, STOP), ir.Constant(I64, 1), "seq_cst")
        gen_p = self.slot(b, state, GEN)
        b.atomic_rmw("add", gen_p, ir.Constant(I32, 1), "seq_cst")
        self.futex(b, gen_p, FUTEX_WAKE, ir.Constant(I32, 0x7FFFFFFF))
        b.ret_void()


def build_module() -> str:
    module = ir.Module(name="simrun_pool")
    pool = _Pool(module)
    pool.worker()
    pool.run()
    pool.stop()
    for fn in module.functions:
        fn.attributes.add("nounwind")  # no unwind tables: objload maps code and constants only
    return str(module)
