"""Benchmark simrun.lang against Taichi on CPU, one subprocess per module, and print tables.

    python bench/run.py --module both [--json bench_results.json]

Each module runs in its own worker process (worker.py): all benchmarks at the default thread
count, then the large kernels with cpu_max_num_threads=1 for parallel scaling; two fresh
processes per module measure cold and warm compile time (compile_probe.py). A crash, hang
or error in one benchmark is recorded for that row and the run goes on with the rest.
"""

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

from programs import BENCHMARKS, SCALING_BENCHMARKS
from report import render

HERE = os.path.dirname(os.path.abspath(__file__))


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _exit_reason(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def _stderr_tail(path: str, lines: int = 3) -> str:
    """Last stderr lines of a dead worker, prefixed for appending to an error message."""
    try:
        with open(path, errors="replace") as f:
            tail = [ln.strip() for ln in f.read().splitlines() if ln.strip()][-lines:]
    except OSError:
        return ""
    return "; stderr: " + " | ".join(tail) if tail else ""


def _watch(proc: subprocess.Popen, out_path: str, timeout_s: float) -> str | None:
    """Wait for the worker; kill it if one benchmark runs past ``timeout_s``."""
    while proc.poll() is None:
        time.sleep(0.5)
        progress = _read_json(out_path)
        started = progress.get("started")
        if progress.get("current") and started and time.time() - started > timeout_s:
            proc.kill()
            proc.wait()
            return f"timed out after {timeout_s:g} s"
    return None


def run_worker(module: str, names: list[str], extra: list[str], args, tmp: str) -> dict:
    """Run worker.py until every name has a row, restarting it after a crash or hang."""
    merged: dict = {"module": module, "results": {}}
    remaining = list(names)
    attempt = 0
    while remaining:
        attempt += 1
        out = os.path.join(tmp, f"{module}{''.join(extra)}-{attempt}.json")
        err = out + ".stderr"
        cmd = [
            sys.executable,
            os.path.join(HERE, "worker.py"),
            "--module",
            module,
            "--out",
            out,
            "--only",
            ",".join(remaining),
            *extra,
            *args.worker_flags,
        ]
        with open(err, "w") as err_file:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file)
            hung = _watch(proc, out, args.bench_timeout)
        progress = _read_json(out)
        merged.update({k: v for k, v in progress.items() if k not in ("results", "current")})
        merged["results"].update(progress.get("results", {}))
        if "init_error" in progress:
            for name in remaining:
                merged["results"].setdefault(
                    name, {"error": "ti.init failed: " + progress["init_error"]["error"]}
                )
            break
        current = progress.get("current")
        if current:  # the worker died or hung inside this benchmark
            reason = hung or _exit_reason(proc.returncode)
            merged["results"][current] = {
                "error": f"worker {reason} during this benchmark{_stderr_tail(err)}"
            }
            if current == "<init>":
                break
        elif proc.returncode != 0:
            break
        done = {n.removesuffix(".grad") for n in merged["results"]}
        left = [n for n in remaining if n not in done]
        if left == remaining:  # no progress: never loop forever on a broken worker
            for name in left:
                merged["results"][name] = {
                    "error": f"worker {_exit_reason(proc.returncode)} "
                    f"before this benchmark{_stderr_tail(err)}"
                }
            break
        remaining = left
    merged.pop("started", None)
    return merged


def run_compile_probe(module: str, tmp: str) -> dict:
    """Cold then warm process sharing one fresh on-disk cache directory."""
    cache_dir = tempfile.mkdtemp(prefix=f"cache-{module}-", dir=tmp)
    env = dict(os.environ, SIMRUN_CACHE_DIR=cache_dir, XDG_CACHE_HOME=cache_dir)
    probes = {}
    for start in ("cold", "warm"):
        out = os.path.join(tmp, f"compile-{module}-{start}.json")
        cmd = [
            sys.executable,
            os.path.join(HERE, "compile_probe.py"),
            "--module",
            module,
            "--cache-dir",
            cache_dir,
            "--out",
            out,
        ]
        began = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        result = _read_json(out)
        if not result:
            result = {
                "error": f"probe {_exit_reason(proc.returncode)}; "
                f"stderr: {' | '.join(proc.stderr.strip().splitlines()[-3:])}"
            }
        result["process_wall_s"] = time.perf_counter() - began
        probes[start] = result
    return probes


def _git_revision() -> str:
    """HEAD plus a dirty mark: simrun changes fast, so a table must say which code it timed."""

    def git(*cmd: str) -> str:
        return subprocess.run(["git", *cmd], cwd=HERE, capture_output=True, text=True).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
        dirty = bool(git("status", "--porcelain", "--", "../simrun").strip())
    except OSError:
        return "unknown"
    return head + (" + uncommitted simrun changes" if dirty else "")


def machine_info() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "git": _git_revision(),
        "load_avg_before": os.getloadavg()[0],
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", choices=["simrun", "taichi", "both"], default="both")
    parser.add_argument("--json", help="also write all results to this JSON file")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--reps", type=int, default=9, help="samples per benchmark (median)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--min-sample", type=float, default=0.02, help="seconds per sample")
    parser.add_argument("--quick", action="store_true", help="small sizes, smoke test only")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument(
        "--bench-timeout",
        type=float,
        default=600.0,
        help="seconds before a single benchmark is killed",
    )
    args = parser.parse_args(argv)
    args.worker_flags = [
        "--reps",
        str(args.reps),
        "--warmup",
        str(args.warmup),
        "--min-sample",
        str(args.min_sample),
    ] + (["--quick"] if args.quick else [])
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    modules = ["simrun", "taichi"] if args.module == "both" else [args.module]
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        sys.exit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    scaling = [n for n in SCALING_BENCHMARKS if n in names]
    results: dict = {"meta": machine_info()}
    with tempfile.TemporaryDirectory(prefix="simrun-bench-") as tmp:
        for module in modules:
            print(f"[bench] {module}: default threads ...", file=sys.stderr, flush=True)
            entry = {"default": run_worker(module, names, [], args, tmp)}
            if scaling and not args.skip_scaling:
                print(f"[bench] {module}: 1 thread ...", file=sys.stderr, flush=True)
                entry["threads_1"] = run_worker(
                    module, scaling, ["--threads", "1", "--forward-only"], args, tmp
                )
            if not args.skip_compile:
                print(f"[bench] {module}: compile probes ...", file=sys.stderr, flush=True)
                entry["compile"] = run_compile_probe(module, tmp)
            results[module] = entry
    meta = results["meta"]
    meta["load_avg_after"] = os.getloadavg()[0]
    versions = ", ".join(f"{m} {results[m]['default'].get('version', '?')}" for m in modules)
    print(
        f"CPU: {meta['cpu']}, {meta['cores']} cores; Python {meta['python']}; {versions}; "
        f"git {meta['git']}; {'quick sizes' if args.quick else 'full sizes'}, "
        f"median of {args.reps}; load avg {meta['load_avg_before']:.1f} before, "
        f"{meta['load_avg_after']:.1f} after\n"
    )
    print(render(results, {m: meta["cores"] for m in modules}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
