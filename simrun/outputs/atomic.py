"""Atomic file writes: a temporary file in the same folder, then ``os.replace``.

A reader (or a run killed at any instant) sees either the old file or the new one, never a
half-written one. No fsync: a killed process cannot lose page-cache data, and runs should not
wait on the disk.
"""

from __future__ import annotations

import errno
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np


class OutputError(Exception):
    """A run's outputs could not be written (the disk is full, the folder went away).

    ``str()`` is one paragraph for the user: what failed, what on disk is still valid, and
    how to go on; the CLI prints it and exits with status 1."""


UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)  # the folder refuses writes at all


class UnwritableError(OutputError):
    """The output folder cannot be written at all (permissions, a read-only file system):
    bad input, which the CLI reports with exit status 2."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone gives 0600


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            exc.filename = str(path)  # the file meant, not the temporary one (or none)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_savez(path: str | os.PathLike[str], **arrays: np.ndarray) -> None:
    """``np.savez`` (uncompressed: fast) to ``path`` atomically."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())
