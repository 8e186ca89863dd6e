"""Where a task's vector code should be narrower than the CPU's widest: a serial loop that
gathers, i.e. indexes a field by a value it loaded from a field (a neighbour row's
``x[nb[i, k + 1]]``, and its reverse pass's scatter to the same place).

On AMD Zen 4 the 512-bit gathers and scatters that LLVM emits for such loops are slower
than AVX2's 256-bit gathers and scalar stores. Measured with `bench/pair_cycles.py` (one
thread, ns per pair), the LJ list's pair loop:
- fused U and forces: 4.86 (AVX-512) against 3.73 (AVX2);
- forward: 2.00 against 1.56.

All-pairs gravity, whose loads are contiguous, is faster with 512 bits: 0.95 against 1.22.

So on those CPUs a task with such a loop is compiled with AVX-512 turned off (a function's
"target-features" attribute, which LLVM's vectoriser and code generator both follow), and
every other task keeps the host's features. Elsewhere nothing changes: no other CPU has
been measured.
"""

from __future__ import annotations

from ..ir.nodes import Assign, Atomic, For, Load, Store, expr_vars, walk

NARROW_GATHER_CPUS = frozenset({"znver4", "znver5"})  # LLVM's names of AMD's AVX-512 cores


def gathers(task) -> bool:
    """Whether a serial loop of the task indexes a field by a value loaded from a field in
    that loop (directly or through values computed from it)."""
    for loop in (s for s in walk(task.body) if isinstance(s, For)):
        body = list(walk(loop.body))
        loaded = {s.var for s in body if isinstance(s, Load)}
        grown = True
        while grown:  # j = nb[i, k + 1], then e.g. j2 = j - n
            grown = False
            for s in body:
                if isinstance(s, Assign) and s.var not in loaded and \
                        any(v in loaded for v in expr_vars(s.value)):
                    loaded.add(s.var)
                    grown = True
        for s in body:
            if isinstance(s, (Load, Store, Atomic)) and \
                    any(v in loaded for i in s.indices for v in expr_vars(i)):
                return True
    return False


def narrow_features(cpu: str, features: str) -> str | None:
    """The host's feature string with AVX-512 off, on a CPU where gathering loops run
    faster so; None elsewhere."""
    flags = features.split(",")
    if cpu not in NARROW_GATHER_CPUS or "+avx512f" not in flags:
        return None
    return ",".join("-" + f[1:] if f[1:].startswith("avx512") or f[1:] == "evex512" else f
                    for f in flags)


def with_features(module_text: str, functions: list[str], features: str) -> str:
    """The module's text with a "target-features" attribute on each named function."""
    lines = module_text.split("\n")
    wanted = {f'@"{name}"(' for name in functions}
    for n, line in enumerate(lines):
        if line.startswith("define ") and any(w in line for w in wanted):
            lines[n] = f'{line} "target-features"="{features}"'
    return "\n".join(lines)
