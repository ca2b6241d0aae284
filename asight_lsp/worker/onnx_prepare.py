"""An ONNX file as exporters write it, made ready for TVM's importer (``worker/model_import.py``):
external-data tensors read from the model's own folder only; operators TVM has no converter for
named before the import starts; ``Constant``'s attribute forms as the tensor TVM reads; an old-opset
model TVM fails on converted again after ONNX's version converter upgrades it; a conversion TVM
fails on named by operator and node(s), never TVM's bare message.  TVM is asked through ``compat``.
"""
from __future__ import annotations

import contextlib
import io
import os
import re

import numpy as np

from .compat import onnx_convert_map, tvm
from .programs import first_line

SHOWN_NODES = 3      # node names a message lists before "and N more"
HANDLED_APART = {"If"}   # converted by the importer itself, not through its converter map


def load(path: str):
    """The model at ``path`` with its external data (if any) read in: every external file must lie
    inside the model's folder (no absolute path, no ``..``, no link out of it)."""
    import onnx
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as err:  # noqa: BLE001  protobuf's errors are not one type
        raise ValueError(f"{path} is not a readable ONNX model ({type(err).__name__}: {err})") from None
    external = external_tensors(model)
    if external:
        folder = os.path.dirname(os.path.abspath(path))
        for tensor in external:
            refuse_escape(tensor, folder)
        from onnx.external_data_helper import load_external_data_for_model
        load_external_data_for_model(model, folder)
    return model


def external_tensors(model) -> list:
    """Every tensor of the model (initializers and node attributes) whose data is in another file."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    return [t for t in _get_all_tensors(model) if uses_external_data(t)]


def refuse_escape(tensor, folder: str) -> None:
    """Raise when ``tensor``'s external data is not a file inside ``folder``."""
    location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
    why = escape(location, folder)
    if why:
        raise ValueError(f"tensor {tensor.name!r} keeps its data in {location!r}, which {why}; external data must "
                         f"be a file in the model's folder ({folder}): nothing was read")


def escape(location: str, folder: str) -> str | None:
    """Why ``location`` (an external-data path) is not a file inside ``folder``, or None."""
    if not location:
        return "names no file"
    if os.path.isabs(location) or re.match(r"^[A-Za-z]:", location):
        return "is an absolute path"
    if ".." in re.split(r"[\\/]", location):
        return "climbs out of the folder (..)"
    root = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, path]) != root:
        return "is a link to a file outside the folder"
    if not os.path.isfile(path):
        return "does not exist"
    return None


# Constant's attribute forms since opset 12, as the tensor TVM's converter reads (``value``; it failed
# on the others with "no value in Constant"): attribute name -> numpy dtype
CONSTANT_FORMS = {"value_float": "float32", "value_floats": "float32", "value_int": "int64", "value_ints": "int64"}


def constants_as_tensors(model):
    """The model with every ``Constant`` node given as ``value_float(s)``/``value_int(s)`` written as
    the ``value`` tensor of the same numbers."""
    from onnx import helper, numpy_helper
    for node in model.graph.node:
        form = next((a for a in node.attribute if a.name in CONSTANT_FORMS), None) if node.op_type == "Constant" else None
        if form is None:
            continue
        array = np.array(helper.get_attribute_value(form), dtype=CONSTANT_FORMS[form.name])
        node.attribute.remove(form)
        node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(array)))
    return model


def node_list(nodes: list) -> str:
    """``a, b, c and 4 more``: the nodes' names (or first output where a node has no name)."""
    names = [n.name or (n.output[0] if n.output else "?") for n in nodes]
    more = f" and {len(names) - SHOWN_NODES} more" if len(names) > SHOWN_NODES else ""
    return ", ".join(names[:SHOWN_NODES]) + more


def unsupported(model) -> str | None:
    """One line naming each operator of the graph TVM's importer has no converter for, with its
    nodes and what to do; None when every operator has one."""
    known = onnx_convert_map() | HANDLED_APART
    missing: dict[str, list] = {}
    for node in model.graph.node:
        if node.op_type not in known:
            label = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            missing.setdefault(label, []).append(node)
    if not missing:
        return None
    ops = "; ".join(f"{op} (node{'s' if len(n) > 1 else ''} {node_list(n)})" for op, n in missing.items())
    return (f"TVM {tvm.__version__}'s ONNX importer has no converter for {ops}: export the model without "
            f"{'it' if len(missing) == 1 else 'them'} (another opset, or the operator written with supported ones)")


def converted(model, convert):
    """``convert(model)`` (TVM's ``from_onnx``); where it fails on a model of an opset before
    ``UPGRADE_TO``, ``convert`` of the model upgraded by ONNX's own version converter (TVM's
    converters read several operators only in their later form: Slice's starts and ends as inputs,
    Upsample's scales as an attribute).  A failure is one line (``failure_line``) about the model as
    it came."""
    try:
        return _quietly(convert, model)
    except ValueError as first:
        upgraded = upgrade(model)
        if upgraded is None:
            raise
        try:
            return _quietly(convert, upgraded)
        except ValueError:
            raise first from None


UPGRADE_TO = 17   # the opset the corpus's current exporters write (fixtures/models/zoo.py)


def upgrade(model):
    """``model`` converted to opset ``UPGRADE_TO`` by ``onnx.version_converter``, or None where it is
    that recent already or the converter cannot convert it."""
    from onnx import version_converter
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), UPGRADE_TO)
    if opset >= UPGRADE_TO:
        return None
    try:
        return version_converter.convert_version(model, UPGRADE_TO)
    except Exception:  # noqa: BLE001 - no adapter for one of its operators: the first failure stands
        return None


def _quietly(convert, model):
    """``convert(model)``, TVM's prints captured; a failure raised as ``failure_line``."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return convert(model)
    except Exception as err:  # noqa: BLE001 - TVM's importer raises anything (TypeError, TVMError, ...)
        raise ValueError(failure_line(model, printed.getvalue(), err)) from None


def failure_line(model, printed: str, err: BaseException) -> str:
    """The line for a failed conversion: the operator TVM printed, the model's nodes of that type."""
    first = first_line(err)
    found = re.search(r"Error converting operator (\w+)", printed)
    if not found:
        return f"TVM {tvm.__version__}'s ONNX importer failed (no operator named): {first}"
    op = found.group(1)
    nodes = [n for n in model.graph.node if n.op_type == op]
    return (f"TVM {tvm.__version__}'s ONNX importer failed on operator {op} (node{'s' if len(nodes) > 1 else ''} "
            f"{node_list(nodes)}): {first}; those nodes use an attribute, input form or shape TVM does not "
            f"convert: export them another way (another opset, static shapes) or replace them")
