"""What the installed package ships: the example scenes (``simrun/scenes``) and the kernel
library (``simrun/kernels``), found beside this file wherever simrun is installed.

A scene names a library kernel as ``simrun.kernels.<module>:<kernel>`` (``LIBRARY``) from any
folder; the commands take a shipped scene by its bare name (``simrun run gravity``);
``copy_examples`` gives a user both folders to edit. Nothing here imports the modules: they
are loaded by file path like any scene's kernels.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from simrun.scene.errors import SceneError

PACKAGE = Path(__file__).resolve().parents[1]
SCENES, KERNELS = PACKAGE / "scenes", PACKAGE / "kernels"
LIBRARY = "simrun.kernels"  # the dotted prefix that names a library module in a scene


def scene_names() -> list[str]:
    """The shipped scenes, by name (``gravity`` for ``simrun/scenes/gravity.yaml``)."""
    return sorted(p.stem for p in SCENES.glob("*.yaml"))


def library_modules() -> list[str]:
    """The library's kernel modules by their stable names (``simrun.kernels.lj``)."""
    return sorted(f"{LIBRARY}.{p.stem}" for p in KERNELS.glob("*.py") if p.stem != "__init__")


def shipped_scene(path: str | Path) -> Path | None:
    """The shipped scene a bare ``name`` (or ``name.yaml``) stands for, when ``path`` is not
    a file here: so ``simrun run gravity`` works from any folder and a user's own
    ``gravity.yaml`` (or a path with a folder in it) always wins. None otherwise."""
    path = Path(path)
    if path.is_file() or len(path.parts) != 1:
        return None
    stem = path.stem if path.suffix == ".yaml" else path.name
    found = SCENES / f"{stem}.yaml"
    return found if stem in scene_names() else None


def find_scene(path: str | Path) -> Path:
    """The scene file ``path`` names: a shipped scene for a bare name that is no file here
    (``shipped_scene``), else the path as given."""
    return shipped_scene(path) or Path(path)


def unknown_scene_hint(path: str | Path) -> str:
    """For a scene file that does not exist: the shipped scenes, when the user wrote a
    bare name (the likely intent), else nothing."""
    if len(Path(path).parts) != 1:
        return ""
    return (f" Or give the name of a shipped scene: {', '.join(scene_names())} "
            "('simrun examples' copies them into a folder to edit).")


def library_module(module: str) -> Path | None:
    """The file of ``simrun.kernels.<name>``, or None when the library has no such module."""
    prefix, _, name = module.rpartition(".")
    if prefix != LIBRARY or not name.isidentifier() or name == "__init__":
        return None
    path = KERNELS / f"{name}.py"
    return path if path.is_file() else None


def library_name(path: Path) -> str | None:
    """``simrun.kernels.lj`` for the library's ``lj.py`` (however the path was written)."""
    try:
        inside = path.resolve().parent == KERNELS and path.suffix == ".py"
    except OSError:
        return None
    return f"{LIBRARY}.{path.stem}" if inside and path.stem != "__init__" else None


def example_files() -> list[tuple[Path, str]]:
    """Each shipped file and where ``copy_examples`` puts it (``scenes/...``,
    ``kernels/...``): the repository's layout, so the scenes' ``kernels/x.py`` paths and
    the README's ``scenes/x.yaml`` commands work in the copy as they are."""
    files = []
    for folder, name in ((SCENES, "scenes"), (KERNELS, "kernels")):
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix != ".pyc":
                files.append((path, f"{name}/{path.name}"))
    return files


def copy_examples(dest: Path) -> list[Path]:
    """Copy the shipped scenes (with their data files) and the kernel library into
    ``dest/scenes`` and ``dest/kernels``; returns the files written. Refuses (SceneError,
    nothing copied) when one of them exists already, so no edit is overwritten."""
    planned = [(src, dest / rel) for src, rel in example_files()]
    taken = [str(target) for _src, target in planned if target.exists()]
    if taken:
        shown = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3 else "")
        raise SceneError(f"{dest}: already holds {shown}; nothing was copied. Give another "
                         "folder (simrun examples DIR), or move those files away.")
    if dest.exists() and not dest.is_dir():
        raise SceneError(f"{dest}: is a file, not a folder. Give a folder to copy the "
                         "examples into (it is created when missing).")
    try:
        for src, target in planned:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
    except OSError as exc:
        raise SceneError(f"{dest}: cannot copy the examples there ({exc.strerror or exc}). "
                         "Give a folder you can write.") from None
    return [target for _src, target in planned]
