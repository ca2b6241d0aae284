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
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as err:     # not an .npz, or one holding pickled objects
        raise ValueError(f"the weights file {path} is not a readable .npz of arrays "
                         f"({str(err).splitlines()[0][:120]})") from None


def bind_weights(mod, fn: str, weights_path: str | None) -> tuple[object, list[str]]:
    """``mod`` with the weights file's arrays bound as constants (by parameter name); the names bound.
    An array whose shape or dtype is not its parameter's is refused (bound, it would silently build
    another model: a 5x5 kernel where the file declares 3x3)."""
    weights = load_weights(weights_path)
    if weights_path:     # a weights file is there: it holds every weight (load_weights read it)
        require_every_weight(mod[fn], weights, weights_path)
    names = [p.name for p in mod[fn].params if p.name in weights]
    if not names:
        return mod, []
    for param in mod[fn].params:
        if param.name in weights:
            check_weight(param, weights[param.name], weights_path)
    bound = relax.transform.BindParams(fn, {n: tvm.runtime.tensor(weights[n]) for n in names})(mod)
    return bound, names


def require_every_weight(func, weights: dict, path: str | None) -> None:
    """Every parameter after ``num_input`` has its array once any has (a missing one stayed an input:
    another program than the one tuned, and the export said only that no tuned kernel applied)."""
    attrs = func.attrs or {}
    if "num_input" not in attrs:
        return
    missing = [p.name for p in func.params[int(attrs["num_input"]):] if p.name not in weights]
    if missing:
        total = len(func.params) - int(attrs["num_input"])
        raise ValueError(f"the weights file {path} has no array for {', '.join(repr(m) for m in missing[:3])}"
                         f"{f' and {len(missing) - 3} more' if len(missing) > 3 else ''} ({total - len(missing)} of the "
                         f"model's {total} weights are there; the parameters after the first {int(attrs['num_input'])} "
                         "are weights): restore it, or re-import the model")


def check_weight(param, array: np.ndarray, path: str | None) -> None:
    """``array`` has the static shape and dtype the Relax parameter declares (a ValueError naming both)."""
    info = getattr(param, "ty", None) or getattr(param, "struct_info", None)
    values = getattr(getattr(info, "shape", None), "values", None)
    want_dtype = str(getattr(info, "dtype", "") or "")
    if values is not None and all(isinstance(v, tvm.tirx.IntImm) for v in values):
        want = tuple(int(v) for v in values)
        if tuple(array.shape) != want:
            raise ValueError(f"weight {param.name!r} in {path} has shape {tuple(array.shape)}, but the model "
                             f"declares {want}; re-import the model or fix the weights file")
    if want_dtype and want_dtype != "void" and str(array.dtype) != want_dtype:
        raise ValueError(f"weight {param.name!r} in {path} is {array.dtype}, but the model declares "
                         f"{want_dtype}; re-import the model or fix the weights file")


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


def legalize(mod, target, convert: bool = True, *, off: frozenset[str]):
    """Operators lowered to PrimFuncs (each binding keeps its name), with op patterns annotated; on a
    CPU the convolutions first converted to channels-last (``converted``, unless ``off`` names the
    lever) unless ``convert`` is False (the untuned build: the model as ``tvm.compile`` builds it).

    ``off``, here and in every function below that takes it: the levers this job or request works
    without (``worker/tune_plan.py``)."""
    mod = converted(mod, target, off=off) if convert else mod
    with target:      # the dispatch passes look the target up (sort, scan: TopK, CumSum, argsort)
        return tvm.transform.Sequential([*relax.pipeline.library_dispatch_passes(target),
                                         relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern()])(mod)


# Operators whose lowering (LegalizeOps, TOPI) takes only the layout they came in: ConvertLayout would
# otherwise give them their converted input's (NHWC), LegalizeOps leaves them as Relax operators and the
# build fails ("CodeGenVM cannot emit this Relax operator directly": a U-Net's ConvTranspose).
KEEP_LAYOUT = ("relax.nn.conv2d_transpose",)


