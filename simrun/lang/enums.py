"""Taichi's enums that user code compares against (`taichi.lang.enums`)."""

import enum


class SNodeGradType(enum.Enum):
    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


class AutodiffMode(enum.Enum):
    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3
    CHECK_AUTODIFF_VALID = 4
