"""NVT thermostats against statistical mechanics, with errors from the data's own correlations.

A test compares a time average with its exact value within 4 standard errors, the error from
the integrated autocorrelation time of the series (Sokal's self-consistent window), never a
fixed percentage. The runs are deterministic (counter-based noise), so a pass is not luck
that changes from run to run.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from simrun.outputs.thermo import read_thermo_csv
from simrun.scene import SceneError, load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
MOLECULE = REPO / "scenes" / "molecule.yaml"


def standard_error(series: np.ndarray) -> float:
    """Standard error of the mean of a correlated series: sqrt(tau_int * var / n), tau_int
    = 1 + 2 sum rho(t) summed up to the first window w >= 5 tau_int (Sokal)."""
    s = np.asarray(series, dtype=np.float64) - np.mean(series)
    n = len(s)
    spectrum = np.fft.rfft(s, 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    acf /= acf[0]
    tau = 1.0
    for window in range(1, n):
        tau += 2.0 * acf[window]
        if window >= 5 * tau:
            break
    assert tau < n / 20, f"series too short for its correlation time ({tau:.0f} of {n} rows)"
    return float(np.sqrt(tau * s.var() / n))


def oscillators(folder: Path, integrator: str, steps: int, **extra: str) -> Path:
    """64 independent 2-D harmonic oscillators (k = 4, m = 1) tethered to a lattice."""
    path = folder / "oscillators.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: oscillators
        seed: 1
        particles: {{count: 64, dim: 2, mass: 1.0}}
        initial: {{type: lattice, shape: [8, 8], spacing: 1.0}}
        energy:
          - kernel: {REPO}/kernels/external.py:anchor
            params: {{k: 4.0, first: 0, count: 64}}
        integrator: {integrator}
        dt: 0.1
        steps: {steps}
        outputs: {{every: 10, xyz: false}}
        """))
    return path


LANGEVIN = "{type: langevin, temperature: 0.5, friction: 1.0}"
CSVR = "{type: csvr, temperature: 0.5, tau: 0.5}"


def test_baoab_samples_the_harmonic_oscillator_exactly(tmp_path: Path) -> None:
    """BAOAB's positions sample exp(-k x^2 / 2kT) exactly at any stable dt: <x^2> = kT / k."""
    scene = load_scene(oscillators(tmp_path, LANGEVIN, 6000), allow_outside=True)
    run_scene(scene, tmp_path / "run")
    with np.load(tmp_path / "run" / "frames.npz") as frames:
        x = frames["x"]
    squares = ((x - x[0]) ** 2).mean(axis=(1, 2))[60:]  # frames 1 time unit apart: 60 / friction
    expected = 0.5 / 4.0
    assert abs(squares.mean() - expected) < 4 * standard_error(squares)
    # the Langevin noise pushes momentum around: all 2N velocity components are thermal
    temperature = read_thermo_csv(tmp_path / "run" / "thermo.csv")["temperature"][60:]
    # BAOAB's kinetic temperature of a harmonic oscillator is kT (1 - (omega dt / 2)^2)
    biased = 0.5 * (1 - (2.0 * 0.1 / 2) ** 2)
    assert abs(temperature.mean() - biased) < 4 * standard_error(temperature)


