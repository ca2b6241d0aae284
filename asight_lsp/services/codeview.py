"""The code view (TVM-free core): a function's generated code linked line by line to its source.

``code_view`` picks the record (a trial of a run, the run's best record, or none = untuned), asks
the worker's ``code`` handler (``worker/generated_code.py``) for the text at one level, and turns the
span tags / DWARF lines into links (``analysis.codelinks``).  Where the run has a cached profile
of the record shown, each linked line gets its source block's measured latency share.
``code_diff`` compares two candidates (or the best records of two runs): scheduled code, trace
listing, the sampled decisions that differ and the latency difference.  Decisions: docs/codeview.md.
"""
from __future__ import annotations

import difflib
from pathlib import Path

from .results import profile_blocks
from ..analysis.codelinks import (task_links, asm_links, attach_line_counts, attach_shares, by_source, cuda_links,
                                  derived_in_text, drop_parallel,
                                  label_links, llvm_links, ptx_links, strip_tags)
from ..analysis.traces import block_infos, blocks_gone, blocks_named_otherwise, format_trace, parse_decisions
from ..engine import wire
from ..engine.client import borrowed, trusted
from ..engine.targets import foreign_cpu, runs_on_device
from ..errors import AsightError, WorkerError
from ..protocol import CODE_LEVELS, SCHEMA_CODE, SCHEMA_CODE_DIFF
from ..store.caches import load_profile
from ..store.runs import Run, RunMeta, RunStore, read_records
from ..tvmscript.diagnostics import require_parsed
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import check_selection, select
from ..analysis.default_candidate import dlight_kept
from .lookup import check_run_function, chosen_records, latest_run, prepare_run, stale_now

SCHEMA = SCHEMA_CODE
DIFF_SCHEMA = SCHEMA_CODE_DIFF
LEVELS = tuple(CODE_LEVELS)
LANGUAGES = {"scheduled": "python", "lowered": "python", "llvm": "llvm", "asm": "asm", "cuda": "cuda", "ptx": "ptx"}
LINE_SHARE_SOURCE = ("the run's cached profile with cachegrind (asight profile --cachegrind): instructions "
                     "executed (Ir) per source line in a serial build of the best record, simulated by valgrind")
SHARE_SOURCE = ("the run's cached profile (rdtsc per stage of the best record, split per source block): "
                "each linked line shows its source block's share, not a per-line measurement")


def code_view(path: str, run: str | None = None, candidate: int | None = None, level: str = "scheduled",
              function: str | None = None, store_root: str | None = None, worker=None,
              text: str | None = None, check: bool = True, serial: bool = False, task: str | None = None) -> dict:
    """The generated code of ``function`` at ``level`` with its line links (``asight.code/1``).

    ``run`` is a run id/prefix/dir or ``latest``; None = the newest run of this function, and no
    run at all gives the untuned function.  ``candidate`` is a trial index (line of the run's
    records file, 0-based); None = the best record.  ``serial`` builds the schedule without its
    ``Parallel`` instructions (a variant: assembly of parallel loops has no line info).  ``task``
    names the kernel of a Relax model to show (its call sites come with it).
    """
    return _view(path, run, candidate, level, function, store_root, worker, text, check, serial, task)[0]