def convert_layout(target, only: set | None = None, *, off: frozenset[str]) -> list:
    """``ConvertLayout`` to the lever's layouts (``channels_last``) for the operators whose weight is a
    constant (a deployable module's bound weights: the transform it inserts on the weight is folded
    into the constant at build time, never run), or no pass.  A weight that is a parameter would be
    re-laid at every call: that operator keeps its layout.  ``only``: the calls converted (all such
    calls when None)."""
    layouts = channels_last(target, off=off)
    if not layouts:
        return []

    def on_constant_weight(call):
        name = getattr(call.op, "name", "")
        if name in layouts and len(call.args) > 1 and isinstance(call.args[1], tvm.ir.expr.Constant):
            if only is None or any(call.same_as(c) for c in only):
                return {name: layouts[name]}
        if name in KEEP_LAYOUT:     # its own layout, a transform before it if its input was converted
            return {name: [str(call.attrs.data_layout), str(call.attrs.kernel_layout)]}
        return {}

    return [relax.transform.ConvertLayout({}, on_constant_weight)]


def convertible(mod, target, *, off: frozenset[str]) -> dict[str, object]:
    """``{binding: call}`` of the calls ``convert_layout`` would convert, in program order; a binding
    said as a user finds it: ``conv2d lv8 (line 21)`` (the line where the parsed source's span has one)."""
    layouts = channels_last(target, off=off) or {}
    out = {}
    for func in (f for _, f in mod.functions_items() if isinstance(f, relax.Function)):
        for b in bindings(func):
            call = b.value
            if (isinstance(call, relax.Call) and getattr(call.op, "name", "") in layouts and len(call.args) > 1
                    and isinstance(call.args[1], tvm.ir.expr.Constant)):
                line = getattr(call.span, "line", None) if call.span is not None else None
                op = call.op.name.rsplit(".", 1)[-1]
                out[f"{op} {b.var.name}" + (f" (line {line})" if line else "")] = call
    return out


def converted(mod, target, *, off: frozenset[str]):
    """``mod`` after ``convert_layout``, each layout transform it inserted named ``layout_transform<k>``:
    the pass names them as a builder does (``lv``, ``lv1``...), the names the importer gave the model's
    own bindings, and a view would then show a transform at the line of the binding it shares a name
    with.  The model's bindings keep their names.  A convolution whose conversion TVM refuses keeps
    the model's layout (``lever_guard.each``: the others are converted; ONNX's ``Sum`` of two
    convolutions, imported as stack + sum, is refused: docs/models.md)."""
    if not channels_last(target, off=off):
        return mod
    from . import lever_guard
    mod = inference_dropout(mod)
    calls = convertible(mod, target, off=off)

    def convert(names: list[str]):
        out = tvm.transform.Sequential(convert_layout(target, {calls[n] for n in names}, off=off))(mod)
        for gv, func in list(out.functions_items()):
            if isinstance(func, relax.Function) and isinstance(mod.functions.get(gv), relax.Function):
                out[gv] = _RenameInserted(inserted(mod[gv], func)).visit_expr(func)
        return out

    out = (lever_guard.each("nhwc", mod, list(calls), convert) if calls
           else lever_guard.whole("nhwc", lambda _: convert([]), mod))
    return with_winograd(out, target, off=off)


def with_winograd(mod, target, *, off: frozenset[str]):
    """``mod`` (converted) with the convolutions that fit computed as Winograd (``worker/winograd.py``),
    when the lever is on: FoldConstant first, so each converted weight is a constant; a module with
    no such convolution comes back as it came."""
    from .winograd import rewrite
    if not levers.winograd(target.kind.name, off):
        return mod
    from . import lever_guard

    def apply(m):
        out, count = rewrite(relax.transform.FoldConstant()(m))
        return out if count else m

    return lever_guard.whole("winograd", apply, mod)


def inserted(source, func) -> list:
    """The bindings of ``func`` (``source`` after a pass) that are not ``source``'s own: same name and
    operator as a binding of ``source``, first come, is the binding itself."""
    own: dict[str, object] = {b.var.name: _op_name(b.value) for b in bindings(source)}
    claimed: set[str] = set()
    out = []
    for b in bindings(func):
        name = b.var.name
        if name in own and own[name] == _op_name(b.value) and name not in claimed:
            claimed.add(name)
        else:
            out.append(b.var)
    return out


def _op_name(value) -> str | None:
    op = getattr(value, "op", None)
    return getattr(op, "name", None) or getattr(op, "name_hint", None)


