"""Species in a scene (scene/species.py, stepper/pairs.py, kernels/lj.py:lj_species*): the
Kob-Andersen mixture's energy and forces against a NumPy double loop over pairs (minimum
image), mixing rules against LAMMPS's formulas, energy conservation in NVE, the species in
trajectory.xyz read back with ASE, and bad input as one paragraph with exit 2."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simrun.scene import initial_state, load_scene
from simrun.scene.species import type_ids
from simrun.stepper.system import System
from tests.cli_helpers import simrun

REPO = Path(__file__).resolve().parents[1]
KA = REPO / "scenes" / "kob_andersen.yaml"
EPS = np.finfo(np.float64).eps
SIDE = 9.410360288810283
# Kob and Andersen's parameters (A, B): epsilon, sigma, cutoff 2.5 sigma
KA_EPSILON = np.array([[1.0, 1.5], [1.5, 0.5]])
KA_SIGMA = np.array([[1.0, 0.8], [0.8, 0.88]])
JITTERED = ["initial.jitter=0.1"]  # off the lattice, so no two separations are equal


def _reference(x: np.ndarray, types: np.ndarray, shifted: bool
               ) -> tuple[float, np.ndarray, float, float]:
    """Energy and forces by a plain double loop over pairs i < j (minimum image), and the
    rounding scales of both: sum |terms| and sum |pair force| x |r|."""
    n = len(x)
    forces = np.zeros_like(x)
    energy, energy_scale, force_scale = 0.0, 0.0, 0.0
    for i in range(n - 1):
        d = x[i + 1:] - x[i]
        d -= SIDE * np.round(d / SIDE)
        r2 = (d * d).sum(1)
        a, b = types[i], types[i + 1:]
        eps, sig = KA_EPSILON[a, b], KA_SIGMA[a, b]
        rc = 2.5 * sig
        inside = r2 < rc * rc
        s6 = (sig * sig / r2) ** 3
        terms = 4 * eps * (s6 * s6 - s6)
        if shifted:
            c6 = (1 / 2.5) ** 6
            terms = terms - 4 * eps * (c6 * c6 - c6)
        du_dr2 = 4 * eps * (-6 * s6 * s6 + 3 * s6) / r2
        pair = np.where(inside, 2 * du_dr2, 0.0)[:, None] * d  # dU/dx_j; -that on x_i
        energy += terms[inside].sum()
        energy_scale += np.abs(terms[inside]).sum()
        force_scale += np.abs(pair).sum()
        forces[i + 1:] -= pair
        forces[i] += pair.sum(0)
    return energy, forces, energy_scale, force_scale


@pytest.mark.parametrize("kernel", ["lj_species", "lj_species_shifted"])
def test_mixture_energy_and_forces_equal_a_numpy_double_loop(kernel):
    scene = load_scene(KA, [*JITTERED, f"energy.0.kernel=kernels/lj.py:{kernel}"])
    x, _ = initial_state(scene)
    types = type_ids(scene.particles.species)
    assert sorted(np.bincount(types)) == [200, 800]
    system = System(scene, x)
    system.x.from_numpy(x)
    u, f = system.forces()
    want_u, want_f, u_scale, f_scale = _reference(x, types, kernel.endswith("shifted"))
    n = len(x)
    assert abs(u - want_u) <= n * EPS * u_scale
    np.testing.assert_allclose(f, want_f, rtol=0, atol=n * EPS * f_scale)
    # the mixture is a mixture: the same positions all-A give another energy
    assert abs(u - _reference(x, np.zeros(n, int), kernel.endswith("shifted"))[0]) \
        > 1e3 * n * EPS * u_scale


def test_species_kernel_with_numbers_equals_the_single_species_kernel(tmp_path):
    """One number fills every pair: lj_species_shifted on plain params is lj_shifted."""
    base = REPO / "scenes" / "lj_nvt.yaml"
    plain = load_scene(base, ["initial.jitter=0.1"])
    mixed = load_scene(base, ["initial.jitter=0.1",
                              "energy.0.kernel=kernels/lj.py:lj_species_shifted",
                              "energy.0.params={epsilon: 1.0, sigma: 1.0, cutoff: 2.0}"])
    x, _ = initial_state(plain)
    u_plain, f_plain = System(plain, x).forces()
    u_mixed, f_mixed = System(mixed, x).forces()
    scale = abs(u_plain) + 1.0
    assert u_mixed == pytest.approx(u_plain, rel=0, abs=len(x) * EPS * scale * 100)
    np.testing.assert_allclose(f_mixed, f_plain, rtol=0,
                               atol=len(x) * EPS * 100 * np.abs(f_plain).max())


def _mixed(tmp_path: Path, rule: str, extra: str = "") -> Path:
    path = tmp_path / f"mix_{rule}.yaml"
    path.write_text(f"""version: 2
