"""Python AST -> IR: one visit_* per statement, expressions evaluated to Python/IR values."""

from __future__ import annotations

import ast
import operator
import sys

from .. import builtins as B
from ..errors import CompileError
from ..fields import Field, Unplaced
from ..ir import builder
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Break,
    Continue,
    If,
    OpExpr,
    Print,
    Return,
    Store,
    Task,
    Var,
    VarRef,
    While,
)
from ..ir.ops import OPS, TypeRule
from ..matrix import Matrix
from ..types import DType, MatrixType, to_dtype
from . import loops, special
from .context import GlobalRef, LocalMatrix, atomic, is_dynamic
from .source import FuncSource

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_,
    ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ATOMIC_AUG = {ast.Add: "add", ast.Sub: "sub", ast.BitAnd: "and", ast.BitOr: "or",
               ast.BitXor: "xor"}


def _huge_python_int(op, a, b) -> bool:
    """Python ints in a kernel are folded exactly by Python (2**70 // 2**40 is 2**30); a power
    or shift of millions of bits (3 ** 2147483647) would not finish. A folded value that
    does not fit 64 bits is refused where it becomes a kernel value."""
    if type(a) is not int or type(b) is not int or b <= 0:
        return False
    if isinstance(op, ast.Pow):
        return abs(a) > 1 and b * (abs(a).bit_length() - 1) > _PYTHON_INT_BITS
    return isinstance(op, ast.LShift) and a != 0 and b > _PYTHON_INT_BITS


_PYTHON_INT_BITS = 1 << 16


# The frontend follows nested expressions by recursion; this bound keeps it far from Python's
# recursion limit (a chain of binary operators, however long, is one level: expr_BinOp).
MAX_NESTING = 100
NESTING_MESSAGE = (
    f"this expression nests more than {MAX_NESTING} levels deep (operators, calls, subscripts "
    f"or conditional expressions inside one another); simrun's frontend follows at most "
    f"{MAX_NESTING}. A chain such as a long sum `a + b + c + ...` counts as one level; assign "
    "inner parts to local variables to split the rest")