@relax.expr_functor.mutator
class _RenameInserted(relax.PyExprMutator):
    """Renames the given binding variables ``layout_transform<k>`` (order of the list)."""

    def __init__(self, rename: list, mod=None):
        super().__init__(mod)
        self.rename = rename

    def visit_var_binding_(self, binding) -> None:
        value = self.visit_expr(binding.value)
        var = binding.var
        k = next((i for i, v in enumerate(self.rename) if v.same_as(var)), None)
        name = var.name if k is None else f"layout_transform{k}"
        kind = relax.DataflowVar if isinstance(var, relax.DataflowVar) else relax.Var
        new = kind(name, var.ty)
        self.builder_.emit_normalized(relax.VarBinding(new, value))
        self.set_var_remap(var, new)


def inference_dropout(mod):
    """Each ``R.nn.dropout(x)`` replaced by what TVM lowers it to, ``(x, ones_like(x))``: TVM's
    ConvertLayout fails on its tuple ("Expected nested to match tuple"), and any model with a Dropout
    node (an MLP, a transformer) could not be tuned or viewed."""
    dropout = tvm.ir.Op.get("relax.nn.dropout")
    out = mod
    for gv, func in list(mod.functions_items()):
        if isinstance(func, relax.Function) and any(getattr(b.value, "op", None) is not None
                                                    and b.value.op.same_as(dropout) for b in bindings(func)):
            out = out if out is not mod else tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
            out[gv] = _NoDropout(dropout).visit_expr(func)
    return out


@relax.expr_functor.mutator
class _NoDropout(relax.PyExprMutator):
    def __init__(self, dropout, mod=None):
        super().__init__(mod)
        self.dropout = dropout

    def visit_var_binding_(self, binding) -> None:
        value = binding.value
        if isinstance(value, relax.Call) and value.op.same_as(self.dropout):
            x = self.visit_expr(value.args[0])
            mask = self.builder_.emit(relax.op.ones_like(x), name_hint=f"{binding.var.name}_mask")
            value = relax.Tuple([x, mask])
        else:
            value = self.visit_expr(value)
        var = binding.var
        kind = relax.DataflowVar if isinstance(var, relax.DataflowVar) else relax.Var
        new = kind(var.name, var.ty)
        self.builder_.emit_normalized(relax.VarBinding(new, value))
        self.set_var_remap(var, new)


def channels_last(target, *, off: frozenset[str]) -> dict | None:
    """The layouts this job converts convolutions to before tuning (``analysis/levers.channels_last``
    with the job's levers ``off``: a run's own, ``tune_plan.request_levers``), or None."""
    return levers.channels_last(target.kind.name, off)


def folded(mod, target, *, off: frozenset[str]):
    """``legalize`` + FoldConstant: the calls FuseOps groups (kernels on bound weights alone are
    gone, their constants passed directly; binding names kept)."""
    return relax.transform.FoldConstant()(legalize(mod, target, off=off))


def group(mod, target, *, off: frozenset[str]):
    """``folded`` + FuseOps: fused groups as Relax functions (names inside kept)."""
    return relax.transform.FuseOps()(folded(mod, target, off=off))


def fuse(mod, target, *, off: frozenset[str]):
    """``group`` + FuseTIR: one PrimFunc per fused group, named as MetaSchedule names the tasks.
    On a CPU the weights (bound constants) are marked layout-free (``prepacks``), so the schedules
    MetaSchedule samples may store them in the layout the loops read (``RewriteLayout``)."""
    from . import lever_guard
    from .steps import step
    with step("lowering the model to kernels (LegalizeOps, FuseOps, FuseTIR)", LOWER_TODO):
        fused = relax.transform.FuseTIR()(group(mod, target, off=off))
    return lever_guard.whole("layout", mark_layout_free, fused) if prepacks(target, off=off) else fused


LOWER_TODO = ("an operator of the model TVM cannot lower: compare the imported model with onnxruntime "
              "(asight model FILE --compare-onnx MODEL.onnx) and report the operator with the model")
BUILD_TODO = ("the run's record for that kernel does not build here: re-tune it (asight tune FILE), or "
              "export TVM's default build (asight export FILE --untuned)")


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


