"""Every kernel the suite compiles has its IR verified after each pass (simrun/lang/pipeline.py)."""

import pytest

from simrun.lang import pipeline
from simrun.lang.ir.verify import verify


@pytest.fixture(autouse=True, scope="session")
def _verify_ir_after_each_pass():
    pipeline.checks.append(verify)
    yield
    pipeline.checks.remove(verify)
