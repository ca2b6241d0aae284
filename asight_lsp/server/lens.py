"""textDocument/codeLens: Tune / Profile / Search space / Loop view above each function, and the
result of its run ("0.20 ms · 107× vs untuned · 128 trials · 3 min ago", stale or live)."""
from __future__ import annotations

import json
import time

from lsprotocol import types

from .. import protocol as P
from ..tvmscript.model import Function, Outline
from .convert import RawJSON
from ..services.catalogue import names_of, unreadable_note
from ..services.results import FunctionResult
from ..analysis.measurement import how_text, short_speedup, speedup_text
from ..views.measured import measurement_stamp
from ..views.text import (budget_text, format_latency, member_parts, relative_time, result_parts, trials_text,
                          tuning_best_text)
from .state import document_spaces, off_loop_if_big, space_result_of


RETUNE_MIN_TRIALS = 20  # analysis.principles.MIN_RUN: fewer measured candidates give no principle


def lens_line(fn: Function, lines: list[str]) -> int:
    """The first decorator line above the function (lenses sit above the decorators)."""
    line = min(fn.range["start"]["line"], len(lines))
    while line > 0 and lines[line - 1].lstrip().startswith("@"):
        line -= 1
    return line


def static_lenses(uri: str, fn: Function, line: int, profile: bool = True,
                  target: str | None = None) -> list[tuple[int, str, str, dict]]:
    """Tune / Profile / Search space / Loop view: ``(line, title, command, argument)``.  Where the
    function's run cannot be profiled here (``profiles`` false: a GPU run, an adopted run tuned for
    another CPU architecture): no Profile; a GPU run's Tune tunes its target
    (``target``: a GPU run's lens must not start a CPU tune of it)."""
    arg = {"uri": uri, "function": fn.id}
    tune = {**arg, "target": target} if target else arg
    return [(line, "▶ Tune", P.CMD_TUNE, tune)] + ([(line, "Profile", P.CMD_PROFILE, arg)] if profile else []) + [
        (line, "Search space", P.CMD_SHOW_SEARCH_SPACE, arg), (line, "Loop view", P.CMD_SHOW_LOOP_VIEW, arg)]


def device_target(result: FunctionResult | None) -> str | None:
    """The target a GPU run tuned (what its Tune lens tunes again), None for a CPU run."""
    if result is None or not result.on_device:
        return None
    return (result.meta.extra or {}).get("target_spec") or None


def profiles(result: FunctionResult | None) -> bool:
    """Can the function's run be profiled here?  A profile times programs on this machine's CPU, so a
    GPU run's cannot, nor an adopted run tuned for another CPU architecture (``services/profiling``'s
    ``device_run_refusal`` and ``foreign_run_refusal`` say so to who asks anyway)."""
    return result is None or result.profiles_here


def result_lens(uri: str, fn: Function, result: FunctionResult, line: int) -> tuple:
    """The run's result (or live progress: a click cancels it), with how it was measured as tooltip."""
    arg = {"uri": uri, "function": fn.id, "run": result.meta.id}
    command = P.CMD_CANCEL if result.running else P.CMD_SHOW_SEARCH_SPACE
    if result.refused:      # an adopted run edited since: no figure of it
        return (line, f"⚠ run {result.meta.id} not used: its files changed after adopt", command, arg, result.refused)
    return (line, result_lens_title(result), command, arg, result_lens_tooltip(result))


def unreadable_lenses(uri: str, fn: Function, unreadable: list[tuple[str, str]], line: int) -> list[tuple]:
    """A function's run that cannot be read: "⚠ run R not shown: run.json is unreadable", the reason in
    its tooltip; a click opens the search space, which says it again.  Without it the function would
    look never tuned, or its older run would pass for its latest."""
    if not unreadable:
        return []
    run_id = unreadable[-1][0]
    return [(line, f"⚠ run {run_id} not shown: run.json is unreadable", P.CMD_SHOW_SEARCH_SPACE,
             {"uri": uri, "function": fn.id}, unreadable_note(*unreadable[-1]))]


