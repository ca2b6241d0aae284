"""``asight import``'s TVM side: an ONNX model through TVM's own importer, written as a TVMScript
file every other command accepts, weights saved beside it.  ``prepared`` (the text, the weights) is
shared with a saved ``torch.export`` program, which the sandboxed worker loads (``torch_import``).

The importer keeps the weights as parameters (``keep_params_in_input``) and lists their values in
``R.func_attr({"params": [...]})``, which TVM's printer writes as ``metadata[...]`` references the
file cannot resolve; the values go to ``<file>.weights.npz`` instead (one array per Relax parameter,
by name) and the attribute is dropped.  ``num_input`` stays: the parameters after it are weights.

Tensors the importer made constants (ONNX ``Constant``/``ConstantOfShape`` weights, anything it
folds; PyTorch buffers such as BatchNorm statistics) would print as ``metadata[...]`` too: they are
folded (``FoldConstant``) and then become weights the same way (``constants_as_weights``), one rule
for every importer.
"""
from __future__ import annotations

import keyword
import os
import re

import numpy as np

from ..engine import wire
from ..store.files import write_model
from . import onnx_prepare
from .compat import onnx_importer, relax, script_text, tvm

HEADER = ("# Imported by `asight import {model}` with TVM {tvm} ({importer}, weights kept as parameters).\n"
          "# Weights: {weights} (one array per parameter after the first {num_input}; measurements and\n"
          "# `asight export` use them).  Edit freely: every asight command reads this file as TVMScript.\n")


def _import(path: str, shapes: dict | None):
    """(IRModule, importer label, {renamed input or weight: its name in the file}) of an ONNX file.
    A saved ``torch.export`` program is loaded by a sandboxed worker instead (``worker/torch_import``)."""
    if path.endswith((".pt2", ".pt")):
        raise ValueError("a torch.export program is imported by the sandboxed worker (import_exported), "
                         "not this one: loading it unpickles data (docs/safety.md)")
    _, from_onnx = onnx_importer()
    model = onnx_prepare.load(path)
    check_shapes(model, shapes or {})
    missing = onnx_prepare.unsupported(model)
    if missing:
        raise ValueError(missing)
    model, renamed = python_names(weights_not_inputs(model))
    shapes = {renamed.get(name, name): dims for name, dims in (shapes or {}).items()}
    model = shape_constants(onnx_prepare.constants_as_tensors(model))
    mod = onnx_prepare.converted(model, lambda m: from_onnx(m, shape_dict=shapes or None, keep_params_in_input=True))
    return mod, "relax.frontend.onnx.from_onnx", renamed


class UsageError(ValueError):
    """``--shape`` does not fit the model (the CLI exits 2: a wrong argument, not a bad model)."""


