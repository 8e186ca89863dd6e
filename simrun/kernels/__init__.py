"""Energy and step kernels used by scenes, written in plain ``simrun.lang`` (Taichi syntax).

This folder is the kernel library installed with simrun. A scene names one of its kernels
in one of two ways (scenes/README.md, top, says which files are allowed):

``simrun.kernels.<module>:<kernel>``
    e.g. ``simrun.kernels.lj:lj_shifted``: the installed library, from a scene in any folder,
    trusted (no ``--allow-outside``). The only dotted form: ``lj:wca`` or another package's
    module is refused.
``<path>.py:<kernel>``
    a file, relative to the scene's folder, its parent or the current directory (the shipped
    scenes write ``kernels/lj.py:lj_shifted``, which reaches this folder beside ``scenes/``).

Either way the module is loaded by its file path (its name is not imported), and this
docstring is where the convention lives.

Energy kernels
    ``@ti.kernel`` functions that ACCUMULATE a potential energy into the 0-D field ``U`` with
    ``U[None] += ...``. Forces are never written by hand: each step the stepper runs every
    energy term under ``with ti.ad.Tape(loss=U):`` and uses F = -x.grad (so U must depend on
    ``x`` differentiably). Keep each kernel one simple loop nest (Taichi's autodiff rules).

Arguments are bound by NAME (the stepper reads the kernel's signature):
    x          positions, ``ti.Vector.field(dim, float, N, needs_grad=True)``
    v          velocities, ``ti.Vector.field(dim, float, N)``
    m          masses, ``ti.field(float, N)``
    x0         positions at step 0 (the rest shape of meshes), like ``x``, no gradient
    U          potential energy, ``ti.field(float, ())``
    bonds, angles, dihedrals, triangles
               topology as integer fields of shape (rows, 2 | 3 | 4 | 3): ``bonds[b, 0]``
    dt         the time step (scalar)
    box_low, box_high
               the scene's box, 0-D vector fields (``box_high[None] - box_low[None]`` is
               its size; zero for ``boundary: none``); never repeat it in params
    periodic   compile-time bool (use in ``ti.static``): the box is periodic
    neighbors  the scene's Verlet list (``neighbors: {cutoff, skin}``), an i32 field:
               ``for k in range(neighbor_count(neighbors, i)): j = neighbor(neighbors, i,
               k)`` visits i's partners within cutoff + skin (a pair's own cutoff
               under ``PAIR_CUTOFF``, below); each pair is in one of its two rows, once
               (not always j > i), those within the cutoff at the last build first,
               then the skin's
    cutoff     with a list: its cutoff, unless the params set one
    <other>    a field returned by the module's ``allocate`` hook, or else a scalar parameter
               taken from the scene's ``params:`` or from the module's ``DEFAULTS[kernel]``
Template arguments are annotated ``ti.template()``, scalars ``float`` (the scene's precision)
or ``ti.i32``. Taichi kernels cannot have default values, hence ``DEFAULTS``. An energy
kernel that never writes ``U`` is refused at its ``def`` line (it would add nothing).
scenes/README.md walks through a new one (a Morse chain) from module to run.

The Python module ``simrun/md.py`` (``from simrun.md import min_image, neighbor_count,
neighbor``) has the ``ti.func`` helpers: ``min_image(d, box_low, box_high, periodic)`` folds
a separation to its nearest image (and is differentiable in the box, for the pressure),
``neighbor_count`` and ``neighbor``. ``kernels/lj.py`` shows them in use.

Optional module hooks
    DEFAULTS = {"kernel_name": {"param": value, ...}}
    LIMITS = {"kernel_name": ["k >= 0", "-1 < poisson < 0.5", "first + count <= n"], ...}
        conditions on the parameters (and ``n``, the particle count, and ``dim``), checked
        before anything runs; a broken one is reported at the parameter's value in the scene.
    PAIR_CUTOFF = {"kernel_name": "cutoff"}
        a species pair kernel's (types x types) argument beyond whose value a pair adds
        nothing (``kernels/lj.py``): if every energy term that reads the list names one
        (and no step, controller or objective kernel reads it), the list holds each pair
        only within its own value + skin, so the kernel walks fewer pairs. A kernel whose
        pairs reach past that argument must not name it.
    def allocate(ctx) -> dict[str, field]
        creates extra fields (e.g. per-triangle rest shapes, an MPM grid) after ``ti.init``;
        ``ctx`` has n, dim, dtype (and np_dtype), x0, masses, topology (NumPy) and params
        (the merged scene params of this module's kernels), and bodies (the scene's
        ``bodies:`` boxes and springs, ``simrun.scene.bodies.Bodies``, or None). Fields it returns can be named by any kernel of the
        module and are saved with the run state, so ``--resume`` restores them.
        ``ctx.scratch(field)`` marks a field scratch and returns it (``kernels/diffmpm.py``'s
        grid): each step's controller or step kernels write it before any of them reads
        it, and no energy or objective kernel reads it. A gradient's stored states then
        leave it out (a 64^3 MPM grid is ~7 MB a state). simrun checks the contract from
        each kernel's reads and writes (a SceneError at the kernel that reads too early),
        but not which ELEMENTS are written: a step kernel that clears only part of a
        scratch field and reads the rest breaks it unseen, so clear it all.
        ``ctx.check_memory(nbytes, what)`` refuses fields larger than the machine's memory
        before they are made; a ValueError or KeyError raised here is the scene's error
        (exit 2) at the line naming the module's first kernel.

    def render_shapes(params) -> dict
        scenery for the pictures (not the physics): ``{"boxes": [[low, high], ...],
        "circles": [[x, y, r], ...], "targets": [[x, y], ...], "particle_radius": r}`` in
        the x-y plane, e.g. the MPM walls and obstacle, an objective's goal (drawn as a
        cross), the balls' radius (drawn at that size); ``params`` are the module's merged
        scene params, and the objective's when the module holds the scene's objective kernel.
        Stored in run.json as ``shapes``.

Step kernels
    Scenes whose dynamics is not "particles + energy" (MPM) list ``step_kernels`` that replace
    the integrator. They are bound the same way and called in order once per step, after the
    forces of the energy terms have been computed (so ``x.grad`` holds dU/dx). ``simrun grad``
    differentiates them (reading ``x.grad`` included; no other gradient field). A step
    kernel must write the state (x, v or a field of its module), else it is refused.

Controller kernels
    A scene's ``controller:`` kernels run each step before the forces, on the state at the
    step's start, bound like step kernels; an argument named ``step`` (``ti.i32``) gets the
    step index. They write fields of their module (a network's actuations) that energy terms
    and step kernels read (``kernels/mass_spring.py``); a controller kernel whose outputs no
    other kernel (nor the objective) reads is refused. ``simrun grad`` differentiates them in
    scenes with ``step_kernels``; ``fields.<name>`` KEYs tune what they read (weights).

Objective kernels
    Like energy kernels, accumulating into the 0-D field ``L`` (one that never writes it is
    refused); an argument named ``step``
    (``ti.i32``) gets the index of the step whose state the objective sees.
"""
