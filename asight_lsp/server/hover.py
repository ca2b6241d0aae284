"""textDocument/hover on a block, loop, binding or function: static facts, then the run's numbers.

The markdown builders are pure functions of the outline entry and a ``FunctionResult``.
"""
from __future__ import annotations

import re
from pathlib import Path

from lsprotocol import types

from ..analysis.spacestats import hover_markdown as space_markdown
from ..analysis.trace_summary import block_headline, loop_choices
from ..tvmscript.ranges import contains
from ..tvmscript.model import Block, Function, Loop, Outline
from .convert import to_range
from ..services.results import FunctionResult
from ..analysis.measurement import speedup_text
from ..analysis.attribution import block_verbs
from ..views.text import (table_unit, format_latency, ratio_text, relative_time, slowed_lines, trials_text,
                          tuning_best_text)
from ..tvmscript.design_spaces import site_at
from .state import document_spaces, space_result_of

KIND_WORDS = {"S": "spatial", "R": "reduce", "C": "scan", "O": "opaque"}


def target_at(outline: Outline, line: int, character: int):
    """``(kind, function, item)`` under a position: a loop on its header line, else the innermost
    block, else the innermost loop, else a binding, else a function (on its signature)."""
    for fn in outline.functions:
        if not contains(fn.range, line, character) and fn.name_range["start"]["line"] != line:
            continue
        headers = [lp for lp in fn.loops if lp.range["start"]["line"] == line]
        if headers:
            return "loop", fn, headers[-1]
        blocks = [b for b in fn.blocks if b.name != "root" and contains(b.range, line, character)]
        if blocks:
            return "block", fn, max(blocks, key=lambda b: b.range["start"]["line"])
        loops = [lp for lp in fn.loops if contains(lp.range, line, character)]
        if loops:
            return "loop", fn, max(loops, key=lambda lp: lp.range["start"]["line"])
        bindings = [b for b in fn.bindings if b.range["start"]["line"] <= line <= b.range["end"]["line"]]
        if bindings:
            return "binding", fn, bindings[0]
        if line <= fn.name_range["start"]["line"] + 1 or line == fn.range["start"]["line"]:
            return "function", fn, fn
    return None


def _num(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def block_facts(fn: Function, blk: Block) -> list[str]:
    loops = {lp.id: lp for lp in fn.loops}
    kinds = ", ".join(f"{v} {KIND_WORDS.get(k, k)}" for v, k in zip(blk.iter_vars, blk.iter_kinds))
    lines = [f"**block `{blk.name}`** in `{fn.id}` · iterators `{blk.iter_kinds or '?'}`" + (f" ({kinds})" if kinds else "")]
    nest = [loops[i] for i in blk.loops if i in loops]
    if nest:
        lines.append("- loops: " + ", ".join(f"`{', '.join(lp.vars)}` {lp.kind}({', '.join(_num(e) for e in lp.extents)})"
                                             for lp in nest))
    lines.append(f"- reads: {', '.join(f'`{b}`' for b in blk.reads) or '—'} · writes: "
                 f"{', '.join(f'`{b}`' for b in blk.writes) or '—'}")
    work = []
    if blk.iterations is not None:
        work.append(f"{_num(blk.iterations)} iterations")
    if blk.flops is not None:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(blk.ops.items()))
        work.append(f"{_num(blk.flops)} FLOPs" + (f" ({ops} per iteration)" if ops else ""))
    if blk.bytes is not None:
        work.append(f"{_bytes(blk.bytes)} of buffers touched")
    if work:
        lines.append("- work: " + " · ".join(work))
    return lines


def loop_facts(fn: Function, loop: Loop) -> list[str]:
    extents = ", ".join(_num(e) for e in loop.extents)
    total = 1
    for e in loop.extents:
        total = total * e if isinstance(e, int) and isinstance(total, int) else None
    lines = [f"**loop `{', '.join(loop.vars)}`** in `{fn.id}` · {loop.kind}({extents})"
             + (f" → {_num(total)} iterations" if total is not None and len(loop.extents) > 1 else "")]
    if loop.thread:
        lines.append(f"- bound to `{loop.thread}`")
    inner = [b.name for b in fn.blocks if loop.id in b.loops]
    if inner:
        lines.append(f"- encloses blocks: {', '.join(f'`{n}`' for n in inner)}")
    return lines


