"""One task as an NVPTX kernel: the CPU emitter's statements and storage, a different skeleton.

The task body is the CPU's `i64 task(ctx, tid, nthreads)` (emit.py), with tid the global
thread index and nthreads the grid's thread count; a range task walks its iterations with a
grid-stride loop instead of taking chunks; a reduction (`total += ...` onto one place) adds
into a thread's own partial, which one atomic adds to the target when the thread is done
(fewer atomics, and a shorter chain of float roundings), and scatters are device
atomics (float add is PTX's native `red.add`/`atom.add`; the rest are compare-and-swap
loops LLVM expands). A `void` kernel, marked in nvvm.annotations, reads the thread ids from
`llvm.nvvm.read.ptx.sreg.*` and calls the body; a serial task runs on thread 0 alone.
The context (kernel arguments, field base pointers, error slots) is the CPU's layout, held
in device memory: every field access is a load or store through a device pointer.
"""

from __future__ import annotations

from llvmlite import ir

from ...ir.ops import MathFn
from ..chunks import identity
from ..emit import TaskEmitter
from ..llvm_ops import cpu_math
from ..llvm_types import I32, I64, PTR, i64c

SREG = "llvm.nvvm.read.ptx.sreg."
WARP = 32


def _bits(t) -> int:
    """The width of an integer or float LLVM type (0 for others)."""
    if isinstance(t, ir.IntType):
        return t.width
    return {ir.FloatType: 32, ir.DoubleType: 64}.get(type(t), 0)


