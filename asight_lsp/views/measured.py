"""Which measurement a view shows (issue 23: one record per run, never silently replaced).

A run keeps every profile it measured (``store/caches.archive_profile``); one is *shown* (the
newest that was not noisier than the one before it, or the one the user chose).  A view built from
a profile carries ``measurement``: when and under which load its per-call (per-stage) times were
measured, which measurement its end-to-end headline is, whether the two are the same one, and the
kept measurements it does not show (with why).  Pure: the caller reads the store."""
from __future__ import annotations

from ..analysis.measurement import load_text, when_text
from ..store.record import UNMEASURED, Measurement


def _who(by: str | None) -> str:
    return by or "a measurement"


def shown_measurement(profile: dict, kept: list[dict] | None = None) -> dict:
    """``{"id", "perCall", "headline", "same", "text", "others"}`` of a profile; ``kept``: the
    run's archived profiles (``store.caches.archived_profiles`` entries' ``profile``)."""
    m = profile.get("measured") or {}
    rec = Measurement.of(profile.get("measurement")) or UNMEASURED     # the record its headline is
    per_taken = m.get("taken") or profile.get("created")
    per = {"taken": per_taken, "when": when_text(per_taken), "by": m.get("by"),
           "load": load_text(m.get("load")), "busy": bool((m.get("load") or {}).get("busy"))}
    head = {"taken": rec.taken, "when": when_text(rec.taken), "by": rec.by, "load": load_text(rec.load), "busy": rec.busy}
    same = bool((m.get("headline") or {}).get("same")) or (per_taken is not None and per_taken == rec.taken)
    if same:
        text = f"Per-call times and end to end: one measurement, {per['when']} UTC ({_who(per['by'])}, {per['load']})."
    else:
        text = (f"Per-call times: measured {per['when']} UTC ({_who(per['by'])}, {per['load']}); end to end: "
                f"{head['when']} UTC ({_who(head['by'])}, {head['load']}) — two different measurements.")
    others = [_other(p) for p in kept or [] if (p.get("measured") or {}).get("id") not in (None, m.get("id"))]
    return {"id": m.get("id"), "perCall": per, "headline": head, "same": same, "text": text,
            "others": [o for o in others if o]}


def _other(profile: dict) -> dict:
    m = profile.get("measured") or {}
    return {"id": m.get("id"), "when": when_text(m.get("taken")), "load": load_text(m.get("load")),
            "by": m.get("by"), "why": profile.get("not_adopted") or "older"}


def others_text(info: dict) -> str | None:
    """One line about measurements the view does not show because they were noisier, or None."""
    skipped = [o for o in info.get("others") or [] if o["why"] != "older"]
    if not skipped:
        return None
    last = skipped[-1]
    more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
    return (f"A newer measurement of {last['when']} UTC{more} is kept but not shown: {last['why']} "
            "(`asight profile --remeasure --replace` shows it).")


def measurement_stamp(record: dict | None) -> dict | None:
    """Which measurement a run's figures are (its measurement record, the headline every view of the
    run starts from): ``{taken, when, by, load, busy, text}``; None before one exists.  Every run
    summary carries it, so a client can tell that a panel shows an older one (issue 23)."""
    record = record or {}
    if not record.get("taken") or not record.get("tuned"):
        return None
    load = record.get("load")
    when, by, words = when_text(record["taken"]), _who(record.get("by")), load_text(load)
    return {"taken": record["taken"], "when": when, "by": by, "load": words, "busy": bool((load or {}).get("busy")),
            "text": f"measured {when} UTC by {by}, {words}"}
