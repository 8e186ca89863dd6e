"""A grad job's options as the commands record them (gradients.json's and batch.json's
``options``): read here, in one place, by `simrun grad`, `simrun resume` and batch's grad
task alike. Light on purpose: the CLI imports it at start-up."""

from __future__ import annotations

import re
from typing import Any

from simrun.scene import SceneError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?\s*$")
MODES = ("reverse", "forward")


def parse_size(text: str) -> int:
    """'512M', '2GiB', '100000' -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise SceneError(f"--memory {text!r}: not a size; write e.g. 512M or 2G")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    return int(float(match.group(1)) * scale[match.group(2).lower()])


def memory_bytes(options: dict[str, Any]) -> int | None:
    """--memory in bytes: the CLI records its text (e.g. 64M), batch the bytes."""
    memory = options.get("memory")
    return parse_size(memory) if isinstance(memory, str) else memory


def method_of(options: dict[str, Any]) -> str:
    """trajectory or ensemble (SceneError for anything else)."""
    method = options.get("method") or "trajectory"
    if method not in ("trajectory", "ensemble"):
        raise SceneError(f"--method {method!r}: use trajectory or ensemble")
    return method


def mode_of(options: dict[str, Any]) -> str:
    """reverse or forward (SceneError for anything else)."""
    mode = options.get("mode") or "reverse"
    if mode not in MODES:
        raise SceneError(f"--mode {mode!r}: use reverse or forward")
    return mode


def sampling(options: dict[str, Any]) -> dict[str, int | None]:
    """The ensemble method's run: steps, equilibration and frame spacing (None: defaults)."""
    return {"steps": options.get("steps"), "equilibrate": options.get("equilibrate"),
            "every": options.get("sample_every")}