class CudaTaskEmitter(TaskEmitter):
    """TaskEmitter for nvptx64-nvidia-cuda; build() adds the kernel that calls the body."""

    native_int_min = False  # PTX's cvt saturates: the conversion is spelled out

    def math_call(self, b, fn: MathFn, args, t):
        """libdevice's function (__nv_sinf for f32, __nv_sin for f64), or the LLVM intrinsic
        NVPTX has an instruction for (llvm.sqrt: sqrt.rn, IEEE-rounded as on the CPU)."""
        if fn.libdevice.startswith("llvm."):
            return cpu_math(b, MathFn(fn.libdevice, fn.libdevice), args, t)
        name = f"__nv_{fn.libdevice}{'f' if isinstance(t, ir.FloatType) else ''}"
        if isinstance(t, ir.HalfType):
            wide = [b.fpext(a, ir.FloatType()) for a in args]
            return b.fptrunc(self.math_call(b, fn, wide, ir.FloatType()), t)
        return b.call(self.declared(name, t, [t] * len(args)), args)

    def build(self):
        body = super().build()
        body.linkage = "internal"
        body.attributes.add("alwaysinline")
        kernel = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR]),
                             self.fn.name + "_kernel")
        b = ir.IRBuilder(kernel.append_basic_block("entry"))
        ctx = kernel.args[0]
        ctx.add_attribute("noalias")
        if self.task.kind == "range":
            tid = b.add(b.mul(self._sreg(b, "ctaid.x"), self._sreg(b, "ntid.x")),
                        self._sreg(b, "tid.x"))
            threads = b.mul(self._sreg(b, "nctaid.x"), self._sreg(b, "ntid.x"))
            b.call(body, [ctx, tid, threads])
        else:
            first = b.icmp_unsigned("==", b.add(self._sreg(b, "ctaid.x"), self._sreg(b, "tid.x")),
                                    ir.Constant(I64, 0))
            with b.if_then(first):
                b.call(body, [ctx, i64c(0), i64c(1)])
        b.ret_void()
        self._reflect_flags()
        annotations = self.module.add_named_metadata("nvvm.annotations")
        annotations.add(self.module.add_metadata([kernel, ir.MetaDataString(self.module, "kernel"),
                                                  ir.Constant(I32, 1)]))
        return kernel

    def _reflect_flags(self) -> None:
        """libdevice's choice read by LLVM's NVVMReflect, once per module: denormals are kept
        (no flush to zero), as on the CPU."""
        m = self.module
        if "llvm.module.flags" not in m.namedmetadata:
            m.add_named_metadata("llvm.module.flags").add(m.add_metadata([
                ir.Constant(I32, 4), ir.MetaDataString(m, "nvvm-reflect-ftz"), ir.Constant(I32, 0)]))

    def _sreg(self, b, name: str):
        """A PTX special register (tid.x, ntid.x, ctaid.x, nctaid.x) as i64."""
        fn = self.declared(SREG + name, I32, [])
        return b.zext(b.call(fn, []), I64)

    def build_range(self):
        """Iterations tid, tid + nthreads, ... of [begin, end): the grid-stride loop."""
        b, task = self.b, self.task
        begin = self._i64(self.expr(task.begin))
        n = b.sub(self._i64(self.expr(task.end)), begin)
        k_p = self.eb.alloca(I64, name="k")
        b.store(self.tid, k_p)
        var_ptr = self.var_ptr(task.var)

        def before():
            idx = b.add(begin, b.load(k_p, typ=I64))
            self._begin_iteration(idx, var_ptr)
            self.index64 = idx

        def stride():
            b.store(b.add(b.load(k_p, typ=I64), self.nthreads), k_p)

        reds = self._reduction_accumulators()
        for dtype, acc, _, kind in reds:
            b.store(identity(kind, dtype), acc)
        self._loop(lambda: b.icmp_signed("<", b.load(k_p, typ=I64), n), task.body, before,
                   stride)
        if reds:  # one atomic a warp (a thread, where the type has no shuffle) that had
            warped = self._warp_reduce(reds)  # iterations, not one an iteration
            lane0 = b.icmp_unsigned("==", b.and_(self.tid, i64c(WARP - 1)), i64c(0))
            one_thread = b.icmp_signed("<", self.nthreads, i64c(WARP))
            with b.if_then(b.icmp_signed("<", self.tid, n)):
                for k, (_, acc, apply, _) in enumerate(reds):
                    if k not in warped:
                        apply(b.load(acc, typ=acc.allocated_type))
                        continue
                    with b.if_then(b.or_(lane0, one_thread)):
                        apply(b.load(acc, typ=acc.allocated_type))
        self.index64 = None
        b.ret(i64c(0))

    def _warp_reduce(self, reds) -> set:
        """Each warp's partials combined into its lane 0 by shuffles (shfl.sync.down, a
        fixed tree), so a reduction makes one atomic a warp: the displacement check's
        float maximum into one place was a compare-and-swap loop from each of 270,000
        threads. Types of 32 or 64 bits; a launch of fewer than a warp's threads (a serial
        run of a range task) skips it (the branch is the same for the whole grid). Returns
        the indices of the reductions it combined."""
        b = self.b
        warped = {k for k, (_, acc, _, _) in enumerate(reds)
                  if _bits(acc.allocated_type) in (32, 64)}
        if not warped:
            return warped
        with b.if_then(b.icmp_signed(">=", self.nthreads, i64c(WARP))):
            for k in sorted(warped):
                dtype, acc, _, kind = reds[k]
                t = acc.allocated_type
                for delta in (16, 8, 4, 2, 1):
                    mine = b.load(acc, typ=t)
                    b.store(self.combine(kind, mine, self._shuffle_down(mine, delta), dtype),
                            acc)
        return warped

    def _shuffle_down(self, value, delta: int):
        """The value of the lane `delta` above (every lane of the warp takes part)."""
        b = self.b
        t = value.type
        fn = self.declared("llvm.nvvm.shfl.sync.down.i32", I32, [I32, I32, I32, I32])
        args = [ir.Constant(I32, -1), None, ir.Constant(I32, delta), ir.Constant(I32, 0x1F)]
        if _bits(t) == 32:
            word = value if t == I32 else b.bitcast(value, I32)
            got = b.call(fn, [args[0], word, *args[2:]])
            return got if t == I32 else b.bitcast(got, t)
        wide = value if t == I64 else b.bitcast(value, I64)
        low = b.call(fn, [args[0], b.trunc(wide, I32), *args[2:]])
        high = b.call(fn, [args[0], b.trunc(b.lshr(wide, i64c(32)), I32), *args[2:]])
        got = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), i64c(32)))
        return got if t == I64 else b.bitcast(got, t)

    def printf(self, fmt, args) -> None:
        """CUDA's vprintf: the (8-byte) arguments packed in a local buffer."""
        b = self.b
        buf = self.eb.alloca(ir.ArrayType(I64, max(1, len(args))), name="print_args")
        buf.align = 8
        for k, a in enumerate(args):
            bits = a if a.type == I64 else b.bitcast(a, I64)
            b.store(bits, b.gep(buf, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
        b.call(self.declared("vprintf", I32, [PTR, PTR]), [fmt, buf])

    def realloc(self, data, size, new_size):
        """The autodiff stack's realloc on the device: malloc, copy, free."""
        b = self.b
        new = b.call(self.declared("malloc", PTR, [I64]), [new_size])
        with b.if_then(b.icmp_unsigned("!=", data, ir.Constant(PTR, None))):
            copy = self.declared("llvm.memcpy.p0.p0.i64", ir.VoidType(),
                                 [PTR, PTR, I64, ir.IntType(1)])
            b.call(copy, [new, data, size, ir.Constant(ir.IntType(1), 0)])
            b.call(self.declared("free", ir.VoidType(), [PTR]), [data])
        return new
