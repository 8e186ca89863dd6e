"""The neighbour-list build alone (bin + search), 2-D and 3-D, periodic and open, on a
jittered lattice (particles numbered along space, as a lattice start numbers them), against
another version of simrun/stepper/neighbors.py when one is given:

    git worktree add /tmp/main-checkout main
    python bench/neighbor_build.py --against /tmp/main-checkout/simrun/stepper/neighbors.py \
        --atoms 40000 --threads 1

(the search modules beside that neighbors.py, where a checkout has them, are loaded with it.)
ns per atom per build, a median of ``rounds`` medians of 5 builds, the two versions
alternated in each round; the rows of both lists are checked equal first (or, where the two
assign pairs to rows differently, the pairs).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from timing import median_wall

import simrun.lang as ti
from simrun.stepper.binding import box_values
from simrun.stepper.neighbors import NeighborList


def jittered_lattice(atoms: int, dim: int, density: float, seed: int = 0) -> tuple:
    side = (atoms / density) ** (1 / dim)
    per_side = int(np.ceil(atoms ** (1 / dim)))
    sites = np.indices((per_side,) * dim).reshape(dim, -1).T[:atoms] * (side / per_side)
    return sites + np.random.default_rng(seed).uniform(0.0, 0.3, (atoms, dim)), side


def rows(nl) -> list[np.ndarray]:
    table = nl.neighbors.to_numpy()
    return [table[i, :table[i, 0] + 1] for i in range(len(table))]


def load_against(path: Path):
    """The other neighbors.py as a module, with the search modules beside it (a checkout
    since the split: neighbor_cells.py, neighbor_search.py) standing in for this checkout's
    while it loads, so its NeighborList runs its own kernels."""
    saved = {}
    try:
        for name in ("neighbor_cells", "neighbor_search", "neighbors"):
            file = path if name == "neighbors" else path.parent / f"{name}.py"
            if not file.exists():
                continue
            full = f"simrun.stepper.{name}"
            saved[full] = sys.modules.get(full)
            spec = importlib.util.spec_from_file_location(full, file)
            module = importlib.util.module_from_spec(spec)
            sys.modules[full] = module
            spec.loader.exec_module(module)
        return module
    finally:
        for full, module in saved.items():
            if module is None:
                sys.modules.pop(full, None)
            else:
                sys.modules[full] = module


def pairs(table: list[np.ndarray]) -> set[tuple[int, int]]:
    """Each listed pair as (lower, higher) index: a half list may hold a pair in either row
    (the half stencil's cell order decides), so two versions' rows can differ while their
    pairs agree. A pair listed twice shows as fewer pairs than entries."""
    out = {(min(i, int(j)), max(i, int(j))) for i, row in enumerate(table) for j in row[1:]}
    assert len(out) == sum(len(row) - 1 for row in table), "a pair listed twice"
    return out


def compare(dim: int, periodic: bool, versions: dict, args: argparse.Namespace) -> str:
    """One line: each version's ns per atom per build, their ratio, whether rows (or at
    least the pairs) agree."""
    x0, side = jittered_lattice(args.atoms, dim, args.density)
    boundary = SimpleNamespace(type="periodic" if periodic else "none", low=[0.0] * dim,
                               high=[side if periodic else 0.0] * dim)
    box = box_values(ti, boundary, dim, ti.f64)
    x = ti.Vector.field(dim, dtype=ti.f64, shape=args.atoms)
    x.from_numpy(x0)
    lists = {name: make(2.5, 0.3, x0, boundary, ti.f64, box) for name, make in versions.items()}
    built = []
    for nl in lists.values():
        nl.build(x)
        built.append(rows(nl))
    same = all(np.array_equal(a, b) for a, b in zip(built[0], built[-1]))
    agree = "rows equal" if same else (
        "same pairs, other rows" if pairs(built[0]) == pairs(built[-1]) else "PAIRS DIFFER")
    times: dict[str, list[float]] = {name: [] for name in lists}
    for _ in range(args.rounds):
        for name, nl in lists.items():
            times[name].append(median_wall(lambda nl=nl, x=x: nl.build(x), 5) * 1e9 / args.atoms)
    ns = {name: statistics.median(t) for name, t in times.items()}
    ratio = f", against / this {ns['against'] / ns['this']:.2f}" if "against" in ns else ""
    return (f"{dim}-D {'periodic' if periodic else 'open'}: "
            + ", ".join(f"{name} {t:.0f}" for name, t in ns.items())
            + f" ns per atom{ratio}; {agree}; "
            f"mean row {np.mean([len(r) - 1 for r in built[-1]]):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--atoms", type=int, default=40000)
    parser.add_argument("--density", type=float, default=0.8)
    parser.add_argument("--against", help="another neighbors.py to time beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=args.threads)
    versions = {"this": NeighborList}
    if args.against:
        versions = {"against": load_against(Path(args.against)).NeighborList, **versions}
    print(f"{args.atoms} atoms, density {args.density}, {args.threads} thread(s), "
          f"load average {os.getloadavg()}")
    for dim in (2, 3):
        for periodic in (True, False):
            print(compare(dim, periodic, versions, args), flush=True)


if __name__ == "__main__":
    main()
