"""Headless behaviour and pixel placement of the ti.GUI-compatible canvas.

Pixel tests run on both canvases: PIL (what headless runs use) and matplotlib (what a window
shows, forced here through `_canvas_class` since tests have no display).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import simrun.lang.gui.window as gui_module
from simrun.lang.gui import GUI
from simrun.lang.gui.pil import PilCanvas

REPO = Path(__file__).resolve().parents[1]
BG = 0x112F41
BG_RGB = np.array([0x11, 0x2F, 0x41]) / 255


@pytest.fixture(autouse=True)
def headless(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMRUN_GUI_HEADLESS", "1")
    monkeypatch.setenv("SIMRUN_GUI_DIR", str(tmp_path / "frames"))
    monkeypatch.delenv("SIMRUN_GUI_MAX_FRAMES", raising=False)


@pytest.fixture(params=["pil", "mpl"])
def renderer(request, monkeypatch):
    """Draw with each canvas in turn; "pil" is the headless default, left as is."""
    if request.param == "mpl":
        from simrun.lang.gui.mpl import MplCanvas

        monkeypatch.setattr(gui_module, "_canvas_class", lambda windowed: MplCanvas)
    return request.param


def _read(path) -> np.ndarray:
    """A PNG as (h, w, 3) floats in [0, 1], top row first."""
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255


def _shot(gui: GUI, tmp_path, name: str = "shot.png") -> np.ndarray:
    """Show to a file and read it back as (h, w, 3) floats, top row first."""
    path = tmp_path / name
    gui.show(str(path))
    return _read(path)


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
    assert _read(files[0]).shape[:2] == (48, 64)
    err = capsys.readouterr().err
    assert err.count("simrun.gui") == 1 and "frames" in err


def test_default_frame_dir_uses_sanitised_name(tmp_path, monkeypatch):
    monkeypatch.delenv("SIMRUN_GUI_DIR")
    monkeypatch.chdir(tmp_path)
    gui = GUI("Mass Spring / Robot", res=16)
    gui.show()
    assert (tmp_path / "simrun_gui" / "Mass_Spring_Robot" / "frame_00000.png").exists()


def test_red_circle_lands_at_expected_pixel(tmp_path, renderer):
    gui = GUI("circle", res=100, background_color=BG)
    gui.circle((0.25, 0.75), color=0xFF0000, radius=5)
    img = _shot(gui, tmp_path)
    assert img.shape == (100, 100, 3)
    assert np.allclose(img[25, 25], [1, 0, 0], atol=0.02)  # row 25 from the top = y 0.75
    for x, y in [(0.75, 0.75), (0.25, 0.25), (0.02, 0.02), (0.25, 0.65)]:
        assert np.allclose(_at(img, x, y), BG_RGB, atol=0.02), (x, y)


def test_circles_palette_and_per_point_radius(tmp_path, renderer):
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


def test_line_triangle_rect_text_change_expected_pixels(tmp_path, renderer):
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


def test_lines_with_per_segment_colour_and_arrow(tmp_path, renderer):
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
def test_set_image_orientation(tmp_path, renderer, kind):
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


def test_set_image_accepts_to_numpy_objects_and_get_image(tmp_path, renderer):
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


def test_show_clears_between_frames_and_events_headless(tmp_path, renderer):
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


def test_frames_that_go_nowhere_are_never_drawn(tmp_path, monkeypatch, renderer):
    """show_gui=False without a file draws nothing (Taichi's behaviour; DiffTaichi's
    diffmpm_simple spent 0.6 s an iteration drawing 64 such frames); a frame that is saved
    has every shape, drawn from copies of the arrays it was given."""
    drawn = []
    canvas = gui_module._canvas_class(False)
    monkeypatch.setattr(canvas, "circles", lambda self, *a, _f=canvas.circles:
                        drawn.append(1) or _f(self, *a))
    gui = GUI("lazy", res=100, background_color=BG, show_gui=False)
    pos = np.array([[0.25, 0.75]])
    for _ in range(3):
        gui.circles(pos, color=0xFF0000, radius=5)
        gui.show()
    assert drawn == []
    gui.circles(pos, color=0xFF0000, radius=5)
    pos[0] = (0.75, 0.25)  # the caller reuses its array: the frame keeps the old position
    img = _shot(gui, tmp_path)
    assert drawn == [1]
    assert np.allclose(img[25, 25], [1, 0, 0], atol=0.02)
    assert np.allclose(_at(img, 0.75, 0.25), BG_RGB, atol=0.02)


# -- canvas choice and imports -----------------------------------------------------------------

_EVERY_CALL = """
    import sys
    import numpy as np
    import simrun.lang as ti

    gui = ti.GUI("No mpl", res=(64, 48), background_color=0x112F41)
    pos = np.array([[0.25, 0.75], [0.5, 0.5]])
    gui.circles(pos, radius=np.array([2.0, 4.0]), palette=[0xFF0000, 0x00FF00],
                palette_indices=np.array([0, 1]))
    gui.circle((0.9, 0.9), color=0xFFFFFF, radius=3)
    gui.lines(pos, pos[::-1] + 0.1, radius=1, color=np.array([0xFF0000, 0x0000FF]))
    gui.line((0.1, 0.1), (0.9, 0.1), radius=2)
    gui.triangles(pos, pos + [0.1, 0], pos + [0, 0.1], color=0x00FFFF)
    gui.triangle((0, 0), (0.1, 0), (0, 0.1))
    gui.rect((0.1, 0.9), (0.4, 0.6), radius=1)
    gui.arrows(pos, np.array([[0.1, 0.0], [0.0, 0.1]]), radius=1)
    gui.arrow((0.5, 0.5), (0.2, 0.1))
    gui.text("hi", (0.1, 0.3), font_size=12)
    gui.show()
    gui.set_image(np.random.default_rng(0).random((64, 48, 3)))
    gui.clear(0x000000)
    gui.get_image()
    gui.show(sys.argv[1])
    print("MPL:" + ",".join(m for m in sys.modules if m.split(".")[0] == "matplotlib"))
