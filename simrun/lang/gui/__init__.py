"""`ti.GUI`: window.py (the GUI, Taichi's conventions, a Tk window or PNG frames) draws through
a canvas: mpl.py (matplotlib's Agg, behind a window) or pil.py (PIL, headless)."""

from .window import GUI

__all__ = ["GUI"]
