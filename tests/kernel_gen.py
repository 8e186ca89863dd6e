"""Random simrun.lang kernel modules for the frontend fuzz tests (test_fuzz_kernels.py).

``kernel_module(rng)`` writes a module with a few fields and one kernel ``k`` built from a
small grammar: mostly valid Taichi, sometimes a construct simrun.lang must reject (an
undefined name, a string, a wrong index, a Python statement kernels do not support). Every
loop it makes is bounded (constant ranges; ``while`` bodies end in ``break`` and never hold a
``continue``), so a kernel that compiles also finishes, and every field index is in range.
"""

from __future__ import annotations

import random

HEADER = """\
import simrun.lang as ti

x = ti.field(ti.f32, shape=8, needs_grad=True)
n = ti.field(ti.i32, shape=8)
v = ti.Vector.field(2, ti.f32, shape=8, needs_grad=True)
s = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.func
def f(a):
    return a * 2.0


@ti.kernel
def k():
"""

FLOAT_LEAVES = ["1", "2.5", "-3", "0", "0.0", "1e30", "x[i]", "v[i][0]", "v[i].norm()",
                "s[None]", "x[0]", "ti.random()", "v[i].dot(v[0])", "ti.cast(n[i], ti.f32)",
                "f(x[i])", "v[i].normalized()[1]", "v[i].cross(v[0])", "ti.static(2.0)",
                "(ti.Matrix([[1.0, 2.0], [3.0, 4.0]]) @ v[i])[0]", "v[i].outer_product(v[i])[1, 0]",
                "ti.Matrix([[x[i], 1.0], [0.0, 2.0]]).inverse()[0, 0]", "v[i].sum()",
                "ti.Matrix([[x[i], 1.0], [0.0, 2.0]]).determinant()", "v[i].max()", "a"]
INT_LEAVES = ["1", "-3", "0", "7", "n[i]", "i", "ti.cast(x[i], ti.i32)", "2**40", "-2**31",
              "b", "ti.static(3)", "(1 << 30)"]
BAD_LEAVES = ["undefined_name", "'text'", "None", "[1, 2]", "x[i, i]", "x[None]", "s[0]",
              "v[i][5]", "v[i].nrm()", "len(x)", "print", "ti.nope(1)", "(lambda: 1)",
              "{1: 2}", "x", "v[i] @ v[i]", "ti.Matrix([[1, 2], [3]])", "x[i][0]", "s",
              "ti.sin('a')", "n[8.5]", "ti.static(x[i])", "x[i:3]", "*x", "f'{i}'", "...",
              "ti.cast(x[i], float, 3)", "v[i].norm(1, 2)", "ti.Vector([])", "1 if x else 2",
              "f()", "f(1, 2)", "f(v)", "k()", "ti.Matrix([[1.0, 2.0]]) @ v[i]", "v[i][i]",
              "v[i].inverse()", "ti.static(n[i])", "x[ti.random()]", "ti.random(ti.i32) % 0",
              "ti.Vector([1, 2]) + ti.Vector([1, 2, 3])", "v[i] < v[0]", "v[i] and 1"]
UNARY = ["-{}", "ti.sin({})", "ti.sqrt({})", "abs({})", "ti.floor({})", "ti.exp({})",
         "ti.log({})", "float({})", "not {}", "ti.tanh({})", "+{}"]
INT_UNARY = ["-{}", "abs({})", "~{}", "int({})"]
BINARY = ["{} + {}", "{} - {}", "{} * {}", "{} / {}", "{} // {}", "{} % {}", "{} ** {}",
          "ti.max({}, {})", "ti.min({}, {})", "{} < {}", "{} == {}", "{} and {}", "{} or {}",
          "ti.atan2({}, {})", "{} != {}", "{} >= {}"]
INT_BINARY = ["{} + {}", "{} - {}", "{} * {}", "{} // {}", "{} % {}", "{} & {}", "{} | {}",
              "{} ^ {}", "({} << 3) + 0 * {}", "({} >> 2) + 0 * {}", "ti.max({}, {})",
              "ti.min({}, {})"]
# Shifts by a fixed small amount only: a shift by the bit width or more is undefined (LLVM
# poison); see the report of issue 20's fuzzing.
SIMPLE_STATEMENTS = [
    "x[i] = {e}", "x[i] += {e}", "s[None] += {e}", "n[i] = {ie}", "v[i] = ti.Vector([{e}, {e}])",
    "a = {e}", "a += {e}", "b = {ie}", "ti.atomic_add(s[None], {e})", "pass", "x[i] = v[i][1]",
    "v[i][0] -= {e}", "s[None] = {e}", "x[{ie} % 8] += {e}", "n[i] += {ie}",
]
BAD_STATEMENTS = [
    "print({e})", "assert {e}", "del a", "raise ValueError('no')", "global x", "import math",
    "x = 1", "i = 2", "yield 1", "a, b = 1", "a: int = 1.5", "x[i] = 'text'", "v[i] = 1, 2",
    "s[None] = v[i]", "nonlocal_call()", "a = b = {e}", "x[i] @= {e}", "lambda: 1",
    "with open('f') as f: pass", "try:\n    pass\nexcept Exception:\n    pass",
    "def inner():\n    pass", "class C:\n    pass", "return {e}", "return",
]