def run_line(result: FunctionResult) -> str:
    m = result.meta
    if result.refused:
        return f"**run `{m.id}`** ({m.state}) ⚠ not used: {result.refused}"
    when = relative_time(m.finished or m.started or m.created)
    measured = result.measured
    if measured and measured.tuned:
        figures = (f"untuned {format_latency(measured.untuned_us)} → tuned {format_latency(measured.tuned_us)}: "
                   f"{speedup_text(measured.raw)}")
        if measured.scope == "module":
            figures += " (the module: the sum of its PrimFuncs)"
        if measured.busy:
            figures += " (measured on a busy machine: noisy)"
    else:
        figures = tuning_best_text(m.best_us, m.extra)
    stale = f" · ⚠ **stale**: {'; '.join(result.view.reasons) or 'the function changed since this run'}" if result.stale else ""
    other = f"\n\n⚠ {result.unreadable}" if result.unreadable else ""     # another run of it cannot be read
    return (f"**run `{m.id}`** ({m.state}, {trials_text(m.trials_done, m.extra)}{', ' + when if when else ''}): "
            f"{figures}{stale}{other}")


def block_run_lines(result: FunctionResult, blk: Block) -> list[str]:
    lines = [run_line(result)] + kept_lines(result)
    prof = (result.profile or {}).get(blk.name)
    summary = result.block(blk.name)
    if prof and prof.get("us") is not None:
        lines.extend(latency_lines(blk.name, prof, summary))

    if result.unmatched(blk.name):     # the records name it otherwise
        lines.append(f"- ⚠ {result.named_otherwise}")
    if summary is None:
        if result.best is not None and not result.unmatched(blk.name):
            lines.append("- the best schedule did not change this block")
        return lines
    head = block_headline(summary)
    lines.append(f"- best schedule (trial {result.best['trial']}, {format_latency(result.best['latency_us'])})"
                 + (f": {head}" if head else ""))
    lines.extend(f"  - {step}" for step in summary["steps"] + summary.get("derived_steps", []))
    lines.extend(gpu_lines(result))
    return lines


def kept_lines(result: FunctionResult) -> list[str]:
    """A GPU run whose DLight baseline beat its tuned record keeps DLight (docs/gpu.md): said first,
    since the best schedule listed after it is not the run's result."""
    from ..analysis.default_candidate import dlight_kept
    kept = dlight_kept(result.measurement)
    return [f"- ⚠ {kept['text']}: the run keeps DLight's default schedule; below, the best tuned one"] if kept else []


def best_counters(result: FunctionResult) -> dict | None:
    """The measured counters of the run's best candidate (``store/counters.py``): its metrics, {} when
    the run has counters but none for it, None without a (usable) counters file."""
    from ..analysis.counters import by_candidate
    if result.best is None:
        return None
    entries, _ = run_counters_of(result)
    if not entries:
        return None
    return by_candidate(entries)[0].get(int(result.best["trial"])) or {}


_CHECKED: dict = {}     # (run folder, counters and records file stamps) -> (entries, why refused)


def run_counters_of(result: FunctionResult) -> tuple[list | None, str | None]:
    """The run's counters checked as adopt and the views check them (``adopt_checks.run_counters``),
    cached while neither file changes: ``(entries, None)``, ``(None, why)`` for a refused file."""
    from ..services.adopt_checks import checked_counters
    from ..store.counters import COUNTERS
    from ..store.files import stamp
    from ..store.runs import DB_RECORDS, read_records
    run_dir = Path(result.run_dir)
    key = (str(run_dir), stamp(run_dir / COUNTERS), stamp(run_dir / DB_RECORDS))
    if key[1] is None:
        return None, None
    if key not in _CHECKED:
        found = checked_counters(run_dir, read_records(run_dir), result.meta.adopted)
        if len(_CHECKED) >= 16:
            _CHECKED.clear()
        _CHECKED[key] = found
    return _CHECKED[key]


