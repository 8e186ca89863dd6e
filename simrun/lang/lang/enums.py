"""`taichi.lang.enums`."""

from ..enums import AutodiffMode, SNodeGradType

__all__ = ["AutodiffMode", "SNodeGradType"]