def _expr(rng: random.Random, depth: int, bad: float, ints: bool = False) -> str:
    if depth <= 0 or rng.random() < 0.3:
        if rng.random() < bad:
            return rng.choice(BAD_LEAVES)
        return rng.choice(INT_LEAVES if ints else FLOAT_LEAVES)
    if rng.random() < 0.4:
        unary = rng.choice(INT_UNARY if ints else UNARY)
        return "(" + unary.format(_expr(rng, depth - 1, bad, ints)) + ")"
    if rng.random() < 0.1:
        return (f"({_expr(rng, depth - 1, bad, ints)} if {_expr(rng, depth - 1, bad)} > 0 "
                f"else {_expr(rng, depth - 1, bad, ints)})")
    left, right = _expr(rng, depth - 1, bad, ints), _expr(rng, depth - 1, bad, ints)
    return "(" + rng.choice(INT_BINARY if ints else BINARY).format(left, right) + ")"


def _indent(text: str, level: int) -> str:
    return "".join("    " * level + line + "\n" for line in text.splitlines())


def _block(rng: random.Random, depth: int, bad: float, in_loop: bool, in_while: bool) -> str:
    lines = [_statement(rng, depth, bad, in_loop, in_while) for _ in range(rng.randint(1, 3))]
    return "\n".join(lines)


def _statement(rng: random.Random, depth: int, bad: float, in_loop: bool,
               in_while: bool) -> str:
    roll = rng.random()
    e = lambda: _expr(rng, 2, bad)  # noqa: E731
    if depth > 0 and roll < 0.12:
        return (f"if {e()} > 0:\n{_indent(_block(rng, depth - 1, bad, in_loop, in_while), 1)}"
                + (f"else:\n{_indent(_block(rng, depth - 1, bad, in_loop, in_while), 1)}"
                   if rng.random() < 0.5 else "")).rstrip("\n")
    if depth > 0 and roll < 0.18:
        body = _block(rng, depth - 1, bad, True, False)
        return f"for j in range({rng.randint(0, 3)}):\n{_indent(body, 1)}".rstrip("\n")
    if depth > 0 and roll < 0.22:
        body = _block(rng, depth - 1, bad, True, True) + "\nbreak"
        return f"while {e()} > 0:\n{_indent(body, 1)}".rstrip("\n")
    if in_loop and not in_while and roll < 0.25:
        return rng.choice(["continue", "break"])
    bad_one = rng.random() < bad
    template = rng.choice(BAD_STATEMENTS if bad_one else SIMPLE_STATEMENTS)
    return template.format(e=e(), ie=_expr(rng, 2, bad, ints=True))


def kernel_source(seed: int, bad: float = 0.15) -> str:
    """A whole module (``HEADER`` + the body of ``k``), deterministic in ``seed``."""
    rng = random.Random(seed)
    prelude = "a = 0.0\nb = 0\n"  # locals the statements may update
    loop = rng.choice(["for i in x:", "for i in range(8):", "for i, j2 in ti.ndrange(8, 2):",
                       "for i in ti.static(range(2)):", "for i in v:", ""])
    body = _block(rng, 2, bad, in_loop=bool(loop), in_while=False)
    if loop:
        body = prelude + loop + "\n" + _indent(body, 1)
    else:
        body = prelude + "i = 0\n" + body
    return HEADER + _indent(body, 1)


LONG_HEADER = """\
import simrun.lang as ti

x = ti.field(ti.f64, shape={n}, needs_grad=True)
out = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def k():
"""


def long_literal_source(seed: int, n_x: int = 16, longest: tuple = (1000, 500)
                        ) -> tuple[str, list]:
    """A module whose kernel `k` sets out[None] from one long expression (issue 29's "long
    literals"): a sum of 100 to `longest[0]` terms written out, or a ti.Vector literal of 50
    to `longest[1]` of them, summed or dotted with itself. Returns the source and its terms, each
    (kind, c, j, k) for c x_j, c x_j x_k or c sin(x_j), so a test can compute the value and
    gradient with NumPy; `squared` when the vector is dotted with itself."""
    rng = random.Random(seed)
    terms = []
    n_sum, n_vector = longest
    for _ in range(rng.randint(100, n_sum) if rng.random() < 0.5 else rng.randint(50, n_vector)):
        kind = rng.choice(["lin", "prod", "sin"])
        terms.append((kind, round(rng.uniform(-2, 2), 4), rng.randrange(n_x), rng.randrange(n_x)))
    text = {"lin": "{c} * x[{j}]", "prod": "{c} * x[{j}] * x[{k}]", "sin": "ti.sin(x[{j}]) * {c}"}
    written = [text[kind].format(c=c, j=j, k=k) for kind, c, j, k in terms]
    shape = rng.choice(["sum", "vector_sum", "vector_dot"]) if len(terms) <= n_vector else "sum"
    if shape == "sum":
        body = "out[None] = " + " + ".join(written)
    else:
        body = "w = ti.Vector([" + ", ".join(written) + "])\n"
        body += "out[None] = " + ("w.sum()" if shape == "vector_sum" else "w.dot(w)")
    return LONG_HEADER.format(n=n_x) + _indent(body, 1), [shape, *terms]
