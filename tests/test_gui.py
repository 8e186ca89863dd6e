"""Headless behaviour and pixel placement of the ti.GUI-compatible canvas."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np
import pytest

from simrun.lang.gui import GUI

BG = 0x112F41
BG_RGB = np.array([0x11, 0x2F, 0x41]) / 255


@pytest.fixture(autouse=True)
def headless(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMRUN_GUI_HEADLESS", "1")
    monkeypatch.setenv("SIMRUN_GUI_DIR", str(tmp_path / "frames"))
    monkeypatch.delenv("SIMRUN_GUI_MAX_FRAMES", raising=False)


def _shot(gui: GUI, tmp_path, name: str = "shot.png") -> np.ndarray:
    """Show to a file and read it back as (h, w, 3) floats, top row first."""
    path = tmp_path / name
    gui.show(str(path))
    return mpimg.imread(path)[..., :3]


def _at(img: np.ndarray, x: float, y: float) -> np.ndarray:
    """Pixel at Taichi coordinates (x, y) in [0,1]^2, (0,0) bottom-left."""
    h, w = img.shape[:2]
    return img[min(int((1 - y) * h), h - 1), min(int(x * w), w - 1)]


def test_headless_loop_stops_after_max_frames(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SIMRUN_GUI_MAX_FRAMES", "3")
    gui = GUI("Loop test", res=(64, 48))
    shown = 0
    while gui.running:
        assert not gui.get_event(GUI.PRESS, GUI.ESCAPE)
        gui.circles(np.random.default_rng(shown).random((10, 2)), radius=2)
        gui.show()
        shown += 1
        assert shown <= 3
    assert shown == 3 and gui.frame == 3
    files = sorted((tmp_path / "frames").glob("frame_*.png"))
    assert [f.name for f in files] == [f"frame_{i:05d}.png" for i in range(3)]
    assert mpimg.imread(files[0]).shape[:2] == (48, 64)
    err = capsys.readouterr().err
    assert err.count("simrun.gui") == 1 and "frames" in err


def test_default_frame_dir_uses_sanitised_name(tmp_path, monkeypatch):
    monkeypatch.delenv("SIMRUN_GUI_DIR")
    monkeypatch.chdir(tmp_path)
    gui = GUI("Mass Spring / Robot", res=16)
    gui.show()
    assert (tmp_path / "simrun_gui" / "Mass_Spring_Robot" / "frame_00000.png").exists()


def test_red_circle_lands_at_expected_pixel(tmp_path):
    gui = GUI("circle", res=100, background_color=BG)
    gui.circle((0.25, 0.75), color=0xFF0000, radius=5)
    img = _shot(gui, tmp_path)
    assert img.shape == (100, 100, 3)
    assert np.allclose(img[25, 25], [1, 0, 0], atol=0.02)  # row 25 from the top = y 0.75
    for x, y in [(0.75, 0.75), (0.25, 0.25), (0.02, 0.02), (0.25, 0.65)]:
        assert np.allclose(_at(img, x, y), BG_RGB, atol=0.02), (x, y)


def test_circles_palette_and_per_point_radius(tmp_path):
    gui = GUI("palette", res=(120, 80))
    pos = np.array([[0.2, 0.5], [0.8, 0.5]])
    gui.circles(
        pos,
        radius=np.array([3.0, 8.0]),
        palette=[0x00FF00, 0x0000FF],
        palette_indices=np.array([0, 1]),
    )
    img = _shot(gui, tmp_path)
    assert np.allclose(_at(img, 0.2, 0.5), [0, 1, 0], atol=0.02)
    assert np.allclose(_at(img, 0.8, 0.5), [0, 0, 1], atol=0.02)
    assert np.allclose(_at(img, 0.8 + 6 / 120, 0.5), [0, 0, 1], atol=0.02)  # inside r=8
    assert np.allclose(_at(img, 0.2 + 6 / 120, 0.5), 0, atol=0.02)  # outside r=3


def test_line_triangle_rect_text_change_expected_pixels(tmp_path):
    gui = GUI("shapes", res=200, background_color=0x000000)
    gui.line((0.1, 0.1), (0.9, 0.1), radius=2, color=0xFFFF00)
    gui.triangle((0.5, 0.3), (0.9, 0.3), (0.7, 0.7), color=0x00FF00)
    gui.rect((0.05, 0.95), (0.3, 0.7), radius=1.5, color=0xFFFFFF)
    gui.text("Hi", (0.05, 0.6), font_size=20, color=0xFF00FF)
    img = _shot(gui, tmp_path)
    assert np.allclose(_at(img, 0.5, 0.1), [1, 1, 0], atol=0.05)
    assert np.allclose(_at(img, 0.7, 0.4), [0, 1, 0], atol=0.02)
    assert np.allclose(_at(img, 0.175, 0.95), [1, 1, 1], atol=0.05)  # top edge of rect
    assert np.allclose(_at(img, 0.175, 0.825), 0, atol=0.02)  # rect is only an outline
    text_box = img[int(0.4 * 200) : int(0.55 * 200), :60]
    assert (np.abs(text_box - [1, 0, 1]).sum(axis=2) < 0.1).any()
    assert np.allclose(_at(img, 0.5, 0.85), 0, atol=0.02)


def test_lines_with_per_segment_colour_and_arrow(tmp_path):
    gui = GUI("lines", res=100)
    begin = np.array([[0.1, 0.2], [0.1, 0.8]])
    end = np.array([[0.9, 0.2], [0.9, 0.8]])
    gui.lines(begin, end, radius=2, color=np.array([0xFF0000, 0x0000FF]))
    gui.arrow((0.2, 0.5), (0.6, 0.0), radius=1, color=0x00FF00)
    img = _shot(gui, tmp_path)
    assert np.allclose(_at(img, 0.5, 0.2), [1, 0, 0], atol=0.05)
    assert np.allclose(_at(img, 0.5, 0.8), [0, 0, 1], atol=0.05)
    assert _at(img, 0.5, 0.5)[1] > 0.5


@pytest.mark.parametrize("kind", ["float_rgb", "uint8_rgb", "gray", "rgba"])
def test_set_image_orientation(tmp_path, kind):
    w, h = 40, 30
    img = np.zeros((w, h, 3), np.float32)
    img[: w // 2, : h // 2] = [1, 0, 0]  # bottom-left quadrant red
    if kind == "uint8_rgb":
        img = (img * 255).astype(np.uint8)
    elif kind == "gray":
        img = img[..., 0]
    elif kind == "rgba":
        img = np.concatenate([img, np.ones((w, h, 1), np.float32)], axis=2)
    gui = GUI("image", res=(w, h))
    gui.set_image(img)
    out = _shot(gui, tmp_path)
    expected = [1, 1, 1] if kind == "gray" else [1, 0, 0]
    assert np.allclose(_at(out, 0.2, 0.2), expected, atol=0.02)
    assert np.allclose(_at(out, 0.8, 0.8), 0, atol=0.02)
    assert np.allclose(_at(out, 0.2, 0.8), 0, atol=0.02)


def test_set_image_accepts_to_numpy_objects_and_get_image(tmp_path):
    class FakeField:
        def to_numpy(self) -> np.ndarray:
            a = np.zeros((8, 6, 3), np.float32)
            a[7, 5] = [0, 0, 1]
            return a

    gui = GUI("field", res=(8, 6))
    gui.set_image(FakeField())
    got = gui.get_image()
    assert got.shape == (8, 6, 4)
    assert np.allclose(got[7, 5, :3], [0, 0, 1], atol=0.02)
    assert np.allclose(got[0, 0, :3], 0, atol=0.02)


def test_show_clears_between_frames_and_events_headless(tmp_path):
    gui = GUI("clear", res=50, background_color=BG)
    gui.circle((0.5, 0.5), color=0xFF0000, radius=10)
    first = _shot(gui, tmp_path, "a.png")
    second = _shot(gui, tmp_path, "b.png")
    assert np.allclose(_at(first, 0.5, 0.5), [1, 0, 0], atol=0.02)
    assert np.allclose(second, BG_RGB, atol=0.02)
    assert gui.frame == 2 and gui.running
    assert list(gui.get_events()) == [] and not gui.is_pressed(GUI.SPACE, GUI.LMB)
    assert gui.get_cursor_pos() == (0.5, 0.5)
    gui.running = False
    assert not gui.running
    gui.running = True
    gui.close()
    assert not gui.running


def test_show_gui_false_writes_nothing_but_file(tmp_path):
    gui = GUI("quiet", res=20, show_gui=False)
    gui.show()
    assert not (tmp_path / "frames").exists()
    gui.show(tmp_path / "only.png")
    assert (tmp_path / "only.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
