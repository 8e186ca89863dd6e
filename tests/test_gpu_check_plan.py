"""bench/gpu_check.sh and bench/gpu_lj.py without a GPU: the dry run lists every target of
issue 48 within one device call's 600 s, and the LJ table computes the ratios it prints
against the issue's targets (the rows a GPU run writes, made up here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_dry_run_lists_every_target_within_one_device_call():
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    limits = [int(s) for s in re.findall(r": up to (\d+)s", text)]
    total = int(re.search(r"time limits: (\d+)s in all", text).group(1))
    assert sum(limits) == total <= 600
    for part in ("smoke", "gpu-tests", "engine-on-gpu", "lj-bench", "jobs-bench", "async"):
        assert re.search(rf"^{part}: up to", text, re.M), part
    for atoms in ("32,000", "1,000,188"):  # both sizes, both modes
        for peer in ("simrun_cuda_reproducible", "simrun_cuda "):
            assert re.search(rf"{atoms} atoms .*{peer}", text), (atoms, peer)
    assert re.search(r"32,000 atoms .*same_bits", text)
    assert "grad_cost.py" in (ROOT / "bench" / "gpu_check.sh").read_text()  # gravity rows


def test_the_lj_table_judges_each_mode_against_jax_md(tmp_path):
    def rate(mas):
        return {"seconds": 1.0, "atom_steps_per_s": mas * 1e6}

    rows = [{"atoms": 32000, "steps": 100, "simrun_cuda_reproducible": rate(120.0),
             "simrun_cuda": rate(300.0), "jax_md_cuda": rate(108.0), "same_bits": True},
            {"atoms": 1000188, "steps": 20, "simrun_cuda_reproducible": {"error": "boom"},
             "simrun_cuda": rate(400.0), "jax_md_cuda": rate(121.0)}]
    results = tmp_path / "lj.json"
    results.write_text(json.dumps({"jax_md": True, "rows": rows}))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_lj.py"), "--table",
                          str(results)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    first, second = out.strip().splitlines()[2:]
    cells = [c.strip() for c in first.strip("|").split("|")]
    assert cells == ["32,000", "120.0", "300.0", "108.0", f"{120 / 108:.2f} ok",
                     f"{300 / 108:.2f} MISSED", "yes"]
    cells = [c.strip() for c in second.strip("|").split("|")]
    assert cells == ["1,000,188", "-", "400.0", "121.0", "-", f"{400 / 121:.2f} ok", "-"]
