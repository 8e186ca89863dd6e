"""Renderers on synthetic run directories: files exist and are valid images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from simrun.render import (
    render_animation,
    render_energy,
    render_frame,
    render_run,
    run_info,
    run_meta,
    scene_of,
)
from simrun.render.animation import subsample
from simrun.render.energy import read_energy, relative_drift
from simrun.render.frames import _AXES_RECT, FramePlot, fit_limits, typical_spacing

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


def test_scene_name_boundary_box_and_module_shapes_are_drawn(tmp_path):
    run = _make_run(tmp_path, topology=False, energy_rows=0)
    (run / "scene.yaml").write_text(
        "version: 1\nname: demo\nboundary: {type: reflect, low: [-2, -2], high: [8, 8]}\n")
    (run / "run.json").write_text(json.dumps({"shapes": {"circles": [[6.5, 6.5, 1.0]]}}))
    name, shapes = run_meta(scene_of(run), run_info(run))
    assert name == "demo"
    assert shapes.boxes == [((-2.0, -2.0), (8.0, 8.0))] and shapes.circles == [(6.5, 6.5, 1.0)]
    first = render_run(run)[0]
    # the view covers the box; the obstacle is a grey disc (no particle is there)
    limits = fit_limits(np.zeros((1, 2)), shapes=shapes)
    assert limits[0, 0] < -2 and limits[0, 1] > 8
    image = np.asarray(Image.open(first).convert("RGB"), dtype=int)
    h, w, _ = image.shape
    ax0, ay0, aw, ah = _AXES_RECT
    span = limits[0, 1] - limits[0, 0]
    px = round((ax0 + aw * (6.5 - limits[0, 0]) / span) * w)
    py = round((1 - ay0 - ah * (6.5 - limits[1, 0]) / span) * h)
    assert np.abs(image[py, px] - 209).max() <= 3, image[py, px]


def test_unreadable_metadata_still_renders(tmp_path):
    run = _make_run(tmp_path, energy_rows=3)
    (run / "scene.yaml").write_text("version: [1\n")
    (run / "run.json").write_text("{not json")
    (run / "run.json").write_text(json.dumps({"shapes": {"circles": [["a", 1]], "boxes": 3}}))
    assert run_meta(scene_of(run), run_info(run))[1].circles == [] and len(render_run(run)) == 4


def test_marker_size_follows_particle_spacing():
    dense, sparse = _grid(30)[0] * 0.01, _grid(3)[0] * 10.0
    assert typical_spacing(dense) == pytest.approx(0.01)
    assert typical_spacing(sparse) == pytest.approx(10.0)
    assert typical_spacing(np.zeros((1, 2))) is None
    lots = np.random.default_rng(1).random((5000, 2))  # sampled, not 5000 x 5000
    assert 0.002 < typical_spacing(lots) < 0.02


def test_trails_leave_a_gap_at_a_periodic_wrap(tmp_path):
    t = np.linspace(0, 1, 20)
    x = np.stack([np.stack([(0.2 + t) % 1.0, np.full_like(t, 0.5)], axis=1)], axis=1)
    plot = FramePlot(fit_limits(x, box=((0, 0), (1, 1))), 1)
    plot.add_trails(x)
    trail = [c for c in plot.ax.collections if c is not plot.points][0].get_paths()[0]
    gaps = np.isnan(trail.vertices).any(axis=1)
    assert gaps.sum() == 1 and gaps[16]  # only the step from x = 1.0 back to 0.0


def test_render_run_parses_scene_and_run_json_once(tmp_path, monkeypatch):
    import yaml

    run = _make_run(tmp_path, energy_rows=3)
    (run / "scene.yaml").write_text("version: 1\nname: demo\nunits: lj\n"
                                    "particles: {count: 4, dim: 2}\n")
    (run / "run.json").write_text(json.dumps({"status": "ok"}))
    parsed = []
    real_yaml, real_json = yaml.safe_load, json.loads
    monkeypatch.setattr(yaml, "safe_load", lambda *a, **k: parsed.append("yaml") or
                        real_yaml(*a, **k))
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append("json") or
                        real_json(*a, **k))
    assert len(render_run(run)) == 4
    assert sorted(parsed) == ["json", "yaml"]


def test_fit_pictures_are_saved_atomically(tmp_path, monkeypatch):
    """A save that dies half way (a full disk) leaves the previous fit.png, whole."""
    import errno
    from types import SimpleNamespace

    from matplotlib.figure import Figure

    from simrun.render.fit import render_fit, render_rdf

    rows = [SimpleNamespace(iteration=i, loss=1.0 / (i + 1), neff=0.9, trajectory=i // 2,
                            stale=None, params=[1.0 + 0.1 * i], stage="adam") for i in range(4)]
    fit, rdf = render_fit(rows, ["energy.0.params.epsilon"], tmp_path / "fit.png"), \
        render_rdf(np.linspace(0.5, 3, 20), np.ones(20), {"fit": np.ones(20)},
                   tmp_path / "rdf.png")
    before = {p: p.read_bytes() for p in (fit, rdf)}
    assert all(Image.open(p).size[0] > 100 for p in before)

    def half_then_full(self, fname, **kwargs):
        Path(fname).write_bytes(before[fit][:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_then_full)
    with pytest.raises(OSError) as fit_error:
        render_fit(rows, ["energy.0.params.epsilon"], fit)
    with pytest.raises(OSError) as rdf_error:
        render_rdf(np.linspace(0.5, 3, 20), np.ones(20), {"fit": np.ones(20)}, rdf)
    assert fit_error.value.filename == str(fit) and rdf_error.value.filename == str(rdf)
    assert {p: p.read_bytes() for p in (fit, rdf)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.png", "rdf.png"]
