"""A job folder keeps the code that ran: each kernel module (and an initial state file) is
copied into the folder with its content hash, and the folder's scene.yaml names those copies
by relative paths (a module of the installed library, ``simrun.kernels.lj``, too: its record
keeps that name as ``library``). So a folder moved to another checkout or machine still resumes and
re-renders, and a resume can tell when the physics changed since (an edited kernel would
otherwise continue a run with other forces, silently).

``content_hash`` is the one file hash simrun uses (``simrun.batch`` hashes jobs with it).
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from shlex import quote
from typing import Any

from simrun.outputs.writer import write_scene
from simrun.scene import Scene, SceneError, scene_modules
from simrun.scene.rdf_csv import is_rdf
from simrun.scene.shipped import library_name

KERNELS, INPUTS = "kernels", "inputs"  # the folders of the copies inside a job folder
RAN = ".sources"  # DIR/.sources/<copy>: the text that ran, to name the lines of a later edit


def content_hash(path: str | Path) -> str:
    """sha256 of a file's bytes (``"unreadable"`` when it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


@dataclass(frozen=True)
class Source:
    """One file a job read: where the scene found it, its copy (relative to the folder)."""

    original: Path
    copy: str
    sha256: str

    def to_dict(self) -> dict[str, str]:
        record = {"copy": self.copy, "original": str(self.original), "sha256": self.sha256}
        library = library_name(self.original)  # e.g. simrun.kernels.lj: the installed library's
        return record | ({"library": library} if library else {})


def _initial_file(scene: Scene) -> Path | None:
    return Path(scene.initial.options["path"]) if scene.initial.type == "file" else None


def _rdf_targets(scene: Scene) -> list[Path]:
    """A fit's g(r) target CSVs (``objective.targets.rdf.file``, ``rdf[A:B]``'s)."""
    targets = scene.objective.targets if scene.objective is not None else None
    return [Path(t["file"]) for name, t in (targets or {}).items() if is_rdf(name)]


def plan_sources(scene: Scene) -> list[Source]:
    """The scene's kernel modules (``kernels/<name>.py``, in scene order, a clash of names
    numbered ``<name>_2.py``), its initial state file and its fields' .npz files
    (``inputs/<name>``), hashed."""
    planned: list[Source] = []
    taken: set[str] = set()
    modules, _outside = scene_modules(scene)
    files = [(KERNELS, Path(m)) for m in modules]
    initial = _initial_file(scene)
    if initial is not None:
        files.append((INPUTS, initial))
    files += [(INPUTS, Path(path)) for path in dict.fromkeys(scene.fields.values())]
    files += [(INPUTS, f.image) for g in scene.grids for f in g.fields if f.image is not None]
    files += [(INPUTS, rdf) for rdf in _rdf_targets(scene)]
    # one copy of a file named twice (electric's start file gives the initial state and the
    # fields): a second copy would take the first's place in scene.yaml, and a resume from
    # that scene.yaml would plan a third, differing from the record
    for folder, path in dict.fromkeys(files):
        name, n = path.name, 1
        while f"{folder}/{name}" in taken:
            n += 1
            name = f"{path.stem}_{n}{path.suffix}"
        taken.add(f"{folder}/{name}")
        planned.append(Source(path, f"{folder}/{name}", content_hash(path)))
    return planned


def save_sources(out_dir: Path, scene: Scene) -> list[Source]:
    """Copy the scene's kernel modules and initial state file into ``out_dir`` (a file that
    already is the copy, as when a folder's own scene.yaml is resumed, stays)."""
    sources = plan_sources(scene)
    for source in sources:
        target = out_dir / source.copy
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (target.exists() and target.samefile(source.original)):
            shutil.copyfile(source.original, target)
        ran = out_dir / RAN / source.copy
        ran.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.original, ran)
    return sources


def relocate(data: dict[str, Any], sources: list[Source]) -> dict[str, Any]:
    """Scene data (``Scene.to_dict``) with every kernel module, the initial file, field
    files and a g(r) target moved to its copy: what a folder's scene.yaml says, so that the
    folder is self-contained."""
    copies = {str(s.original): s.copy for s in sources}

    def move(ref: str) -> str:
        module, _, kernel = ref.rpartition(":")
        return f"{copies.get(module, module)}:{kernel}"

    for term in data.get("energy", []):
        term["kernel"] = move(term["kernel"])
    for section in ("step_kernels", "controller"):
        if section in data:
            data[section]["kernels"] = [move(k) for k in data[section]["kernels"]]
    if "kernel" in data.get("objective", {}):
        data["objective"]["kernel"] = move(data["objective"]["kernel"])
    initial = data.get("initial", {})
    if initial.get("type") == "file":
        initial["path"] = copies.get(initial["path"], initial["path"])
    for name, path in data.get("fields", {}).items():
        data["fields"][name] = copies.get(path, path)
    for grid in data.get("grids", {}).values():  # grid fields' start images
        for spec in grid["fields"].values():
            if "image" in spec:
                spec["image"] = copies.get(spec["image"], spec["image"])
    for name, rdf in (data.get("objective", {}).get("targets") or {}).items():
        if is_rdf(name) and isinstance(rdf, dict) and "file" in rdf:
            rdf["file"] = copies.get(str(rdf["file"]), rdf["file"])
    return data


