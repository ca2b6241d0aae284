"""textDocument/documentSymbol: modules, functions, loops, blocks, buffers and Relax bindings."""
from __future__ import annotations

import json

from lsprotocol import types

from ..tvmscript.model import Function, Outline
from .convert import RawJSON, first_line_range, range_json
from .state import off_loop_if_big

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


def module_node(unit, lines: list[str]) -> dict:
    """The symbol of an IRModule class (its selection range is the ``class`` line)."""
    line = unit.range["start"]["line"]
    sel = next((first_line_range({"start": {"line": i, "character": 0}, "end": {"line": i, "character": 0}}, lines)
                for i in range(line, min(unit.end_line + 1, len(lines))) if lines[i].lstrip().startswith("class ")),
               unit.range)
    return _node(unit.name, "ir_module", K.Module, unit.range, sel)


def outline_nodes(outline: Outline, lines: list[str]) -> list[dict]:
    """Top-level symbol trees: an IRModule class holds its functions."""
    by_unit: dict[str, list[dict]] = {}
    for fn in outline.functions:
        by_unit.setdefault(fn.unit, []).append(function_nodes(fn, lines))
    out = []
    for unit in outline.units:
        children = by_unit.get(unit.name, [])
        if unit.kind == "ir_module":
            node = module_node(unit, lines)
            node["children"] = children
            out.append(node)
        else:
            out.extend(children)
    return out


# --------------------------------------------------------------------------- JSON of the answer
# Written as text (f-strings, ``json.dumps`` for strings only): ~4x cheaper than lsprotocol objects
# through cattrs.  A function's symbols are kept as a template whose line numbers are relative to
# the function, keyed by the function's text: after an edit, the functions it only moved (an Enter
# above them) cost one string formatting, and only the function it changed is written again.


def _position_json(pos: dict) -> str:
    return f'{{"line":{max(pos["line"], 0)},"character":{max(pos["character"], 0)}}}'


def _range_json(rng: dict) -> str:
    return f'{{"start":{_position_json(rng["start"])},"end":{_position_json(rng["end"])}}}'


def symbol_json(node: dict, children: str) -> str:
    """One LSP ``DocumentSymbol`` as JSON text, its children already JSON (joined)."""
    return (f'{{"name":{json.dumps(node["name"])},"detail":{json.dumps(node["detail"])},"kind":{int(node["kind"])},'
            f'"range":{_range_json(node["range"])},"selectionRange":{_range_json(node["sel"])},'
            f'"children":[{children}]}}')


def symbols_template(fn: Function, lines: list[str]) -> tuple[str, tuple[int, ...]]:
    """The function's symbol tree as JSON with each line number a ``%d``, and those line numbers
    relative to the function's first line, in order: ``template % tuple(first + n for n in numbers)``."""
    first, numbers = fn.range["start"]["line"], []

    def position(pos: dict) -> str:   # a range above the function (never in a sound outline) is made 0
        numbers.append(max(pos["line"], first) - first)
        return f'{{"line":%d,"character":{max(pos["character"], 0)}}}'

    def text(value: str) -> str:
        return json.dumps(value).replace("%", "%%")

    def symbol(node: dict) -> str:   # f-string parts are evaluated in order: numbers follow the text
        return (f'{{"name":{text(node["name"])},"detail":{text(node["detail"])},"kind":{int(node["kind"])},'
                f'"range":{{"start":{position(node["range"]["start"])},"end":{position(node["range"]["end"])}}},'
                f'"selectionRange":{{"start":{position(node["sel"]["start"])},"end":{position(node["sel"]["end"])}}},'
                f'"children":[{",".join(symbol(child) for child in node["children"])}]}}')
    return symbol(function_nodes(fn, lines)), tuple(numbers)


def document_symbols_json(outline: Outline, lines: list[str], memo: dict) -> tuple[RawJSON, dict]:
    """The hierarchical answer, and the templates of this outline's functions (by function id,
    kind, text and file context) for the next one (``memo``: those of the last answer)."""
    context = repr((sorted(outline.constants.items()), sorted(outline.aliases.items())))
    fresh, by_unit = {}, {}
    for fn in outline.functions:
        first = fn.range["start"]["line"]
        key = (fn.id, fn.kind, "\n".join(lines[first:fn.range["end"]["line"] + 1]), context)
        text, numbers = fresh[key] = memo.get(key) or symbols_template(fn, lines)
        by_unit.setdefault(fn.unit, []).append(text % tuple([first + n for n in numbers]))
    parts = []
    for unit in outline.units:
        children = by_unit.get(unit.name, [])
        if unit.kind == "ir_module":
            parts.append(symbol_json(module_node(unit, lines), ",".join(children)))
        else:
            parts.extend(children)
    return RawJSON("[" + ",".join(parts) + "]"), fresh


def symbol_information(nodes: list[dict], uri: str, container: str | None = None) -> list[dict]:
    """Flat ``SymbolInformation`` (JSON data) for clients without hierarchical document symbol support."""
    out = []
    for n in nodes:
        item = {"name": n["name"], "kind": int(n["kind"]), "location": {"uri": uri, "range": range_json(n["range"])}}
        if container is not None:
            item["containerName"] = container
        out.append(item)
        out.extend(symbol_information(n["children"], uri, n["name"]))
    return out


def symbols_json(doc, outline: Outline, lines: list[str], hierarchical: bool) -> RawJSON:
    """The answer for ``outline`` (of the text split into ``lines``), as JSON text."""
    if hierarchical:
        answer, doc.memo["symbolTemplates"] = document_symbols_json(outline, lines, doc.memo.get("symbolTemplates", {}))
        return answer
    return RawJSON(json.dumps(symbol_information(outline_nodes(outline, lines), doc.uri)))


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(ls, params: types.DocumentSymbolParams):
        doc = ls.doc(params.text_document.uri)
        docout = await ls.state.outline(doc)   # its lines: those of its text (an edit may have come since)
        outline = docout.outline
        caps = ls.client_capabilities.text_document
        hierarchical = bool(caps and caps.document_symbol and caps.document_symbol.hierarchical_document_symbol_support)
        key = (doc.outline_text, hierarchical)
        cached = doc.memo.get("documentSymbol")
        if cached is None or cached[0] != key:
            answer = await off_loop_if_big(len(outline.functions), symbols_json, doc, outline, docout.lines,
                                          hierarchical)
            cached = doc.memo["documentSymbol"] = (key, answer)
        return cached[1]
