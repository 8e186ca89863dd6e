"""What every command shares: consoles, the exit-code policy, the shared options."""

from __future__ import annotations

import enum
import hashlib
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from simrun.outputs import OutputError, UnwritableError
from simrun.outputs.resumable import is_no_room, no_room_message
from simrun.scene import SceneError
from simrun.scene.errors import shorten
from simrun.scene.schema import SCHEMA_VERSION

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

SceneArg = Annotated[Path, typer.Argument(
    metavar="SCENE", show_default=False, help=f"Scene file (YAML, schema version "
    f"{SCHEMA_VERSION}; keys in scenes/README.md), e.g. scenes/gravity.yaml, or the name of "
    "a scene shipped with simrun, e.g. gravity (simrun --help lists them).")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY.PATH=VALUE",
    help="Override a scene value before validation; repeatable. Values are YAML, e.g. "
         "--set dt=1e-4 --set energy.0.params.softening=0.01 --set initial.low=[0,0].")]
AllowOutsideOpt = Annotated[bool, typer.Option(
    "--allow-outside", help="Let the scene import kernel modules from outside its folder, "
    "the kernels/ folder beside it and simrun's library (simrun.kernels.*). Kernel modules are Python that the scene runs: allow only "
    "modules you trust.")]
DebugOpt = Annotated[bool, typer.Option(
    "--debug", help="Bounds-check every field access in the kernels (slower): an index out "
    "of range is an error naming kernel, field, index and source line (exit 2), instead of "
    "a silent read or write of other memory.")]
ReproducibleOpt = Annotated[bool, typer.Option(
    "--reproducible/--no-reproducible", help="Float adds into shared entries (forces, grids, "
    "energy sums) in an order fixed by the data: the same bits at any thread count and on "
    "every run, resumes included (the default). --no-reproducible lets the threads add in "
    "the order they arrive: on a GPU those loops then use every thread instead of one (much "
    "faster), and the last bits may change from run to run.")]
AllowChangedOpt = Annotated[bool, typer.Option(
    "--allow-changed", help="Resume even though a kernel module (or the initial state file) "
    "changed since the job ran; the record notes what changed. Without it such a resume is "
    "refused (exit 2), naming the change.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar (the result "
                                      "is still printed).")]
ThreadsOpt = Annotated[int | None, typer.Option(
    "--threads", min=1, max=4096, metavar="N", help="CPU threads for kernels (default: one for a "
    "system whose step is too little work to share, else every usable CPU; at most 4096; "
    "run.json records it). The results are the same bits on any number of threads.")]


def is_compile_error(exc: BaseException) -> bool:
    """Errors the kernel compiler raises for a bad kernel (reported like bad input)."""
    try:
        from simrun.lang.errors import CompileError  # start-up: loads simrun.lang
    except ImportError:  # pragma: no cover - the compiler is part of the package
        return False
    return isinstance(exc, CompileError)


def is_kernel_failure(exc: BaseException) -> bool:
    """Other errors simrun.lang raises on purpose, e.g. a kernel that failed while running."""
    try:
        from simrun.lang.errors import SimrunError  # start-up: loads simrun.lang
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, SimrunError)


def is_simulation_failure(exc: BaseException) -> bool:
    """The stepper's word that the simulation itself failed (e.g. NaN): exit 1."""
    from simrun.stepper import SimulationError  # start-up: loads the compiler

    return isinstance(exc, SimulationError)


def is_bad_index(exc: BaseException) -> bool:
    """An out-of-range field index that --debug's bounds checks found in a kernel."""
    try:
        from simrun.lang.runtime.launch import KernelIndexError  # start-up: loads simrun.lang
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, KernelIndexError)


def compile_message(exc: BaseException, folder: Path | None = None) -> str:
    """``file:line:col: kernel 'k' does not compile: why.`` then the source line and a caret.

    A huge message or source line is cut (the line to a window around the caret); the whole
    message then goes to ``folder``/error.log (the job's folder, where there is one yet) or
    a file in the temporary folder, and the cut one says where."""
    span, kernel = getattr(exc, "span", None), getattr(exc, "kernel", None)
    whole = str(getattr(exc, "bare", exc)).strip()
    bare = shorten(whole, 400)
    where = None if bare == whole else _keep_whole(exc, folder)
    kept = f" The whole message: {where}." if where else ""
    if span is None:
        return f"error: a kernel does not compile: {bare}{kept}"
    col = f":{span.col + 1}" if span.text else ""
    who = f"kernel '{kernel}'" if kernel else "a kernel"
    text = f"error: {span.file}:{span.line}{col}: {who} does not compile: {bare}"
    text = text if text.endswith((".", "?", "!")) else text + "."
    return text + kept + " Fix the kernel module." + _excerpt(span.text.rstrip(), span.col)