def gpu_lines(result: FunctionResult, metrics: dict | None = None) -> list[str]:
    """The best candidate's measured GPU words, as the loop view says them (``gpu_words.measured_lines``:
    launch figures, limiting factor, each figure the counters lack said); [] for a run with neither
    counters nor a GPU target.  ``metrics``: ``best_counters(result)`` when the caller has them.  A
    refused counters file is said with its bad line."""
    from ..analysis.gpu_words import measured_lines
    from ..engine.targets import runs_on_device
    metrics = best_counters(result) if metrics is None else metrics
    refused = run_counters_of(result)[1] if not metrics and result.best is not None else None
    if result.best is None or (metrics is None and not refused and not runs_on_device(result.meta.target)):
        return []
    lines = measured_lines(metrics, refused)
    if not metrics:
        return [f"- GPU (trial {result.best['trial']}): {lines[0]}"]
    return [f"- GPU (measured counters of trial {result.best['trial']}):"] + [f"  - {line}" for line in lines]


def latency_lines(name: str, prof: dict, summary: dict | None) -> list[str]:
    """The block's measured latency, untuned → tuned when the profile has both, and a flag when
    tuning made it slower (with what the best schedule did to it)."""
    share = f" ({prof['share'] * 100:.0f} % of the function)" if prof.get("share") is not None else ""
    source = f" — {prof['source']}" if prof.get("source") else ""
    change = prof.get("change")
    if not change or change.get("before_us") is None:
        return [f"- latency: {format_latency(prof['us'])}{share}{source}"]
    verbs = block_verbs(summary)
    lines = [f"- latency: untuned {format_latency(change['before_us'])} → tuned {format_latency(change['after_us'])}"
             + (f", {ratio_text(change['ratio'])}" if change.get("ratio") is not None else "") + f"{share}{source}"]
    lines.extend(f"- **{line}**" for line in slowed_lines([change], {name: verbs}))
    return lines


def loop_run_lines(result: FunctionResult, fn: Function, loop: Loop) -> list[str]:
    lines = [run_line(result)]
    for blk in fn.blocks:
        summary = result.block(blk.name) if loop.id in blk.loops else None
        if not summary:
            continue
        for var in loop.vars:
            choice = loop_choices(summary, var)
            if choice["factors"] or choice["parallel"] or choice["vectorize"]:
                lines.append(f"- `{var}` in `{blk.name}`: {choice_text(choice)}")
        if summary.get("order"):
            lines.append(f"- loop order in `{blk.name}`: {' '.join(summary['order'])}")
    return lines


def choice_text(choice: dict) -> str:
    parts = []
    if choice["factors"]:
        parts.append("split " + "×".join(str(f) for f in choice["factors"]))
    if choice["parallel"]:
        parts.append("parallel " + " ".join(choice["parallel"]))
    if choice["vectorize"]:
        parts.append("vectorized " + " ".join(choice["vectorize"]))
    return ", ".join(parts)


def function_lines(fn: Function, result: FunctionResult | None) -> list[str]:
    blocks = [b for b in fn.blocks if b.name != "root"]
    flops = sum(b.flops or 0 for b in blocks)
    lines = [f"**{fn.kind.replace('_', ' ')} `{fn.id}`** · {len(blocks)} blocks, {len(fn.loops)} loops"
             + (f", {_num(flops)} FLOPs" if flops else "")]
    if result is not None:
        lines.append(run_line(result))
    return lines


_TENSOR = re.compile(r'R\.Tensor\(\((?P<shape>[^)]*)\)(?:\s*,\s*(?:dtype\s*=\s*)?"(?P<dtype>\w+)")?')


def binding_lines(item, result: FunctionResult | None, text: str = "") -> list[str]:
    """A Relax binding: its op, its annotated tensor type, and each kernel call computing it."""
    lines = [f"**binding `{item.name}`** = `{item.op}`({', '.join(item.args)})"]
    typed = _TENSOR.search(text)
    if typed:
        lines.append(f"- tensor: {typed['dtype'] or '?'}[{typed['shape'].strip()}]")
    calls = [c for c in (result.calls or []) if item.name in (c.get("vars") or [])] if result else []
    for call in calls:
        lines.extend(call_lines(call))
    if result is not None and not calls:
        lines.append("- no per-call profile of this run yet (Profile lens or `asight profile`)")
    return lines


