"""Drop a kernel's writes into fields its caller will not read.

A gradient kernel writes the adjoint of every field it reads that has one, and under forward
mode the tangent of each of those too: the adjoint's H lambda (forward-over-reverse of the
energies) makes dU/dx, dU/dm, dU/dp and their tangents, and reads back only the tangents it
accumulates. The caller names the fields nobody reads (`Kernel.prepare(..., unread=...)`);
this pass removes the stores and atomics into them, and `dead_code` then removes what only
fed those writes (for softened gravity's H lambda, the primal gradient's scatter and the
masses' two gradients). The writes kept compute the same values from the same operations.

Pre: structured IR. Post: no Store, and no Atomic whose old value is unused, targets a field
in `unread`; a field the kernel also reads keeps its writes (a later task may read them back).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..ir.nodes import Atomic, For, If, KernelIR, Load, Store, While, walk


def run(kir: KernelIR, unread: Iterable) -> KernelIR:
    read = {id(s.field) for t in kir.tasks for s in walk(t.body) if isinstance(s, Load)}
    drop = {id(f) for f in unread} - read
    if not drop:
        return kir
    return dataclasses.replace(kir, tasks=[dataclasses.replace(t, body=_block(t.body, drop))
                                           for t in kir.tasks])


def _block(body: list, drop: set) -> list:
    out = []
    for s in body:
        if isinstance(s, (Store, Atomic)) and id(s.field) in drop and \
                getattr(s, "result", None) is None:
            continue
        if isinstance(s, If):
            s = dataclasses.replace(s, then=_block(s.then, drop), orelse=_block(s.orelse, drop))
        elif isinstance(s, (For, While)):
            s = dataclasses.replace(s, body=_block(s.body, drop))
        out.append(s)
    return out
