"""The model view (``asight.model/1``, pure): per task of a tuned Relax model, its calls (each with
its own bindings and lines), untuned and tuned latency, share of the tuned kernel time, trials and
failures.  Built from a run's profile (``services/profiling``: per-call VM timings of the untuned
and the tuned build) and its measurement record (the end-to-end headline)."""
from __future__ import annotations

from ..analysis import twins as twin_rules
from ..analysis.attribution import SLOWER_RATIO
from ..analysis.default_candidate import NOTHING_TO_TUNE
from ..analysis.deployable import search_credit
from ..analysis.levers import refusal_lines
from ..protocol import SCHEMA_MODEL
from ..store.library import library_lines
from ..store.record import UNMEASURED, Measurement
from .context import clean
from .measured import others_text, shown_measurement

SHARE_NOTE = ("per-call times come from the VM instrument hook (one timed pass per call); shares are of the "
              "tuned build's kernel time, the end-to-end headline is the measurement record")


def _untuned_by_var(relax: dict) -> dict[str, float]:
    """µs of the untuned build's call computing each binding (its kernels are unfused: one each)."""
    calls = ((relax.get("tasks") or {}).get("baseline") or {}).get("tasks") or []
    return {v: c["us"] for c in calls for v in c.get("vars") or []}


def _call(call: dict, untuned: dict[str, float], owners: dict[int, str] | None = None) -> dict:
    before = [untuned[v] for v in call.get("vars") or [] if v in untuned]
    out = {"call": call.get("call", 0), "bindings": call.get("vars") or [], "lines": call.get("lines"),
           "tunedUs": call.get("us"), "untunedUs": sum(before) if before else None}
    if owners is not None and call.get("lines"):
        out["ranges"] = own_ranges(call["lines"], f"{call.get('task')}#{call.get('call', 0)}", owners)
    return out


def line_owners(relax: dict) -> dict[int, str]:
    """``{source line: "task#call"}`` of every binding a tuned kernel call computes."""
    owners: dict[int, str] = {}
    for b in (relax.get("bindings") or {}).get("tuned") or []:
        rng, tasks = b.get("range"), b.get("tasks") or []
        if rng and tasks:
            for line in range(rng["start"]["line"], rng["end"]["line"] + 1):
                owners[line] = tasks[0]
    return owners


def own_ranges(lines: list[int], call: str, owners: dict[int, str]) -> list[list[int]]:
    """The call's lines ``[first, last]`` split around the lines of *other* calls' bindings (a branch
    of another kernel interleaved with this one), so selecting the call selects only its bindings;
    lines of no call (a folded weight reshape) stay inside."""
    out: list[list[int]] = []
    start = None
    for line in range(lines[0], lines[1] + 1):
        other = owners.get(line) not in (None, call)
        if other and start is not None:
            out.append([start, line - 1])
            start = None
        elif not other and start is None:
            start = line
    if start is not None:
        out.append([start, lines[1]])
    return [r for r in out if any(owners.get(l) == call for l in range(r[0], r[1] + 1))]


def _slower(tuned_us: float, untuned_us: float | None, record: dict) -> bool:
    """Tuning made this task slower: it had trials, and its calls take ≥ ``SLOWER_RATIO`` × untuned.

    A task with no trial runs the default schedule in both builds, so a difference there is the noise
    of one timed pass per call, never a verdict (ResNet-18 at 64 trials showed 0-trial tasks at 1.8×).
    """
    if not record.get("trials") or not untuned_us or not tuned_us:
        return False
    return tuned_us >= SLOWER_RATIO * untuned_us


def library_hit(tuning: dict | None, task: str) -> dict:
    """``{"fromLibrary": {libraryUs, measuredUs}}`` where ``task`` started from the schedule library
    (``extra.library``), else ``{}``."""
    section = (tuning or {}).get("library")
    hits = section.get("hits") if isinstance(section, dict) else None
    for hit in hits if isinstance(hits, list) else []:
        if isinstance(hit, dict) and hit.get("task") == task:
            return {"fromLibrary": {"libraryUs": hit.get("library_us"), "measuredUs": hit.get("measured_us")}}
    return {}


