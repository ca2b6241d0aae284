"""The deployable build in words (pure; docs/models.md, issue 24).

A Relax model's headline is of the *deployable* build when the tuning job tuned and measured the
module ``asight export`` builds (the weights file bound as constants).  These functions say which
build a run's headline measured, whether that is still the build an export would make now, why an
export refuses, and whether the exported library ran as fast as the headline's build.
"""
from __future__ import annotations

EXPORT_TOLERANCE = 0.10     # a library within ±10 % of the headline build is "the same" (docs/models.md)

DEPLOYABLE = "deployable build (weights bound, as `asight export` builds it)"
NO_WEIGHTS = "deployable build (no weights file to bind)"
PARAMETERS = ("weights as parameters, NOT the exported build: some kernels differ once `asight export` binds "
              "the weights (a run from before the deployable build); re-tune to measure what ships")
CHANGED = "the weights file changed since tuning: the exported build's kernels may differ; re-tune"


def headline_build(build: dict | None, digest_now: str | None) -> dict:
    """Which build a run's headline measured and whether an export now would build the same.

    ``build``: the run's ``extra.build`` (or the record's ``build``), None for a run from before
    the deployable build; ``digest_now``: sha256 of the weights file beside the model now (None:
    no file).  Returns ``{"deployable", "stale", "text"}``.
    """
    if not build:
        stale = digest_now is not None        # without weights the two builds are one
        return {"deployable": not stale, "stale": stale, "text": PARAMETERS if stale else NO_WEIGHTS}
    if not build.get("weights_digest") and not build.get("bound"):
        # the run bound no weight (a model without any: its import writes an empty weights file)
        return {"deployable": True, "stale": False, "text": NO_WEIGHTS}
    if build.get("weights_digest") != digest_now:
        return {"deployable": True, "stale": True, "text": CHANGED}
    return {"deployable": True, "stale": False, "text": DEPLOYABLE if digest_now else NO_WEIGHTS}


def unrecorded_text(tasks: list[str], chosen: list[dict]) -> str | None:
    """The tasks a run ended without a record for (the budget did not reach them, or every trial
    failed): the headline ran them on TVM's default schedule and `asight export` will refuse them."""
    have = {c.get("task") for c in chosen}
    missing = [t for t in tasks if t not in have]
    if not missing:
        return None
    return (f"{len(missing)} of {len(tasks)} kernels have no record (default schedule): {', '.join(missing)}; "
            "`asight export` refuses them: raise --trials, or export with --tune-missing N")


def search_credit(tasks: int, chosen: list | None) -> str | None:
    """What the tuned build owes the search: ``k of n kernels run a tuned schedule``, and when none
    does, that the speed-up over untuned is the build's, not the trials' (a "1.36x faster" with every
    default kept would read as "12 trials bought 36 %").  None without a measurement."""
    if chosen is None or not tasks:
        return None
    if not chosen:
        return (f"0 of {tasks} kernels run a tuned schedule (each kept TVM's default, re-measured faster than "
                "every trial): the difference from untuned is asight's build (fusion, channels-last convolutions, "
                "weights folded into constants), not the search")
    return f"{len(chosen)} of {tasks} kernels run a tuned schedule"


def _us(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value / 1e3:.3f} ms" if value >= 1e3 else f"{value:.1f} µs"


def missing_lines(applied: dict) -> list[str]:
    """One line per kernel on TVM's default schedule: its measured cost in the built program."""
    costs = {c["kernel"]: c for c in applied.get("missing_cost") or []}
    lines = []
    for name in applied.get("missing") or []:
        c = costs.get(name) or {}
        share = f", {c['share'] * 100:.0f}% of the kernel time" if c.get("share") is not None else ""
        calls = f"{c['calls']} call{'s' if c.get('calls') != 1 else ''}" if c.get("calls") else "not timed"
        lines.append(f"{name}: {_us(c.get('us'))} per run ({calls}{share})")
    return lines


