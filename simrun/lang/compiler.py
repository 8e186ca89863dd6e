"""The pipeline: kernel IR -> (cache hit? load object : LLVM IR -> O3 -> JIT) -> CompiledKernel."""

from __future__ import annotations

from .codegen import vector_width
from .codegen.layout import build_layout
from .codegen.schedule import racing_scatters
from .ir.printer import print_kernel
from .runtime import jit
from .runtime.launch import CompiledKernel


def kernel_text(kir, layout, debug: bool = False) -> str:
    """The printed kernel, its cache key's text; `debug`: every field's exact shape (the
    bounds checks compile them in), else a runtime_rows field's leading extent is left out."""
    names = {id(f): f"f{slot}" for slot, f in enumerate(layout.fields)}
    return print_kernel(kir, names, exact_shapes=debug)


def build_module(kir, layout, key: str, debug: bool, fast_math: bool,
                 emitter=None) -> tuple[str, list]:
    """LLVM IR text of every task, and the tasks' function names; emitter: the target's
    TaskEmitter class (the CPU's when None)."""
    # start-up: only a cache miss builds LLVM IR, so a warm start never imports llvmlite.ir
    from llvmlite import ir

    from .codegen.emit import TaskEmitter

    module = ir.Module(name=key)
    names = []
    for k, task in enumerate(kir.tasks):
        name = f"{kir.name}_{key}_t{k}"
        fn = (emitter or TaskEmitter)(module, name, task, layout, debug, fast_math).build()
        names.append(fn.name)
    return str(module), names


def compile_kernel(kir, runtime, config, arg_specs, ndarray_slots) -> CompiledKernel:
    layout = build_layout(kir)
    text = kernel_text(kir, layout, config.debug)
    settings = runtime.settings
    if settings.print_ir:
        print(text)
    # LLVM's SLP vectorizer turns a long fast-math sum (a kernel whose expressions the
    # frontend split) into reductions 100s of lanes wide that its X86 backend can abort on
    # ("Illegal shuffle mask"): such kernels are compiled without it
    slp = not kir.extra.get("split_expressions")
    # tasks that gather through a loaded index, compiled narrower where that is faster
    narrow = vector_width.narrow_features(*jit.host_cpu(settings.cache_dir))
    gathering = [k for k, task in enumerate(kir.tasks) if narrow and vector_width.gathers(task)]
    key = jit.cache_key(f"{text}\ndebug={config.debug} fast_math={config.fast_math} slp={slp}"
                        + (f" narrow={gathering} {narrow}" if gathering else ""), settings)
    names = [f"{kir.name}_{key}_t{k}" for k in range(len(kir.tasks))]
    cached = jit.load_cached(key, settings, use_disk=config.offline_cache)
    if not cached or config.debug:
        module_text, names = build_module(kir, layout, key, config.debug, config.fast_math)
        if gathering:  # AVX2's gathers and scalar stores beat AVX-512's on this CPU
            module_text = vector_width.with_features(module_text, [names[k] for k in gathering],
                                                     narrow)
        if not cached:
            jit.compile_module(key, module_text, settings, kir.name, slp)
    addresses = [jit.function_address(n) for n in names]
    slots = [(layout.var_slot[v], v.dtype) for v in kir.arg_vars]
    compiled = CompiledKernel(kir.name, layout, addresses, slots, kir.ret_types, runtime,
                              ndarray_slots)
    compiled.source_name = kir.extra.get("source_name", kir.name)  # what errors name
    compiled.order_sensitive = frozenset(k for k, task in enumerate(kir.tasks)
                                         if racing_scatters(task, config.debug))
    return compiled
