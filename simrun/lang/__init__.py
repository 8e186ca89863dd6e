"""simrun.lang: a Taichi-compatible differentiable kernel language, JIT-compiled with llvmlite.

`import simrun.lang as ti` in place of `import taichi as ti`.

The names (simrun.lang.public) load with the first one a program uses: a program that
imports only a module of the package (simrun.lang.settings, .config, .errors: the CLI
refusing bad input) does not load the compiler.
"""

import importlib
import importlib.util
from typing import Any

# `ti.types` is Taichi's namespace (ti.types.vector), not the submodule of that name: bound
# here, after the submodule's import, so that importing the submodule later cannot rebind it
from .types import types

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "GUI":  # start-up: matplotlib is imported only by programs that draw
        from .gui import GUI  # start-up: see above

        return GUI
    if name.startswith("__") and name.endswith("__") and name != "__all__":
        raise AttributeError(f"module 'simrun.lang' has no attribute '{name}'")
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # ti.ad, from . import x
        return importlib.import_module(f"{__name__}.{name}")
    # start-up: the compiler loads with the first name a program uses
    from . import public

    names = globals()
    names.update((k, v) for k, v in vars(public).items()
                 if not (k.startswith("__") and k.endswith("__")))
    if name in names:
        return names[name]
    raise AttributeError(f"module 'simrun.lang' has no attribute '{name}'")


def __dir__() -> list[str]:
    __getattr__("kernel")  # every name loaded, so that dir() lists them
    return sorted(globals())
