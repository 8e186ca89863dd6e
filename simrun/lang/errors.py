"""Errors that point at the user's source: file:line and a caret, never an internal traceback."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """Where an IR node came from in the user's source."""

    file: str
    line: int
    col: int = 0
    text: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def excerpt(self) -> str:
        if not self.text:
            return ""
        return f"\n    {self.text.rstrip()}\n    {' ' * self.col}^"


class SimrunError(Exception):
    """Base of every error simrun raises on purpose."""


class CompileError(SimrunError):
    """A kernel the compiler cannot accept; the message names kernel, file:line and the fix."""

    def __init__(self, message: str, span: Span | None = None, kernel: str | None = None):
        self.span = span
        self.kernel = kernel
        self.bare = message
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"{self.span}: " if self.span else ""
        who = f"in kernel '{self.kernel}': " if self.kernel else ""
        tail = self.span.excerpt() if self.span else ""
        return f"{where}{who}{self.bare}{tail}"

    def with_context(self, span: Span | None, kernel: str | None) -> CompileError:
        return CompileError(self.bare, self.span or span, self.kernel or kernel)


class FieldRangeError(CompileError, IndexError):
    """An access outside a field that the compiler can prove (passes/loop_ranges.py): the
    IndexError debug's checks would raise at run time, found before anything runs."""


class AutodiffError(CompileError, RuntimeError):
    """A gradient simrun cannot compute correctly; raised instead of returning a wrong one."""


class KernelArgumentError(SimrunError, OverflowError):
    """A scalar argument its parameter's type cannot hold (an f32 past 3.4e38, an i32 past
    2^31): refused, never wrapped or rounded to another number. An OverflowError, as Python's
    own conversions raise; a SimrunError, so that a job reports it in one paragraph."""


class SettingsError(SimrunError, ValueError):
    """An environment variable simrun honours holds a value it cannot use: refused when the
    settings are read (the CLI: before any command runs, exit 2), never a traceback and never
    silently replaced by a default."""


class InternalCompilerError(SimrunError, RuntimeError):
    """simrun's code generator wrote an LLVM module the verifier rejects: a bug in simrun,
    reported with the kernel's name instead of handing LLVM's optimiser a module it may
    crash on."""


# Taichi's exception names, for programs and tests that catch them (`except
# ti.TaichiCompilationError`): every compile-time refusal is a CompileError, a failing kernel
# a RuntimeError (an assertion an AssertionError), as Taichi raises them.
TaichiCompilationError = TaichiSyntaxError = TaichiTypeError = CompileError
TaichiNameError = TaichiIndexError = CompileError
TaichiRuntimeError = RuntimeError
TaichiAssertionError = AssertionError