def twin_rows(tuning: dict | None) -> dict[str, dict]:
    """Per task: its twins and siblings and what the schedules transferred between them gave
    (run.json ``extra.twins``, ``analysis/twins.summary``)."""
    kept = (tuning or {}).get("twins") or {}
    if not kept.get("relations"):
        return {}
    return twin_rules.summary(kept["relations"], kept.get("transfers") or [])


def model_view(profile: dict, run: dict | None = None, kept: list[dict] | None = None,
               tuning: dict | None = None, build: dict | None = None) -> dict:
    """The payload from a profile of a Relax run (``unavailable`` for anything else); ``kept``: the
    run's other kept profiles (``views.measured``), so the view says which measurement it shows;
    ``tuning`` is the run's ``extra`` (twins and transfers, budget outlook) when the caller has it;
    ``build`` (``analysis.deployable.headline_build``; default: the profile's own) says which build
    the headline measured and whether the exported build would differ."""
    relax = (profile or {}).get("relax")
    if not isinstance(relax, dict):
        return {"schema": SCHEMA_MODEL, "status": "unavailable", "run": run,
                "message": "the model view needs a profile of a tuned Relax model (asight profile FILE)"}
    tuned_calls = ((relax.get("tasks") or {}).get("tuned") or {}).get("tasks") or []
    untuned = _untuned_by_var(relax)
    records = relax.get("task_records") or {}
    total = sum(c.get("us") or 0.0 for c in tuned_calls) or None
    tasks: dict[str, dict] = {}
    owners = line_owners(relax)
    for call in tuned_calls:
        entry = tasks.setdefault(call["task"], {"task": call["task"], "calls": []})
        entry["calls"].append(_call(call, untuned, owners))
        if call.get("weights_packed"):   # the layout lever: weights re-laid once, at build time
            entry["weightsPacked"] = True
    rows = []
    for name, entry in tasks.items():
        rec = records.get(name) or {}
        tuned = sum(c["tunedUs"] or 0.0 for c in entry["calls"])
        before = [c["untunedUs"] for c in entry["calls"]]
        untuned_us = sum(before) if None not in before else None
        rows.append({**entry, "tunedUs": tuned, "untunedUs": untuned_us, "slower": _slower(tuned, untuned_us, rec),
                     "share": tuned / total if total else None, "trials": rec.get("trials"),
                     "failed": rec.get("failed"), "tuned": rec.get("tuned", False), "recordUs": rec.get("best_us")})
    related = twin_rows(tuning)
    outlook = {r["task"]: r for r in ((tuning or {}).get("budget") or {}).get("outlook") or []}
    measured = Measurement.of(profile.get("measurement")) or UNMEASURED     # the record the profile's headline is
    defaults = {d["task"]: d for d in measured.defaults or [] if d.get("task")}
    for row in rows:
        if row["task"] in related:
            row["twins"] = related[row["task"]]
        if row["task"] in outlook:
            row["nextTrials"] = outlook[row["task"]]
        if row["task"] in defaults:   # no trial beat the default schedule: the tuned build keeps it
            won = defaults[row["task"]]
            row["defaultKept"] = {"defaultUs": won.get("default_us"), "bestTrialUs": won.get("measured_us"),
                                  **({"nothingToTune": True} if won.get("default") == NOTHING_TO_TUNE else {})}
    for row in rows:
        row.update(library_hit(tuning, row["task"]))
        row["levers"] = lever_notes(row)
    rows.sort(key=lambda r: -(r["tunedUs"] or 0.0))
    untried = sorted(n for n, r in records.items() if n not in tasks)
    shown = shown_measurement(profile, kept)
    refused = refusal_lines(tuning)
    notes = [SHARE_NOTE] + refused + library_lines(tuning) + view_notes(profile, relax, rows, measured, shown)
    return clean({"schema": SCHEMA_MODEL, "status": "ok", "run": run, "function": relax.get("function"),
                  "headline": {"untunedUs": (relax.get("baseline") or {}).get("median_us"),
                               "tunedUs": (relax.get("tuned") or {}).get("median_us"), "speedup": relax.get("speedup"),
                               "build": build or profile.get("headline_build")},
                  "tasks": rows, "kernelUs": total, "leversRefused": refused, "notTimed": untried, "notes": notes, "measurement": shown,
                  "twinGroups": twin_rules.groups({k: v for k, v in related.items()})})


