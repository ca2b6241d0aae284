"""``asight import model.pt2``'s TVM side: a saved ``torch.export`` program through TVM's
``relax.frontend.torch.from_exported_program``, in the **sandboxed** worker (docs/safety.md).

Loading a ``.pt2`` is not reading data: PyTorch's loader unpickles (the sample inputs, any tensor
subclass or custom object, with ``weights_only=False`` as a fallback), imports the modules an enum in
a pytree context names, and parses shape expressions with sympy's ``sympify``.  So the load, the
import and the check against PyTorch run in the worker whose OS sandbox refuses files, processes and
sockets; the worker sends back the file's text and each weight as its own frame (``weight`` events:
a model's weights exceed one frame), and the core writes them (``services/model_import.py``).

Types a program's inputs or outputs were flattened through (``transformers``' ``ModelOutput``
classes: ``BaseModelOutputWithPoolingAndCrossAttentions``) are registered with PyTorch's pytree only
where the module defining them was imported; the loader refused every such program ("Deserializing
transformers.modeling_outputs.… in pytree is not registered", logged as a warning and replaced by
"see the warnings above").  They are registered here as stand-ins under their serialized names, so
no module the file names is imported: a stand-in keeps the children in order, which is all the
import and the check need.
"""
from __future__ import annotations

import json
import logging
import zipfile

import numpy as np

from ..engine import wire
from .compat import host_target, relax, torch_importer, tvm
from .inputs import compare_outputs, random_arrays
from .model_import import UsageError, _static, dims, param_type, prepared
from .remeasure import flatten

IMPORTER = "relax.frontend.torch.from_exported_program"
RTOL, ATOL = 1e-3, 1e-4          # the check's tolerance (atol scaled by max(1, max |PyTorch's output|))


def frontend():
    try:
        return torch_importer()
    except ImportError:
        raise ValueError("importing a torch.export program needs PyTorch in the worker's Python "
                         "(pip install 'asight-lsp[torch]'); or export the model to ONNX and import that") from None


# ---------------------------------------------------------------------------------------------- load

def spec_types(path: str) -> set[str]:
    """Every pytree node type the archive's programs name in their input and output specs (JSON read
    as data from the zip; nothing is loaded)."""
    found: set[str] = set()
    with zipfile.ZipFile(path) as archive:
        programs = [name for name in archive.namelist() if "/models/" in name and name.endswith(".json")]
        if not programs:     # a zip, but no program: torch.save of a module or a state dict writes one too
            raise ValueError("a zip archive without one, as torch.save writes: save "
                             "torch.export.export(model, args) with torch.export.save")
        for name in programs:
            program = json.loads(archive.read(name))
            for entry in program.get("graph_module", {}).get("module_call_graph", []):
                signature = entry.get("signature") or {}
                for key in ("in_spec", "out_spec"):
                    if signature.get(key):
                        _types(json.loads(signature[key]), found)
    return found


