"""Writers: atomic replacement, extended XYZ read back, CSV/NPZ layouts, resume loading."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from simrun.outputs import (
    Frame,
    RunWriter,
    WriterOptions,
    atomic_savez,
    atomic_write,
    atomic_write_text,
    format_frame,
    read_energy_csv,
    read_xyz,
)
from simrun.outputs.rundir import choose_run_dir, new_run_dir
from simrun.outputs.xyz import split_frames, velocities_of
from simrun.scene import SceneError


def test_atomic_write_replaces_and_leaves_no_temporaries(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "frames.npz"
    atomic_savez(target, x=np.arange(3))

    def broken(f) -> None:
        f.write(b"partial")
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of a write

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, broken)
    with np.load(target) as data:
        assert data["x"].tolist() == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["frames.npz"]


def read_xyz_text(text: str) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "one.xyz"
        path.write_text(text)
        return read_xyz(path)[0]


def test_extended_xyz_round_trip_2d_padded() -> None:
    x = np.array([[0.1, 0.2], [0.3, 0.4]])
    v = np.array([[1.0, -1.0], [2.5, 0.0]])
    f = np.array([[0.0, 1e-9], [-3.0, 4.0]])
    text = format_frame(x, step=7, time=0.25, cell=np.diag([2.0, 3.0, 1.0]),
                        origin=np.zeros(3), masses=np.array([2.0, 1.0]), v=v, f=f,
                        energy=-1.5, pbc=(True, True, False), species=["Ar", "He"])
    lines = text.splitlines()
    assert lines[0] == "2"
    assert lines[1] == ('Lattice="2 0 0 0 3 0 0 0 1" Origin="0 0 0" '
                        'Properties=species:S:1:pos:R:3:masses:R:1:momenta:R:3:forces:R:3 '
                        'Time=0.25 Step=7 pbc="T T F" energy=-1.5')
    assert "Time=2.0 " in format_frame(x, step=1, time=2.0, cell=np.eye(3), origin=np.zeros(3))
    assert lines[2].split() == ["Ar", "0.10000000000000001", "0.20000000000000001", "0", "2",
                                "2", "-2", "0", "0", "1.0000000000000001e-09", "0"]
    assert lines[3].split()[0] == "He"
    back = read_xyz_text(text)
    assert np.array_equal(velocities_of(back)[:, :2], v)  # momenta / masses


def test_read_xyz_parses_every_frame(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    frames = [rng.random((5, 3)) for _ in range(3)]
    path = tmp_path / "t.xyz"
    path.write_text("".join(format_frame(x, step=10 * i, time=0.1 * i, cell=np.eye(3),
                                         origin=np.zeros(3)) for i, x in enumerate(frames)))
    back = read_xyz(path)
    assert len(back) == 3
    for i, frame in enumerate(back):
        assert np.array_equal(frame["pos"], frames[i])  # 17 digits: exact
        assert frame["species"] == ["X"] * 5
        assert frame["info"]["Step"] == str(10 * i)
    assert len(split_frames(path.read_text())) == 3


def test_ase_reads_our_xyz(tmp_path: Path) -> None:
    ase_io = pytest.importorskip("ase.io")
    path = tmp_path / "t.xyz"
    x, v = np.random.default_rng(1).random((4, 2)), np.ones((4, 2))
    path.write_text(format_frame(x, step=3, time=0.5, cell=np.diag([1.0, 1.0, 1.0]),
                                 origin=np.zeros(3), v=v, energy=-2.0) * 2)
    atoms = ase_io.read(path, index=":")
    assert len(atoms) == 2
    assert np.allclose(atoms[0].positions[:, :2], x) and np.allclose(atoms[0].positions[:, 2], 0)
    assert atoms[0].info["Step"] == 3 and atoms[0].info["Time"] == 0.5
    assert np.allclose(atoms[0].get_velocities()[:, :2], v)  # from momenta and masses
    assert np.allclose(atoms[0].get_masses(), 1.0)
    assert atoms[0].get_potential_energy() == -2.0


def _frame(step: int, n: int = 3) -> Frame:
    x = np.full((n, 2), float(step), dtype=np.float32)
    return Frame(step=step, time=step * 0.1, x=x, v=x * 2, kinetic=1.0 + step,
                 potential=-2.0, f=-x, state={"x0": np.zeros((n, 2))})


def test_run_writer_files(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, WriterOptions(forces=True, digits=9))
    for step in (0, 10, 20):
        writer.add(_frame(step))
    writer.flush()
    with np.load(tmp_path / "frames.npz") as data:
        assert data["step"].tolist() == [0, 10, 20] and data["x"].shape == (3, 3, 2)
        assert data["x"].dtype == np.float32 and data["f"].shape == (3, 3, 2)
        assert np.allclose(data["time"], [0.0, 1.0, 2.0])
    lines = (tmp_path / "energy.csv").read_text().splitlines()
    assert lines[0] == "step,time,kinetic,potential,total"
    table = read_energy_csv(tmp_path / "energy.csv")
    assert table["total"].tolist() == [-1.0, 9.0, 19.0]
    assert len(read_xyz(tmp_path / "trajectory.xyz")) == 3
    with np.load(tmp_path / "state.npz") as state:
        assert int(state["step"]) == 20 and "x0" in state.files


def test_writer_keeps_copies_of_live_arrays(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, WriterOptions())
    frame = _frame(10)
    writer.add(frame)
    frame.x += 1.0  # the integrator goes on in the same arrays (e.g. until Ctrl-C)
    frame.v += 1.0
    writer.flush()
    with np.load(tmp_path / "state.npz") as state, np.load(tmp_path / "frames.npz") as frames:
        assert (state["x"] == 10).all() and (state["v"] == 20).all()
        assert (frames["x"] == 10).all()


def test_writer_reloads_frames_for_resume(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, WriterOptions())
    for step in (0, 10, 20, 25):
        writer.add(_frame(step))
    writer.flush()
    again = RunWriter(tmp_path, WriterOptions())
    again.load_existing(upto_step=20, every=10)
    assert again.steps == [0, 10, 20]
    assert [e[0] for e in again.energies] == [0, 10, 20] and len(again.xyz_blocks) == 3
    again.add(_frame(30))
    again.flush()
    with np.load(tmp_path / "frames.npz") as data:
        assert data["step"].tolist() == [0, 10, 20, 30]


def test_run_dirs_are_numbered(tmp_path: Path) -> None:
    base = tmp_path / "outputs" / "demo"
    assert new_run_dir(base).name == "run-001"
    assert new_run_dir(base).name == "run-002"
    chosen = choose_run_dir("demo", None, resume=False, overwrite=False, root=tmp_path / "outputs")
    assert chosen.name == "run-003"


def test_existing_run_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SceneError, match="--overwrite"):
        choose_run_dir("demo", out, resume=False, overwrite=False)
    choose_run_dir("demo", out, resume=False, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # only our files go


def test_foreign_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("1")
    with pytest.raises(SceneError, match="holds no simrun run"):
        choose_run_dir("demo", tmp_path, resume=False, overwrite=True)


def test_run_json_is_rewritten_in_place_when_the_disk_has_no_room_for_a_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk-full path without a small tmpfs: the atomic write fails with ENOSPC."""
    import errno
    import json

    from simrun.outputs import runinfo

    path = tmp_path / "run.json"
    runinfo.write_run_info(path, {"status": "running"})

    def full(_path, _text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runinfo, "atomic_write_text", full)
    runinfo.write_run_info(path, {"status": "error", "error": "disk full"})
    assert json.loads(path.read_text()) == {"status": "error", "error": "disk full"}
    with pytest.raises(OSError):  # no run.json to overwrite: the error stands
        runinfo.write_run_info(tmp_path / "other.json", {"status": "error"})
    assert not (tmp_path / "other.json").exists()
