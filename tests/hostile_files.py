"""Hostile initial-state files for the tests: .npz archives whose headers lie, and deflate
bombs, built in a few milliseconds (the data a bomb claims is never written)."""

from __future__ import annotations

import io
import math
import struct
import zipfile
from pathlib import Path

import numpy as np


def npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                              "shape": shape})
    return buf.getvalue()


def forged_npz(path: Path, shape: tuple[int, ...], stored: int, declared: int | None = None,
               deflate: bool = True, name: str = "x") -> Path:
    """An .npz whose ``name``.npy header claims ``shape`` but which holds ``stored`` bytes of data;
    the zip directory declares ``declared`` bytes for the member (default: the honest size
    of what it holds). ``declared`` = header + the claimed data is a bomb that names its
    size honestly but whose data would inflate past the end of the stream."""
    header = npy_header(shape)
    compression = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr(f"{name}.npy", header + b"\0" * stored)
    if declared is not None:  # patch the uncompressed size in both zip headers
        data = bytearray(path.read_bytes())
        local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
        data[local + 22:local + 26] = struct.pack("<I", declared)
        data[central + 24:central + 28] = struct.pack("<I", declared)
        path.write_bytes(bytes(data))
    return path


def claimed_size(shape: tuple[int, ...]) -> int:
    """The member size an honest .npy of ``shape`` float64 values has."""
    return len(npy_header(shape)) + 8 * math.prod(shape)


def deflate_bomb(path: Path, rows: int) -> Path:
    """A real deflate bomb: ``rows`` x 2 zeros (16 bytes a row inflated, ~1000x smaller on
    disk), honest in every header."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as f:
            f.write(npy_header((rows, 2)))
            chunk = b"\0" * (1 << 20)
            left = rows * 16
            while left:
                f.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
    return path
