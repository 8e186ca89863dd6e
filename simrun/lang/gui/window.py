"""A `ti.GUI`-compatible canvas: a Tk window when there is a display, PNG frames otherwise.

Why: Taichi's docs and DiffTaichi examples drive a `GUI` (circles, lines, `show()`, events).
This module keeps Taichi's conventions (coordinates in [0,1] with y up, radii in pixels,
0xRRGGBB colours, palettes) and hands normalized pixel-space shapes to a canvas: matplotlib's
Agg (`mpl.py`) behind a window, PIL (`pil.py`) headless, so that a headless run never
pays for importing matplotlib and scripts run unchanged without a display.

Environment (read once, at construction; settings.py): `SIMRUN_GUI_HEADLESS=1` forces headless mode;
`SIMRUN_GUI_DIR` is where headless frames go (default `./simrun_gui/<name>`);
`SIMRUN_GUI_MAX_FRAMES=N` makes `running` False after N shown frames.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..settings import Settings


def _rgb(color: Any, n: int | None = None) -> np.ndarray:
    """0xRRGGBB int (or per-item int array, or float RGB rows) -> float RGB in [0, 1]."""
    c = np.asarray(color)
    if c.dtype.kind == "f" and c.shape[-1:] in ((3,), (4,)):
        rgb = c[..., :3].astype(np.float64)
    else:
        c = c.astype(np.int64)
        rgb = np.stack([(c >> 16) & 255, (c >> 8) & 255, c & 255], axis=-1) / 255.0
    return rgb if n is None else np.broadcast_to(rgb.reshape(-1, 3), (n, 3))


def _points(a: Any) -> np.ndarray:
    """Accept (N,2), (N,2,1), fields with `.to_numpy()`, or one point (also a 2x1 column
    vector); return float (N,2)."""
    a = np.asarray(a.to_numpy() if hasattr(a, "to_numpy") else a, dtype=np.float64)
    if a.ndim == 3 or a.shape == (2, 1):
        a = a[..., 0]
    if a.shape[-1:] != (2,):
        raise ValueError(f"GUI positions must have shape (N, 2) or (2,), got {a.shape}")
    return a.reshape(-1, 2)


def _per_item(a: Any, n: int) -> np.ndarray:
    """A scalar or one value per item -> float (n,)."""
    return np.broadcast_to(np.asarray(a, dtype=np.float64).reshape(-1), (n,))


class _Event:
    """One input event, shaped like `ti.GUI.Event`."""

    def __init__(self, type: str, key: str, pos: tuple[float, float], delta=(0, 0)) -> None:
        self.type, self.key, self.pos, self.delta = type, key, pos, delta
        self.modifier: list[str] = []


class _TkWindow:
    """Minimal Tk window: shows each frame as a PPM photo and queues key/mouse events."""

    _MOUSE = {1: "LMB", 2: "MMB", 3: "RMB"}

    def __init__(self, gui: GUI, fullscreen: bool) -> None:
        import tkinter  # optional dependency: Python builds without Tk draw headless

        self.gui, self.tk = gui, tkinter.Tk()
        self.tk.title(gui.name)
        self.tk.attributes("-fullscreen", fullscreen)
        self.label = tkinter.Label(self.tk, borderwidth=0, highlightthickness=0)
        self.label.pack()
        self.photo = None
        self.tk.protocol("WM_DELETE_WINDOW", self._on_close)
        for seq, etype in (("<KeyPress>", "Press"), ("<KeyRelease>", "Release")):
            self.tk.bind(seq, lambda e, t=etype: self._push(t, self._key(e.keysym), e))
        for seq, etype in (("<ButtonPress>", "Press"), ("<ButtonRelease>", "Release")):
            self.label.bind(seq, lambda e, t=etype: self._button(t, e))
        self.label.bind("<Motion>", lambda e: self._push("Motion", "Motion", e))
        self.label.bind("<MouseWheel>", lambda e: self._push("Press", "Wheel", e, (0, e.delta)))

    @staticmethod
    def _key(keysym: str) -> str:
        return {"space": " "}.get(keysym, keysym)

    def _pos(self, e: Any) -> tuple[float, float]:
        w, h = self.gui.res
        return (e.x / w, 1.0 - e.y / h)

    def _button(self, etype: str, e: Any) -> None:
        if e.num in (4, 5):  # X11 reports the wheel as buttons 4/5
            if etype == "Press":
                self._push("Press", "Wheel", e, (0, 120 if e.num == 4 else -120))
        else:
            self._push(etype, self._MOUSE.get(e.num, f"Button{e.num}"), e)

    def _push(self, etype: str, key: str, e: Any, delta=(0, 0)) -> None:
        pos = self._pos(e)
        self.gui._cursor = pos
        self.gui._events.append(_Event(etype, key, pos, delta))

    def _on_close(self) -> None:
        self.gui._events.append(_Event("Press", GUI.EXIT, self.gui._cursor))
        self.gui.running = False

    def update(self, rgb: np.ndarray) -> None:
        import tkinter  # optional dependency: Python builds without Tk draw headless

        h, w = rgb.shape[:2]
        ppm = b"P6 %d %d 255 " % (w, h) + np.ascontiguousarray(rgb).tobytes()
        self.photo = tkinter.PhotoImage(width=w, height=h, data=ppm, format="PPM")
        self.label.configure(image=self.photo)
        self.tk.update()

    def close(self) -> None:
        self.tk.destroy()


_MAX_PENDING = 1024  # queued canvas calls at most (GUI._paint)


def _canvas_class(windowed: bool) -> type:
    """matplotlib only behind a window; headless frames use PIL (no ~0.75 s import)."""
    if windowed:  # start-up: matplotlib only behind a window
        from .mpl import MplCanvas

        return MplCanvas
    from .pil import PilCanvas  # start-up: Pillow only when a frame is drawn

    return PilCanvas


class GUI:
    """Drop-in for Taichi 1.7's `ti.GUI`: (0,0) is bottom-left, radii in pixels, 0xRRGGBB."""

    Event = _Event
    SHIFT, ALT, CTRL, ESCAPE, RETURN, TAB = "Shift", "Alt", "Control", "Escape", "Return", "Tab"
    BACKSPACE, SPACE, CAPSLOCK = "BackSpace", " ", "Caps_Lock"
    UP, DOWN, LEFT, RIGHT = "Up", "Down", "Left", "Right"
    LMB, MMB, RMB, EXIT, WHEEL, MOVE = "LMB", "MMB", "RMB", "WMClose", "Wheel", "Motion"
    MOTION, PRESS, RELEASE = "Motion", "Press", "Release"

    def __init__(self, name: str = "Taichi", res: int | tuple[int, int] = 512,
                 background_color: int = 0x000000, show_gui: bool = True,
                 fullscreen: bool = False, fast_gui: bool = False) -> None:
        self.name = name
        self.res = (int(res), int(res)) if np.isscalar(res) else (int(res[0]), int(res[1]))
        self.background_color = background_color
        self.show_gui, self.fast_gui = show_gui, fast_gui
        self.frame = 0
        self.event: _Event | None = None
        self.key_pressed: set[str] = set()
        self.fps_limit = None
        self._events: deque[_Event] = deque()
        self._cursor = (0.5, 0.5)
        self._running = True
        settings = Settings.from_environ()
        self._max_frames = settings.gui_max_frames
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "gui"
        self.frame_dir = settings.gui_dir or Path("simrun_gui") / safe
        self._announced = False
        self._window: _TkWindow | None = None
        if show_gui and not settings.gui_headless:
            try:
                self._window = _TkWindow(self, fullscreen)
            except Exception as exc:  # no usable display after all: fall back to frames
                print(f"simrun.gui: no window ({exc}); writing frames instead", file=sys.stderr)
        self._canvas = _canvas_class(self._window is not None)(self.res)
        self._pending: list[tuple[str, tuple]] = []  # canvas calls not drawn yet (_paint)
        self.clear()

    # -- drawing --------------------------------------------------------------------------
    def _paint(self, method: str, *args: Any) -> None:
        """Queue a canvas call; it is drawn when a frame is rendered. A frame that goes
        nowhere (show_gui=False and no file, as DiffTaichi's examples run headless) then
        costs no drawing at all, as in Taichi (diffmpm_simple draws 3,600 discs 64 times an
        iteration: 0.6 s of its 2 s). Arrays are copied: the caller may reuse them."""
        if method == "clear":
            self._pending.clear()
        elif len(self._pending) >= _MAX_PENDING:  # drawn without a show: draw as it comes
            self._draw_pending()
        self._pending.append((method, tuple(np.array(a) if isinstance(a, np.ndarray) else a
                                            for a in args)))

    def _draw_pending(self) -> None:
        for method, args in self._pending:
            getattr(self._canvas, method)(*args)
        self._pending.clear()

    def _px(self, p: np.ndarray) -> np.ndarray:
        return p * np.asarray(self.res, dtype=np.float64)

    def clear(self, color: int | None = None) -> None:
        """Drop everything drawn so far and fill with `color` (default: the background)."""
        self._paint("clear", _rgb(self.background_color if color is None else color))

    def set_image(self, img: Any) -> None:
        """Paint `img[x, y]` (x right, y up), gray/RG/RGB/RGBA, float in [0,1] or unsigned ints."""
        a = np.asarray(img.to_numpy() if hasattr(img, "to_numpy") else img)
        if a.dtype.kind == "u":
            a = a.astype(np.float32) / np.iinfo(a.dtype).max
        a = np.clip(a.astype(np.float32), 0.0, 1.0)
        if a.ndim == 2:
            a = np.repeat(a[..., None], 3, axis=2)
        elif a.shape[2] == 2:
            a = np.concatenate([a, np.zeros_like(a[..., :1])], axis=2)
        elif a.shape[2] == 1:
            a = np.repeat(a, 3, axis=2)
        self._paint("set_image", a[..., :3])  # Taichi's canvas ignores image alpha

    def circles(self, pos: Any, radius: Any = 1, color: Any = 0xFFFFFF,
                palette: Any = None, palette_indices: Any = None) -> None:
        """Filled circles at `pos` (N,2) in [0,1]^2 with pixel radii."""
        xy = self._px(_points(pos))
        n = len(xy)
        if palette is not None:
            idx = np.asarray(getattr(palette_indices, "to_numpy", lambda: palette_indices)())
            color = np.asarray(palette, dtype=np.int64)[idx.astype(np.int64).reshape(n)]
        self._paint("circles", xy, _per_item(radius, n), _rgb(color, n))

    def circle(self, pos: Any, color: int = 0xFFFFFF, radius: float = 1) -> None:
        """One filled circle."""
        self.circles(_points(pos), radius=radius, color=color)

    def lines(self, begin: Any, end: Any, radius: Any = 1, color: Any = 0xFFFFFF) -> None:
        """Segments begin[i]-end[i]; `radius` is half the width in pixels."""
        segs = np.stack([self._px(_points(begin)), self._px(_points(end))], axis=1)
        n = len(segs)
        self._paint("lines", segs, _per_item(radius, n), _rgb(color, n))

    def line(self, begin: Any, end: Any, radius: float = 1, color: int = 0xFFFFFF) -> None:
        """One segment."""
        self.lines(_points(begin), _points(end), radius, color)

    def triangles(self, a: Any, b: Any, c: Any, color: Any = 0xFFFFFF) -> None:
        """Filled triangles (a[i], b[i], c[i])."""
        tri = np.stack([self._px(_points(p)) for p in (a, b, c)], axis=1)
        self._paint("triangles", tri, _rgb(color, len(tri)))

    def triangle(self, a: Any, b: Any, c: Any, color: int = 0xFFFFFF) -> None:
        """One filled triangle."""
        self.triangles(_points(a), _points(b), _points(c), color)

    def rect(self, topleft: Any, bottomright: Any, radius: float = 1,
             color: int = 0xFFFFFF) -> None:
        """Outline of an axis-aligned rectangle."""
        (x0, y0), (x1, y1) = _points(topleft)[0], _points(bottomright)[0]
        corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
        self.lines(corners, np.roll(corners, -1, axis=0), radius, color)

    def arrows(self, orig: Any, direction: Any, radius: Any = 1, color: Any = 0xFFFFFF,
               tip_scale: float = 0.2, angle: float = 45) -> None:
        """Arrows from `orig` along `direction`, drawn as three segments each."""
        o, d = _points(orig), _points(direction)
        end = o + d
        for sign in (1.0, -1.0):
            t = np.radians(180 - angle) * sign
            rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
            self.lines(end, end + d @ rot.T * tip_scale, radius, color)
        self.lines(o, end, radius, color)

    def arrow(self, orig: Any, direction: Any, radius: float = 1, color: int = 0xFFFFFF,
              **kwargs: float) -> None:
        """One arrow."""
        self.arrows(_points(orig), _points(direction), radius, color, **kwargs)

    def text(self, content: str, pos: Any, font_size: float = 15, color: int = 0xFFFFFF) -> None:
        """Text whose top-left corner is at `pos`; `font_size` in pixels."""
        x, y = self._px(_points(pos))[0]
        self._paint("text", str(content), float(x), float(y), float(font_size),
                    _rgb(color).reshape(3))

    # -- output ---------------------------------------------------------------------------
    def _render(self) -> np.ndarray:
        """Rasterize the current frame; returns (h, w, 3) uint8, top row first."""
        self._draw_pending()
        return self._canvas.render()

    def get_image(self) -> np.ndarray:
        """The current frame as float32 (w, h, 4) indexed [x, y] like Taichi's `get_image`."""
        rgb = self._render()[::-1].transpose(1, 0, 2).astype(np.float32) / 255.0
        return np.concatenate([rgb, np.ones_like(rgb[..., :1])], axis=2)

    def show(self, file: str | os.PathLike | None = None) -> None:
        """Finish the frame: save to `file`, else show it in the window or write a PNG frame
        (with show_gui=False and no file, as in Taichi, the frame goes nowhere: not drawn)."""
        drawn = file or self._window is not None or self.show_gui
        rgb = self._render() if drawn else None
        if file:
            _save_png(rgb, Path(file))
        elif self._window is not None:
            self._window.update(rgb)
        elif self.show_gui:
            if not self._announced:
                self._announced = True
                stop = "" if self._max_frames else " (set SIMRUN_GUI_MAX_FRAMES=N to stop)"
                print(f"simrun.gui: no display; writing frames to {self.frame_dir}/{stop}",
                      file=sys.stderr)
            _save_png(rgb, self.frame_dir / f"frame_{self.frame:05d}.png")
        self.frame += 1
        if self._max_frames is not None and self.frame >= self._max_frames:
            self._running = False
        self.clear()

    # -- events ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """False once closed, set False, or past `SIMRUN_GUI_MAX_FRAMES` frames."""
        return self._running

    @running.setter
    def running(self, value: bool) -> None:
        self._running = bool(value)

    def get_events(self, *e_filter: Any) -> Iterator[_Event]:
        """Pending events matching any filter: a type, a key, or a (type, key) pair."""
        wanted = {tuple(f) if isinstance(f, list) else f for f in e_filter}
        while self._events:
            e = self._events.popleft()
            (self.key_pressed.add if e.type == self.PRESS else self.key_pressed.discard)(e.key)
            e.modifier = [m for m in (self.SHIFT, self.ALT, self.CTRL) if self.is_pressed(m)]
            if not wanted or {e.type, e.key, (e.type, e.key)} & wanted:
                yield e

    def get_event(self, *e_filter: Any) -> bool:
        """Pop the next matching event into `self.event`; False when there is none."""
        for e in self.get_events(*e_filter):
            self.event = e
            return True
        return False

    def has_key_event(self) -> bool:
        """Whether events are queued (always False headless)."""
        return bool(self._events)

    def is_pressed(self, *keys: str) -> bool:
        """Whether any of `keys` is held down (modifiers match their _L/_R variants)."""
        held = self.key_pressed
        return any(k in held or f"{k}_L" in held or f"{k}_R" in held for k in keys)

    def get_cursor_pos(self) -> tuple[float, float]:
        """Last known mouse position in [0,1]^2 (the centre when there is no window)."""
        return self._cursor

    def close(self) -> None:
        """Stop running and close the window, if any."""
        self._running = False
        if self._window is not None:
            self._window.close()
            self._window = None

    def __enter__(self) -> GUI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _png(rgb: np.ndarray) -> bytes:
    """(h, w, 3) uint8 -> PNG bytes (no row filter, zlib level 1).

    Why not `Image.save`: it first imports five PIL format plugins (~30 ms), a tenth of a
    headless gravity run's start."""
    h, w = rgb.shape[:2]
    rows = np.zeros((h, 1 + 3 * w), np.uint8)  # each row: filter type 0, then RGB
    rows[:, 1:] = rgb.reshape(h, 3 * w)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + chunk(b"IEND", b""))


def _save_png(rgb: np.ndarray, path: Path) -> None:
    """Write atomically so that a viewer never reads a half-written frame; PNG unless the
    suffix names another format PIL can write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    ext = path.suffix.lower()
    if ext in ("", ".png"):
        tmp.write_bytes(_png(rgb))
    else:
        from PIL import Image  # start-up: Pillow only for formats other than PNG

        fmt = Image.registered_extensions().get(ext, "PNG")
        Image.fromarray(np.ascontiguousarray(rgb)).save(tmp, format=fmt)
    os.replace(tmp, path)
