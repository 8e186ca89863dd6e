"""Run outputs: atomic writers for frames (npz, extended XYZ), energies, run.json, scene."""

from simrun.outputs.atomic import (
    OutputError,
    UnwritableError,
    atomic_savez,
    atomic_write,
    atomic_write_text,
)
from simrun.outputs.runinfo import new_run_info, read_run_info, versions, write_run_info
from simrun.outputs.writer import (
                                   Frame,
                                   RunWriter,
                                   WriterOptions,
                                   read_energy_csv,
                                   write_scene,
                                   write_topology,
)
from simrun.outputs.xyz import format_frame, read_xyz

__all__ = ["Frame", "OutputError", "RunWriter", "UnwritableError", "WriterOptions", "atomic_savez", "atomic_write",
           "atomic_write_text", "format_frame", "new_run_info", "read_energy_csv",
           "read_run_info", "read_xyz", "versions", "write_run_info", "write_scene",
           "write_topology"]
