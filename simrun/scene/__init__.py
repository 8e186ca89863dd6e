"""Scenes: versioned YAML files validated into typed ``Scene`` objects.

``load_scene(path, overrides)`` is the entry point; every problem is a ``SceneError`` whose
message is one paragraph naming file:line:col, what is wrong and how to fix it. A scene is
code: running it imports its kernel modules (``scene_modules`` lists them).
"""

from simrun.scene.errors import SceneError
from simrun.scene.initial import initial_state
from simrun.scene.load import load_scene
from simrun.scene.load_terms import scene_modules
from simrun.scene.schema import Scene

__all__ = ["Scene", "SceneError", "initial_state", "load_scene", "scene_modules"]
