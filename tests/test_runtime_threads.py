"""The default thread count (ti.init without cpu_max_num_threads): the CPUs the process may
use (affinity, a cgroup CPU quota), not the machine's count, so a job confined to a few cores
of a big node does not start a thread per core of the node."""

import os
import subprocess
import sys

import pytest

from simrun.lang.runtime import parallel


@pytest.mark.parametrize(("files", "expected"), [
    ({"cpu.max": "200000 100000\n"}, 2),
    ({"cpu.max": "150000 100000\n"}, 2),    # 1.5 CPUs: round up, the half core is usable
    ({"cpu.max": "50000 100000\n"}, 1),
    ({"cpu.max": "max 100000\n"}, None),    # no limit
    ({"cpu.max": "garbage\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),  # v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({}, None),
])
def test_cgroup_cpu_quota(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert parallel.cgroup_cpu_quota(str(tmp_path)) == expected


@pytest.mark.parametrize(("cpus", "quota", "expected"), [
    (8, None, 8), (8, 3, 3), (2, 16, 2), (1, None, 1)])
def test_default_threads_is_the_smaller_limit(monkeypatch, cpus, quota, expected):
    monkeypatch.setattr(parallel, "_cpus", lambda: cpus)
    monkeypatch.setattr(parallel, "cgroup_cpu_quota", lambda: quota)
    assert parallel.default_threads() == expected
    assert parallel.Runtime().num_threads == expected


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_affinity_of_a_real_process_sets_the_default(tmp_path):
    """A process pinned to one CPU (as `taskset -c 0` would) runs kernels on one thread, and
    still gets the right answer from a loop that would be split."""
    program = (
        "import os\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "import simrun.lang as ti\n"
        "from simrun.lang import api\n"
        "ti.init(arch=ti.cpu)\n"
        "x = ti.field(ti.f64, shape=1 << 16)\n"
        "@ti.kernel\n"
        "def total() -> ti.f64:\n"
        "    s = 0.0\n"
        "    for i in x:\n"
        "        s += ti.cast(i, ti.f64)\n"
        "    return s\n"
        "print(api.runtime().num_threads, total())\n"
    )
    script = tmp_path / "pinned.py"  # kernels need their source in a file
    script.write_text(program)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout.split()
    n = 1 << 16
    assert out == ["1", f"{float(n * (n - 1) // 2)}"]
