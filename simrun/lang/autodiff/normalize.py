"""Before reversal: make every control decision a saved variable, and loops break-free.

Post-conditions: each If tests a fresh variable; each For has variable bounds; no Break or
Continue remains except the single exit `if brk: break` ending a While, which carries its
iteration counter in `While.counter`.
"""

from __future__ import annotations

from ..ir import builder
from ..ir.nodes import Assign, Break, Continue, For, If, Var, VarRef, While, walk
from ..ir.ops import Op
from ..types import i32, i64


def _has_jump(stmts) -> bool:
    for s in walk(stmts):
        if isinstance(s, (Break, Continue)):
            return True
    return False


def _own_jumps(stmts) -> bool:
    """Break/Continue that belong to this loop level (not to a nested loop)."""
    for s in stmts:
        if isinstance(s, (Break, Continue)):
            return True
        if isinstance(s, If) and (_own_jumps(s.then) or _own_jumps(s.orelse)):
            return True
    return False


class Normalizer:
    def __init__(self):
        self.new_vars: list = []

    def fresh(self, name, dtype) -> Var:
        v = Var(name, dtype)
        self.new_vars.append(v)
        return v

    def block(self, stmts, flags=None) -> list:
        out: list = []
        for idx, s in enumerate(stmts):
            if isinstance(s, If):
                cv = self.fresh("cond", i32)
                out.append(Assign(cv, builder.cast(builder.make(Op.NE, s.cond, 0), i32),
                                  span=s.span))
                out.append(If(VarRef(cv), self.block(s.then, flags), self.block(s.orelse, flags),
                              span=s.span))
                if flags is not None and (_own_jumps(s.then) or _own_jumps(s.orelse)):
                    rest = self.block(stmts[idx + 1:], flags)
                    if rest:
                        go = self.fresh("go", i32)
                        out.append(Assign(go, builder.make(Op.LOGICAL_AND, builder.make(Op.EQ,
                                   VarRef(flags[0]), 0), builder.make(Op.EQ, VarRef(flags[1]), 0)),
                            span=s.span))
                        out.append(If(VarRef(go), rest, [], span=s.span))
                    return out
            elif isinstance(s, Break):
                out.append(Assign(flags[0], builder.const(1, i32), span=s.span))
                return out
            elif isinstance(s, Continue):
                out.append(Assign(flags[1], builder.const(1, i32), span=s.span))
                return out
            elif isinstance(s, For):
                out.extend(self.for_loop(s))
            elif isinstance(s, While):
                out.extend(self.while_loop(s))
            else:
                out.append(s)
        return out

    def for_loop(self, s: For) -> list:
        if _own_jumps(s.body):
            # a For with break/continue becomes a While that counts its own index
            idx = s.var
            end = self.fresh("end", s.end.dtype)
            pre = [Assign(end, s.end, span=s.span), Assign(idx, s.begin, span=s.span)]
            body = [If(builder.make(Op.GE, VarRef(idx), VarRef(end)), [Break()], [])] + \
                list(s.body)
            loop = While(body + [Assign(idx, VarRef(idx) + 1)], span=s.span)
            loop.bump_after_continue = True
            return pre + self.while_loop(loop)
        bv = self.fresh("begin", s.begin.dtype)
        ev = self.fresh("end", s.end.dtype)
        return [Assign(bv, s.begin, span=s.span), Assign(ev, s.end, span=s.span),
                For(s.var, VarRef(bv), VarRef(ev), self.block(s.body), span=s.span)]

    def while_loop(self, s: While) -> list:
        brk, cont = self.fresh("brk", i32), self.fresh("cont", i32)
        counter = self.fresh("trips", i64)
        body = list(s.body)
        bump = []
        if getattr(s, "bump_after_continue", False):
            bump, body = [body[-1]], body[:-1]
        inner = [Assign(cont, builder.const(0, i32))] + self.block(body, (brk, cont))
        if bump:
            go = self.fresh("go", i32)
            inner += [Assign(go, builder.make(Op.EQ, VarRef(brk), 0)),
                      If(VarRef(go), bump, [])]
        loop = While(inner + [Assign(counter, VarRef(counter) + 1),
                              If(VarRef(brk), [Break()], [])], span=s.span)
        loop.counter = counter
        loop.inner_len = len(inner)
        return [Assign(counter, builder.const(0, i64), span=s.span),
                Assign(brk, builder.const(0, i32), span=s.span), loop]


def normalize(body) -> list:
    """Normalise a task body; a `continue` in the parallel loop skips the rest of the iteration."""
    nz = Normalizer()
    if _own_jumps(body):
        brk, cont = nz.fresh("brk", i32), nz.fresh("cont", i32)
        return [Assign(brk, builder.const(0, i32)), Assign(cont, builder.const(0, i32))] + \
            nz.block(body, (brk, cont))
    return nz.block(body)