def check_shapes(model, shapes: dict) -> None:
    """``--shape`` names an input of the model, with its rank, and changes only symbolic dimensions
    (TVM's importer ignored an unknown name and overrode a static size without a word)."""
    weights = {init.name for init in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in weights}
    for name, dims in shapes.items():
        if name not in inputs:
            raise UsageError(f"--shape {name}=...: the model has no input named {name!r} "
                             f"(its inputs: {', '.join(inputs) or 'none'})")
        declared = [(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?"))
                    for d in inputs[name].type.tensor_type.shape.dim]
        if declared and len(declared) != len(dims):
            raise UsageError(f"--shape {name}={','.join(map(str, dims))}: the input has {len(declared)} dimensions "
                             f"({declared})")
        fixed = [(k, want, have) for k, (want, have) in enumerate(zip(dims, declared)) if isinstance(have, int)
                 and have > 0 and have != want]
        if fixed:
            k, want, have = fixed[0]
            raise UsageError(f"--shape {name}={','.join(map(str, dims))}: dimension {k} of {name} is fixed at {have} "
                             f"in the model, not {want} (--shape sets symbolic dimensions only)")


def weights_not_inputs(model):
    """The model without graph inputs that are also initializers: older exporters list every weight
    as an input with a default (``keep_initializers_as_inputs``), which TVM's importer declares twice
    ("Variable w already defined in current scope").  They are weights: they go to the weights file."""
    weights = {init.name for init in model.graph.initializer}
    extra = [i for i in model.graph.input if i.name in weights]
    for item in extra:
        model.graph.input.remove(item)
    return model


RESERVED = {"R", "T", "I", "tvm", "relax", "tirx", "np"}    # the file's own module aliases


def python_names(model) -> tuple[object, dict]:
    """The model with every input and weight whose name cannot be a Python parameter renamed: a
    keyword (``in``, ``is``), a leading digit (``0_weight``) or one of the file's aliases (``R``)
    (TVM's printer writes them as they are, and the file would not parse: "the safety gate refuses (0
    units)").  Returns (model, {old: new})."""
    graph = model.graph
    names = [i.name for i in graph.input] + [w.name for w in graph.initializer]
    taken = set(names) | {o for n in graph.node for o in n.output}
    renamed = {}
    for name in names:
        plain = re.sub(r"\W", "_", name)
        if name in renamed or not (keyword.iskeyword(plain) or plain[:1].isdigit() or plain in RESERVED):
            continue
        new = f"{plain}_" if not plain[:1].isdigit() else f"t_{plain}"
        while new in taken:
            new += "_"
        taken.add(new)
        renamed[name] = new
    for value in [*graph.input, *graph.initializer, *graph.output]:
        value.name = renamed.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [renamed.get(n, n) for n in node.input]
    return model, renamed


SHAPE_CONSTANT_MAX = 64   # elements: a shape, axes, pads, starts/ends, a k; never a learned weight


def shape_constants(model):
    """The model with its small integer initializers as ``Constant`` nodes.  Kept as parameters (as
    weights are), an Expand's or Reshape's shape, Pad's pads or Slice's starts were not known when
    TVM's importer built the graph: it emitted an impure ``vm.builtin.tensor_to_shape`` call in a pure
    function (its own printer and parser then refuse the model: "not well-formed") or a dynamic
    shape.  As constants the importer folds them.  Learned weights are floats (or int8, quantized)."""
    from onnx import helper
    ints = [init for init in model.graph.initializer
            if init.data_type in (7, 6) and int(np.prod(list(init.dims) or [1])) <= SHAPE_CONSTANT_MAX]  # INT64, INT32
    for init in reversed(ints):
        model.graph.initializer.remove(init)
        model.graph.node.insert(0, helper.make_node("Constant", [], [init.name], value=init))
    return model


def split_weights(mod, fn: str = "main") -> tuple[object, list[np.ndarray], int]:
    """``mod`` without the ``params`` attribute of ``fn``, the weights in parameter order, and
    ``num_input`` (how many leading parameters are the model's inputs)."""
    func = mod[fn]
    attrs = func.attrs or {}
    values = [v.numpy() for v in attrs["params"]] if "params" in attrs else []
    num_input = int(attrs["num_input"]) if "num_input" in attrs else len(func.params) - len(values)
    if "params" in attrs:
        mod[fn] = func.without_attr("params")
    return mod, values, num_input


def constants_as_weights(mod, values: list, fn: str = "main") -> tuple[object, list[np.ndarray]]:
    """``mod`` with every non-scalar constant of ``fn`` folded where it can be, then made a weight: a
    parameter appended after the others (its value appended to ``values``).  The printer writes a
    scalar inline (``R.const(0.5, "float32")``) and any other tensor as ``metadata[...]``, which a file
    cannot hold.  One constant used twice is one weight; its name is the first binding that uses it."""
    mod = relax.transform.FoldConstant()(mod)
    func = mod[fn]
    lift = _LiftConstants()
    body = lift.visit_expr(func.body)
    if not lift.found:
        return mod, values
    params = list(func.params) + [var for _, var in lift.found]
    mod[fn] = relax.Function(params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    return mod, values + [const.value.numpy() for const, _ in lift.found]


@relax.expr_functor.mutator
class _LiftConstants(relax.PyExprMutator):
    """Replaces each non-scalar ``relax.Constant`` by a new parameter variable (``found``, in order).
    A Relax constant is a ``tvm.ir.GenericConst`` in TVM 0.27.
    TVM's default visitors do not pass a call's or a tuple's constant operands to ``visit_constant_``,
    so the places a constant can stand (a binding's value, a call's argument, a tuple's field) are
    visited here."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.found: list = []
        self.binding = "const"
        self.taken: set = set()

    def visit_var_binding_(self, binding) -> None:
        self.binding = binding.var.name
        self.builder_.emit_normalized(relax.VarBinding(binding.var, self._operand(binding.value)))

    def visit_call_(self, call):
        args = [self._operand(arg) for arg in call.args]
        return relax.Call(call.op, args, call.attrs, call.ty_args, call.span)

    def visit_tuple_(self, tup):
        return relax.Tuple([self._operand(field) for field in tup.fields], tup.span)

    def _operand(self, expr):
        if not isinstance(expr, tvm.ir.GenericConst) or len(expr.value.shape) == 0:
            return self.visit_expr(expr)
        for old, var in self.found:
            if old.same_as(expr):
                return var
        name = f"{self.binding}_const"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        var = relax.Var(name, expr.ty)
        self.found.append((expr, var))
        return var


def prelu_per_channel(mod, fn: str = "main"):
    """``mod`` with every PReLU whose slope does not fit the axis it was given applied per channel
    (axis 1) where the slope is that long: a rank-1 slope of C values on an NCHW tensor (the per-channel
    slope of opsets before 7 and of converters that never reshaped it) imports as ``prelu(axis=3)``,
    which TVM's build refused with a bare ``AssertionError``."""
    fixer = _PreluAxis()
    body = fixer.visit_expr(mod[fn].body)
    if fixer.changed:
        func = mod[fn]
        mod[fn] = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    return mod


def channel_axis(x_shape: list, slope: int, axis: int) -> int:
    """The axis a PReLU slope of ``slope`` values applies to: ``axis`` where it has that many entries,
    else the channel axis (1) where that has them."""
    if axis < len(x_shape) and x_shape[axis] == slope:
        return axis
    return 1 if len(x_shape) > 1 and x_shape[1] == slope else axis


@relax.expr_functor.mutator
class _PreluAxis(relax.PyExprMutator):
    def __init__(self, mod=None):
        super().__init__(mod)
        self.changed = False

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if getattr(call.op, "name", "") != "relax.nn.prelu":
            return call
        x_shape, slope_shape = (_dims(arg) for arg in call.args[:2])
        axis = int(call.attrs.axis)
        if not x_shape or len(slope_shape) != 1 or channel_axis(x_shape, slope_shape[0], axis) == axis:
            return call
        self.changed = True
        return relax.op.nn.prelu(call.args[0], call.args[1], channel_axis(x_shape, slope_shape[0], axis))


def _dims(expr) -> list:
    values = getattr(getattr(expr.ty, "shape", None), "values", None) or []
    return [int(v) if _static(v) else None for v in values]


def printed(mod) -> tuple[str, object]:
    """The module as TVMScript and that text parsed back: the printer renames parameters
    (``conv1.weight`` -> ``conv1_weight``), and the file's names are the ones that count.  The text
    (the model's names are in it) passes the safety gate and is parsed by a sandboxed worker, as
    every file is: this worker runs unsandboxed to write the files."""
    from ..tvmscript.outline import build_outline
    from ..tvmscript.pysource import source_lines
    from .parse import parse_unit
    text = script_text(mod)
    outline = build_outline(text, "imported.py")
    unit = outline.units[0] if len(outline.units) == 1 else None
    if unit is None or not unit.safe:
        why = unit.problems[0]["message"] if unit is not None else f"{len(outline.units)} units"
        raise ValueError(f"TVM printed the imported model as TVMScript that the safety gate refuses ({why}); "
                         "nothing was written")
    try:
        return text, parse_unit(source_lines(text), {"start_line": unit.start_line, "end_line": unit.end_line},
                                outline.constants, outline.aliases)
    except Exception as err:  # noqa: BLE001 - TVM's printer and parser disagree: say so, in one line
        why = str(err).strip().splitlines()[0].removeprefix("error: ") if str(err).strip() else type(err).__name__
        raise ValueError(f"TVM printed the imported model as TVMScript that its own parser rejects ({why}); "
                         "nothing was written") from None


def tensor_params(func, num_input: int) -> list[dict]:
    """Name, shape and dtype of the first ``num_input`` parameters of a Relax function."""
    out = []
    for p in func.params[:num_input]:
        shape = [int(v) if _static(v) else str(v) for v in dims(p)]
        out.append({"name": p.name, "shape": shape, "dtype": str(getattr(param_type(p), "dtype", "?"))})
    return out


def param_type(param):
    return getattr(param, "ty", None) or getattr(param, "struct_info", None)   # TVM 0.27: ``ty``


def dims(param) -> list:
    """The dimensions of a tensor parameter as TVM holds them (ints, or symbolic ``tirx.Var``s)."""
    return list(getattr(getattr(param_type(param), "shape", None), "values", None) or [])


def tensor_outputs(func) -> list[dict]:
    """Shape and dtype of each tensor a Relax function returns (a tuple's fields, in order; a nested
    field as ``{"tuple": n}``): what the load snippet tells a user they get back."""
    info = func.ret_ty          # TVM 0.27: a TupleType (``fields``) or a TensorType (``shape``, ``dtype``)
    fields = list(info.fields) if hasattr(info, "fields") else [info]
    out = []
    for field in fields:
        if hasattr(field, "fields"):
            out.append({"tuple": len(field.fields)})
            continue
        values = getattr(getattr(field, "shape", None), "values", None) or []
        out.append({"shape": [int(v) if _static(v) else str(v) for v in values],
                    "dtype": str(getattr(field, "dtype", "?"))})
    return out


def _static(dim) -> bool:
    try:
        int(dim)
        return True
    except (TypeError, ValueError):
        return False


def comment_safe(name: str) -> str:
    """``name`` as it may stand inside a one-line ``#`` comment: a file name with a line break (or any
    control character) would otherwise end the comment and put the rest of the name in the file as a
    live Python statement."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def prepared(mod, model: str, weights_name: str, importer: str, renamed: dict, dce: bool = False) -> dict:
    """What ``asight import`` writes for an imported module, whichever importer made it: the file's
    text (header + TVMScript that passed the gate and TVM's parser), the weights by the file's
    parameter names, and the reply's summary.  ``parsed`` is the text parsed back (its ``main``)."""
    mod = relax.transform.DeadCodeElimination()(mod) if dce else mod
    mod, values, num_input = split_weights(mod)
    mod, values = constants_as_weights(prelu_per_channel(mod), values)
    script, parsed = printed(mod)
    func = parsed["main"]
    weights = {p.name: v for p, v in zip(func.params[num_input:], values)}
    header = HEADER.format(model=comment_safe(os.path.basename(model)), tvm=tvm.__version__, importer=importer,
                           weights=comment_safe(weights_name), num_input=num_input)
    text = header + script
    return {"text": text, "weights": weights, "parsed": parsed,
            "reply": {"importer": importer, "inputs": tensor_params(func, num_input), "params": len(weights),
                      "weight_bytes": int(sum(w.nbytes for w in weights.values())),
                      "lines": text.count("\n") + 1, "renamed": renamed,
                      "functions": sorted(gv.name_hint for gv in mod.get_global_vars())}}


def weights_path_of(out: str) -> str:
    return os.path.splitext(out)[0] + wire.WEIGHTS_SUFFIX


def import_model(params: dict, emit=None, off=None) -> dict:
    """Import the ONNX file ``params["model"]`` into ``params["out"]`` (+ weights beside); see the
    module docstring."""
    model, out = params["model"], params["out"]
    mod, importer, renamed = _import(model, params.get("shapes"))
    weights_path = weights_path_of(out)
    done = prepared(mod, model, os.path.basename(weights_path), importer, renamed, bool(params.get("dce")))
    write_model(out, weights_path, done["text"], done["weights"])
    return {"script": out, "weights": weights_path, **done["reply"]}


HANDLERS = {wire.IMPORT_MODEL: import_model}
