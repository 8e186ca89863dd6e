"""Renderers on synthetic run directories: files exist and are valid images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from simrun.render import render_animation, render_energy, render_frame, render_run
from simrun.render.animation import subsample
from simrun.render.energy import read_energy, relative_drift
from simrun.render.frames import fit_limits

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _grid(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An n x n sheet of points in the plane with its bonds and triangles."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    x = np.stack([i.ravel(), j.ravel()], axis=1).astype(float)
    idx = (i * n + j)[:-1, :-1].ravel()
    bonds = np.concatenate(
        [
            np.stack([(i * n + j)[:-1].ravel(), (i * n + j)[1:].ravel()], 1),
            np.stack([(i * n + j)[:, :-1].ravel(), (i * n + j)[:, 1:].ravel()], 1),
        ]
    )
    tris = np.concatenate(
        [np.stack([idx, idx + n, idx + 1], 1), np.stack([idx + 1, idx + n, idx + n + 1], 1)]
    )
    return x, bonds, tris


def _write_energy(path: Path, rows: int) -> None:
    t = np.arange(rows) * 0.01
    ke = 1.0 + 0.5 * np.sin(t * 3)
    pe = 2.0 - ke + 1e-3 * t
    table = np.c_[np.arange(rows), t, ke, pe, ke + pe]
    np.savetxt(
        path,
        table,
        delimiter=",",
        header="step,time,kinetic,potential,total",
        comments="",
        fmt="%.10g",
    )


def _make_run(
    root: Path, *, dim: int = 2, frames: int = 12, topology: bool = True, energy_rows: int = 12
) -> Path:
    run = root / f"run{dim}d"
    run.mkdir()
    x0, bonds, tris = _grid(5)
    if dim == 3:
        x0 = np.c_[x0, np.sin(x0[:, 0])]
    steps = np.arange(frames)
    wobble = 0.1 * np.sin(steps)[:, None, None] * np.ones((1, len(x0), dim))
    x = x0[None] + wobble + 0.05 * steps[:, None, None]
    np.savez(run / "frames.npz", step=steps * 10, time=steps * 0.1, x=x, v=np.zeros_like(x))
    if topology:
        np.savez(run / "topology.npz", bonds=bonds, triangles=tris)
    if energy_rows:
        _write_energy(run / "energy.csv", energy_rows)
    return run


def _check_png(path: Path) -> tuple[int, int]:
    assert path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as im:
        assert im.width > 0 and im.height > 0
        return im.size


def _gif_frames(path: Path) -> int:
    assert path.read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    with Image.open(path) as im:
        assert im.width > 0 and im.height > 0
        return im.n_frames


@pytest.mark.parametrize("dim", [2, 3])
def test_render_run_writes_all_outputs(tmp_path, dim):
    run = _make_run(tmp_path, dim=dim)
    paths = render_run(run)
    assert [p.name for p in paths] == ["first.png", "last.png", "energy.png", "animation.gif"]
    for p in paths[:3]:
        _check_png(p)
    assert _gif_frames(paths[3]) > 1
    assert not list(run.glob(".*tmp*")), "temporary files must not be left behind"


def test_render_run_without_topology_or_energy(tmp_path):
    run = _make_run(tmp_path, topology=False, energy_rows=0)
    names = [p.name for p in render_run(run)]
    assert names == ["first.png", "last.png", "animation.gif"]


def test_render_run_empty_dir_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        render_run(tmp_path)


def test_render_frame_bonds_and_triangles_draw(tmp_path):
    x, bonds, tris = _grid(4)
    plain = render_frame(x, path=tmp_path / "plain.png")
    meshed = render_frame(x, bonds=bonds, triangles=tris, title="mesh", path=tmp_path / "mesh.png")
    assert _check_png(plain) == _check_png(meshed)
    a = np.asarray(Image.open(plain).convert("RGB"), dtype=int)
    b = np.asarray(Image.open(meshed).convert("RGB"), dtype=int)
    assert (np.abs(a - b).sum(axis=2) > 30).mean() > 0.05  # the mesh covers a real area


def test_render_frame_3d_and_fixed_box(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    _check_png(render_frame(x, title="3-D", path=tmp_path / "a.png"))
    box = ((-5, -5, -5), (5, 5, 5))
    _check_png(render_frame(x, box=box, path=tmp_path / "b.png"))
    assert np.allclose(fit_limits(x, box), [[-5, 5], [-5, 5]])


def test_render_frame_degenerate_inputs(tmp_path):
    _check_png(render_frame(np.zeros((1, 2)), path=tmp_path / "one.png"))
    _check_png(render_frame(np.array([[0.0, 0.0], [np.nan, 1.0]]), path=tmp_path / "nan.png"))
    _check_png(render_frame(np.linspace(0, 1, 5), path=tmp_path / "line.png"))


@pytest.mark.parametrize("rows", [0, 1, 2, 500])
def test_render_energy_any_length(tmp_path, rows):
    csv = tmp_path / "energy.csv"
    _write_energy(csv, rows)
    _check_png(render_energy(csv, tmp_path / "energy.png"))
    assert len(read_energy(csv)["total"]) == rows


def test_relative_drift_handles_zero_start():
    assert np.allclose(relative_drift(np.array([2.0, 2.2, 1.8])), [0, 0.1, -0.1])
    assert np.all(np.isfinite(relative_drift(np.array([0.0, 1.0, -2.0]))))


def test_animation_subsamples_and_keeps_endpoints(tmp_path):
    run = _make_run(tmp_path, dim=3, frames=40, energy_rows=0)
    gif = render_animation(run / "frames.npz", tmp_path / "out.gif", max_frames=7, fps=10)
    assert 1 < _gif_frames(gif) <= 7
    picks = subsample(40, 7)
    assert picks[0] == 0 and picks[-1] == 39 and len(picks) == 7
    assert list(subsample(3, 60)) == [0, 1, 2]


def test_animation_single_frame(tmp_path):
    run = _make_run(tmp_path, frames=1, topology=False, energy_rows=1)
    assert _gif_frames(render_animation(run / "frames.npz", tmp_path / "one.gif")) == 1
