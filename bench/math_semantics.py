"""Compare scalar math semantics of simrun.lang and Taichi 1.7.4 on edge cases.

    python bench/math_semantics.py            # both modules, prints a table, exits 1 on a diff
    python bench/math_semantics.py --all      # also print the rows that agree

Every case is evaluated three ways per module: in a kernel on runtime arguments (what the
code generator emits), in a kernel on literal constants (compile-time folding) and in Python
scope (only for ti.* functions; operators in Python scope are plain Python). Each module runs
in its own process; cases that may kill a process (integer division by zero, INT_MIN // -1)
run one value per process so a SIGFPE costs one cell, not the table.

tests/test_lang_math_semantics.py pins simrun's values to closed-form expectations; this
script is how those expectations were checked against Taichi (not a test dependency).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999, -2.4999, 0.49999997, -0.49999997, -0.0]
# (name, expression in a and b, dtype of a, dtype of b, values, python-scope form or None,
#  isolate each value in its own process)
CASES = [
    ("round f32", "ti.round({a})", "f32", None, HALVES, "ti.round({a})", False),
    ("round f64", "ti.round({a})", "f64", None, HALVES, None, False),
    ("round ->i32", "ti.round({a}, ti.i32)", "f32", None, HALVES, "ti.round({a}, ti.i32)", False),
    ("floor f32", "ti.floor({a})", "f32", None, [-2.5, -2.0, -0.5, -1e-8, -0.0, 0.5, 2.5],
     "ti.floor({a})", False),
    ("ceil f32", "ti.ceil({a})", "f32", None, [-2.5, -2.0, -0.5, -1e-8, -0.0, 0.5, 2.5],
     "ti.ceil({a})", False),
    ("floor ->i32", "ti.floor({a}, ti.i32)", "f32", None, [-2.5, -0.5, 0.5, 2.5],
     "ti.floor({a}, ti.i32)", False),
    ("ceil ->i32", "ti.ceil({a}, ti.i32)", "f32", None, [-2.5, -0.5, 0.5, 2.5],
     "ti.ceil({a}, ti.i32)", False),
    ("int //", "{a} // {b}", "i32", "i32",
     [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, -3), (0, 3), (-1, 3), (1, -3)], None, False),
    ("int %", "{a} % {b}", "i32", "i32",
     [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, -3), (0, 3), (-1, 3), (1, -3)], None, False),
    ("int /", "{a} / {b}", "i32", "i32", [(7, 2), (-7, 2), (1, 3)], None, False),
    ("float //", "{a} // {b}", "f32", "f32",
     [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (-0.5, 1.0), (5.0, 0.5)], None,
     False),
    ("float %", "{a} % {b}", "f32", "f32",
     [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (-0.5, 1.0), (-1e-8, 1.0),
      (5.0, 0.5)], None, False),
    ("int // float", "{a} // {b}", "i32", "f32", [(7, 2.0), (-7, 2.0)], None, False),
    ("int % float", "{a} % {b}", "i32", "f32", [(7, 2.0), (-7, 2.0)], None, False),
    ("float / 0", "{a} / {b}", "f32", "f32", [(1.0, 0.0), (-1.0, 0.0), (0.0, 0.0)], None, False),
    ("float // 0", "{a} // {b}", "f32", "f32", [(1.0, 0.0), (-1.0, 0.0)], None, False),
    ("float % 0", "{a} % {b}", "f32", "f32", [(1.0, 0.0)], None, False),
    ("int // 0", "{a} // {b}", "i32", "i32", [(7, 0), (-7, 0), (0, 0), (-2147483648, -1)], None,
     True),
    ("int % 0", "{a} % {b}", "i32", "i32", [(7, 0), (-7, 0), (-2147483648, -1)], None, True),
    ("int / 0", "{a} / {b}", "i32", "i32", [(7, 0), (0, 0)], None, True),
    ("int ** int", "{a} ** {b}", "i32", "i32",
     [(2, 10), (-2, 3), (3, 0), (0, 0), (-3, 2), (2, 30), (3, 21)], None, False),
    ("int ** neg int", "{a} ** {b}", "i32", "i32", [(2, -1), (1, -2), (-1, -3)], None, True),
    ("float ** int", "{a} ** {b}", "f32", "i32",
     [(2.0, 3), (-2.0, 3), (-2.0, 2), (2.0, -2), (0.0, 0), (1.5, 0)], None, False),
    ("float ** float", "{a} ** {b}", "f32", "f32",
     [(2.0, 0.5), (-8.0, 2.0), (-2.0, 0.5), (0.0, 0.0), (4.0, -0.5)], None, False),
    ("ti.pow(int, int)", "ti.pow({a}, {b})", "i32", "i32", [(2, 10), (-2, 3)], "ti.pow({a}, {b})",
     False),
    ("ti.pow(float, int)", "ti.pow({a}, {b})", "f32", "i32", [(2.0, 3), (-2.0, 3)],
     "ti.pow({a}, {b})", False),
    ("abs int", "abs({a})", "i32", None, [-5, 5, 0, -2147483647, -2147483648], "ti.abs({a})",
     False),
    ("abs float", "abs({a})", "f32", None, [-2.5, -0.0, 2.5], "ti.abs({a})", False),
    ("cast f32->i32", "ti.cast({a}, ti.i32)", "f32", None,
     [-2.7, 2.7, -0.5, 0.5, -2.5, 2.5, -0.0], "ti.cast({a}, ti.i32)", False),
    ("int(f32)", "int({a})", "f32", None, [-2.7, 2.7, -0.5], None, False),
    ("ti.i32(f32)", "ti.i32({a})", "f32", None, [-2.7, 2.7], "ti.i32({a})", False),
    ("cast f64->i64", "ti.cast({a}, ti.i64)", "f64", None, [-2.7, 2.7, -1e15 - 0.5],
     "ti.cast({a}, ti.i64)", False),
    ("cast i32->i8", "ti.cast({a}, ti.i8)", "i32", None, [300, -129, 127, -128],
     "ti.cast({a}, ti.i8)", False),
    ("cast i32->f32", "ti.cast({a}, ti.f32)", "i32", None, [16777217, -16777217],
     "ti.cast({a}, ti.f32)", False),
    ("cast f32->u8 (UB in C)", "ti.cast({a}, ti.u8)", "f32", None, [300.0, -1.0], None, True),
    ("cast f32->i32 overflow (UB)", "ti.cast({a}, ti.i32)", "f32", None, [3e9, -3e9], None,
     True),
]

DEFAULT = {"f32": "float", "i32": "int"}


def _literal(value, dtype: str) -> str:
    text = repr(float(value)) if dtype.startswith("f") else repr(int(value))
    if text in ("inf", "-inf", "nan"):
        text = f"float('{text}')"
    # a bare literal has the default type (f32 / i32); any other type needs a typed constant
    return f"({text})" if dtype in DEFAULT else f"ti.cast({text}, ti.{dtype})"


def _values(case):
    _, _, ta, tb, values, _, _ = case
    return [v if isinstance(v, tuple) else (v,) for v in values]


def _kernel_source(module: str, selected) -> str:
    lines = [f"import {module} as ti", ""]
    for ci, vi in selected:
        name, expr, ta, tb, _, _, _ = CASES[ci]
        vals = _values(CASES[ci])[vi]
        args = f"a: ti.{ta}" + (f", b: ti.{tb}" if tb else "")
        lines += ["@ti.kernel", f"def rt_{ci}_{vi}({args}) -> ti.f64:",
                  f"    return ti.cast({expr.format(a='a', b='b')}, ti.f64)", ""]
        const = expr.format(a=_literal(vals[0], ta),
                            b=_literal(vals[1], tb) if tb else None)
        lines += ["@ti.kernel", f"def const_{ci}_{vi}() -> ti.f64:",
                  f"    return ti.cast({const}, ti.f64)", ""]
    return "\n".join(lines)


def _fmt(x) -> str:
    return repr(float(x))


def worker(module: str, selected, out_path: str) -> None:
    import importlib.util

    import numpy as np

    if module == "taichi":
        import taichi as ti
    else:
        import simrun.lang as ti
    ti.init(arch=ti.cpu, default_fp=ti.f32, offline_cache=False)
    tmp = tempfile.mkdtemp(prefix=f"sem-{module}-")
    path = os.path.join(tmp, "sem_kernels.py")
    with open(path, "w") as f:
        f.write(_kernel_source(module if module == "taichi" else "simrun.lang", selected))
    spec = importlib.util.spec_from_file_location("sem_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    results = {}

    def record(key, fn):
        results[key] = "<crashed>"  # overwritten unless the process dies
        with open(out_path, "w") as f:
            json.dump(results, f)
        try:
            value = fn()
            results[key] = _fmt(value)
        except Exception as exc:  # noqa: BLE001 - every failure is a table cell
            results[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}"

    np_types = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
    for ci, vi in selected:
        name, expr, ta, tb, _, py, _ = CASES[ci]
        vals = _values(CASES[ci])[vi]
        key = f"{ci}|{vi}"
        rt, const = getattr(mod, f"rt_{ci}_{vi}"), getattr(mod, f"const_{ci}_{vi}")
        record(key + "|kernel", lambda k=rt, v=vals: k(*v))
        record(key + "|const", lambda k=const: k())
        if py:
            a = np_types[ta](vals[0]).item() if ta in np_types else vals[0]
            b = vals[1] if tb else None
            code = py.format(a="a", b="b")
            scope = {"ti": ti, "a": a, "b": b}
            record(key + "|python", lambda c=code, g=scope: eval(c, g))  # noqa: S307
    with open(out_path, "w") as f:
        json.dump(results, f)


def run_module(module: str, selected, tmp: str, tag: str) -> dict:
    out = os.path.join(tmp, f"{module}-{tag}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", module, "--out", out,
           "--select", json.dumps(selected)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    try:
        with open(out) as f:
            results = json.load(f)
    except (OSError, ValueError):
        results = {}
    for key, value in results.items():
        if value == "<crashed>":
            results[key] = f"process died (rc {proc.returncode})"
    if not results and proc.returncode:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        results = {f"{ci}|{vi}|kernel": f"worker failed: {tail[:80]}" for ci, vi in selected}
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker")
    ap.add_argument("--out")
    ap.add_argument("--select")
    ap.add_argument("--all", action="store_true", help="print agreeing rows too")
    ap.add_argument("--json", help="write both modules' results here")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, [tuple(x) for x in json.loads(args.select)], args.out)
        return 0

    safe = [(ci, vi) for ci, c in enumerate(CASES) if not c[6] for vi in range(len(c[4]))]
    risky = [(ci, vi) for ci, c in enumerate(CASES) if c[6] for vi in range(len(c[4]))]
    tmp = tempfile.mkdtemp(prefix="math-semantics-")
    res = {}
    for module in ("simrun", "taichi"):
        r = run_module(module, safe, tmp, "safe")
        for ci, vi in risky:
            r.update(run_module(module, [(ci, vi)], tmp, f"{ci}-{vi}"))
        res[module] = r
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)

    counts = {"same": 0, "differs": 0, "taichi fails": 0, "simrun fails": 0}
    print(f"{'case':<28} {'args':<22} {'where':<7} {'simrun':>16} {'taichi':>16}  verdict")
    for ci, vi in safe + risky:
        name, _, ta, tb, _, _, _ = CASES[ci]
        vals = _values(CASES[ci])[vi]
        for where in ("kernel", "const", "python"):
            key = f"{ci}|{vi}|{where}"
            s, t = res["simrun"].get(key), res["taichi"].get(key)
            if s is None and t is None:
                continue
            verdict = _verdict(s, t)
            counts[verdict] += 1
            if verdict != "same" or args.all:
                shown = ", ".join(repr(v) for v in vals)
                print(f"{name:<28} {shown:<22} {where:<7} {_short(s):>16} {_short(t):>16}  "
                      f"{verdict}")
    print("\n" + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    return 1 if counts["differs"] or counts["simrun fails"] else 0


def _is_value(x) -> bool:
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


def _short(x) -> str:
    if x is None:
        return "(not run)"
    return x if _is_value(x) else x.split(":")[0][:16]


def _verdict(s, t) -> str:
    """same: equal values, or both refuse; taichi fails: Taichi errors or dies where simrun
    gives a value (simrun is more permissive); differs: two different values."""
    if _is_value(s) and _is_value(t):
        return "same" if _close(s, t) else "differs"
    if _is_value(s):
        return "taichi fails"
    if _is_value(t):
        return "simrun fails"
    return "same"


def _close(s: str, t: str) -> bool:
    try:
        x, y = float(s), float(t)
    except ValueError:
        return False
    if math.isnan(x) and math.isnan(y):
        return True
    if x == 0 and y == 0:
        return math.copysign(1, x) == math.copysign(1, y)  # -0.0 is not 0.0
    return x == y or abs(x - y) <= 1e-6 * max(abs(x), abs(y))


if __name__ == "__main__":
    sys.exit(main())
