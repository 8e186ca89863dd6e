"""README.md quotes what its own commands print (issue 44: "-0.21 -> -0.52" and "142 s,
epsilon = 1.0015 +- 0.0022" that the commands no longer gave). `python bench/readme_figures.py`
runs the commands and records their figures in bench/readme_figures.json; this test reads
that record and the README's text, and reruns nothing.

Tolerance: losses, fitted values and their errors are deterministic (the same bits at any
thread count), so the README must give the recorded value rounded to the digits it prints.
Wall times depend on the machine and its load: the README's must be within 10% of the
recorded one (it says the load beside them)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECORD = json.loads((REPO / "bench" / "readme_figures.json").read_text(encoding="utf-8"))
README = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())  # lines joined
NUMBER = r"([-+]?[\d.]+(?:e[-+]?\d+)?)"
TIME_TOLERANCE = 0.10


def _at(path: str) -> float:
    value = RECORD
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return float(value)


def rounded_like(printed: str, value: float) -> float:
    """``value`` rounded to the digits ``printed`` shows (decimals, or a mantissa's)."""
    if "e" in printed.lower():
        mantissa = printed.lower().split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return float(f"{value:.{digits}e}")
    digits = len(printed.split(".")[1]) if "." in printed else 0
    return round(value, digits)


# (what, README pattern with one group per figure, record paths in order)
EXACT = [
    ("mass_spring", rf"learns to walk: loss {NUMBER} -> {NUMBER}, best {NUMBER} \((\d+) it\.",
     ["mass_spring.first_loss", "mass_spring.final_loss", "mass_spring.best_loss",
      "mass_spring.iterations"]),
    ("billiards", rf"ball 10 reaches the goal: {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["billiards.first_loss", "billiards.final_loss", "billiards.iterations"]),
    ("diffmpm", rf"muscles \(sin-wave controller\): {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["diffmpm.first_loss", "diffmpm.final_loss", "diffmpm.iterations"]),
    ("projectile", rf"stops at loss < 1e-9: {NUMBER}\)", ["projectile.final_loss"]),
    ("rigid_body", rf"robot 1: {NUMBER} -> {NUMBER} in (\d+) it\.",
     ["rigid_body.first_loss", "rigid_body.final_loss", "rigid_body.iterations"]),
    ("rigid_body_legs", rf"robot 2 \(two legs\): {NUMBER} -> {NUMBER}, best {NUMBER}",
     ["rigid_body_legs.first_loss", "rigid_body_legs.final_loss", "rigid_body_legs.best_loss"]),
    ("electric", rf"8 electrodes steer a charge: {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["electric.first_loss", "electric.final_loss", "electric.iterations"]),
    ("wave", rf"the initial height field: loss {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["wave.first_loss", "wave.final_loss", "wave.iterations"]),
    ("smoke", rf"the initial velocity field: loss {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["smoke.first_loss", "smoke.final_loss", "smoke.iterations"]),
    ("diffmpm3d", rf"64\^3 grid: {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["diffmpm3d.first_loss", "diffmpm3d.final_loss", "diffmpm3d.iterations"]),
    ("diffmpm3d command", r"simrun optimize diffmpm3d --iterations (\d+)",
     ["diffmpm3d.iterations"]),
    ("liquid", rf"12,996 fluid particles: {NUMBER} -> {NUMBER} \((\d+) it\.",
     ["liquid.first_loss", "liquid.final_loss", "liquid.iterations"]),
    ("liquid command", r"simrun optimize liquid --iterations (\d+)", ["liquid.iterations"]),
    ("liquid against Taichi", rf"and liquid {NUMBER} vs {NUMBER} \(bench/README's table",
     ["taichi_liquid.simrun.losses.0", "taichi_liquid.taichi.losses.0"]),
    ("diffmpm3d's 100 iterations", rf"iterations Taichi 1.7.4 ends at {NUMBER} \(best "
     rf"{NUMBER}\)\. The scene's own training .* holds {NUMBER} at iteration 48",
     ["taichi_diffmpm3d.taichi.losses.99", "taichi_diffmpm3d.taichi.losses.97",
      "taichi_diffmpm3d.simrun.losses.48"]),
    ("liquid's fourth loss", rf"its fourth loss {NUMBER} in both",
     ["taichi_liquid.simrun.losses.3"]),
    ("liquid's fourth loss, Taichi", rf"its fourth loss {NUMBER} in both",
     ["taichi_liquid.taichi.losses.3"]),
    ("fit_spring", rf"recovers k = {NUMBER} \+- {NUMBER} and r0 = {NUMBER} \+- {NUMBER} in "
     rf"(\d+) iterations", ["fit_spring.k.value", "fit_spring.k.error", "fit_spring.r0.value",
                            "fit_spring.r0.error", "fit_spring.iterations"]),
    ("fit_lj stages", rf"it took (\d+) Adam iterations over (\d+) runs of 6000 steps \(Adam "
     rf"alone ended at epsilon {NUMBER}, sigma {NUMBER}\), then (\d+) polish runs",
     ["fit_lj.adam_iterations", "fit_lj.adam_runs", "fit_lj.adam_mean_of_last.epsilon",
      "fit_lj.adam_mean_of_last.sigma", "fit_lj.polish_runs"]),
    ("fit_lj result", rf"\*\*epsilon = {NUMBER} \+- {NUMBER} and sigma = {NUMBER} \+- "
     rf"{NUMBER}\*\*", ["fit_lj.fitted.epsilon.value", "fit_lj.fitted.epsilon.error",
                        "fit_lj.fitted.sigma.value", "fit_lj.fitted.sigma.error"]),
    ("fit_lj check", rf"gives the pressure {NUMBER} \+- {NUMBER} \(target {NUMBER} \+- "
     rf"{NUMBER}: {NUMBER} combined errors\), U/N {NUMBER} \+- {NUMBER} \(target {NUMBER} \+- "
     rf"{NUMBER}: {NUMBER}\) and g\(r\) at chi\^2/bin {NUMBER} over (\d+) bins \(largest \|z\| "
     rf"{NUMBER}\)",
     [f"fit_lj.check.pressure.{k}" for k in ("value", "error", "target", "target_error", "z")]
     + [f"fit_lj.check.potential_per_particle.{k}"
        for k in ("value", "error", "target", "target_error", "z")]
     + ["fit_lj.check.rdf.chi2_per_bin", "fit_lj.check.rdf.bins", "fit_lj.check.rdf.largest_z"]),
    ("fit_ka stages", r"ran it: (\d+) Adam iterations, then (\d+) polish runs of 8000 steps",
     ["fit_ka.adam_iterations", "fit_ka.polish_runs"]),
    ("fit_ka result", rf"\*\*epsilon_AB = {NUMBER} \+- {NUMBER} and sigma_AB = {NUMBER} \+- "
     rf"{NUMBER}\*\* \(Kob and Andersen's 1.5 and 0.8: {NUMBER}% and {NUMBER}% off",
     [f"fit_ka.{p}[A:B].{k}" for p in ("epsilon", "sigma") for k in ("value", "error")]
     + ["fit_ka.epsilon[A:B].off_percent", "fit_ka.sigma[A:B].off_percent"]),
    ("fit_ka honesty", rf"(\d+) independent runs of (\d+) steps at the fitted values \(what "
     rf"the polish pools\): their landing points spread by {NUMBER} in epsilon_AB against their "
     rf"stated {NUMBER} \(ratio {NUMBER}\), by {NUMBER} in sigma_AB against {NUMBER} \(ratio "
     rf"{NUMBER}\); chi\^2 {NUMBER} over (\d+) degrees",
     ["fit_ka.honesty.seeds", "fit_ka.honesty.steps"]
     + [f"fit_ka.honesty.{p}[A:B].{k}" for p in ("epsilon", "sigma")
        for k in ("spread", "stated", "ratio")]
     + ["fit_ka.honesty.spread_chi2", "fit_ka.honesty.dof"]),
    ("lj horizon", rf"grows like e\^\({NUMBER} t\), to {NUMBER} at 15 time units",
     ["lj_horizon.rate", "lj_horizon.gradient"]),
    ("lj_melt rates", rf"`bench/readme_figures.py`, run while other jobs loaded the VM to "
     rf"{NUMBER}-{NUMBER}, recorded (\d+) and (\d+)",
     ["lj_melt.load_before", "lj_melt.load_after", "lj_melt.steps_per_s_default",
      "lj_melt.steps_per_s_every_100"]),
]
TIMES = [("fit_lj", r"polish runs of 24,000 steps, (\d+) s in all", "fit_lj.seconds"),
         ("fit_ka", r"\(the last two agreeing\), (\d+) s in all", "fit_ka.seconds"),
         ("fit_spring", r"in 13 iterations \((\d+) s at load", "fit_spring.seconds"),
         ("mass_spring", r"best \S+ \(100 it\., ([\d.]+) s in all", "mass_spring.seconds"),
         ("billiards", r"reaches the goal: \S+ -> \S+ \(\d+ it\., ([\d.]+) s in all",
          "billiards.seconds"),
         ("diffmpm", r"controller\): \S+ -> \S+ \(\d+ it\., ([\d.]+) s in all",
          "diffmpm.seconds"),
         ("rigid_body", r"in 20 it\., ([\d.]+) s in all", "rigid_body.seconds"),
         ("rigid_body_legs", r"\(it\. 14\), ([\d.]+) s in all", "rigid_body_legs.seconds"),
         ("electric", r"steer a charge: \S+ -> \S+ \(200 it\., ([\d.]+) s in all",
          "electric.seconds"),
         ("wave", r"\(200 it\., ([\d.]+) s in all at load 4-5", "wave.seconds"),
         ("smoke", r"\(240 it\., ([\d.]+) s in all", "smoke.seconds"),
         ("diffmpm3d", r"64\^3 grid: \S+ -> \S+ \(\d+ it\., ([\d.]+) s in all",
          "diffmpm3d.seconds"),
         ("liquid", r"12,996 fluid particles: \S+ -> \S+ \(\d+ it\., ([\d.]+) s in all",
          "liquid.seconds"),
         ("diffmpm3d run", r"either 3-D scene takes ([\d.]+) s \(diffmpm3d\)",
          "diffmpm3d_run.run_seconds"),
         ("liquid run", r"s \(diffmpm3d\) and ([\d.]+) s \(liquid\)", "liquid_run.run_seconds"),
         ("liquid iteration", r"a liquid iteration ([\d.]+) s against",
          "taichi_liquid.seconds_per_iteration.simrun"),
         ("liquid iteration, Taichi", r"a liquid iteration [\d.]+ s against ([\d.]+) s",
          "taichi_liquid.seconds_per_iteration.taichi")]


@pytest.mark.parametrize("what, pattern, paths", EXACT, ids=[e[0] for e in EXACT])
def test_readme_quotes_the_recorded_figures_to_their_digits(what: str, pattern: str,
                                                            paths: list[str]) -> None:
    found = re.search(pattern, README)
    assert found, f"README no longer has the {what} figures in the form {pattern!r}"
    for printed, path in zip(found.groups(), paths):
        recorded = _at(path)
        assert float(printed) == rounded_like(printed, recorded), (
            f"{what}: README says {printed}, bench/readme_figures.json has {recorded} ({path});"
            " run python bench/readme_figures.py and quote what it records")


@pytest.mark.parametrize("what, pattern, path", TIMES, ids=[t[0] for t in TIMES])
def test_readme_times_are_the_recorded_ones(what: str, pattern: str, path: str) -> None:
    found = re.search(pattern, README)
    assert found, f"README no longer has the {what} time in the form {pattern!r}"
    assert abs(float(found.group(1)) - _at(path)) <= TIME_TOLERANCE * _at(path), (what, path)


def test_the_3d_mpm_trainings_ran_the_iterations_the_script_sets() -> None:
    """The README's diffmpm3d and liquid figures are from as many iterations as
    bench/readme_figures.py's MPM3D_ITERATIONS sets (fewer than the originals' 100 and 501),
    run to the end."""
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  REPO / "bench" / "readme_figures.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for scene, iterations in script.MPM3D_ITERATIONS.items():
        assert (RECORD[scene]["iterations"], RECORD[scene]["status"]) == (iterations, "done")


def test_rounding_is_to_the_printed_digits() -> None:
    assert rounded_like("-0.52", -0.4772) == -0.48 != -0.52
    assert rounded_like("2e-5", 2.2136e-05) == 2e-5
    assert rounded_like("9.6e-10", 9.631e-10) == 9.6e-10
    assert rounded_like("25", 25.0) == 25
