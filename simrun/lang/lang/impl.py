"""`ti.lang.impl.current_cfg()` and `get_runtime()`: the settings of the last ti.init."""

from types import SimpleNamespace

from .. import api
from ..types import defaults


def current_cfg() -> SimpleNamespace:
    return SimpleNamespace(arch=api.cpu, default_fp=defaults.fp, default_ip=defaults.ip,
                           debug=api.config.debug, fast_math=api.config.fast_math)


def get_runtime():
    return api.runtime()
