"""Content hash of a job: the resolved scene, the kernel sources it imports and the job's
options. A job is skipped when its recorded hash matches (Snakemake-style: contents, not
modification times), so editing a kernel reruns exactly the jobs that use it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from simrun.outputs.provenance import plan_sources
from simrun.scene import Scene

# they change the numbers (an option not given is left out: older batches keep their hash)
RESULT_OPTIONS = ("wrt", "steps", "checkpoints", "memory", "iterations", "mode", "check",
                  "method", "equilibrate", "sample_every")


def job_digest(scene: Scene, job: str, options: dict[str, Any]) -> str:
    h = hashlib.sha256()
    data = scene.to_dict()
    data.pop("name", None)  # naming is not content
    chosen = {k: options.get(k) for k in RESULT_OPTIONS if options.get(k) is not None}
    h.update(json.dumps({"job": job, "scene": data, "options": chosen}, sort_keys=True,
                        default=str).encode())
    for source in plan_sources(scene):  # kernel modules and the initial state file
        h.update(f"{source.original}\0{source.sha256}\0".encode())
    return h.hexdigest()
