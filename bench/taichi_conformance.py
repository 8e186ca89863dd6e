"""Taichi 1.7.4's own autodiff tests under `import taichi` = simrun.lang, side by side with
Taichi itself: which pass on both, which pass only on Taichi (simrun's conformance gaps).

The tests come from a local copy of the Taichi repository (never committed here):

    python bench/taichi_conformance.py --taichi-repo /path/to/taichi   # a clone, or its .git
    python bench/taichi_conformance.py --taichi-repo R --module simrun --files test_ad_if.py

Each module runs in its own pytest process over the same extracted files: for `simrun`, a
shim package named `taichi` re-exports simrun.lang; for `taichi`, the installed wheel
(`pip install taichi==1.7.4`). Both get the same CPU-only stand-in for Taichi's
`tests/test_utils.py` (`test(...)` inits the CPU backend with the given options, once).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

AD_FILES = ("test_ad_atomic.py", "test_ad_atomic_fwd.py", "test_ad_basics.py",
            "test_ad_basics_fwd.py", "test_ad_demote_dense.py", "test_ad_dynamic_index.py",
            "test_ad_for.py", "test_ad_for_fwd.py", "test_ad_gdar_diffmpm.py",
            "test_ad_global_data_access_rule_checker.py", "test_ad_grad_check.py",
            "test_ad_if.py", "test_ad_if_fwd.py", "test_ad_math_func.py", "test_ad_ndarray.py",
            "test_ad_offload.py", "test_ad_snode_grad_type.py", "test_ad_tensor.py",
            "test_clear_all_gradients.py", "test_customized_grad.py",
            "test_global_store_grad.py", "test_loop_grad.py", "test_no_grad.py",
            "test_stop_grad.py")

TEST_UTILS = '''
"""CPU-only stand-in for Taichi's tests/test_utils.py (same for both modules)."""
import functools
import numpy as np
import pytest
import taichi as ti


def test(arch=None, exclude=None, require=None, **options):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            ti.init(arch=ti.cpu, **options)
            return fn(*args, **kwargs)
        return wrapped
    return decorator


def approx(expected, **kwargs):
    return pytest.approx(expected, rel=kwargs.get("rel", 1e-6), abs=kwargs.get("abs", 1e-6))


def allclose(x, y, **kwargs):
    return np.allclose(x, y, rtol=kwargs.get("rel", 1e-6), atol=kwargs.get("abs", 1e-6))


def torch_op(*args, **kwargs):
    pytest.skip("torch interop is not part of the CPU conformance run")
'''

SHIM = """import sys

import simrun.lang
import simrun.lang.lang

# `taichi` is simrun.lang, and `taichi.lang.enums` is simrun.lang.lang.enums (one module each)
for _name, _module in list(sys.modules.items()):
    if _name.startswith("simrun.lang."):
        sys.modules["taichi." + _name[len("simrun.lang."):]] = _module
sys.modules[__name__] = simrun.lang
"""


def extract(repo: Path, files: list[str], dest: Path, ref: str) -> list[Path]:
    """The test files at `ref` from a clone or a bare git directory."""
    out = []
    (dest / "tests").mkdir(parents=True)
    (dest / "tests" / "__init__.py").write_text("")
    (dest / "tests" / "test_utils.py").write_text(TEST_UTILS)
    for name in files:
        text = subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "show",
                               f"{ref}:tests/python/{name}"], capture_output=True, text=True,
                              check=True).stdout
        (dest / name).write_text(text)
        out.append(dest / name)
    return out


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def run_module(module: str, work: Path, files: list[Path], timeout: float) -> dict[str, str]:
    """{test id: passed | failed | error | skipped} for one module: one pytest process per
    file, so a crash or a collection error costs that file only (its tests count as errors)."""
    env = {**os.environ, "TI_LOG_LEVEL": "error", "MPLBACKEND": "Agg"}
    paths = [str(work)]
    if module == "simrun":
        shim = work / "_shim" / "taichi"
        shim.mkdir(parents=True, exist_ok=True)
        (shim / "__init__.py").write_text(SHIM)
        paths.insert(0, str(shim.parent))
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    outcomes: dict[str, str] = {}
    for path in files:
        report = work / f"{module}-{path.stem}.xml"
        try:
            subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "--junitxml", str(report), str(path)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        # no report: pytest crashed or timed out (a file of no tests, such as 1.7.4's
        # test_global_store_grad.py, all one docstring, reports nothing and counts nothing)
        outcomes.update(_outcomes(report) if report.exists()
                        else {f"{path.name}::<whole file>": "error"})
    return outcomes


def _outcomes(report: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{Path(case.get('file') or case.get('classname', '')).name}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[test_id] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                        else "skipped" if "skipped" in kinds else "passed")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--taichi-repo", type=Path, required=True)
    parser.add_argument("--ref", default="v1.7.4")
    parser.add_argument("--module", choices=("simrun", "taichi", "both"), default="both")
    parser.add_argument("--files", nargs="*", default=list(AD_FILES))
    parser.add_argument("--timeout", type=float, default=600, help="seconds per file")
    parser.add_argument("--json", type=Path, help="write every test's outcome here")
    args = parser.parse_args()
    modules = ("taichi", "simrun") if args.module == "both" else (args.module,)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files = extract(args.taichi_repo, args.files, work, args.ref)
        results = {m: run_module(m, work, files, args.timeout) for m in modules}
    for m, res in results.items():
        counts = {k: sum(1 for v in res.values() if v == k)
                  for k in ("passed", "failed", "error", "skipped")}
        print(f"{m:7s} {counts}")
    if len(results) == 2:
        base, ours = results["taichi"], results["simrun"]
        on_taichi = [t for t, v in base.items() if v == "passed"]
        gaps = sorted(t for t in on_taichi if ours.get(t) != "passed")
        print(f"passing on Taichi: {len(on_taichi)}; of those passing on simrun: "
              f"{len(on_taichi) - len(gaps)}")
        by_file: dict[str, int] = {}
        for t in gaps:
            by_file[t.split("::")[0]] = by_file.get(t.split("::")[0], 0) + 1
        for name, n in sorted(by_file.items(), key=lambda kv: -kv[1]):
            print(f"  {n:4d} not passing on simrun in {name}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
