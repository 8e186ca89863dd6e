"""DiffTaichi's example programs, unmodified, under Taichi 1.7.4 and under `import taichi` =
simrun.lang: the first losses, their relative difference, and the time per iteration.

    python bench/difftaichi_table.py --difftaichi-repo /path/to/difftaichi   # clone or .git
    python bench/difftaichi_table.py --difftaichi-repo R --only wave electric --module simrun

The examples are extracted from the repository (never committed here) into a temporary
folder and each runs in its own process, headless, with these shims outside the example:
- `import taichi` is simrun.lang for `simrun` (the same shim as taichi_conformance.py) and
  the installed wheel for `taichi` (`pip install -e '.[bench]'`);
- both run on the CPU: `TI_ARCH=x64` overrides the examples' `arch=ti.gpu` (Taichi probing
  for a GPU API crashes on this machine; simrun has the CPU only);
- `ti.GUI` never opens a window and draws only the frames an example saves to a file
  (`show_gui=False` for both; `gui.show()` alone then draws nothing, as in Taichi); `gui.line`
  gets its points as floats (rigid_body passes 2x1 arrays, which Taichi 1.7.4's binding
  refuses under numpy 2); liquid's `ti.clear_all_gradients` is Taichi 1.7.4's
  `ti.ad.clear_all_gradients`; `cv2.imshow`/`waitKey`/`imwrite` do nothing (cv2 is
  opencv-python-headless);
- `random` and `numpy.random` are seeded (0) before the example starts, so examples that draw
  their initial weights unseeded draw the same ones under both modules; diffmpm3d draws its
  weights with `ti.randn` in a kernel, so both get the same seeded numpy draw instead, set
  at its first `clear_all_gradients`;
- each iteration's loss is recorded when `ti.ad.Tape` exits (after the backward pass), or,
  for the examples that differentiate by hand (diffmpm3d, liquid), from the line the example
  prints; the process ends after `--losses` of them. Time per iteration is the median gap
  between consecutive losses (the first loss, which pays for compiling, is not a gap's end).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from taichi_conformance import SHIM, _git_dir  # noqa: E402

# example -> (argv, where its losses come from: "tape" or "print")
EXAMPLES: dict[str, tuple[list[str], str]] = {
    "mass_spring": (["2", "train", "--iters", "6"], "tape"),
    "mass_spring_simple": ([], "tape"),
    "mass_spring_interactive": (["2", "--iters", "6"], "tape"),
    "rigid_body": (["1", "train"], "tape"),
    "billiards": ([], "tape"),
    "electric": ([], "tape"),
    "wave": (["--iters", "6"], "tape"),
    "smoke_taichi": (["--iters", "6"], "tape"),
    "smoke_taichi_cpu": (["--iters", "6"], "tape"),
    "diffmpm": (["--iters", "6"], "tape"),
    "diffmpm_simple": ([], "tape"),
    "diffmpm_checkpointing": (["--iters", "6"], "tape"),
    "diffmpm3d": (["--iters", "6"], "print"),
    "liquid": ([], "print"),
    "misc/rigid_body_toi": ([], "tape"),
    "misc/rigid_body_discountinuity": ([], "tape"),
}

HEAVY = {"diffmpm3d", "liquid"}  # tens of seconds per iteration: three losses, two gaps
# Taichi 1.7.4 compiles liquid's and diffmpm3d's p2g.grad for 9 to 15 minutes on 2 vCPUs
# (bench/README.md): their runs get this long unless --timeout says otherwise
HEAVY_TIMEOUT = 2400.0

# Runs inside the example's process: shims, then the example as __main__.
RUNNER = r'''
import json, os, random, re, sys, time
import numpy as np

random.seed(0)
np.random.seed(0)
import cv2
cv2.imshow = lambda *a, **k: None
cv2.waitKey = lambda *a, **k: -1
cv2.imwrite = lambda *a, **k: True
import taichi as ti

MODULE, EXAMPLE, SOURCE, WANT, LOG = sys.argv[1:6]
WANT = int(WANT)
events = []
example_globals = {"__name__": "__main__", "__file__": os.path.abspath(EXAMPLE + ".py")}


def record(loss):
    events.append((time.perf_counter(), float(loss)))
    with open(LOG, "w") as f:
        json.dump(events, f)
    if len(events) >= WANT:
        sys.stdout.flush()
        os._exit(0)


class HeadlessGUI(ti.GUI):  # both: frames go only where show(file) names a file
    def __init__(self, *args, **kwargs):
        kwargs["show_gui"] = False
        super().__init__(*args, **kwargs)

    def line(self, begin, end, *args, **kwargs):  # rigid_body passes 2x1 columns
        flat = lambda p: [float(c) for c in np.asarray(p, dtype=float).reshape(-1)]
        return super().line(flat(begin), flat(end), *args, **kwargs)


ti.GUI = HeadlessGUI
if MODULE == "taichi":
    ti.clear_all_gradients = ti.ad.clear_all_gradients  # liquid's pre-1.0 name

if SOURCE == "tape":
    exit_tape = ti.ad.Tape.__exit__

    def __exit__(self, *exc):
        out = exit_tape(self, *exc)
        if exc[0] is None:
            record(self.loss[None])
        return out
    ti.ad.Tape.__exit__ = __exit__
else:
    class Tee:
        pattern = re.compile(r"loss\s*=\s*([-+0-9.eE]+|nan|inf)")

        def __init__(self, stream):
            self.stream, self.line = stream, ""

        def write(self, text):  # print() writes its arguments one by one: scan whole lines
            self.stream.write(text)
            self.line += text
            while "\n" in self.line:
                line, self.line = self.line.split("\n", 1)
                match = self.pattern.search(line)
                if match:
                    record(match.group(1))
            return len(text)

        def __getattr__(self, name):
            return getattr(self.stream, name)
    sys.stdout = Tee(sys.stdout)

if EXAMPLE == "diffmpm3d":  # its weights come from ti.randn in a kernel: same draw for both
    clear = ti.ad.clear_all_gradients

    def clear_all_gradients(*args, **kwargs):
        weights = example_globals["weights"]
        if not getattr(weights, "_bench_seeded", False):
            weights.from_numpy(np.random.RandomState(0).randn(*weights.shape) * 0.01)
            weights._bench_seeded = True
        return clear(*args, **kwargs)
    ti.ad.clear_all_gradients = clear_all_gradients

sys.argv = [EXAMPLE + ".py"] + sys.argv[6:]
sys.path.insert(0, os.getcwd())
code = compile(open(EXAMPLE + ".py").read(), EXAMPLE + ".py", "exec")
exec(code, example_globals)
'''


def extract(repo: Path, dest: Path, ref: str) -> Path:
    """The examples folder at `ref` (a clone or a bare git directory) under dest."""
    archive = subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "archive", ref,
                              "examples"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "examples"


def run_example(module: str, name: str, examples: Path, shim: Path, losses: int,
                timeout: float) -> dict:
    """One example under one module: {losses, seconds_per_iteration, status, tail}."""
    argv, source = EXAMPLES[name]
    losses = min(losses, 3) if name in HEAVY else losses
    log = examples / f"{module}-{name.replace('/', '-')}.json"
    env = {**os.environ, "TI_LOG_LEVEL": "error", "MPLBACKEND": "Agg", "TI_ARCH": "x64",
           "SIMRUN_GUI_HEADLESS": "1", "SIMRUN_GUI_DIR": str(examples / "frames"),
           "PYTHONUNBUFFERED": "1"}
    if module == "simrun":
        env["PYTHONPATH"] = os.pathsep.join([str(shim), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-c", RUNNER, module, name, source, str(losses), str(log), *argv]
    try:
        done = subprocess.run(cmd, cwd=examples, env=env, capture_output=True, text=True,
                              timeout=timeout)
        status, tail = ("ok" if done.returncode == 0 else f"exit {done.returncode}",
                        (done.stdout + done.stderr)[-600:])
    except subprocess.TimeoutExpired as err:
        status, tail = f"timeout {timeout:.0f}s", str(err.stdout or "")[-300:]
    events = json.loads(log.read_text()) if log.exists() else []
    gaps = sorted(b[0] - a[0] for a, b in zip(events, events[1:]))
    if len(events) < losses and status == "ok":
        status = f"ended after {len(events)} losses"
    return {"losses": [e[1] for e in events], "status": status, "tail": tail,
            "seconds_per_iteration": gaps[len(gaps) // 2] if gaps else None}


def table(results: dict[str, dict[str, dict]]) -> str:
    """Markdown rows: example, first three losses on each, worst relative difference, times."""
    rows = ["| example | Taichi losses 1-3 | simrun losses 1-3 | max rel. diff | Taichi s/iter "
            "| simrun s/iter | Taichi/simrun |", "|---|---|---|---|---|---|---|"]
    for name, by_module in results.items():
        t, s = by_module.get("taichi", {}), by_module.get("simrun", {})
        tl, sl = t.get("losses", [])[:3], s.get("losses", [])[:3]
        rel = (max(abs(a - b) / max(abs(a), 1e-300) for a, b in zip(tl, sl))
               if tl and len(tl) == len(sl) else None)
        ts, ss = t.get("seconds_per_iteration"), s.get("seconds_per_iteration")
        rows.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            name, _losses(t), _losses(s), "-" if rel is None else f"{rel:.1e}",
            "-" if ts is None else f"{ts:.3f}", "-" if ss is None else f"{ss:.3f}",
            f"{ts / ss:.2f}" if ts and ss else "-"))
    return "\n".join(rows)


def _losses(result: dict) -> str:
    if not result:
        return "-"
    text = ", ".join(f"{v:.6g}" for v in result["losses"][:3])
    return text if result["status"] == "ok" else f"{text} ({result['status']})".strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--difftaichi-repo", type=Path, required=True)
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--module", choices=("simrun", "taichi", "both"), default="both")
    parser.add_argument("--only", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--losses", type=int, default=4,
                        help="iterations to run (the first three losses are compared)")
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds per run (default 900; {HEAVY_TIMEOUT:.0f} for "
                             f"{', '.join(sorted(HEAVY))})")
    parser.add_argument("--json", type=Path, help="write every run's result here")
    args = parser.parse_args()
    modules = ("taichi", "simrun") if args.module == "both" else (args.module,)
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        examples = extract(args.difftaichi_repo, Path(tmp), args.ref)
        shim = Path(tmp) / "_shim"
        (shim / "taichi").mkdir(parents=True)
        (shim / "taichi" / "__init__.py").write_text(SHIM)
        for name in args.only:
            for module in modules:
                timeout = args.timeout or (HEAVY_TIMEOUT if name in HEAVY else 900.0)
                res = run_example(module, name, examples, shim, args.losses, timeout)
                results.setdefault(name, {})[module] = res
                print(f"{name:24s} {module:7s} {res['status']:12s} losses {res['losses']} "
                      f"s/iter {res['seconds_per_iteration']}", flush=True)
                if res["status"] != "ok":
                    print("    " + res["tail"].replace("\n", "\n    "), flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
