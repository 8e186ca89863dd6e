"""Every kernel the suite compiles has its IR verified after each pass (simrun/lang/pipeline.py)."""

import os

import pytest

from simrun.lang import pipeline
from simrun.lang.ir.verify import verify

pytest_plugins = ["ptx_plugin"]  # pytest --ptx: every compiled kernel through ptxas too


@pytest.fixture(autouse=True, scope="session")
def _verify_ir_after_each_pass():
    pipeline.checks.append(verify)
    yield
    pipeline.checks.remove(verify)


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` need a CUDA device: skipped, with the reason, where none is found.
    Tests marked `cpu_only` (the CPU runtime's own promises) are skipped when TI_ARCH sends
    every kernel to a GPU (bench/gpu_check.sh)."""
    if os.environ.get("TI_ARCH", "").lower() in ("cuda", "gpu"):
        for item in items:
            if "cpu_only" in item.keywords:
                item.add_marker(pytest.mark.skip(
                    reason=f"the CPU runtime's own: {item.get_closest_marker('cpu_only').args[0]}"))
    gpu = [item for item in items if "gpu" in item.keywords]
    if not gpu:
        return
    from simrun.lang.runtime.cuda import device_status

    why = device_status()
    if why is not None:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=f"no GPU: {why}"))
