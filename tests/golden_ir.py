"""Golden-file check shared by the IR and pass tests (SIMRUN_UPDATE_GOLDEN=1 rewrites them)."""

import os
from pathlib import Path

from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import kernel_text

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    """text must equal golden/<name>.ir (written when missing or when asked to update)."""
    path = GOLDEN / f"{name}.ir"
    if os.environ.get("SIMRUN_UPDATE_GOLDEN") or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def check_kernel_golden(name: str, kir) -> None:
    check_golden(name, kernel_text(kir, build_layout(kir)))
