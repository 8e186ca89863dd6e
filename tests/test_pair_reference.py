"""Forces by autodiff against hand-derived forces: simrun's LJ list kernel and gravity
kernel against bench/pair_ref.c (the C loop bench/pair_cycles.py times), compiled here.

The C loop writes dU/dx in closed form (dphi/dr2 by hand), so agreement to rounding checks
the kernels' reverse passes and the harness's reference at once, in f32 and f64.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def _harness():
    spec = importlib.util.spec_from_file_location("pair_cycles", BENCH / "pair_cycles.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("pair_cycles", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def harness():
    return _harness()


def _library(harness, precision: str, tmp_path):
    real = "float" if precision == "f32" else "double"
    return harness.compile_reference(real, harness.FLAGS["C -O3"], tmp_path)


@pytest.mark.parametrize("precision", ["f64", "f32"])
def test_lj_list_forces_match_closed_form(harness, precision, tmp_path):
    """A melting fcc crystal (periodic, 256 atoms, the list after 10 steps): each dU/dx
    component sums ~40 pair terms of a few ulps each; cancellation in a component can
    cost ~10x more, so 1e3 eps of the largest component bounds the difference."""
    case = harness.LJCase(4, precision, 10)
    u_sim, u_ref, err = harness.agreement(case, _library(harness, precision, tmp_path))
    eps = float(np.finfo(case.fp).eps)
    assert case.within_cutoff() < 1.0  # the skin's pairs are listed, and masked out
    assert u_sim == pytest.approx(u_ref, rel=case.pairs * eps)
    assert err < 1e3 * eps


@pytest.mark.parametrize("precision", ["f64", "f32"])
def test_gravity_forces_match_closed_form(harness, precision, tmp_path):
    """64 random bodies, all ordered pairs (open space): the same bound; U's 4096 terms
    share a sign, so their sum is off by at most ~4096 eps relative."""
    case = harness.GravityCase(64, precision, 0)
    u_sim, u_ref, err = harness.agreement(case, _library(harness, precision, tmp_path))
    eps = float(np.finfo(case.fp).eps)
    assert u_sim == pytest.approx(u_ref, rel=case.pairs * eps)
    assert err < 1e3 * eps
