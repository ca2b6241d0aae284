"""The Relax pipeline MetaSchedule tunes and the VM runs: legalize -> annotate -> fold -> fuse.

One definition for tuning (task extraction), profiling (call sites, per-call latency) and graphs
(hotspot matching), so every part sees the same fused kernels.  ``library_dispatch_passes`` come
first, as in ``relax.build``'s default pipeline (none on CPU).

``deployable`` is the module ``asight export`` builds: the weights file bound as constants, so
FoldConstant folds weight-only kernels away and scalar weights become immediates inside the
kernels (a different workload than the same kernel with a weight *parameter*).  The tuning job,
the profile (model view) and the export all start from it (docs/models.md, issue 24).
"""
from __future__ import annotations

import numpy as np

from ..analysis import levers

from .compat import ms, relax, tvm


def load_weights(path: str | None) -> dict[str, np.ndarray]:
    """The arrays of a weights file (``.npz`` written by ``asight import``; no pickles)."""
    if not path:
        return {}
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def bind_weights(mod, fn: str, weights_path: str | None) -> tuple[object, list[str]]:
    """``mod`` with the weights file's arrays bound as constants (by parameter name); the names bound."""
    weights = load_weights(weights_path)
    names = [p.name for p in mod[fn].params if p.name in weights]
    if not names:
        return mod, []
    bound = relax.transform.BindParams(fn, {n: tvm.runtime.tensor(weights[n]) for n in names})(mod)
    return bound, names


def deployable(parsed, fn: str | None, weights_path: str | None) -> tuple[object, list[str]]:
    """The deployable module of a parsed unit: a module with a Relax function ``fn`` (default
    ``main``) gets the weights bound (``bind_weights``); anything else comes back unchanged.
    Returns (module, names bound)."""
    if not isinstance(parsed, tvm.IRModule):
        return parsed, []
    funcs = {gv.name_hint: f for gv, f in parsed.functions_items()}
    entry = fn if isinstance(funcs.get(fn), relax.Function) else "main"
    if not isinstance(funcs.get(entry), relax.Function):
        return parsed, []
    return bind_weights(parsed, entry, weights_path)


def legalize(mod, target):
    """Operators lowered to PrimFuncs (each binding keeps its name), with op patterns annotated."""
    return tvm.transform.Sequential([*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
                                     relax.transform.AnnotateTIROpPattern()])(mod)


def folded(mod, target):
    """``legalize`` + FoldConstant: the calls FuseOps groups (kernels on bound weights alone are
    gone, their constants passed directly; binding names kept)."""
    return relax.transform.FoldConstant()(legalize(mod, target))


def group(mod, target):
    """``folded`` + FuseOps: fused groups as Relax functions (names inside kept)."""
    return relax.transform.FuseOps()(folded(mod, target))


def fuse(mod, target):
    """``group`` + FuseTIR: one PrimFunc per fused group, named as MetaSchedule names the tasks.
    On a CPU the weights (bound constants) are marked layout-free (``prepacks``), so the schedules
    MetaSchedule samples may store them in the layout the loops read (``RewriteLayout``)."""
    fused = relax.transform.FuseTIR()(group(mod, target))
    return mark_layout_free(fused) if prepacks(target) else fused


def mark_layout_free(mod):
    """What ``relax.transform.AttachAttrLayoutFreeBuffers`` marks, keeping each kernel's name (the
    pass re-adds every PrimFunc under a new name: ``mean`` becomes ``mean1``, and the tasks would no
    longer be the kernels the views name): the parameters of a kernel that receive a constant at
    every call are layout-free (``layout_free_buffers``: their indices)."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    constant: dict[str, set[int]] = {}
    for func in (f for _, f in mod.functions_items() if isinstance(f, relax.Function)):
        for binding in bindings(func):
            call = binding.value
            if isinstance(call, relax.Call) and call.op.same_as(call_tir):
                name, args = call.args[0].name_hint, call.args[1].fields
                here = {i for i, a in enumerate(args) if isinstance(a, tvm.ir.expr.Constant)}
                constant[name] = constant[name] & here if name in constant else here
    for gv, func in list(mod.functions_items()):
        if isinstance(func, tvm.tirx.PrimFunc) and constant.get(gv.name_hint):
            mod[gv] = func.with_attr("layout_free_buffers", sorted(constant[gv.name_hint]))
    return mod


def prepacks(target) -> bool:
    """Whether a build for ``target`` packs weights into the tuned schedules' layouts (the layout
    lever, issue 21; docs/models.md): on CPUs, unless ``ASIGHT_LEVERS_OFF`` names ``layout``."""
    from .twins import levers_off_now
    return levers.prepacks(target.kind.name, levers_off_now())


def is_reshape(func) -> bool:
    """A kernel that only re-indexes its input (``relax.analysis.has_reshape_pattern``): the build's
    ``RewriteDataflowReshape`` turns its calls into the VM's no-copy reshape, so it is never run as a
    kernel and has nothing to tune (ResNet-18's flatten; issue 21's "a trial each for nothing")."""
    return isinstance(func, tvm.tirx.PrimFunc) and bool(relax.analysis.has_reshape_pattern(func))


def kernel_of(built_name: str) -> str:
    """The fused kernel (task) a function of a ``build_tuned`` library runs: a kernel whose schedule
    re-lays its weights is named ``<kernel>_prepacked`` there (``SplitLayoutRewritePreproc``)."""
    return built_name.removesuffix("_prepacked")


def build_tuned(database, mod, target):
    """The executable of ``mod`` with ``database``'s schedules: what ``compile_relax`` builds, plus the
    weight prepack on a CPU: the fused kernels (``fuse``) take their records, each record's weight
    re-layout is split into its own kernel (``SplitLayoutRewritePreproc``) and folded into the
    constants at build time, so the library reads packed weights and never re-packs them a call."""
    if not prepacks(target):
        return ms.relax_integration.compile_relax(database, mod, target, params=None)
    with target, database, tvm.transform.PassContext(opt_level=3):
        applied = relax.transform.MetaScheduleApplyDatabase()(fuse(mod, target))
    packed = tvm.transform.Sequential([relax.transform.SplitLayoutRewritePreproc(),
                                       relax.transform.FoldConstant()])(applied)
    return tvm.compile(packed, target=target)


def bindings(func) -> list:
    """The bindings of a Relax function, in order, across its dataflow blocks."""
    return [b for block in func.body.blocks for b in block.bindings]