def call_lines(call: dict) -> list[str]:
    """One kernel call of a model: its time (untuned → tuned when both builds were timed), share,
    the task's trials and what its chosen schedule did; one unit for the call's figures."""
    name = call["task"] + (f"#{call['call']}" if call.get("call") else "")
    share = f", {call['share'] * 100:.1f} % of the kernel time" if call.get("share") is not None else ""
    unit = table_unit([call.get("us"), call.get("untuned_us")])
    if call.get("untuned_us") is not None and call["program"] == "tuned":
        timing = f"untuned {unit(call['untuned_us'])} → tuned {unit(call['us'])}"
    else:
        timing = f"{unit(call['us'])} ({call['program']} build)"
    lines = [f"- kernel call `{name}`: {timing}{share}; computes {', '.join(f'`{v}`' for v in call.get('vars') or [])}"]
    trials = call.get("trials")
    if trials is not None:
        lines.append(f"- task `{call['task']}`: {trials} trial{'s' if trials != 1 else ''}"
                     + (f", {call['failed']} failed" if call.get("failed") else "")
                     + ("" if trials else " (untuned: both builds run its default schedule)"))
    if call.get("schedule"):
        lines.append(f"- its schedule: {call['schedule']}")
    return lines


def hover_markdown(kind: str, fn: Function, item, result: FunctionResult | None, text: str = "") -> str:
    if kind == "block":
        lines = block_facts(fn, item) + (["", "---", ""] + block_run_lines(result, item) if result else [])
    elif kind == "loop":
        lines = loop_facts(fn, item) + (["", "---", ""] + loop_run_lines(result, fn, item) if result else [])
    elif kind == "binding":
        lines = binding_lines(item, result, text)
    else:
        lines = function_lines(fn, result)
    return "\n".join(lines)


def space_hover(index, doc, line: int, character: int) -> tuple[str, dict] | None:
    """Markdown and range for a sampling call of a design space function: what it samples and the
    distribution of values the latest run with that space tried, with their latencies."""
    found = site_at(document_spaces(doc), line, character)
    if found is None:
        return None
    space, site = found
    result = space_result_of(index, doc, space)
    label = f"`{site.label()}` in design space `{space.name}`"
    if result is None:
        return f"{label}\n\nNo run with this space yet: *Tune with this space* above the function.", site.range
    if result.stale:
        return f"{label}\n\n⚠ stale: `{space.name}` changed since run `{result.meta.id}`; tune again.", site.range
    stats = result.by_line.get(site.line)
    if stats is None or not stats.candidates:
        return f"{label}\n\nRun `{result.meta.id}` ({result.meta.state}) has no candidate of this call yet.", site.range
    return space_markdown(stats, label, result.meta.id), site.range


HOVER_WAIT_S = 0.5    # a hover waits this long for the run store, then answers with the source's facts
STORE_BUSY = "Runs not shown: the run store is still being read (too large to analyse within a hover's wait)."


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls, params: types.HoverParams):
        doc = ls.doc(params.text_document.uri)
        ls.check_position(doc, params.position)
        outline = (await ls.state.outline(doc)).outline
        runs_read = await ls.state.fresh_store(HOVER_WAIT_S)      # else the static facts, said so
        line, character = params.position.line, params.position.character
        sampled = space_hover(ls.state.index, doc, line, character) if runs_read else None
        if sampled is not None:
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=sampled[0]),
                               range=to_range(sampled[1]))
        found = target_at(outline, line, character)
        if found is None:
            return None
        kind, fn, item = found
        result = ls.state.result(doc, fn) if runs_read else None
        rng = item.range if kind != "function" else fn.name_range
        first = item.range["start"]["line"]
        text = doc.lines[first] if kind == "binding" and 0 <= first < len(doc.lines) else ""
        value = hover_markdown(kind, fn, item, result, text) + ("" if runs_read else f"\n\n*{STORE_BUSY}*")
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value),
                           range=to_range(rng))