def _view(path: str, run: str | None, candidate: int | None, level: str, function: str | None,
          store_root: str | None, worker, text: str | None, check: bool, serial: bool,
          task: str | None = None) -> tuple[dict, dict | None]:
    """``code_view``'s payload and the record it shows (None: untuned); the run's records are read once."""
    if level not in LEVELS:
        raise AsightError(f"unknown level '{level}' (one of {', '.join(LEVELS)})")
    text = Path(path).read_text(encoding="utf-8", errors="replace") if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection, "show the code of")
    found = _find_run(path, run, selection, store_root, text)
    if candidate is not None and found is None:
        raise AsightError("--candidate needs a run (--run R)")
    records = read_records(found.path) if found else []
    record = _record(found, records, candidate) if candidate is not None else None
    meta = prepare_run(found) if found else None
    if task and not any(fn.kind == "relax_function" for fn in selection.functions):   # '' is no task, as elsewhere
        _require_tir_task(meta, task)
    if record is None and candidate is None and chosen_records(meta) is None:    # no re-measurement chose one
        record = adopted_best(meta, records)
    params = {**wire.source_params(text, outline, selection.unit, selection.member), "level": level,
              "run_dir": str(found.path) if found else None, "target": meta.target if meta else None,
              "chosen": chosen_records(meta), "trace": _trace(record, serial), "serial": serial,
              "kept": "dlight" if candidate is None and _dlight_kept(meta) else None,
              "task": task, "weights": wire.weights_beside(path)}
    reasons = stale_now(meta, text, selection.functions, path, outline.constants) if found else []
    try:
        reply = _reply(worker, params, text, path, selection, check or level == "ptx")
    except WorkerError as err:
        why = trace_gone(found, selection, [record] if record else records, bool(reasons)) \
            if "ScheduleError" in f"{err.error_type} {err}" and found is not None else None
        if why is None:
            raise
        raise AsightError(why) from None
    payload, record = _payload(path, selection, found, records, record, reply, chosen_records(meta))
    if (reply.get("applied") or {}).get("kept") == "dlight":
        _dlight_payload(payload, meta)
    if reply.get("task"):
        payload.update(task=reply["task"], callSites=reply.get("callSites") or [])
        if level == "scheduled":
            _task_payload(payload, reply, found)
        kept = default_kept_note(meta, reply["task"]) if candidate is None else None
        if kept:
            payload["note"] = " ".join(filter(None, [kept, payload.get("note")]))
    lineage_error = (reply.get("applied") or {}).get("lineage_error")
    if lineage_error:
        payload["note"] = " ".join(filter(None, [payload["note"], f"derived blocks are not linked (lineage: {lineage_error})."]))
    payload["stale"] = bool(reasons) if found else None     # the catalogue's reasons (``lookup.stale_now``)
    if reasons:
        payload["note"] = " ".join(filter(None, [f"⚠ stale: {'; '.join(reasons)}: its trace was replayed on the "
                                                 "current source;", payload["note"]]))
    if serial:
        payload["serial"] = True
        payload["note"] = " ".join(filter(None, ["serial variant (Parallel dropped) so parallel loop bodies keep "
                                                 "their line info; its latency is not measured.", payload["note"]]))
    return payload, record


def _require_tir_task(meta, task: str) -> None:
    """``--task`` on a TIR run names one of its tasks, as ``space`` and ``loops`` take it (the PrimFunc's code
    is that task's); another name is refused, not ignored."""
    if meta is None:
        raise AsightError("--task names a task of a run, and this function has none (tune it first)")
    names = [t.get("name") for t in meta.tasks or [] if isinstance(t, dict)]
    if task not in names:
        raise AsightError(f"no task '{task}' in this run (tasks: {', '.join(map(str, names)) or 'none'})")


def _dlight_kept(meta: RunMeta | None) -> dict | None:
    """The ``kept`` entry of a GPU run whose measurement kept DLight's program (its tuned record lost), else None."""
    measured = meta.measured if meta is not None else None
    return dlight_kept(measured.raw) if measured else None


def _dlight_payload(payload: dict, meta) -> None:
    """A GPU run whose DLight baseline beat the tuned record shows DLight's program as its result."""
    kept = _dlight_kept(meta)
    if kept is None:       # the worker keeps DLight only when the run's measurement asks it to (``kept``)
        return
    default = next((d for d in meta.measured.defaults or [] if d.get("default") == "dlight"), {})
    payload["candidate"] = {"trial": None, "kept": "dlight", "latencyUs": default.get("default_us"), "best": True,
                            "tunedTrial": default.get("trial"), "tunedUs": default.get("measured_us")}
    payload["note"] = (f"{kept['text']}: this is DLight's default schedule, the run's result "
                       f"(--candidate {default.get('trial', 'N')} shows the tuned record)")


def default_kept_note(meta, task) -> str | None:
    """A task whose default schedule the re-measurement kept: what ships is not the trial shown (the
    code view would show a trial's code for it without a word)."""
    name = task.get("name") if isinstance(task, dict) else task
    measured = meta.measured if meta else None
    if measured is None or name not in measured.default_tasks:
        return None
    return (f"⚠ the tuned build ships TVM's default schedule for {name} (re-measured faster than every trial); "
            "the code shown is its fastest trial while tuning.")


