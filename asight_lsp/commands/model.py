"""``asight model FILE [--run R]``: per task of a tuned model, its calls with their bindings and
lines, untuned and tuned latency, share of the tuned kernel time, trials and failures."""
from __future__ import annotations

from .common import add_file_run_options, show


def add_parser(sub):
    p = sub.add_parser("model", help="per task of a tuned Relax model: calls, latency, share, trials")
    add_file_run_options(p, "the asight.model/1 payload")
    p.add_argument("--compare-onnx", metavar="MODEL.onnx", dest="compare_onnx",
                   help="also time the tuned model against onnxruntime on this ONNX file (same inputs, interleaved)")
    p.add_argument("--rounds", type=rounds, default=15,
                   help="interleaved rounds of --compare-onnx, at least 3 for an interval (default 15)")
    return p


def rounds(text: str) -> int:
    """``--rounds``: at least 3 (one round gave a "95% CI 0.83-0.83" of no width)."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 3:
        raise argparse.ArgumentTypeError(f"{value}: at least 3 rounds, so that the ratio has an interval")
    return value


def run(args) -> int:
    from ..engine.client import WorkerClient
    from ..services.profiling import ProfileOptions, profile_file
    from ..services.levers import compare_onnx, run_extra
    from ..views.model import model_view
    from ..store.caches import archived_profiles
    from ..store.runs import Run
    with WorkerClient(args.python, default_timeout=3600) as worker:
        profile = profile_file(args.file, args.func, args.run_ref, args.work_dir, worker,
                               ProfileOptions(by="asight model"))
        run_dir = (profile.get("run") or {}).get("dir")
        kept = [e["profile"] for e in archived_profiles(Run(run_dir))] if run_dir else []
        view = model_view(profile, profile.get("run"), kept, tuning=run_extra(profile.get("run"), args.work_dir))
        if getattr(args, "compare_onnx", None):
            view["compareOnnx"] = compare_onnx(args.file, args.compare_onnx, args.run_ref, args.func, args.work_dir,
                                               worker, rounds=args.rounds)
    return show(view, args.json, render)


def _us(value) -> str:
    """One figure alone (a headline, an interval): µs or ms by its size (``views.text.format_latency``)."""
    from ..views.text import format_latency
    return "-" if value is None else format_latency(value)


def _table_unit(p: dict):
    """The task table's formatter: one unit for every figure of the table (``views.text.table_unit``)."""
    from ..views.text import table_unit
    fmt = table_unit([v for t in p["tasks"] for v in (t.get("untunedUs"), t.get("tunedUs"),
                                                      *(c.get("tunedUs") for c in t["calls"]))])
    return lambda v: "-" if v is None else fmt(v)


def render(p: dict) -> str:
    head = p["headline"]
    build = head.get("build") or {}
    lines = [f"model {p['function']}: untuned {_us(head['untunedUs'])} -> tuned {_us(head['tunedUs'])} end to end"
             + (f" ({head['speedup']:.2f}x)" if head.get("speedup") else ""),
             *([f"build: {'!!! ' if build.get('stale') else ''}{build['text']}"] if build.get("text") else []),
             f"{'task':<34} {'calls':>5} {'untuned':>10} {'tuned':>10} {'share':>6} {'trials':>6} {'failed':>6}"]
    cell = _table_unit(p)
    if not p["tasks"] and not p.get("run"):
        lines.append("(no tasks yet: this model has no tuning run; `asight tune FILE` tunes and lists its tasks, "
                     "this is its untuned time alone)")
    for t in p["tasks"]:
        share = f"{t['share'] * 100:.0f}%" if t["share"] is not None else "-"
        lines.append(f"{t['task']:<34} {len(t['calls']):>5} {cell(t['untunedUs']):>10} {cell(t['tunedUs']):>10} "
                     f"{share:>6} {t['trials'] if t['trials'] is not None else '-':>6} "
                     f"{t['failed'] if t['failed'] is not None else '-':>6}"
                     + _verdict(t))
        for c in t["calls"]:
            where = f"lines {c['lines'][0] + 1}-{c['lines'][1] + 1}" if c.get("lines") else "lines ?"
            lines.append(f"    #{c['call']}: {', '.join(c['bindings'])} ({where}) {cell(c['tunedUs'])}")
    lines += twin_lines(p)
    lines += layout_lines(p)
    lines += outlook_lines(p)
    if p.get("notTimed"):
        lines.append(f"not timed as kernels (VM builtins or folded): {', '.join(p['notTimed'])}")
    if (p.get("measurement") or {}).get("text"):
        lines.append(p["measurement"]["text"])
    lines += [f"note: {n}" for n in p["notes"]]
    lines += onnx_lines(p.get("compareOnnx"))
    return "\n".join(lines) + "\n"