"""


@pytest.mark.parametrize("how", ["SIMRUN_GUI_HEADLESS", "no DISPLAY"])
def test_headless_process_never_imports_matplotlib(tmp_path, how):
    script = tmp_path / "every_call.py"
    script.write_text(textwrap.dedent(_EVERY_CALL))
    env = dict(os.environ, SIMRUN_GUI_DIR=str(tmp_path / "frames"), MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("DISPLAY", None)
    if how == "no DISPLAY":
        if not sys.platform.startswith("linux"):
            pytest.skip("only Linux decides headless mode from $DISPLAY")
        env.pop("SIMRUN_GUI_HEADLESS", None)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "last.png")], env=env,
                          cwd=tmp_path, text=True, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "MPL:\n" in proc.stdout, proc.stdout  # no matplotlib module at all
    frame = _read(tmp_path / "frames" / "frame_00000.png")
    assert np.allclose(_at(frame, 0.9, 0.9), 1, atol=0.05)  # the white circle
    assert np.allclose(_at(frame, 0.27, 0.8), [0, 1, 1], atol=0.05)  # a cyan triangle
    assert np.allclose(_at(frame, 0.95, 0.4), BG_RGB, atol=0.02)
    assert _read(tmp_path / "last.png").shape == (48, 64, 3)


class _FakeWindow:
    def __init__(self, gui, fullscreen):
        self.frames = []

    def update(self, rgb):
        self.frames.append(rgb.copy())

    def close(self):
        pass


def test_window_uses_matplotlib_and_headless_fallback_uses_pil(monkeypatch, capsys):
    from simrun.lang.gui.mpl import MplCanvas

    monkeypatch.delenv("SIMRUN_GUI_HEADLESS")  # and a display to open a window on
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(gui_module, "_TkWindow", _FakeWindow)
    gui = GUI("windowed", res=(30, 20))
    assert isinstance(gui._canvas, MplCanvas)
    gui.circle((0.5, 0.5), color=0x00FF00, radius=5)
    gui.show()
    (rgb,) = gui._window.frames
    assert rgb.shape == (20, 30, 3) and tuple(rgb[10, 15]) == (0, 255, 0)

    def no_tk(gui, fullscreen):
        raise RuntimeError("couldn't connect to display")

    monkeypatch.setattr(gui_module, "_TkWindow", no_tk)
    gui = GUI("fallback", res=(30, 20))
    assert isinstance(gui._canvas, PilCanvas) and gui._window is None
    assert "no window" in capsys.readouterr().err


# -- geometry ----------------------------------------------------------------------------------

def test_circle_is_round_centred_and_antialiased(tmp_path, renderer):
    gui = GUI("round", res=64)
    gui.circle((0.5, 0.5), color=0xFF0000, radius=12)
    img = _shot(gui, tmp_path)
    red = img[..., 0]
    inside = red > 0.5
    assert abs(inside.sum() / (np.pi * 12**2) - 1) < 0.05, inside.sum()
    ys, xs = np.nonzero(inside)
    assert abs(xs.mean() + 0.5 - 32) < 0.3 and abs(ys.mean() + 0.5 - 32) < 0.3
    # as round as the grid allows: symmetric under flips and the diagonal swap
    for other in (inside[::-1], inside[:, ::-1], inside.T):
        assert (inside != other).sum() <= 8
    yy, xx = np.mgrid[:64, :64] + 0.5
    dist = np.hypot(xx - 32, yy - 32)
    assert (red[dist < 11] > 0.98).all() and (red[dist > 13] < 0.02).all()
    edge = red[(dist > 11.5) & (dist < 12.5)]
    assert ((edge > 0.1) & (edge < 0.9)).sum() >= 10  # partial coverage on the rim


def test_tiny_and_offscreen_circles(tmp_path, renderer):
    gui = GUI("tiny", res=50)
    gui.circles(np.zeros((0, 2)), radius=3)
    gui.circles(np.array([[0.5, 0.5], [1.5, 1.5], [-0.01, 0.5]]), radius=np.array([1, 9, 4]),
                color=0xFFFFFF)
    gui.circle((0.2, 0.2), radius=0.3, color=0xFFFFFF)
    img = _shot(gui, tmp_path)
    assert _at(img, 0.5, 0.5).min() > 0.3  # a radius-1 dot still shows
    assert img[25, 0].min() > 0.3  # the left half of the clipped circle
    assert img[38:43, 8:13].max() > 0.05  # radius 0.3 leaves a faint mark
    assert np.allclose(_at(img, 0.8, 0.8), 0) and np.allclose(_at(img, 0.5, 0.2), 0)


def test_line_width_direction_and_round_caps(tmp_path, renderer):
    gui = GUI("widths", res=100)
    gui.line((0.2, 0.5), (0.8, 0.5), radius=3, color=0xFFFFFF)  # 6 px wide
    gui.line((0.1, 0.1), (0.4, 0.4), radius=1, color=0x00FF00)
    gui.line((0.6, 0.9), (0.9, 0.9), radius=0.25, color=0xFFFFFF)  # thinner than a pixel
    img = _shot(gui, tmp_path)
    col = img[:, 50, 0]  # x = 0.5 runs down rows; the line covers rows 47..52
    assert (col[48:52] > 0.98).all() and (col[:45] < 0.02).all() and (col[56:] < 0.02).all()
    assert _at(img, 0.81, 0.5)[0] > 0.9  # a round cap reaches past the end point
    assert _at(img, 0.825, 0.53)[0] < 0.1  # but is round, not square
    assert _at(img, 0.86, 0.5)[0] < 0.02
    assert _at(img, 0.25, 0.25)[1] > 0.5 and _at(img, 0.25, 0.3)[1] < 0.02
    thin = img[8:13, 62:88, 0]  # around y = 0.9
    assert (thin.max(axis=0) > 0.15).all() and thin.max() < 0.9


def test_triangles_per_item_colour_and_draw_order(tmp_path, renderer):
    gui = GUI("order", res=100, background_color=BG)
    a = np.array([[0.1, 0.1], [0.6, 0.1]])
    gui.circle((0.25, 0.2), color=0xFF0000, radius=20)  # under the first triangle
    gui.triangles(a, a + [0.3, 0], a + [0.15, 0.3], color=np.array([0x00FF00, 0x0000FF]))
    gui.circle((0.75, 0.2), color=0xFF0000, radius=3)  # over the second
    gui.triangle((0.1, 0.6), (0.3, 0.6), (0.1, 0.9), color=(1.0, 0.5, 0.0))  # float RGB
    img = _shot(gui, tmp_path)
    assert np.allclose(_at(img, 0.25, 0.2), [0, 1, 0], atol=0.02)
    assert np.allclose(_at(img, 0.15, 0.3), [1, 0, 0], atol=0.02)  # circle beside the apex
    assert np.allclose(_at(img, 0.75, 0.2), [1, 0, 0], atol=0.02)
    assert np.allclose(_at(img, 0.7, 0.15), [0, 0, 1], atol=0.02)
    assert np.allclose(_at(img, 0.15, 0.65), [1, 0.5, 0], atol=0.02)
    assert np.allclose(_at(img, 0.25, 0.85), BG_RGB, atol=0.02)  # beyond the hypotenuse


def test_set_image_is_stretched_and_drawn_over(tmp_path, renderer):
    small = np.zeros((4, 2, 3), np.float32)
    small[1, 0] = [0, 0, 1]  # x in [0.25, 0.5), y in [0, 0.5)
    gui = GUI("stretch", res=(40, 20))
    gui.circle((0.1, 0.9), color=0xFF0000, radius=2)
    gui.set_image(small)  # covers the circle
    gui.circle((0.9, 0.1), color=0xFFFF00, radius=2)
    img = _shot(gui, tmp_path)
    assert np.allclose(_at(img, 0.35, 0.2), [0, 0, 1], atol=0.02)
    assert np.allclose(_at(img, 0.1, 0.2), 0, atol=0.02)
    assert np.allclose(_at(img, 0.1, 0.9), 0, atol=0.02)
    assert np.allclose(_at(img, 0.9, 0.1), [1, 1, 0], atol=0.02)


def test_text_size_and_multiline(tmp_path, renderer):
    counts = []
    for size in (10, 30):
        gui = GUI("text", res=(200, 100))
        gui.text("Ab\nCd", (0.05, 0.95), font_size=size, color=0xFFFFFF)
        gui.text("", (0.5, 0.5))
        gui.text(123, (1.2, -0.5))  # off-canvas, not a string: no error
        img = _shot(gui, tmp_path, f"t{size}.png")
        lit = img.max(axis=2) > 0.5
        ys, xs = np.nonzero(lit)
        assert xs.min() >= 8 and ys.min() >= 3  # starts at the top-left anchor
        assert ys.max() < 100 * 0.05 + 3.5 * size  # two lines' height
        counts.append(lit.sum())
    assert counts[1] > 4 * counts[0] > 0


def test_show_file_suffix_picks_the_format(tmp_path):
    gui = GUI("formats", res=(30, 20))
    gui.circle((0.5, 0.5), color=0xFF8000, radius=6)
    png = _shot(gui, tmp_path, "a.png")
    gui.circle((0.5, 0.5), color=0xFF8000, radius=6)
    gui.show(tmp_path / "a.bmp")
    assert (tmp_path / "a.bmp").read_bytes()[:2] == b"BM"
    assert np.array_equal(_read(tmp_path / "a.bmp"), png)  # both lossless, same pixels
    assert np.allclose(png[10, 15], [1, 0x80 / 255, 0], atol=0.01)
    assert not list(tmp_path.glob(".*.tmp"))