name: mix
particles: {{dim: 3, species: {{A: 4, B: 3, C: 1}}}}
initial: {{type: random, low: [0, 0, 0], high: [6, 6, 6]}}
boundary: {{type: periodic, low: [0, 0, 0], high: [6, 6, 6]}}
neighbors: {{cutoff: 2.8, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species
    mix: {rule}
    params:
      epsilon: {{A: 1.0, B: 0.5, C: 2.0{extra}}}
      sigma: {{A: 1.0, B: 0.88, C: 0.7}}
      cutoff: {{A: 2.5, B: 2.2, C: 1.75}}
dt: 0.001
steps: 1
""")
    return path


@pytest.mark.parametrize("rule", ["geometric", "arithmetic"])
def test_mixing_rules_are_lammps_formulas(tmp_path, rule):
    """pair_modify mix: epsilon_ij = sqrt(eps_i eps_j) under both; sigma_ij and the cutoff
    sqrt(s_i s_j) (geometric) or (s_i + s_j) / 2 (arithmetic); a given pair is kept."""
    term = load_scene(_mixed(tmp_path, rule, ', "C,A": 3.25'), allow_outside=True).energy[0]
    assert term.types == ("A", "B", "C")
    eps, sig, cut = (np.array(term.pairs[n]) for n in ("epsilon", "sigma", "cutoff"))
    like_eps, like_sig, like_cut = [1.0, 0.5, 2.0], [1.0, 0.88, 0.7], [2.5, 2.2, 1.75]
    for i in range(3):
        for j in range(3):
            want_eps = 3.25 if {i, j} == {0, 2} else math.sqrt(like_eps[i] * like_eps[j])
            assert eps[i, j] == want_eps
            for got, like in ((sig, like_sig), (cut, like_cut)):
                want = math.sqrt(like[i] * like[j]) if rule == "geometric" \
                    else (like[i] + like[j]) / 2
                assert got[i, j] == want


def test_resolved_scene_reloads_to_the_same_species_and_pairs(tmp_path):
    """run folders keep scene.to_dict(): counts dealt at random come back as the same list,
    mixed pairs as every pair written out."""
    scene = load_scene(KA)
    assert scene.particles.species.count("B") == 200
    assert scene.particles.species[:800] != ("A",) * 800  # dealt at random
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(scene.to_dict()))
    again = load_scene(copy, allow_outside=True)
    assert again.particles == scene.particles
    assert again.energy[0].pairs == scene.energy[0].pairs
    mixed = load_scene(_mixed(tmp_path, "geometric"), allow_outside=True)
    copy.write_text(yaml.safe_dump(mixed.to_dict()))
    assert load_scene(copy, allow_outside=True).energy[0].pairs == mixed.energy[0].pairs


def test_mixture_conserves_energy_in_nve_and_writes_its_species(tmp_path):
    """Velocity Verlet on the mixture (the cut-and-shifted form: no jump in the energy at
    the cutoffs): the total energy's drift is a small fraction of the potential energy's
    own change, which it would follow if the forces were not -dU/dx. The frames carry the
    species, for ASE (trajectory.xyz) and for Run.atoms()."""
    import ase.io  # noqa: PLC0415 - optional dependency (the test extra has it)

    import simrun  # noqa: PLC0415 - the package's public API, as a user calls it

    run = simrun.run_scene(KA, tmp_path / "run", steps=400, render=False,
                           sets=["integrator=velocity_verlet", "dt=0.002",
                                 "outputs.every=20"])
    total, potential = run.total, run.potential
    swing = potential.max() - potential.min()
    assert swing > 100  # the lattice melts: the check below is not vacuous
    assert np.abs(total - total[0]).max() < 1e-3 * swing
    want = list(load_scene(KA).particles.species)
    read = ase.io.read(tmp_path / "run" / "trajectory.xyz", index=-1)
    types = ["A", "B"]
    assert [types[t - 1] for t in read.get_tags()] == want
    atoms = run.atoms(-1)
    assert [types[t - 1] for t in atoms.get_tags()] == want
    assert list(atoms.arrays["species"]) == want
    np.testing.assert_allclose(atoms.positions, read.positions, rtol=0, atol=1e-12)


def _kernels_beside(folder: Path) -> None:
    """kernels/lj.py beside the scene, as a user's project has it (a link would resolve to
    a module outside the scene's folder)."""
    (folder / "kernels").mkdir()
    (folder / "kernels" / "lj.py").write_text((REPO / "kernels" / "lj.py").read_text())


BAD = [
    ("epsilon: {A: 1.0, B: 0.5}", "", "gives no value for the species pair A,B",
     "mix: geometric"),
    ('epsilon: {A: 1.0, "A,Q": 1.5, B: 0.5}', "", "names species 'Q'", "species: A, B"),
    ('epsilon: {A: 1.0, "A,B": 1.5, "B,A": 1.5, B: 0.5}', "", "gives the pair A,B twice", ""),
    ('epsilon: {A: 1.0, "A,B": 1.5, B: 0.5}', "lj", "takes one number", "lj_species"),
    ('epsilon: {A: 1.0, "A,B": 1.5, B: 0.5}\n      sigma: {A: 1.0, "A,B": 2.6, B: 0.88}',
     "", "sigma < cutoff", "species pair A,B"),
    ("epsilon: {A: 1.0, B: 0.5}\n      cutoff: {A: 2.5, B: 3.5}", "mix", "cutoff <= list_cutoff",
     "species pair A,B"),
    ('epsilon: {A: 1.0, "A,B": 1e39, B: 0.5}', "f32", "more than a f32 float holds",
     "species pair A,B"),
]


@pytest.mark.parametrize("params,variant,what,fix", BAD)
def test_bad_pair_parameters_are_one_paragraph_with_exit_2(tmp_path, params, variant, what,
                                                           fix):
    kernel = "lj" if variant == "lj" else "lj_species"
    mix = "\n    mix: arithmetic" if variant == "mix" else ""
    path = tmp_path / "bad.yaml"
    precision = "f32" if variant == "f32" else "f64"
    path.write_text(f"""version: 2
name: bad
precision: {precision}
particles: {{dim: 3, species: {{A: 4, B: 4}}}}
initial: {{type: lattice, shape: [2, 2, 2], spacing: [1.5, 1.5, 1.5]}}
boundary: {{type: periodic, low: [0, 0, 0], high: [6, 6, 6]}}
neighbors: {{cutoff: 2.5, skin: 0.2}}
energy:
  - kernel: kernels/lj.py:{kernel}{mix}
    params:
      {params}
dt: 0.001
steps: 1
""")
    _kernels_beside(tmp_path)
    result = simrun("check", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    err = result.stderr
    assert "Traceback" not in err and what in err and fix in err, err
    assert err.startswith("error: bad.yaml:") and err.count("\n") == 1, err


BAD_PARTICLES = [
    ("{dim: 3, count: 9, species: {A: 4, B: 4}}", "add up to 8"),
    ("{dim: 3, species: {A: 4, B: 4}, mass: {A: 1.0, C: 2.0}}", "names species 'C'"),
    ("{dim: 3, species: {A: 4, B: 4}, mass: {A: 1.0}}", "no mass for species B"),
    ("{dim: 3, count: 8, species: A, species_order: random}", "gives no counts"),
    ("{dim: 3, species: {A: 4, B: 4}, species_order: shuffled}", "species_order"),
]


@pytest.mark.parametrize("particles,what", BAD_PARTICLES)
def test_bad_species_are_one_paragraph_at_their_line(tmp_path, particles, what):
    path = tmp_path / "bad.yaml"
    path.write_text(f"""version: 2
name: bad
particles: {particles}
initial: {{type: lattice, shape: [2, 2, 2], spacing: [1.5, 1.5, 1.5]}}
energy: [{{kernel: kernels/lj.py:lj_all_pairs}}]
dt: 0.001
steps: 1
""")
    _kernels_beside(tmp_path)
    result = simrun("check", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and what in result.stderr, result.stderr
    assert "bad.yaml:3:" in result.stderr, result.stderr


def test_species_come_from_the_initial_files_own_column(tmp_path):
    """initial: {type: file} with an extended-XYZ file (as trajectory.xyz or ASE write it):
    its species name the particles where the scene names none, and masses per species
    and pair parameters use them."""
    from simrun.outputs.xyz import format_frame  # noqa: PLC0415 - the writer of the file

    rng = np.random.default_rng(3)
    x = rng.uniform(0, 6, size=(8, 3))
    names = ["Ar", "Kr", "Ar", "Ar", "Kr", "Ar", "Kr", "Ar"]
    (tmp_path / "start.xyz").write_text(format_frame(x, step=0, time=0.0, cell=None,
                                                     origin=None, species=names))
    path = tmp_path / "from_file.yaml"
    path.write_text(f"""version: 2
name: from_file
particles: {{count: 8, dim: 3, mass: {{Ar: 39.948, Kr: 83.798}}}}
initial: {{type: file, path: start.xyz}}
boundary: {{type: periodic, low: [0, 0, 0], high: [6, 6, 6]}}
neighbors: {{cutoff: 2.5, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species
    mix: arithmetic
    params: {{epsilon: {{Ar: 1.0, Kr: 1.4}}, sigma: {{Ar: 1.0, Kr: 1.1}}}}
dt: 0.001
steps: 1
""")
    scene = load_scene(path, allow_outside=True)
    assert list(scene.particles.species) == names
    assert scene.particles.masses == tuple(39.948 if n == "Ar" else 83.798 for n in names)
    assert scene.energy[0].types == ("Ar", "Kr")
    assert scene.energy[0].pairs["sigma"][0][1] == (1.0 + 1.1) / 2
    named = load_scene(path, ["particles.species=Xe", "particles.mass=1.0",
                              "energy.0.params={epsilon: {Xe: 1.0}, sigma: {Xe: 1.0}}"],
                       allow_outside=True)
    assert set(named.particles.species) == {"Xe"}  # the scene's names win


def _small_mixture(tmp_path: Path) -> Path:
    path = tmp_path / "small_mixture.yaml"
    path.write_text(f"""version: 2
name: small_mixture
seed: 4
particles: {{dim: 3, species: {{A: 48, B: 16}}, species_order: random}}
initial: {{type: lattice, shape: [4, 4, 4], spacing: [1.1, 1.1, 1.1], jitter: 0.05,
           temperature: 1.0}}
boundary: {{type: periodic, low: [0, 0, 0], high: [4.4, 4.4, 4.4]}}
neighbors: {{cutoff: 1.9, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species_shifted
    params:
      epsilon: {{A: 1.0, "A,B": 1.5, B: 0.5}}
      sigma: {{A: 1.0, "A,B": 0.8, B: 0.88}}
      cutoff: 1.8
integrator: velocity_verlet
objective: {{builtin: potential, at: end}}
dt: 0.002
steps: 20
""")
    return path


def test_grad_per_pair_keys_match_central_differences(tmp_path):
    """dJ/d epsilon_AB (a mask over the pair field's two symmetric entries), d/d sigma_BB
    and d/d cutoff (one number for every pair) by the adjoint, against central
    differences of J with the scene's value moved."""
    from simrun.jobs.grad import objective_value, scene_gradient  # noqa: PLC0415
    from simrun.keys import parse_key, value_of, with_value  # noqa: PLC0415

    scene = load_scene(_small_mixture(tmp_path), allow_outside=True)
    wrt = ["energy.0.params.epsilon[A:B]", "energy.0.params.sigma[B:B]",
           "energy.0.params.epsilon[A:A]", "energy.0.params.cutoff"]
    result = scene_gradient(scene, wrt, threads=1)
    for text in wrt:
        key = parse_key(scene, text)
        value, h = value_of(scene, key), 1e-5
        up = objective_value(with_value(scene, key, value + h), scene.steps, threads=1)
        down = objective_value(with_value(scene, key, value - h), scene.steps, threads=1)
        numeric = (up - down) / (2 * h)
        got = float(np.asarray(result.gradients[key.text]))
        assert got == pytest.approx(numeric, rel=1e-5, abs=1e-7), (text, got, numeric)
    assert abs(float(result.gradients["energy.0.params.epsilon[A:B]"])) > 1.0  # not vacuous


ENSEMBLE = ["--method", "ensemble", "--set", "integrator={type: langevin, temperature: 1.0, "
            "friction: 1.0}", "--set", "objective={builtin: pressure, at: mean}"]


@pytest.mark.parametrize("args,what", [
    (["--wrt", "energy.0.params.epsilon[A:C]"], "energy.0.params.epsilon[A:B]"),
    (["--wrt", "energy.0.params.epsilon[B,A]"], "write this KEY as "
     "energy.0.params.epsilon[A:B]"),
    ([*ENSEMBLE, "--wrt", "energy.0.params.sigma[B:A]"],
     "write this KEY as energy.0.params.sigma[A:B]"),
])
def test_bad_per_pair_keys_are_one_paragraph_with_exit_2(tmp_path, args, what):
    path = _small_mixture(tmp_path)
    done = simrun("grad", str(path), "--allow-outside", *args, "--out", "g", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert what in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_grad_cli_per_pair_keys_reverse_checked_and_forward_alike(tmp_path):
    """`simrun grad` with per-pair KEYs: reverse mode passes its own central-difference
    check, and forward mode (the pair field's dual seeded by the KEY's mask) gives the same
    derivatives to rounding."""
    import json  # noqa: PLC0415 - only this test reads gradients.json

    path = _small_mixture(tmp_path)
    wrt = ["--wrt", "energy.0.params.epsilon[A:B]", "--wrt", "energy.0.params.sigma[A:A]"]
    reverse = simrun("grad", str(path), "--allow-outside", *wrt, "--check", "--out", "r",
                     cwd=tmp_path)
    assert reverse.returncode == 0, reverse.stderr
    forward = simrun("grad", str(path), "--allow-outside", *wrt, "--mode", "forward",
                     "--out", "f", cwd=tmp_path)
    assert forward.returncode == 0, forward.stderr
    by_reverse = json.loads((tmp_path / "r" / "gradients.json").read_text())
    by_forward = json.loads((tmp_path / "f" / "gradients.json").read_text())
    assert by_reverse["check"]["ok"], by_reverse["check"]
    for key, value in by_reverse["gradients"].items():
        assert by_forward["gradients"][key] == pytest.approx(value, rel=1e-9)


def test_optimize_moves_a_pair_parameter_and_best_yaml_keeps_it(tmp_path):
    """simrun optimize over epsilon_AB (J = U at the end: dJ/d epsilon_AB < 0, so Adam
    raises it, inside its bounds); best.yaml reloads with the new A,B value and the other
    pairs as they were."""
    path = _small_mixture(tmp_path)
    key = "energy.0.params.epsilon[A:B]"
    spec = (f'optimize={{parameters: ["{key}"], optimizer: adam, iterations: 3, lr: 0.01, '
            f'bounds: {{"{key}": [1.0, 1.52]}}}}')
    done = simrun("optimize", str(path), "--allow-outside", "--set", spec, "--out", "o",
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    best = load_scene(tmp_path / "o" / "best.yaml", allow_outside=True).energy[0].pairs
    start = load_scene(path, allow_outside=True).energy[0].pairs
    assert 1.5 < best["epsilon"][0][1] == best["epsilon"][1][0] <= 1.52
    assert best["epsilon"][0][0] == start["epsilon"][0][0]
    assert best["epsilon"][1][1] == start["epsilon"][1][1] and best["sigma"] == start["sigma"]


def test_ensemble_frames_per_pair_derivatives_match_central_differences(tmp_path):
    """The ensemble method's per-frame dU/d epsilon_AB and d(dU/ds)/d sigma_AB (what the
    fluctuation formula and the pressure's derivative are made of) against central
    differences of U and of the virial dU/ds with the pair's value moved in the scene."""
    from simrun.ensemble.frames import FrameEvaluator  # noqa: PLC0415
    from simrun.ensemble.keys import parse_ensemble_key  # noqa: PLC0415
    from simrun.keys import value_of, with_value  # noqa: PLC0415
    from simrun.stepper.pressure import box_derivative  # noqa: PLC0415

    scene = load_scene(_small_mixture(tmp_path), [
        "integrator={type: langevin, temperature: 1.0, friction: 1.0}",
        "objective={builtin: pressure, at: mean}"], allow_outside=True)
    keys = [parse_ensemble_key(scene, k) for k in
            ("energy.0.params.epsilon[A:B]", "energy.0.params.sigma[A:B]",
             "energy.0.params.cutoff")]
    x, _ = initial_state(scene)
    table = FrameEvaluator(scene, [(k.index, k.term_param) for k in keys], threads=1) \
        .evaluate(x[None])

    def energy_and_virial(moved):
        system = System(moved, x, threads=1)
        system.x.from_numpy(x)
        return system.forces()[0], box_derivative(system)

    for column, key in enumerate(keys):
        h = 1e-6
        up = energy_and_virial(with_value(scene, key, value_of(scene, key) + h))
        down = energy_and_virial(with_value(scene, key, value_of(scene, key) - h))
        assert table.grad[0, column] == pytest.approx((up[0] - down[0]) / (2 * h), rel=1e-6)
        assert table.virial_grad[0, column] == pytest.approx((up[1] - down[1]) / (2 * h),
                                                              rel=1e-6)
    assert abs(table.grad[0, 0]) > 1.0  # the A,B pairs matter here


def test_grad_ensemble_takes_per_pair_keys(tmp_path):
    """`simrun grad --method ensemble` with a per-pair KEY runs and reports it (its
    per-frame derivatives are checked above against central differences)."""
    import json  # noqa: PLC0415 - only this test reads gradients.json

    path = _small_mixture(tmp_path)
    done = simrun("grad", str(path), "--allow-outside", *ENSEMBLE, "--set", "steps=1000",
                  "--wrt", "energy.0.params.epsilon[A:B]", "--out", "e", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "e" / "gradients.json").read_text())
    assert np.isfinite(result["gradients"]["energy.0.params.epsilon[A:B]"])


def test_list_without_cutoff_reaches_the_largest_pair_cutoff(tmp_path):
    """neighbors: {skin} alone: the list's cutoff is the largest pair cutoff (as LAMMPS
    builds its list), and the energy is the one a longer list gives."""
    path = _small_mixture(tmp_path)
    pairs = 'energy.0.params.cutoff={A: 1.8, "A,B": 1.5, B: 1.6}'
    short = load_scene(path, [pairs, "neighbors={skin: 0.2}"], allow_outside=True)
    assert short.neighbors.cutoff == 1.8
    long = load_scene(path, [pairs, "neighbors={cutoff: 1.95, skin: 0.2}"],
                      allow_outside=True)
    x, _ = initial_state(short)
    u_short, f_short = System(short, x).forces()
    u_long, f_long = System(long, x).forces()
    assert u_short == pytest.approx(u_long, rel=1e-12)
    np.testing.assert_allclose(f_short, f_long, rtol=0, atol=1e-10 * np.abs(f_long).max())


def test_type_order_and_pair_keys_do_not_depend_on_a_random_deals_seed():
    """With species_order: random the first particle's species is the seed's: types once
    numbered by first appearance then spelt a per-pair KEY [B:A] for some seeds, so a scene
    with epsilon[A:B] in optimize.parameters failed at other seeds."""
    from simrun.keys.pairs import pair_keys  # noqa: PLC0415

    first_dealt = set()
    for seed in range(12):
        scene = load_scene(KA, [f"seed={seed}", "particles.species_order=random"])
        first_dealt.add(scene.particles.species[0])
        assert scene.energy[0].types == ("A", "B"), seed
        assert "energy.0.params.epsilon[A:B]" in pair_keys(scene), seed
        counts = np.bincount(type_ids(scene.particles.species))
        assert tuple(counts) == (800, 200), seed
    assert first_dealt == {"A", "B"}  # both orders of first appearance were met
