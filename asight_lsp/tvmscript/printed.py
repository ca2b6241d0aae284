"""What TVM's printer (``mod.script()``) writes around a module, read statically (docs/safety.md).

* ``n = TypeVar("n")`` lines before the module: symbolic shape variables the script uses.
* ``metadata = tvm.ir.load_json("<JSON>")`` (``show_meta=True``): the objects ``metadata["type"][i]``
  refers to.  The JSON is read here as data and checked to hold IR objects only; the worker loads it
  for the parser.  Without it the printer ends with ``# Metadata omitted…``.
* ``R.func_attr({"num_input": 1, "params": [metadata["ffi.Tensor"][0], …]})``: weights an importer kept
  as parameters.  The program does not need that entry; when the file has no metadata section the
  worker blanks it (``blank_metadata_params``) so the rest parses, keeping every line where it was.
"""
from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass

METADATA = "metadata"
_POD_TYPES = {"None", "int", "float", "bool"}
_FFI_DATA = {"ffi.String", "ffi.SmallStr", "ffi.Bytes", "ffi.SmallBytes", "ffi.Array", "ffi.Map", "ffi.Tensor",
             "ffi.Shape"}
_IR_PREFIXES = ("ir.", "relax.", "tirx.", "s_tir.")
_NOT_DATA = {"ir.EnvFunc"}  # names a packed function


@dataclass
class MetadataSection:
    """A printed ``metadata = tvm.ir.load_json(...)`` statement."""
    line: int            # 0-based line of the statement
    text: str            # the JSON
    problem: str | None  # why it cannot be used, or None

    @property
    def code(self) -> str:
        """What the outline's aliases record for it: changes when the JSON does."""
        return "metadata:" + hashlib.sha1(self.text.encode("utf-8", "replace")).hexdigest()[:16]


def type_var_names(tree: ast.Module) -> list[str]:
    """Names of top-level ``n = TypeVar("n")`` statements (the printer's symbolic variables)."""
    names = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            call, name = stmt.value, stmt.targets[0].id
            if isinstance(call, ast.Call) and _dotted(call.func) in ("TypeVar", "typing.TypeVar") \
                    and len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant) \
                    and call.args[0].value == name:
                names.append(name)
    return names


def metadata_section(tree: ast.Module, line_offset: int = 0) -> MetadataSection | None:
    """The top-level ``metadata = tvm.ir.load_json("<JSON>")`` statement, if the file has one."""
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == METADATA):
            continue
        call = stmt.value
        line = stmt.lineno - 1 + line_offset
        if not (isinstance(call, ast.Call) and _dotted(call.func) in ("tvm.ir.load_json", "ir.load_json",
                                                                      "load_json")
                and len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            return MetadataSection(line, "", "it is not tvm.ir.load_json of a string literal")
        return MetadataSection(line, call.args[0].value, json_problem(call.args[0].value))
    return None


def json_problem(text: str) -> str | None:
    """Why a metadata JSON must not be loaded (not TVM's format, or objects other than IR data)."""
    try:
        graph = json.loads(text)
    except (ValueError, RecursionError) as err:
        return f"its JSON does not parse ({err})"
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or not isinstance(graph.get("root_index"), int):
        return "its JSON is not a TVM object graph"
    for node in nodes:
        kind = node.get("type") if isinstance(node, dict) else None
        if not isinstance(kind, str):
            return "its JSON is not a TVM object graph"
        if kind in _NOT_DATA or not (kind in _POD_TYPES or kind in _FFI_DATA or kind.startswith(_IR_PREFIXES)):
            return f"it holds a '{kind}' object, which is not IR data"
    return None


def is_reference(node: ast.AST) -> bool:
    """``metadata["ffi.Tensor"][0]``: the only form of a metadata reference the gate accepts."""
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and type(node.slice.value) is int and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.slice, ast.Constant) and isinstance(node.value.slice.value, str)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == METADATA)


def params_entries(call: ast.Call) -> list[tuple[ast.AST, ast.AST]]:
    """``(key, value)`` of a ``*.func_attr({...})`` call's ``"params"`` entry when it holds only
    metadata references (what an importer with ``keep_params_in_input=True`` prints)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "func_attr" and len(call.args) == 1
            and isinstance(call.args[0], ast.Dict)):
        return []
    found = []
    for key, value in zip(call.args[0].keys, call.args[0].values):
        if isinstance(key, ast.Constant) and key.value == "params" and isinstance(value, (ast.List, ast.Tuple)) \
                and value.elts and all(is_reference(e) for e in value.elts):
            found.append((key, value))
    return found


def blank_metadata_params(text: str) -> str:
    """``text`` with every metadata-only ``"params"`` entry of ``func_attr`` replaced by blanks (and the
    comma that joined it), so TVM parses the rest with every line and column where it was."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for key, value in params_entries(node):
                spans.append(_entry_span(node.args[0], key, value))
    if not spans:
        return text
    lines = text.split("\n")
    for (l1, c1), (l2, c2) in sorted(spans, reverse=True):
        _blank(lines, l1, c1, l2, c2)
    return "\n".join(lines)


def _entry_span(mapping: ast.Dict, key: ast.AST, value: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    """(0-based line, column) start and end of ``key: value`` with the comma after it (or before it,
    for the last entry of several)."""
    index = mapping.keys.index(key)
    start = (key.lineno - 1, key.col_offset)
    end = (value.end_lineno - 1, value.end_col_offset)
    if index + 1 < len(mapping.keys):  # up to the next entry: the comma goes with this one
        nxt = mapping.keys[index + 1]
        end = (nxt.lineno - 1, nxt.col_offset)
    elif index > 0:  # the last one: from the end of the previous value
        prev = mapping.values[index - 1]
        start = (prev.end_lineno - 1, prev.end_col_offset)
    return start, end


def _blank(lines: list[str], l1: int, c1: int, l2: int, c2: int) -> None:
    """Replace the characters from (l1, c1) to (l2, c2) by spaces; line breaks stay.  Columns are
    UTF-8 byte offsets (``ast``), so the lines are edited as bytes."""
    for line in range(l1, l2 + 1):
        data = lines[line].encode("utf-8")
        start = c1 if line == l1 else 0
        end = c2 if line == l2 else len(data)
        lines[line] = (data[:start] + b" " * (end - start) + data[end:]).decode("utf-8", errors="replace")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None