def _task_payload(payload: dict, reply: dict, run: Run | None) -> None:
    """A Relax task's scheduled kernel: each block's lines linked to the binding it computes in every
    call (``analysis.codelinks.task_links``), the task's per-block latency from the run's profile
    when it timed the task's stages, and a note that says what the profile holds for this task."""
    links = task_links(payload["text"], payload["callSites"], reply.get("lineage") or [])
    profile = load_profile(run) if run is not None else None
    relax = (profile or {}).get("relax") or {}
    calls = [c for c in ((relax.get("tasks") or {}).get("tuned") or {}).get("tasks") or []
             if c.get("task") == payload["task"]]
    stages = (relax.get("task_stages") or {}).get(payload["task"]) or {}
    blocks = [{"name": name, "us": e.get("us"), "share": e.get("share")} for name, e in (stages.get("blocks") or {}).items()]
    if blocks:
        by_name = {b["name"]: b for b in blocks}
        links = [{**l, **({"share": by_name[l["block"]]["share"], "us": by_name[l["block"]]["us"]}
                          if l.get("block") in by_name else {})} for l in links]
    payload.update(links=links, bySource=[{"sourceLine": k, "lines": v} for k, v in by_source(links).items()],
                   blocks=blocks, shareSource=stages.get("source") if blocks else None,
                   note=_task_note(payload["task"], calls, bool(blocks), profile, links))


def _task_note(task: str, calls: list[dict], timed: bool, profile: dict | None, links: list) -> str:
    if profile is None:
        return "no profile of this run yet: profile it (asight profile / the Profile lens) for the task's times"
    from ..analysis.measurement import when_text
    taken = when_text((profile.get("measured") or {}).get("taken") or profile.get("created"))
    total = sum(c.get("us") or 0.0 for c in calls)
    parts = [f"{task}: {len(calls)} call{'s' if len(calls) != 1 else ''}, {total:.1f} µs per run of the model "
             f"(profile of {taken} UTC)" if calls else f"{task}: no call timed in the run's profile of {taken} UTC"]
    parts.append("per-block times: the task's stages timed with the profile" if timed else
                 "per-block times: not in this profile (it predates stage timing of tasks)")
    if not links:
        parts.append("its blocks could not be tied to the bindings")
    return "; ".join(parts)


def _reply(worker, params: dict, text: str, path: str, selection, check: bool) -> dict:
    """The worker's ``code`` answer (the ptx level from an unsandboxed worker)."""
    with borrowed(worker) as client:
        if check:
            require_parsed(text, path, selection.unit, client)
        if params["level"] != "ptx":
            return client.request(wire.CODE, params, timeout=300)
    # nvcc is a process, which the sandboxed worker may not start (as cachegrind, docs/gpu.md)
    with trusted(getattr(worker, "python", None), 300) as unsandboxed:
        return unsandboxed.request(wire.CODE, params, timeout=300)


def trace_gone(run: Run, selection, records: list[dict], stale: bool = True) -> str | None:
    """Why a run's trace does not apply, in the product's words: the blocks its records get that the
    function no longer has (instead of TVM's raw "ScheduleError: An error occurred in the schedule
    primitive 'get-block'."); not ``stale``: the source was never edited, but its blocks are named
    otherwise than in the records adopted for it; None when
    not ``stale`` and every block the records get is there (another ScheduleError: TVM's own words)."""
    have = {b.name for fn in selection.functions for b in fn.blocks} | {"root"}
    gone = blocks_gone((r.get("insts") for r in records), have)
    if not stale and not gone:
        return None
    what = (f" (block{'s' if len(gone) > 1 else ''} {', '.join(gone)} {'are' if len(gone) > 1 else 'is'} no longer in it)"
            if gone else "")
    if not stale:
        return blocks_named_otherwise(run.id, gone)
    return (f"the function changed since run {run.id}{what}: its records no longer apply to it; re-tune it, or "
            f"view the run's own source (asight code {run.source_path} --run {run.id})")


def _trace(record: dict | None, serial: bool) -> list | None:
    if record is None:
        return None
    return list(drop_parallel(record["insts"], record["decisions"])) if serial else [record["insts"], record["decisions"]]


def _find_run(path: str, run: str | None, selection, store_root: str | None, text: str) -> Run | None:
    """The run ``run`` names, else the catalogue's run of the selection (None: untuned)."""
    if run is None:
        return latest_run(RunStore(store_root), path, selection, text)
    found = RunStore(store_root).get(run)
    check_run_function(found, selection)
    return found


def _record(run: Run, records: list[dict], trial: int) -> dict:
    if trial < 0 or trial >= len(records):
        has = f"it has {len(records)}: 0..{len(records) - 1}" if records else "its records file is empty"
        raise AsightError(f"run {run.id} has no candidate {trial} ({has})")
    return records[trial]


def best_trial(records: list[dict], latency_us: float | None, workload: int | None = None) -> dict | None:
    """The record the worker called best (same latency; first such trial)."""
    if latency_us is None:
        return None
    for rec in records:
        if rec["latency_us"] is not None and abs(rec["latency_us"] - latency_us) <= 1e-6 * max(latency_us, 1.0) \
                and (workload is None or rec["workload"] == workload):
            return rec
    return None


