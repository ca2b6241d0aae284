"""Latencies, speed-ups and times as the editor and the CLI print them."""
from __future__ import annotations

import time

from ..analysis.default_candidate import baseline_medians, dlight_kept
from ..analysis.measurement import short_speedup, speedup_text
from ..store.record import Adopted, TimeBudget


def relative_time(then: float | None, now: float | None = None) -> str:
    """``just now``, ``3 min ago``, ``2 h ago``, ``5 d ago``."""
    if not then:
        return ""
    delta = max((now or time.time()) - then, 0)
    if delta < 45:
        return "just now"
    if delta < 3600:
        return f"{max(round(delta / 60), 1)} min ago"
    if delta < 86400:
        return f"{round(delta / 3600)} h ago"
    return f"{round(delta / 86400)} d ago"


def format_latency(us: float | None) -> str:
    """``5.9 µs``, ``0.20 ms``, ``12.3 ms``, ``1.20 s``."""
    if us is None:
        return "—"
    if us < 100:
        return f"{us:.1f} µs" if us < 10 else f"{us:.0f} µs"
    if us < 1e6:
        ms = us / 1000
        return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"
    return f"{us / 1e6:.2f} s"


def table_unit(values):
    """One unit (µs, ms or s, by the largest value) for figures shown side by side, so they compare
    at a glance (the Model panel's rule, ``shared/format.ts tableLatency``); returns a formatter."""
    finite = [v for v in values if isinstance(v, (int, float)) and v == v]
    top = max(finite, default=0.0)
    div, unit = (1e6, "s") if top >= 1e6 else (1e3, "ms") if top >= 1e3 else (1.0, "µs")

    def fmt(us) -> str:
        if us is None:
            return "—"
        v = us / div
        digits = 0 if v >= 100 else 1 if v >= 10 else 2 if v >= 1 else 3
        return f"{v:.{digits}f} {unit}"
    return fmt


def format_speedup(speedup: float | None) -> str:
    if not speedup:
        return ""
    return f"{speedup:.0f}×" if speedup >= 10 else f"{speedup:.1f}×"




def result_parts(record: dict) -> list[str]:
    """What a run's result is, in a lens's words: ``61 µs``, ``41× vs untuned``; on a GPU run that kept
    DLight's default schedule (``default_candidate.keep_baseline``), DLight's figure, said kept, then
    the tuned one: ``0.12 ms DLight kept``, ``tuned 0.14 ms, 1.17× slower``."""
    if dlight_kept(record):
        base, tuned = baseline_medians(record)
        return [f"{format_latency(base)} DLight kept",
                f"tuned {format_latency(tuned)}, {short_speedup(record).replace(' than DLight', '')}"]
    return [format_latency(record["tuned"]["median_us"]), short_speedup(record)]


def member_parts(record: dict, member: str) -> list[str] | None:
    """A lens over one PrimFunc of a run tuned as a module: its own medians from the measurement's
    ``parts``, then the module's sum named as such (``18 µs · 3.4× vs untuned · module 56 µs``); the
    module's total alone would read as each function's figure.  None for another record."""
    parts = record.get("parts") or {}
    tuned, untuned = parts.get(f"tuned {member}"), parts.get(f"untuned {member}")
    if record.get("scope") != "module" or not isinstance(tuned, dict) or not tuned.get("median_us"):
        return None
    own = [format_latency(tuned["median_us"])]
    if isinstance(untuned, dict) and untuned.get("median_us"):
        own.append(f"{untuned['median_us'] / tuned['median_us']:.1f}× vs untuned (medians)")
    return own + [f"module {format_latency(record['tuned']['median_us'])}"]


def tuning_best_text(best_us: float, extra: dict | None = None) -> str:
    """The best MetaSchedule's runner saw, said as such, and where: an adopted run's was seen on the
    machine that tuned it (else an H100's 0.13 ms reads like this CPU's)."""
    if Adopted.from_extra(extra):
        return f"best {format_latency(best_us)} on the machine that tuned it (adopted, not re-measured)"
    return f"best {format_latency(best_us)} while tuning (not re-measured)"


def best_trial_text(best: dict | None) -> str:
    """Which trial a view's best schedule is and how it was picked: ``trial 0, chosen by
    re-measurement; trial 1 was the fastest while tuning`` (a loop view's ``stages[i].best``);
    '' when the payload does not say."""
    if not best or best.get("trial") is None:
        return ""
    text = f"trial {best['trial']}, " + ("chosen by re-measurement" if best.get("chosen_by") == "re-measurement"
                                         else "the fastest while tuning")
    if best.get("fastest_trial") is not None:
        text += f"; trial {best['fastest_trial']} was the fastest while tuning"
    return text