def test_nose_hoover_chain_temperature_and_conserved_energy(tmp_path: Path) -> None:
    """A 32-bead polymer at T = 1 (it starts at 0.5): the mean kinetic temperature is the
    target within its error, and the extended energy is conserved to second order in dt."""
    nhc = "integrator={type: nose_hoover, temperature: 1.0, tau: 0.2}"
    spreads = []
    for dt, steps in ((2e-3, 8000), (1e-3, 16000)):
        scene = load_scene(MOLECULE, [nhc, f"dt={dt}", f"steps={steps}", "thermo=5",
                                      "outputs.every=4000"])
        run_scene(scene, tmp_path / f"dt{dt}")
        rows = read_thermo_csv(tmp_path / f"dt{dt}" / "thermo.csv")
        temperature = rows["temperature"][len(rows["step"]) // 5:]
        assert abs(temperature.mean() - 1.0) < 4 * standard_error(temperature)
        spreads.append(np.std(rows["conserved"]))
        assert spreads[-1] < 1e-3 * np.std(rows["total"])  # the total itself is not conserved
    assert 2.5 < spreads[0] / spreads[1] < 6  # second order: about 4


def test_rescale_sets_the_temperature_exactly(tmp_path: Path) -> None:
    scene = load_scene(MOLECULE, ["integrator={type: rescale, temperature: 2.0, every: 10}",
                                  "steps=100", "thermo=10"])
    run_scene(scene, tmp_path)
    temperature = read_thermo_csv(tmp_path / "thermo.csv")["temperature"][1:]
    assert np.allclose(temperature, 2.0, rtol=1e-12, atol=0)


@pytest.mark.parametrize("integrator", [
    LANGEVIN, "{type: nose_hoover, temperature: 0.5, tau: 1.0, chain: 2}", CSVR])
def test_deterministic_and_bit_identical_on_resume(tmp_path: Path, integrator: str) -> None:
    def run(name: str, steps: int, resume: bool = False, seed: int = 1) -> dict:
        path = oscillators(tmp_path, integrator, steps)
        warm = ["initial.temperature=0.5"] if "csvr" in integrator else []  # CSVR scales v
        scene = load_scene(path, [f"seed={seed}", *warm], allow_outside=True)
        run_scene(scene, tmp_path / name, resume=resume)
        with np.load(tmp_path / name / "frames.npz") as frames:
            return {k: frames[k] for k in frames.files}

    whole = run("whole", 200)
    again = run("again", 200)
    assert all(np.array_equal(whole[k], again[k]) for k in whole)
    run("part", 100)
    resumed = run("part", 200, resume=True)
    assert all(np.array_equal(whole[k], resumed[k]) for k in whole)
    assert (tmp_path / "part" / "thermo.csv").read_text() == \
        (tmp_path / "whole" / "thermo.csv").read_text()
    # the state a further resume starts from too: a Nose-Hoover clock (it draws no noise,
    # so it stays where the run started) read the step of the resume, not the whole run's 0
    with np.load(tmp_path / "whole" / "state.npz") as a, \
            np.load(tmp_path / "part" / "state.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        different = [k for k in a.files if not np.array_equal(a[k], b[k])]
        assert not different, {k: (a[k], b[k]) for k in different}
    other = run("other", 200, seed=2)
    if "nose_hoover" not in integrator:  # the noise follows the seed
        assert not np.array_equal(whole["x"][-1], other["x"][-1])


def test_csvr_samples_the_canonical_kinetic_energy(tmp_path: Path) -> None:
    """Bussi's thermostat on the 64 oscillators: K is Gamma-distributed with dof / 2 degrees,
    so the mean temperature is the target and var(K) / <K>^2 = 2 / dof (dof = 128: the
    scaling changes momentum, so all components count)."""
    scene = load_scene(oscillators(tmp_path, CSVR, 8000), ["thermo=2", "initial.temperature=1"],
                       allow_outside=True)  # CSVR scales velocities: a start at rest stays
    run_scene(scene, tmp_path / "run")
    rows = read_thermo_csv(tmp_path / "run" / "thermo.csv")
    temperature = rows["temperature"][200:]
    assert abs(temperature.mean() - 0.5) < 4 * standard_error(temperature)
    kinetic = rows["kinetic"][200:]
    spread = (kinetic - kinetic.mean()) ** 2 / kinetic.mean() ** 2
    assert abs(spread.mean() - 2 / 128) < 4 * standard_error(spread)


def test_csvr_chi_square_draw_has_the_chi_square_distribution() -> None:
    """CSVR's sum of n squared normals, drawn as one chi-square variate (2 Gamma(n / 2),
    Marsaglia-Tsang): 40,000 steps' draws against the chi-square law (Kolmogorov-Smirnov),
    its mean n and variance 2 n within 4 standard errors, for n = 1 (no rejection), 2 (the
    smallest Gamma shape, 1) up to a 1,024-body 2-D system's 2,047."""
    from scipy import stats

    import simrun.lang as ti
    from simrun.stepper.thermostats import chi_square_draw

    ti.init(arch=ti.cpu, default_fp=ti.f64)
    draws = ti.field(ti.f64, shape=40000)

    @ti.kernel
    def draw(n: ti.i32, key: ti.u32):
        for step in draws:
            draws[step] = chi_square_draw(n, ti.cast(step, ti.u32), key)

    for n in (1, 2, 5, 127, 2047):
        draw(n, 11)
        x = draws.to_numpy()
        assert stats.kstest(x, stats.chi2(n).cdf).pvalue > 1e-3, n
        assert abs(x.mean() - n) < 4 * np.sqrt(2 * n / len(x)), n
        fourth = 12 * n * (n + 4)  # var((x - n)^2) = E(x - n)^4 - (2 n)^2 = 8 n^2 + 48 n
        assert abs(((x - n) ** 2).mean() - 2 * n) < 4 * np.sqrt((fourth - 4 * n * n) /
                                                                len(x)), n


def test_csvr_is_the_same_bits_at_any_thread_count(tmp_path: Path) -> None:
    scene = load_scene(oscillators(tmp_path, CSVR, 300), ["initial.temperature=0.5"],
                       allow_outside=True)
    frames = []
    for threads in (1, 2):
        run_scene(scene, tmp_path / f"t{threads}", threads=threads)
        with np.load(tmp_path / f"t{threads}" / "frames.npz") as f:
            frames.append({k: f[k] for k in f.files})
    assert all(np.array_equal(frames[0][k], frames[1][k]) for k in frames[0])


def test_thermostat_parameters_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SceneError, match="missing the required key 'friction'"):
        load_scene(MOLECULE, ["integrator={type: langevin, temperature: 1.0}"])
    with pytest.raises(SceneError, match="unknown key 'damping'"):
        load_scene(MOLECULE, ["integrator={type: nose_hoover, temperature: 1, tau: 1, "
                              "damping: 0.1}"])


def test_langevin_3d_polymer_temperature(tmp_path: Path) -> None:
    """3-D Langevin on the polymer: all 3N velocity components are thermal (dof = 3N)."""
    scene = load_scene(MOLECULE, ["integrator={type: langevin, temperature: 1.0, friction: 5.0}",
                                  "steps=6000", "thermo=5", "outputs.every=3000"])
    run_scene(scene, tmp_path)
    rows = read_thermo_csv(tmp_path / "thermo.csv")
    temperature = rows["temperature"][len(rows["step"]) // 5:]
    assert np.array_equal(rows["temperature"], 2 * rows["kinetic"] / 96)
    assert abs(temperature.mean() - 1.0) < 4 * standard_error(temperature)


def test_philox_known_answers_and_normal_moments() -> None:
    """Random123's known-answer vectors for Philox-2x32-10, then the Box-Muller normals:
    mean 0, variance 1 and uncorrelated components, within their sampling errors."""
    import simrun.lang as ti
    from simrun.stepper.thermostats import gaussian_vector, philox2x32

    ti.init(arch=ti.cpu, default_fp=ti.f64)
    words = ti.field(ti.u32, shape=(3, 2))
    normals = ti.Vector.field(3, ti.f64, shape=40000)

    @ti.kernel
    def known(c0: ti.u32, c1: ti.u32, key: ti.u32, row: ti.i32):
        for _ in range(1):
            out = philox2x32(c0, c1, key)
            words[row, 0] = out[0]
            words[row, 1] = out[1]

    @ti.kernel
    def draw(step: ti.u32, key: ti.u32):
        for i in normals:
            normals[i] = gaussian_vector(i, step, key, 3)

    for row, (c0, c1, key) in enumerate([(0, 0, 0), (0xFFFFFFFF,) * 3,
                                         (0x243F6A88, 0x85A308D3, 0x13198A2E)]):
        known(c0, c1, key, row)
    assert words.to_numpy().tolist() == [[0xFF1DAE59, 0x6CD10DF2], [0x2C3F628B, 0xAB4FD7AD],
                                         [0xDD7CE038, 0xF62A4C12]]
    draw(12345, 7)
    z = normals.to_numpy()
    n = len(z)
    assert np.all(np.abs(z.mean(axis=0)) < 4 / np.sqrt(n))
    assert np.all(np.abs(z.var(axis=0) - 1) < 4 * np.sqrt(2 / n))
    corr = np.corrcoef(z.T)[np.triu_indices(3, 1)]
    assert np.all(np.abs(corr) < 4 / np.sqrt(n))
    draw(12346, 7)  # the next step draws other numbers
    assert np.abs(np.corrcoef(z[:, 0], normals.to_numpy()[:, 0])[0, 1]) < 4 / np.sqrt(n)


def test_a_run_saved_before_the_chain_was_a_field_resumes(tmp_path: Path) -> None:
    """A state.npz of an older run keeps the chain as thermostat:xi / thermostat:vxi: resumed,
    it continues as the uninterrupted run (the same bits)."""
    integrator = "{type: nose_hoover, temperature: 0.5, tau: 1.0, chain: 2}"
    warm = ["initial.temperature=0.5"]
    whole = tmp_path / "whole"
    run_scene(load_scene(oscillators(tmp_path, integrator, 200), warm, allow_outside=True),
              whole)
    part = tmp_path / "part"
    run_scene(load_scene(oscillators(tmp_path, integrator, 100), warm, allow_outside=True),
              part)
    with np.load(part / "state.npz") as saved:
        arrays = {k: saved[k] for k in saved.files}
    for name in ("xi", "vxi"):
        arrays[f"thermostat:{name}"] = arrays.pop(f"field:nvt_{name}")
    np.savez(part / "state.npz", **arrays)
    run_scene(load_scene(oscillators(tmp_path, integrator, 200), warm, allow_outside=True),
              part, resume=True)
    with np.load(whole / "state.npz") as a, np.load(part / "state.npz") as b:
        assert np.array_equal(a["x"], b["x"]) and np.array_equal(a["v"], b["v"])