def refusal_text(applied: dict, kernels: int | None = None) -> str:
    """Why an export refused: which kernels run TVM's default schedule, what they cost, the fixes."""
    missing = applied.get("missing") or []
    head = (f"{len(missing)} of {kernels if kernels is not None else applied.get('kernels', '?')} kernels of the "
            "deployable build have no record of this run and would run TVM's default schedule:")
    unbound = (["no weights file beside the model: the run was tuned with its weights bound, and its schedules "
                "pack them when the library is built, so no record fits the model with weights as inputs; put "
                "<file>.weights.npz back beside the model"] if applied.get("unbound") else [])
    return "\n".join([head, *("  " + line for line in missing_lines(applied)), *unbound,
                      "nothing written.  Tune them first: --tune-missing N (N trials, then build), or accept "
                      "them: --allow-untuned (the library then runs slower than a fully tuned build)"])


def untuned_wins(measurement: dict | None) -> str | None:
    """Why an export builds the *untuned* model, or None.  The run's headline measured the whole
    tuned build slower than the untuned one (the speed-up's 95 % interval wholly below 1: a tiny
    model whose layout transforms cost more than its kernels gained), so the tuned library would ship
    slower than what TVM gives without tuning; the untuned build is exported instead, unless the user
    asks for the tuned one (``--tuned``).  Not on a record measured on a busy machine (an outside
    tester's busy run said 1.55x slower; 40 quiet rounds put the two builds 7 % apart)."""
    s = (measurement or {}).get("speedup") or {}
    ci = s.get("ci") or []
    if len(ci) != 2 or not s.get("estimate") or ci[1] >= 1:
        return None
    if ((measurement or {}).get("load") or {}).get("busy"):
        return None    # measured beside other work: one noisy headline is not enough to ship another build
    return (f"the run measured the tuned build {1 / s['estimate']:.2f}x slower than the untuned one (95% CI "
            f"{1 / ci[1]:.2f}-{1 / ci[0]:.2f}x): exported the untuned build (TVM's default schedules, the model as "
            "tvm.compile builds it) so the library is never slower than untuned; --tuned exports the tuned build")


def untuned_faster_but_busy(measurement: dict | None) -> str | None:
    """The note an export of the tuned build owes the user when the run's headline measured it slower
    than untuned on a busy machine (``untuned_wins`` does not act on such a record): tune said "keep
    the untuned build", and export must not ship the other one without a word."""
    s = (measurement or {}).get("speedup") or {}
    ci = s.get("ci") or []
    if len(ci) != 2 or not s.get("estimate") or ci[1] >= 1 or not ((measurement or {}).get("load") or {}).get("busy"):
        return None
    return (f"the run measured the tuned build {1 / s['estimate']:.2f}x slower than the untuned one, but on a busy "
            "machine, so the tuned build was exported; re-measure when the machine is quiet (asight profile FILE "
            "--remeasure) or export the untuned build with --untuned")


def export_verdict(record: dict, tuned_at_export: bool = False, tolerance: float = EXPORT_TOLERANCE,
                   untuned: bool = False) -> dict:
    """The exported library vs the headline's build (``record["speedup"]`` = headline / library).

    ``ok`` unless the 95 % interval lies wholly outside ``1 ± tolerance``: the library is then
    measurably slower (the headline overstates what ships) or faster (it understates it; expected
    only when kernels were tuned at export, which is said, not an error)."""
    s = record.get("speedup") or {}
    if not s:
        return {"ok": False, "direction": "unmeasured", "text": "the library was not measured"}
    low, high = s["ci"]
    ci = f"headline build / library {s['estimate']:.2f}x (95% CI {low:.2f}-{high:.2f})"
    if high < 1 / (1 + tolerance):
        return {"ok": False, "direction": "slower",
                "text": f"the exported library is SLOWER than the build the headline measured: {ci}"}
    if low > 1 + tolerance:
        text = f"the exported library is faster than the build the headline measured: {ci}"
        if tuned_at_export:
            return {"ok": True, "direction": "faster",
                    "text": text + " (kernels tuned at export; the run's headline understates the library)"}
        if untuned:
            return {"ok": True, "direction": "faster",
                    "text": text + " (the untuned build, exported because the run measured it faster)"}
        return {"ok": False, "direction": "faster", "text": text + " (unexpected: the headline is not of this build)"}
    return {"ok": True, "direction": "same", "text": f"as fast as the build the headline measured: {ci}; no "
                                                     f"difference beyond ±{tolerance * 100:.0f}% and the interval"}