def retune_lens(uri: str, fn: Function, result: FunctionResult, line: int) -> tuple[int, str, str, dict] | None:
    """``Re-tune with principles`` once a finished, current run has enough trials to mine them."""
    meta = result.meta
    if (result.running or result.stale or result.refused or meta.state != "done"
            or meta.trials_done < RETUNE_MIN_TRIALS):
        return None
    arg = {"uri": uri, "function": fn.id, "guidedBy": meta.id, "trials": max(meta.trials_done // 2, 8)}
    return (line, "Re-tune with principles", P.CMD_TUNE, arg)


def scheduled_code_lens(uri: str, fn: Function, result: FunctionResult, line: int) -> tuple[int, str, str, dict] | None:
    """``Scheduled code`` (the run's best record, linked to the source) once the run has a record."""
    if result.running or result.refused or not result.meta.best_us:
        return None
    return (line, "Scheduled code", P.CMD_SHOW_CODE, {"uri": uri, "function": fn.id, "run": result.meta.id})


def model_lens(uri: str, fn: Function, result: FunctionResult, line: int) -> tuple[int, str, str, dict] | None:
    """``Model`` (per-task table, docs/models.md) once a Relax run has ended."""
    if result.running or result.meta.kind != "relax" or result.meta.state != "done":
        return None
    return (line, "Model", P.CMD_SHOW_MODEL, {"uri": uri, "function": fn.id, "run": result.meta.id})


def is_model(fn: Function, result: FunctionResult | None) -> bool:
    """A Relax model with a run that is not live: its lens line is the short one (``model_lenses``)."""
    return fn.kind == "relax_function" and result is not None and not result.running and result.meta.kind == "relax"


def model_lenses(uri: str, fn: Function, result: FunctionResult, line: int) -> list[tuple]:
    """A model's lens line is one short lens, ``40 µs`` (`` ⚠`` after it when noisy or stale), that
    fits an editor beside the Explorer and two panels at 1000 px (~80 px of text right of the class
    body's indentation, measured on the e2e screenshots: ``ASight 4.6 µs`` just fitted, ``ASight 49 µs
    ⚠`` and ``ASight ⋯ 46 µs ⚠`` were cut by the minimap).  Its
    click opens a quick pick of everything the model offers: Model (with the full headline
    ``40 µs · 2.0× slower · noisy``), tune, profile, re-measure, scheduled code, stage graph,
    hotspots, search space, loop view.  The full headline, trials and how it was measured are in
    its tooltip (which starts with what the lens is) and the pick's title."""
    arg = {"uri": uri, "function": fn.id, "run": result.meta.id}
    done = result.meta.state == "done"
    headline = model_lens_title(result)
    stamp = measurement_stamp(result.measurement)
    which = f"Shows the measurement of {stamp['when']} UTC ({stamp['by']}, {stamp['load']}). " if stamp else ""
    tooltip = "ASight, the model end to end (click: Model, Hotspots, Stage graph, Re-measure, …): " + which + " ".join(
        p for p in [result_lens_title(result), "—", result_lens_tooltip(result) or ""] if p).strip(" —")
    target = device_target(result)
    items = [{"label": "▶ Tune", "detail": "tune the model again (a new run)", "command": P.CMD_TUNE,
              "argument": {"uri": uri, "function": fn.id, **({"target": target} if target else {})}},
             {"label": "Profile", "detail": "the run's per-call profile (the shown measurement)",
              "command": P.CMD_PROFILE, "argument": arg},
             {"label": "Re-measure", "detail": "a new dated measurement, kept beside the shown one; shown unless it "
              "is noisier", "command": P.CMD_PROFILE, "argument": {**arg, "remeasure": True}},
             {"label": "Scheduled code", "detail": "one task's tuned kernel, linked to its call sites",
              "command": P.CMD_SHOW_CODE, "argument": arg},
             {"label": "Stage graph", "detail": "the model's kernel calls and their data flow", "panel": "stageGraph",
              "argument": arg},
             {"label": "Hotspots", "detail": "bindings ranked by their kernel's time", "panel": "hotspots", "argument": arg},
             {"label": "Search space", "detail": "one task's candidates", "command": P.CMD_SHOW_SEARCH_SPACE, "argument": arg},
             {"label": "Loop view", "detail": "one task's scheduling strategies", "command": P.CMD_SHOW_LOOP_VIEW,
              "argument": arg}]
    if not profiles(result):
        items = [item for item in items if item["label"] not in ("Profile", "Re-measure", "Hotspots")]
    if done:
        items.insert(0, {"label": "Model", "detail": f"{headline}" + (f" · {stamp['text']}" if stamp else "") +
                         " — per task: calls, untuned and tuned time, share, trials", "command": P.CMD_SHOW_MODEL,
                         "argument": arg})
    else:
        items.insert(0, {"label": "Run", "detail": f"{headline} — the run's candidates",
                         "command": P.CMD_SHOW_SEARCH_SPACE, "argument": arg})
    pick = {"title": f"ASight: {fn.name} · {headline} · run {result.meta.id} · {result.meta.trials_done} trials",
            "items": items}
    return [(line, model_lens_short(result), P.CLIENT_CMD_MORE, pick, tooltip)]


def model_lens_short(result: FunctionResult) -> str:
    """``40 µs``: the tuned latency only (``⚠`` after it when the machine was busy or the
    source changed since the run; the run's state when nothing was measured)."""
    measured = result.measured
    m = result.meta
    if measured and measured.tuned:
        figure = format_latency(measured.tuned_us)
    elif m.best_us:
        figure = format_latency(m.best_us)
    else:
        figure = m.state
    warn = result.stale or bool(measured and measured.busy)
    return figure + (" ⚠" if warn else "")


def model_lens_title(result: FunctionResult) -> str:
    """``40 µs · 2.0× slower · noisy`` (``⚠ stale`` first when the source changed)."""
    measured = result.measured
    m = result.meta
    if measured and measured.tuned:
        verdict = short_speedup(measured.raw).replace(" than untuned", "").replace(" vs untuned", " faster")
        verdict = "≈ untuned" if verdict.startswith("≈") else verdict
        parts = [format_latency(measured.tuned_us), verdict]
        if measured.busy:
            parts.append("noisy")
    elif m.best_us:
        parts = [f"{format_latency(m.best_us)} while tuning"]
    else:
        parts = [m.state]
    title = " · ".join(p for p in parts if p)
    return f"⚠ stale · {title}" if result.stale else title


def result_lenses(uri: str, fn: Function, result: FunctionResult, line: int) -> list[tuple[int, str, str, dict]]:
    """The lenses that depend on the function's run: result, re-tune, scheduled code, model."""
    optional = [retune_lens(uri, fn, result, line), scheduled_code_lens(uri, fn, result, line),
                model_lens(uri, fn, result, line)]
    return [result_lens(uri, fn, result, line)] + [lens for lens in optional if lens]


def function_lenses(uri: str, fn: Function, result: FunctionResult | None, line: int) -> list[tuple[int, str, str, dict]]:
    """All lenses of one function."""
    return static_lenses(uri, fn, line, profiles(result), device_target(result)) + (result_lenses(uri, fn, result, line) if result is not None else [])


def module_lenses(uri: str, outline: Outline, lines: list[str]) -> list[tuple[int, str, str, dict]]:
    """``Tune module`` above an IRModule class with more than one function."""
    count: dict[str, int] = {}
    for fn in outline.functions:
        count[fn.unit] = count.get(fn.unit, 0) + 1
    out = []
    for unit in outline.units:
        if unit.kind == "ir_module" and count.get(unit.name, 0) > 1:
            out.append((unit.start_line, "▶ Tune module", P.CMD_TUNE, {"uri": uri, "function": unit.name}))
    return out


def space_lenses(uri: str, space, result) -> list[tuple[int, str, str, dict]]:
    """``Tune with this space`` (alone / with the default rules) above a design space function
    (docs/spaces.md), and the result of its latest run."""
    line = space.range["start"]["line"]
    arg = {"uri": uri, "space": space.name}
    out = [(line, "▶ Tune with this space", P.CMD_TUNE, arg),
           (line, "+ default rules", P.CMD_TUNE, {**arg, "spaceMode": "union"})]
    if result is not None:
        meta = result.meta
        title = f"{meta.extra['space'].get('mode', 'alone')}: " + (
            f"{format_latency(meta.best_us)} · {meta.trials_done} trials" if meta.best_us else meta.state)
        if meta.state in ("queued", "running"):
            title = f"⟳ tuning {budget_text(meta.trials_done, meta.trials_requested, meta.extra)}"
        out.append((line, ("⚠ stale · " if result.stale else "") + title, P.CMD_SHOW_SEARCH_SPACE,
                    {"uri": uri, "run": meta.id}))
    return out


def code_lens_json(lenses: list[tuple]) -> str:
    """``(line, title, command, arg[, tooltip])`` lenses as the JSON of LSP ``CodeLens`` objects,
    without the surrounding brackets (fragments joined into one answer).  Plain dicts and
    ``json.dumps``: five times cheaper than lsprotocol objects through cattrs."""
    out = []
    for line, title, command, arg, *rest in lenses:
        position = {"line": line, "character": 0}
        cmd = {"title": title, "command": command, "arguments": [arg]}
        if rest and rest[0] is not None:
            cmd["tooltip"] = rest[0]
        out.append({"range": {"start": position, "end": position}, "command": cmd})
    return json.dumps(out)[1:-1]


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls, params: types.CodeLensParams):
        doc = ls.doc(params.text_document.uri)
        docout = await ls.state.outline(doc)   # its lines: those of its text (an edit may have come since)
        outline = docout.outline
        await ls.state.fresh_store()  # the run index read again (its version bumped when a run changed)
        index = ls.state.index
        key = (doc.outline_text, index.version, int(time.time() // 20))  # "3 min ago" stays current
        cached = doc.memo.get("codeLens")
        if cached is None or cached[0] != key:
            answer = await off_loop_if_big(len(outline.functions), lens_list_json, ls, doc, outline, docout.lines)
            cached = doc.memo["codeLens"] = (key, answer)
        return cached[1]


ANY_LINE = -7_770_777_077   # the line in a static lens template (``lens_list_json``); no real line is negative
ANY_LINE_JSON = f'"line": {ANY_LINE}'   # as ``json.dumps`` writes it (a string value cannot hold it unescaped)


def lens_list_json(ls, doc, outline: Outline, lines: list[str]) -> RawJSON:
    """All lenses of a document (``outline`` of the text split into ``lines``) as JSON text; each
    function's static lenses are kept as a JSON template (by function id) with the line filled in,
    so a new answer costs little more than the result lenses."""
    fragments = doc.memo.get("lensFragments")
    if fragments is None or len(fragments) > 2 * len(outline.functions) + 64:
        fragments = doc.memo["lensFragments"] = {}
    parts = [code_lens_json(module_lenses(doc.uri, outline, lines))]
    for space in document_spaces(doc):
        result = space_result_of(ls.state.index, doc, space, stats=False)
        parts.append(code_lens_json(space_lenses(doc.uri, space, result)))
    for fn in outline.functions:
        line = lens_line(fn, lines)
        result = ls.state.result(doc, fn, details=False, lines=lines)
        key = fn.id if profiles(result) else f"{fn.id} on {device_target(result)}"
        template = fragments.get(key)
        if template is None:
            template = fragments[key] = code_lens_json(static_lenses(doc.uri, fn, ANY_LINE, profiles(result),
                                                                     device_target(result)))
        if is_model(fn, result):   # a model's short line replaces the static lenses
            parts.append(code_lens_json(model_lenses(doc.uri, fn, result, line)))
            continue
        parts.append(template.replace(ANY_LINE_JSON, f'"line": {line}'))   # an Enter above moves them all
        if result is not None:
            parts.append(code_lens_json(result_lenses(doc.uri, fn, result, line)))
        unreadable = ((result.unreadable_runs or []) if result is not None      # asked by ``result`` already
                      else ls.state.index.unreadable_for(doc.path, names_of(fn)))
        parts.append(code_lens_json(unreadable_lenses(doc.uri, fn, unreadable, line)))   # beside another run too
    return RawJSON("[" + ", ".join(p for p in parts if p) + "]")


def result_lens_title(result: FunctionResult, now: float | None = None, short: bool = False) -> str:
    """``0.20 ms · 107× vs untuned · 128 trials · 3 min ago`` (plus state / stale / noisy marks);
    ``short`` (a model's lens line) leaves out the age and says ``stale`` in one word."""
    m = result.meta
    if result.running:
        best = f" · best so far {format_latency(m.best_us)}" if m.best_us else ""
        return f"⟳ tuning {budget_text(m.trials_done, m.trials_requested, m.extra)}{best}"
    measured = result.measured
    if measured and measured.tuned:
        parts = member_parts(measured.raw, result.function_id.rsplit(".", 1)[-1]) or result_parts(measured.raw)
        if measured.busy:
            parts.append("noisy")
        parts.append(build_mark(result.build))
    elif m.best_us:
        parts = [tuning_best_text(m.best_us, m.extra)]
    else:
        parts = []
    shortfall = m.shortfall
    parts.append(f"⚠ {shortfall.measured} of {shortfall.requested} trials measured" if shortfall
                 else trials_text(m.trials_done, m.extra))
    when = None if short else relative_time(m.finished or m.started or m.created, now)
    if when:
        parts.append(when)
    title = " · ".join(p for p in parts if p)
    if m.state in ("cancelled", "failed"):
        title = f"{m.state}: {title}"
    if result.stale:
        title = f"⚠ stale · {title}"       # why: the tooltip's first sentence (``result_lens_tooltip``)
    return f"shipped · {title}" if result.shipped else title


def build_mark(build: dict | None) -> str:
    """A model run's lens names its headline's build: ``deployable build``, or a warning when the
    exported build would differ (``analysis/deployable``)."""
    if not build:
        return ""
    return "⚠ not the exported build" if build["stale"] else "deployable build"


SHIPPED = ("Shipped run: not made by you on this machine (a cloned or copied run folder); shown read-only: "
           "tuning starts a run of your own beside it, and `asight adopt` makes its records a run of your own.")


def result_lens_tooltip(result: FunctionResult) -> str | None:
    """Why the run is stale (the catalogue's reasons), then how the lens's figures were measured (and whether
    the machine was busy); a shipped run says so first."""
    text = " ".join(part for part in (stale_text(result), _measured_tooltip(result)) if part) or None
    return f"{SHIPPED} {text or ''}".strip() if result.shipped else text


def stale_text(result: FunctionResult) -> str | None:
    """``Stale: main's source changed since run r; the figures are of the source it tuned: tune again for the
    current one.`` (None when fresh)."""
    if not result.stale:
        return None
    why = "; ".join(result.view.reasons) or "the function changed since the run"
    return f"Stale: {why}; the figures are of the source it tuned: tune again for the current one."


def _measured_tooltip(result: FunctionResult) -> str | None:
    measured = result.measured
    failed = failures_text(result.meta.extra.get("failures") or [])
    short = result.meta.shortfall.text if result.meta.shortfall else None
    failed = f"{short[0].upper()}{short[1:]}. {failed}".strip() if short else failed
    if not measured or not measured.tuned:
        return failed or None
    text = (f"untuned {format_latency(measured.untuned_us)} → tuned {format_latency(measured.tuned_us)}: "
            f"{speedup_text(measured.raw)}. Measured {how_text(measured.raw)}.")
    if measured.busy:
        text += " The machine was busy: the figures are noisy; run `asight profile --remeasure` when it is quiet."
    if result.build:
        text += f" Build: {result.build['text']}."
    return text + (" " + failed if failed else "")


def failures_text(groups: list[dict]) -> str:
    """Failed candidates by reason, largest groups first, and where their full messages are."""
    from ..analysis.failures import summary_lines
    return " ".join(line.strip() for line in summary_lines(groups, limit=3))