def _payload(path: str, selection, run: Run | None, records: list[dict], record: dict | None,
             reply: dict, chosen: list | None = None) -> tuple[dict, dict | None]:
    level = reply["level"]
    lineage = reply.get("lineage") or []
    if reply.get("format") == "tagged-tvmscript":
        text, links = strip_tags(reply["text"])
        links = label_links(links, lineage)
    else:
        text = reply["text"]
        links = (cuda_links(text, reply.get("stores") or []) if level == "cuda"
                 else ptx_links(text, cuda_links(reply.get("cuda") or "", reply.get("stores") or [])) if level == "ptx"
                 else llvm_links(text) if level == "llvm" else asm_links(text))
    applied = reply.get("applied") or {}
    if record is None and run is not None:
        record = best_trial(records, applied.get("latency_us"))
        best = True
    else:
        best = record is not None and run is not None and _is_best(records, record, chosen)
    profile = load_profile(run) if run is not None and best else None
    shares = _shares(profile, selection)
    if shares:
        links = attach_shares(links, shares)
    counts = _line_counts(profile, selection)
    if counts:
        links = attach_line_counts(links, counts)
    fn_id = selection.functions[0].id if len(selection.functions) == 1 else selection.label
    return {"schema": SCHEMA, "status": "ok", "file": path, "function": fn_id, "level": level,
            "language": LANGUAGES[level], "run": run.id if run else None,
            "candidate": _candidate_info(record, best, applied), "target": reply.get("target"),
            "text": text, "links": links, "bySource": [{"sourceLine": k, "lines": v} for k, v in by_source(links).items()],
            "blocks": shares or [], "shareSource": SHARE_SOURCE if shares else None,
            "lineShareSource": LINE_SHARE_SOURCE if counts else None,
            "lineage": _lineage(text, lineage, level),
            "note": _note(run, best, shares, record)}, record


def _lineage(text: str, lineage: list[dict], level: str) -> list[dict]:
    """The trace's derived blocks (and schedule-made loops) with their generated header line where
    the text shows one (scheduled TIR: ``with T.sblock("sum_rf")``; lowered TIR has no blocks)."""
    headers = derived_in_text(text, lineage) if level == "scheduled" else {}
    return [{"block": e.get("block"), "loop": bool(e.get("loop")), "source": e["source"],
             "derivation": e["derivation"], "label": e["label"], "line": headers.get(e.get("block"))}
            for e in lineage]


def adopted_best(meta: RunMeta | None, records: list[dict]) -> dict | None:
    """An adopted run's best: the fastest record of the workload adopt matched.  Adopt may match "by
    the same IR, attributes aside", which no structural hash finds again in a folder of several
    workloads: the code view must not ask "was it edited since?" of a file nobody edited."""
    adopted = meta.adopted if meta is not None else None
    workload = adopted.workload if adopted is not None else None
    mine = [r for r in records if r["workload"] == workload and r["latency_us"] is not None]
    return min(mine, key=lambda r: r["latency_us"]) if workload is not None and mine else None


def _is_best(records: list[dict], record: dict, chosen: list | None = None) -> bool:
    """The record the run's measurement chose for its workload (else the fastest while tuning)."""
    if chosen:
        return any(c.get("trial") == record["trial"] for c in chosen)
    valid = [r for r in records if r["latency_us"] is not None and r["workload"] == record["workload"]]
    return bool(valid) and record["latency_us"] is not None and record["latency_us"] <= min(r["latency_us"] for r in valid)


def _candidate_info(record: dict | None, best: bool, applied: dict) -> dict | None:
    if record is None:
        if applied.get("latency_us") is None:
            return None
        return {"trial": None, "latencyUs": applied["latency_us"], "best": True}
    return {"trial": record["trial"], "latencyUs": record["latency_us"], "best": best}


def _line_counts(profile: dict | None, selection) -> list[dict]:
    """cachegrind rows per TVMScript line of the tuned (best) program, when the profile has them."""
    ids = {f.id for f in selection.functions} | {f.name for f in selection.functions}
    for kernel in (profile or {}).get("kernels") or []:
        if kernel.get("function") in ids:
            tuned = (kernel.get("cachegrind") or {}).get("tuned") or {}
            return tuned.get("lines") or []
    return []