def _keep_whole(exc: BaseException, folder: Path | None) -> Path | None:
    """Write the uncut error to folder/error.log, or else to the temporary folder, named by
    its hash (the same error again reuses the file); None where neither can be written."""
    text = f"{exc}\n"
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    places = [folder / "error.log"] if folder is not None and folder.is_dir() else []
    places.append(Path(tempfile.gettempdir()) / f"simrun-error-{digest}.log")
    for path in places:
        try:
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def _excerpt(line: str, col: int, width: int = 100) -> str:
    """The source line and a caret under ``col``, at most ``width`` characters of it."""
    if not line:
        return ""
    start = max(0, min(col - width // 2, len(line) - width))
    shown = line[start:start + width]
    left, right = ("..." if start else ""), ("..." if start + width < len(line) else "")
    return f"\n    {left}{shown}{right}\n    {' ' * (len(left) + col - start)}^"


class Device(str, enum.Enum):
    cpu = "cpu"
    cuda = "cuda"


DeviceOpt = Annotated[Device, typer.Option(
    "--device", help="Where the kernels run: cpu, or cuda (an NVIDIA GPU, through NVIDIA's "
    "driver and its Python bindings: pip install 'simrun[cuda]').")]


def require_device(device: Device) -> None:
    """--device cuda without a usable GPU is bad input (exit 2), found before any work."""
    if device is Device.cuda:
        from simrun.lang.runtime.cuda import device_status  # start-up: loads simrun.lang

        why = device_status()
        if why is not None:
            raise fail(f"error: --device cuda: {why}. The kernels run on an NVIDIA GPU through "
                       "NVIDIA's driver and the cuda-bindings package (pip install "
                       "'simrun[cuda]'); nothing was run. Use --device cpu (the default) on "
                       "this machine: it computes the same results.", EXIT_BAD_INPUT)


@contextmanager
def on_device(device: Device) -> Iterator[None]:
    """--device: the kernels inside run there (require_device first)."""
    from simrun.lang.config import on_device as lang_on_device  # start-up: loads simrun.lang

    require_device(device)
    with lang_on_device(device.value):
        yield


def fail(message: str, code: int) -> typer.Exit:
    err.print(message, markup=False, soft_wrap=True)
    return typer.Exit(code)


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def exit_codes(on_interrupt: Callable[[], str] | None = None,
               folder: Callable[[], Path | None] | None = None) -> Iterator[None]:
    """Map errors to exit codes: 2 bad input, 1 the run failed, 130 interrupted.

    Bad input (an output folder that cannot be written and a field index out of range that
    --debug found included) prints its one-paragraph message and no traceback; so do a
    kernel that fails while it runs, outputs that cannot be written (a full disk, by any
    writer of any job) and running out of memory (exit 1). Anything else is a bug in
    simrun and keeps its traceback. ``folder``: the job's folder once known (for the
    full-disk advice, and where a cut compile error is kept whole).
    """
    from simrun.lang.runtime.interrupt import (  # start-up: NumPy, not yet the compiler
        stopping_native_calls,
    )

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with stopping_native_calls():  # Ctrl-C and SIGTERM within a long native call
            yield
    except SceneError as exc:
        raise fail(f"error: {exc}", EXIT_BAD_INPUT) from None
    except UnwritableError as exc:
        raise fail(f"error: {exc}", EXIT_BAD_INPUT) from None
    except OutputError as exc:
        raise fail(f"error: {exc}", EXIT_FAILED) from None
    except MemoryError:
        raise fail("error: out of memory: the scene needs more memory than this machine has "
                   "free. Use fewer particles or save fewer frames (raise outputs.every), or "
                   "close other programs.", EXIT_FAILED) from None
    except KeyboardInterrupt:
        note = on_interrupt() if on_interrupt else ""
        raise fail(f"interrupted{': ' + note if note else ''}", EXIT_INTERRUPTED) from None
    except Exception as exc:
        if isinstance(exc, typer.Exit):  # a command's own exit status, its message printed
            raise
        if is_simulation_failure(exc):
            raise fail(f"simulation failed: {exc}", EXIT_FAILED) from None
        if is_no_room(exc):
            raise fail(f"error: {no_room_message(exc, folder() if folder else None)}",
                       EXIT_FAILED) from None
        if is_compile_error(exc):
            raise fail(compile_message(exc, folder() if folder else None),
                       EXIT_BAD_INPUT) from None
        if is_bad_index(exc):
            first, _, excerpt = str(exc).partition("\n")
            raise fail(f"error: {first}. Fix the kernel: without --debug this access reads or "
                       f"writes memory outside the field, silently.\n{excerpt}",
                       EXIT_BAD_INPUT) from None
        if is_kernel_failure(exc):
            hint = (" A value the job computed (an optimiser's step, a thermostat's scale) "
                    "left the scene's precision: use precision: f64, smaller steps or "
                    "optimize.bounds." if isinstance(exc, OverflowError) else "")
            raise fail(f"simulation failed: {exc}.{hint}", EXIT_FAILED) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
