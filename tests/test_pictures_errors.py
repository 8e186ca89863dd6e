"""Pictures that show what the numbers carry (issue 44, item 20): the ensemble's standard
errors as error bars, g(r) targets with theirs and r with its unit, sensitivities that fill
their figure, and loss axes that end at the last iteration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from simrun.outputs.units import SYSTEMS
from simrun.render.fit import rdf_figure
from simrun.render.loss import loss_figure
from simrun.render.sensitivity import sensitivities_figure

REPO = Path(__file__).resolve().parents[1]
KEYS = {"energy.0.params.epsilon": 1.0, "energy.0.params.sigma": 1.0,
        "integrator.temperature": 1.5}


def _bars(fig):
    ax = fig.axes[0]
    fig.canvas.draw()
    return ax, [t.get_text() for t in ax.texts]


def test_ensemble_sensitivities_have_error_bars_of_the_relative_errors() -> None:
    gradients = {"energy.0.params.epsilon": -1.8, "energy.0.params.sigma": 26.7,
                 "integrator.temperature": 2.9}
    errors = {"energy.0.params.epsilon": 0.35, "energy.0.params.sigma": 7.8,
              "integrator.temperature": 0.23}
    fig = sensitivities_figure(KEYS, gradients, 2.6, errors=errors, objective_error=0.056)
    ax, labels = _bars(fig)
    bars = [c for c in ax.containers if getattr(c, "has_xerr", False)]
    assert len(bars) == 1, ax.containers
    # sigma: (p / J) dJ/dp = 26.7 / 2.6 = 10.3, its error 7.8 / 2.6 = 3.0
    assert "+10.3 +- 3" in labels and "-0.692 +- 0.13" in labels, labels
    assert "2.6 +- 0.056" in ax.get_title()
    segments = bars[0].lines[2][0].get_segments()  # the error bars' lines, one per key
    np.testing.assert_allclose([abs(s[1][0] - s[0][0]) / 2 for s in segments],
                               [0.35 / 2.6, 7.8 / 2.6, 1.5 * 0.23 / 2.6])  # p e / J


def test_sensitivities_fill_their_figure() -> None:
    """Half the old figure was margin (a fixed 34% for labels, a fixed bottom)."""
    for count in (1, 3, 8):
        keys = {f"energy.0.params.p{i}": 1.0 for i in range(count)}
        fig = sensitivities_figure(keys, {k: 0.1 * (i + 1) for i, k in enumerate(keys)}, 1.0)
        ax, _labels = _bars(fig)
        box = ax.get_position()
        assert box.width * box.height > 0.45, (count, box)


def test_rdf_targets_have_error_bars_and_r_its_unit() -> None:
    r = np.linspace(0.8, 2.6, 10)
    g, errors = 1 + 0.1 * np.sin(r), np.full(10, 0.02)
    fig = rdf_figure(r, g, {"fitted": g}, errors=errors, units=SYSTEMS["lj"])
    ax = fig.axes[0]
    assert [c.has_yerr for c in ax.containers] == [True]
    assert ax.get_xlabel() == "r [σ]"
    plt.close(fig)
    reduced = rdf_figure(r, g, {"fitted": g}, errors=None)
    assert reduced.axes[0].get_xlabel() == "r [reduced]"
    plt.close(reduced)


def test_loss_axis_ends_at_the_last_iteration() -> None:
    it = np.arange(101.0)
    fig = loss_figure({"iteration": it, "loss": -0.2 - 0.003 * it,
                       "gradient_norm": 0.1 + 0 * it})
    fig.canvas.draw()
    for ax in fig.axes:
        low, high = ax.get_xlim()
        assert (low, high) == (0.0, 100.0)
        assert all(low <= t <= high for t in ax.get_xticks() if low <= t <= high + 1e-9)


def test_render_redraws_an_ensemble_grad_folder_with_its_errors(tmp_path: Path) -> None:
    """`simrun render` of a `grad --method ensemble` folder was exit 2 ("only --method
    ensemble differentiates ..."); it redraws sensitivities.png."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    cli = [sys.executable, "-m", "simrun.cli"]
    grad = subprocess.run([*cli, "grad", str(REPO / "scenes" / "oscillators.yaml"), "--method",
                           "ensemble", "--wrt", "integrator.temperature", "--set",
                           "steps=1000", "--out", "g"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert grad.returncode == 0, grad.stderr
    picture = tmp_path / "g" / "sensitivities.png"
    picture.unlink()
    drawn = subprocess.run([*cli, "render", "g"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert drawn.returncode == 0, drawn.stderr
    assert picture.is_file() and "sensitivities.png" in drawn.stdout