def _types(node, found: set[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _types(item, found)
    elif isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        for child in node.get("children_spec") or []:
            _types(child, found)


class StandIn:
    """A pytree node of a type this process has not imported: its children in order, its context."""

    def __init__(self, children, context):
        self.children, self.context = list(children), context


def register_stand_ins(pytree, names: set[str]) -> list[str]:
    """A ``StandIn`` subclass registered under each serialized name pytree does not know; the names."""
    added = []
    for name in sorted(names - set(pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE)):
        cls = type(name.rsplit(".", 1)[-1], (StandIn,), {"serialized_name": name})
        pytree.register_pytree_node(cls, lambda node: (node.children, node.context),
                                    lambda children, context, cls=cls: cls(children, context),
                                    serialized_type_name=name)
        added.append(name)
    return added


class _Reasons(logging.Handler):
    """The exceptions PyTorch's loader logs as warnings before raising "see the warnings above"."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.errors: list[BaseException] = []

    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def one_line(err: BaseException) -> str:
    """``Type: first line`` of the innermost cause of ``err``."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def load_program(path: str):
    """The ``ExportedProgram`` saved in ``path``, or ValueError saying in one line what PyTorch refused."""
    torch, pytree, _ = frontend()
    try:
        register_stand_ins(pytree, spec_types(path))
    except zipfile.BadZipFile:
        raise ValueError(f"{path} is not a saved torch.export program (not a zip archive, which "
                         "torch.export.save writes)") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path} is not a saved torch.export program ({err})") from None
    reasons, logger = _Reasons(), logging.getLogger("torch.export")
    logger.addHandler(reasons)
    try:
        return torch.export.load(path)
    except Exception as err:  # noqa: BLE001 - PyTorch's loader raises many types; say which, in one line
        why = one_line(reasons.errors[-1]) if reasons.errors else one_line(err)
        raise ValueError(f"PyTorch could not load {path}: {why}") from None
    finally:
        logger.removeHandler(reasons)


NARROW_INTEGERS = ("bool", "int8", "uint8", "int16", "int32")


def cumsum_as_pytorch(node, importer):
    """``torch.cumsum`` sums a bool or narrow integer tensor in int64 when no dtype is given; TVM's
    translator kept the input's dtype, and a bool cumsum (the causal-mask code of `transformers` 5's
    GPT-2 and Llama: ``(diff != 1).cumsum(-1)``) did not compile ("CreateAdd ... MatchesCode(kDLFloat)")."""
    x = importer.env[node.args[0]]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    dtype = node.kwargs.get("dtype")
    dtype = importer._convert_data_type(str(dtype), importer.env) if dtype is not None else None
    if dtype is None and str(getattr(param_type(x), "dtype", "")) in NARROW_INTEGERS:
        dtype = "int64"
    return importer.block_builder.emit(relax.op.cumsum(x, dim, dtype))


CONVERTERS = {"cumsum.default": cumsum_as_pytorch}    # TVM's own conversion, corrected where it differs from PyTorch


def import_program(program):
    """TVM's import of ``program``, weights kept as parameters; ValueError in one line otherwise."""
    _, _, from_exported_program = frontend()
    try:
        return from_exported_program(program, keep_params_as_input=True, custom_convert_map=CONVERTERS)
    except Exception as err:  # noqa: BLE001 - the translator raises AssertionError, KeyError, TVMError ...
        node = failing_node(err)
        where = f" at node {node.name} (operator {node.target})" if node is not None else ""
        raise ValueError(f"TVM's from_exported_program could not import the program{where}: {one_line(err)}") from None


def failing_node(err: BaseException):
    """The FX node TVM's translator was converting when ``err`` was raised (its innermost frame with a
    local ``node``), or None: the translator's errors do not name it."""
    found, tb = None, err.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("node")
        if hasattr(node, "op") and hasattr(node, "target") and hasattr(node, "name"):
            found = node
        tb = tb.tb_next
    return found


# ---------------------------------------------------------------------------------------------- shapes

def bind_shapes(mod, shapes: dict):
    """``--shape NAME=D,D,...`` for a program with dimensions declared dynamic (``torch.export.Dim``):
    each symbolic dimension of that input bound to its size, a fixed one checked."""
    if not shapes:
        return mod
    func = mod["main"]
    num_input = int(func.attrs["num_input"]) if func.attrs and "num_input" in func.attrs else len(func.params)
    inputs = {p.name: p for p in func.params[:num_input]}
    binding = {}
    for name, sizes in shapes.items():
        if name not in inputs:
            raise UsageError(f"--shape {name}=...: the program has no input named {name!r} "
                             f"(its inputs: {', '.join(inputs) or 'none'})")
        declared = dims(inputs[name])
        if len(declared) != len(sizes):
            raise UsageError(f"--shape {name}={','.join(map(str, sizes))}: the input has {len(declared)} dimensions")
        for k, (want, have) in enumerate(zip(sizes, declared)):
            if _static(have) and int(have) != want:
                raise UsageError(f"--shape {name}={','.join(map(str, sizes))}: dimension {k} of {name} is fixed at "
                                 f"{int(have)} in the program, not {want} (--shape sets dynamic dimensions only)")
            if not _static(have):
                require_in_range(func, name, k, str(have), want)
                binding[have] = want
    if not binding:
        return mod
    mod = relax.transform.BindSymbolicVars(binding, "main")(mod)
    func = mod["main"]
    for key in BOUNDS:            # the bounds of the dimensions now fixed go with them
        if func.attrs and key in func.attrs:
            kept = {v: b for v, b in func.attrs[key].items() if v not in {str(var) for var in binding}}
            func = func.with_attr(key, kept) if kept else func.without_attr(key)
    mod["main"] = func
    return mod


BOUNDS = ("tir_var_lower_bound", "tir_var_upper_bound")     # from torch.export.Dim(min=, max=)


def require_in_range(func, name: str, k: int, var: str, size: int) -> None:
    """A size within the range the program was exported for (``torch.export.Dim(min=, max=)``)."""
    attrs = func.attrs or {}
    low, high = (int(attrs[key][var]) if key in attrs and var in attrs[key] else None for key in BOUNDS)
    if (low is not None and size < low) or (high is not None and size > high):
        raise UsageError(f"--shape {name}: dimension {k} ({var}) was exported for sizes {low}..{high}, not {size}")


# ---------------------------------------------------------------------------------------------- check

def check_against_torch(program, parsed, weights: dict, inputs: list[dict], seed: int = 0) -> dict:
    """The imported module (the file's text parsed back, the weights bound, built for this CPU) and
    the exported program run on one seeded input: ``{check, against}`` (``inputs.compare_outputs``,
    the rule every comparison of outputs uses) or ``{skipped}``, as ``views/outputs.verdict`` words it."""
    if any(not isinstance(d, int) for spec in inputs for d in spec["shape"]):
        return {"skipped": "the inputs have dynamic dimensions (give --shape to check)"}
    torch, pytree, _ = frontend()
    arrays = random_arrays([(tuple(i["shape"]), i["dtype"]) for i in inputs], seed)
    with torch.no_grad():
        expected = pytree.tree_leaves(program.module()(*[torch.from_numpy(a.copy()) for a in arrays]))
    reference = [t.detach().numpy() for t in expected if isinstance(t, torch.Tensor)]
    mod = relax.transform.BindParams("main", {n: tvm.runtime.tensor(w) for n, w in weights.items()})(parsed)
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(tvm.compile(mod, target=host_target()), dev)
    got = flatten(vm["main"](*[tvm.runtime.tensor(a, dev) for a in arrays]))
    check = compare_outputs([f"output{k}" for k in range(len(reference))], reference, got, RTOL, ATOL,
                            source=f"numpy.isclose on one seeded input (seed {seed}), the imported module built "
                                   "for this CPU against the exported program")
    return {"check": check, "against": f"PyTorch {torch.__version__}"}


# ---------------------------------------------------------------------------------------------- handler

WEIGHT_PART = 64 << 20     # bytes a frame: a weight can be larger than a frame (engine/framing.MAX_FRAME)


def send_weight(emit, name: str, value: np.ndarray) -> None:
    """``value`` as ``weight`` events: name, dtype, shape and its raw bytes in parts, in order."""
    raw = np.ascontiguousarray(value).tobytes()
    for start in range(0, max(len(raw), 1), WEIGHT_PART):
        if emit:
            emit({"type": "weight", "name": name, "dtype": value.dtype.str, "shape": list(value.shape),
                  "data": raw[start:start + WEIGHT_PART]})


def import_exported(params: dict, emit=None, off=None) -> dict:
    """Load, import and check ``params["model"]``; each weight goes out as a ``weight`` event (name,
    dtype, shape, raw bytes), the reply carries the file's text and the check."""
    path = params["model"]
    program = load_program(path)
    mod = bind_shapes(import_program(program), params.get("shapes") or {})
    done = prepared(mod, path, params["weights_name"], IMPORTER, {})
    if emit and params.get("check") is not False:
        emit({"type": "status", "message": "running the imported module and the exported program on one input"})
    try:
        check = None if params.get("check") is False else check_against_torch(
            program, done["parsed"], done["weights"], done["reply"]["inputs"], int(params.get("seed") or 0))
    except Exception as err:  # noqa: BLE001 - the file is still written: tuning will say more
        check = {"skipped": f"the imported module or the exported program could not run ({one_line(err)})"}
    for name, value in done["weights"].items():
        send_weight(emit, name, value)
    return {"text": done["text"], **done["reply"], **({"check": check} if check is not None else {})}


HANDLERS = {wire.IMPORT_EXPORTED: import_exported}