def minutes_text(seconds: float) -> str:
    """``45 s``, ``6 min``, ``1 h 20 min``: a time left or a budget."""
    if seconds < 59.5:
        return f"{max(round(seconds), 0)} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def budget_text(trials_done: int, trials_requested: int, extra: dict | None = None,
                now: float | None = None) -> str:
    """How far a session is through its budget: ``12/64 trials``; with a time budget (``--minutes``,
    ``store/record.TimeBudget``) ``12 trials · 6 min left`` (or ``· 10 min budget`` before the job has
    started the clock), and ``12/64 trials · 6 min left`` where the trials bound it too."""
    budget = TimeBudget.from_extra(extra or {})
    event = {"trials_done": trials_done, "trials": TimeBudget.trial_bound(extra or {}, trials_requested)}
    if budget is not None and budget.until is None:
        return f"{event_budget_text(event)} · {minutes_text(budget.minutes * 60)} budget"
    if budget is not None:
        event["seconds_left"] = max(budget.until - (now or time.time()), 0)
    return event_budget_text(event)


def event_budget_text(event: dict) -> str:
    """A progress event's place in its budget: ``12/64 trials``, ``12 trials · 6 min left`` (the job's
    ``trials`` is None where the time alone bounds it; ``seconds_left`` None without a time budget)."""
    done = event.get("trials_done", 0)
    trials = f"{done}" + (f"/{event['trials']} trials" if event.get("trials") else f" trial{'s' if done != 1 else ''}")
    left = event.get("seconds_left")
    return trials + (f" · {minutes_text(left)} left" if left is not None else "")


def trials_text(trials_done: int, extra: dict | None = None) -> str:
    """``128 trials``; an adopted run's says how many were measured where it was tuned ("66 of 128
    trials measured": 62 never built on the H100 run, and the lens said "128 trials")."""
    adopted = Adopted.from_extra(extra)
    measured = adopted.measured if adopted else None
    if isinstance(measured, int) and measured < trials_done:
        return f"{measured} of {trials_done} trials measured"
    return f"{trials_done} trials"


def headline_text(measurement: dict | None, tuning_best_us: float | None = None, extra: dict | None = None) -> str:
    """One line every place shows for a run: ``61 µs · 41× vs untuned`` from its measurement record
    (``· noisy`` when the machine was busy), or the best seen while tuning, said as such."""
    record = measurement or {}
    if record.get("tuned"):
        parts = result_parts(record)
        if (record.get("load") or {}).get("busy"):
            parts.append("noisy")
        return " · ".join(parts)
    if tuning_best_us:
        return tuning_best_text(tuning_best_us, extra)
    return ""


GPU_UNMEASURED = ("the headline (tuned against DLight's default schedule, what TVM gives without tuning, with "
                  "cuBLAS/cuDNN through PyTorch as a third line) is measured on the GPU by `asight tune` there; "
                  "a run adopted here keeps the records of the machine that tuned it")


def gpu_unmeasured(target_label: str, measurement: dict | None) -> str | None:
    """Why a GPU run shows no baseline or vendor-library line, and where they come from ("not measured"
    alone reads as a missing feature); None for a measured or a CPU run."""
    if (measurement or {}).get("untuned") or not str(target_label).startswith("cuda"):
        return None
    return GPU_UNMEASURED


def measurement_text(measurement: dict | None) -> str:
    """``untuned 2.52 ms → tuned 61 µs: 41× faster (95% CI 40×–43×)`` (what a notification says)."""
    record = measurement or {}
    if not record.get("untuned"):
        return "not measured" + (f" ({record['error']})" if record.get("error") else "")
    text = f"untuned {format_latency(record['untuned']['median_us'])}"
    if record.get("tuned"):
        text += f" → tuned {format_latency(record['tuned']['median_us'])}: {speedup_text(record)}"
    if (record.get("load") or {}).get("busy"):
        text += " [measured on a busy machine: noisy]"
    return text


# --------------------------------------------------------------------------- before → after per block


def ratio_text(ratio: float | None) -> str:
    """``4.6× slower`` / ``48× faster`` / ``unchanged`` for tuned / untuned = ``ratio``."""
    if ratio is None:
        return ""
    if 1 / 1.05 <= ratio <= 1.05:
        return "about the same"
    return f"{format_speedup(ratio)} slower" if ratio > 1 else f"{format_speedup(1 / ratio)} faster"


def change_text(change: dict, verbs: list[str] | None = None) -> str:
    """``normalize 1.2 µs → 5.5 µs, 4.6× slower; schedule: split + parallel + vectorize``.

    ``change`` is one ``analysis.attribution.before_after`` entry; ``verbs`` what the best
    schedule did to the block (``schedule_verbs``), shown for a slowed block.
    """
    text = f"{change['name']} {format_latency(change.get('before_us'))} → {format_latency(change.get('after_us'))}"
    ratio = ratio_text(change.get("ratio"))
    if ratio:
        text += f", {ratio}"
    if change.get("estimate"):
        text += " (a stage shared with other blocks, split by FLOPs: an estimate)"
    if change.get("slower") and verbs:
        text += f"; schedule: {' + '.join(verbs)}"
    return text


def slowed_lines(changes: list[dict], verbs: dict[str, list[str]] | None = None) -> list[str]:
    """``⚠ slower after tuning: …`` per flagged block (empty when none got slower)."""
    return [f"⚠ slower after tuning: {change_text(c, (verbs or {}).get(c['name']))}" for c in changes if c.get("slower")]
