"""DiffTaichi's programs under Taichi 1.7.4 beside their scenes under `simrun optimize`, from
the same initial parameters: both loss curves and the time per iteration (issue 46, item 4).

    python bench/difftaichi_scenes.py wave                    # the original's iteration count
    python bench/difftaichi_scenes.py wave --iterations 20 --json out.json

The originals are read from a DiffTaichi checkout (`--difftaichi`, default
/work/difftaichi/examples; never copied into this repository) and run in a temporary folder
by a Python that has Taichi 1.7.4 (`--taichi-python`, default /work/peers/bin/python), on
the CPU (TI_ARCH=x64), headless: `cv2` and `imageio` are small stand-ins that read our
images with Pillow (our target image in place of the original's) and show or write nothing.
Each original's loss lines are timed as it prints them; the time per iteration is the median
gap between consecutive losses (the first, which pays for compiling, is no gap's end), and
the scene's the median gap of loss.csv's `wall_s`.

SCENES maps a scene's name to one self-contained function (iterations, options) -> result
(the helpers below run an original or a scene); other scenes add their entries there.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SCENE_DIR = REPO / "simrun" / "scenes"
LOSS = re.compile(r"[Ll]oss\s*=?\s*([-+0-9.eE]+|nan|inf)")

# Runs inside the original's process (Taichi 1.7.4): stand-ins, timed loss lines, the program.
RUNNER = r'''
import builtins, json, os, runpy, sys, time, types
import numpy as np
from PIL import Image

EXAMPLE, LOG = sys.argv[1], sys.argv[2]
lines, _print = [], builtins.print


def timed_print(*args, **kwargs):
    text = " ".join(map(str, args))
    if "oss" in text:
        lines.append([time.perf_counter(), text])
        with open(LOG, "w") as fh:
            json.dump(lines, fh)
    _print(*args, **kwargs)


def nothing(*args, **kwargs):
    return None


def resize(img, dsize=None, fx=None, fy=None, **kwargs):
    if dsize is not None and tuple(dsize) != img.shape[1::-1]:
        raise SystemExit(f"bench: resize to {dsize} of a {img.shape} image: draw the target "
                         "at the grid's size")
    return img


builtins.print = timed_print
cv2 = types.ModuleType("cv2")
cv2.imread = lambda path, *a: np.asarray(Image.open(path).convert("RGB"))[:, :, ::-1].copy()
cv2.resize, cv2.imshow, cv2.waitKey, cv2.imwrite = resize, nothing, lambda *a: -1, nothing
imageio = types.ModuleType("imageio")
imageio.imread = lambda path, *a: np.asarray(Image.open(path))
imageio.imwrite = nothing
sys.modules["cv2"], sys.modules["imageio"] = cv2, imageio
sys.argv = [EXAMPLE, *sys.argv[3:]]
runpy.run_path(EXAMPLE, run_name="__main__")
'''


def run_original(example: str, argv: list[str], images: dict[str, np.ndarray],
                 options: argparse.Namespace, timeout: float = 7200) -> dict:
    """The original `example` (a file of the DiffTaichi checkout) with `argv`, beside
    `images` ({file name: uint8 pixels}, written as PNGs where it reads its own); its losses
    and time per iteration."""
    from PIL import Image  # optional dependency: Pillow writes the stand-in images

    source = Path(options.difftaichi) / example
    with tempfile.TemporaryDirectory(prefix="difftaichi-") as tmp:
        work = Path(tmp)
        shutil.copy(source, work / source.name)
        for name, pixels in images.items():
            Image.fromarray(pixels).save(work / name)
        (work / "runner.py").write_text(RUNNER)
        env = {**os.environ, "TI_ARCH": "x64", "MPLBACKEND": "Agg", "PYTHONPATH": ""}
        done = subprocess.run([options.taichi_python, "runner.py", source.name, "log.json",
                               *argv], cwd=work, env=env, capture_output=True, text=True,
                              timeout=timeout)
        log = json.loads((work / "log.json").read_text()) if (work / "log.json").exists() else []
    if not log:
        raise SystemExit(f"{example} printed no loss (exit {done.returncode}):\n"
                         f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    losses = [float(LOSS.search(text).group(1)) for _, text in log if LOSS.search(text)]
    times = [t for t, text in log if LOSS.search(text)]
    return {"losses": losses, "per_iteration_s": _median_gap(times)}


def run_scene(scene: str, iterations: int, options: argparse.Namespace,
              sets: list[str] = ()) -> dict:
    """`simrun optimize SCENE --iterations N` in a temporary folder (or, with `--keep DIR`,
    in DIR/SCENE with its pictures): its losses and time per iteration (loss.csv)."""
    with tempfile.TemporaryDirectory(prefix="simrun-") as tmp:
        out = Path(options.keep) / scene if options.keep else Path(tmp) / "opt"
        args = [sys.executable, "-m", "simrun.cli", "optimize", str(SCENE_DIR / f"{scene}.yaml"),
                "--iterations", str(iterations), "--out", str(out),
                *([] if options.keep else ["--no-render"]),
                *[a for s in sets for a in ("--set", s)]]
        env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
        done = subprocess.run(args, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"simrun optimize {scene}: exit {done.returncode}\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        with open(out / "loss.csv") as fh:
            rows = list(csv.DictReader(fh))
    return {"losses": [float(r["loss"]) for r in rows],
            "per_iteration_s": _median_gap([float(r["wall_s"]) for r in rows])}


def _median_gap(times: list[float]) -> float:
    gaps = np.diff(np.asarray(times, float))
    return float(np.median(gaps)) if len(gaps) else float("nan")


def _grey_png(path: Path) -> np.ndarray:
    from PIL import Image  # optional dependency: Pillow reads the scene's image

    return np.asarray(Image.open(path).convert("L"))


# ------------------------------------------------------------------------------ scenes
def wave(iterations: int | None, options: argparse.Namespace) -> dict:
    """wave.py (200 iterations of gradient descent, lr 1) with scenes/wave_target.png as
    its taichi.png; scenes/wave.yaml from the same zero initial field."""
    n = iterations or 200
    target = _grey_png(SCENE_DIR / "wave_target.png")
    original = run_original("wave.py", ["--iters", str(n)],
                            {"taichi.png": np.repeat(target[:, :, None], 3, axis=2)}, options)
    return {"original": original, "simrun": run_scene("wave", n, options)}


def smoke(iterations: int | None, options: argparse.Namespace) -> dict:
    """smoke_taichi.py (128^2, 100 steps, 10 Jacobi iterations; 240 iterations of gradient
    descent, lr 400) with scenes/smoke_target.png as its taichi.png; its checkerboard start
    is scenes/smoke_start.png; scenes/smoke.yaml from the same zero initial velocity."""
    n = iterations or 240
    target = _grey_png(SCENE_DIR / "smoke_target.png")
    original = run_original("smoke_taichi.py", ["--iters", str(n)],
                            {"taichi.png": np.repeat(target[:, :, None], 3, axis=2)}, options)
    return {"original": original, "simrun": run_scene("smoke", n, options)}


def _from_module(name: str, iterations: int, **kwargs) -> Callable[[int | None,
                                                                     argparse.Namespace], dict]:
    """A scene compared by its own bench/difftaichi_<name>.py (its `compare` prints its
    table): the result in this driver's form."""
    def compare(given: int | None, options: argparse.Namespace) -> dict:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        module = __import__(f"difftaichi_{name}")
        result = module.compare(given or iterations, **kwargs)
        per_iteration = result.get("seconds_per_iteration", {})

        def side(part: dict, key: str) -> dict:
            seconds = per_iteration.get(key, part.get("seconds"))
            if isinstance(seconds, list):
                seconds = float(np.median(seconds)) if seconds else float("nan")
            return {"losses": part["losses"], "per_iteration_s": seconds}
        return {"original": side(result["taichi"], "taichi"),
                "simrun": side(result["simrun"], "simrun")}
    return compare


