"""The environment variables simrun.lang honours, read in one place into one object.

`Settings.from_environ()` reads them; ti.init does so once and passes the result to the
runtime and the compiler, a GUI window when it opens. Nothing else reads os.environ.

| variable | field | effect |
|---|---|---|
| SIMRUN_CACHE_DIR | cache_dir | kernel object cache (default $XDG_CACHE_HOME/simrun) |
| SIMRUN_NO_DISK_CACHE | cache_dir = None | no object cache on disk |
| SIMRUN_MCJIT | mcjit | load objects with LLVM's MCJIT instead of runtime/objload.py |
| SIMRUN_POOL | pool | "python": the Python worker pool instead of the native one |
| SIMRUN_PRINT_IR | print_ir | print each kernel's IR before compiling it |
| SIMRUN_PRINT_LLVM | print_llvm | print each optimised LLVM module |
| SIMRUN_GUI_HEADLESS | gui_headless | never open a window: ti.GUI writes frames |
| SIMRUN_GUI_MAX_FRAMES | gui_max_frames | a headless GUI stops running after this many |
| SIMRUN_GUI_DIR | gui_dir | where a headless GUI writes its frames |
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from simrun.lang.errors import SettingsError


@dataclass(frozen=True)
class Settings:
    cache_dir: Path | None = None   # None: no disk cache
    mcjit: bool = False
    pool: str = "native"
    print_ir: bool = False
    print_llvm: bool = False
    gui_headless: bool = False      # also when no display is there to open a window on
    gui_max_frames: int | None = None
    gui_dir: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        cache_dir = None
        if not env.get("SIMRUN_NO_DISK_CACHE"):
            base = env.get("SIMRUN_CACHE_DIR") or os.path.join(
                env.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "simrun")
            cache_dir = Path(base) / "kernels"
        return cls(cache_dir=cache_dir, mcjit=bool(env.get("SIMRUN_MCJIT")),
                   pool=_choice(env, "SIMRUN_POOL", ("native", "python")),
                   print_ir=bool(env.get("SIMRUN_PRINT_IR")),
                   print_llvm=bool(env.get("SIMRUN_PRINT_LLVM")),
                   gui_headless=not _display_available(env),
                   gui_max_frames=_count(env, "SIMRUN_GUI_MAX_FRAMES",
                                         "the frames a headless GUI draws before it stops"),
                   gui_dir=Path(env["SIMRUN_GUI_DIR"]) if env.get("SIMRUN_GUI_DIR") else None)


MAX_COUNT = 2**63 - 1  # as a scene's integers: what a 64-bit integer holds


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _count(env: Mapping[str, str], name: str, what: str) -> int | None:
    """A whole number >= 0 (None when unset or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return None
    value = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else None
    if value is None or value > MAX_COUNT:
        raise SettingsError(f"the environment variable {name}={_shown(text)} is not a whole "
                            f"number from 0 to {MAX_COUNT}. Set it to {what} (e.g. {name}=100), "
                            f"or unset it.")
    return value


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of ``choices`` (the first when unset or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return choices[0]
    if text not in choices:
        raise SettingsError(f"the environment variable {name}={_shown(text)} is not one of "
                            f"{', '.join(choices)}. Set it to one of them, or unset it.")
    return text


def _display_available(env: Mapping[str, str]) -> bool:
    """Whether a window can plausibly be opened (Tk on X11, macOS or Windows)."""
    if env.get("SIMRUN_GUI_HEADLESS", "") not in ("", "0"):
        return False
    if sys.platform.startswith(("linux", "freebsd", "openbsd")):
        return bool(env.get("DISPLAY"))
    return True
