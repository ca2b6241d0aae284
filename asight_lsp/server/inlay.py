"""textDocument/inlayHint: per block its latency share, untuned → tuned latency (⚠ when tuning
made it slower) and schedule, per loop the chosen split
factors and parallel / vector tiles of the best schedule.  Only within the requested range, and
only for runs of the function's current source (a stale run's loops may not exist any more)."""
from __future__ import annotations

from lsprotocol import types

from ..analysis.attribution import block_verbs
from ..analysis.spacestats import hint_label
from ..analysis.trace_summary import block_headline, loop_choices
from ..tvmscript.model import Function
from ..analysis.gpu_words import short_words
from .hover import best_counters, choice_text, gpu_lines
from ..services.results import FunctionResult
from .state import document_spaces, space_result_of
from ..views.text import format_latency, slowed_lines, table_unit


def _end_of_line(lines: list[str], line: int) -> int:
    text = lines[line].rstrip() if 0 <= line < len(lines) else ""
    return len(text.encode("utf-16-le")) // 2


def block_hints(fn: Function, result: FunctionResult) -> list[tuple[int, str, str]]:
    """``(line, label, tooltip)`` for each block with a share or a schedule; a block bound to the GPU's
    grid also gets its limiting factor in short when counters measured it (the tooltip: the hover's
    GPU lines)."""
    out = []
    metrics = best_counters(result) if result.summary else None
    for blk in fn.blocks:
        if blk.name == "root":
            continue
        parts = []
        prof = (result.profile or {}).get(blk.name)
        if prof and prof.get("share") is not None:
            parts.append(f"{prof['share'] * 100:.0f}%")
        change = (prof or {}).get("change") or {}
        if change.get("before_us") is not None and change.get("after_us") is not None:
            parts.append(("⚠ " if change.get("slower") else "")
                         + f"{format_latency(change['before_us'])} → {format_latency(change['after_us'])}")
        summary = result.block(blk.name)
        head = block_headline(summary) if summary else ""
        if result.unmatched(blk.name):    # the records name it otherwise: said, not left blank
            parts.append(f"⚠ not in the run's records (they get {', '.join(result.blocks_gone)})")
        elif head:
            parts.append(head)
        on_grid = any(b["thread"].startswith("blockIdx") for b in (summary or {}).get("bind", []))
        if on_grid and short_words(metrics):
            parts.append(short_words(metrics))
        if parts:
            flagged = slowed_lines([change], {blk.name: block_verbs(summary)}) if change.get("slower") else []
            gpu = [line.lstrip(" -") for line in gpu_lines(result, metrics)] if on_grid else []
            said = [result.named_otherwise] if result.unmatched(blk.name) else summary["steps"] if summary else []
            tip = "\n".join(flagged + said + gpu)
            out.append((blk.range["start"]["line"], " · ".join(parts), tip))
    return out


def call_hints(result: FunctionResult) -> list[tuple[int, str, str]]:
    """``(line, label, tooltip)`` on the last binding of each kernel call of a profiled Relax function."""
    out = []
    fmt = table_unit([call.get("us") for call in result.calls or []])   # one unit for the function, as the Model panel
    for call in result.calls or []:
        name = call["task"] + (f"#{call['call']}" if call.get("call") else "")
        share = f"{call['share'] * 100:.0f}% · " if call.get("share") is not None else ""
        tip = (f"{name}: {fmt(call['us'])} per call, {call['program']} build (VM instrument hook; share of the "
               f"calls' sum); computes {', '.join(call.get('vars') or [])}")
        out.append((call["lines"][1], f"{share}{fmt(call['us'])} · {name}", tip))
    return out


def loop_hints(fn: Function, result: FunctionResult) -> list[tuple[int, str, str]]:
    """``(line, label, tooltip)`` per loop header: each var's factors and annotated tiles."""
    out = []
    for loop in fn.loops:
        blocks = [b for b in fn.blocks if loop.id in b.loops and result.block(b.name)]
        if not blocks:
            continue
        summary = result.block(blocks[0].name)
        parts = []
        for var in loop.vars:
            text = choice_text(loop_choices(summary, var))
            if text:
                parts.append(f"{var}: {text}")
        if parts:
            out.append((loop.range["start"]["line"], " · ".join(parts), f"best schedule of block {blocks[0].name}"))
    return out


def space_hints(index, doc) -> list[tuple[int, str, str]]:
    """``(line, label, tooltip)`` at each sampling call of a design space function: the decision
    of the best candidate of the latest (fresh) run with that space (docs/spaces.md)."""
    out = []
    for space in document_spaces(doc):
        result = space_result_of(index, doc, space)
        if result is None or result.stale:
            continue
        for line, stats in result.by_line.items():
            label = hint_label(stats)
            if label:
                out.append((line, label, f"best of {stats.valid} valid candidates of run {result.meta.id}"))
    return out


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    async def inlay_hint(ls, params: types.InlayHintParams):
        doc = ls.doc(params.text_document.uri)
        outline = (await ls.state.outline(doc)).outline
        await ls.state.fresh_store()
        lines = doc.lines
        first, last = params.range.start.line, params.range.end.line
        hints = [types.InlayHint(position=types.Position(line=line, character=_end_of_line(lines, line)),
                                 label=label, kind=types.InlayHintKind.Parameter, padding_left=True, tooltip=tip)
                 for line, label, tip in space_hints(ls.state.index, doc) if first <= line <= last]
        for fn in outline.functions:
            if fn.range["end"]["line"] < first or fn.range["start"]["line"] > last:
                continue
            result = ls.state.result(doc, fn)
            if result is None or result.stale or (result.summary is None and not result.profile and not result.calls):
                continue
            for line, label, tip in block_hints(fn, result) + loop_hints(fn, result) + call_hints(result):
                if first <= line <= last:
                    hints.append(types.InlayHint(
                        position=types.Position(line=line, character=_end_of_line(lines, line)),
                        label=label, kind=types.InlayHintKind.Type, padding_left=True, tooltip=tip or None))
        return hints
