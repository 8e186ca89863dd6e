"""The pipeline: kernel IR -> (cache hit? load object : LLVM IR -> O3 -> JIT) -> CompiledKernel."""

from __future__ import annotations

from .codegen.layout import build_layout
from .codegen.schedule import racing_scatters
from .ir.printer import print_kernel
from .runtime import jit
from .runtime.launch import CompiledKernel


def kernel_text(kir, layout) -> str:
    names = {id(f): f"f{slot}" for slot, f in enumerate(layout.fields)}
    return print_kernel(kir, names)


def build_module(kir, layout, key: str, debug: bool, fast_math: bool) -> tuple[str, list]:
    from llvmlite import ir  # only on a cache miss: a warm start never builds LLVM IR

    from .codegen.emit import TaskEmitter

    module = ir.Module(name=key)
    names = []
    for k, task in enumerate(kir.tasks):
        name = f"{kir.name}_{key}_t{k}"
        TaskEmitter(module, name, task, layout, debug, fast_math).build()
        names.append(name)
    return str(module), names


def compile_kernel(kir, runtime, config, arg_specs, ndarray_slots) -> CompiledKernel:
    layout = build_layout(kir)
    text = kernel_text(kir, layout)
    settings = runtime.settings
    if settings.print_ir:
        print(text)
    key = jit.cache_key(f"{text}\ndebug={config.debug} fast_math={config.fast_math}", settings)
    names = [f"{kir.name}_{key}_t{k}" for k in range(len(kir.tasks))]
    cached = jit.load_cached(key, settings, use_disk=config.offline_cache)
    if not cached or config.debug:
        module_text, names = build_module(kir, layout, key, config.debug, config.fast_math)
        if not cached:
            jit.compile_module(key, module_text, settings)
    addresses = [jit.function_address(n) for n in names]
    slots = [(layout.var_slot[v], v.dtype) for v in kir.arg_vars]
    compiled = CompiledKernel(kir.name, layout, addresses, slots, kir.ret_types, runtime,
                              ndarray_slots)
    compiled.order_sensitive = frozenset(k for k, task in enumerate(kir.tasks)
                                         if racing_scatters(task, config.debug))
    return compiled