def view_notes(profile: dict, relax: dict, rows: list[dict], measured: Measurement, shown) -> list[str]:
    """The notes under the table: the profile's own (the run is stale, still tuning), the search's credit,
    a newer measurement kept aside, the layout and Winograd levers, how the schedules were picked."""
    credit = search_credit(len(rows), measured.chosen) if rows else None
    return [n for n in [profile.get("note"), credit, others_text(shown), layout_note(relax.get("channels_last")),
                        winograd_note([r["task"] for r in rows]), pick_note(measured)] if n]


def layout_note(layouts: dict | None) -> str | None:
    """The channels-last lever as the build applied it (issue 21), or None when the model kept its layout."""
    conv = (layouts or {}).get("relax.nn.conv2d")
    if not conv:
        return None
    return (f"Convolutions are tuned and built channels-last ({conv[0]} activations, {conv[1]} weights; Relax "
            f"ConvertLayout before tuning; why: docs/models.md). The untuned column is the model as tvm.compile builds it. "
            f"ASIGHT_LEVERS_OFF=nhwc at tune time keeps the model's layout.")


WINOGRAD_KERNEL = "conv2d_winograd"   # worker/winograd.NAME: in the fused kernel's name


def winograd_note(tasks: list[str]) -> str | None:
    """The Winograd lever as the run applied it (issue 21): which kernels compute their convolution as
    Winograd F(4x4, 3x3), or None when none does."""
    wino = [t for t in tasks if WINOGRAD_KERNEL in t]
    if not wino:
        return None
    return (f"{len(wino)} kernel(s) compute their 3x3 convolution as Winograd F(4x4, 3x3) ({', '.join(wino)}): 36 "
            f"multiplications per 4x4 output tile and channel pair where the direct form does 144, the weight "
            f"transformed once at build time (why and when: docs/models.md). ASIGHT_LEVERS_OFF=winograd at tune "
            f"time keeps the direct convolution.")


def pick_note(measured: Measurement) -> str | None:
    """How each kernel's schedule was picked, when the cold lever re-measured it (issue 21), else None."""
    entries = measured.picks
    if not entries or not all((e.get("harness") or {}).get("cold") for e in entries):
        return None
    most = max(len(e.get("candidates") or []) for e in entries)
    return (f"Each kernel's schedule was picked by re-measuring its best candidates (up to {most}) cold: its weights "
            f"and other inputs but the first flushed from the CPU caches before every call, as in the model, where "
            f"the other kernels' weights evict them (a schedule fastest with cached weights ran up to 2x slower "
            f"in the model; docs/models.md). ASIGHT_LEVERS_OFF=cold at tune time re-measures warm.")


def lever_notes(row: dict) -> list[str]:
    """What the model-tuning levers did for one task, a short phrase each (issue 21), for the Model
    panel: twins and transfers, a kept default schedule, packed weights, the next batch's outlook."""
    from ..analysis.twins import describe
    from .text import format_latency
    out = []
    twin = describe(row["task"], row["twins"]) if row.get("twins") else None
    if twin:
        out.append(twin.split(": ", 1)[1])
    if row.get("defaultKept"):
        kept = row["defaultKept"]
        out.append(f"default schedule kept: nothing to tune (it moves data or its space has one schedule), "
                   f"{format_latency(kept.get('defaultUs'))} re-measured" if kept.get("nothingToTune") else
                   f"default schedule kept: {format_latency(kept.get('defaultUs'))} vs best trial "
                   f"{format_latency(kept.get('bestTrialUs'))} (re-measured)")
    if row.get("fromLibrary"):
        hit = row["fromLibrary"]
        out.append(f"started from the schedule library: {format_latency(hit.get('measuredUs'))} here "
                   f"({format_latency(hit.get('libraryUs'))} where recorded)")
    if row.get("weightsPacked"):
        out.append("weights packed into the schedule's layout at build time")
    nxt = row.get("nextTrials")
    if nxt and nxt.get("expectedSavingUs"):
        out.append(f"next {nxt.get('batch')} trials: ~{format_latency(nxt['expectedSavingUs'])} saved (expected)")
    return out