def portable_scene(scene: Scene) -> dict[str, Any]:
    """The resolved scene as a job folder records it (paths relative to the copies)."""
    return relocate(scene.to_dict(), plan_sources(scene))


def write_job_scene(out_dir: Path, scene: Scene) -> list[dict[str, str]]:
    """Copy the sources and write ``out_dir/scene.yaml`` naming the copies; returns the
    record of the sources for the job's json file (``"sources"``)."""
    sources = save_sources(out_dir, scene)
    write_scene(out_dir / "scene.yaml", relocate(scene.to_dict(), sources))
    return [s.to_dict() for s in sources]


def scene_differences(saved: dict[str, Any], scene: Scene, ignore: tuple[str, ...] = ()
                      ) -> list[str]:
    """How ``scene`` differs from a folder's saved scene.yaml (``KEY (saved there, now
    here)``), keys in ``ignore`` (dotted) left out. Folders written before the copies
    existed name the original paths: those compare too."""
    candidates = [portable_scene(scene), scene.to_dict()]
    found = [_differences(_without(saved, ignore), _without(c, ignore)) for c in candidates]
    return min(found, key=len)


def _without(data: dict[str, Any], ignore: tuple[str, ...]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    for key in ignore:
        *parents, last = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(last, None)
    return data


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix.rstrip('.')} ({old!r} there, {new!r} here)"]


def physics_changes(out_dir: Path, recorded: list[dict[str, str]] | None, scene: Scene
                    ) -> list[str]:
    """What differs between the sources a folder's job ran (``recorded``: its json's
    ``"sources"``) and those ``scene`` would run now: one line per changed file, naming the
    kernels and lines that changed when the folder's copy allows a diff. Empty when nothing
    changed or the folder predates these records."""
    if not recorded:
        return []
    by_copy = {r.get("copy"): r for r in recorded if isinstance(r, dict)}
    changes = []
    for source in plan_sources(scene):
        old = by_copy.get(source.copy)
        if old is None or old.get("sha256") == source.sha256:
            continue
        ran = _text_that_ran(out_dir, source, old)
        if ran is None:
            changes.append(f"{out_dir / source.copy} is not the file the job ran (its sha256 "
                           "differs from the one recorded)")
        else:
            changes.append(f"{source.original}: {_what_changed(ran, source.original)}")
    return changes


def _text_that_ran(out_dir: Path, source: Source, old: dict[str, str]) -> Path | None:
    """A file with the content the job ran (its sha256 as recorded): the folder's copy
    unless that is the file edited, else the copy saved under .sources/, else the recorded
    original; None when none is left."""
    copy = out_dir / source.copy
    candidates = [out_dir / RAN / source.copy, Path(old.get("original", ""))]
    if not (copy.exists() and copy.samefile(source.original)):
        candidates.insert(0, copy)
    return next((c for c in candidates if c.is_file() and
                 content_hash(c) == old.get("sha256")), None)


def _what_changed(before: Path, after: Path) -> str:
    """``lines 12-14 (in kernel 'gravity')``: the changed lines of ``after`` and the functions
    holding them."""
    try:
        old = before.read_text(encoding="utf-8").splitlines()
        new = after.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return "its content changed"
    lines: list[int] = []
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if tag != "equal":
            lines += list(range(j1 + 1, max(j2, j1 + 1) + 1))
    if not lines:
        return "its content changed"
    shown = f"line {lines[0]}" if len(set(lines)) == 1 else f"lines {lines[0]}-{lines[-1]}"
    names = _functions_at("\n".join(new), lines)
    where = f" (in {', '.join(names)})" if names else ""
    return f"{shown} changed{where}"


def _functions_at(text: str, lines: list[int]) -> list[str]:
    """``kernel 'gravity'`` (or ``function 'helper'``) for each def holding one of lines."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if any(line in span for line in lines):
                kernel = any(ast.unparse(d).endswith("kernel") for d in node.decorator_list)
                found.append(f"{'kernel' if kernel else 'function'} '{node.name}'")
    return found


def refuse_changed(out_dir: Path, recorded: list[dict[str, str]] | None, scene: Scene,
                   allow_changed: bool) -> list[str]:
    """SceneError when the physics changed since the folder's job ran (unless
    ``allow_changed``); returns the changes (recorded by a resume that was allowed)."""
    changes = physics_changes(out_dir, recorded, scene)
    if changes and not allow_changed:
        shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if
                                           len(changes) > 3 else "")
        folder = quote(str(out_dir))
        own = Path(scene.source).resolve().parent == out_dir.resolve()  # DIR/scene.yaml
        ways = (f"Undo the edit, or continue with the edited code: 'simrun resume {folder} "
                "--allow-changed'" if own else
                f"Resume with the folder's own copies ('simrun resume {folder}'), undo the "
                "edit, or add --allow-changed to continue with the new code")
        raise SceneError(f"{out_dir}: cannot resume: the physics changed since this job ran: "
                         f"{shown}. {ways} (the record notes the change).")
    return changes
