"""The ``fields:`` section: start values for fields that kernel modules allocate (trained
controller weights, a tuned cue), read from .npz files beside the scene:
``fields: {weights1: best_fields.npz}`` loads the array named ``weights1`` of that file.
Whether the module allocates such a field, and its shape, is checked once it has
(``simrun.stepper.system``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from yaml.nodes import Node

from simrun.scene import limits
from simrun.scene.errors import error_at, shorten, shorten_path, where
from simrun.scene.nodes import MapReader, as_str
from simrun.scene.npz import npz_headers


def fields(node: Node | None, scene_dir: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """{field name: .npz path} and where each name is written (file:line:col)."""
    if node is None:
        return {}, {}
    reader = MapReader(node, "fields")
    paths: dict[str, Path] = {}
    places: dict[str, str] = {}
    for name, (key_node, value) in reader.items.items():
        path = (scene_dir / as_str(value, f"fields.{name}")).resolve()
        if path.suffix != ".npz" or not path.is_file():
            raise error_at(value, f"'fields.{shorten(name)}' names '{shorten_path(path)}', "
                           "which is not an .npz file", "Give an .npz file relative to the "
                           f"scene, holding an array named '{shorten(name)}'")
        try:
            headers = npz_headers(path)  # the arrays' shapes, nothing inflated
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise error_at(value, f"cannot read '{shorten_path(path.name)}': "
                           f"{shorten(str(exc), 200)}", "Save it with NumPy's np.savez") from None
        if name not in headers:
            raise error_at(value, f"'{path.name}' has no array named '{shorten(name)}' (it "
                           f"has {shorten(', '.join(headers), 200)})",
                           "Save the field's values under its own name")
        limits.check_memory(value, headers[name].nbytes, f"'fields.{shorten(name)}' "
                            f"({headers[name].shape})", "Save values of the field's shape")
        paths[name] = path
        places[name] = where(key_node)
    return paths, places