def prepacks(target, *, off: frozenset[str]) -> bool:
    """Whether a build for ``target`` packs weights into the tuned schedules' layouts (the layout
    lever, issue 21; docs/models.md): on CPUs, unless ``off`` names ``layout``."""
    return levers.prepacks(target.kind.name, off)


def is_reshape(func) -> bool:
    """A kernel that only re-indexes its input (``relax.analysis.has_reshape_pattern``): the build's
    ``RewriteDataflowReshape`` turns its calls into the VM's no-copy reshape, so it is never run as a
    kernel and has nothing to tune (ResNet-18's flatten; issue 21's "a trial each for nothing")."""
    return isinstance(func, tvm.tirx.PrimFunc) and bool(relax.analysis.has_reshape_pattern(func))


def kernel_of(built_name: str) -> str:
    """The fused kernel (task) a function of a ``build_tuned`` library runs: a kernel whose schedule
    re-lays its weights is named ``<kernel>_prepacked`` there (``SplitLayoutRewritePreproc``)."""
    return built_name.removesuffix("_prepacked")


def build_tuned(database, mod, target, *, off: frozenset[str]):
    """``_build_tuned`` as one step: a TVM error names the kernel that does not build (``steps.step``)."""
    from .steps import step
    seen: dict = {}
    with step("building the model with the run's records", BUILD_TODO, lambda: failing_kernel(seen, target)):
        return _build_tuned(database, mod, target, seen, off=off)


def failing_kernel(seen: dict, target) -> str | None:
    """The first kernel of the scheduled module (``seen["applied"]``) that does not build alone, or None."""
    for gv, func in (seen["applied"].functions_items() if "applied" in seen else []):
        if isinstance(func, tvm.tirx.PrimFunc):
            try:
                tvm.tirx.build(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
            except Exception:  # noqa: BLE001 - this is the one
                return gv.name_hint
    return None


def _build_tuned(database, mod, target, seen: dict, *, off: frozenset[str]):
    """The executable of ``mod`` with ``database``'s schedules: what ``compile_relax`` builds, plus the
    weight prepack on a CPU: the fused kernels (``fuse``) take their records, each record's weight
    re-layout is split into its own kernel (``SplitLayoutRewritePreproc``) and folded into the
    constants at build time, so the library reads packed weights and never re-packs them a call.
    On a GPU the kernels without a record get DLight's default schedule (TIR without thread binding
    cannot run there), and the records are applied to the very kernels the run tuned (``fuse``)."""
    from .baseline import dlight_default, is_gpu
    from .parse import checked_for_build
    with target, database, tvm.transform.PassContext(opt_level=3):
        applied = checked_for_build(relax.transform.MetaScheduleApplyDatabase()(fuse(mod, target, off=off)), target,
                                    "the build with the run's records")
    seen["applied"] = applied
    if is_gpu(target):
        return tvm.compile(dlight_default(applied, target), target=target)
    if not prepacks(target, off=off) and not channels_last(target, off=off):
        return ms.relax_integration.compile_relax(database, mod, target, params=None)
    from . import lever_guard      # refused: each kernel re-lays its weights at every call (slower, same outputs)
    packed = relax.transform.FoldConstant()(lever_guard.whole("layout", split_layout_preproc, applied))
    return tvm.compile(packed, target=target)


PREPROC = "meta_schedule.layout_rewrite_preproc"


def split_layout_preproc(mod):
    """``SplitLayoutRewritePreproc`` on the kernels that have a weight re-layout to split.  The pass
    stops at any kernel whose root holds no compute block (TopK's and CumSum's call a library or run
    one opaque loop nest: "There should be a compute block if there is only one subtree under the
    root"), so those are set aside and put back unchanged."""
    kernels = {gv: f for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
    aside = {gv: f for gv, f in kernels.items() if PREPROC not in tvm.ir.save_json(f)}
    if len(aside) == len(kernels):
        return mod
    rest = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in aside}, attrs=mod.attrs)
    split = relax.transform.SplitLayoutRewritePreproc()(rest)
    for gv, func in aside.items():
        split[gv] = func
    return split


def bindings(func) -> list:
    """The bindings of a Relax function, in order, across its dataflow blocks."""
    return [b for block in func.body.blocks for b in block.bindings]
