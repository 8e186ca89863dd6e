""".npz files read header first: the shape and type of each array come from its .npy header
(a few hundred bytes, inflated alone), checked against the zip member's declared size and
against what the scene can use, before a byte of data is inflated.

So a deflate bomb (3 MB on disk, 3 GB inflated) or a header that lies ((10**12, 2) values in
a small file) is refused at once, naming the file, instead of exhausting memory.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}


@dataclass(frozen=True)
class ArrayHeader:
    """What an .npy header in an .npz says about its array."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _member_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> ArrayHeader:
    name = info.filename
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        reader = _HEADER_READERS.get(version)
        if reader is None:
            raise ValueError(f"its array '{name}' is in .npy format {version}, which is not "
                             "read here (save it with NumPy's np.savez)")
        shape, _fortran, dtype = reader(f)
        data_start = f.tell()
    if dtype.hasobject:
        raise ValueError(f"its array '{name}' holds Python objects, not numbers")
    header = ArrayHeader(tuple(int(n) for n in shape), dtype)
    if data_start + header.nbytes != info.file_size:
        raise ValueError(f"its array '{name}' claims shape {header.shape} of {dtype} "
                         f"({header.nbytes:,} bytes) but the archive stores "
                         f"{max(0, info.file_size - data_start):,} bytes for it: the file is "
                         "damaged or was not written by NumPy")
    return header


def npz_headers(path: Path) -> dict[str, ArrayHeader]:
    """Array name -> header, for every array of the .npz at ``path`` (nothing inflated but
    the headers). Raises ValueError, OSError or zipfile.BadZipFile for a file that is no
    honest .npz archive."""
    with zipfile.ZipFile(path) as archive:
        return {info.filename.removesuffix(".npy"): _member_header(archive, info)
                for info in archive.infolist() if info.filename.endswith(".npy")}