class Lowerer:
    """Lowers one function body (a kernel's or an inlined ti.func's) into the emitter's blocks."""

    def __init__(self, em, src: FuncSource, scope: dict, func_stack: tuple = ()):
        self.em = em
        self.src = src
        self.scopes = [scope]
        self.func_stack = func_stack
        self.return_vars: list | None = None
        self.return_type = None
        self.returned = False  # a `return` runs on every path lowered so far
        self.nesting = 0  # expressions being lowered, one inside the other

    # ------------------------------------------------------------ scoping
    def lookup(self, name: str, node):
        for scope in reversed(self.scopes):
            if name in scope:
                b = scope[name]
                if isinstance(b, Var):
                    return VarRef(b)
                if isinstance(b, LocalMatrix):
                    return b.value()
                return b
        found, value = self.src.lookup(name)
        if found:
            return special.PY_BUILTINS.get(id(value), value) if callable(value) else value
        raise self.error(f"name '{name}' is not defined", node)

    def binding(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def error(self, message: str, node=None) -> CompileError:
        span = self.src.span(node) if node is not None else self.em.span
        return CompileError(message, span, self.em.kernel_name)

    def block(self, stmts, scope=None) -> list:
        self.em.blocks.append([])
        self.scopes.append(scope if scope is not None else {})
        try:
            for s in stmts:
                self.stmt(s)
        finally:
            self.scopes.pop()
        return self.em.blocks.pop()

    # ------------------------------------------------------------ statements
    def stmt(self, node) -> None:
        self.em.span = self.src.span(node)
        visit = getattr(self, f"visit_{type(node).__name__}", None)
        if visit is None:
            raise self.error(f"'{type(node).__name__}' statements are not supported in kernels "
                             "and ti.funcs", node)
        self.guarded(node, visit, node)

    def guarded(self, node, fn, *args):
        """fn(*args), with the Python errors a user's code causes turned into CompileErrors."""
        try:
            return fn(*args)
        except CompileError:
            raise
        except RecursionError:  # nesting through ti.funcs and Python helpers, past the bound
            raise self.error(f"{NESTING_MESSAGE} (here Python's recursion limit, "
                             f"{sys.getrecursionlimit()} calls, came first)", node) from None
        except (TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError,
                KeyError, NotImplementedError, ArithmeticError) as exc:
            raise self.error(str(exc), node) from None

    def body(self, stmts) -> None:
        for s in stmts:
            self.stmt(s)

    def visit_Pass(self, node) -> None:
        pass

    def visit_Expr(self, node) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def visit_Assign(self, node) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node) -> None:
        ann = self.expr(node.annotation)
        value = self.expr(node.value) if node.value is not None else 0
        if isinstance(ann, MatrixType):
            value = ann(value.entries() if isinstance(value, Matrix) else value)
        elif ann is not None:
            value = B.cast(value, to_dtype(ann))
        if isinstance(node.target, ast.Name):
            self.scopes[-1].pop(node.target.id, None)
            self.define(node.target.id, value, fresh=True)
        else:
            self.assign(node.target, value)

    def visit_AugAssign(self, node) -> None:
        target = node.target
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            place = self.expr(target)
            if _has_global(place):
                op = _ATOMIC_AUG.get(type(node.op))
                value = self.expr(node.value)
                if op is not None:
                    atomic(op, place, value, want_result=False)
                    return
                self.assign(target, _BINOPS[type(node.op)](place, value))
                return
        current = self.expr(target)
        self.assign(target, _BINOPS[type(node.op)](current, self.expr(node.value)))

    def assign(self, target, value) -> None:
        if isinstance(target, ast.Name):
            self.define(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = list(value.entries()) if isinstance(value, Matrix) else list(value)
            if len(values) != len(target.elts):
                raise self.error(f"cannot unpack {len(values)} values into {len(target.elts)}")
            values = [self.materialize(v) for v in values]
            for t, v in zip(target.elts, values):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            self.assign_subscript(target, value)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value)
            if isinstance(base, Matrix) and target.attr in "xyzw":
                comp = "xyzw".index(target.attr)
                place = base[comp]
                if isinstance(place, GlobalRef):
                    self.store(place, value)
                elif isinstance(target.value, ast.Name) and \
                        isinstance(self.binding(target.value.id), LocalMatrix):
                    self.assign_component(target.value, comp, value)
                else:
                    raise self.error("this vector component cannot be assigned to", target)
            else:
                setattr(base, target.attr, value)
        else:
            raise self.error("unsupported assignment target", target)

    def materialize(self, value):
        """Copy a value into fresh variables so later assignments cannot change it."""
        if is_dynamic(value) and not isinstance(value, Matrix):
            var = self.em.fresh("t", builder.as_expr(value).dtype)
            self.em.emit(Assign(var, builder.as_expr(value)))
            return VarRef(var)
        if isinstance(value, Matrix):
            return value.map(self.materialize)
        return value

    def define(self, name: str, value, fresh: bool = False) -> None:
        existing = None if fresh else self.binding(name)
        if isinstance(value, (list, tuple)) and value and any(is_dynamic(v) for v in value):
            value = Matrix(list(value))
        if isinstance(existing, Var):
            if isinstance(value, Matrix):
                raise self.error(f"'{name}' is a scalar; cannot assign a vector/matrix to it")
            self.em.emit(Assign(existing, builder.cast(value, existing.dtype)))
        elif isinstance(existing, LocalMatrix):
            entries = Matrix(value).entries() if not _is_scalarish(value) else \
                [value] * len(existing.vars)
            if len(entries) != len(existing.vars):
                raise self.error(f"'{name}' has {len(existing.vars)} components, "
                                 f"the value has {len(entries)}")
            tmps = [self.materialize(e) for e in entries]
            for var, e in zip(existing.vars, tmps):
                self.em.emit(Assign(var, builder.cast(e, var.dtype)))
        elif isinstance(value, Matrix):
            vars_ = []
            for i, e in enumerate(value.entries()):
                e = builder.as_expr(e)
                var = self.em.fresh(f"{name}_{i}", e.dtype)
                self.em.emit(Assign(var, e))
                vars_.append(var)
            self.scopes[-1][name] = LocalMatrix(value, vars_)
        elif is_dynamic(value) or isinstance(value, (int, float)) and not isinstance(value, bool):
            e = builder.as_expr(value)
            var = self.em.fresh(name, e.dtype)
            self.em.emit(Assign(var, e))
            self.scopes[-1][name] = var
        else:
            self.scopes[-1][name] = value  # a compile-time Python value

    def assign_subscript(self, target, value) -> None:
        base_node = target.value
        binding = self.binding(base_node.id) if isinstance(base_node, ast.Name) else None
        if isinstance(binding, LocalMatrix):
            idx = self.expr(target.slice)
            cells = special.dynamic_cells(self, binding, idx, target)
            if cells is None:
                self.assign_component(base_node, idx, value)
            else:
                self.assign_cells(cells, value, lambda i, j, v: self.em.emit(Assign(
                    binding.vars[i * binding.m + j],
                    builder.cast(v, binding.vars[i * binding.m + j].dtype))))
            return
        base = self.expr(base_node)
        if isinstance(base, Matrix) and _has_global(base):
            cells = special.dynamic_cells(self, base, self.expr(target.slice), target)
            if cells is not None:
                self.assign_cells(cells, value, lambda i, j, v: self.store(base.rows[i][j], v))
                return
        place = self.expr(target)
        if isinstance(place, GlobalRef):
            self.store(place, value)
        elif isinstance(place, Matrix) and all(isinstance(p, GlobalRef) for p in place.entries()):
            values = Matrix(value).entries() if not _is_scalarish(value) else \
                [value] * len(place.entries())
            if len(values) != len(place.entries()):
                raise self.error(f"cannot store {len(values)} values into a "
                                 f"{len(place.entries())}-component element")
            values = [builder.as_expr(v) for v in values]  # load all before storing any
            for p, v in zip(place.entries(), values):
                self.store(p, v)
        elif isinstance(place, Matrix) or isinstance(binding, (list, dict)):
            base = self.expr(base_node)
            base[self.expr(target.slice)] = value
        else:
            raise self.error("this subscript cannot be assigned to", target)

    def assign_cells(self, cells: list, value, assign) -> None:
        """`a[k] = value` with a runtime k: the value once, then one guarded assignment per
        cell (`assign(i, j, value)`), the one whose condition holds."""
        value = self.materialize(builder.as_expr(value))
        for cond, (i, j) in cells:
            self.em.blocks.append([])
            assign(i, j, value)
            self.em.emit(If(builder.as_expr(cond), self.em.blocks.pop(), []))

    def store(self, ref: GlobalRef, value) -> None:
        self.em.emit(Store(ref.field, ref.comp, ref.indices, builder.cast(value, ref.dtype)))

    def assign_component(self, base_node, idx, value) -> None:
        lm = self.binding(base_node.id)
        key = idx if isinstance(idx, tuple) else (idx,)
        key = tuple(B.static_int(k) for k in key)
        if len(key) == 1 and not lm.is_vector:
            row = Matrix(value).entries()
            for j, v in enumerate(row):
                var = lm.vars[key[0] * lm.m + j]
                self.em.emit(Assign(var, builder.cast(v, var.dtype)))
            return
        flat = key[0] * lm.m + (key[1] if len(key) > 1 else 0)
        var = lm.vars[flat]
        self.em.emit(Assign(var, builder.cast(value, var.dtype)))

    def visit_If(self, node) -> None:
        cond = self.expr(node.test)
        if not is_dynamic(cond):
            self.body(node.body if cond else node.orelse)
            return
        cond = builder.as_expr(cond)
        before, self.returned = self.returned, False
        then = self.block(node.body)
        then_returns, self.returned = self.returned, False
        orelse = self.block(node.orelse)
        self.returned = before or (then_returns and self.returned)
        self.em.emit(If(cond, then, orelse))

    def visit_While(self, node) -> None:
        if node.orelse:
            raise self.error("while/else is not supported", node)
        self.em.loop_kinds.append("while")
        self.em.blocks.append([])
        self.scopes.append({})
        try:
            cond = self.expr(node.test)
            if is_dynamic(cond):
                self.em.emit(If(B.logical_not(builder.as_expr(cond)), [Break()], []))
            elif not cond:
                self.em.emit(Break())
            self.body(node.body)
        finally:
            self.scopes.pop()
            self.em.loop_kinds.pop()
        self.em.emit(While(self.em.blocks.pop()))

    def visit_For(self, node) -> None:
        loops.lower_for(self, node)

    def visit_Break(self, node) -> None:
        self._check_in_loop(node, "break")
        self.em.emit(Break())

    def visit_Continue(self, node) -> None:
        self._check_in_loop(node, "continue")
        self.em.emit(Continue())

    def _check_in_loop(self, node, what: str) -> None:
        if not self.em.loop_kinds:
            raise self.error(f"'{what}' outside a loop", node)
        if self.em.loop_kinds[-1] == "parallel" and what == "break":
            raise self.error(f"'{what}' cannot be used in the outermost (parallel) loop of a "
                             "kernel; add ti.loop_config(serialize=True) before the loop", node)

    def visit_Assert(self, node) -> None:
        cond = self.expr(node.test)
        msg = ast.unparse(node.msg) if node.msg is not None else ast.unparse(node.test)
        if not is_dynamic(cond):
            if not cond:
                raise self.error(f"assertion failed at compile time: {msg}", node)
            return
        if self.em.debug:
            self.em.emit(AssertStmt(builder.as_expr(cond), msg))

    def visit_Return(self, node) -> None:
        value = self.expr(node.value) if node.value is not None else None
        if self.func_stack:
            raise self.error("internal: returns in ti.func are lowered by the inliner", node)
        if self.em.loop_kinds:
            raise self.error("a kernel can only return from its top level, not inside a loop",
                             node)
        values = _return_values(value)
        types = self.return_type
        if not types and values:
            raise self.error("this kernel returns a value but has no return annotation "
                             "(e.g. `-> ti.f32`)", node)
        if len(types or ()) != len(values):
            raise self.error(f"this kernel returns {len(values)} value(s) but its return "
                             f"annotation declares {len(types or ())}", node)
        self.em.emit(Return([builder.cast(v, t) for v, t in zip(values, types or ())]))
        self.returned = True

    # ------------------------------------------------------------ expressions
    def expr(self, node):
        visit = getattr(self, f"expr_{type(node).__name__}", None)
        if visit is None:
            raise self.error(f"'{type(node).__name__}' expressions are not supported in kernels",
                             node)
        if self.nesting >= MAX_NESTING:
            raise self.error(NESTING_MESSAGE, node)
        self.nesting += 1
        try:
            return visit(node)
        finally:
            self.nesting -= 1

    def expr_Constant(self, node):
        return node.value

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return tuple(self.expr(e) for e in node.elts)

    def expr_List(self, node):
        return [self.expr(e) for e in node.elts]

    def expr_Dict(self, node):
        return {self.expr(k): self.expr(v) for k, v in zip(node.keys, node.values)}

    def expr_BinOp(self, node):
        """A chain `t0 + t1 + ... + tn` nests on the left: followed in a loop, not by
        recursion, so a sum of any length compiles (Python evaluates left to right too)."""
        chain = []
        while isinstance(node, ast.BinOp):
            chain.append(node)
            node = node.left
        value = self.expr(node)
        for link in reversed(chain):
            value = self.guarded(link, self.binop, link, value, self.expr(link.right))
        return value

    def binop(self, node, a, b):
        if isinstance(a, list) and is_dynamic(Matrix(a)):
            a = Matrix(a)
        if isinstance(b, list) and is_dynamic(Matrix(b)):
            b = Matrix(b)
        if _huge_python_int(node.op, a, b):
            raise self.error(
                "this integer constant is far beyond 64 bits (Python would take minutes to "
                "compute it exactly); for wrap-around arithmetic make an operand typed, e.g. "
                "ti.cast(3, ti.i64) ** n", node)
        result = _BINOPS[type(node.op)](a, b)
        if result is NotImplemented:
            raise self.error("unsupported operand types", node)
        return result

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return B.logical_not(v) if is_dynamic(v) else (not v)
        return {ast.USub: operator.neg, ast.UAdd: operator.pos,
                ast.Invert: operator.invert}[type(node.op)](v)

    def expr_BoolOp(self, node):
        """`a and b` / `a or b` have the deciding operand's value, as in Python and Taichi
        ((3 and 5) == 5, (0 or 5) == 5). Every operand is evaluated, as Taichi 1.7.4 does."""
        values = [self.expr(v) for v in node.values]
        result = values[-1]
        for v in reversed(values[:-1]):
            result = _bool_op(v, result, isinstance(node.op, ast.And))
        return result

    def expr_Compare(self, node):
        left = self.expr(node.left)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp)
            r = _CMPOPS[type(op)](left, right)
            result = r if result is None else (
                B.logical_and(result, r) if is_dynamic(r) or is_dynamic(result)
                else (result and r))
            left = right
        return result

    def expr_IfExp(self, node):
        cond = self.expr(node.test)
        if not is_dynamic(cond):
            return self.expr(node.body if cond else node.orelse)
        branches = []
        for part in (node.body, node.orelse):
            self.em.blocks.append([])
            value = self.expr(part)
            if is_dynamic(value) and not isinstance(value, Matrix):
                value = builder.as_expr(value)  # a field element is loaded here, in its branch
            branches.append((self.em.blocks.pop(), value))
        (then, a), (orelse, b) = branches
        if not (then or orelse) or isinstance(a, Matrix) or isinstance(b, Matrix):
            for stmt in then + orelse:
                self.em.emit(stmt)
            return B.select(cond, a, b)
        # Taichi's ifte: only the taken branch runs, and only it is differentiated, so the
        # guarded load in wave.py's `p[t, i, j] if 0 <= i < n else 0` never reads p[t, -1, j]
        dtype = builder.as_expr(B.select(cond, a, b)).dtype
        var = self.em.fresh("ifexp", dtype)
        then.append(Assign(var, builder.cast(a, dtype)))
        orelse.append(Assign(var, builder.cast(b, dtype)))
        self.em.emit(If(builder.as_expr(cond), then, orelse))
        return VarRef(var)

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        if node.attr == "grad" and id(base) in self.em.grad_reads:  # Kernel.with_grad_reads
            return self.em.grad_reads[id(base)]
        try:
            value = getattr(base, node.attr)
        except AttributeError:
            raise self.error(f"'{type(base).__name__}' value has no attribute '{node.attr}'",
                             node) from None
        if (value is None or isinstance(value, Unplaced)) and node.attr in ("grad", "dual") \
                and isinstance(base, Field):
            what = "Gradient" if node.attr == "grad" else "Dual"
            flag = "needs_grad" if node.attr == "grad" else "needs_dual"
            raise self.error(f"{what} {base.name}.{node.attr} has not been placed, check "
                             f"whether `{flag}=True` is set for '{base.name}' (Taichi's "
                             f"words), or call ti.root.lazy_{node.attr}()", node)
        return value

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        index = self.expr(node.slice)
        return special.subscript(self, base, index, node)

    def expr_Call(self, node):
        return special.call(self, node)

    def expr_JoinedStr(self, node):
        return [self.expr(v) for v in node.values]

    def expr_FormattedValue(self, node):
        return self.expr(node.value)

    def expr_Starred(self, node):
        return special.Starred(self.expr(node.value))

    def expr_Lambda(self, node):
        raise self.error("lambdas are not supported in kernels; use a ti.func", node)


