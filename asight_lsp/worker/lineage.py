"""Block lineage of a replayed trace, and spans that tie derived statements to their source (TVM).

``replay`` applies a trace to a fresh schedule with a ``decision_provider`` that, before each
instruction, notes the names of the blocks its inputs name (a loop input: the blocks under it)
and, once it ran, the names of the blocks it returned and what its inputs are called now.  Those
events go to the pure ``analysis.block_origin.lineage`` (``sum_rf`` ← ``sum``, "rfactor partial").

``tie_spans`` then gives every statement of a derived block (and every loop the schedule made
whose blocks all come from one source block) a span on its source block's lines whose file name
is ``asight-lineage:<k>`` (``k`` = index into the lineage list).  The printer's tags, the lowered
TIR and LLVM's debug lines all come from spans, so one edit links every level; the file name
carries the derivation label to the tags (``:d<k>``, see ``analysis.codelinks``).  Statements
that kept their own span (``C_init``'s store) keep its lines.  The edit is a JSON round trip of
the module (TVM 0.27 has no Python statement mutator, docs/tvm.md §1).
"""
from __future__ import annotations

import json

from ..analysis.block_origin import lineage, span_role
from .compat import s_tir, stmt_children, tirx, tvm

MARK = "asight-lineage:"
#: Loop inputs are described (blocks under the loop) only where they name the block acted on.
LOOP_KINDS = frozenset({"RFactor", "Blockize", "Tensorize"})


def _names_under(stmt) -> list[str]:
    out: list[str] = []

    def walk(node):
        if isinstance(node, s_tir.SBlockRealize) and node.block.name_hint != "root":
            out.append(node.block.name_hint)
        for child in stmt_children(node):
            walk(child)

    walk(stmt)
    return out


def _describe(sch, rv, kind: str) -> list[str]:
    """The block ``rv`` names now ([name]), or for a loop of ``LOOP_KINDS`` the blocks under it."""
    try:
        if isinstance(rv, s_tir.schedule.SBlockRV):
            return [sch.get(rv).name_hint]
        if isinstance(rv, s_tir.schedule.LoopRV) and kind in LOOP_KINDS:
            return _names_under(sch.get(rv))
    except Exception:  # noqa: BLE001 - an RV whose block or loop is gone (inlined, replaced)
        return []
    return []


def replay(mod, trace):
    """``(schedule, events)``: ``trace`` applied to ``Schedule(mod)`` (postprocessors included),
    one event per instruction (``analysis.block_origin.lineage`` describes them)."""
    sch = s_tir.Schedule(mod)
    events: list[dict] = []
    pending: list[tuple] = []

    def flush():
        if not pending:
            return
        kind, inputs, before, count = pending.pop()
        insts = sch.trace.insts
        outputs = []
        if len(insts) == count + 1:
            outputs = [n for rv in insts[-1].outputs for n in _describe(sch, rv, "") if isinstance(rv, s_tir.schedule.SBlockRV)]
        events.append({"kind": kind, "inputs": before, "outputs": outputs,
                       "after": [_describe(sch, rv, kind) for rv in inputs]})

    def provider(inst, inputs, attrs, decision):
        flush()
        kind = inst.kind.name
        pending.append((kind, list(inputs), [_describe(sch, rv, kind) for rv in inputs], len(sch.trace.insts)))
        return decision

    trace.apply_to_schedule(sch, remove_postproc=False, decision_provider=provider)
    flush()
    return sch, events


def source_spans(func) -> dict[str, dict]:
    """Per source block: ``{"header": (line, end), "init": store span | None, "update": store span | None}``
    (the update = the block body's only store; None when it has several)."""
    found: dict[str, dict] = {}

    def stores(node) -> list:
        out = [node] if isinstance(node, tirx.BufferStore) else []
        for child in stmt_children(node):
            if not isinstance(child, s_tir.SBlockRealize):
                out.extend(stores(child))
        return out

    def lines(node):
        span = getattr(node, "span", None)
        return (int(span.line), int(span.end_line)) if span is not None and int(span.line) > 0 else None

    def walk(node):
        if isinstance(node, s_tir.SBlockRealize) and lines(node):
            block = node.block
            init = stores(block.init) if block.init is not None else []
            body = stores(block.body)
            found[block.name_hint] = {"header": lines(node), "init": lines(init[0]) if len(init) == 1 else None,
                                      "update": lines(body[0]) if len(body) == 1 else None}
        for child in stmt_children(node):
            walk(child)

    walk(func.body)
    return found