def onnx_lines(c: dict | None) -> list[str]:
    """The tuned model against onnxruntime (``--compare-onnx``)."""
    if not c:
        return []
    tvm_side, ort = c["tuned TVM"], c["onnxruntime"]
    lo, hi = c["ratio"]["ci95"]
    return ["", f"against onnxruntime {(c.get('versions') or {}).get('onnxruntime', '')}: {c['verdict']}",
            f"  tuned TVM    {_us(tvm_side['median_us'])} (p25-p75 {_us(tvm_side['p25_us'])}-{_us(tvm_side['p75_us'])})",
            f"  onnxruntime  {_us(ort['median_us'])} (p25-p75 {_us(ort['p25_us'])}-{_us(ort['p75_us'])})",
            f"  TVM / onnxruntime = {c['ratio']['ratio']:.2f} (95% CI {lo:.2f}-{hi:.2f}); outputs "
            + (f"match (allclose {c.get('tolerance', 1e-3):g})" if c.get("outputs_match") else "DIFFER"),
            f"  how: {c['method']}; load {c['load']['before']:.2f} -> {c['load']['after']:.2f}"
            + (f"; waits for idle threads {c['settled_s']['median'] * 1e3:.0f} ms median, "
               f"{c['settled_s']['max'] * 1e3:.0f} ms at most" if c.get("settled_s") else "")] + \
        [f"  {line}" for line in c.get("levers_refused_text") or []]


def _verdict(t: dict, fmt=_us) -> str:
    if t.get("defaultKept"):
        kept = t["defaultKept"]
        if kept.get("nothingToTune"):
            return f"  default schedule kept (nothing to tune, {fmt(kept['defaultUs'])} re-measured)"
        return (f"  default schedule kept ({fmt(kept['defaultUs'])} vs best trial {fmt(kept['bestTrialUs'])}, "
                f"re-measured)")
    return "  SLOWER than untuned" if t.get("slower") else "  untuned (no trial)" if t["trials"] == 0 else ""


def outlook_lines(p: dict, top: int = 5) -> list[str]:
    """What the next trials are expected to buy per task (analysis/budget.py), largest first."""
    rows = sorted((t for t in p["tasks"] if t.get("nextTrials")), key=lambda t: -t["nextTrials"]["expectedSavingUs"])
    if not rows:
        return []
    out = [f"next trials (budget rule: share of the model x expected gain; {rows[0]['nextTrials']['batch']} "
           f"trials a batch):"]
    for t in rows[:top]:
        n = t["nextTrials"]
        share = f" ({n['expectedSavingShare'] * 100:.1f}% of the model)" if n.get("expectedSavingShare") else ""
        out.append(f"  {t['task']}: ~{_us(n['expectedSavingUs'])} saved{share}; {n['trials']} trials so far, "
                   f"{(n['share'] or 0) * 100:.0f}% of the time while tuning")
    return out


def twin_lines(p: dict) -> list[str]:
    """Which tasks are twins (or siblings) and what the transferred schedules gave."""
    out = []
    for t in p["tasks"]:
        line = twin_describe(t["task"], t["twins"]) if t.get("twins") else None
        if line:
            out.append(f"  {line}")
    return (["twins (same computation, other epilogue) and siblings (same operator, other shapes):"] + out) if out else []


def twin_describe(task: str, entry: dict) -> str | None:
    from ..analysis.twins import describe
    return describe(task, entry)


def layout_lines(p: dict) -> list[str]:
    """Which kernels read weights packed into their schedule's layout (the layout lever, issue 21)."""
    packed = [t["task"] for t in p["tasks"] if t.get("weightsPacked")]
    if not packed:
        return []
    return [f"layout: {len(packed)} of {len(p['tasks'])} kernels read their weights packed into the layout their "
            f"schedule reads, re-laid once when the library is built (weight prepack): {', '.join(packed)}"]
