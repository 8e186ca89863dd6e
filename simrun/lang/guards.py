"""Guard zones around field storage: a write past either end of a field lands in a known
pattern instead of the C heap, and a job can tell that it happened before it reports success.

Without ``debug`` a kernel's index is not checked (checks cost 50-90% on the pair-force rows:
bench/README.md, "Bounds checks"). An out-of-range write then went into whatever lay next to
the field's array: the heap's own bookkeeping, so that the process died of heap corruption
after run.json said "ok". Each field's array is now a view into a buffer with
``pad(row)`` bytes of ``CANARY`` on both sides (4 KiB plus two rows: an index a few rows
off lands there), and ``damaged()`` names the fields whose guards changed. A write further
off is not caught; ``--debug`` finds every one, at its line.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

CANARY = 0x5A  # an f64 of 1.5e127, an i32 of 1.5e9: not a value a kernel writes by chance
_PAGE = 4096
_guarded: dict[int, tuple] = {}  # id(buffer) -> (weakref to buffer, pad, name, generation)


def pad(row_bytes: int) -> int:
    """Guard bytes on each side: a page and two rows, a multiple of 64 (keeps alignment)."""
    return -(-(_PAGE + 2 * row_bytes) // 64) * 64


def zeros(shape: tuple, dtype: np.dtype, name: str, generation: int) -> np.ndarray:
    """np.zeros(shape, dtype) inside a guarded buffer (C order)."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    row = size // shape[0] if shape and shape[0] else size
    margin = pad(row)
    buffer = np.full(size + 2 * margin, CANARY, dtype=np.uint8)
    buffer[margin:margin + size] = 0
    key = id(buffer)
    _guarded[key] = (weakref.ref(buffer, lambda _, key=key: _guarded.pop(key, None)),
                     margin, name, generation)
    return buffer[margin:margin + size].view(dtype).reshape(shape)


def damaged(generation: int | None = None) -> list[str]:
    """Names of the live fields (of ``generation``, all when None) whose guard bytes were
    written, that is: a kernel wrote outside the field."""
    names = []
    for ref, margin, name, gen in list(_guarded.values()):
        buffer = ref()
        if buffer is None or (generation is not None and gen != generation):
            continue
        if (buffer[:margin] != CANARY).any() or (buffer[-margin:] != CANARY).any():
            names.append(name)
    return names
