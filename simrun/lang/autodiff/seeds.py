"""Gradient seeds loaded once per task: a reverse pass reads dU/dU (U.grad[None]) where it
reverses `U[None] += e`, inside the pair loop and under its cutoff test. LLVM cannot prove
such a conditional load safe to run unconditionally, so the vectorised pair loop gathered
U.grad lane by lane under the cutoff's mask, every iteration: as dear as gathering a
position. A 0-D gradient the task never writes holds one value for the whole launch, so it
is loaded once at the top of the task and the loop reads a local.

Pre: a reverse task body. Post: every load of a 0-D gradient field that no statement of the
body writes reads, instead, a local loaded from it before the body's first statement.
"""

from __future__ import annotations

import dataclasses

from ..ir.nodes import Assign, Atomic, For, If, Load, Store, Var, VarRef, walk


def hoist_seed_loads(body: list) -> list:
    written = {id(s.field) for s in walk(body) if isinstance(s, (Store, Atomic))}
    seeds: dict = {}

    def seed(s: Load) -> Var:
        key = (id(s.field), s.comp)
        if key not in seeds:
            seeds[key] = Load(Var("seed", s.var.dtype), s.field, s.comp, (), span=s.span)
        return seeds[key].var

    def visit(stmts: list) -> list:
        out = []
        for s in stmts:
            if isinstance(s, Load) and not s.indices and id(s.field) not in written \
                    and getattr(s.field, "role", "primal") == "grad":
                out.append(Assign(s.var, VarRef(seed(s)), span=s.span))
            elif isinstance(s, If):
                out.append(dataclasses.replace(s, then=visit(s.then), orelse=visit(s.orelse)))
            elif isinstance(s, For):
                out.append(dataclasses.replace(s, body=visit(s.body)))
            else:
                out.append(s)  # (a While keeps its loads: its body carries inner_len)
        return out

    new = visit(body)
    return list(seeds.values()) + new