SCENES: dict[str, Callable[[int | None, argparse.Namespace], dict]] = {
    "wave": wave,
    "smoke": smoke,
    # the original trains 200,000 iterations: 200 by default here
    "electric": _from_module("electric", 200),
    "rigid_body": _from_module("rigid_body", 20, robot=1),
    "rigid_body_legs": _from_module("rigid_body", 20, robot=2),
    # Taichi 1.7.4 compiles the 3-D gradient kernels for 9-15 minutes: 3 by default here
    "diffmpm3d": _from_module("diffmpm3d", 3),
    "liquid": _from_module("liquid", 3),
}


def report(name: str, result: dict) -> str:
    a, b = result["original"], result["simrun"]
    n = min(len(a["losses"]), len(b["losses"]))
    first = abs(b["losses"][0] - a["losses"][0]) / max(abs(a["losses"][0]), 1e-300)
    lines = [f"{name}: {n} iterations",
             f"  first loss   Taichi 1.7.4 {a['losses'][0]:.9g}   simrun {b['losses'][0]:.9g}"
             f"   rel. difference {first:.2e}",
             f"  last loss    Taichi 1.7.4 {a['losses'][n - 1]:.9g}   simrun "
             f"{b['losses'][n - 1]:.9g}   ratio {b['losses'][n - 1] / a['losses'][n - 1]:.4f}",
             f"  s/iteration  Taichi 1.7.4 {a['per_iteration_s']:.3f}   simrun "
             f"{b['per_iteration_s']:.3f}   speed-up "
             f"{a['per_iteration_s'] / b['per_iteration_s']:.2f}x",
             "  iteration  Taichi 1.7.4      simrun"]
    lines += [f"  {i:9d}  {a['losses'][i]:.9g}  {b['losses'][i]:.9g}" for i in range(n)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenes", nargs="*", default=list(SCENES), choices=list(SCENES))
    parser.add_argument("--iterations", type=int, default=None,
                        help="default: each original's own count")
    parser.add_argument("--difftaichi", default="/work/difftaichi/examples")
    parser.add_argument("--taichi-python", default="/work/peers/bin/python")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--keep", default=None,
                        help="keep each scene's optimize folder (with pictures) in KEEP/<scene>")
    options = parser.parse_args()
    results = {}
    for name in options.scenes:
        results[name] = SCENES[name](options.iterations, options)
        print(report(name, results[name]), flush=True)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
