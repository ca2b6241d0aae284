"""textDocument/documentSymbol: modules, functions, loops, blocks, buffers and Relax bindings."""
from __future__ import annotations

from lsprotocol import types

from ..tvmscript.model import Function, Outline
from .convert import first_line_range, to_range

K = types.SymbolKind


def _node(name: str, detail: str, kind: types.SymbolKind, rng: dict, sel: dict) -> dict:
    return {"name": name, "detail": detail, "kind": kind, "range": rng, "sel": sel, "children": []}


def function_nodes(fn: Function, lines: list[str]) -> dict:
    """A function's symbol tree: loops and blocks nested by their ranges, buffers and bindings."""
    root = _node(fn.name, fn.kind.replace("_", " "), K.Function, fn.range, fn.name_range)
    items = []
    for loop in fn.loops:
        extents = ", ".join(str(e) for e in loop.extents)
        items.append(_node(f"for {', '.join(loop.vars)}", f"{loop.kind}({extents})", K.Operator, loop.range,
                           first_line_range(loop.range, lines)))
    for blk in fn.blocks:
        if blk.name != "root":
            detail = f"block [{blk.iter_kinds}]" + (f" → {', '.join(blk.writes)}" if blk.writes else "")
            items.append(_node(blk.name, detail, K.Struct, blk.range, blk.name_range))
    for buf in fn.buffers:
        shape = "×".join(str(s) for s in buf.shape)
        items.append(_node(buf.name, f"{buf.dtype}[{shape}] ({buf.kind})", K.Variable, buf.range, buf.range))
    for bind in fn.bindings:
        items.append(_node(bind.name, bind.op, K.Variable, bind.range, first_line_range(bind.range, lines)))
    items.sort(key=lambda n: (n["range"]["start"]["line"], n["range"]["start"]["character"],
                              -n["range"]["end"]["line"]))
    stack = [root]
    for item in items:
        while len(stack) > 1 and not _inside(item["range"], stack[-1]["range"]):
            stack.pop()
        stack[-1]["children"].append(item)
        if item["kind"] in (K.Operator, K.Struct):
            stack.append(item)
    return root


def _inside(inner: dict, outer: dict) -> bool:
    a, b = inner["start"], outer["start"]
    c, d = inner["end"], outer["end"]
    return (a["line"], a["character"]) >= (b["line"], b["character"]) and \
        (c["line"], c["character"]) <= (d["line"], d["character"])


def outline_nodes(outline: Outline, lines: list[str]) -> list[dict]:
    """Top-level symbol trees: an IRModule class holds its functions."""
    by_unit: dict[str, list[dict]] = {}
    for fn in outline.functions:
        by_unit.setdefault(fn.unit, []).append(function_nodes(fn, lines))
    out = []
    for unit in outline.units:
        children = by_unit.get(unit.name, [])
        if unit.kind == "ir_module":
            line = unit.range["start"]["line"]
            sel = next((first_line_range({"start": {"line": i, "character": 0}, "end": {"line": i, "character": 0}},
                                         lines) for i in range(line, min(unit.end_line + 1, len(lines)))
                        if lines[i].lstrip().startswith("class ")), unit.range)
            node = _node(unit.name, "ir_module", K.Module, unit.range, sel)
            node["children"] = children
            out.append(node)
        else:
            out.extend(children)
    return out


def to_document_symbols(nodes: list[dict]) -> list[types.DocumentSymbol]:
    return [types.DocumentSymbol(name=n["name"], detail=n["detail"], kind=n["kind"], range=to_range(n["range"]),
                                 selection_range=to_range(n["sel"]), children=to_document_symbols(n["children"]))
            for n in nodes]


def to_symbol_information(nodes: list[dict], uri: str, container: str | None = None) -> list[types.SymbolInformation]:
    """Flat symbols for clients without hierarchical document symbol support."""
    out = []
    for n in nodes:
        out.append(types.SymbolInformation(name=n["name"], kind=n["kind"], container_name=container,
                                           location=types.Location(uri=uri, range=to_range(n["range"]))))
        out.extend(to_symbol_information(n["children"], uri, n["name"]))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls, params: types.DocumentSymbolParams):
        doc = ls.doc(params.text_document.uri)
        nodes = outline_nodes((await ls.state.outline(doc)).outline, doc.lines)
        caps = ls.client_capabilities.text_document
        hierarchical = caps and caps.document_symbol and caps.document_symbol.hierarchical_document_symbol_support
        return to_document_symbols(nodes) if hierarchical else to_symbol_information(nodes, doc.uri)
