"""`ti.lang`: the few Taichi internals that Taichi's own tests and programs reach for
(`ti.lang.impl.current_cfg()`, `taichi.lang.enums.SNodeGradType`, ...), so they run unchanged
with `taichi` resolving to simrun.lang."""

from . import enums, exception, impl, misc, util