class _Tie:
    """The JSON edit of ``tie_spans`` (nodes are ``{"type", "data"}``; references are node indices)."""

    def __init__(self, text: str, entries: list[dict], spans: dict[str, dict]):
        self.graph = json.loads(text)
        self.nodes = self.graph["nodes"]
        self.entries = entries
        self.spans = spans
        self.by_block = {e["block"]: k for k, e in enumerate(entries) if e.get("block")}

    def string(self, index) -> str | None:
        node = self.nodes[index] if isinstance(index, int) else None
        return node.get("data") if node and node.get("type") == "ffi.String" else None

    def own_lines(self, index):
        span = self.nodes[index]["data"].get("span")
        if not span:
            return None
        data = self.nodes[span]["data"]
        return (data["line"], data["end_line"]) if data.get("line", 0) > 0 else None

    def set_span(self, index: int, k: int, lines) -> None:
        self.nodes.append({"type": "ir.SourceName", "data": f"{MARK}{k}"})
        self.nodes.append({"type": "ir.Span", "data": {"source_name": len(self.nodes) - 1, "line": lines[0],
                                                        "column": 1, "end_line": lines[1], "end_column": 1}})
        self.nodes[index]["data"]["span"] = len(self.nodes) - 1

    def visit(self, index, k: int | None = None, in_init: bool = False) -> list[str]:
        """Tie the statements under node ``index``; return the source blocks of the blocks under it."""
        node = self.nodes[index] if isinstance(index, int) and index > 0 else None
        if node is None:
            return []
        kind, data = node.get("type"), node.get("data")
        if kind == "ffi.Array":
            return [s for child in data for s in self.visit(child, k, in_init)]
        if not isinstance(data, dict):
            return []
        if kind == "s_tir.SBlockRealize":
            return self.realize(index, data, k)
        if kind == "s_tir.SBlock":
            return self.visit(data.get("init"), k, True) + self.visit(data.get("body"), k, in_init)
        if kind == "tirx.BufferStore" and k is not None:
            self.store(index, k, in_init)
            return []
        below = [s for key in ("seq", "body", "then_case", "else_case") for s in self.visit(data.get(key), k, in_init)]
        if kind == "tirx.For" and k is None and not data.get("span") and len(set(below)) == 1:
            self.loop(index, below[0])
        return below

    def realize(self, index: int, data: dict, k: int | None) -> list[str]:
        name = self.string(self.nodes[data["block"]]["data"].get("name_hint"))
        mine = self.by_block.get(name)
        if mine is not None:
            entry = self.entries[mine]
            header = self.spans.get(entry["source"], {}).get("header")
            if header:
                self.set_span(index, mine, self.own_lines(index) or header)
            self.visit(data["block"], mine if header else None)
            return [entry["source"]]
        self.visit(data["block"], None)
        return [name] if name in self.spans and name != "root" else []

    def store(self, index: int, k: int, in_init: bool) -> None:
        entry = self.entries[k]
        spans = self.spans.get(entry["source"], {})
        lines = self.own_lines(index) or spans.get(span_role(entry["derivation"], in_init)) or spans.get("header")
        if lines:
            self.set_span(index, k, lines)

    def loop(self, index: int, source: str) -> None:
        header = self.spans.get(source, {}).get("header")
        if not header:
            return
        key = next((k for k, e in enumerate(self.entries) if e.get("loop") and e["source"] == source), None)
        if key is None:
            self.entries.append({"block": None, "loop": True, "source": source, "derivation": ["loop"],
                                 "label": f"{source} — loop made by the schedule"})
            key = len(self.entries) - 1
        self.set_span(index, key, header)

    def run(self):
        for node in self.nodes:
            if node.get("type") == "tirx.PrimFunc":
                self.visit(node["data"].get("body"))
        return tvm.ir.load_json(json.dumps(self.graph))


def tie(func, mod, trace) -> tuple[object, list[dict]]:
    """``(module with tied spans, lineage entries)`` for ``trace`` applied to ``func`` (unscheduled)."""
    spans = source_spans(func)
    sch, events = replay(mod, trace)
    entries = lineage(events, list(spans))
    tied = _Tie(tvm.ir.save_json(sch.mod), entries, spans).run()
    return tied, entries


def mark_index(span) -> int | None:
    """The lineage index a span tied by ``tie_spans`` carries, else None."""
    name = getattr(getattr(span, "source_name", None), "name", "") or ""
    return int(name[len(MARK):]) if name.startswith(MARK) and name[len(MARK):].isdigit() else None