def _bool_op(a, b, is_and: bool):
    if not is_dynamic(a):
        return (a and b) if is_and else (a or b)
    if isinstance(a, Matrix) or isinstance(b, Matrix) or _is_truth_value(a) and \
            _is_truth_value(b):  # 0/1 operands: the value is the logical op's
        return B.logical_and(a, b) if is_and else B.logical_or(a, b)
    decided = a != 0
    return B.select(decided, b, a) if is_and else B.select(decided, a, b)


def _return_values(value) -> list:
    """A kernel's return value, flattened: scalars, vector/matrix entries, tuples of them."""
    if value is None:
        return []
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _return_values(v)]
    return value.entries() if isinstance(value, Matrix) else [value]


def _is_truth_value(value) -> bool:
    return isinstance(value, OpExpr) and OPS[value.op].rule is TypeRule.BOOL


def _has_global(value) -> bool:
    if isinstance(value, GlobalRef):
        return True
    return isinstance(value, Matrix) and all(isinstance(x, GlobalRef) for x in value.entries())


def _is_scalarish(value) -> bool:
    return not isinstance(value, (Matrix, list, tuple))


def lower_body(lowerer: Lowerer, stmts) -> list[Task]:
    """Kernel top level: each outermost non-static for loop becomes a parallel task."""
    tasks: list[Task] = []
    serial: list = []
    em = lowerer.em

    def flush():
        nonlocal serial
        if serial:
            tasks.append(Task("serial", serial, span=serial[0].span))
            serial = []

    em.blocks.append(serial)
    for s in stmts:
        em.span = lowerer.src.span(s)
        if isinstance(s, ast.For) and loops.is_parallel_candidate(lowerer, s):
            plan = lowerer.guarded(s, loops.plan_parallel_for, lowerer, s)
            em.blocks.pop()
            flush()
            tasks.append(loops.lower_parallel_for(lowerer, s, plan))
            em.blocks.append(serial)
        else:
            lowerer.stmt(s)
    em.blocks.pop()
    flush()
    return tasks


__all__ = ["Lowerer", "LocalMatrix", "lower_body", "Print", "DType"]