def _shares(profile: dict | None, selection) -> list[dict]:
    """Measured latency share per source block, only for the record the profile measured (the best)."""
    if not profile:
        return []
    out = []
    for fn in selection.functions:
        blocks = profile_blocks(profile, fn) or {}
        ranges = {b.name: b.range for b in fn.blocks}
        for name, entry in blocks.items():
            rng = ranges.get(name)
            if rng is not None and entry.get("share") is not None:
                out.append({"name": name, "share": entry["share"], "us": entry.get("us"),
                            "start": rng["start"]["line"], "end": rng["end"]["line"], "source": entry.get("source")})
    return out


def _note(run: Run | None, best: bool, shares: list, record: dict | None) -> str:
    if run is None:
        return "no tuning run of this function: the untuned code"
    if record is not None and record.get("latency_us") is None:
        return (f"trial {record['trial']} has no measured latency: it failed where it was tuned (its build or run "
                "failed or timed out); this is the code it would have run")
    if not shares and runs_on_device(run.load().target):
        return "no per-line latency shares: they come from a profile on this machine's CPU, and this is a GPU run"
    arch = foreign_cpu(run.load().target) if not shares else None
    if arch:
        return (f"no per-line latency shares: they come from a profile on this machine's CPU, and this run's "
                f"programs are {arch} code (built here, not run)")
    if not best:
        return "latency shares are measured for the best record only; this candidate has none"
    if not shares:
        return "no cached profile of this run: profile it (asight profile / the Profile lens) for per-line shares"
    return ""


# --------------------------------------------------------------------------- diff


def code_diff(path: str, a: dict, b: dict, function: str | None = None, store_root: str | None = None,
              worker=None, text: str | None = None) -> dict:
    """Two candidates side by side (``asight.codeDiff/1``).

    ``a`` and ``b`` are ``{"run": R, "candidate": K or None}``; K None = that run's best record.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace") if text is None else text
    with borrowed(worker) as client:
        views = [_view(path, side.get("run"), side.get("candidate"), "scheduled", function, store_root,
                       client, text, k == 0, False) for k, side in enumerate((a, b))]
    outline = build_outline(text, path)
    fn = outline.function(views[0][0]["function"])
    blocks = block_infos(fn) if fn is not None else {}
    sides = []
    for view, record in views:
        sides.append({"run": view["run"], "candidate": view["candidate"], "text": view["text"],
                      "trace": format_trace(record["insts"], record["decisions"]) if record else "",
                      "decisions": {d.key: d for d in parse_decisions(record["insts"], record["decisions"], blocks)}
                      if record else {}})
    return diff_payload(path, views[0][0]["function"], sides)


def diff_payload(path: str, function: str, sides: list[dict]) -> dict:
    """The diff of two prepared sides (text, trace listing, decisions by key); pure."""
    a, b = sides
    la, lb = (a["candidate"] or {}).get("latencyUs"), (b["candidate"] or {}).get("latencyUs")
    keys = list(dict.fromkeys([*a["decisions"], *b["decisions"]]))
    differing = []
    for key in keys:
        da, db = a["decisions"].get(key), b["decisions"].get(key)
        va, vb = (da.value if da else None), (db.value if db else None)
        if va != vb:
            ref = da or db
            differing.append({"key": key, "block": ref.block, "inst": ref.inst, "loopVar": ref.loop_var,
                              "annotation": ref.annotation, "a": va, "b": vb})
    label = [_side_label(s) for s in sides]
    return {"schema": DIFF_SCHEMA, "status": "ok", "file": path, "function": function,
            "sides": [{"run": s["run"], "candidate": s["candidate"], "label": lab, "text": s["text"], "trace": s["trace"]}
                      for s, lab in zip(sides, label)],
            "latencyUs": [la, lb], "deltaUs": (lb - la) if la is not None and lb is not None else None,
            "ratio": (lb / la) if la and lb else None, "decisions": differing,
            "codeDiff": "".join(difflib.unified_diff(a["text"].splitlines(True), b["text"].splitlines(True),
                                                     label[0], label[1], n=2)),
            "traceDiff": "".join(difflib.unified_diff(_lines(a["trace"]), _lines(b["trace"]), label[0], label[1], n=1))}


def _lines(text: str) -> list[str]:
    return [line + "\n" for line in text.splitlines()]


def _side_label(side: dict) -> str:
    cand = side["candidate"] or {}
    trial = cand.get("trial")
    where = f"trial {trial}" if trial is not None else ("best" if cand else "untuned")
    failed = " (failed where it was tuned: no latency)" if trial is not None and cand.get("latencyUs") is None else ""
    return f"{side['run'] or 'no run'} {where}{failed}"
