"""Markdown tables from run.py's results, so the output pastes straight into README.md."""

from timing import format_seconds

ORDER = ("simrun", "taichi")


class Footnotes:
    """Numbered error messages, so table cells stay short and no error is dropped."""

    def __init__(self):
        self.lines: list[str] = []

    def cell(self, module: str, row_name: str, row: dict | None) -> str:
        if row is None:
            return "-"
        if "error" not in row:
            return format_seconds(row.get("median_s"))
        self.lines.append(f"[{len(self.lines) + 1}] {module} `{row_name}`: {row['error']}")
        return f"error [{len(self.lines)}]"


def _row(results: dict, module: str, run: str, name: str) -> dict | None:
    """One benchmark row of one module's run ('default' or 'threads_1'); None if absent."""
    worker = results.get(module, {}).get(run)
    if worker is None:
        return None
    if "init_error" in worker and name not in worker.get("results", {}):
        return {"error": "ti.init failed: " + worker["init_error"]["error"]}
    return worker.get("results", {}).get(name)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def _agreement(a: dict | None, b: dict | None) -> str:
    """Relative difference of the two modules' check values (same input, same program)."""
    if not a or not b or "check" not in a or "check" not in b:
        return "-"
    x, y = a["check"], b["check"]
    rel = abs(x - y) / max(abs(x), abs(y), 1e-30)
    return "equal" if rel == 0 else f"{rel:.1e}"


def _names(results: dict, run: str) -> list[str]:
    """Row names of both modules in run order, each backward row right after its forward."""
    names: list[str] = []
    for module in ORDER:
        for name in results.get(module, {}).get(run, {}).get("results", {}):
            if name not in names:
                names.append(name)
    bases = list(dict.fromkeys(n.removesuffix(".grad") for n in names))
    return sorted(names, key=lambda n: (bases.index(n.removesuffix(".grad")), n.endswith(".grad")))


def main_table(results: dict, notes: Footnotes) -> list[str]:
    lines = [
        "| benchmark | simrun median | taichi median | simrun/taichi | check rel. diff |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in _names(results, "default"):
        s, t = (_row(results, m, "default", name) for m in ORDER)
        s_ok, t_ok = (r if r and "error" not in r else None for r in (s, t))
        ratio = _ratio(s_ok and s_ok["median_s"], t_ok and t_ok["median_s"])
        lines.append(
            f"| {name} | {notes.cell('simrun', name, s)} | {notes.cell('taichi', name, t)} "
            f"| {ratio} | {_agreement(s_ok, t_ok)} |"
        )
    return lines


def grad_table(results: dict) -> list[str]:
    lines = ["| backward | simrun grad/forward | taichi grad/forward |", "|---|---:|---:|"]
    for name in _names(results, "default"):
        if not name.endswith(".grad"):
            continue
        cells = []
        for module in ORDER:
            fwd = _row(results, module, "default", name[: -len(".grad")]) or {}
            bwd = _row(results, module, "default", name) or {}
            cells.append(_ratio(bwd.get("median_s"), fwd.get("median_s")))
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def scaling_table(results: dict, threads_default: dict) -> list[str]:
    lines = [
        "| benchmark | module | 1 thread | default threads | speedup |",
        "|---|---|---:|---:|---:|",
    ]
    for name in _names(results, "threads_1"):
        for module in ORDER:
            one = _row(results, module, "threads_1", name)
            many = _row(results, module, "default", name)
            if one is None and many is None:
                continue
            one_s = one.get("median_s") if one else None
            many_s = many.get("median_s") if many else None
            label = f"{module} ({threads_default.get(module, '?')} thr)"
            lines.append(
                f"| {name} | {label} | {format_seconds(one_s)} | {format_seconds(many_s)} "
                f"| {_ratio(one_s, many_s)} |"
            )
    return lines


def compile_table(results: dict, notes: Footnotes) -> list[str]:
    lines = [
        "| module | start | import | ti.init | first substep (JIT) | steady substep |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for module in ORDER:
        for start in ("cold", "warm"):
            probe = results.get(module, {}).get("compile", {}).get(start)
            if probe is None:
                continue
            if "error" in probe:
                cell = notes.cell(module, f"compile_{start}", probe)
                lines.append(f"| {module} | {start} | {cell} | | | |")
                continue
            cells = " | ".join(
                format_seconds(probe[k])
                for k in ("import_s", "init_s", "first_substep_s", "steady_substep_s")
            )
            lines.append(f"| {module} | {start} | {cells} |")
    return lines


def render(results: dict, threads_default: dict) -> str:
    """All tables plus the numbered error list, as one markdown string."""
    notes = Footnotes()
    parts = ["### Time per call (median)", *main_table(results, notes), ""]
    parts += ["### Backward cost (kernel.grad() / forward)", *grad_table(results), ""]
    if any("threads_1" in results.get(m, {}) for m in ORDER):
        parts += ["### Parallel scaling", *scaling_table(results, threads_default), ""]
    if any("compile" in results.get(m, {}) for m in ORDER):
        parts += ["### Compile time, gravity example (fresh process each)"]
        parts += [*compile_table(results, notes), ""]
    if notes.lines:
        parts += ["### Errors", *notes.lines, ""]
    return "\n".join(parts)
