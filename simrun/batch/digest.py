"""Content hash of a job: the resolved scene, the kernel sources it imports and the job's
options. A job is skipped when its recorded hash matches (Snakemake-style: contents, not
modification times), so editing a kernel reruns exactly the jobs that use it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from simrun.scene import Scene, scene_modules

RESULT_OPTIONS = ("wrt", "steps", "checkpoints", "memory", "iterations")  # they change the numbers


def _file_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b"<unreadable>"


def job_digest(scene: Scene, job: str, options: dict[str, Any]) -> str:
    h = hashlib.sha256()
    data = scene.to_dict()
    data.pop("name", None)  # naming is not content
    chosen = {k: options.get(k) for k in RESULT_OPTIONS if options.get(k) is not None}
    h.update(json.dumps({"job": job, "scene": data, "options": chosen}, sort_keys=True,
                        default=str).encode())
    modules, _outside = scene_modules(scene)
    files = list(modules)
    state_file = scene.initial.options.get("path") if scene.initial.type == "file" else None
    if state_file:
        files.append(Path(state_file))
    for path in files:
        h.update(str(path).encode() + b"\0" + _file_bytes(Path(path)) + b"\0")
    return h.hexdigest()
